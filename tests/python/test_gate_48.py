"""Issue 48, "the gate": ci/compare.py (both gates) and ci/regression.sh refuse what they used
to pass. Each test failed on the code before the issue and passes after; all run compare.py
through its command line ($LOCKLINE_SOURCE_DIR/ci/compare.py), so they can be pointed at an
older tree."""

import json
import os
import subprocess

import pytest

from test_build_duet import _pairs, _per_process, _run_file
from test_compare import COMPARE, FIXTURES, REGRESSION_SH
BASE = os.path.join(FIXTURES, "BASE_noise.json")
CUR = os.path.join(FIXTURES, "CUR_noise.json")
PYTHON = "/usr/bin/python3"


def run_json(*args):
    """compare.py ARGS --format json: (exit code, parsed result or None, stderr)."""
    p = subprocess.run([PYTHON, COMPARE, *args, "--format", "json"], capture_output=True,
                       text=True, timeout=300)
    return p.returncode, json.loads(p.stdout) if p.stdout.strip() else None, p.stderr


def modified(tmp_path, name, edit, source=CUR):
    doc = json.load(open(source))
    edit(doc)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def quiet_rows(n=10):
    return {f"fam/x:{i}/threads:1": [_pairs(1.0, 12, 0.01, 10 * i + s) for s in range(5)]
            for i in range(n)}


# ---- S1: a broken repetition of either build fails the build duet ---------------------------


def test_builds_fails_a_row_with_one_repetition_that_broke_mutual_exclusion(tmp_path):
    """Before: the row was answered from the other repetitions, exit 0 with a warning."""
    rows = quiet_rows()
    rows["fam/x:0/threads:1"][2] = None  # error_message "invariant broken" (test_build_duet)
    code, result, err = run_json("--builds", _run_file(tmp_path, rows))
    assert code == 1, err
    row = next(r for r in result["rows"] if r["key"] == "fam/x:0/threads:1")
    assert row["verdict"] == "broken"
    assert "broke an invariant" in row["notes"][-1] and "broken row" in err


def test_builds_fails_a_repetition_whose_verify_failed(tmp_path):
    path = _run_file(tmp_path, quiet_rows())
    doc = json.load(open(path))
    doc["benchmarks"][0]["verify"] = "mutual exclusion violated: 3 overlaps"
    with open(path, "w") as f:
        json.dump(doc, f)
    code, result, _ = run_json("--builds", path)
    assert code == 1
    assert result["summary"]["broken"] == 1


# ---- S2: a row without one usable window pair is broken, not undecided ----------------------


def test_builds_fails_a_row_whose_new_build_did_no_operation(tmp_path):
    """Before: "undecided: no usable window pair", not counted among the rows compared, and
    exit 0 under the default --max-undecided 10."""
    rows = quiet_rows()
    dead = [_pairs(1.0, 12, 0.01, 99 + s) for s in range(5)]
    for rep in dead:
        for p in rep:
            p["b_ops_per_s"] = p["b_ops_per_cpu_s"] = 0.0
    rows["fam/dead:1/threads:1"] = dead
    code, result, err = run_json("--builds", _run_file(tmp_path, rows))
    assert code == 1, err
    row = next(r for r in result["rows"] if r["key"] == "fam/dead:1/threads:1")
    assert row["verdict"] == "broken" and "no usable window pair" in row["notes"][-1]


# ---- S9: rates no other tool takes are bad input, never a traceback -------------------------


@pytest.mark.parametrize("value", [1e308, 1e-308])
def test_builds_refuses_absurd_pair_rates_in_one_line(tmp_path, value):
    """Before: a traceback (exit 1)."""
    rows = quiet_rows(3)
    rows["fam/x:0/threads:1"][1][3]["b_ops_per_cpu_s"] = value
    code, _, err = run_json("--builds", _run_file(tmp_path, rows))
    assert code == 2 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("compare.py: error:")
    assert "fam/x:0/threads:1" in lines[0] and f"{value:g}" in lines[0]


def test_runs_refuses_an_absurd_rate(tmp_path):
    """Before: 1e308 ops/s was compared (an "improvement" where every repetition had it)."""
    def huge(doc):
        for r in doc["benchmarks"]:
            if r.get("run_type") == "iteration" and "ops_per_s" in r:
                r["ops_per_s"] = 1e308
    path = modified(tmp_path, "huge.json", huge)
    code, _, err = run_json(BASE, path)
    assert code == 2 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "ops_per_s = 1e+308" in lines[0]


def test_runs_fails_a_point_that_did_no_operation(tmp_path):
    """Before: 0 ops/s in every current repetition was a sample like any other (a -100 %
    change that passed as undecided under --allow-undecided with few repetitions)."""
    def zero(doc):
        key = next(r for r in doc["benchmarks"] if r.get("run_type") == "iteration")["lockline_key"]
        doc["benchmarks"] = [r for r in doc["benchmarks"] if r.get("lockline_key") != key or
                             (r.get("run_type") == "iteration" and r["repetition_index"] < 3)]
        for r in doc["benchmarks"]:
            if r.get("lockline_key") == key:
                r["ops_per_s"] = 0
    path = modified(tmp_path, "zero.json", zero)
    code, result, _ = run_json(BASE, path, "--allow-undecided")
    assert code == 1
    assert result["summary"]["broken"] == 1


# ---- one filter syntax: lockline's leading '-' ----------------------------------------------


def test_filter_negation_is_lockline_syntax():
    """Before: argparse took '-zone_lock' for an option ("expected one argument"), or, as
    --filter=-zone_lock, a regex that matches nothing."""
    code, everything, _ = run_json(BASE, CUR)
    code, result, err = run_json(BASE, CUR, "--filter=-lock:ticket")
    assert code == 0, err
    keys = {r["key"] for r in result["rows"]}
    assert keys and not any("lock:ticket" in k for k in keys)
    assert keys == {r["key"] for r in everything["rows"] if "lock:ticket" not in r["key"]}


def test_regression_sh_checks_the_filter_before_the_run(tmp_path):
    """A FILTER compare.py would refuse stops regression.sh before lockline runs."""
    marker = tmp_path / "ran"
    fake = tmp_path / "fake_lockline"
    fake.write_text(f"#!/bin/sh\ntouch '{marker}'\nexit 0\n")
    fake.chmod(0o755)
    env = dict(os.environ, LOCKLINE=str(fake), FILTER="-(", OUT=str(tmp_path / "run"),
               BASELINE=str(tmp_path / "none.json"))
    p = subprocess.run(["bash", REGRESSION_SH], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2 and not marker.exists(), p.stdout + p.stderr
    assert "FILTER" in p.stderr and "bad regular expression" in p.stderr


def test_regression_sh_passes_a_negated_filter_to_compare(tmp_path):
    fake = tmp_path / "fake_lockline"
    fake.write_text("#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in --out=*) d=${a#--out=};; "
                    f"esac; done\nmkdir -p \"$d\" && cp '{CUR}' \"$d/lockline.json\"\n")
    fake.chmod(0o755)
    env = dict(os.environ, LOCKLINE=str(fake), FILTER="-lock:ticket", OUT=str(tmp_path / "run"),
               BASELINE=BASE)
    p = subprocess.run(["bash", REGRESSION_SH], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "lock:ticket" not in p.stdout.split("rule:")[0].split("\n", 1)[1]


# ---- Google Benchmark 1.9.0: threaded rates became per thread -------------------------------


def gb_file(tmp_path, name, version, rate, per_thread):
    """A plain Google Benchmark file: one 4-thread row, 9 repetitions, items_per_second and a
    user rate counter ops_per_s, per thread when `per_thread`."""
    scale = 0.25 if per_thread else 1.0
    rows = [{"name": "BM_q/threads:4", "run_name": "BM_q/threads:4", "run_type": "iteration",
             "repetitions": 9, "repetition_index": i, "threads": 4, "iterations": 1000,
             "real_time": 100.0 + i, "cpu_time": 400.0, "time_unit": "ns",
             "items_per_second": rate * scale * (1 + 0.001 * i),
             "ops_per_s": rate * scale * (1 + 0.001 * i)} for i in range(9)]
    ctx = {"library_version": version} if version else {}
    path = tmp_path / name
    path.write_text(json.dumps({"context": ctx, "benchmarks": rows}))
    return str(path)


def test_threaded_rates_across_gb_1_9_are_converted_or_refused(tmp_path):
    """Before: ops_per_s of a 1.9.1 file (per thread) against an older one read -75 %, a
    regression."""
    old = gb_file(tmp_path, "old.json", None, 4e6, False)
    new = gb_file(tmp_path, "new.json", "v1.9.1", 4e6, True)
    code, result, err = run_json(old, new, "--filter", "BM_q")
    assert code == 2 and "threaded rates became per thread" in err, err
    code, result, err = run_json(old, new, "--metric", "items_per_second:higher")
    assert code == 0, err
    assert result["rows"][0]["answer"] == "no change larger than 5 %"


# ---- the words ------------------------------------------------------------------------------


def test_undecided_count_is_of_the_rows_compared(tmp_path):
    """Before: "6 undecided (of 4 rows compared)": a row undecided for want of a usable pair
    in one regime was not counted among the rows compared."""
    rows = quiet_rows(2)
    rows["fam/mixed:1/threads:2"] = [("mixed", p) for p in _per_process(1.0, 0.01, 3, 5)]
    code, result, _ = run_json("--builds", _run_file(tmp_path, rows), "--max-undecided", "0")
    s = result["summary"]
    assert s["undecided"] == 1 and s["rows_compared"] == 3, s


def test_rerun_advice_names_about_what_would_decide():
    """An interval of +-6 % about 0 with T = 5 % from 5 repetitions needs about (6/5)^2 = 1.44
    times the repetitions, not (12/5)^2 = 5.8 times (before: "rerun with 200 repetitions a
    side" where about 7 would decide)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("compare_48", COMPARE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    advise = getattr(module, "repetitions_to_decide", None) or \
        __import__("gate_common").repetitions_to_decide
    row = {"verdict": "undecided", "paired": True, "ci_pct": [-6.0, 6.0], "min_effect_pct": 5.0,
           "baseline": {"n": 5, "repetitions": 5}, "current": {"n": 5, "repetitions": 5}}
    assert advise([row], {"alpha": 0.05}) <= 8
