"""The lockline binary as a user meets it: bad input, planning on other machines' topologies,
layouts, listing, and a run killed half-way that keeps what it measured.

Needs LOCKLINE_BINARY (set by ctest); skipped with a reason otherwise.
"""
import json
import os
import signal
import subprocess
import tempfile
import time

import pytest

BINARY = os.environ.get("LOCKLINE_BINARY", "")
TOPOLOGIES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "topologies")

pytestmark = pytest.mark.skipif(
    not (BINARY and os.access(BINARY, os.X_OK)),
    reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an executable lockline")


def run(*args, timeout=120):
    """Runs lockline with args; returns the CompletedProcess (text, both streams captured)."""
    return subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=timeout)


def usable_pus():
    """Number of usable PUs as the binary plans them (largest `max` thread count)."""
    out = run("--plan", "--threads=max").stdout
    counts = [int(line.split()[1].rstrip(":")) for line in out.splitlines()
              if line.startswith("threads ")]
    return max(counts)


@pytest.mark.parametrize("args, bad", [
    (["--frobnicate"], "--frobnicate"),
    (["--pin=0-"], "0-"),
    (["--pin=a"], "a"),
    (["--pin=1,1"], "1"),
    (["--pin=4096"], "4096"),
    (["--threads=0"], "0"),
    (["--threads=two"], "two"),
    (["--mem=remote"], "remote"),
    (["--budget=soon"], "soon"),
    (["--window=-1s"], "-1s"),
    (["--events=cycles:x"], "cycles:x"),
    (["--topology=/nonexistent/machine.xml", "--plan"], "/nonexistent/machine.xml"),
    (["--topology=synthetic:pack:x", "--plan"], "pack:x"),
    (["--benchmark_filter=^no_such_family/"], "no_such_family"),
    (["--quick", "--full"], "--quick"),
    (["--precision=0"], "0"),
    (["--precision=60%"], "60%"),
    (["--precision=tight"], "tight"),
])
def test_bad_input_is_one_clear_error(args, bad):
    p = run(*args)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, p.stderr
    assert bad in lines[0] and lines[0].startswith("lockline: error:"), lines[0]


def test_more_threads_than_pus_needs_oversubscribe():
    n = usable_pus() + 1
    p = run(f"--threads={n}", "--plan")
    assert p.returncode == 2
    assert str(n) in p.stderr and "--oversubscribe" in p.stderr
    assert run(f"--threads={n}", "--plan", "--oversubscribe").returncode == 0


def test_hwloc3_topology_is_refused_by_name(tmp_path):
    xml = tmp_path / "v3.xml"
    xml.write_text('<?xml version="1.0"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n'
                   '<topology version="3.0">\n</topology>\n')
    p = run(f"--topology={xml}", "--plan")
    assert p.returncode == 2
    assert "hwloc 3" in p.stderr or "3.0" in p.stderr, p.stderr


def test_unwritable_out_fails_before_any_point(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    p = run("--quick", "--benchmark_filter=calibration/op", f"--out={blocker}/run")
    assert p.returncode == 2
    assert str(blocker) in p.stderr
    assert "[1/" not in p.stdout  # no point ran


def test_an_earlier_run_is_never_overwritten(tmp_path):
    out = tmp_path / "run"
    first = run("--quick", "--benchmark_filter=calibration/op:cas", "--window=5ms",
                "--benchmark_repetitions=1", f"--out={out}")
    assert first.returncode == 0, first.stderr
    before = (out / "lockline.json").read_text()
    again = run("--quick", "--benchmark_filter=calibration/op:cas", f"--out={out}")
    assert again.returncode == 2 and "already holds" in again.stderr
    assert (out / "lockline.json").read_text() == before


def test_benchmarks_refuse_a_foreign_topology():
    p = run("--topology=synthetic:pack:2 core:2 pu:1", "--quick")
    assert p.returncode == 2 and "--plan" in p.stderr


def test_synthetic_plan_prints_every_count_up_to_256():
    p = run("--plan", "--topology=synthetic:pack:4 numa:2 core:16 pu:2", timeout=30)
    assert p.returncode == 0, p.stderr
    counts = [int(l.split()[1].rstrip(":")) for l in p.stdout.splitlines()
              if l.startswith("threads ")]
    assert counts[0] == 1 and counts[-1] == 256
    for boundary in (16, 32, 128):  # NUMA node, package, all cores
        assert boundary in counts


@pytest.mark.parametrize("fixture", [
    "llnl-corona-epyc7402-2p-16l3-96pu-hwloc1format.xml",
    "intel-lakefield-i5-l16g7-1p4e-hybrid.xml",
    "opteron865-8n2c-cpuset-restricted.xml",
    "opteron6276-4p-8n-64c.xml",
])
def test_real_machines_plan(fixture):
    path = os.path.join(TOPOLOGIES, fixture)
    if not os.path.exists(path):
        pytest.skip(f"fixture {path} not present")
    for pin in ("cores", "compact", "scatter"):
        p = run("--plan", f"--topology={path}", f"--pin={pin}")
        assert p.returncode == 0, p.stderr
        assert "threads 1:" in p.stdout


def test_layouts_show_the_real_pagevec_sizes():
    p = run("--layouts")
    assert p.returncode == 0
    assert "136" in p.stdout and "128" in p.stdout and "cacheline" in p.stdout
    layouts = json.loads(run("--layouts=json").stdout)
    assert len(layouts) > 10


def test_list_shows_keys_of_every_family():
    p = run("--list")
    assert p.returncode == 0
    families = {line.split("/")[0] for line in p.stdout.splitlines() if not line.startswith("#")}
    assert {"calibration", "locks"} <= families


ZONE_PAIR = (r"^zone_lock/layout:lock_(before|after)_free_area/lock:ticket/pcp_batch:31/line:64/"
             r"config:cma/zones:[^/]+/")


def _zone_pair_keys(*args):
    """The zone_lock question pair's keys (ticket, before/after free_area, pcp 31, cma, 64-byte
    lines) --list prints, without the thread count: {(layout, rest after zones:Z/)}."""
    import re
    p = run("--list", "--benchmark_filter=^zone_lock/", *args)
    assert p.returncode == 0, p.stderr
    out = set()
    for line in p.stdout.splitlines():
        m = re.match(ZONE_PAIR + r"(.*)/threads:\d+", line.split()[0] if line.strip() else "")
        if m:
            out.add((m.group(1), m.group(2)))
    return out, p.stdout


def test_default_suite_pairs_every_seed_comparison_and_each_twin():
    """The default suite's duet rows: one per seed comparison a duet can hold (000, 001, 002,
    003; the pre-zeroing bursts are fixed work and unpaired), each both sides of a row the
    list has; --full pairs each family's instrumented row against its /stats:off twin."""
    p = run("--list")
    assert p.returncode == 0, p.stderr
    keys = [line.split()[0] for line in p.stdout.splitlines() if line.strip()]
    duets = [k for k in keys if k.startswith("duet/")]
    described = {line.split("\t")[0]: line for line in p.stdout.splitlines() if "\t" in line}
    questions = {described[k].split("question ")[1][:3] for k in duets if "question " in
                 described[k]}
    assert {"000", "001", "002", "003"} <= questions, duets
    for param, family in (("slots", "pagevec"), ("layout", "pagevec"), ("offset", "pagevec"),
                          ("layout", "zone_lock"), ("variant", "page_free")):
        assert any(k.startswith(f"duet/of:{family}/param:{param}/") for k in duets), duets
    # lock_stat's own cost is not a question: its duets are in --full only
    assert not [k for k in duets if "/param:stats/a:on/b:off/" in k], duets
    p = run("--full", "--list")
    assert p.returncode == 0, p.stderr
    keys = [line.split()[0] for line in p.stdout.splitlines() if line.strip()]
    twins = [k for k in keys if k.startswith("duet/") and "/param:stats/a:on/b:off/" in k]
    assert {k.split("/")[1] for k in twins} == {"of:pagevec", "of:zone_lock"}, twins
    for k in twins:  # the twin the duet names is a row of the list
        rest = k.split("/b:off/")[1]
        family = k.split("/")[1][3:]
        assert f"{family}/{rest.rsplit('/threads:', 1)[0]}/stats:off/threads:" + \
            rest.rsplit("/threads:", 1)[1] in keys, k


def test_list_shows_zone_lock_work_axis_and_stats_off_twins():
    """Default suite: the question pair at work_ns:cal and work_ns:0 (saturated) and their
    uninstrumented twins (key ends stats:off before threads; the verdicts' rows, issue 40
    item 3); other zone_lock points only at work_ns:cal. --quick: the pair at work_ns:cal and
    its twins only."""
    keys, listing = _zone_pair_keys()
    for layout in ("before", "after"):
        for work in ("work_ns:cal", "work_ns:0"):
            assert (layout, work) in keys, listing
            assert (layout, work + "/stats:off") in keys, listing
    others = [line for line in listing.splitlines() if line.startswith("zone_lock/")
              and "/work_ns:0" in line and "lock:ticket/pcp_batch:31/line:64/config:cma/" not in line]
    assert others == [], others
    quick, listing = _zone_pair_keys("--quick")
    assert quick == {(layout, work) for layout in ("before", "after")
                     for work in ("work_ns:cal", "work_ns:cal/stats:off")}, listing
    assert "/work_ns:0" not in listing


def test_killed_run_keeps_its_finished_points(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen([BINARY, "--quick", "--window=20ms", "--benchmark_repetitions=3",
                             "--benchmark_filter=^(calibration|locks)/", f"--out={out}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = out / "lockline.json"
    deadline = time.time() + 120
    rows = 0
    try:
        while time.time() < deadline and rows < 2:
            time.sleep(0.05)
            try:
                rows = len(json.loads(path.read_text())["benchmarks"])
            except (OSError, ValueError, KeyError):
                pass  # not written yet: the file is replaced atomically, never half-written
        assert rows >= 2, "no point finished within 120 s"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    doc = json.loads(path.read_text())  # still valid JSON
    assert doc["context"]["lockline"]["finished"] is False
    assert len(doc["benchmarks"]) >= 2
    assert all("lockline_key" in r for r in doc["benchmarks"])
