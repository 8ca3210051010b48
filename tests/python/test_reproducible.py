"""Issue 39: verdicts whose intervals cover the next run.

- plots/stats.py resamples repetitions as units (a hierarchical bootstrap) and widens an
  interval resting on few of them (small_sample_expansion); two repetitions are "not resolved
  here";
- a duet repetition with an overrun window keeps its other pairs (lockline_results);
- `lockline --runs=N` directories: plots/reproduce.py (held_in_runs) and plots/aa_check.py
  (within-run and between-run false-effect rates, Wilson intervals);
- bad --runs values: one `lockline: error:` line, exit 2, nothing created (needs
  LOCKLINE_BINARY; skipped otherwise).

Synthetic data only: no test reads the project's shared data directory.
"""
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "plots"))

import aa_check  # noqa: E402
import reproduce  # noqa: E402
import stats  # noqa: E402
import verdicts  # noqa: E402
from lockline_results import (Point, Run, labelled_duet_pairs, load_runs,  # noqa: E402
                              multi_run_dirs, row_duet_pairs)


def two_level_pairs(true_log, repetitions, pairs_each, between_sd, within_sd, seed):
    """Window pairs (label, A, B, repetition) whose log ratio is true_log + a shift common to
    the repetition (sd between_sd) + the pair's own noise (sd within_sd)."""
    rng = np.random.default_rng(seed)
    out = []
    for r in range(repetitions):
        shift = rng.normal(0.0, between_sd)
        for lr in true_log + shift + rng.normal(0.0, within_sd, pairs_each):
            out.append(("near", 1e6, 1e6 * math.exp(lr), f"rep{r}"))
    return out


# ---- the bootstrap's arithmetic ----------------------------------------------------------------

def test_between_repetition_variance_shows_in_the_interval():
    """Five repetitions of 40 pairs, each repetition shifted by N(0, 4 %) and each pair by
    N(0, 1 %): the interval over repetitions covers the true effect in most data sets, the
    interval treating the 200 pairs as independent rarely does, and is several times
    narrower."""
    true_log = math.log(1.10)
    covered_units = covered_pairs = 0
    widths = []
    for seed in range(30):
        pairs = two_level_pairs(true_log, 5, 40, 0.04, 0.01, seed)
        by_rep = stats.compare_pairs(pairs)
        by_pair = stats.compare_pairs([p[:3] for p in pairs])  # each pair its own unit
        assert by_rep.units == 5 and by_pair.units == 200
        assert by_rep.n_base == by_pair.n_base == 200
        covered_units += by_rep.ci[0] <= 0.10 <= by_rep.ci[1]
        covered_pairs += by_pair.ci[0] <= 0.10 <= by_pair.ci[1]
        widths.append((by_rep.ci[1] - by_rep.ci[0]) / (by_pair.ci[1] - by_pair.ci[0]))
    assert covered_units >= 26, covered_units        # ~95 % nominal
    assert covered_pairs <= 12, covered_pairs        # the old interval: a run's own noise only
    assert np.median(widths) > 3.0


def test_hierarchical_interval_is_deterministic_and_exact_for_identical_values():
    groups = [[0.1, 0.12, 0.09], [0.2, 0.21], [0.15, 0.14, 0.16, 0.13]]
    assert stats.hierarchical_median_interval(groups) == stats.hierarchical_median_interval(
        groups)
    med, lo, hi = stats.hierarchical_median_interval(groups)
    assert lo <= med <= hi and med == pytest.approx(0.14)
    assert stats.hierarchical_median_interval([[0.3, 0.3], [0.3]]) == (0.3, 0.3, 0.3)
    with pytest.raises(ValueError):
        stats.hierarchical_median_interval([[0.1, 0.2]])


def test_few_repetitions_widen_honestly():
    """The expansion factor falls with the number of repetitions (Hesterberg's expanded
    percentile interval); the same between- and within-repetition spread with 3 repetitions
    gives a wider interval than with 8."""
    assert stats.small_sample_expansion(5) == pytest.approx(1.584, abs=0.002)
    assert stats.small_sample_expansion(3) == pytest.approx(2.69, abs=0.01)
    factors = [stats.small_sample_expansion(n) for n in range(2, 40)]
    assert all(a > b for a, b in zip(factors, factors[1:])) and factors[-1] < 1.1
    with pytest.raises(ValueError):
        stats.small_sample_expansion(1)
    c3 = [stats.compare_pairs(two_level_pairs(0.0, 3, 20, 0.03, 0.01, s), resamples=1000)
          for s in range(40)]
    c8 = [stats.compare_pairs(two_level_pairs(0.0, 8, 20, 0.03, 0.01, s), resamples=1000)
          for s in range(40)]
    assert np.median([np.diff(c.ci) for c in c3]) > 1.5 * np.median([np.diff(c.ci) for c in c8])
    # Honest: with 3 repetitions the interval still covers the true 0 about 95 % of the time
    # (the between-repetition spread, 3 %, is 3x the within one).
    assert sum(c.ci[0] <= 0 <= c.ci[1] for c in c3) >= 36


def test_two_repetitions_are_not_resolved_here():
    """Plenty of pairs (60) but two repetitions: no interval, 'not resolved here'."""
    c = stats.compare_pairs(two_level_pairs(math.log(1.3), 2, 30, 0.01, 0.01, 1), "x")
    assert c.status == "too_few" and c.ci is None and not c.resolved
    assert c.units == 2 and c.n_base == 60
    assert "not resolved here: too few repetitions (2" in c.text()
    assert abs(c.effect - 0.3) < 0.05


def test_unpaired_interval_is_widened_for_its_repetitions():
    """compare_samples: the percentile interval of the ratio of medians, widened in log space
    by small_sample_expansion(min repetitions a side)."""
    rng = np.random.default_rng(3)
    base = [("near", float(v)) for v in 100 * (1 + 0.03 * rng.standard_normal(5))]
    variant = [("near", float(v)) for v in 110 * (1 + 0.03 * rng.standard_normal(5))]
    c = stats.compare_samples(base, variant)
    ratio, lo, hi = stats.ratio_interval([v for _, v in base], [v for _, v in variant])
    f = stats.small_sample_expansion(5)
    assert c.units == 5 and c.expansion == pytest.approx(f)
    assert math.log(1 + c.ci[0]) == pytest.approx(math.log(ratio) - f * math.log(ratio / lo))
    assert math.log(1 + c.ci[1]) == pytest.approx(math.log(ratio) + f * math.log(hi / ratio))


def test_pair_effects_between_runs_resample_repetitions():
    """The change of a paired effect between two runs of one build whose repetitions shift by
    4 %: with repetitions named (4-tuples) the interval is several times wider than with the
    pairs as independent samples."""
    a = two_level_pairs(0.05, 5, 30, 0.04, 0.01, 1)
    b = two_level_pairs(0.05, 5, 30, 0.04, 0.01, 2)
    grouped = stats.compare_pair_effects(a, b)
    flat = stats.compare_pair_effects([p[:3] for p in a], [p[:3] for p in b])
    assert grouped.units == 5 and flat.units is None
    assert (grouped.ci[1] - grouped.ci[0]) > 3 * (flat.ci[1] - flat.ci[0])


# ---- overrun pairs -----------------------------------------------------------------------------

def duet_row(pairs, overrun_window=None, flags=False, key="duet/x", rep=0):
    """A raw duet row: 1 warm-up pair, then `pairs` (A, B) pairs in AB order; window
    `overrun_window` (index into the row's windows) overran."""
    sides = ["warmup_a", "warmup_b"] + ["a", "b"] * len(pairs)
    windows = [{"seconds": 0.005, "ops": 100, "overrun": i == overrun_window}
               for i in range(len(sides))]
    rows = [{"a_ops_per_s": a, "b_ops_per_s": b, "order": "ab"} for a, b in pairs]
    if flags:
        for k, r in enumerate(rows):
            r["overrun"] = overrun_window is not None and (overrun_window - 2) // 2 == k
    return {"lockline_key": key, "repetition_index": rep, "windows": windows,
            "overrun": overrun_window is not None,
            "details": {"duet": {"sides": sides, "pairs": rows}}}


@pytest.mark.parametrize("flags", [False, True])
def test_one_overrun_pair_keeps_the_rest(flags):
    """Pair 4 (windows 10, 11) overran: the row keeps 11 of its 12 pairs (with per-pair flags
    from harness/run/runner.cpp MarkOverrunPairs, or derived from windows + sides for older
    files)."""
    pairs = [(1e6, 1.1e6 + k) for k in range(12)]
    row = duet_row(pairs, overrun_window=11, flags=flags)
    kept = row_duet_pairs(row)
    assert len(kept) == 11 and (1e6, 1.1e6 + 4) not in kept
    assert len(row_duet_pairs(duet_row(pairs))) == 12


def test_verdict_keeps_duet_repetitions_with_an_overrun_window():
    """plots/verdicts.py: a duet repetition with one overrun window contributes its other
    pairs (before issue 39 the whole repetition was dropped)."""
    base = {"layout": "lock_before_free_area", "lock": "ticket", "pcp_batch": "31"}
    after = dict(base, layout="lock_after_free_area")
    points = []
    for i, v in enumerate([1.0, 1.5, 0.7, 1.2, 0.9]):
        points.append(Point(family="zone_lock", bench="zone_lock", params=base, threads=2,
                            metrics={"ops_per_s": v * 1e6}, coherence="near", key="zl/b",
                            repetition=i))
        points.append(Point(family="zone_lock", bench="zone_lock", params=after, threads=2,
                            metrics={"ops_per_s": v * 1.1e6}, coherence="near", key="zl/a",
                            repetition=i))
    duet_params = {"of": "zone_lock", "param": "layout", "a": "lock_before_free_area",
                   "b": "lock_after_free_area", "lock": "ticket", "pcp_batch": "31"}
    rng = np.random.default_rng(5)
    for rep in range(5):
        pairs = [(1e6, 1.25e6 * (1 + 0.01 * rng.standard_normal())) for _ in range(12)]
        row = duet_row(pairs, overrun_window=5 if rep < 3 else None, key="duet/zl", rep=rep)
        points.append(Point(family="duet", bench="duet", params=duet_params, threads=2,
                            metrics={"ops_per_s": 1.0}, coherence="near", key="duet/zl",
                            repetition=rep, overrun=rep < 3, row=row))
    run = Run(path="synthetic", context={}, points=points, skipped_rows=[])
    v = [r for r in verdicts.compute_verdicts(run) if r["question"] == "001"][0]
    assert v["method"] == "paired" and v["n_base"] == 60 - 3
    assert v["resolved"] and abs(v["effect"] - 0.25) < 0.02
    assert "in 5 repetitions" in v["text"]


# ---- several runs ------------------------------------------------------------------------------

ZL = {"layout": "lock_before_free_area", "lock": "ticket", "pcp_batch": "31"}


def _rows(seed, effect=0.25, aa=True):
    """The rows of one synthetic run: question 001's zone_lock pair, its duet row, and an A/A
    duet row (a = b)."""
    rng = np.random.default_rng(seed)
    rows = []

    def row(family, params, key, rep, extra):
        r = {"name": key + "/manual_time", "lockline_key": key, "family": family,
             "params": dict(params, threads=2), "run_type": "iteration",
             "repetition_index": rep, "threads": 2, "coherence": {"label": "near"}}
        r.update(extra)
        return r
    after = dict(ZL, layout="lock_after_free_area")
    for rep in range(5):
        v = 1e6 * (1 + 0.05 * rng.standard_normal())
        rows.append(row("zone_lock", ZL, "zone_lock/b/threads:2", rep, {"ops_per_s": v}))
        rows.append(row("zone_lock", after, "zone_lock/a/threads:2", rep,
                        {"ops_per_s": v * (1 + effect)}))
        shift = 0.02 * rng.standard_normal()
        for name, a_param, b_param, eff in (
                ("duet/zl/threads:2", "lock_before_free_area", "lock_after_free_area", effect),
                ("duet/aa/threads:2", "lock_after_free_area", "lock_after_free_area", 0.0)):
            if name.startswith("duet/aa") and not aa:
                continue
            pairs = [{"a_ops_per_s": 1e6, "b_ops_per_s": 1e6 * math.exp(
                math.log1p(eff) + shift + 0.01 * rng.standard_normal()), "order": "ab"}
                for _ in range(12)]
            params = {"of": "zone_lock", "param": "layout", "a": a_param, "b": b_param,
                      "lock": "ticket", "pcp_batch": "31"}
            rows.append(row("duet", params, name, rep,
                            {"ops_per_s": 1.0, "details": {"duet": {"pairs": pairs}}}))
    return rows


def _multi_run_dir(tmp_path, n=3, **kw):
    top = tmp_path / "multi"
    top.mkdir()
    dirs = []
    for k in range(1, n + 1):
        d = top / f"run-{k}"
        d.mkdir()
        (d / "lockline.json").write_text(json.dumps(
            {"context": {"lockline": {"schema_version": 1}}, "benchmarks": _rows(k, **kw)}))
        dirs.append(f"run-{k}")
    (top / "runs.json").write_text(json.dumps({"runs": n, "dirs": dirs,
                                               "exit_status": [0] * n}))
    return top


def test_multi_run_directory_expands_into_its_runs(tmp_path):
    top = _multi_run_dir(tmp_path)
    assert [os.path.basename(d) for d in multi_run_dirs(str(top))] == ["run-1", "run-2",
                                                                       "run-3"]
    assert len(load_runs([str(top)])) == 3
    assert multi_run_dirs(str(top / "run-1")) == []


def test_reproduce_says_in_how_many_runs_each_verdict_held(tmp_path, capsys):
    top = _multi_run_dir(tmp_path)
    assert reproduce.main([str(top)]) == 0
    out = capsys.readouterr().out
    assert "(the same answer in each of the 3 runs alone)" in out
    doc = json.loads((top / "verdicts.json").read_text())
    v = [r for r in doc["verdicts"] if r["question"] == "001"][0]
    assert v["runs"] == 3 and v["held_in_runs"] == 3
    assert [r["run"] for r in v["per_run"]] == ["run-1", "run-2", "run-3"]
    # reproduced: every resolved run's interval holds every other one's effect.
    res = [r for r in v["per_run"] if r["status"] == "resolved"]
    assert v["reproduced"] == all(a["ci"][0] <= b["effect"] <= a["ci"][1]
                                  for a in res for b in res if a is not b)
    assert v["method"] == "paired" and v["n_base"] == 180
    assert "in 15 repetitions" in v["text"]   # repetitions of all runs are the units
    assert doc["runs"] == ["run-1", "run-2", "run-3"]
    for k in (1, 2, 3):
        own = json.loads((top / f"run-{k}" / "verdicts.json").read_text())
        assert "held_in_runs" not in own["verdicts"][0]


def test_reproduce_says_in_words_what_only_the_pooled_runs_resolve():
    """Issue 49: "held in 0 of 3 runs" read as three runs against the answer; the pooled
    verdict and the runs' own speak of resolving."""
    assert reproduce.runs_text(True, 0, 0, 3) == (
        "resolved only when the 3 runs are pooled: no single run resolves it")
    assert reproduce.runs_text(True, 1, 2, 3) == (
        "the same answer in 1 of the 3 runs alone, another in 1, not resolved in 1")
    assert reproduce.runs_text(False, 3, 0, 3) == "not resolved in any of the 3 runs alone either"
    assert reproduce.runs_text(False, 2, 1, 3) == (
        "not resolved when pooled, though 1 of the 3 runs alone resolve it")


def test_runs_are_set_against_each_other_by_regime_latency_not_label():
    """A label ranks regimes within one run: a run that stayed in its 220 ns placement calls it
    "near", another that also saw 30 ns calls it "far"; the two are one state of the machine."""
    near_220 = {"regime": "near", "regime_ns": 221.0}
    assert reproduce.same_regime(near_220, {"regime": "far", "regime_ns": 228.0})
    assert not reproduce.same_regime(near_220, {"regime": "near", "regime_ns": 31.5})
    assert reproduce.same_regime({"regime": "all", "regime_ns": None},
                                 {"regime": "all", "regime_ns": None})
    assert not reproduce.same_regime({"regime": "all", "regime_ns": None}, near_220)


def test_reproduce_says_when_it_pools_an_unfinished_or_emulated_run(tmp_path, capsys):
    """Issue 48: an interrupted or emulated run used to be pooled without a word."""
    top = _multi_run_dir(tmp_path)
    for k, flag in ((2, {"finished": False}), (3, {"emulated": True})):
        path = top / f"run-{k}" / "lockline.json"
        doc = json.loads(path.read_text())
        doc["context"]["lockline"].update(flag)
        path.write_text(json.dumps(doc))
    assert reproduce.main([str(top), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "warning: run-2 did not finish" in err and "warning: run-3 ran emulated" in err
    doc = json.loads((top / "verdicts.json").read_text())
    assert doc["unfinished_runs"] == ["run-2"] and doc["emulated_runs"] == ["run-3"]


def test_reproduce_refuses_a_directory_without_runs(tmp_path, capsys):
    assert reproduce.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("reproduce.py: error: ")


def test_aa_check_reports_between_run_rate_beside_within_run(tmp_path, capsys):
    """Three runs of one build (a --runs directory): the A/A duet rows of each run (within)
    and the keys compared between runs 1 and 2 (between), each rate with its Wilson
    interval."""
    top = _multi_run_dir(tmp_path)
    doc = aa_check.check(load_runs([str(top)]))
    assert doc["within_run"]["comparisons"] == 3          # one A/A duet row per run
    assert doc["between_run"]["comparisons"] == 4         # 4 keys, runs 1 vs 2
    for part in ("within_run", "between_run"):
        c = doc[part]
        if c["with_interval"]:
            lo, hi = c["wilson95"]
            assert 0 <= lo <= c["false_effect_rate"] <= hi <= 1
    assert aa_check.main([str(top)]) == 0
    out = capsys.readouterr().out
    assert "within-run (A/A duet rows of each run): 3 comparisons" in out
    assert "between-run (1 pair(s) of runs of one build): 4 comparisons" in out
    assert "Wilson 95 %" in out


# ---- the binary --------------------------------------------------------------------------------

BINARY = os.environ.get("LOCKLINE_BINARY", "")


@pytest.mark.skipif(not (BINARY and os.access(BINARY, os.X_OK)),
                    reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an executable")
@pytest.mark.parametrize("value", ["0", "21", "x", "-2", "1.5", ""])
def test_bad_runs_value_is_one_error_line_and_exit_2(tmp_path, value):
    out = tmp_path / "never"
    p = subprocess.run([BINARY, "--quick", f"--runs={value}", f"--out={out}"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lockline: error: "), p.stderr
    assert "--runs" in lines[0]
    if value:
        assert f"--runs={value}" in lines[0] and "1 to 20" in lines[0]
    assert not out.exists() and p.stdout == ""


def test_paired_regime_is_the_one_with_most_repetitions():
    """One near repetition of 64 pairs against three far repetitions of 12: the far regime is
    used (repetitions are the units), not the one holding most pairs."""
    near = [("near", 1e6, 1.2e6, "r0")] * 64
    far = [("far", 1e6, 1.1e6 * (1 + 0.001 * k), f"r{1 + k % 3}") for k in range(36)]
    c = stats.compare_pairs(near + far)
    assert c.regime == "far" and c.units == 3 and c.n_base == 36 and c.dropped == 64


@pytest.mark.skipif(not (BINARY and os.access(BINARY, os.X_OK)),
                    reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an executable")
def test_runs_share_their_calibrations(tmp_path):
    """--runs=2: the second run reads the first run's per-process calibrations from
    RUN_DIR/calibration/, so both time the same work_ns:cal work (without it three runs here
    calibrated 1502 / 1655 / 1547 ns per page and every such row moved ~9 % between runs)."""
    out = tmp_path / "runs"
    p = subprocess.run([BINARY, "--quick", "--runs=2", "--benchmark_repetitions=1",
                        "--benchmark_filter=^zone_lock/layout:lock_after_free_area/lock:ticket/"
                        "pcp_batch:31/.*work_ns:cal/threads:1$", f"--out={out}"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "runs.json").read_text())
    assert doc["shared_calibration"] == str(out / "calibration")
    assert (out / "calibration" / "fault_ns_per_page").is_file()
    work = []
    for k in (1, 2):
        rows = json.loads((out / f"run-{k}" / "lockline.json").read_text())["benchmarks"]
        cal = [r["details"]["work"]["work_ns"] for r in rows
               if "work_ns:cal" in r.get("name", "") and "work" in r.get("details", {})]
        assert cal, f"run-{k} has no work_ns:cal row"
        work.append(cal[0])
    assert work[0] == work[1]


@pytest.mark.skipif(not (BINARY and os.access(BINARY, os.X_OK)),
                    reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an executable")
def test_a_killed_runs_parent_leaves_no_run_measuring(tmp_path):
    """Issue 48 S7: SIGKILL to the --runs parent left its current child run going."""
    out = tmp_path / "runs"
    parent = subprocess.Popen(
        [BINARY, "--quick", "--runs=2", "--window=1s", "--benchmark_repetitions=20",
         "--benchmark_filter=^locks/lock:ticket/cs:0/stats:off/threads:1$", f"--out={out}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children_file = f"/proc/{parent.pid}/task/{parent.pid}/children"
    child = 0
    for _ in range(300):
        try:
            kids = open(children_file).read().split()
        except OSError:
            kids = []
        if kids:
            child = int(kids[0])
            break
        time.sleep(0.1)
    assert child, "the --runs parent started no child run"
    parent.kill()
    parent.wait(timeout=30)
    for _ in range(100):
        try:
            state = open(f"/proc/{child}/stat").read().split(")")[-1].split()[0]
        except OSError:
            break  # gone
        if state == "Z":
            break
        time.sleep(0.1)
    else:
        os.kill(child, 9)
        pytest.fail("the child run kept measuring after its --runs parent was killed")
