"""Figures that read and draw their verdicts. Every figure of two recorded runs (this VM's
quick run, tests/python/fixtures/consistency/vm-default, and the 16-core run of tests/fixtures/
big-machine, README there) and of a tiny run of the built binary made here is drawn and
checked with plots/report_checks.figure_problems (every text's extent measured with
matplotlib's Agg renderer: no text outside the canvas, no two text boxes overlapping, at most
8 series in one panel, no repeated legend label), and each verdict figure draws its verdict's
effect. The checker itself is tested on figures built to break each rule."""

import gzip
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "plots"))

from figures import MAX_SERIES, narrow_variants, new_figure, plt, verdict_figure  # noqa: E402
from lockline_results import Point, load_runs  # noqa: E402
from report_checks import figure_problems  # noqa: E402

BINARY = os.environ.get("LOCKLINE_BINARY", os.path.join(ROOT, "build", "lockline"))
# A tiny run of the default suite's rows of two questions, paired (duet) and unpaired, and the
# core-to-core matrix: 0.2 ms windows, 4 repetitions (an interval's minimum): well under a
# minute of lockline.
TINY = ["--window=0.2ms", "--benchmark_repetitions=4",
        "--benchmark_filter=^(page_free/variant:(atomic|fastpath)/on_lru_pct:0/.*stats:off|"
        "duet/of:page_free|duet/of:zone_lock/param:layout/.*work_ns:0|zone_lock/layout:"
        "lock_(before|after)_free_area/lock:ticket/pcp_batch:31/line:64/config:cma/zones:1/"
        "work_ns:0|calibration/c2c)"]


RUNS = {
    "vm-default": os.path.join(HERE, "fixtures", "consistency", "vm-default",
                               "lockline.json.gz"),
    "xeon-16c": os.path.join(ROOT, "tests", "fixtures", "big-machine",
                             "xeon-16c-lockline-threads1-4.json.gz"),
}


@pytest.fixture(scope="module", params=sorted(RUNS) + ["tiny"])
def run_dir(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    if request.param == "tiny":
        if not os.access(BINARY, os.X_OK):
            pytest.skip(f"{BINARY} not built")
        start = time.monotonic()
        proc = subprocess.run([BINARY, *TINY, f"--out={out}"], capture_output=True, text=True,
                              timeout=180)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert time.monotonic() - start < 90, "the tiny run took too long"
        return str(out)
    with gzip.open(RUNS[request.param], "rb") as src, open(out / "lockline.json", "wb") as dst:
        shutil.copyfileobj(src, dst)
    return str(out)


def test_every_verdict_figure_reads_and_draws_its_verdict(run_dir):
    """Each verdict figure's drawn effect (the median of the samples it draws) is its
    verdict's effect, and its interval the verdict's."""
    from verdicts import QUESTION_SECTION, compute_verdicts
    run = load_runs([run_dir])[0]
    verdicts = compute_verdicts(run)
    problems, compared = [], 0
    for qid in ("q1", "q2", "q3", "q4", "q5"):
        mine = [v for v in verdicts if QUESTION_SECTION.get(v["question"]) == qid]
        fig, drawn = verdict_figure(run, mine, qid)
        if fig is not None:
            problems += figure_problems(fig, f"verdicts_{qid}")
            plt.close(fig)
        for v in mine:
            assert drawn[v["id"]]["ci"] == v["ci"]
            if v["effect"] is not None:
                assert drawn[v["id"]]["effect"] == pytest.approx(v["effect"], rel=1e-9), v["id"]
                compared += 1
    assert compared >= 1
    assert problems == []


@pytest.mark.parametrize("run_dir", ["tiny"], indirect=True)
def test_report_of_the_run_finds_no_problem(run_dir, tmp_path):
    """report.py's own checks (figures, verdict lines, tables, verdict figures) on a fresh tiny
    run; the recorded runs' reports are rendered and checked once, in test_consistency.py
    (test_recorded_report_reads)."""
    import report
    path, problems = report.write_report(run_dir)
    assert_report_reads(run_dir, path, problems, tmp_path, min_figures=4)


def assert_report_reads(run_dir, path, problems, tmp_path, min_figures=8):
    """No problem report.py found (every family figure is checked as it is drawn:
    families.FIGURE_PROBLEMS), at least `min_figures` family figures, and no table wider than a
    1400 px window in headless Chromium (the report's script measures them), when installed."""
    assert problems == []
    drawn = [f for f in os.listdir(os.path.join(run_dir, "plots"))
             if f.endswith(".png") and not f.startswith("verdicts_")]
    assert len(drawn) >= min_figures, drawn
    if not os.access("/usr/bin/chromium", os.X_OK):
        return
    proc = subprocess.run(["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu",
                           "--no-first-run", "--window-size=1400,900",
                           f"--user-data-dir={tmp_path / 'profile'}",
                           "--virtual-time-budget=5000", "--dump-dom", "file://" + path],
                          capture_output=True, text=True, timeout=180)
    width = re.search(r'data-largest-table-width="(\d+)"', proc.stdout)
    assert width and int(width.group(1)) <= 1400, proc.stdout[:300]


def _run():
    return load_runs([os.path.join(HERE, "fixtures", "plots", "run_a")])[0]


def test_checker_sees_clipped_overlapping_crowded_and_repeated():
    fig, axes = new_figure(1, "t", [_run()])
    ax = axes[0]
    for i in range(MAX_SERIES + 4):
        ax.plot([0, 1], [i, i + 1], label=f"config {i % (MAX_SERIES + 3)}")
    ax.legend()
    ax.text(0.5, 0.5, "one label", transform=ax.transAxes)
    ax.text(0.5, 0.5, "one label too", transform=ax.transAxes)
    fig.text(0.98, 0.5, "runs past the right edge of the canvas")
    problems = figure_problems(fig, "bad")
    plt.close(fig)
    text = "\n".join(problems)
    assert "text outside the canvas" in text
    assert "text boxes overlap: 'one label' and 'one label too'" in text
    assert f"{MAX_SERIES + 4} series" in text
    assert "repeats ['config 0']" in text


def test_twelve_configurations_narrow_to_one():
    """A 12-configuration panel (pcp_batch x work_ns x stats) keeps <= 8 series, all of one
    configuration of the parameters it fixes."""
    variants = [tuple(sorted({"layout": lay, "pcp_batch": b, "work_ns": w}.items()))
                for lay in ("before", "after") for b in ("0", "31") for w in ("0", "cal", "50")]
    keep, fixed, left = narrow_variants(variants, MAX_SERIES)
    assert len(keep) <= MAX_SERIES and left == 12 - len(keep) and fixed
    for k, v in fixed.items():
        assert all(dict(x).get(k) == v for x in keep)


def test_duet_with_an_outlier_pair_keeps_small_effects_readable():
    """A duet with one +3700 % pair among -16 % and +44 % ones: symlog axis (linear within
    +-100 %), labels that name every varying parameter (work_ns), no checker problem."""
    from families import plot_duet
    from figures import FamilyData
    run = _run()
    pts = []
    for work, ratio in (("0", 0.84), ("cal", 1.44), ("50", 38.0)):
        for rep in range(9):
            pair = {"a_ops_per_s": 1000.0, "b_ops_per_s": 1000.0 * ratio * (1 + 0.001 * rep)}
            row = {"details": {"duet": {"pairs": [pair] * 9}}}
            params = {"of": "zone_lock", "param": "layout", "a": "x", "b": "y",
                      "work_ns": work}
            pts.append(Point("duet", "duet", params, 2, {"ops_per_s": 1.0}, repetition=rep,
                             coherence="near", key="duet/" + work, row=row))
    data = FamilyData(family="duet", runs=[(run, pts)])
    [(stem, fig)] = plot_duet(data)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert ax.get_xscale() == "symlog"
    assert len(set(labels)) == 3 and all("work_ns:" in lab for lab in labels)
    assert figure_problems(fig, stem) == []
    plt.close(fig)
