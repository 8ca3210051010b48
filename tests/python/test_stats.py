"""Tests of plots/stats.py and plots/verdicts.py on synthetic data with known effects (issue 15's
"Done when"), of verdicts.json's contract, and of the tools' handling of hostile result files
and planted symlinks (issue 14)."""

import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PLOTS = os.path.join(ROOT, "plots")
COMPARE = os.path.join(ROOT, "ci", "compare.py")
RUN_B = os.path.join(HERE, "fixtures", "plots", "run_b", "lockline.json")
sys.path.insert(0, PLOTS)

import stats  # noqa: E402
import verdicts  # noqa: E402
import lockline_results as lr  # noqa: E402

PYTHON = "/usr/bin/python3"


def noisy(center, n, cv, seed, label="near"):
    """n (label, value) repetitions around `center` with relative noise `cv` (fixed seed)."""
    rng = np.random.default_rng(seed)
    return [(label, float(v)) for v in center * (1 + cv * rng.standard_normal(n))]


# ---- the known effects -----------------------------------------------------------------

def test_ten_percent_effect_with_nine_clean_repetitions_is_resolved():
    """+10 % with 2 % noise, 9 repetitions a side: resolved, interval contains +10 %."""
    for seed in range(5):
        c = stats.compare_samples(noisy(100.0, 9, 0.02, seed), noisy(110.0, 9, 0.02, seed + 100),
                                  "variant")
        assert c.status == "resolved" and c.resolved, c.text()
        assert c.ci[0] <= 0.10 <= c.ci[1], c.text()
        assert c.ci[0] > 0 and c.n_base == c.n_variant == 9 and c.dropped == 0
        assert c.regime == "near"
        assert c.text().startswith("variant: +")
        assert "9 near-regime repetitions a side" in c.text()


def test_half_the_repetitions_in_a_slower_regime_resolved_from_one_regime():
    """The same +10 %, but 4 of each side's 9 repetitions ran 4x slower in the far regime:
    resolved from the near regime alone (pooling would give an interval across 0)."""
    base = noisy(100.0, 5, 0.02, 1) + noisy(25.0, 4, 0.02, 2, "far")
    variant = noisy(110.0, 5, 0.02, 3) + noisy(27.5, 4, 0.02, 4, "far")
    c = stats.compare_samples(base, variant, "variant")
    assert c.resolved and c.regime == "near", c.text()
    assert c.n_base == c.n_variant == 5 and c.dropped == 8
    assert c.ci[0] <= 0.10 <= c.ci[1] and c.ci[0] > 0
    # Mixed the other way (the far regime holds most): still one regime, 5 a side.
    base = noisy(100.0, 4, 0.02, 5) + noisy(25.0, 5, 0.02, 6, "far")
    variant = noisy(110.0, 4, 0.02, 7) + noisy(27.5, 5, 0.02, 8, "far")
    c = stats.compare_samples(base, variant)
    assert c.regime == "far" and c.resolved and c.ci[0] <= 0.10 <= c.ci[1]
    # Pooled, the regimes would swamp the effect:
    pooled = stats.compare_samples([("", v) for _, v in base], [("", v) for _, v in variant])
    assert pooled.regime == "" and pooled.n_base == 9
    assert pooled.ci[1] - pooled.ci[0] > 0.5


def test_pure_noise_pair_is_not_resolved():
    """Two draws of the same noisy distribution (15 % CV): the interval spans 0 and is wider
    than the minimum effect: 'not resolved on this machine'."""
    c = stats.compare_samples(noisy(100.0, 9, 0.15, 11), noisy(100.0, 9, 0.15, 12), "x")
    assert c.status == "not_resolved" and not c.resolved
    assert c.ci[0] < 0 < c.ci[1]
    assert "not resolved on this machine: interval [" in c.text() and "spans 0" in c.text()


def test_too_few_same_regime_repetitions():
    """2 near repetitions of 9 on one side: too few, with the counts in the text."""
    base = noisy(100.0, 2, 0.02, 1) + noisy(25.0, 7, 0.02, 2, "far")
    variant = noisy(110.0, 9, 0.02, 3)
    c = stats.compare_samples(base, variant, "x")
    assert c.status == "too_few" and not c.resolved and c.ci is None
    assert "too few same-regime repetitions (2 of 9 in the near regime" in c.text()


def test_quiet_null_effect_is_resolved_as_no_effect():
    """Identical quiet variants: the interval is narrower than 5 %: resolved, 'no effect'."""
    c = stats.compare_samples(noisy(100.0, 9, 0.01, 1), noisy(100.0, 9, 0.01, 2), "x")
    assert c.resolved and not c.excludes_zero
    assert "no effect of 5 % or more" in c.text()


def test_bootstrap_is_deterministic():
    """The same data always gives the same interval (fixed seed)."""
    b, v = [x for _, x in noisy(100.0, 7, 0.05, 1)], [x for _, x in noisy(103.0, 7, 0.05, 2)]
    assert stats.ratio_interval(b, v) == stats.ratio_interval(b, v)


def test_unlabelled_rows_are_pooled_and_regime_order():
    """`none` / `unknown` / no label: all repetitions; regimes sort near < far < regime3 (the
    harness's latency ranks)."""
    choice = stats.select_regime([("none", 1.0)] * 4, [("unknown", 2.0)] * 4)
    assert choice.regime == "" and len(choice.base) == 4 and choice.dropped == 0
    assert sorted(["regime3", "far", "near", "shifted", "baseline"], key=stats.regime_rank) == \
        ["near", "baseline", "far", "regime3", "shifted"]
    assert stats.majority_regime(["far", "near", "far", "none"]) == "far"
    assert stats.majority_regime(["far", "near"]) == "near"


def test_aggregate_stddev_converted_to_throughput_spread():
    """Delta method: 1 / t with sd(t) -> sd(1/t) = sd(t) / t^2, never 1 / sd(t)."""
    mean, sd = stats.stddev_from_aggregate(2.0, 0.1)
    assert mean == pytest.approx(0.5) and sd == pytest.approx(0.025)


# ---- verdicts.json ------------------------------------------------------------------------------

def _row(key, family, params, rep, value, label):
    name = key + "/iterations:3/manual_time"
    return {"name": name, "run_name": name, "run_type": "iteration", "repetition_index": rep,
            "threads": params["threads"], "iterations": 3, "real_time": 5e7, "time_unit": "ns",
            "ops_per_s": value, "lockline_key": key, "family": family,
            "params": {k: v for k, v in params.items()},
            "coherence": {"label": label, "regime_ns": 32.0 if label == "near" else 156.0}}


def synthetic_zone_run(tmp_path, effect=0.10, reps=9, far=4):
    """A run directory with zone_lock before/after free_area at 2 threads (ticket), `far` of
    each side's repetitions 4x slower in the far regime."""
    rows = []
    rng = np.random.default_rng(7)
    for layout, scale in (("lock_before_free_area", 1.0), ("lock_after_free_area", 1 + effect)):
        key = f"zone_lock/layout:{layout}/lock:ticket/pcp_batch:0/line:64/threads:2"
        params = {"layout": layout, "lock": "ticket", "pcp_batch": 0, "line": 64, "threads": 2}
        for rep in range(reps):
            label = "far" if rep < far else "near"
            value = 3e7 * scale * (1 + 0.02 * rng.standard_normal()) / (4 if label == "far" else 1)
            rows.append(_row(key, "zone_lock", params, rep, value, label))
    doc = {"context": {"host_name": "synthetic", "lockline": {"finished": True}},
           "benchmarks": rows}
    (tmp_path / "lockline.json").write_text(json.dumps(doc))
    return tmp_path


def test_verdicts_json_follows_the_contract(tmp_path):
    """plots/verdicts.py RUN_DIR writes the contract's object; the effect is resolved from the
    near regime; a verdict line is printed."""
    run_dir = synthetic_zone_run(tmp_path)
    p = subprocess.run([PYTHON, os.path.join(PLOTS, "verdicts.py"), str(run_dir)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads((run_dir / "verdicts.json").read_text())
    assert doc["schema"] == 1 and doc["min_effect"] == 0.05
    (v,) = doc["verdicts"]
    for field in ("question", "comparison", "metric", "base_key", "variant_key", "effect", "ci",
                  "regime", "n_base", "n_variant", "dropped", "resolved", "status", "text"):
        assert field in v, field
    assert v["question"] == "001" and v["metric"] == "ops_per_s"
    # The rows are pcp_batch:0, not the preferred 4.0 path (31): the text says so.
    assert v["comparison"] == ("lock after free_area (a368ab67aa55, v4.0) vs lock before "
                               "free_area (3484b2de9499, v3.16-v3.19) (lock:ticket, pcp_batch:0, threads:2)")
    assert v["base_key"].startswith("zone_lock/layout:lock_before_free_area/")
    assert v["variant_key"].startswith("zone_lock/layout:lock_after_free_area/")
    assert v["regime"] == "near" and v["n_base"] == v["n_variant"] == 5 and v["dropped"] == 8
    assert v["resolved"] is True and v["status"] == "resolved"
    assert v["ci"][0] <= 0.10 <= v["ci"][1]
    assert v["text"] in p.stdout and "1 of 1 comparisons resolved" in p.stdout


def test_zone_lock_verdict_per_work_ns_from_uninstrumented_rows(tmp_path):
    """Question 001 gives one verdict per work_ns, work_ns:cal (the answer) first and
    work_ns:0 labelled saturated, from the uninstrumented twins (stats:off, issue 40 item 3):
    at work_ns:0 the twins (here with an opposite effect) are the verdict's rows and the
    instrumented rows only its evidence; at work_ns:cal, where this run has no twins, the
    verdict comes from the instrumented rows and says so."""
    rows = []
    rng = np.random.default_rng(3)
    base = "lock:ticket/pcp_batch:31/line:64/config:cma/zones:1"
    for work, stats_off, effect in (("cal", False, 0.02), ("0", False, 0.10),
                                    ("0", True, -0.30)):
        for layout, scale in (("lock_before_free_area", 1.0),
                              ("lock_after_free_area", 1 + effect)):
            tail = f"work_ns:{work}" + ("/stats:off" if stats_off else "")
            key = f"zone_lock/layout:{layout}/{base}/{tail}/threads:2"
            params = {"layout": layout, "lock": "ticket", "pcp_batch": "31", "line": "64",
                      "config": "cma", "zones": "1", "work_ns": work, "threads": 2}
            if stats_off:
                params["stats"] = "off"
            for rep in range(6):
                value = 3e7 * scale * (1 + 0.01 * rng.standard_normal())
                rows.append(_row(key, "zone_lock", params, rep, value, "near"))
    doc = {"context": {"host_name": "synthetic", "lockline": {"finished": True}},
           "benchmarks": rows}
    (tmp_path / "lockline.json").write_text(json.dumps(doc))
    path, doc = verdicts.write_verdicts(str(tmp_path))
    got = [v for v in doc["verdicts"] if v["id"].startswith("zone_lock_after_before[")]
    assert [v["id"] for v in got] == ["zone_lock_after_before[lock:ticket work_ns:cal]",
                                      "zone_lock_after_before[lock:ticket work_ns:0]"]
    cal, sat = got
    assert "/work_ns:cal/threads:2" in cal["base_key"] and "saturated" not in cal["comparison"]
    assert "work_ns:0 (saturated" in sat["comparison"]
    assert sat["base_key"].endswith("/stats:off/threads:2")
    assert sat["variant_key"].endswith("/stats:off/threads:2")
    assert sat["instrumented"] is False and sat["ci"][0] <= -0.30 <= sat["ci"][1]
    ev = sat["evidence"]
    assert ev["base_key"] == sat["base_key"].replace("/stats:off", "")
    assert ev["instrumented_ci"][0] <= 0.10 <= ev["instrumented_ci"][1]
    assert "stats:off" not in cal["base_key"] and cal["instrumented"] is True
    assert cal["text"].startswith("from instrumented rows") and cal["evidence"] is None
    assert cal["ci"][0] <= 0.02 <= cal["ci"][1]


def test_verdicts_unresolved_and_bad_input(tmp_path):
    """Too few near repetitions: resolved false (what --until-resolved re-runs); a missing
    directory: exit 2, one line."""
    run_dir = synthetic_zone_run(tmp_path, reps=5, far=3)
    path, doc = verdicts.write_verdicts(str(run_dir))
    (v,) = doc["verdicts"]
    assert v["status"] == "too_few" and v["resolved"] is False and v["ci"] is None
    p = subprocess.run([PYTHON, os.path.join(PLOTS, "verdicts.py"), str(tmp_path / "nope")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert p.stderr.startswith("verdicts.py: error:")


def test_every_question_has_a_comparison():
    """COMPARISONS covers the five seed questions, and each maps to a report section."""
    assert {c.question for c in verdicts.COMPARISONS} == {"000", "001", "002", "003", "004"}
    assert set(verdicts.QUESTION_SECTION) == {"000", "001", "002", "003", "004"}


# ---- hostile result files (issue 14) ------------------------------------------------------------

def hostile_files(tmp_path):
    """(name, path) of the three hostile variants of a real-shaped lockline file."""
    base = json.load(open(RUN_B))
    out = []
    d = copy.deepcopy(base)
    d["benchmarks"][0]["ops_per_s"] = int("9" * 400)
    out.append(("bigint", json.dumps(d), "integer of 400 digits"))
    d = copy.deepcopy(base)
    d["benchmarks"][1]["lockline_key"] = ["zone_lock"]
    out.append(("list", json.dumps(d), "lockline_key is a list, expected a string"))
    text = json.dumps(base).replace('"benchmarks": [', '"benchmarks": [' + "[" * 100000
                                    + "]" * 100000 + ",", 1)
    out.append(("nested", text, "nested deeper than"))
    files = []
    for name, content, message in out:
        run_dir = tmp_path / name
        run_dir.mkdir()
        (run_dir / "lockline.json").write_text(content)
        files.append((name, run_dir, message))
    return files


def test_hostile_files_give_one_error_line_and_exit_2(tmp_path):
    """A 400-digit integer, a list where a string belongs, deeply nested arrays: plot.py,
    report.py, verdicts.py and compare.py each print one error line naming the problem and exit
    2, with no traceback and nothing written."""
    for name, run_dir, message in hostile_files(tmp_path):
        f = str(run_dir / "lockline.json")
        for tool, args in (("plot.py", [os.path.join(PLOTS, "plot.py"), f, "-o",
                                        str(run_dir / "out")]),
                           ("report.py", [os.path.join(PLOTS, "report.py"), str(run_dir)]),
                           ("verdicts.py", [os.path.join(PLOTS, "verdicts.py"), str(run_dir)]),
                           ("compare.py", [COMPARE, f, f])):
            p = subprocess.run([PYTHON, *args], capture_output=True, text=True, timeout=120)
            assert p.returncode == 2, (name, tool, p.stderr[-500:])
            lines = p.stderr.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in p.stderr, (name, tool, p.stderr[-500:])
            assert lines[0].startswith(f"{tool}: error:") and message in lines[0], lines[0]
        assert sorted(os.listdir(run_dir)) == ["lockline.json"], name


def test_reader_error_not_exception():
    """The reader raises ResultError, never OverflowError/RecursionError, on such text."""
    assert lr._number(10 ** 400) is None


def test_planted_symlinks_are_replaced_not_followed(tmp_path):
    """report.html, report.html.tmp, verdicts.json and a plot file planted as symlinks to files
    outside the run directory: the targets stay untouched, real files take the links' place."""
    import report
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "lockline.json").write_text(open(RUN_B).read())
    outside = tmp_path / "outside"
    outside.mkdir()
    (run_dir / "plots").mkdir()
    links = {"report.html": "a", "report.html.tmp": "b", "verdicts.json": "c",
             "plots/zone_lock.png": "d", "plots/zone_lock.csv": "e"}
    for name, target in links.items():
        (outside / target).write_text("precious")
        os.symlink(outside / target, run_dir / name)
    assert report.main([str(run_dir)]) == 0
    for target in links.values():
        assert (outside / target).read_text() == "precious"
    for name in ("report.html", "verdicts.json", "plots/zone_lock.png", "plots/zone_lock.csv"):
        assert not os.path.islink(run_dir / name) and (run_dir / name).stat().st_size > 0, name
    assert not any(n.endswith(".tmp") and n.startswith(".")
                   for n in os.listdir(run_dir) + os.listdir(run_dir / "plots"))


def test_symlinked_plot_directory_is_refused(tmp_path, capsys):
    """A plots/ directory that is a symlink out of the run directory: exit 2, nothing written."""
    import report
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "lockline.json").write_text(open(RUN_B).read())
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, run_dir / "plots")
    assert report.main([str(run_dir)]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert os.listdir(outside) == []


def test_mixed_repetitions_are_dropped_never_pooled():
    """A repetition labelled `mixed` (its probes fell in two regimes) is dropped; when every
    labelled repetition is mixed the comparison has too few, never a pooled interval."""
    base = noisy(100.0, 5, 0.02, 11) + noisy(50.0, 3, 0.02, 12, "mixed")
    variant = noisy(110.0, 5, 0.02, 13) + noisy(55.0, 3, 0.02, 14, "mixed")
    c = stats.compare_samples(base, variant, "variant")
    assert c.regime == "near" and c.n_base == c.n_variant == 5 and c.dropped == 6
    c = stats.compare_samples(noisy(100.0, 6, 0.02, 15, "mixed"),
                              noisy(110.0, 6, 0.02, 16, "mixed"), "variant")
    assert c.status == "too_few" and c.n_base == 0


def test_regime_rank_follows_the_harness_numbering():
    """harness/measure/coherence.h ranks regimes by latency: near (1), far (2), regime3, ..."""
    order = sorted(["regime4", "far", "regime3", "near"], key=stats.regime_rank)
    assert order == ["near", "far", "regime3", "regime4"]
