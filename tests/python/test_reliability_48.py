"""Issue 48, the harness's remaining items: resource limits named (S10), a concurrent run's held
state said on the console, ci/side_by_side.sh's table kept when some rows are not measured. Each
test failed on the code before the issue (cea6b8c) and passes after. The lockline cases need
LOCKLINE_BINARY; the script cases run a fake lockline and a fake page_fault1 (nothing timed)."""
import fcntl
import json
import os
import re
import resource
import shutil
import subprocess
import tempfile
import textwrap

import pytest

BINARY = os.environ.get("LOCKLINE_BINARY", "")
SOURCE = os.environ.get("LOCKLINE_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
IS_ROOT = os.geteuid() == 0
needs_binary = pytest.mark.skipif(not (BINARY and os.access(BINARY, os.X_OK)),
                                  reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) not executable")


def limited(resource_id, value):
    return lambda: resource.setrlimit(resource_id, (value, value))


def error_rows(out):
    doc = json.loads((out / "lockline.json").read_text())
    return {r["name"]: r["error_message"] for r in doc["benchmarks"] if r.get("error_occurred")}


# ---- S10: what failed and the limit it ran into ---------------------------------------------

@needs_binary
def test_failed_mmap_names_size_errno_and_address_space_limit(tmp_path):
    """ulimit -v: zeroing's 64 MiB buffer was "invariant broken after the run: mmap of N bytes
    failed"; a mapping of the harness was a bare "std::bad_alloc". Now: not measured, with the
    size, errno and RLIMIT_AS; the run's other rows are kept."""
    out = tmp_path / "run"
    limit = 60000 * 1024
    p = subprocess.run(
        [BINARY, "--quick", "--window=2ms", "--benchmark_repetitions=1", "--events=none",
         f"--out={out}",
         "--benchmark_filter=^(zeroing/method:memset/fill:zero|calibration/op:cas/line:private)/"],
        capture_output=True, text=True, timeout=300, preexec_fn=limited(resource.RLIMIT_AS, limit))
    assert p.returncode == 1, p.stdout + p.stderr
    errors = error_rows(out)
    zero = [m for n, m in errors.items() if n.startswith("zeroing/")]
    assert zero, errors
    for m in zero:
        assert m.startswith("not measured: mmap of ") and "ENOMEM" in m, m
        assert f"RLIMIT_AS, ulimit -v) is {limit} bytes" in m, m
    assert all("std::bad_alloc" not in m or "RLIMIT_AS" in m for m in errors.values()), errors
    doc = json.loads((out / "lockline.json").read_text())
    assert any(r["name"].startswith("calibration/") and not r.get("error_occurred")
               for r in doc["benchmarks"])


@needs_binary
def test_thread_creation_at_start_names_the_thread_and_the_limits():
    """ulimit -v 20000: lockline exited 2 with only "Resource temporarily unavailable"."""
    p = subprocess.run([BINARY, "--plan"], capture_output=True, text=True, timeout=60,
                       preexec_fn=limited(resource.RLIMIT_AS, 20000 * 1024))
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lockline: error: cannot create thread "
                                                   "discovering the topology: EAGAIN"), p.stderr
    assert f"(RLIMIT_AS, ulimit -v) is {20000 * 1024} bytes" in lines[0], lines[0]
    assert "RLIMIT_STACK" in lines[0] and "RLIMIT_NPROC, ulimit -u)" in lines[0], lines[0]


@needs_binary
@pytest.mark.skipif(not IS_ROOT or not shutil.which("setpriv"),
                    reason="needs root to drop to an unprivileged user (root bypasses "
                           "RLIMIT_NPROC)")
def test_process_limit_names_the_thread_and_rlimit_nproc(tmp_path):
    """ulimit -u 3 as an unprivileged user: the same bare "Resource temporarily unavailable"."""
    # A copy user 65534 can reach: the build may sit below a directory only root may enter
    # (a clone in `mktemp -d`, pytest's tmp_path).
    shared = tempfile.mkdtemp(prefix="lockline-nproc-")
    try:
        os.chmod(shared, 0o755)
        binary = shutil.copy2(BINARY, os.path.join(shared, "lockline"))
        os.chmod(binary, 0o755)
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            "bash", "-c", 'ulimit -u 1; exec "$0" --plan', binary],
                           capture_output=True, text=True, timeout=60, cwd="/")
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    if p.returncode == 0:
        pytest.skip("user 65534 could start threads under ulimit -u 1: the limit does not bite")
    assert p.returncode == 2, p.stdout + p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("lockline: error: cannot create thread "), p.stderr
    assert "RLIMIT_NPROC, ulimit -u) is 1 " in line, line


# ---- a concurrent run's held state: said on the console -------------------------------------

@needs_binary
@pytest.mark.skipif(not IS_ROOT or not shutil.which("unshare"), reason="needs root and unshare")
def test_held_tracefs_record_is_one_console_line(tmp_path):
    """Another run holding STATE_DIR/tracefs.state: this run's kernel rows said so in details
    only. Now one console line names its pid, since when, and the evidence that is off. In a
    private mount namespace with tracefs unmounted (the host's mounts are not touched)."""
    state = tmp_path / "state"
    state.mkdir()
    held = open(state / "tracefs.state", "w")
    held.write("pid 4242\nmount tracefs /sys/kernel/tracing\n")
    held.flush()
    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    script = textwrap.dedent("""\
        for m in /sys/kernel/debug/tracing /sys/kernel/tracing /sys/kernel/debug; do
          while grep -q " $m " /proc/self/mountinfo; do umount -l $m || exit 77; done
        done
        exec "$@"
        """)
    out = tmp_path / "run"
    try:
        p = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "bash", "-c", script, "sh",
             BINARY, "--threads=1", "--window=2ms", "--events=none", f"--out={out}",
             "--benchmark_repetitions=1", "--full",
             "--benchmark_filter=^kernel_lru/case:anon_fault/file:none/pages:32768/"
             "tasks:threads/threads:1$"],
            capture_output=True, text=True, timeout=600,
            env=dict(os.environ, LOCKLINE_STATE_DIR=str(state)))
    finally:
        held.close()
    if p.returncode == 77:
        pytest.skip("cannot unmount tracefs in a private mount namespace")
    assert p.returncode in (0, 1), p.stdout + p.stderr
    lines = [l for l in p.stderr.splitlines() if "tracefs.state" in l]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("lockline: warning: ") and "(pid 4242)" in lines[0], lines[0]
    assert re.search(r"since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", lines[0]), lines[0]
    assert "kernel_contention_per_op" in lines[0] and "is off" in lines[0], lines[0]


# ---- ci/side_by_side.sh: a table of what was measured --------------------------------------

FAKE_LOCKLINE = """#!/usr/bin/python3
import json, os, sys
args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
out = args["--out"]
os.makedirs(out)
held = "tasks:processes" in args["--benchmark_filter"]
name = "fault/mode:plain/x/threads:1"
row = {"name": name, "run_type": "iteration", "family": "fault"}
row.update({"error_occurred": True, "error_message": "another lockline run (pid 4242) holds "
            "/run/lockline/sysctl.lock and is changing a setting now"} if held else
           {"pages_per_wall_s": 500.0})
json.dump({"context": {}, "benchmarks": [row]}, open(out + "/lockline.json", "w"))
sys.exit(1 if held else 0)
"""
FAKE_PF1 = r"""#include <stdio.h>
int main(void) { puts("pages_per_s=1000 pages_per_cpu_s=900"); return 0; }
"""


@pytest.mark.skipif(not shutil.which("cc"), reason="needs a C compiler")
def test_side_by_side_keeps_its_table_when_a_concurrent_run_holds_the_settings_lock(tmp_path):
    """A concurrent run holding sysctl.lock made some lockline runs exit 1: the script exited 1
    without its table. Now it names what holds it and prints the table of the rest."""
    ci = tmp_path / "ci"
    ci.mkdir()
    shutil.copy(os.path.join(SOURCE, "ci", "side_by_side.sh"), ci)
    (ci / "page_fault1.c").write_text(FAKE_PF1)
    os.symlink(os.path.abspath(os.path.join(SOURCE, "plots")), tmp_path / "plots")
    fake = tmp_path / "lockline"
    fake.write_text(FAKE_LOCKLINE)
    fake.chmod(0o755)
    p = subprocess.run(["bash", str(ci / "side_by_side.sh"), "--rounds=1", "--families=fault",
                        f"--lockline={fake}"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "(pid 4242) holds /run/lockline/sysctl.lock" in p.stderr, p.stderr
    table = [l for l in p.stdout.splitlines() if l.startswith("fault ")]
    assert [l.split()[1:3] for l in table] == [["threads", "1"], ["threads", "2"]], p.stdout
    assert "0.50x" in table[0], table


# ---- the 1.9.0 note names a metric the files have --------------------------------------------

def _gb_time_file(path, version, items):
    rows = [{"name": "BM_q/threads:4", "run_name": "BM_q/threads:4", "run_type": "iteration",
             "repetitions": 9, "repetition_index": i, "threads": 4, "iterations": 1000,
             "real_time": 100.0 + i, "cpu_time": 400.0, "time_unit": "ns",
             **({"items_per_second": 1e6} if items else {})} for i in range(9)]
    path.write_text(json.dumps({"context": {"library_version": version} if version else {},
                                "benchmarks": rows}))
    return str(path)


@pytest.mark.parametrize("items", [True, False])
def test_gb_19_time_note_names_a_metric_the_files_have(tmp_path, items):
    """Before: "compare ops_per_s or pass --allow-gb-straddle" for Google Benchmark files,
    which have no ops_per_s."""
    old = _gb_time_file(tmp_path / "old.json", None, items)
    new = _gb_time_file(tmp_path / "new.json", "v1.9.1", items)
    p = subprocess.run(["/usr/bin/python3", os.path.join(SOURCE, "ci", "compare.py"), old, new],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "ops_per_s or" not in p.stdout + p.stderr
    want = ("compare items_per_second (--metric items_per_second:higher)" if items else
            "these files have no metric that reads the same across it")
    assert want in p.stderr, p.stderr


# ---- lockline predict from an unpinned run ---------------------------------------------------

PREDICT_FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "predict", "run",
                               "lockline.json")


@needs_binary
def test_predict_from_an_unpinned_run_names_placements_and_drops_time_shared_rows(tmp_path):
    """Before: a --pin=none run whose 2-thread rows show both threads on one PU was fitted as
    L3-sharing pairs and predicted as if pinned in cores order, with no word of either."""
    doc = json.load(open(PREDICT_FIXTURE))
    doc["context"]["lockline"]["pin"] = "none"
    shared = 0
    for r in doc["benchmarks"]:
        if isinstance(r.get("placement"), dict):
            r["placement"]["pin"] = "none"
            if r.get("threads") == 2 and r.get("run_type") == "iteration":
                r["placement"]["observed_pus"] = [[1], [1]]
                shared += 1
    run = tmp_path / "run"
    run.mkdir()
    (run / "lockline.json").write_text(json.dumps(doc))
    out = tmp_path / "out"
    p = subprocess.run(["/usr/bin/python3", os.path.join(SOURCE, "plots", "predict.py"), str(run),
                        "--topology=synthetic:pack:2 l3:2 core:4 pu:1", f"-o={out}",
                        "--draws=40", "--no-figures", f"--lockline={BINARY}"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "placement: input run --pin=none, target --pin=none (" in p.stdout, p.stdout
    assert "as if pinned" in p.stdout, p.stdout
    assert f"{shared} multi-thread repetition(s) not fitted" in p.stdout, p.stdout
    result = json.loads((out / "predicted.json").read_text())
    assert 2 not in result["fit_threads"], result["fit_threads"]
