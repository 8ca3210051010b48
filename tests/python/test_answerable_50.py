"""Issue 50: a question is answered only where its mechanism can occur.

1. On every multi-node fixture topology, `--list` plans a pagevec scanner row (or its duet)
   only at a thread count where `--plan=json` gives each of its scanners (one per NUMA node for
   zones:per_numa, harness/run/runner.cpp HelperPus) a PU that runs no measured thread.
2. Question 003 prefers zones:per_numa rows (plots/verdicts.py PV_2020), checked on a synthetic
   multi-node run.
3. The 003 verdict of a run whose rows have 1 adder per lru_lock is "not answerable" with the
   numbers it needs; with 2 adders per lock and the scanner on a PU of its own it is answered.

Part 1 needs LOCKLINE_BINARY (set by ctest); skipped with a reason otherwise.
"""
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "plots"))

BINARY = os.environ.get("LOCKLINE_BINARY", "")
TOPOLOGIES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "topologies")
MULTI_NODE = ["opteron865-8n2c-cpuset-restricted.xml", "opteron6276-4p-8n-64c.xml",
              "llnl-corona-epyc7402-2p-16l3-96pu-hwloc1format.xml",
              "synthetic-spr-2p-snc4-224pu.xml"]
needs_binary = pytest.mark.skipif(
    not (BINARY and os.access(BINARY, os.X_OK)),
    reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an executable lockline")


def lockline(*args):
    p = subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


@needs_binary
@pytest.mark.parametrize("name", MULTI_NODE)
def test_plan_and_list_agree_on_scanner_pus(name):
    xml = os.path.join(TOPOLOGIES, name)
    plan = json.loads(lockline("--plan=json", f"--topology={xml}"))
    nodes = max(1, plan["numa_nodes"])
    listed = [line.split("\t")[0] for line in lockline("--list", f"--topology={xml}").splitlines()
              if line and not line.startswith("#")]
    scanner_rows = [k for k in listed if "/scanner:on" in k
                    and k.startswith(("pagevec/", "duet/of:pagevec/"))]
    assert any("zones:per_numa" in k for k in scanner_rows), name
    for key in scanner_rows:
        threads = key.rsplit("threads:", 1)[1]
        at = plan["plans"][threads]
        want = nodes if "zones:per_numa" in key else 1
        helpers = at["helpers"][:want]
        assert len(helpers) == want, (name, key)
        for h in helpers:
            # --list plans the row, so --plan must give each scanner a PU of its own.
            assert not h["refused"] and h["pu"] not in at["pus"], (name, key, h)
            assert not h["shares_measured_pu"], (name, key, h)


@needs_binary
def test_opteron865_per_numa_rows_at_8_threads_are_skipped_with_the_reason():
    xml = os.path.join(TOPOLOGIES, MULTI_NODE[0])
    out = lockline("--list", f"--topology={xml}")
    skipped = [l for l in out.splitlines() if l.startswith("# skipped pagevec/")
               and "zones:per_numa" in l and "scanner:on" in l and "/threads:8:" in l]
    assert skipped
    assert all("needs 12 PUs (threads + a spare PU for each of its 4 helper threads, one per "
               "NUMA node), 10 usable" in l for l in skipped), skipped[0]


# ---------------------------------------------------------------- verdicts (synthetic rows)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures", "consistency"))

import verdicts  # noqa: E402
from make_synthetic import Rows, build  # noqa: E402

PV58 = {"mode": "deferred", "offset": "0", "policy": "fixed", "lock": "qspinlock",
        "work_ns": "cal", "kernel": "5.8", "release": "none", "scanner": "on", "stats": "off"}


def _run(tmp_path, rows, usable_pus):
    doc = {"context": {"host_name": "synthetic",
                       "lockline": {"finished": True,
                                    "topology": {"pus": usable_pus, "usable_pus": usable_pus}}},
           "benchmarks": rows}
    (tmp_path / "lockline.json").write_text(json.dumps(doc))
    from lockline_results import load_runs
    return load_runs([str(tmp_path)])[0]


def _pagevec58(r, zones, threads, nodes, shares=False, per_numa_gain=1.07):
    for slots, f in (("15", 1.0), ("31", per_numa_gain)):
        start = len(r.rows)
        r.add("pagevec", {**PV58, "slots": slots, "zones": zones}, threads,
              {"pages_per_s": 5e6 * f * threads, "ops_per_s": 5e6 * f * threads}, reps=6)
        for row in r.rows[start:]:
            row["placement"] = {"numa_nodes": nodes}
            row["details"] = {"scanner": {"on": True, "shares_measured_pu": shares}}


def _v003(run):
    return [v for v in verdicts.compute_verdicts(run) if v["question"] == "003"]


def test_003_prefers_per_numa_rows_on_a_multi_node_run(tmp_path):
    r = Rows(seed=50)
    _pagevec58(r, "1", 8, 4, per_numa_gain=0.9)
    _pagevec58(r, "per_numa", 8, 4)
    (v,) = _v003(_run(tmp_path, r.rows, 16))
    assert "/zones:per_numa/" in v["base_key"] and "/zones:per_numa/" in v["variant_key"], v
    # 8 threads over 4 nodes: 2 adders per node's lru_lock, the scanners on PUs of their own.
    assert v["status"] == "resolved" and v["effect"] > 0.05, v["text"]


def test_003_with_one_adder_per_lock_is_not_answerable(tmp_path):
    r = Rows(seed=50)
    _pagevec58(r, "1", 1, 1)
    (v,) = _v003(_run(tmp_path, r.rows, 2))
    assert v["status"] == "not_answerable" and v["resolved"] is False
    assert v["text"].startswith("not answerable on 2 PUs: needs at least 2 threads adding pages "
                                "per lru_lock plus a PU of its own for each lock's reclaim "
                                "scanner (3 PUs for one node's lru_lock"), v["text"]
    assert "these rows have 1 adder per lock" in v["text"]
    assert "not an answer" in v["text"] and v["effect"] is not None
    assert v["not_answerable"]["usable_pus"] == 2


def test_003_per_numa_spreads_adders_and_a_shared_scanner_refuses(tmp_path):
    r = Rows(seed=50)
    _pagevec58(r, "per_numa", 4, 4)  # 1 adder per node's lock
    (v,) = _v003(_run(tmp_path, r.rows, 16))
    assert v["status"] == "not_answerable" and "1 adder per lock" in v["text"]
    r = Rows(seed=50)
    _pagevec58(r, "1", 4, 1, shares=True)
    (v,) = _v003(_run(tmp_path, r.rows, 4))
    assert v["status"] == "not_answerable" and "a scanner on a measured PU" in v["text"]


def test_001_needs_two_threads_per_zone_lock(tmp_path):
    r = Rows(seed=50)
    for layout, f in (("lock_before_free_area", 1.0), ("lock_after_free_area", 1.3)):
        r.add("zone_lock", {"layout": layout, "lock": "ticket", "pcp_batch": "31", "line": "64",
                            "config": "cma", "zones": "1", "work_ns": "cal", "stats": "off"},
              1, {"ops_per_s": 2e6 * f}, reps=6)
    (v,) = [v for v in verdicts.compute_verdicts(_run(tmp_path, r.rows, 2))
            if v["question"] == "001"]
    assert v["status"] == "not_answerable"
    assert "needs at least 2 threads per zone->lock" in v["text"], v["text"]


def test_report_renders_not_answerable_consistently(tmp_path):
    """The synthetic consistency run with its 003 scanners on measured PUs: verdicts.json, the
    verdict line, the table and the figure agree (report_checks finds nothing), and the section
    gives the predicted answer or says why it is unavailable (synthetic rows carry no hold
    times, so predict refuses them)."""
    import report
    doc = build()
    doc["context"]["lockline"]["topology"] = {"pus": 2, "usable_pus": 2}
    for row in doc["benchmarks"]:
        if row["family"] == "pagevec" and row["params"].get("kernel") == "5.8":
            row["details"] = {"scanner": {"on": True, "shares_measured_pu": True}}
    (tmp_path / "lockline.json").write_text(json.dumps(doc))
    out, problems = report.write_report(str(tmp_path))
    assert problems == []
    got = json.loads((tmp_path / "verdicts.json").read_text())["verdicts"]
    (v,) = [v for v in got if v["question"] == "003"]
    assert v["status"] == "not_answerable"
    page = open(out).read()
    q4 = page.split('<section id="q4">')[1].split("</section>")[0]
    assert "not answerable on 2 PUs" in q4
    assert "Predicted, not measured" in q4 and "unavailable (predict: " in q4
    # 003, and 004's busy rows at 1 thread of 2 usable PUs.
    assert "and 2 not answerable on it" in page
