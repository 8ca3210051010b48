"""Row names hold across suites (issue 28).

A --quick run measures each point in 2 windows, a default run in 3, a --full run in 5. When
lockline put Google Benchmark's '/iterations:N' (N = windows) into the rows' `name`, the same
point had a different name in each suite, so Google's tools/compare.py (which pairs rows by exact
`name`) paired none of them. The rows are named '<key>/manual_time' in every suite: this runs one
point in the quick and the default suite and checks that both tools pair its rows row by row."""

import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gbench_tools import expectations  # noqa: E402

SOURCE_DIR = os.environ.get(
    "LOCKLINE_SOURCE_DIR",
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
COMPARE = os.path.join(SOURCE_DIR, "ci", "compare.py")
BINARY = os.environ.get("LOCKLINE_BINARY", "")
PYTHON = "/usr/bin/python3"
# In the quick suite and in the default one; a private line: no coherence regime to differ.
KEY = "calibration/op:cas/line:private/threads:1"


def run_suite(out, suite_flags):
    """One lockline run of KEY alone; returns its iteration rows."""
    proc = subprocess.run([BINARY, *suite_flags, "--window=1ms", "--benchmark_repetitions=3",
                           "--events=none", f"--benchmark_filter=^{KEY}$", f"--out={out}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    with open(out / "lockline.json", encoding="utf-8") as handle:
        return json.load(handle)


@pytest.mark.skipif(not os.path.isfile(BINARY), reason="LOCKLINE_BINARY not set")
def test_quick_and_default_rows_pair_by_name(tmp_path):
    quick = run_suite(tmp_path / "quick", ["--quick"])
    default = run_suite(tmp_path / "default", [])
    q_iter = [r for r in quick["benchmarks"] if r["run_type"] == "iteration"]
    d_iter = [r for r in default["benchmarks"] if r["run_type"] == "iteration"]
    assert len(q_iter) == len(d_iter) == 3
    # The suites measured the point differently (2 and 3 windows a repetition) ...
    assert {len(r["windows"]) for r in q_iter} == {2}
    assert {len(r["windows"]) for r in d_iter} == {3}
    # ... under one name, without the window count.
    names = {r["name"] for r in q_iter + d_iter}
    assert names == {KEY + "/manual_time"}
    assert {r["run_name"] for r in q_iter + d_iter} == names
    assert ({r["name"] for r in quick["benchmarks"] if r["run_type"] == "aggregate"}
            == {r["name"] for r in default["benchmarks"] if r["run_type"] == "aggregate"})

    # Google's compare.py (re-derived): every row of the point pairs, repetition by repetition.
    report = expectations.difference_report(quick, default)
    paired = {entry["name"]: len(entry["measurements"]) for entry in report}
    assert paired[KEY + "/manual_time"] == 3
    for stat in ("mean", "median", "stddev", "cv"):
        assert paired[f"{KEY}/manual_time_{stat}"] == 1

    # ci/compare.py: the point is compared (not "only in baseline" / "only in current").
    proc = subprocess.run([PYTHON, COMPARE, str(tmp_path / "quick"), str(tmp_path / "default"),
                           "--format", "json", "--allow-undecided"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    result = json.loads(proc.stdout)
    rows = [r for r in result["rows"] if r["key"] == KEY]
    assert rows and all(r["paired"] for r in rows), rows
    assert result["summary"]["rows_compared"] == len(rows)
