"""`lockline --calibrate-only` (issue 51): the ten seconds on a prediction's target that
`lockline predict RUN --target=DIR` rescales a run by.

Functional, not timed: one run at the shortest window lockline accepts (0.1 ms) and one
repetition, read back with plots/lockline_results.py; its rows must be the 1-thread rows of the
families the predictor fits (plots/predict_fit.py LOCK_FAMILIES) or calibration/c2c rows, with
c2c rows present and the context saying calibrate_only. "About 10 s" is checked on the plan's
estimate (--plan), here and on a 224-PU fixture topology. The flags that make no sense with it
are refused with one error line, exit 2, and nothing created.

Needs LOCKLINE_BINARY (set by ctest); skipped with a reason otherwise.
"""
import os
import re
import subprocess
import sys

import pytest

BINARY = os.environ.get("LOCKLINE_BINARY", "")
SOURCE = os.environ.get("LOCKLINE_SOURCE_DIR",
                        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "plots"))
from lockline_results import load_run  # noqa: E402
from predict_fit import LOCK_FAMILIES  # noqa: E402

BIG_TOPOLOGY = os.path.join(SOURCE, "tests", "fixtures", "topologies",
                            "synthetic-spr-2p-snc4-224pu.xml")

pytestmark = pytest.mark.skipif(
    not (BINARY and os.access(BINARY, os.X_OK)),
    reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an executable lockline")


def lockline(*args, cwd=None, timeout=300):
    return subprocess.run([BINARY, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)


def is_c2c(p):
    return p.family == "calibration" and p.params.get("c2c") == "pingpong"


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    out = tmp_path_factory.mktemp("calib") / "run"
    r = lockline("--calibrate-only", "--window=0.1ms", "--benchmark_repetitions=1",
                 f"--out={out}")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    return out, r.stdout


def test_rows_are_one_thread_rows_of_the_predicted_families_or_c2c(calibration):
    out, _ = calibration
    run = load_run(str(out / "lockline.json"))
    assert not run.skipped_rows, run.skipped_rows
    for p in run.points:
        assert is_c2c(p) or (p.family in LOCK_FAMILIES and p.threads == 1), p.key
    assert any(is_c2c(p) for p in run.points), "no calibration/c2c rows"
    assert {p.family for p in run.points if not is_c2c(p)} == set(LOCK_FAMILIES)
    assert all("latency_ns" in p.metrics for p in run.points if is_c2c(p))
    assert run.lockline.get("calibrate_only") is True


def test_its_points_are_the_default_suites_one_thread_and_c2c_points(calibration):
    _, stdout = calibration
    listed = lockline("--calibrate-only", "--list")
    assert listed.returncode == 0, listed.stderr
    keys = [line.split("\t")[0] for line in listed.stdout.splitlines()
            if not line.startswith("#")]
    default = {line.split("\t")[0] for line in lockline("--list").stdout.splitlines()}
    assert keys and set(keys) <= default
    assert f"{len(keys)} points" in stdout
    # No plots or report for it; the console says how to use it.
    assert "no plots or report" in stdout and "--target=" in stdout


def seconds(text):
    """FormatDuration's "1h02m" / "1m05s" / "42s" as seconds."""
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    assert m and text, text
    h, mi, s = (int(g or 0) for g in m.groups())
    return 3600 * h + 60 * mi + s


@pytest.mark.parametrize("topology", ["host", BIG_TOPOLOGY])
def test_plan_estimate_is_about_ten_seconds(topology):
    r = lockline("--calibrate-only", "--plan", f"--topology={topology}")
    assert r.returncode == 0, r.stderr
    m = re.search(r"^plan: (\d+) points x 3 repetitions, .*; estimated (\S+) \(budget 10s\)$",
                  r.stdout, re.M)
    assert m, r.stdout
    assert int(m.group(1)) > 0 and seconds(m.group(2)) <= 15, m.group(0)


@pytest.mark.parametrize("flag", ["--quick", "--full", "--runs=2", "--until-resolved",
                                  "--until-resolved=1m", "--duet-with=BINARY", "--threads=1,2"])
def test_refused_combinations(flag, tmp_path):
    flag = flag.replace("BINARY", BINARY)
    r = lockline("--calibrate-only", flag, f"--out={tmp_path / 'run'}", cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("lockline: error: "), r.stderr
    assert flag in lines[0] and "accepted" in lines[0]
    assert not list(tmp_path.iterdir()), "something was created"
