"""Tests of the false_sharing verdicts (plots/families.py): the smallest counter distance with
no slowdown per PU-pair class, from synthetic repetitions with known effects."""

import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "plots"))

import families  # noqa: E402
import lockline_results as lr  # noqa: E402


def points(ns_by_distance, n=9, cv=0.02, pair="l3_shared", op="inc", regime="near", seed=0):
    """n repetitions per distance of ns/op around the given centre (fixed seed)."""
    rng = np.random.default_rng(seed)
    out = []
    for d, centre in ns_by_distance.items():
        for i, v in enumerate(centre * (1 + cv * rng.standard_normal(n))):
            out.append(lr.Point(family="false_sharing", bench="false_sharing",
                                params={"op": op, "distance": str(d), "pair": pair}, threads=2,
                                metrics={"ns_per_op": float(v)}, repetition=i,
                                coherence=regime))
    return out


def test_adjacent_line_pair_slowdown_gives_128():
    """Slow up to 64 B (adjacent-line prefetch pair), flat from 128 B: the answer is 128 B."""
    rows = families.false_sharing_verdicts(
        points({8: 40.0, 32: 40.0, 64: 20.0, 128: 5.0, 256: 5.0}))
    assert len(rows) == 1
    assert rows[0]["smallest"].startswith("128 B"), rows[0]
    assert "64 B: +" in rows[0]["effects"]


def test_no_slowdown_anywhere():
    rows = families.false_sharing_verdicts(points({8: 5.0, 64: 5.0, 128: 5.0, 256: 5.0}))
    assert rows[0]["smallest"].startswith("8 B: even the closest"), rows[0]


def test_too_few_repetitions_is_not_resolved():
    rows = families.false_sharing_verdicts(points({8: 40.0, 64: 5.0, 256: 5.0}, n=2))
    assert rows[0]["smallest"].startswith("not resolved here"), rows[0]


def test_open_answer_still_says_what_was_resolved():
    """Issue 25 item 3: false sharing resolved below 64 B, 64 B still slower, 128 B too noisy
    to say against 256 B: the answer names all three, with the same numbers as the effects."""
    pts = (points({8: 40.0, 32: 44.0, 64: 10.7, 256: 10.0}, n=9, cv=0.01)
           + points({128: 10.0}, n=9, cv=0.25, seed=5))
    rows = families.false_sharing_verdicts(pts)
    answer, effects = rows[0]["smallest"], rows[0]["effects"]
    assert answer.startswith("not resolved here"), answer
    assert "slower than 256 B at 8 B +" in answer and "32 B +" in answer and "64 B +" in answer
    assert "not resolved against 256 B: 128 B (" in answer
    for part in effects.split("; "):
        d, interval = part.split(": ", 1)
        assert interval in answer, (d, interval, answer)


def test_one_row_per_pair_class_and_op():
    pts = (points({64: 20.0, 256: 5.0}, pair="smt") +
           points({64: 20.0, 256: 5.0}, pair="package_remote", op="xadd", seed=3))
    rows = families.false_sharing_verdicts(pts)
    assert [(r["pair"], r["op"]) for r in rows] == [("smt", "inc"), ("package_remote", "xadd")]


BINARY = os.environ.get("LOCKLINE_BINARY", "")
TOPOLOGIES = os.path.join(os.path.dirname(HERE), "fixtures", "topologies")


def listed_pairs(topology):
    """{pair class: "PUs a and b"} of the full suite's false_sharing rows on a fixture topology."""
    import re
    import subprocess
    p = subprocess.run([BINARY, "--list", "--full", f"--topology={topology}",
                        "--benchmark_filter=^false_sharing/op:inc/distance:8/"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return {m.group(2): m.group(1) for m in
            re.finditer(r"(PUs \d+ and \d+) \((\w+)\)", p.stdout)}


@pytest.mark.skipif(not os.access(BINARY, os.X_OK), reason="LOCKLINE_BINARY is not set (ctest sets it)")
def test_pair_classes_follow_the_topology():
    """Each fixture gets exactly the PU-pair classes its caches and packages have: a Bulldozer
    module's two cores share an L2 (l2_shared), a Lakefield's four E-cores share one L2, the
    EPYC 7402 has SMT and 16 L3s over 2 packages but no shared L2."""
    bulldozer = listed_pairs(os.path.join(TOPOLOGIES, "opteron6276-4p-8n-64c.xml"))
    assert set(bulldozer) == {"l2_shared", "l3_shared", "package_local", "package_remote"}
    assert bulldozer["l2_shared"] == "PUs 0 and 1"
    lakefield = listed_pairs(os.path.join(TOPOLOGIES,
                                          "intel-lakefield-i5-l16g7-1p4e-hybrid.xml"))
    assert set(lakefield) == {"l2_shared", "l3_shared"}
    epyc = listed_pairs(os.path.join(TOPOLOGIES,
                                     "llnl-corona-epyc7402-2p-16l3-96pu-hwloc1format.xml"))
    assert set(epyc) == {"smt", "l3_shared", "package_local", "package_remote"}
