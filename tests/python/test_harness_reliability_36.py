"""Issue 36 "Reliability" items of the lockline binary (LOCKLINE_BINARY, set by ctest; skipped
otherwise). Each test names the behaviour of d00fd42 it reproduces (before) and checks now:
 - R3 (security): start-up recovery wrote whatever LOCKLINE_STATE_DIR/restore.state named, to
   any path (creating files, following a symlinked state file), with no owner check; a
   refused value warned forever; a missing lock file skipped recovery;
 - R11: invalid UTF-8 in the program's own path: exit 4 with a raw JSON exception, after the
   run directory was created;
 - R13: SIGKILL could leave lockline.json.tmp.* beside the result.
Every run is one tiny point (seconds). The state-file cases never name a real sysctl with a
valid value, so nothing of the machine changes.
"""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

BINARY = os.environ.get("LOCKLINE_BINARY", "")
ONE_POINT = ["--quick", "--window=1ms", "--events=none", "--benchmark_repetitions=1",
             "--benchmark_filter=^calibration/op:cas/line:private/threads:1$"]
SYSCTL = "/proc/sys/vm/percpu_pagelist_high_fraction"

pytestmark = pytest.mark.skipif(
    not (BINARY and os.access(BINARY, os.X_OK)),
    reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an executable lockline")


def run_with_state(state_dir, out, binary=BINARY):
    return subprocess.run([binary, *ONE_POINT, f"--out={out}"], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, LOCKLINE_STATE_DIR=str(state_dir)))


def state_dir(tmp_path, text, mode=0o700):
    d = tmp_path / "state"
    d.mkdir()
    os.chmod(d, mode)
    (d / "restore.state").write_text(text)
    (d / "sysctl.lock").write_text("")
    return d


# ---- R3 ------------------------------------------------------------------------------------


def test_recovery_never_writes_a_path_lockline_does_not_register(tmp_path):
    """Before: /tmp/.../victim was created with "pwned" (and any root-writable file could be
    overwritten). Now: not written, one warning, the state file goes."""
    victim = tmp_path / "victim"
    d = state_dir(tmp_path, f"pid 1\npath {victim}\nvalue 1234\n")
    p = run_with_state(d, tmp_path / "run")
    assert p.returncode == 0, p.stderr
    assert not victim.exists()
    assert "not a setting lockline changes" in p.stdout
    assert not (d / "restore.state").exists()
    p = run_with_state(d, tmp_path / "run2")
    assert "not a setting lockline changes" not in p.stdout  # warned once, not forever


def test_recovery_validates_the_value(tmp_path):
    """Before: any text (here a shell command) went to the registered path as root."""
    if not os.path.exists(SYSCTL):
        pytest.skip(f"no {SYSCTL}")
    before = open(SYSCTL).read()
    d = state_dir(tmp_path, f"pid 1\npath {SYSCTL}\nvalue 8; reboot\n")
    p = run_with_state(d, tmp_path / "run")
    assert open(SYSCTL).read() == before
    assert "not a number" in p.stdout
    assert not (d / "restore.state").exists()


def test_recovery_refuses_a_state_dir_writable_by_others(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("kept")
    d = state_dir(tmp_path, f"pid 1\npath {victim}\nvalue 1000\n", mode=0o777)
    p = run_with_state(d, tmp_path / "run")
    assert "writable by group or others" in p.stdout, p.stdout
    assert victim.read_text() == "kept"


def test_recovery_does_not_follow_a_symlinked_state_file(tmp_path):
    """Before: a symlinked restore.state was read and acted on."""
    planted = tmp_path / "planted"
    victim = tmp_path / "victim"
    planted.write_text(f"pid 1\npath {victim}\nvalue 1\n")
    d = tmp_path / "state"
    d.mkdir(mode=0o700)
    os.symlink(planted, d / "restore.state")
    (d / "sysctl.lock").write_text("")
    p = run_with_state(d, tmp_path / "run")
    assert "not a regular file" in p.stdout
    assert not victim.exists()


def test_a_missing_lock_file_is_recreated_and_recovery_runs(tmp_path):
    """Before: without sysctl.lock recovery returned at once (the original value lost, the
    state file left). Now the lock is recreated and the state handled."""
    victim = tmp_path / "victim"
    d = state_dir(tmp_path, f"pid 1\npath {victim}\nvalue 1\n")
    (d / "sysctl.lock").unlink()
    p = run_with_state(d, tmp_path / "run")
    assert (d / "sysctl.lock").exists()
    assert "not a setting lockline changes" in p.stdout
    assert not (d / "restore.state").exists()


# ---- R13 -----------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace (SIGKILL injection)")
def test_a_sigkill_mid_write_leaves_no_file_a_reader_takes(tmp_path):
    """strace kills lockline (SIGKILL: no handler runs) at its third rename(), the one that
    would put a rewritten lockline.json in place. Before: lockline.json.tmp.XXXXXX was left
    beside the result. Now the temporary name is hidden (.lockline.json.tmp.XXXXXX): no
    visible file but lockline.json, and the reader takes only lockline.json."""
    out = tmp_path / "run"
    p = subprocess.run(["strace", "-f", "-o", "/dev/null", "-e", "trace=rename",
                        "-e", "inject=rename:signal=SIGKILL:when=3", BINARY, *ONE_POINT,
                        "--benchmark_repetitions=3", f"--out={out}"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode in (137, -9), p.stderr
    left = sorted(os.listdir(out))
    assert [f for f in left if not f.startswith(".")] == ["lockline.json"], left
    assert any(f.startswith(".lockline.json.tmp.") for f in left), left  # the kill hit a write
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "plots"))
    import lockline_results
    assert [os.path.basename(f) for f in lockline_results.resolve_paths([str(out)])] == \
        ["lockline.json"]


# ---- R11 -----------------------------------------------------------------------------------


def test_invalid_utf8_in_the_programs_own_path_is_refused_up_front(tmp_path):
    """Before: exit 4 with "[json.exception.type_error.316] invalid UTF-8 byte" after the run
    directory was created. Now: exit 2, one `lockline: error:` line, nothing created."""
    bad = os.path.join(os.fsencode(str(tmp_path)), b"bin\xff")
    os.mkdir(bad)
    exe = os.path.join(bad, b"lockline")
    shutil.copy(BINARY, exe)
    out = tmp_path / "run"
    p = subprocess.run([exe, *ONE_POINT, f"--out={out}"], capture_output=True, timeout=300)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 2, err
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("lockline: error:"), err
    assert "not valid UTF-8" in lines[0] and "\\xff" in lines[0]
    assert not out.exists()


# ---- R10 -----------------------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None
                    or not os.path.exists(SYSCTL),
                    reason="needs root (to drop it with setpriv) and the pcp sysctl")
def test_a_setup_refusal_is_not_called_a_broken_invariant(tmp_path):
    """A high_fraction:8 point run without root refuses its setup ("needs root to write").
    Before: the row said "invariant broken after the run: high_fraction:8 needs root ...".
    Now: "not measured: ..." (compare.py's gate keys on "invariant broken")."""
    listed = subprocess.run([BINARY, "--full", "--list"], capture_output=True, text=True,
                            timeout=120).stdout.splitlines()
    keys = [l.split("\t")[0] for l in listed
            if l.startswith("kernel_zone/") and "high_fraction:8/" in l]
    if not keys:
        pytest.skip("no kernel_zone high_fraction:8 point")
    import pathlib
    import tempfile
    work = pathlib.Path(tempfile.mkdtemp(prefix="lockline-r10-"))  # pytest's tree is 0700
    os.chmod(work, 0o777)
    out = work / "run"
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", BINARY,
                        "--full", f"--benchmark_filter=^{keys[0]}$", "--window=5ms",
                        "--events=none", "--evidence=off", "--benchmark_repetitions=1",
                        f"--out={out}"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, LOCKLINE_STATE_DIR=str(work / "state")))
    assert p.returncode == 1, p.stdout + p.stderr
    rows = json.loads((out / "lockline.json").read_text())["benchmarks"]
    errors = [r["error_message"] for r in rows if r.get("error_occurred")]
    assert errors and all(e.startswith("not measured: ") and "needs root" in e
                          for e in errors), errors
    assert not any("invariant" in e for e in errors)


# ---- R12 -----------------------------------------------------------------------------------


def hanging_plots_dir(tmp_path):
    """A plots/ directory whose verdicts.py never ends (a stand-in for a hung statistics
    run)."""
    d = tmp_path / "plots"
    d.mkdir()
    (d / "verdicts.py").write_text("import time\ntime.sleep(600)\n")
    return d


def verdicts_children(plots):
    """pids of processes running plots/verdicts.py."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if str(plots / "verdicts.py").encode() in cmd:
            found.append(int(pid))
    return found


def test_until_resolved_limit_holds_for_a_hanging_verdicts_py(tmp_path):
    """Before: --until-resolved=3s killed a hanging verdicts.py only after 63 s (a minute's
    grace). Now at the limit."""
    plots = hanging_plots_dir(tmp_path)
    t0 = time.monotonic()
    p = subprocess.run([BINARY, *ONE_POINT, "--until-resolved=3s", f"--out={tmp_path / 'run'}"],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, LOCKLINE_PLOTS_DIR=str(plots)))
    elapsed = time.monotonic() - t0
    assert "still running at the --until-resolved time limit" in p.stderr, p.stderr
    assert elapsed < 30, f"{elapsed:.0f} s for --until-resolved=3s"
    assert not verdicts_children(plots)


def test_sigterm_ends_the_verdicts_child(tmp_path):
    """Before: SIGTERM to lockline left verdicts.py running, to write into the interrupted run
    directory later. Now the child ends with lockline."""
    plots = hanging_plots_dir(tmp_path)
    proc = subprocess.Popen([BINARY, *ONE_POINT, "--until-resolved=120s",
                             f"--out={tmp_path / 'run'}"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, LOCKLINE_PLOTS_DIR=str(plots)))
    try:
        deadline = time.monotonic() + 120
        while not verdicts_children(plots) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        children = verdicts_children(plots)
        assert children
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        assert proc.returncode == 143
        deadline = time.monotonic() + 5
        while verdicts_children(plots) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not verdicts_children(plots)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in verdicts_children(plots):
            os.kill(pid, signal.SIGKILL)


# ---- R5 ------------------------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists(SYSCTL),
                    reason="needs root and the pcp sysctl")
def test_a_default_row_is_read_under_the_settings_lock(tmp_path):
    """While another lockline run holds the settings lock (it may have the sysctl at 8), a
    high_fraction:default point is not measured. Before: it was, and labelled default (at the
    other run's 8). Unlocked, the row records the value in force during its windows."""
    import fcntl
    key = "kernel_zone/batch:2xhigh/high_fraction:default/tasks:threads/threads:1"
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    args = [BINARY, f"--benchmark_filter=^{key}$", "--window=5ms", "--events=none",
            "--evidence=off", "--benchmark_repetitions=1"]
    env = dict(os.environ, LOCKLINE_STATE_DIR=str(state))
    lock = os.open(state / "sysctl.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        p = subprocess.run(args + [f"--out={tmp_path / 'held'}"], capture_output=True,
                           text=True, timeout=300, env=env)
    finally:
        os.close(lock)
    rows = json.loads((tmp_path / "held" / "lockline.json").read_text())["benchmarks"]
    reps = [r for r in rows if r.get("run_type") == "iteration"]
    assert reps and all(r.get("error_occurred") and "holds" in r["error_message"]
                        for r in reps), [r.get("error_message") for r in reps]
    p = subprocess.run(args + [f"--out={tmp_path / 'free'}"], capture_output=True, text=True,
                       timeout=300, env=env)
    rows = json.loads((tmp_path / "free" / "lockline.json").read_text())["benchmarks"]
    reps = [r for r in rows if r.get("run_type") == "iteration"]
    assert reps and not any(r.get("error_occurred") for r in reps), p.stdout + p.stderr
    assert reps[0]["details"]["high_fraction_in_windows"] == open(SYSCTL).read().strip()
