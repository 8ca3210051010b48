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
