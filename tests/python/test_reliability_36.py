"""Issue 36 "Reliability" items on the Python side, each reproducing the defect found by the
fault / bad-input campaign against d00fd42 (before) and checking the behaviour now:
 - R2: compare.py past ~512 samples a side (OverflowError in 2 / comb(n1+n2, n1), exit 1, the
   regression code); the bootstrap's memory grows with samples x resamples (26.8 GiB asked for
   100k window pairs);
 - R4: a point where some repetitions broke mutual exclusion passed with --threshold-only or
   --allow-undecided; a duet whose window pairs are all 0 / NaN was "missing" and passed with
   --allow-missing;
 - R8: non-physical values (--alpha=1e-320, 1e308 / 5e-324 metrics, overflowing pair ratios)
   gave tracebacks in compare.py and the plot tools.
Synthetic result files built here (no timing, no fixtures read from elsewhere).
"""
import importlib.util
import json
import math
import os
import random
import subprocess
import sys
import tracemalloc

import pytest

SOURCE_DIR = os.environ.get("LOCKLINE_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPARE = os.path.join(SOURCE_DIR, "ci", "compare.py")
PLOTS = os.path.join(SOURCE_DIR, "plots")
PYTHON = "/usr/bin/python3"
KEY = "calibration/op:cas/line:private/threads:1"
DUET = "duet/question:000/a:pagevec_14/b:pagevec_15/threads:2"

sys.path.insert(0, PLOTS)
import stats  # noqa: E402

_spec = importlib.util.spec_from_file_location("lockline_compare_36", COMPARE)
compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare)


def row(key, i, n, value, **extra):
    """One lockline iteration row of `key` (repetition i of n) with ops_per_s = value."""
    r = {"name": key + "/manual_time", "run_name": key + "/manual_time",
         "run_type": "iteration", "repetitions": n, "repetition_index": i, "threads": 1,
         "lockline_key": key, "family": key.split("/")[0], "ops_per_s": value,
         "error_occurred": False, "error_message": "", "verify": "ok",
         "coherence": {"label": "none"}}
    r.update(extra)
    return r


def document(rows):
    return {"context": {"library_version": "v1.7.1", "lockline": {"finished": True}},
            "benchmarks": rows}


def write(tmp_path, name, rows):
    path = tmp_path / name
    path.write_text(json.dumps(document(rows)))
    return str(path)


def side(tmp_path, name, n, seed, key=KEY, scale=1.0):
    rng = random.Random(seed)
    return write(tmp_path, name, [row(key, i, n, scale * (1e6 + rng.random() * 1e4))
                                  for i in range(n)])


def cli(*args):
    return subprocess.run([PYTHON, COMPARE, *args], capture_output=True, text=True, timeout=300)


def one_line(p):
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    return lines[0]


# ---- R2 ------------------------------------------------------------------------------------


def test_min_attainable_p_in_log_space_past_512_samples():
    """Before: OverflowError (int too large to convert to float) at 600 / 600."""
    assert compare.min_attainable_p(600, 600) == 0.0
    assert compare.min_attainable_p(3, 3) == pytest.approx(0.1)
    assert compare.min_attainable_p(9, 9) == pytest.approx(2 / math.comb(18, 9))
    assert compare.repetitions_needed(0.05, 1) == 4
    assert compare.repetitions_needed(1e-12, 1000) > 10


def test_600_repetitions_a_side_are_compared(tmp_path):
    """Before: exit 1 (the regression code) with an OverflowError traceback."""
    p = cli(side(tmp_path, "a.json", 600, 1), side(tmp_path, "b.json", 600, 2))
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "no change larger than 5 %" in p.stdout


def test_bootstrap_memory_is_bounded():
    """200k values x 400 resamples: 2 x 640 MB of indices and values at once before; now
    chunks of stats.BOOTSTRAP_CHUNK_VALUES (32 MiB each)."""
    rng = random.Random(3)
    values = [1.0 + rng.random() for _ in range(200_000)]
    tracemalloc.start()
    ratio, lo, hi = stats.ratio_interval(values, values, resamples=400)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert lo <= ratio == 1.0 <= hi
    assert peak < 200 * 2**20, f"peak {peak / 2**20:.0f} MiB"


def test_chunked_resampling_equals_one_draw_below_the_bound():
    import numpy as np
    v = np.arange(50, dtype=float)
    a = stats.resampled_medians(v, np.random.default_rng(5), 100)
    b = np.median(v[np.random.default_rng(5).integers(0, 50, size=(100, 50))], axis=1)
    assert (a == b).all()


# ---- R4 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [1, 4, 8])
@pytest.mark.parametrize("flag", ["--threshold-only", "--allow-undecided", "--allow-missing"])
def test_some_repetitions_with_a_broken_invariant_fail_the_gate(tmp_path, bad, flag):
    """Before: exit 0 with --threshold-only / --allow-undecided when 1-8 of 9 repetitions broke
    mutual exclusion (they were dropped as errors, the others compared)."""
    base = side(tmp_path, "base.json", 9, 1)
    rng = random.Random(2)
    rows = [row(KEY, i, 9, 1e6 + rng.random() * 1e4) for i in range(9)]
    for r in rows[:bad]:
        r.update(error_occurred=True, verify="mutual exclusion violated: 2 holders",
                 error_message="invariant broken after the run: mutual exclusion violated")
    cur = write(tmp_path, "cur.json", rows)
    p = cli(base, cur, flag, "--format", "json")
    assert p.returncode == 1, p.stdout + p.stderr
    got = json.loads(p.stdout)
    assert [r["verdict"] for r in got["rows"] if r["key"] == KEY] == ["broken"]
    assert f"{bad} of 9 current repetitions broke an invariant" in p.stderr


def test_an_empty_duet_is_broken_not_missing(tmp_path):
    """Before: a duet whose pairs are all 0 / NaN was "only in baseline" (exit 0 with
    --allow-missing); now "broken", exit 1."""
    def duet_rows(pairs_of):
        return [row(DUET, i, 3, 1e6, family="duet",
                    details={"duet": {"pairs": pairs_of(i)}}) for i in range(3)]
    good = lambda i: [{"a_ops_per_s": 1e6 + j, "b_ops_per_s": 1.1e6 + 7 * j + i}
                      for j in range(20)]
    empty = lambda i: [{"a_ops_per_s": 0.0, "b_ops_per_s": 0.0}] * 10 + \
        [{"a_ops_per_s": float("nan"), "b_ops_per_s": 5.0}] * 10
    base = write(tmp_path, "base.json", duet_rows(good))
    cur = tmp_path / "cur.json"
    cur.write_text(json.dumps(document(duet_rows(empty))).replace("NaN", "NaN"))
    p = cli(base, str(cur), "--allow-missing", "--allow-undecided", "--format", "json")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "empty duet" in p.stderr


# ---- R8 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", ["1e-320", "5e-324", "0", "1e-13"])
def test_alpha_below_the_accepted_range_is_one_line(tmp_path, alpha):
    """Before: --alpha=1e-320 raised OverflowError (exit 1, the regression code)."""
    p = cli(side(tmp_path, "a.json", 5, 1), side(tmp_path, "b.json", 5, 2), f"--alpha={alpha}")
    assert p.returncode == 2
    assert "--alpha" in one_line(p) and "at least 1e-12" in one_line(p)


@pytest.mark.parametrize("values", [[1e308, 5e-324], [5e-324, 5e-324], [1e308, 1e308]])
def test_non_physical_metrics_never_crash_compare(tmp_path, values):
    rows = [row(KEY, i, 6, values[i % 2]) for i in range(6)]
    cur = write(tmp_path, "cur.json", rows)
    p = cli(side(tmp_path, "a.json", 6, 1), cur)
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode in (0, 1, 2, 3)


@pytest.mark.parametrize("tool", [["plot.py", "-o", "{out}"], ["report.py", "-o", "{out}/r.html"],
                                  ["aa_check.py"], ["duet_check.py"], ["verdicts.py"]])
@pytest.mark.parametrize("case", ["huge", "subnormal", "pair_overflow"])
def test_plot_tools_refuse_non_physical_values_in_one_line(tmp_path, tool, case):
    """Before: 1e308 / 5e-324 rates and overflowing pair ratios gave tracebacks (OverflowError,
    StopIteration from matplotlib) in plot.py and report.py. Now every reader of run
    directories refuses them: one line, exit 2."""
    rng = random.Random(4)
    rows = [row(KEY, i, 4, 1e6 + rng.random() * 1e4) for i in range(4)]
    pairs = [{"a_ops_per_s": 1e6, "b_ops_per_s": 1.1e6} for _ in range(12)]
    if case == "huge":
        rows[1]["ops_per_s"] = 1e308
    elif case == "subnormal":
        rows[2]["ops_per_s"] = 5e-324
    else:
        pairs[3] = {"a_ops_per_s": 5e-324, "b_ops_per_s": 1e308}
    rows += [row(DUET, i, 2, 1e6, family="duet", details={"duet": {"pairs": pairs}})
             for i in range(2)]
    run = tmp_path / "run"
    run.mkdir()
    (run / "lockline.json").write_text(json.dumps(document(rows)))
    out = tmp_path / "out"
    args = [a.format(out=out) for a in tool[1:]]
    p = subprocess.run([PYTHON, os.path.join(PLOTS, tool[0]), str(run), *args],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "is not a measurement" in one_line(p)
