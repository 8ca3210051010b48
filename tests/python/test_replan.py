"""Issue 49: a starved run re-plans its rest instead of running 6x its estimate.

The starvation is a SIGSTOP of 22 s (no CPU is taken from anyone): the repetitions then took
far more than the plan priced them at, so the figures' points keep what fits.
Needs LOCKLINE_BINARY (set by ctest); skipped with a reason otherwise.
"""
import collections
import json
import os
import signal
import subprocess
import time

import pytest

BINARY = os.environ.get("LOCKLINE_BINARY", "")
pytestmark = pytest.mark.skipif(
    not (BINARY and os.access(BINARY, os.X_OK)),
    reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an executable lockline")


def test_a_starved_run_replans_and_says_so(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [BINARY, "--events=none", "--budget=4s", "--benchmark_repetitions=12",
         "--benchmark_filter=^locks/lock:(ticket|mcs)/cs:0/stats:off/threads:(1|2)",
         f"--out={out}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Stopped once its repetitions have begun (a first row in lockline.json), not after a
    # fixed 1.5 s: a loaded runner's start-up can outlast that, and a stop before the
    # repetitions starves none of them (ReplanIfStarved counts from their start).
    deadline = time.monotonic() + 120
    rows = 0
    while rows < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
        try:
            with open(out / "lockline.json") as f:
                rows = sum(1 for r in json.load(f)["benchmarks"]
                           if r.get("run_type") == "iteration")
        except (OSError, ValueError, KeyError):
            pass  # not written yet (the file is replaced atomically)
    assert rows >= 1, "no repetition recorded within 120 s"
    proc.send_signal(signal.SIGSTOP)
    time.sleep(22)
    proc.send_signal(signal.SIGCONT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stdout + stderr
    assert "lockline: starved:" in stdout, stdout
    with open(out / "lockline.json") as f:
        doc = json.load(f)
    replanned = doc["context"]["lockline"]["replanned"]
    assert replanned["stretch"] > 1.5 and replanned["repetitions_dropped"] > 0
    assert len(doc["context"]["load_avg_end"]) == 3
    rows = collections.Counter(r["lockline_key"] for r in doc["benchmarks"]
                               if r["run_type"] == "iteration")
    assert set(replanned["dropped"]) <= set(rows)  # every point kept a repetition
    assert sum(rows.values()) == 4 * 12 - replanned["repetitions_dropped"]
