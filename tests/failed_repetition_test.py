"""A repetition that fails before its windows, between repetitions that succeed, no longer
aborts the run (issue 36 R1).

Google Benchmark 1.7.1 reports a repetition that never entered its loop with 0 iterations; once
the point's repetitions were done, ComputeStats aborted the process (Check `run_iterations ==
run.iterations`): exit 134, no `lockline:` line, later points lost, finished false. Reproduced
here deterministically on a kernel_zone high_fraction:8 point as root: this test holds the
settings lock (LOCKLINE_STATE_DIR/sysctl.lock) during the first repetition, so it fails with
"another lockline run holds ..." before its windows, then releases it so the next ones succeed.
Now: exit 1 (a point's error), every repetition kept (the first repetition's error row, the others
measured, the aggregates over them), finished true, the sysctl back.

Usage: failed_repetition_test.py LOCKLINE_BINARY. Exit 77 (skipped) without root or the sysctl.
Registered with RESOURCE_LOCK vm_pcp_sysctl: it changes vm.percpu_pagelist_high_fraction.
"""
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time

from sysctl_restore_test import high_fraction_8_keys

SYSCTL = "/proc/sys/vm/percpu_pagelist_high_fraction"


def read():
    with open(SYSCTL) as f:
        return f.read().strip()


ATTEMPTS = 8


def attempt_once(binary, key, original):
    """One run of point `key` with the settings lock held until its first error row is on
    disk. Returns (error messages, measured repetitions, problems found)."""
    state = tempfile.mkdtemp(prefix="lockline-state-")
    out = os.path.join(tempfile.mkdtemp(prefix="lockline-r1-"), "run")
    lock = os.open(os.path.join(state, "sysctl.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)
    proc = subprocess.Popen(
        [binary, "--full", f"--benchmark_filter=^{key}$", "--window=20ms", "--events=none",
         "--evidence=off", "--benchmark_repetitions=8", f"--out={out}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, LOCKLINE_STATE_DIR=state))
    path = os.path.join(out, "lockline.json")
    deadline = time.monotonic() + 300
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with open(path) as f:
                    rows = json.load(f)["benchmarks"]
                if any(r.get("error_occurred") for r in rows):
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.001)
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if read() != original:
            with open(SYSCTL, "w") as f:
                f.write(original)
    print(f"exit {proc.returncode}; last stdout: {stdout.strip().splitlines()[-1:]}")
    failures = []
    if proc.returncode != 1:
        failures.append(f"exit {proc.returncode}, expected 1 (a point's error row); stderr: "
                        f"{stderr.strip()[-400:]}")
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        failures.append(f"no readable {path}: {e}")
        doc = {"benchmarks": [], "context": {}}
    reps = [r for r in doc["benchmarks"] if r.get("run_type") == "iteration"]
    errors = [r.get("error_message", "") for r in reps if r.get("error_occurred")]
    # The lock is released once the first error row is on disk: the next repetition or two
    # may start before that and fail too; the later ones succeed.
    if len(reps) != 8 or not errors or not reps[0].get("error_occurred") or \
            not all("holds" in e for e in errors):
        failures.append(f"{len(reps)} repetition rows, errors {errors}: expected 8 rows, the "
                        "first an error naming the held lock")
    if not doc.get("context", {}).get("lockline", {}).get("finished"):
        failures.append("context.lockline.finished is not true")
    return errors, len(reps) - len(errors), failures


def main():
    binary = sys.argv[1]
    if os.geteuid() != 0 or not os.path.exists(SYSCTL):
        print(f"skipped: needs root and {SYSCTL}")
        return 77
    keys = high_fraction_8_keys(binary, "tasks:threads")
    if not keys:
        print("skipped: no kernel_zone high_fraction:8 threads point")
        return 77
    original = read()
    # The lock is released once the first error row is on disk, but a repetition that fails
    # before its windows takes well under a millisecond, so on a quiet machine all eight may
    # fail before the release. Every attempt must keep every repetition (8 rows, exit 1, the
    # first an error naming the held lock, finished, the sysctl back); at least one attempt
    # must also mix failed and measured repetitions (the case that aborted Google Benchmark).
    failures = []
    mixed = False
    for attempt in range(1, ATTEMPTS + 1):
        errors, measured, problems = attempt_once(binary, keys[0], original)
        failures += [f"attempt {attempt}: {p}" for p in problems]
        if problems:
            break
        if measured >= 2:
            mixed = True
            break
        print(f"attempt {attempt}: all {len(errors)} repetitions failed before the lock was "
              "released; again")
    if not failures and not mixed:
        failures.append(f"no attempt of {ATTEMPTS} had both failed and measured repetitions")
    if read() != original:
        failures.append(f"the sysctl is {read()}, was {original}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
