"""Issue 40 item 3: the verdicts of questions 000, 001, 002 and 003 come from uninstrumented
rows.

For the rows `lockline --list` plans (default suite and --quick, on this machine and on a
8-node topology), every 000/001/002/003 verdict plots/verdicts.py computes is answered from
the stats:off twins (lock_stat off) on both sides, its paired duet (where the suite has one)
pairs stats:off rows, and its lock_stat evidence names the instrumented twins. 002
(page_free atomic vs fastpath at on_lru_pct:0, 1 thread): 2.6.16's put_page takes lru_lock on
every final put (__page_cache_release, mm/swap.c@v2.6.16), the fast path there never does, so
instrumented rows put lock_stat's cost on one side only. The values are
synthetic (only the row selection is under test); a verdict computed from an instrumented row
fails the test.

Needs LOCKLINE_BINARY (set by ctest); skipped with a reason otherwise.
"""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "plots"))
sys.path.insert(0, os.path.join(HERE, "fixtures", "consistency"))

import verdicts  # noqa: E402
from make_synthetic import Rows  # noqa: E402

BINARY = os.environ.get("LOCKLINE_BINARY", "")
TOPOLOGIES = os.path.join(HERE, "..", "fixtures", "topologies")

pytestmark = pytest.mark.skipif(
    not (BINARY and os.access(BINARY, os.X_OK)),
    reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an executable lockline")


# The families of the questions answered from uninstrumented rows (verdicts.COMPARISONS).
FAMILIES = ("pagevec", "zone_lock", "page_free")


def listed(*args):
    """[(family, params in key order, threads)] of the rows `lockline --list ARGS` plans."""
    p = subprocess.run([BINARY, "--list", *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = []
    for line in p.stdout.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")[0].split("/")
        params = [tuple(kv.split(":", 1)) for kv in parts[1:]]
        threads = int(params[-1][1])
        out.append((parts[0], params[:-1], threads))
    return out


def synthetic_run(rows, tmp_path):
    """A lockline.json holding every pagevec / zone_lock / page_free row of `rows`, 6
    repetitions each in one regime; instrumented rows carry a wait share, as lock_stat's do."""
    r = Rows(seed=40)
    for family, params, threads in rows:
        if family not in FAMILIES:
            continue
        metrics = {"ops_per_s": 1e6 * threads, "pages_per_s": 1e6 * threads,
                   "ns_per_op": 1e3 / threads}
        if dict(params).get("stats") != "off":
            metrics["wait_share"] = 0.3
        r.add(family, dict(params), threads, metrics, reps=6)
    doc = {"context": {"host_name": "synthetic", "lockline": {"finished": True}},
           "benchmarks": r.rows}
    (tmp_path / "lockline.json").write_text(json.dumps(doc))
    from lockline_results import load_runs
    return load_runs([str(tmp_path)])[0]


@pytest.mark.parametrize("args", [[], ["--quick"],
                                  [f"--topology={os.path.join(TOPOLOGIES, 'opteron6276-4p-8n-64c.xml')}"]])
def test_seed_verdicts_come_from_stats_off_twins(args, tmp_path):
    if args and args[0].startswith("--topology") and not os.path.exists(args[0].split("=", 1)[1]):
        pytest.skip("no multi-node topology fixture")
    rows = listed(*args)
    run = synthetic_run(rows, tmp_path)
    duets = [(dict(params), n) for family, params, n in rows if family == "duet"]
    got = [v for v in verdicts.compute_verdicts(run)
           if v["question"] in verdicts.UNINSTRUMENTED_QUESTIONS]
    # Every question of the suite is answered (--quick: 001, 002 and 003; default: all four).
    want = {"001", "002", "003"} if args == ["--quick"] else {"000", "001", "002", "003"}
    assert {v["question"] for v in got} >= want, [v["id"] for v in got]
    for v in got:
        assert v["instrumented"] is False, v["id"]
        assert "/stats:off/" in v["base_key"] and "/stats:off/" in v["variant_key"], v["id"]
        ev = v["evidence"]
        assert ev is not None, v["id"]
        assert ev["base_key"] == v["base_key"].replace("/stats:off", ""), v["id"]
        assert ev["variant_key"] == v["variant_key"].replace("/stats:off", ""), v["id"]
        assert ev["wait_share"]["base"] is not None, v["id"]
    # Every verdict the default suite pairs (a duet of the same rows) pairs stats:off rows,
    # and no seed-question duet of the suite pairs instrumented rows.
    for params, n in duets:
        if params.get("param") == "stats" or params.get("of") not in FAMILIES:
            continue
        assert params.get("stats") == "off", params
    if not args:
        paired = 0
        for v in got:
            base = [p for p in run.points if p.key == v["base_key"]]
            spec = next(s for s in verdicts.COMPARISONS if s.id == v["id"].split("[")[0])
            want_params = {k: val for k, val in base[0].params.items() if k != spec.param}
            want_params.update({"of": spec.bench, "param": spec.param, "a": spec.base,
                                "b": spec.variant})
            paired += any(params == want_params and n == base[0].threads
                          for params, n in duets)
        # 000: slots x 2 work_ns, layout, offset x 2 work_ns; 001: ticket x 2; 002: 1 thread;
        # 003: x 2.
        assert paired >= 10, paired
        (v002,) = [v for v in got if v["question"] == "002"]
        assert v002["threads"] == 1 and v002["id"] == "page_free_fast_atomic", v002
        assert any(params.get("of") == "page_free" and params.get("stats") == "off"
                   and n == 1 for params, n in duets), duets


def test_an_instrumented_row_never_answers_when_its_twin_exists(tmp_path):
    """Both an instrumented pair and its stats:off twins: the twins answer, even where the
    instrumented rows match more preferred parameters (here zones:per_numa)."""
    rows = []
    for layout in ("lock_before_free_area", "lock_after_free_area"):
        for zones, stats in (("per_numa", None), ("1", None), ("1", "off")):
            params = [("layout", layout), ("lock", "ticket"), ("pcp_batch", "31"),
                      ("line", "64"), ("config", "cma"), ("zones", zones), ("work_ns", "cal")]
            if stats:
                params.append(("stats", stats))
            rows.append(("zone_lock", params, 2))
    run = synthetic_run(rows, tmp_path)
    (v,) = [v for v in verdicts.compute_verdicts(run) if v["question"] == "001"]
    assert v["base_key"].endswith("/zones:1/work_ns:cal/stats:off/threads:2")
    assert v["instrumented"] is False


def test_report_names_answering_rows_and_evidence(tmp_path):
    """The report's question sections say which rows answer (the stats:off twins) and which
    give the wait share (the instrumented twins), and each verdict's evidence line names the
    instrumented keys; never marked data-comparison (it is not the verdict)."""
    import report
    rows = []
    for layout in ("lock_before_free_area", "lock_after_free_area"):
        for stats in (None, "off"):
            params = [("layout", layout), ("lock", "ticket"), ("pcp_batch", "31"),
                      ("line", "64"), ("config", "cma"), ("zones", "1"), ("work_ns", "cal")]
            if stats:
                params.append(("stats", stats))
            rows.append(("zone_lock", params, 2))
    run = synthetic_run(rows, tmp_path)
    got = verdicts.compute_verdicts(run)
    note = report.rows_note(got, "001")
    assert "1 of 1 verdicts are answered from the uninstrumented rows" in note
    assert "wait share" in note and "instrumented twins" in note
    html = report.verdict_html(got, run)
    assert 'class="caption evidence"' in html
    assert "lock_stat evidence from the instrumented twins zone_lock/layout:" in html
    assert html.count("data-comparison") == 1
    assert report.rows_note(got, "004") == ""


def page_free_002_rows(twins=True):
    """Question 002's four rows at 1 thread: atomic and fastpath at on_lru_pct:0, free_cpu:same,
    lock:ttas, instrumented and (twins) their stats:off twins."""
    rows = []
    for variant in ("atomic", "fastpath"):
        for stats in (None, "off") if twins else (None,):
            params = [("variant", variant), ("on_lru_pct", "0"), ("free_cpu", "same"),
                      ("lock", "ttas")]
            if stats:
                params.append(("stats", stats))
            rows.append(("page_free", params, 1))
    return rows


def test_002_answers_from_its_twins_and_keeps_the_wait_share_as_evidence(tmp_path):
    """002 (ns saved per free) is answered from the stats:off twins, never the instrumented
    rows of the same point; the instrumented rows give the wait share (evidence), and the
    report says so for section q3."""
    import report
    run = synthetic_run(page_free_002_rows(), tmp_path)
    (v,) = [v for v in verdicts.compute_verdicts(run) if v["question"] == "002"]
    assert v["base_key"] == ("page_free/variant:atomic/on_lru_pct:0/free_cpu:same/lock:ttas/"
                             "stats:off/threads:1"), v["base_key"]
    assert v["variant_key"] == v["base_key"].replace("variant:atomic", "variant:fastpath")
    assert v["instrumented"] is False
    assert v["ns_saved"] is not None
    assert v["evidence"]["base_key"] == v["base_key"].replace("/stats:off", "")
    assert v["evidence"]["wait_share"]["base"] is not None
    assert not v["text"].startswith("from instrumented rows")
    note = report.rows_note([v], "002")
    assert "1 of 1 verdicts are answered from the uninstrumented rows" in note


def test_002_without_twins_says_it_is_from_instrumented_rows(tmp_path):
    """An older file without 002's twins is still answered, from the instrumented rows, and
    the record, its text and the report say so."""
    import report
    run = synthetic_run(page_free_002_rows(twins=False), tmp_path)
    (v,) = [v for v in verdicts.compute_verdicts(run) if v["question"] == "002"]
    assert "/stats:off" not in v["base_key"]
    assert v["instrumented"] is True and v["evidence"] is None
    assert v["text"].startswith("from instrumented rows")
    assert "From instrumented rows" in report.rows_note([v], "002")
