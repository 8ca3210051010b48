"""Issue 36, big machines: helper placement in `--plan` (text and json) on the hand-made 2-socket
SNC4 topology (tests/fixtures/topologies/synthetic-spr-2p-snc4-224pu.xml), unranked CPU kinds said
in the plan, and a hang inside hwloc's discovery (its binding to each PU) ended by the set-up
limit instead of hanging lockline silently.

Needs LOCKLINE_BINARY (set by ctest); skipped with a reason otherwise.
"""
import json
import os
import shutil
import subprocess
import time

import pytest

BINARY = os.environ.get("LOCKLINE_BINARY", "")
TOPOLOGIES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "topologies")
SPR = os.path.join(TOPOLOGIES, "synthetic-spr-2p-snc4-224pu.xml")

pytestmark = pytest.mark.skipif(
    not (BINARY and os.access(BINARY, os.X_OK)),
    reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an executable lockline")


def run(*args, timeout=120, env=None):
    return subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


@pytest.mark.parametrize("pin", ["cores", "compact", "scatter"])
def test_snc4_plan_json_never_puts_a_helper_on_a_measured_pu(pin):
    counts = "1,2,4,8,14,16,28,32,56,64,112,128,223,224"
    p = run("--plan=json", f"--topology={SPR}", f"--pin={pin}", f"--threads={counts}")
    assert p.returncode == 0, p.stderr
    plans = json.loads(p.stdout)["plans"]
    assert len(plans) == 14
    for n, plan in plans.items():
        measured = set(plan["pus"])
        helpers = plan["helpers"]
        assert len(helpers) == 8, n  # one per NUMA node (pagevec zones:per_numa)
        # Every free PU serves one helper; the rest are refused (pu -1), never shared.
        assert sum(not h["refused"] for h in helpers) == min(8, 224 - int(n)), n
        for h in helpers:
            assert h["why"], (n, h)
            if h["refused"]:
                assert h["pu"] == -1
                continue
            assert h["pu"] not in measured, (pin, n, h)
            assert not h["shares_measured_pu"]
            assert {"core", "l3", "numa", "kind", "smt_sibling_of_measured"} <= set(h)


def test_snc4_plan_text_says_where_each_helper_runs():
    p = run("--plan", f"--topology={SPR}", "--threads=14,28,112,224")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    helper_lines = [l for l in lines if l.startswith("  helper ")]
    assert len(helper_lines) == 4 * 8
    at14 = lines[lines.index(next(l for l in lines if l.startswith("threads 14:"))) + 1]
    assert at14.startswith("  helper 0 (prezero zeroer")
    assert "node 1" in at14 and "NUMA distance 12" in at14, at14
    assert any("idle SMT sibling" in l for l in helper_lines)
    assert "own PU" not in p.stdout
    # The table still starts after the helper lines and every line after it is a row.
    start = next(i for i, l in enumerate(lines) if l.split()[:2] == ["thread", "pu"])
    assert all(len(l.split()) == 8 for l in lines[start + 1:])


def test_unranked_kinds_are_said_in_the_plan():
    xml = os.path.join(TOPOLOGIES, "synthetic-2kinds-unranked-8c.xml")
    want = "2 CPU kinds found but not ranked: sweep order is by OS index; --pin=LIST sets it"
    p = run("--plan", f"--topology={xml}")
    assert p.returncode == 0, p.stderr
    assert want in p.stdout
    j = json.loads(run("--plan=json", f"--topology={xml}").stdout)
    assert j["cpukinds_ranked"] is False and j["warnings"] == [want]


HANG_SHIM = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>
#include <dlfcn.h>
/* Every sched_setaffinity hangs: hwloc's x86 backend binds to each PU while it discovers. */
int sched_setaffinity(pid_t pid, size_t size, const cpu_set_t* set) {
  (void)pid; (void)size; (void)set;
  for (;;) pause();
}
"""


def test_hang_in_hwloc_discovery_binding_ends_with_one_line(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the hanging sched_setaffinity shim")
    src = tmp_path / "hang.c"
    src.write_text(HANG_SHIM)
    shim = tmp_path / "hang.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(shim), str(src)], check=True)
    env = dict(os.environ, LD_PRELOAD=str(shim), LOCKLINE_SETUP_TIMEOUT="1s")
    t0 = time.monotonic()
    try:
        p = run("--plan", "--topology=host", timeout=30, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("lockline hung in hwloc's discovery (no set-up limit)")
    took = time.monotonic() - t0
    if p.returncode == 0:
        pytest.skip("hwloc did not bind during discovery on this host (one PU, or not x86)")
    assert p.returncode == 3, (p.returncode, p.stderr)
    errs = [l for l in p.stderr.splitlines() if l.startswith("lockline: error:")]
    assert len(errs) == 1, p.stderr
    assert "topology discovery of 'host'" in errs[0] and "LOCKLINE_SETUP_TIMEOUT" in errs[0]
    assert took < 20
