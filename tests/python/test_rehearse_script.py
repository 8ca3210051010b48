"""Tests of ci/rehearse.sh's own behaviour (issue 27 item 11), without QEMU or a guest.

A fake qemu-system-x86_64 first on PATH records its pid, writes the guest's "up" line to the
console file and sleeps; the lockline binary is a copy of /bin/true (ldd and strip work on it)
and the kernel any readable file. Nothing boots: only the script's argument checks and its
clean-up of QEMU when it is interrupted are checked.
"""

import os
import shutil
import signal
import stat
import subprocess
import time

import pytest

SOURCE_DIR = os.environ.get(
    "LOCKLINE_SOURCE_DIR",
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
REHEARSE = os.path.join(SOURCE_DIR, "ci", "rehearse.sh")

FAKE_QEMU = """#!/bin/bash
# Fake QEMU: record the pid, say the guest is up on the console (-serial file:X, first), sleep.
echo $$ >"$FAKE_QEMU_PIDFILE"
console=
while (($#)); do
  if [[ "$1" == -serial && -z "$console" ]]; then console=${2#file:}; fi
  shift
done
echo "rehearsal: guest up: fake" >>"$console"
exec sleep 300
"""


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("args,words", [([""], "empty TOPOLOGY"),
                                        (["4s4n", "extra"], "2 arguments")])
def test_bad_arguments_exit_2(tmp_path, args, words):
    """An empty argument started the default shape and extra ones were ignored; now exit 2 with
    one line, before anything is installed, built or booted."""
    env = dict(os.environ, OUT=str(tmp_path / "out"), REHEARSAL_NO_INSTALL="1",
               BUILD=str(tmp_path / "nobuild"))
    p = subprocess.run(["bash", REHEARSE, *args], capture_output=True, text=True, timeout=60,
                       env=env)
    assert p.returncode == 2, p.stdout + p.stderr
    assert words in p.stderr and p.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists() and not (tmp_path / "nobuild").exists()


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_interrupt_stops_qemu(tmp_path, sig, code):
    """A TERM or INT to rehearse.sh while the guest runs stops QEMU at once (before: QEMU, in
    timeout's own process group, ran on for up to CAP + 120 s)."""
    if not os.access("/bin/busybox", os.X_OK) or not shutil.which("file"):
        pytest.skip("needs /bin/busybox (busybox-static) and file(1), as rehearse.sh does")
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    qemu = fakebin / "qemu-system-x86_64"
    qemu.write_text(FAKE_QEMU)
    qemu.chmod(qemu.stat().st_mode | stat.S_IXUSR)
    build = tmp_path / "build"
    build.mkdir()
    shutil.copy("/bin/true", build / "lockline")
    kernel = tmp_path / "vmlinuz"
    kernel.write_bytes(b"not a kernel")
    pidfile = tmp_path / "qemu.pid"
    env = dict(os.environ, OUT=str(tmp_path / "out"), REHEARSAL_NO_INSTALL="1",
               BUILD=str(build), KERNEL=str(kernel), FAKE_QEMU_PIDFILE=str(pidfile),
               PATH=f"{fakebin}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    proc = subprocess.Popen(["bash", REHEARSE, "4s4n"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    qemu_pid = None
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if pidfile.exists() and pidfile.read_text().strip():
                qemu_pid = int(pidfile.read_text())
                break
            time.sleep(0.2)
        assert qemu_pid, f"the fake QEMU never started: {proc.communicate(timeout=30)[0]}"
        time.sleep(3)  # past the boot loop: the script now waits for QEMU to end
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == code, out
        deadline = time.monotonic() + 15
        while _alive(qemu_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(qemu_pid), f"QEMU (pid {qemu_pid}) still runs after {sig!r}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        if qemu_pid and _alive(qemu_pid):
            os.kill(qemu_pid, signal.SIGKILL)
