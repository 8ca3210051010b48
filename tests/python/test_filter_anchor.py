"""--benchmark_filter is matched once, by lockline, against the point keys (issue 19: found by
the rehearsal, where '...threads:4$' selected points that Google Benchmark then refused, because
it matched the filter again against '<key>/iterations:N/manual_time', and the run wrote 0 rows)."""

import json
import os
import subprocess

import pytest

BINARY = os.environ.get("LOCKLINE_BINARY", "")


@pytest.mark.skipif(not os.path.isfile(BINARY), reason="LOCKLINE_BINARY not set")
def test_anchored_filter_runs_the_points_it_selects(tmp_path):
    """A '$'-anchored key filter runs exactly the selected point."""
    out = tmp_path / "run"
    key = "calibration/op:cas/line:private/threads:1"
    proc = subprocess.run([BINARY, "--quick", "--window=1ms", "--benchmark_repetitions=1",
                           "--events=none", f"--benchmark_filter=^{key}$", f"--out={out}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    with open(out / "lockline.json", encoding="utf-8") as handle:
        rows = [r for r in json.load(handle)["benchmarks"] if r.get("run_type") == "iteration"]
    assert [r["lockline_key"] for r in rows] == [key]
