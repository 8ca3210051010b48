"""The fake PMU shim's kernel ABI, driven directly (ctypes in a child Python under LD_PRELOAD):
perf_event_open through syscall(), the read formats (PERF_FORMAT_GROUP, ID, TOTAL_TIME_*),
ioctls, fixed and general counters, multiplexing, and the kernel's errors. lockline itself uses
a subset; these pin down the rest so the end-to-end tests stand on a faithful fake.

Needs LOCKLINE_FAKE_PMU_LIB (set by ctest); skipped with a reason otherwise.
"""
import json
import os
import platform
import subprocess
import sys
import textwrap

import pytest

SHIM = os.environ.get("LOCKLINE_FAKE_PMU_LIB", "")

pytestmark = pytest.mark.skipif(
    not (SHIM and os.path.exists(SHIM)) or platform.machine() not in ("x86_64", "aarch64"),
    reason=f"LOCKLINE_FAKE_PMU_LIB ({SHIM or 'unset'}) missing or not x86_64 / aarch64")

# Helpers the child runs: attr packing (linux/perf_event.h layout), open, ioctl, read, spin.
PRELUDE = textwrap.dedent("""
    import ctypes, json, os, struct, time
    NR = {"x86_64": 298, "aarch64": 241}[os.uname().machine]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    ENABLE, DISABLE, RESET, IOC_ID = 0x2400, 0x2401, 0x2403, 0x80082407
    TE, TR, ID, GROUP = 1, 2, 4, 8
    HW, SW, CACHE, RAW = 0, 1, 3, 4
    keep = []

    def attr(type_, config, read_format=TE | TR, disabled=1, exclude_user=0, exclude_kernel=0):
        buf = bytearray(128)
        flags = disabled | exclude_user << 4 | exclude_kernel << 5
        struct.pack_into("IIQQQQQ", buf, 0, type_, 128, config, 0, 0, read_format, flags)
        a = (ctypes.c_char * 128).from_buffer(buf)
        keep.append((buf, a))
        return a

    def popen(type_, config, group=-1, **kw):
        fd = libc.syscall(NR, ctypes.byref(attr(type_, config, **kw)), 0, -1, group, 8)
        return fd if fd >= 0 else -ctypes.get_errno()

    def ioctl(fd, req, arg=0):
        return libc.ioctl(fd, ctypes.c_ulong(req), ctypes.c_ulong(arg))

    def read(fd, words):
        try:
            data = os.read(fd, 8 * words)
        except OSError as e:
            return -e.errno
        return list(struct.unpack("%dQ" % (len(data) // 8), data))

    def spin(seconds):
        end = time.thread_time() + seconds
        x = 0
        while time.thread_time() < end:
            x += 1
""")


def child(body, **env):
    """Runs PRELUDE + body under the shim with LOCKLINE_FAKE_PMU_* = env; returns its JSON."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("LOCKLINE_FAKE_PMU_")}
    e.update({"LD_PRELOAD": SHIM, "LOCKLINE_FAKE_PMU_WOBBLE": "0"})
    e.update({f"LOCKLINE_FAKE_PMU_{k}": str(v) for k, v in env.items()})
    p = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], env=e,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_group_read_format_with_ids():
    out = child("""
        l = popen(HW, 0, read_format=TE | TR | ID | GROUP)
        m1 = popen(HW, 1, l, read_format=TE | TR | ID | GROUP, disabled=0)
        m2 = popen(HW, 3, l, read_format=TE | TR | ID | GROUP, disabled=0)
        ids = []
        for fd in (l, m1, m2):
            buf = ctypes.c_uint64()
            rc = libc.ioctl(fd, ctypes.c_ulong(IOC_ID), ctypes.byref(buf))
            ids.append(buf.value if rc == 0 else -ctypes.get_errno())
        ioctl(l, ENABLE, 1)
        spin(0.02)
        ioctl(l, DISABLE, 1)
        print(json.dumps({"fds": [l, m1, m2], "ids": ids, "group": read(l, 3 + 2 * 3),
                          "short": read(l, 4)}))
    """, COUNTERS=4)
    assert all(fd >= 0 for fd in out["fds"]), out
    nr, enabled, running, *pairs = out["group"]
    assert nr == 3 and enabled == running and enabled >= 15_000_000
    values, ids = pairs[0::2], pairs[1::2]
    assert ids == out["ids"] and len(set(ids)) == 3
    assert values[0] == pytest.approx(3.0 * enabled, rel=1e-6)   # cycles
    assert values[1] == pytest.approx(4.5 * enabled, rel=1e-6)   # instructions
    assert values[2] == pytest.approx(0.01 * enabled, rel=1e-3)  # cache-misses
    assert out["short"] == -28  # ENOSPC: the buffer cannot hold the group


def test_group_larger_than_the_counters_is_einval_and_fixed_counters_help():
    out = child("""
        l = popen(HW, 3, read_format=TE | TR | GROUP)
        ok = [popen(HW, c, l, read_format=TE | TR | GROUP, disabled=0) for c in (2, 4)]
        too_many = popen(HW, 5, l, read_format=TE | TR | GROUP, disabled=0)
        # cycles and instructions go to fixed counters: they still fit.
        fixed = [popen(HW, c, l, read_format=TE | TR | GROUP, disabled=0) for c in (0, 1)]
        print(json.dumps({"ok": ok, "too_many": too_many, "fixed": fixed}))
    """, COUNTERS=3, FIXED=3)
    assert all(fd >= 0 for fd in out["ok"] + out["fixed"]), out
    assert out["too_many"] == -22  # EINVAL, as x86 validate_group


def test_multiplexed_singletons_share_the_counters():
    out = child("""
        fds = [popen(HW, c) for c in (0, 1, 2, 3, 4, 5)]
        for fd in fds:
            ioctl(fd, ENABLE)
        spin(0.05)
        for fd in fds:
            ioctl(fd, DISABLE)
        print(json.dumps({"reads": [read(fd, 3) for fd in fds]}))
    """, COUNTERS=2, MUX_NS=1000000)
    rates = [3.0, 4.5, 0.05, 0.01, 0.8, 0.004]
    reads = out["reads"]
    enabled = reads[0][1]
    assert enabled >= 40_000_000
    # Two counters busy all the time: the running times add up to 2 x enabled (+-1 slice each).
    assert sum(r[2] for r in reads) == pytest.approx(2 * enabled, abs=6 * 1_000_000)
    for (value, te, tr), rate in zip(reads, rates):
        assert te == pytest.approx(enabled, rel=0.02) and 0 < tr < te
        assert value * te / tr == pytest.approx(rate * te, rel=1e-3)  # scaled = truth (no wobble)


def test_kernel_errors_and_software_passthrough():
    out = child("""
        print(json.dumps({
            "raw_known": popen(RAW, 0x3c) >= 0,
            "raw_unknown": popen(RAW, 0x4d2),
            "missing": popen(HW, 3),
            "cache_ok": popen(CACHE, 0x10002) >= 0,
            "task_clock": popen(SW, 1) >= 0,
        }))
    """, RAW="0x3c,0xc0", MISSING="cache-misses")
    assert out == {"raw_known": True, "raw_unknown": -2, "missing": -2, "cache_ok": True,
                   "task_clock": True}


@pytest.mark.parametrize("paranoid, expect", [
    ("kernel", {"user_only": True, "with_kernel": -13, "software": True}),
    ("eacces", {"user_only": -13, "with_kernel": -13, "software": True}),
    ("eperm", {"user_only": -1, "with_kernel": -1, "software": True}),
])
def test_paranoid_refusals(paranoid, expect):
    out = child("""
        def ok(x):
            return True if x >= 0 else x
        print(json.dumps({"user_only": ok(popen(HW, 0, exclude_kernel=1)),
                          "with_kernel": ok(popen(HW, 0)),
                          "software": ok(popen(SW, 1, exclude_kernel=1))}))
    """, PARANOID=paranoid)
    assert out == expect


def test_no_pmu_gives_enoent():
    out = child("""
        print(json.dumps({"hw": popen(HW, 0), "raw": popen(RAW, 0x3c)}))
    """, PRESENT=0)
    assert out == {"hw": -2, "raw": -2}
