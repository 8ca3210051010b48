"""An old build is input like any other (issue 48): lockline --duet-with=OLD against fake old
builds (Python scripts speaking the window-server protocol, harness/run/build_duet.h) that answer
out of protocol. Each ends the run with one `lockline: error:` line (exit 3), keeps the rows
written before, and leaves no process and no calibration directory behind; an old build's error
text in invalid UTF-8 is escaped. $LOCKLINE_BINARY: the lockline under test."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BINARY = os.environ.get("LOCKLINE_BINARY", os.path.join(ROOT, "build", "lockline"))
ONE_POINT = "calibration/op:plain_inc/line:private/threads:1"

pytestmark = pytest.mark.skipif(not os.access(BINARY, os.X_OK), reason="lockline not built")

# The fake old build: says the hello and the one point's key, then answers each command as its
# MODE says. It writes its pid and its calibration directory to STATE, so the test can look for
# what was left behind.
FAKE = r'''#!/usr/bin/python3
import os, sys, time
MODE, STATE = __MODE__, __STATE__
with open(STATE, "w") as f:
    f.write("%d %s\n" % (os.getpid(), os.environ.get("LOCKLINE_SHARED_CALIBRATION", "")))
out = sys.stdout.buffer
def say(b):
    out.write(b + b"\n"); out.flush()
say(b"lockline-window-server proto=1 schema=1 points=1 layout=1")
say(b"key __KEY__")
say(b"end")
for line in sys.stdin.buffer:
    cmd = (line.split() or [b""])[0]
    if cmd == b"open":
        if MODE == "silent":
            time.sleep(3600)
        if MODE == "no_newline":
            while True:
                out.write(b"x" * (1 << 20)); out.flush()
        if MODE == "bad_utf8":
            say(b"error cannot open: \xff\xfe not UTF-8")
            continue
        say(b"ok 0")
    elif cmd == b"window":
        say(b"done 1000000 1.0e-03 0 1.0e-03 0.0")
    elif cmd == b"close":
        if MODE == "deep":
            say(b'closed {"verify": "", "metrics": ' + b"[" * 100000 + b"]" * 100000 +
                b', "address_layout": null}')
        elif MODE == "verify_number":
            say(b'closed {"verify": 5, "metrics": {}, "address_layout": null}')
        else:
            say(b'closed {"verify": "", "metrics": {}, "address_layout": null}')
    elif cmd == b"quit":
        break
'''


def _fake(tmp_path, mode):
    path = tmp_path / "old_lockline"
    state = tmp_path / "fake_state"
    path.write_text(FAKE.replace("__MODE__", repr(mode)).replace("__STATE__", repr(str(state)))
                    .replace("__KEY__", ONE_POINT))
    path.chmod(0o755)
    return str(path), state


def _start(tmp_path, mode, timeout="2s"):
    old, state = _fake(tmp_path, mode)
    env = dict(os.environ, LOCKLINE_DUET_ANSWER_TIMEOUT=timeout)
    out_dir = tmp_path / "run"
    proc = subprocess.Popen([BINARY, "--quick", f"--duet-with={old}",
                             f"--benchmark_filter={ONE_POINT}", "--benchmark_repetitions=2",
                             "--window=1ms", f"--out={out_dir}", "--events=none"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", env=env)
    return proc, state, out_dir


def _alive(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line for line in f)
    except OSError:
        return False


def _nothing_left(state):
    """The fake's process and the calibration directory are gone (the watchdog may take a
    moment after lockline's exit)."""
    pid, calibration = state.read_text().split()
    deadline = time.time() + 5
    while time.time() < deadline and (_alive(int(pid)) or os.path.exists(calibration)):
        time.sleep(0.05)
    assert not _alive(int(pid)), "the old build is still running"
    assert not os.path.exists(calibration), "the calibration directory is left behind"


def _stopped(tmp_path, mode, words, timeout="2s"):
    proc, state, out_dir = _start(tmp_path, mode, timeout)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, out + err
    errors = [line for line in err.splitlines() if line.startswith("lockline: error:")]
    assert len(errors) == 1 and words in errors[0], err
    assert "stopping the run" in errors[0]
    _nothing_left(state)
    return out_dir


def test_deeply_nested_closed_answer_is_refused(tmp_path):
    _stopped(tmp_path, "deep", "nested deeper than 32 levels")


def test_non_string_verify_is_a_protocol_error(tmp_path):
    _stopped(tmp_path, "verify_number", "not {\"verify\": <text>")


def test_silent_old_build_times_out_and_is_killed(tmp_path):
    _stopped(tmp_path, "silent", "did not answer within 2 s")


def test_a_line_without_end_is_capped(tmp_path):
    _stopped(tmp_path, "no_newline", "a line longer than 16 MiB", timeout="60s")


def test_sigint_while_the_old_build_hangs_leaves_nothing_behind(tmp_path):
    proc, state, _ = _start(tmp_path, "silent", timeout="600s")
    deadline = time.time() + 60
    while time.time() < deadline and not state.exists():
        time.sleep(0.05)
    time.sleep(2)  # into the run: the old build sleeps in "open"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGINT, out + err
    _nothing_left(state)


def test_invalid_utf8_in_the_old_builds_error_is_escaped(tmp_path):
    proc, state, out_dir = _start(tmp_path, "bad_utf8")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, out + err
    with open(out_dir / "lockline.json") as f:
        doc = json.load(f)
    rows = [b for b in doc["benchmarks"] if b.get("run_type") == "iteration"]
    assert rows and all(r.get("error_occurred") for r in rows)
    assert all("\\xff\\xfe not UTF-8" in r["error_message"] for r in rows), rows
    _nothing_left(state)


RACE_POINT = "page_free_race/variant:atomic/scanner:2.6.16/race_window_ns:2000/threads:2"


@pytest.mark.parametrize("planted", ["fifo", "nan", "-1", "5e9"])
def test_a_shared_calibration_is_checked_before_it_is_used(tmp_path, planted):
    """The old build (here lockline itself, after planting a value) shares the calibration
    directory: a FIFO in place of think_steps_per_ns hung both processes' open, and NaN, -1 or
    5e9 steps per ns were used as measured. Each is said and measured anew."""
    old = tmp_path / "old_lockline"
    target = '"$LOCKLINE_SHARED_CALIBRATION/think_steps_per_ns"'
    plant = f"mkfifo {target}" if planted == "fifo" else f"echo {planted} > {target}"
    old.write_text(f"#!/bin/sh\n{plant}\nexec {BINARY} \"$@\"\n")
    old.chmod(0o755)
    out_dir = tmp_path / "run"
    r = subprocess.run([BINARY, "--quick", f"--duet-with={old}", f"--benchmark_filter={RACE_POINT}",
                        "--benchmark_repetitions=1", "--window=1ms", f"--out={out_dir}",
                        "--events=none"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "think_steps_per_ns holds no valid value" in r.stderr, r.stderr
