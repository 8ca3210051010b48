"""Issue 40's verdict changes in plots/verdicts.py: question 002 answers in ns saved per free
(item 9) and the alignment question gives one verdict per work_ns, calibrated first (item 7)."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "plots"))

import verdicts  # noqa: E402
from lockline_results import Point  # noqa: E402


def point(variant, ops, rep, threads=1, work=None):
    params = {"variant": variant, "on_lru_pct": "0", "free_cpu": "same", "lock": "ttas"}
    return Point(family="page_free", bench="page_free", params=params, threads=threads,
                 metrics={"ops_per_s": ops, "ns_per_op": 1e9 / ops}, repetition=rep,
                 coherence="unknown", key="page_free/variant:" + variant)


def test_ns_saved_maps_the_effect_and_its_interval():
    base = [point("atomic", 1e9 / 50.0, r) for r in range(5)]  # 50 ns per free
    saved = verdicts.ns_saved(base, 0.25, (0.20, 0.30))
    # 50 ns at +25 % ops/s is 40 ns: 10 ns saved; the bounds map the same way.
    assert abs(saved["ns"] - 10.0) < 1e-9
    assert abs(saved["ci"][0] - 50 * (1 - 1 / 1.2)) < 1e-9
    assert abs(saved["ci"][1] - 50 * (1 - 1 / 1.3)) < 1e-9
    assert abs(saved["base_ns"] - 50.0) < 1e-9
    assert verdicts.ns_saved(base, None, None) is None


def test_question_002_verdict_is_in_ns_saved_per_free():
    base = [point("atomic", 1e9 / (50.0 * (1 + 0.001 * (r % 3))), r) for r in range(9)]
    var = [point("fastpath", 1e9 / (40.0 * (1 + 0.001 * (r % 3))), r) for r in range(9)]
    spec = next(s for s in verdicts.COMPARISONS if s.id == "page_free_fast_atomic")
    assert spec.unit == "ns_saved"
    rec = verdicts.verdict_record(spec, "ops_per_s", base, var, 1, (), 0.01)
    assert rec["ns_saved"] is not None
    assert 9.0 < rec["ns_saved"]["ns"] < 11.0
    if rec["resolved"]:
        assert "ns saved per operation" in rec["text"]


def test_alignment_question_groups_by_work_ns_calibrated_first():
    spec = next(s for s in verdicts.COMPARISONS if s.id == "pv_offset_0_8")
    assert spec.group_by == ("work_ns",)
    assert ("work_ns", "0") not in spec.prefer
    order = sorted([(("work_ns", "0"),), (("work_ns", "cal"),)], key=verdicts._group_order)
    assert order[0] == (("work_ns", "cal"),)
    assert "saturated" in " ".join(verdicts.group_text((("work_ns", "0"),)))


def test_paired_ns_saved_takes_its_base_from_the_duet_windows():
    """The paired answer's ns saved uses its own duet's base windows, not the base rows'
    repetitions (measured at other moments: under load they read 46 ns where the duet's
    base windows read 19 ns)."""
    base = [point("atomic", 1e9 / 46.0, r) for r in range(5)]  # the base rows: slow, loaded
    var = [point("fastpath", 1e9 / 37.0, r) for r in range(5)]
    duet = []
    for r in range(5):
        pairs = [{"a_ops_per_s": 1e9 / (20.0 * (1 + 0.002 * k)),
                  "b_ops_per_s": 1e9 / (16.0 * (1 + 0.002 * k))} for k in range(12)]
        duet.append(Point(family="duet", bench="duet", params={"of": "page_free"}, threads=1,
                          metrics={"ops_per_s": 1e9 / 20.0}, repetition=r, coherence="unknown",
                          key="duet/of:page_free", row={"details": {"duet": {"pairs": pairs}}}))
    spec = next(s for s in verdicts.COMPARISONS if s.id == "page_free_fast_atomic")
    rec = verdicts.verdict_record(spec, "ops_per_s", base, var, 1, (), 0.01, duet=duet)
    saved = rec["ns_saved"]
    assert saved["base_from"] == "duet windows"
    assert abs(saved["base_ns"] - 20.0 * 1.011) < 0.1  # the median pair's base window
    assert 3.8 < saved["ns"] < 4.2  # 20 ns -> 16 ns
    alone = verdicts.ns_saved(base, 0.25, None)
    assert alone["base_from"] == "base rows" and abs(alone["base_ns"] - 46.0) < 1e-9
