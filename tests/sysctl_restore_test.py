"""vm.percpu_pagelist_high_fraction is put back whatever ends a run (issue 27 items 2 and 3).

Runs the real binary (argv[1]) on a kernel_zone high_fraction:8 point as root:
 - SIGHUP, SIGUSR1, SIGALRM while the point has the sysctl at 8: restored at once, exit 128 + N
   (before: only SIGINT / SIGTERM restored; the others left 8);
 - SIGKILL (no handler runs): the next lockline run restores it at start-up and warns (before:
   the next run neither noticed nor restored it).
Registered with RESOURCE_LOCK vm_pcp_sysctl (tests/CMakeLists.txt): it changes the machine's
sysctl. Skipped (exit 77 -> ctest "skipped") without root or the sysctl.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

SYSCTL = "/proc/sys/vm/percpu_pagelist_high_fraction"


def read():
    with open(SYSCTL) as f:
        return f.read().strip()


def high_fraction_8_keys(binary, *parts):
    """The --full suite's kernel_zone keys that set high_fraction 8 and hold every one of
    `parts` (failed_repetition_test.py uses it too)."""
    listed = subprocess.run([binary, "--full", "--list"], capture_output=True,
                            text=True).stdout.splitlines()
    return [line.split("\t")[0] for line in listed
            if line.startswith("kernel_zone/") and "high_fraction:8/" in line
            and all(p in line for p in parts)]


def main():
    binary = sys.argv[1]
    if os.geteuid() != 0 or not os.path.exists(SYSCTL):
        print(f"skipped: needs root and {SYSCTL}")
        return 77
    keys = high_fraction_8_keys(binary)
    if not keys:
        print("skipped: no kernel_zone high_fraction:8 point")
        return 77
    key = keys[0]
    original = read()
    if original == "8":
        print("skipped: the sysctl is 8 already (a run left it? restore it first)")
        return 77
    state = tempfile.mkdtemp(prefix="lockline-state-")
    env = dict(os.environ, LOCKLINE_STATE_DIR=state)
    failures = []

    def start(tmp):
        return subprocess.Popen(
            [binary, "--full", f"--benchmark_filter=^{key}$", "--window=200ms",
             "--events=none", "--benchmark_repetitions=50", f"--out={tmp}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def wait_changed(proc):
        deadline = time.monotonic() + 120
        while read() != "8" and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return read() == "8"

    try:
        for sig in (signal.SIGHUP, signal.SIGUSR1, signal.SIGALRM, signal.SIGKILL):
            tmp = tempfile.mkdtemp(prefix="lockline-sysctl-") + "/run"
            proc = start(tmp)
            if not wait_changed(proc):
                proc.kill()
                out, err = proc.communicate()
                failures.append(f"{sig.name}: the point never set the sysctl to 8: {err}")
                continue
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=120)
            now = read()
            print(f"{sig.name}: exit {proc.returncode}, sysctl {now} (was {original})")
            if sig != signal.SIGKILL:
                if proc.returncode != 128 + sig.value or now != original:
                    failures.append(f"{sig.name}: exit {proc.returncode}, sysctl {now}, "
                                    f"expected {128 + sig.value} and {original}; {err}")
                continue
            # SIGKILL: left at 8; the next run puts it back and says so.
            if now != "8":
                failures.append(f"SIGKILL: sysctl {now}, expected 8 left behind")
            nxt = subprocess.run(
                [binary, "--benchmark_filter=^locks/lock:ticket/cs:0/stats:off/threads:1$",
                 "--threads=1", "--window=1ms", "--events=none", "--benchmark_repetitions=1",
                 f"--out={tmp}-next"], capture_output=True, text=True, env=env, timeout=300)
            print(nxt.stdout.splitlines()[:6])
            if read() != original or "ended without restoring" not in nxt.stdout:
                failures.append(f"after SIGKILL the next run left {read()} and said: "
                                f"{nxt.stdout} {nxt.stderr}")
    finally:
        if read() != original:
            with open(SYSCTL, "w") as f:
                f.write(original)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
