"""Paired windows (bench/duet.cpp, harness/measure/duet.h): the paired effect of plots/stats.py and
its use by plots/verdicts.py. Synthetic pairs with known effects; no timing."""

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "plots"))

import stats  # noqa: E402
import verdicts  # noqa: E402
from lockline_results import Point, Run, duet_pairs  # noqa: E402


def _pairs(ratio, n, noise, seed, label="near", common=0.6):
    """n window pairs whose B/A is `ratio` times lognormal noise of sd `noise`, on top of a
    common per-pair level that swings both sides (sd `common`: the regime/clock changes
    paired windows cancel)."""
    rng = np.random.default_rng(seed)
    level = np.exp(rng.normal(0, common, n)) * 1e6
    a = level * np.exp(rng.normal(0, noise, n))
    b = level * ratio * np.exp(rng.normal(0, noise, n))
    return [(label, float(x), float(y)) for x, y in zip(a, b)]


def test_known_effect_is_recovered_with_an_interval():
    c = stats.compare_pairs(_pairs(1.2, 60, 0.03, 1))
    assert c.method == "paired"
    assert c.resolved and c.excludes_zero
    assert abs(c.effect - 0.2) < 0.02
    assert c.ci[0] < 0.2 < c.ci[1]
    assert c.n_base == c.n_variant == 60
    assert "window pairs (paired windows)" in c.text()


def test_common_swings_cancel_where_unpaired_repetitions_do_not():
    pairs = _pairs(1.1, 60, 0.02, 2, common=0.8)
    paired = stats.compare_pairs(pairs)
    unpaired = stats.compare_samples([(lab, a) for lab, a, _ in pairs],
                                     [(lab, b) for lab, _, b in pairs])
    width = lambda c: c.ci[1] - c.ci[0]
    assert paired.resolved and paired.excludes_zero
    assert width(paired) * 3 < width(unpaired)


def test_equal_sides_resolve_as_no_effect_within_min_effect():
    c = stats.compare_pairs(_pairs(1.0, 60, 0.02, 3))
    assert c.resolved and not c.excludes_zero
    assert -stats.MIN_EFFECT < c.ci[0] and c.ci[1] < stats.MIN_EFFECT
    assert "no effect of 5 % or more" in c.text()


def test_a_a_false_effect_rate_is_near_the_nominal_five_percent():
    # 400 A/A comparisons of 60 pairs: the interval excludes 0 in about 5 % of them.
    false = sum(stats.compare_pairs(_pairs(1.0, 60, 0.05, 100 + i), resamples=1000).excludes_zero
                for i in range(400))
    assert false / 400 <= 0.08


def test_one_regime_is_used_and_mixed_repetitions_are_dropped():
    pairs = (_pairs(1.2, 30, 0.02, 4, "near") + _pairs(0.8, 10, 0.02, 5, "far")
             + _pairs(3.0, 10, 0.02, 6, "mixed"))
    c = stats.compare_pairs(pairs)
    assert c.regime == "near" and c.n_base == 30 and c.dropped == 20
    assert abs(c.effect - 0.2) < 0.03


def test_too_few_pairs_and_bad_windows():
    c = stats.compare_pairs(_pairs(1.2, stats.MIN_PAIRS - 1, 0.02, 7))
    assert c.status == "too_few" and c.ci is None
    assert "too few window pairs" in c.text()
    bad = [("near", 0.0, 1.0), ("near", float("nan"), 1.0), ("near", 1.0, -1.0)]
    assert stats.compare_pairs(bad + _pairs(1.2, 20, 0.02, 8)).n_base == 20


def test_is_resolved_is_the_one_rule():
    assert stats.is_resolved((0.01, 0.2))
    assert stats.is_resolved((-0.2, -0.01))
    assert stats.is_resolved((-0.049, 0.049))
    assert not stats.is_resolved((-0.049, 0.051))


def _point(bench, params, threads, metrics, key, label="near", row=None, repetition=0):
    return Point(family=bench, bench=bench, params=params, threads=threads, metrics=metrics,
                 coherence=label, key=key, row=row or {}, repetition=repetition)


def _run_with_duet():
    points = []
    base = {"layout": "lock_before_free_area", "lock": "ticket", "pcp_batch": "31"}
    after = dict(base, layout="lock_after_free_area")
    for i, v in enumerate([1.0, 1.5, 0.7, 1.2, 0.9]):
        points.append(_point("zone_lock", base, 2, {"ops_per_s": v * 1e6}, "zl/b", "near"))
        points.append(_point("zone_lock", after, 2, {"ops_per_s": v * 1.1e6}, "zl/a", "near"))
    duet_params = {"of": "zone_lock", "param": "layout", "a": "lock_before_free_area",
                   "b": "lock_after_free_area", "lock": "ticket", "pcp_batch": "31"}
    for rep in range(5):
        pairs = [{"a_ops_per_s": a, "b_ops_per_s": b, "order": "ab"}
                 for _, a, b in _pairs(1.25, 12, 0.02, 50 + rep)]
        points.append(_point("duet", duet_params, 2, {"ops_per_s": 1.0}, "duet/zl", "near",
                             {"details": {"duet": {"pairs": pairs}}}, repetition=rep))
    return Run(path="synthetic", context={}, points=points, skipped_rows=[])


def test_verdict_uses_the_paired_rows_and_names_the_method():
    run = _run_with_duet()
    assert len(duet_pairs(run.points[-1])) == 12
    v = [r for r in verdicts.compute_verdicts(run) if r["question"] == "001"]
    assert len(v) == 1
    v = v[0]
    assert v["method"] == "paired"
    assert v["duet_key"] == "duet/zl"
    assert abs(v["effect"] - 0.25) < 0.03 and v["resolved"]
    assert v["n_base"] == 60
    # The unpaired effect of the repetitions is kept for reference only.
    assert abs(v["unpaired"]["effect"] - 0.1) < 1e-9
    assert "paired windows" in v["text"]


def test_verdict_without_duet_rows_is_unpaired():
    run = _run_with_duet()
    run.points = [p for p in run.points if p.bench != "duet"]
    v = [r for r in verdicts.compute_verdicts(run) if r["question"] == "001"][0]
    assert v["method"] == "unpaired" and "duet_key" not in v
    assert math.isclose(v["effect"], 0.1)


def test_duet_check_compares_like_with_like():
    """Issue 49: both of duet_check's intervals take the repetition as the unit and the same
    widening, so their ratio is what pairing buys; the unpaired one counted every window as
    independent and read narrower than the paired (0.4-0.9x)."""
    import duet_check
    doc = duet_check.check(_run_with_duet())
    row = doc["series"][0]
    p, u = row["paired"], row["unpaired"]
    assert row["key"] == "duet/zl" and p["ci"] and u["ci"]
    assert abs(u["effect"] - 0.25) < 0.3 and u["ci"][0] < 0.25 < u["ci"][1]
    assert row["narrower"] > 3 and doc["median_narrower"] == row["narrower"]
    # Without swings common to a pair, pairing buys about sqrt(2) at most, never 3x.
    run = _run_with_duet()
    for point in run.points:
        if point.bench == "duet":
            point.row["details"]["duet"]["pairs"] = [
                {"a_ops_per_s": a, "b_ops_per_s": b, "order": "ab"}
                for _, a, b in _pairs(1.25, 12, 0.02, 70 + point.repetition, common=0.0)]
    assert duet_check.check(run)["series"][0]["narrower"] < 2
