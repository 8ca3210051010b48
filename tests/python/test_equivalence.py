"""Issue 24, "the regression check decides equality": ci/compare.py's equivalence answer ("no
change larger than T %"), identical repetitions matched one to one, duet rows compared by the
change of their paired effect, and plots/aa_check.py's A/A count.

The recorded run is tests/python/fixtures/consistency/vm-default (a real --quick run of the
2-vCPU VM, README there); everything else is synthetic, made here with fixed seeds. No timing:
every test is deterministic and takes a few seconds at most.
"""

import gzip
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import numpy as np

SOURCE_DIR = os.environ.get(
    "LOCKLINE_SOURCE_DIR",
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
COMPARE = os.path.join(SOURCE_DIR, "ci", "compare.py")
AA_CHECK = os.path.join(SOURCE_DIR, "plots", "aa_check.py")
RECORDED = os.path.join(SOURCE_DIR, "tests", "python", "fixtures", "consistency", "vm-default",
                        "lockline.json.gz")
PYTHON = "/usr/bin/python3"

sys.path.insert(0, os.path.join(SOURCE_DIR, "plots"))
import stats  # noqa: E402
import aa_check  # noqa: E402
from lockline_results import load_runs  # noqa: E402

_spec = importlib.util.spec_from_file_location("lockline_compare_eq", COMPARE)
compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare)


def run_cli(*args):
    """compare.py in a subprocess: (exit code, stdout, stderr)."""
    p = subprocess.run([PYTHON, COMPARE, *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def recorded_run(tmp_path, name="run"):
    """The recorded VM run, unpacked into tmp_path/name/lockline.json."""
    out = tmp_path / name
    out.mkdir()
    with gzip.open(RECORDED, "rb") as src, open(out / "lockline.json", "wb") as dst:
        shutil.copyfileobj(src, dst)
    return str(out)


# ---- synthetic lockline runs ----------------------------------------------------------------


CONTEXT = {"host_name": "synthetic", "num_cpus": 2,
           "lockline": {"finished": True, "versions": {"google_benchmark": "1.7.1"}}}


def _row(key, family, params, rep, reps, ops, label="near", extra=None):
    """One repetition in lockline's row format (results/SCHEMA.md), trimmed."""
    name = f"{key}/iterations:3/manual_time"
    row = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": reps,
           "repetition_index": rep, "threads": params["threads"], "iterations": 3,
           "lockline_key": key, "family": family, "params": params, "ops_per_s": ops,
           "real_time": 1e9 / ops, "cpu_time": 1e9 / ops, "time_unit": "ns",
           "coherence": {"label": label}, "overrun": False}
    row.update(extra or {})
    return row


def plain_rows(key, level, cv, reps, rng, label="near"):
    """`reps` repetitions of an ordinary (unpaired) point: ops/s level x (1 + cv x N(0, 1))."""
    family = key.split("/")[0]
    params = {"threads": int(key.rsplit(":", 1)[1])}
    return [_row(key, family, params, i, reps, float(level * (1 + cv * rng.normal())), label)
            for i in range(reps)]


DUET_KEY = ("duet/of:zone_lock/param:layout/a:lock_before_free_area/b:lock_after_free_area/"
            "lock:ticket/threads:2")
AA_DUET_KEY = "duet/of:locks/param:lock/a:ticket/b:ticket/cs:0/threads:1"


def duet_rows(key, ratio, rng, reps=5, pairs=12, noise=0.02, common=0.5, label="near"):
    """A duet row's repetitions: per window pair a common level that swings both sides
    (lognormal, sd `common`: the machine's state, which pairing cancels) and B = A x ratio x
    lognormal noise of sd `noise`."""
    head = dict(p.split(":", 1) for p in key.split("/")[1:])
    params = dict(head, threads=int(head.pop("threads")))
    out = []
    for i in range(reps):
        level = np.exp(rng.normal(0, common, pairs)) * 1e6
        a = level * np.exp(rng.normal(0, noise, pairs))
        b = level * ratio * np.exp(rng.normal(0, noise, pairs))
        window_pairs = [{"a_ops_per_s": float(x), "b_ops_per_s": float(y), "order": "ab"}
                        for x, y in zip(a, b)]
        out.append(_row(key, "duet", params, i, reps, float(np.mean(a + b)), label, {
            "a_ops_per_s": float(np.mean(a)), "b_ops_per_s": float(np.mean(b)),
            "pair_ratio": float(np.median(b / a)),
            "details": {"duet": {"pairs": window_pairs}}}))
    return out


def write_run(path, rows):
    """A run directory holding lockline.json with `rows`."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "lockline.json"), "w") as f:
        json.dump({"context": CONTEXT, "benchmarks": rows}, f)
    return str(path)


def rows_of(result):
    return {(r["key"], r["metric"]): r for r in result["rows"]}


# ---- 1. a run compared with itself ----------------------------------------------------------


def test_recorded_run_against_itself_is_no_change_larger_than_5pct(tmp_path):
    """The recorded VM run against itself (and against a copy of it): exit 0, every comparable
    row 'no change larger than 5 %' with an interval of exactly [0, 0], with the default
    repetitions (5, some rows fewer after overrun windows or regime selection)."""
    run = recorded_run(tmp_path)
    code, out, err = run_cli(run, run)
    assert code == 0, err
    lines = out.splitlines()
    table = [ln for ln in lines[1:] if not ln.startswith(("note:", "warning:", "rule:",
                                                          "equivalence:"))][:-1]
    assert len(table) == 49
    assert all("no change larger than 5 %" in ln for ln in table)
    assert not any("undecided" in ln for ln in table) and "rerun with" not in out + err
    assert lines[-1] == "0 regressions, 0 improvements, 49 no change, 0 undecided (of 49 rows " \
                        "compared)"
    assert lines[-2].startswith("equivalence: 49 of 49 rows compared show no change larger "
                                "than 5 %")
    copy = recorded_run(tmp_path, "copy")
    code, out, err = run_cli(run, copy, "--format", "json")
    assert code == 0, err
    result = json.loads(out)
    assert result["summary"]["equivalent"] == result["summary"]["rows_compared"] == 49
    for r in result["rows"]:
        assert r["verdict"] == "no change" and r["answer"] == "no change larger than 5 %"
        assert r["method"] == "matched" and r["exact"] and r["ci_pct"] == [0.0, 0.0]
        assert r["change_pct"] == 0.0 and r["p_value"] == 1.0


def test_matched_rows_are_only_identical_rows(tmp_path):
    """Two runs with equal values but one field different per row are not the same
    measurement: the unpaired path (a genuinely different run is never paired)."""
    rng = np.random.default_rng(1)
    rows = plain_rows("locks/lock:ticket/threads:1", 1e7, 0.03, 5, rng)
    a = write_run(tmp_path / "a", rows)
    other = [dict(r, cpu_time=r["cpu_time"] * 1.001) for r in rows]
    b = write_run(tmp_path / "b", other)
    code, out, _ = run_cli(a, b, "--format", "json")
    row = json.loads(out)["rows"][0]
    assert row["method"] == "unpaired" and not row.get("exact")
    assert row["ci_pct"] != [0.0, 0.0]


# ---- 2. a known change between two synthetic runs -------------------------------------------


def test_known_20pct_change_is_detected_and_equal_rows_are_equal(tmp_path):
    """9 repetitions a side, 1 % noise: the row that lost 20 % is a regression whose interval
    excludes 0; the unchanged rows answer 'no change larger than 5 %'; exit 1."""
    rng = np.random.default_rng(20261202)
    keys = [f"locks/lock:ticket/cs:{i}/threads:2" for i in range(4)]
    base, cur = [], []
    for i, key in enumerate(keys):
        base += plain_rows(key, 1e7, 0.01, 9, rng)
        cur += plain_rows(key, 1e7 * (0.8 if i == 0 else 1.0), 0.01, 9, rng)
    code, out, err = run_cli(write_run(tmp_path / "base", base),
                             write_run(tmp_path / "cur", cur), "--format", "json")
    assert code == 1, err
    rows = rows_of(json.loads(out))
    hit = rows[(keys[0], "ops_per_s")]
    assert hit["verdict"] == "regression" and hit["method"] == "unpaired"
    assert -23 < hit["change_pct"] < -17 and hit["ci_pct"][1] < 0
    for key in keys[1:]:
        assert rows[(key, "ops_per_s")]["answer"] == "no change larger than 5 %"


# ---- 3. duet rows across two runs -----------------------------------------------------------


def test_duet_rows_with_the_same_paired_effect_are_equal_within_5pct(tmp_path):
    """Two runs of a duet row with the same B/A effect (1.25) under large common swings (sd
    50 %, which the pairs cancel): compared by the change of the paired effect, 'no change
    larger than 5 %', exit 0; the row's own ops_per_s (both sides mixed) is not what is
    compared."""
    rng = np.random.default_rng(7)
    a = write_run(tmp_path / "a", duet_rows(DUET_KEY, 1.25, rng))
    b = write_run(tmp_path / "b", duet_rows(DUET_KEY, 1.25, rng))
    code, out, err = run_cli(a, b, "--format", "json")
    assert code == 0, err
    result = json.loads(out)
    row = rows_of(result)[(DUET_KEY, "pair_ratio")]
    assert row["method"] == "pair_effects" and row["unit"] == "window pairs"
    assert row["baseline"]["n"] == row["current"]["n"] == 60
    assert row["baseline"]["repetitions"] == 5
    assert row["answer"] == "no change larger than 5 %"
    assert -5 < row["ci_pct"][0] <= row["change_pct"] <= row["ci_pct"][1] < 5
    # Unpaired, the sides' ops/s would decide nothing under these swings.
    code, out, _ = run_cli(a, b, "--metric", "a_ops_per_s", "--format", "json")
    assert json.loads(out)["rows"][0]["verdict"] == "undecided"


def test_duet_rows_with_a_shifted_effect_are_a_change(tmp_path):
    """The B/A effect falls from 1.25 to 1.0 (-20 %) between the runs: a regression of the
    paired effect (pair_ratio is higher-is-better), exit 1; swapped, an improvement."""
    rng = np.random.default_rng(8)
    a = write_run(tmp_path / "a", duet_rows(DUET_KEY, 1.25, rng))
    b = write_run(tmp_path / "b", duet_rows(DUET_KEY, 1.0, rng))
    code, out, err = run_cli(a, b, "--format", "json")
    assert code == 1, err
    row = json.loads(out)["rows"][0]
    assert row["verdict"] == "regression" and row["method"] == "pair_effects"
    assert -23 < row["change_pct"] < -17 and row["ci_pct"][1] < -10
    code, out, _ = run_cli(b, a, "--format", "json")
    assert code == 0 and json.loads(out)["rows"][0]["verdict"] == "improvement"


def test_duet_run_against_itself_is_exactly_equal(tmp_path):
    """A run with a duet row against itself: the same window pairs, matched pair by pair,
    change exactly 0."""
    rng = np.random.default_rng(9)
    a = write_run(tmp_path / "a", duet_rows(DUET_KEY, 1.25, rng, common=1.0, noise=0.3))
    code, out, err = run_cli(a, a, "--format", "json")
    assert code == 0, err
    row = json.loads(out)["rows"][0]
    assert row["method"] == "pair_effects" and row["matched"] and row["exact"]
    assert row["ci_pct"] == [0.0, 0.0] and row["answer"] == "no change larger than 5 %"


def test_compare_pair_effects_units_and_errors():
    """stats.compare_pair_effects: the change of the median B/A, in fractions; too few pairs;
    matched sides must agree in length and labels."""
    rng = np.random.default_rng(10)

    def pairs(ratio, n, label="near"):
        level = np.exp(rng.normal(0, 0.5, n)) * 1e6
        return [(label, float(x), float(x * ratio * np.exp(e)))
                for x, e in zip(level, rng.normal(0, 0.01, n))]

    c = stats.compare_pair_effects(pairs(1.1, 40), pairs(1.21, 40))
    assert c.method == "pair_effects" and abs(c.effect - 0.1) < 0.02 and c.excludes_zero
    assert "change of the paired effect" in c.text()
    few = stats.compare_pair_effects(pairs(1.1, 5), pairs(1.1, 40))
    assert few.status == "too_few" and few.ci is None and "too few window pairs" in few.text()
    same = pairs(1.3, 10)
    m = stats.compare_pair_effects(same, same, matched=True)
    assert m.exact and m.ci == (0.0, 0.0) and m.equivalent
    try:
        stats.compare_pair_effects(same, same[:-1], matched=True)
    except ValueError:
        pass
    else:
        raise AssertionError("matched sides of different lengths must raise")


# ---- 4. the A/A tool --------------------------------------------------------------------------


def _aa_runs(tmp_path):
    """Two synthetic runs with a known outcome per key: three quiet keys (equal), one key +30 %
    in run 2 (an effect, planted), one very noisy key (not resolved), one key with 2
    repetitions (too few), and in run 1 an A/A duet row (a = b, quiet: equal)."""
    rng = np.random.default_rng(11)
    runs = []
    for run in (1, 2):
        rows = []
        for i in range(3):
            rows += plain_rows(f"locks/lock:mcs/cs:{i}/threads:1", 1e7, 0.002, 5, rng)
        rows += plain_rows("pagevec/slots:15/threads:1", 1e7 * (1.3 if run == 2 else 1.0), 0.002,
                           5, rng)
        rows += plain_rows("fault/mode:plain/threads:1", 1e5, 0.4, 5, rng)
        rows += plain_rows("zeroing/method:memset/threads:1", 1e9, 0.002, 2, rng)
        if run == 1:
            rows += duet_rows(AA_DUET_KEY, 1.0, rng, noise=0.005)
        runs.append(write_run(tmp_path / f"run{run}", rows))
    return runs


def test_aa_tool_counts_a_known_outcome(tmp_path, capsys):
    runs = _aa_runs(tmp_path)
    doc = aa_check.check(load_runs(runs))
    total = doc["total"]
    assert (total["effect"], total["equal"], total["not_resolved"], total["too_few"]) == \
        (1, 4, 1, 1)
    assert total["with_interval"] == 6
    assert total["false_effect_rate"] == 1 / 6
    assert total["wilson95"] == list(stats.wilson_interval(1, 6))
    assert doc["by_source"]["A/A duet row"]["equal"] == 1
    effect = [r for r in doc["comparisons"] if r["answer"] == "effect"]
    assert [r["key"] for r in effect] == ["pagevec/slots:15/threads:1"]
    assert aa_check.main(runs) == 0
    out = capsys.readouterr().out
    assert "A/A total (2 run(s), 1 pair(s) of runs): 7 comparisons: 1 an effect " \
           "(false-effect rate 16.7 %, Wilson 95 % [" in out
    # The same run twice measures nothing: its keys are skipped, said in a note.
    same = aa_check.check(load_runs([runs[0], runs[0]]))
    assert same["total"]["comparisons"] == 1      # only the A/A duet row of the run itself
    assert any("same rows" in n for n in same["notes"])


def test_aa_tool_cli_help_and_errors(tmp_path):
    p = subprocess.run([PYTHON, AA_CHECK, "--help"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "Wilson 95 %" in p.stdout and "RUN_DIR" in p.stdout
    p = subprocess.run([PYTHON, AA_CHECK, str(tmp_path / "missing")], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.startswith("aa_check.py: error:")


def test_wilson_interval():
    lo, hi = stats.wilson_interval(2, 40)
    assert abs(lo - 0.0138) < 1e-3 and abs(hi - 0.1650) < 1e-3
    assert stats.wilson_interval(0, 40)[0] == 0.0 and stats.wilson_interval(40, 40)[1] == 1.0


# ---- 5. the rule's false-effect rate on A/A data ------------------------------------------------


def test_aa_simulation_unpaired_cv3_5_repetitions_claims_few_effects():
    """400 A/A comparisons of two independent sides, 5 repetitions each, noise CV 3 % (seeded):
    the interval excludes 0 ("an effect", stats.answer) in at most ~5 % of them, and
    compare.py's gate (one row per comparison, so Holm does not help) calls a regression or
    improvement in at most 5 %."""
    rng = np.random.default_rng(20261203)
    answers = {"effect": 0, "equivalent": 0, "not_resolved": 0, "too_few": 0}
    gate_effects = 0
    n = 400
    for i in range(n):
        a = 1e7 * (1 + 0.03 * rng.normal(size=5))
        b = 1e7 * (1 + 0.03 * rng.normal(size=5))
        _, lo, hi = stats.ratio_interval(a, b, resamples=1000, seed=i)
        answers[stats.answer((lo - 1, hi - 1))] += 1
        if i < 100:
            side = lambda vals, tag: {"label": tag, "paths": [], "contexts": [{}], "notes": [],
                                      "failed": {}, "rows": {"k": [
                                          {"values": {"ops_per_s": float(v)}, "threads": 1,
                                           "coherence": None, "placement": None,
                                           "layout": None, "identity": f"{tag}{j}",
                                           "pairs": []} for j, v in enumerate(vals)]}}
            result = compare.compare(side(a, "b"), side(b, "c"),
                                     {"alpha": 0.05, "min_effect": 5.0, "overrides": [],
                                      "threshold_only": False, "metrics": [], "filter": None})
            gate_effects += result["rows"][0]["verdict"] in ("regression", "improvement")
    assert answers["effect"] / n <= 0.06, answers
    assert gate_effects <= 5


def test_aa_simulation_duet_change_claims_few_effects():
    """200 A/A comparisons of a duet row between two runs (60 pairs each, the same effect,
    pair noise 3 %): the interval of the change excludes 0 in at most ~5 % + sampling."""
    rng = np.random.default_rng(20261204)

    def pairs(n=60):
        level = np.exp(rng.normal(0, 0.5, n)) * 1e6
        return [("near", float(x), float(x * 1.2 * np.exp(e)))
                for x, e in zip(level, rng.normal(0, 0.03, n))]

    effects = sum(stats.compare_pair_effects(pairs(), pairs(), resamples=1000,
                                             seed=i).excludes_zero for i in range(200))
    assert effects / 200 <= 0.08


# ---- issue 35: equal rows of different contexts; equivalence from few repetitions ------------


def test_identical_rows_of_another_host_are_not_a_copy(tmp_path):
    """Two files whose rows are byte-identical but whose context names another host, clock
    and date are two measurements: compared as independent samples, never 'exact [0, 0]'."""
    rng = np.random.default_rng(2)
    rows = plain_rows("locks/lock:ticket/threads:1", 1e7, 0.03, 5, rng)
    a = write_run(tmp_path / "a", rows)
    b = write_run(tmp_path / "b", rows)
    with open(os.path.join(b, "lockline.json")) as handle:
        doc = json.load(handle)
    doc["context"] = dict(doc["context"], host_name="other", mhz_per_cpu=3100,
                          date="2026-12-03T00:00:00")
    with open(os.path.join(b, "lockline.json"), "w") as handle:
        json.dump(doc, handle)
    code, out, _ = run_cli(a, b, "--format", "json")
    row = json.loads(out)["rows"][0]
    assert row["method"] == "unpaired" and not row.get("exact"), row
    # The same file on both sides is still a copy.
    code, out, _ = run_cli(a, a, "--format", "json")
    assert json.loads(out)["rows"][0].get("exact")


def test_equivalence_from_few_repetitions_carries_the_caution(tmp_path):
    """'no change larger than 5 %' from 5 repetitions a side carries the same caution as a
    regression would (fewer than 9 a side)."""
    rng = np.random.default_rng(3)
    a = write_run(tmp_path / "a", plain_rows("locks/lock:ticket/threads:1", 1e7, 0.001, 5, rng))
    b = write_run(tmp_path / "b", plain_rows("locks/lock:ticket/threads:1", 1e7, 0.001, 5, rng))
    code, out, _ = run_cli(a, b, "--format", "json")
    row = json.loads(out)["rows"][0]
    assert row["verdict"] == "no change", row
    assert any("fewer than 9 a side" in w for w in row["warnings"]), row["warnings"]
