"""Issue 35: figures that read. Every figure of a recorded default-suite run (this VM's,
tests/python/fixtures/consistency/vm-default) and of the 16-core run (tests/fixtures/
big-machine, README there) is drawn and checked with figure_problems (below), which measures
every text's extent with matplotlib's Agg renderer: no text outside the canvas, no two text
boxes overlapping, at most 8 series in one panel, no repeated legend label. The checker itself
is tested on figures built to break each rule."""

import gzip
import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "plots"))

from figures import (MAX_SERIES, Figure, narrow_variants, new_figure, plt,  # noqa: E402
                     verdict_figure)
from lockline_results import Point, load_runs  # noqa: E402


def _panel_series(ax) -> list:
    """Labels of the data series drawn in `ax`: labelled lines, bar containers and
    collections, without helper entries (ideal/USL lines, regime and overrun markers, fits)."""
    helpers = ("ideal", "USL", "other coherence regime", "overrun window", "fit", "seed",
               "interval", "model", "4·lg", "2^(")
    _, labels = ax.get_legend_handles_labels()
    return [lab for lab in labels if not any(lab.startswith(h) or h in lab for h in helpers)]


def figure_problems(fig: Figure, name: str = "") -> list:
    """Readability problems of a drawn figure, from the Agg renderer's text
    extents (display pixels): text outside the canvas (clipped titles, captions), two visible
    text boxes overlapping (tick labels, titles, bar labels, '1e6' offsets, colour-bar
    labels, legends), more than MAX_SERIES series in one panel, a legend repeating a label.
    Returns one sentence per problem ([] = readable)."""
    from matplotlib.text import Text
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    problems: list = []
    boxes = []
    # Tick labels exist for ticks outside the view limits too; matplotlib draws only those of
    # the ticks _update_ticks returns.
    tick_labels, drawn = set(), set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                tick_labels.update((id(tick.label1), id(tick.label2)))
            for tick in axis._update_ticks():
                drawn.update((id(tick.label1), id(tick.label2)))
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text().strip() or text.get_alpha() == 0:
            continue
        if id(text) in tick_labels and id(text) not in drawn:
            continue
        try:
            box = text.get_window_extent(renderer)
        except (RuntimeError, ValueError):
            continue
        if box.width <= 0 or box.height <= 0:
            continue
        label = text.get_text().replace("\n", " ")[:60]
        tol = 1.0
        if box.x0 < -tol or box.y0 < -tol or box.x1 > width + tol or box.y1 > height + tol:
            problems.append(f"{name}: text outside the canvas: {label!r}")
        boxes.append((box, label, text))
    for i in range(len(boxes)):
        a, la, ta = boxes[i]
        for j in range(i + 1, len(boxes)):
            b, lb, tb = boxes[j]
            w = min(a.x1, b.x1) - max(a.x0, b.x0)
            h = min(a.y1, b.y1) - max(a.y0, b.y0)
            # A pixel of touching is rounding, not overlap.
            if w > 1.5 and h > 1.5:
                problems.append(f"{name}: text boxes overlap: {la!r} and {lb!r}")
    for k, ax in enumerate(fig.axes):
        series = _panel_series(ax)
        title = ax.get_title() or f"panel {k + 1}"
        if len(series) > MAX_SERIES:
            problems.append(f"{name}: {len(series)} series in panel {title!r} (> {MAX_SERIES})")
        legend = ax.get_legend()
        if legend is not None:
            texts = [t.get_text() for t in legend.get_texts()]
            dup = sorted({t for t in texts if texts.count(t) > 1})
            if dup:
                problems.append(f"{name}: legend of panel {title!r} repeats {dup}")
    for legend in fig.legends:
        texts = [t.get_text() for t in legend.get_texts()]
        dup = sorted({t for t in texts if texts.count(t) > 1})
        if dup:
            problems.append(f"{name}: figure legend repeats {dup}")
    return problems


RUNS = {
    "vm-default": os.path.join(HERE, "fixtures", "consistency", "vm-default",
                               "lockline.json.gz"),
    "xeon-16c": os.path.join(ROOT, "tests", "fixtures", "big-machine",
                             "xeon-16c-lockline-threads1-4.json.gz"),
}


@pytest.fixture(scope="module", params=sorted(RUNS))
def run_dir(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    with gzip.open(RUNS[request.param], "rb") as src, open(out / "lockline.json", "wb") as dst:
        shutil.copyfileobj(src, dst)
    return str(out)


def test_every_figure_reads(run_dir):
    from families import plot_family
    from plot import family_data
    runs = load_runs([run_dir])
    problems, drawn = [], 0
    for fam in runs[0].families():
        for stem, fig in plot_family(family_data(runs, fam)):
            problems += figure_problems(fig, stem)
            drawn += 1
            plt.close(fig)
    assert drawn >= 8
    assert problems == []


def test_every_verdict_figure_reads(run_dir):
    from verdicts import QUESTION_SECTION, compute_verdicts
    run = load_runs([run_dir])[0]
    verdicts = compute_verdicts(run)
    problems = []
    for qid in ("q1", "q2", "q3", "q4", "q5"):
        fig = verdict_figure(run, [v for v in verdicts
                                   if QUESTION_SECTION.get(v["question"]) == qid], qid)
        if fig is not None:
            problems += figure_problems(fig, f"verdicts_{qid}")
            plt.close(fig)
    assert problems == []


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
