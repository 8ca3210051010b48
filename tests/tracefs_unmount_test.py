"""tracefs is left as lockline found it (issue 27, "machine left as found").

Run as root, lockline mounts tracefs at /sys/kernel/tracing when nothing is mounted there (the
kernel families' contention tracepoints, in their evidence windows) and must unmount what it
mounted when the run ends, also on SIGTERM; a tracefs mounted before the run is not its own and
stays. Each case runs in a private mount namespace (unshare --mount --propagation private) and
checks that it does before touching a mount, so the host's mounts neither decide the outcome nor
change (they are not compared before and after: other tests under ctest -j mount and unmount
tracefs on the host meanwhile):
 - end:        tracefs (and /sys/kernel/debug/tracing, and debugfs, whose automount would
               serve the tracepoints instead) unmounted in the namespace; a kernel_lru point
               runs to its end; the row says lockline mounted tracefs, and afterwards
               /proc/self/mountinfo has no tracefs at /sys/kernel/tracing;
 - sigterm:    the same, SIGTERM once lockline has mounted it: exit 143, unmounted;
 - premounted: tracefs mounted in the namespace before the run: still mounted after it, and the
               row does not claim lockline mounted it;
 - sigkill:    SIGKILL once lockline has mounted it (no handler runs): the mount stays, and the
               next run (a calibration point, no tracefs of its own) unmounts it and says so
               (issue 36 R9; before: the next run left it mounted).
Usage: tracefs_unmount_test.py LOCKLINE_BINARY. Exit 77 (ctest SKIP_RETURN_CODE) without root,
without unshare or a kernel that lets it make a mount namespace, without tracefs support or
without a kernel_lru point.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TRACEFS = "/sys/kernel/tracing"
DEBUG_TRACEFS = "/sys/kernel/debug/tracing"
DEBUGFS = "/sys/kernel/debug"
SKIP = 77


def mounts():
    """(mount point, fs type) of every mount in this process's namespace, in mount order."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            out.append((fields[4], fields[sep + 1]))
    return out


def tracefs_mounted():
    return any(point == TRACEFS and fstype == "tracefs" for point, fstype in mounts())


def start_until_mounted(args, case, env=None):
    """Starts lockline and waits (up to 240 s) until it has mounted tracefs; None, with a FAIL
    line, when it exits or times out first."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    deadline = time.monotonic() + 240
    while not tracefs_mounted() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if tracefs_mounted():
        return proc
    proc.kill()
    _, err = proc.communicate()
    print(f"FAIL {case}: lockline (exit {proc.returncode}) never mounted tracefs: {err}")
    return None


def unmount_all(point):
    """Unmounts every mount stacked on `point` (in this namespace only)."""
    while any(p == point for p, _ in mounts()):
        subprocess.run(["umount", "-l", point], check=True)


def find_key(rows, key):
    """True when `key` occurs anywhere in the JSON value `rows`."""
    if isinstance(rows, dict):
        return key in rows or any(find_key(v, key) for v in rows.values())
    if isinstance(rows, list):
        return any(find_key(v, key) for v in rows)
    return False


def inside(case, binary, key, out):
    """One case, already inside the private mount namespace. Returns 0 pass, 1 fail, 77 skip."""
    # The cases unmount and mount tracefs: only ever in a namespace of our own, never the
    # one the test was started in (main() passes its id).
    if os.readlink("/proc/self/ns/mnt") == os.environ.get("LOCKLINE_TEST_HOST_MNT_NS", ""):
        print(f"FAIL {case}: not in a private mount namespace; refusing to touch the host's")
        return 1
    unmount_all(DEBUG_TRACEFS)
    unmount_all(DEBUGFS)  # its automount of tracing/ would serve the tracepoints instead
    unmount_all(TRACEFS)
    if case == "premounted":
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=True)
    before = tracefs_mounted()
    if case == "sigkill":
        return sigkill_case(binary, key, out)
    args = [binary, f"--benchmark_filter=^{re.escape(key)}$", "--threads=1", "--window=2ms",
            "--events=none", f"--out={out}",
            "--benchmark_repetitions=" + ("400" if case == "sigterm" else "1")]
    if case == "sigterm":
        proc = start_until_mounted(args, "sigterm")
        if proc is None:
            return 1
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        code = proc.returncode
        print(f"sigterm: exit {code}; stderr: {err.strip()[-300:]}")
        ok = code == 143
    else:
        p = subprocess.run(args, capture_output=True, text=True, timeout=600)
        code = p.returncode
        print(f"{case}: exit {code}; last stdout lines: {p.stdout.strip().splitlines()[-2:]}")
        ok = code in (0, 1)  # 1: a point's error row, which still ran the evidence windows
        if not ok:
            print(p.stderr)
    after = tracefs_mounted()
    print(f"{case}: tracefs at {TRACEFS} mounted before: {before}, after: {after}")
    failures = []
    if not ok:
        failures.append(f"exit status {code}")
    if case == "premounted":
        if not after:
            failures.append("a tracefs mounted before the run was unmounted")
    elif after:
        failures.append("the tracefs lockline mounted was left mounted")
    if case != "sigterm":
        try:
            with open(os.path.join(out, "lockline.json")) as f:
                claimed = find_key(json.load(f)["benchmarks"], "tracefs_mounted_by_lockline")
        except (OSError, ValueError, KeyError) as e:
            failures.append(f"no readable lockline.json: {e}")
        else:
            if case == "end" and not claimed:
                failures.append("the row does not say lockline mounted tracefs (did the "
                                "evidence windows run?)")
            if case == "premounted" and claimed:
                failures.append("the row claims lockline mounted a tracefs it found mounted")
    for f in failures:
        print(f"FAIL {case}: {f}")
    return 1 if failures else 0


def sigkill_case(binary, key, out):
    """The sigkill case (inside the namespace): see the module docstring."""
    env = dict(os.environ, LOCKLINE_STATE_DIR=tempfile.mkdtemp(prefix="lockline-state-"))
    proc = start_until_mounted([binary, f"--benchmark_filter=^{re.escape(key)}$",
                                "--threads=1", "--window=2ms", "--events=none", f"--out={out}",
                                "--benchmark_repetitions=400"], "sigkill", env)
    if proc is None:
        return 1
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=120)
    left = tracefs_mounted()
    nxt = subprocess.run([binary, "--benchmark_filter=^calibration/op:cas/line:private/threads:1$",
                          "--quick", "--window=1ms", "--events=none",
                          "--benchmark_repetitions=1", f"--out={out}-next"],
                         capture_output=True, text=True, timeout=300, env=env)
    after = tracefs_mounted()
    print(f"sigkill: mounted after SIGKILL: {left}; after the next run: {after}; "
          f"its warnings: {[l for l in nxt.stdout.splitlines() if 'tracefs' in l]}")
    failures = []
    if not left:
        failures.append("tracefs was not left mounted by the killed run (nothing to recover)")
    if after:
        failures.append("the next run left the dead run's tracefs mounted")
    if "without unmounting the tracefs" not in nxt.stdout:
        failures.append("the next run did not say it unmounted the dead run's tracefs")
    for f in failures:
        print(f"FAIL sigkill: {f}")
    return 1 if failures else 0


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--inside":
        return inside(*sys.argv[2:])
    binary = sys.argv[1]
    if os.geteuid() != 0:
        print("skipped: mounting tracefs needs root")
        return SKIP
    unshare = shutil.which("unshare")
    if unshare is None:
        print("skipped: no unshare (util-linux)")
        return SKIP
    with open("/proc/filesystems") as f:
        if "tracefs" not in f.read():
            print("skipped: this kernel has no tracefs")
            return SKIP
    ns = [unshare, "--mount", "--propagation", "private"]
    probe = subprocess.run(ns + ["true"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"skipped: cannot make a private mount namespace: {probe.stderr.strip()}")
        return SKIP
    listed = subprocess.run([binary, "--list"], capture_output=True, text=True, timeout=120)
    keys = [line.split("\t")[0] for line in listed.stdout.splitlines()
            if line.startswith("kernel_lru/") and line.split("\t")[0].endswith("/threads:1")]
    if not keys:
        print("skipped: no kernel_lru threads:1 point in the default suite")
        return SKIP
    key = keys[0]
    # The host's mounts are not compared before and after: under ctest -j other tests' lockline
    # runs mount and unmount tracefs on the host meanwhile. Each case checks instead that it
    # runs in a mount namespace of its own before it touches a mount.
    print(f"point {key}; host: tracefs at {TRACEFS} mounted: {tracefs_mounted()} (untouched)")
    failed = []
    for case in ("end", "sigterm", "premounted", "sigkill"):
        out = os.path.join(tempfile.mkdtemp(prefix=f"lockline-tracefs-{case}-"), "run")
        env = dict(os.environ, LOCKLINE_TEST_HOST_MNT_NS=os.readlink("/proc/self/ns/mnt"))
        r = subprocess.run(ns + [sys.executable, os.path.abspath(__file__), "--inside", case,
                                 binary, key, out], timeout=900, env=env)
        if r.returncode != 0:
            failed.append(case)
    print("failed: " + ", ".join(failed) if failed else "all cases passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
