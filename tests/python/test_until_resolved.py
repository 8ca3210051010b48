"""`lockline --until-resolved`: re-runs the points of unresolved comparisons.

The statistics (plots/verdicts.py) are not under test here: a stub verdicts.py in a temporary
LOCKLINE_PLOTS_DIR decides "resolved" from repetition counts alone, so the loop, the rows it adds
and the flag's validation are checked in seconds, without timing.

Needs LOCKLINE_BINARY (set by ctest); skipped with a reason otherwise.
"""
import json
import os
import subprocess

import pytest

BINARY = os.environ.get("LOCKLINE_BINARY", "")
TICKET = "locks/lock:ticket/cs:0/stats:off/threads:2"
MCS = "locks/lock:mcs/cs:0/stats:off/threads:2"
FILTER = "--benchmark_filter=^locks/lock:(ticket|mcs|tas)/cs:0/stats:off/threads:2"

pytestmark = pytest.mark.skipif(
    not (BINARY and os.access(BINARY, os.X_OK)),
    reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an executable lockline")

# A stand-in for plots/verdicts.py: one comparison ticket vs MCS, resolved once each side has
# NEED repetitions (NEED = 0: never resolved); one comparison of points not in the run; one
# always resolved. Logs every call.
STUB = '''
import json, os, sys
NEED = {need}
run = sys.argv[1]
with open(os.path.join(run, "lockline.json")) as f:
    doc = json.load(f)
n = {{}}
for r in doc["benchmarks"]:
    if r.get("run_type") == "iteration":
        n[r["lockline_key"]] = n.get(r["lockline_key"], 0) + 1
ok = NEED > 0 and n.get("{ticket}", 0) >= NEED and n.get("{mcs}", 0) >= NEED
verdicts = [
    {{"question": "900", "base_key": "{ticket}", "variant_key": "{mcs}", "resolved": ok,
      "status": "resolved" if ok else "not_resolved"}},
    {{"question": "901", "base_key": "{ticket}", "variant_key": "{tas}", "resolved": True,
      "status": "resolved"}},
]
with open(os.path.join(run, "verdicts.json"), "w") as f:
    json.dump({{"schema": 1, "min_effect": 0.05, "verdicts": verdicts}}, f)
with open(os.path.join(os.path.dirname(__file__), "calls.log"), "a") as f:
    f.write(str(n.get("{ticket}", 0)) + "\\n")
'''


def stub_dir(tmp_path, need):
    """A plots directory holding only the stub verdicts.py."""
    d = tmp_path / "plots"
    d.mkdir()
    (d / "verdicts.py").write_text(STUB.format(need=need, ticket=TICKET, mcs=MCS,
                                               tas="locks/lock:tas/cs:0/stats:off/threads:2"))
    return d


def run(tmp_path, plots, *args, timeout=120):
    """Runs lockline with LOCKLINE_PLOTS_DIR=plots on the ticket, MCS and TAS points."""
    env = dict(os.environ, LOCKLINE_PLOTS_DIR=str(plots))
    return subprocess.run([BINARY, "--window=2ms", "--events=none",
                           "--benchmark_repetitions=2", FILTER, f"--out={tmp_path / 'run'}",
                           *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_reruns_open_comparisons_until_resolved(tmp_path):
    plots = stub_dir(tmp_path, need=5)
    p = run(tmp_path, plots, "--until-resolved=60s")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 of 2 comparisons open" in p.stdout
    assert "0 of 2 comparisons open" in p.stdout
    with open(tmp_path / "run" / "lockline.json") as f:
        doc = json.load(f)
    ctx = doc["context"]["lockline"]
    assert ctx["finished"] is True
    assert ctx["until_resolved"]["stopped"] == "resolved"
    assert ctx["until_resolved"]["open"] == 0 and ctx["until_resolved"]["rounds"] >= 1
    rows = [r for r in doc["benchmarks"] if r["run_type"] == "iteration"]
    for key, want_extra in ((TICKET, True), (MCS, True),
                            ("locks/lock:tas/cs:0/stats:off/threads:2", False)):
        mine = [r for r in rows if r["lockline_key"] == key]
        assert sorted(r["repetition_index"] for r in mine) == list(range(len(mine)))
        extra = [r for r in mine if "resolve_round" in r]
        assert bool(extra) == want_extra, key
        if want_extra:
            assert len(mine) >= 5
            assert len({r["family_index"] for r in mine}) == 1
        agg = [r for r in doc["benchmarks"]
               if r["run_type"] == "aggregate" and r["lockline_key"] == key]
        assert len(agg) == 4 and {a["repetitions"] for a in agg} == {len(mine)}
    with open(tmp_path / "run" / "verdicts_planned.json") as f:
        assert not json.load(f)["verdicts"][0]["resolved"]
    calls = (plots / "calls.log").read_text().split()
    assert len(calls) >= 2 and calls[0] == "2"


def test_stops_when_the_extra_time_is_spent(tmp_path):
    plots = stub_dir(tmp_path, need=0)
    p = run(tmp_path, plots, "--until-resolved=1500ms")
    assert p.returncode == 0, p.stdout + p.stderr
    with open(tmp_path / "run" / "lockline.json") as f:
        ctx = json.load(f)["context"]["lockline"]
    assert ctx["until_resolved"]["stopped"] == "time_spent"
    assert ctx["until_resolved"]["open"] == 1
    assert ctx["until_resolved"]["spent_s"] < 10


def test_plain_run_keeps_its_budget(tmp_path):
    plots = stub_dir(tmp_path, need=5)
    p = run(tmp_path, plots)
    assert p.returncode == 0, p.stdout + p.stderr
    assert not (plots / "calls.log").exists()
    assert not (tmp_path / "run" / "verdicts.json").exists()


@pytest.mark.parametrize("extra, what", [
    ([], "verdicts.py"),
    (["--benchmark_out=x.json"], "--benchmark_out"),
    (["--until-resolved=soon"], "soon"),
])
def test_bad_until_resolved_fails_before_the_run_dir(tmp_path, extra, what):
    plots = tmp_path / "empty" if what == "verdicts.py" else stub_dir(tmp_path, need=5)
    plots.mkdir(exist_ok=True)
    flag = [] if any(a.startswith("--until-resolved") for a in extra) else ["--until-resolved"]
    p = run(tmp_path, plots, *flag, *extra)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lockline: error:") and what in lines[0]
    assert not (tmp_path / "run").exists()


def test_failing_verdicts_is_an_error_not_zero_open(tmp_path):
    """Issue 27 item 7: when verdicts.py fails, the run recorded open: 0 and exited 0. Now
    open and comparisons are null (unknown) and the exit status is 1."""
    plots = tmp_path / "plots"
    plots.mkdir()
    (plots / "verdicts.py").write_text("import sys\nsys.exit(5)\n")
    p = run(tmp_path, plots, "--until-resolved=30s")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "exited with status 5" in p.stderr
    with open(tmp_path / "run" / "lockline.json") as f:
        ctx = json.load(f)["context"]["lockline"]
    assert ctx["until_resolved"]["stopped"] == "verdicts_failed"
    assert ctx["until_resolved"]["open"] is None
    assert ctx["finished"] is True


def test_each_look_is_numbered_for_the_sequential_design(tmp_path):
    """verdicts.py is called with --look=1, 2, ... (the sequential design's look; the
    interval's confidence grows with it: plots/stats.py sequential_confidence)."""
    plots = stub_dir(tmp_path, need=5)
    script = plots / "verdicts.py"
    script.write_text(script.read_text() + '''
with open(os.path.join(os.path.dirname(__file__), "looks.log"), "a") as f:
    f.write(" ".join(a for a in sys.argv if a.startswith("--look=")) + "\\n")
''')
    p = run(tmp_path, plots, "--until-resolved=60s")
    assert p.returncode == 0, p.stdout + p.stderr
    looks = (plots / "looks.log").read_text().split()
    assert looks[:2] == ["--look=1", "--look=2"]
    with open(tmp_path / "run" / "lockline.json") as f:
        ctx = json.load(f)["context"]["lockline"]
    assert ctx["until_resolved"]["looks"] == len(looks)
    assert "sequential" in ctx["until_resolved"]["design"]
