"""Google Benchmark's comparison tool, re-derived (tests/python/gbench_tools), checked against
the numbers Google's own tests expect, on the vendored 2016 file."""

import copy
import json
import os

import pytest

from gbench_tools.expectations import change, comparable, difference_report

HERE = os.path.dirname(os.path.abspath(__file__))
GB_OLD = os.path.join(HERE, "..", "fixtures", "gbench-json", "gbench-tools-test1_run1.json")


def test_change_matches_googles_expected_numbers():
    """BM_2xFaster -0.5, BM_2xSlower +1.0, BM_ThirdFaster -0.33, zeros, a zero old value."""
    assert change(50, 25) == -0.5 and change(50, 100) == 1.0
    assert change(100, 67) == pytest.approx(-0.33)
    assert change(0, 0) == 0.0 and change(0, 2) == 2.0


def test_pairing_by_name_and_time_unit():
    """The 2016 file against a copy 2x slower: every comparable row +1.0; complexity rows
    (no times) are left out."""
    old = json.load(open(GB_OLD))
    new = copy.deepcopy(old)
    for row in new["benchmarks"]:
        if comparable(row):
            row["real_time"] *= 2
            row["cpu_time"] *= 2
    report = difference_report(old, new)
    assert report and all(m["time"] == pytest.approx(1.0) or m["real_time"] == 0
                          for r in report for m in r["measurements"])
    assert not any(r["name"].endswith(("_BigO", "_RMS")) for r in report)


def test_lockline_rows_compare_meaningfully_in_googles_tool(tmp_path):
    """lockline writes real_time as wall ns per operation (iterations = operations, issue 15),
    so Google's change of real_time between two locks is their throughput ratio: ticket vs MCS
    per repetition, real_time change == ops_per_s(ticket) / ops_per_s(mcs) - 1. Skipped for a
    binary that still writes the window length as real_time."""
    import subprocess
    binary = os.environ.get("LOCKLINE_BINARY", "")
    if not binary or not os.access(binary, os.X_OK):
        pytest.skip(f"LOCKLINE_BINARY ({binary or 'unset'}) is not an executable lockline")
    out = tmp_path / "run"
    p = subprocess.run([binary, f"--out={out}", "--window=5ms", "--benchmark_repetitions=3",
                        "--benchmark_enable_random_interleaving=false",
                        "--benchmark_filter=locks/lock:(ticket|mcs)/cs:0/stats:off/threads:1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.load(open(out / "lockline.json"))
    rows = [r for r in doc["benchmarks"] if r.get("run_type") == "iteration"]
    assert rows
    window_ns = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[rows[0]["time_unit"]] * \
        rows[0]["real_time"]
    if window_ns > 1e5:   # a per-op time is nanoseconds; a window is milliseconds
        pytest.skip("this binary writes the window length as real_time (per-op times come "
                    "with helper cc15's change)")

    def side(lock):
        picked = copy.deepcopy([r for r in rows if f"lock:{lock}/" in r["name"]])
        for r in picked:
            r["name"] = r["name"].replace(f"lock:{lock}/", "lock:X/")
        return {"benchmarks": picked}, [r["ops_per_s"] for r in picked]
    (old, ops_old), (new, ops_new) = side("ticket"), side("mcs")
    (entry,) = difference_report(old, new)
    for m, a, b in zip(entry["measurements"], ops_old, ops_new):
        assert m["time"] == pytest.approx(a / b - 1, rel=1e-2, abs=1e-3)
