"""--padding=BYTES through the real binary (issue 27): the distance between per-thread slots is
a power of two from 64 to 4096; anything else is one `lockline: error:` line, exit 2, and no run
directory; a run records the value used, where it came from and what it applies to, and --plan
shows it.

Needs LOCKLINE_BINARY (set by ctest); skipped with a reason otherwise.
"""
import json
import os
import subprocess

import pytest

BINARY = os.environ.get("LOCKLINE_BINARY", "")
# One uncontended locks point: the per-thread slots (PerThread, the team's records) are used.
POINT = "^locks/lock:ticket/cs:0/stats:on/threads:1$"

pytestmark = pytest.mark.skipif(
    not (BINARY and os.access(BINARY, os.X_OK)),
    reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an executable lockline")


def run(*args, cwd=None, timeout=300):
    return subprocess.run([BINARY, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)


@pytest.mark.parametrize("value", ["96", "32", "8192", "abc"])
def test_bad_padding_is_one_error_and_creates_nothing(tmp_path, value):
    # Both the default run directory (results/ under the working directory) and --out.
    for out in ([], [f"--out={tmp_path}/run"]):
        p = run("--quick", f"--benchmark_filter={POINT}", "--window=1ms", "--events=none",
                f"--padding={value}", *out, cwd=tmp_path)
        assert p.returncode == 2, p.stdout + p.stderr
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, p.stderr
        assert lines[0].startswith(f"lockline: error: --padding={value}: "), lines[0]
        assert lines[0].endswith("accepted: a power of two from 64 to 4096 bytes"), lines[0]
        assert os.listdir(tmp_path) == [], "a refused --padding left something behind"


def test_a_run_records_the_padding_it_used(tmp_path):
    out = tmp_path / "run"
    p = run("--quick", f"--benchmark_filter={POINT}", "--threads=1", "--window=1ms",
            "--events=none", "--benchmark_repetitions=1", "--padding=256", f"--out={out}")
    assert p.returncode == 0, p.stdout + p.stderr
    with open(out / "lockline.json") as f:
        doc = json.load(f)
    padding = doc["context"]["lockline"]["padding"]
    assert padding["per_thread_slot_bytes"] == 256
    assert padding["source"] == "--padding"
    assert "per-thread" in padding["applies_to"] and "kernel-structure" in padding["applies_to"]
    rows = [r for r in doc["benchmarks"] if r.get("lockline_key", "").startswith("locks/")]
    assert rows and not any(r.get("error_occurred") for r in rows)


def test_plan_shows_the_padding():
    p = run("--plan", "--threads=1")
    assert p.returncode == 0, p.stderr
    assert "padding between per-thread slots: 128 bytes (default" in p.stdout
    p = run("--plan", "--threads=1", "--padding=4096")
    assert p.returncode == 0, p.stderr
    assert "padding between per-thread slots: 4096 bytes (--padding" in p.stdout
    p = run("--plan=json", "--threads=1", "--padding=64")
    assert json.loads(p.stdout)["padding"]["per_thread_slot_bytes"] == 64


def test_help_documents_the_flag():
    p = run("--help")
    assert "--padding=BYTES" in p.stdout and "4096" in p.stdout
