"""lockline.json rows as Google Benchmark's own tools read them.

Google's tools/compare.py compares `real_time` / `cpu_time` (its pairing and change rule are
re-derived in tests/python/gbench_tools; no Google code is vendored). lockline writes them per operation (iterations = operations),
so a comparison of two locks by Google's tool is their throughput ratio, and its aggregates
(cv as a ratio, cpu_time of the worker threads) are computed from the repetition rows. The checks
are consistency checks between fields of one run (never a speed assertion).

Needs LOCKLINE_BINARY (set by ctest); skipped with a reason otherwise.
"""
import copy
import json
import os
import statistics
import subprocess
import sys

import pytest

BINARY = os.environ.get("LOCKLINE_BINARY", "")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gbench_tools.expectations import difference_report  # noqa: E402
KEYS = {lock: f"locks/lock:{lock}/cs:0/stats:off/threads:2" for lock in ("ticket", "mcs")}

pytestmark = pytest.mark.skipif(
    not (BINARY and os.access(BINARY, os.X_OK)),
    reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an executable lockline")


@pytest.fixture(scope="module")
def run_doc(tmp_path_factory):
    """A tiny run of the plain ticket and MCS locks at 2 threads, 3 repetitions."""
    out = tmp_path_factory.mktemp("rows") / "run"
    proc = subprocess.run(
        [BINARY, "--quick", "--window=4ms", "--events=none", "--benchmark_repetitions=3",
         "--benchmark_filter=^locks/lock:(ticket|mcs)/cs:0/stats:off/threads:2",
         f"--out={out}"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out / "lockline.json") as f:
        return json.load(f)


def rows_of(doc, key, run_type="iteration"):
    """The rows of one lockline key and run type, in file order."""
    return [r for r in doc["benchmarks"]
            if r.get("lockline_key") == key and r.get("run_type") == run_type]


def one_side(doc, key, name):
    """A Google Benchmark JSON document holding only `key`'s rows, renamed to `name` so that
    Google's compare.py pairs two different locks."""
    side = {"context": doc["context"], "benchmarks": []}
    for r in doc["benchmarks"]:
        if r.get("lockline_key") == key:
            r = copy.deepcopy(r)
            suffix = "_" + r["aggregate_name"] if r.get("run_type") == "aggregate" else ""
            r["name"] = name + suffix
            r["run_name"] = name
            side["benchmarks"].append(r)
    return side


def test_iteration_rows_are_per_operation(run_doc):
    """iterations = operations, real_time = wall ns / op = 1e9 / ops_per_s, cpu_time = the
    workers' CPU ns / op = ns_per_op x cpu_util."""
    for key in KEYS.values():
        rows = rows_of(run_doc, key)
        assert len(rows) == 3
        for r in rows:
            assert r["time_unit"] == "ns"
            assert r["iterations"] == sum(w["ops"] for w in r["windows"]) > 0
            assert r["real_time"] == pytest.approx(1e9 / r["ops_per_s"], rel=1e-9)
            assert r["cpu_time"] == pytest.approx(r["ns_per_op"] * r["cpu_util"], rel=1e-6)


def test_aggregates_are_google_shaped(run_doc):
    """mean / median / stddev / cv of the repetition rows; cv as a ratio (Google writes the
    ratio for percentage aggregates), cpu_time the workers'."""
    for key in KEYS.values():
        rows = rows_of(run_doc, key)
        agg = {r["aggregate_name"]: r for r in rows_of(run_doc, key, "aggregate")}
        assert set(agg) == {"mean", "median", "stddev", "cv"}
        rt = [r["real_time"] for r in rows]
        assert agg["mean"]["real_time"] == pytest.approx(statistics.mean(rt), rel=1e-9)
        assert agg["median"]["real_time"] == pytest.approx(statistics.median(rt), rel=1e-9)
        assert agg["stddev"]["real_time"] == pytest.approx(statistics.stdev(rt), rel=1e-9)
        assert agg["cv"]["aggregate_unit"] == "percentage"
        assert agg["cv"]["real_time"] == pytest.approx(
            statistics.stdev(rt) / statistics.mean(rt), rel=1e-9)
        ops = [r["ops_per_s"] for r in rows]
        assert agg["cv"]["ops_per_s"] == pytest.approx(
            statistics.stdev(ops) / statistics.mean(ops), rel=1e-9)
        assert agg["mean"]["cpu_time"] == pytest.approx(
            statistics.mean(r["cpu_time"] for r in rows), rel=1e-9)


def test_google_compare_reads_the_throughput_ratio(run_doc):
    """Google's report: each repetition's real_time change ticket -> MCS is ops/s(ticket) /
    ops/s(MCS) - 1, exactly (the same windows give both); the mean rows pair too."""
    base = one_side(run_doc, KEYS["ticket"], "lock")
    other = one_side(run_doc, KEYS["mcs"], "lock")
    by_name = {d["name"]: d for d in difference_report(base, other)}
    it = by_name["lock"]
    t_rows, m_rows = rows_of(run_doc, KEYS["ticket"]), rows_of(run_doc, KEYS["mcs"])
    order = lambda rows: sorted(rows, key=lambda r: r["repetition_index"])  # noqa: E731
    assert len(it["measurements"]) == 3
    for m, t, mm in zip(it["measurements"], order(t_rows), order(m_rows)):
        assert m["time"] == pytest.approx(t["ops_per_s"] / mm["ops_per_s"] - 1, rel=1e-9)
    mean = by_name["lock_mean"]["measurements"][0]["time"]
    assert mean == pytest.approx(
        statistics.mean(r["real_time"] for r in m_rows)
        / statistics.mean(r["real_time"] for r in t_rows) - 1, rel=1e-9)
