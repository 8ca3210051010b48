"""Shared drawing helpers (threads panels, USL overlays, relative views, CSV) through which every
families.py plotter draws. Matplotlib runs headless (Agg); import this before pyplot."""

from __future__ import annotations

import collections
import csv
import dataclasses
import math
import textwrap
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (backend must be chosen first)
from matplotlib.figure import Figure  # noqa: E402

import usl as usl_mod  # noqa: E402
from lockline_results import (Point, Run, Stat, by_variant, grouped, summarize,  # noqa: E402
                              topology_markers)
from stats import majority_regime  # noqa: E402

# Units for the y axis, by metric name (anything else is printed as the bare name).
UNITS = {
    "ops_per_s": "ops/s", "pages_per_s": "pages/s", "faults_per_wall_s": "faults/wall-s",
    "faults_per_cpu_s": "faults/CPU-s", "allocs_per_s": "allocations/s", "gb_per_s": "GB/s",
    "faults_per_s": "faults/s", "ns_per_op": "ns/op", "latency_ns": "ns", "latency_min_ns": "ns",
    "wait_share": "share of time", "items_per_second": "items/s",
    "throughput_per_s": "iterations/s", "real_time_ns": "ns",
    "violations_per_million": "per million frees"}

# Preferred throughput metrics, most specific first, for families without a dedicated plotter.
THROUGHPUT_METRICS = ("ops_per_s", "pages_per_s", "faults_per_wall_s", "faults_per_s",
                      "allocs_per_s", "items_per_second", "bytes_per_second", "gb_per_s",
                      "throughput_per_s")


def params_json(variant) -> str:
    """A plotted series' parameters as compact JSON, recorded in every CSV row."""
    import json
    return json.dumps(dict(variant), sort_keys=True, separators=(",", ":"))


def axis_label(metric: str) -> str:
    """`pages_per_s` -> 'pages_per_s (pages/s)'."""
    unit = UNITS.get(metric)
    return f"{metric} ({unit})" if unit else metric


@dataclasses.dataclass
class FamilyData:
    """What a family plotter receives: its points in each run, options and the CSV recorder."""

    family: str
    runs: List[Tuple[Run, List[Point]]]
    baseline: Optional[str] = None
    x_arg: Optional[str] = None
    csv_rows: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    usl_rows: List[Dict[str, Any]] = dataclasses.field(default_factory=list)

    def select(self, pred: Callable[[Point], bool]) -> List[Tuple[Run, List[Point]]]:
        """Per run, the points satisfying `pred` (runs left with none are dropped)."""
        return [(run, chosen) for run, pts in self.runs
                if (chosen := [p for p in pts if pred(p)])]

    def has_metric(self, metric: str, pred: Callable[[Point], bool] = lambda p: True) -> bool:
        """True when some selected point carries `metric`."""
        return any(metric in p.metrics for _, pts in self.select(pred) for p in pts)

    def record(self, figure: str, panel: str, series: str, run: Run, x_name: str, x: Any,
               y_name: str, stat: Stat, **extra: Any) -> None:
        """One plotted value into the CSV export (extra columns: interval bounds, status, ...)."""
        self.csv_rows.append({**{
            "figure": figure, "panel": panel, "series": series, "run": run.label,
            "host": run.host, "commit": run.commit, "x_name": x_name, "x": x,
            "y_name": y_name, "y": stat.mean, "y_std": stat.std, "repetitions": stat.n,
            "coherence_shifted": int(stat.shifted), "regime": stat.regime,
            "other_regime_repetitions": len(stat.others), "overrun": int(stat.overrun),
            "from_aggregates": int(stat.from_aggregates)},
            **extra})


def new_figure(panels: int, title: str, runs: Sequence[Run], cols: int = 2,
               width: float = 6.4, height: float = 4.4) -> Tuple[Figure, List[Any]]:
    """A figure with `panels` axes, the title, and one caption line per run at the bottom."""
    cols = max(1, min(cols, panels))
    rows = math.ceil(panels / cols)
    # About 14 characters of 7-pt monospace per inch: wrap so narrow figures keep the caption.
    lines = [wrapped for run in runs
             for wrapped in textwrap.wrap(run.caption(), width=int(width * cols * 14))]
    fig_height = height * rows + 0.15 * (len(lines) + 2)
    fig = plt.figure(figsize=(width * cols, fig_height))
    fig._lockline_caption_frac = min(0.4, (0.15 * len(lines) + 0.1) / fig_height)
    axes = [fig.add_subplot(rows, cols, i + 1) for i in range(panels)]
    fig.suptitle(title, fontsize=12)
    fig.text(0.01, 0.005, "\n".join(lines), fontsize=7, va="bottom", ha="left", family="monospace")
    finish(fig, runs)
    return fig, axes


def _wrap_to_width(text_artist, inches: float) -> None:
    """Wrap a title to `inches` (an average DejaVu glyph is about 0.58 em wide): never clipped."""
    text = text_artist.get_text()
    if not text:
        return
    size = text_artist.get_fontsize()
    chars = max(12, int(inches * 72 / (0.58 * size)))
    lines = [w for line in text.split("\n") for w in (textwrap.wrap(line, chars) or [""])]
    text_artist.set_text("\n".join(lines))


def _readable_axes(fig: Figure) -> None:
    """Rules applied to every figure: wrapped titles, no offset text (EngFormatter on linear axes),
    overlapping category tick labels turned vertical."""
    from matplotlib import ticker
    fig_w = fig.get_figwidth()
    if fig._suptitle is not None:
        _wrap_to_width(fig._suptitle, fig_w * 0.95)
    for ax in fig.axes:
        pos = ax.get_position()
        _wrap_to_width(ax.title, max(1.0, pos.width * fig_w * 1.05))
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "linear" and isinstance(axis.get_major_formatter(),
                                                           ticker.ScalarFormatter):
                lo, hi = sorted(abs(v) for v in axis.get_view_interval())
                if hi >= 1e4 or 0 < hi < 1e-3:
                    axis.set_major_formatter(ticker.EngFormatter(sep=""))
                else:
                    axis.get_major_formatter().set_useOffset(False)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        labels = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
        boxes = [t.get_window_extent(renderer) for t in labels]
        if any(a.x1 > b.x0 + 1 for a, b in zip(boxes, boxes[1:])):
            for t in labels:
                t.set_rotation(90)
                t.set_ha("center")


def finish(fig: Figure, runs: Sequence[Run]) -> Figure:
    """Re-run the layout after drawing (legends change sizes), keeping room for the caption;
    wrap titles, drop offset texts and turn crowded tick labels (_readable_axes)."""
    bottom = getattr(fig, "_lockline_caption_frac", 0.03 + 0.025 * len(runs))
    fig.tight_layout(rect=(0, bottom, 1, 0.95))
    _readable_axes(fig)
    fig.tight_layout(rect=(0, bottom, 1, 0.95))
    return fig


def note(ax, text: str) -> None:
    """A small grey note (missing metric, no USL fit, ...) in the panel's upper-left corner."""
    ax.text(0.01, 0.98, "\n".join(textwrap.wrap(text, 36)),
            transform=ax.transAxes, fontsize=7, color="0.35", va="top", ha="left")


def empty_panel(ax, title: str, why: str) -> None:
    """Mark a panel whose data is missing, instead of failing the whole figure."""
    ax.set_title(title, fontsize=10)
    ax.text(0.5, 0.5, why, transform=ax.transAxes, ha="center", va="center", fontsize=9,
            color="0.4", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def series_label(variant: Tuple[Tuple[str, str], ...], varying: Iterable[str]) -> str:
    """Label from the params that differ between series of a panel (all if none differ)."""
    varying = set(varying)
    parts = [f"{k}:{v}" for k, v in variant if k in varying] or [f"{k}:{v}" for k, v in variant]
    return " ".join(parts) or "all"


def varying_keys(variants: Iterable[Tuple[Tuple[str, str], ...]]) -> List[str]:
    """Param keys whose value differs between the given variants."""
    variants = [dict(v) for v in variants]
    # A key some variants lack varies too (None among its values).
    return [k for k in dict.fromkeys(k for v in variants for k in v)
            if len({v.get(k) for v in variants}) > 1]


# Markers with the 10-colour cycle: no colour+marker pair repeats within 10 x len(MARKERS) series.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")


def series_style(index: int) -> Tuple[str, str]:
    """(colour, marker) of the index-th series in a panel: unique for the first 100 series."""
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return colors[index % len(colors)], MARKERS[(index // len(colors)) % len(MARKERS)]


def outside_legend(ax, fontsize: int = 6) -> None:
    """Legend to the right of the axes, never over the data (no-op without labelled artists)."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, fontsize=fontsize, loc="upper left",
                  bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)


def mark_other_regimes(ax, x: float, stat: Stat, color: str) -> None:
    """Hollow markers for repetitions of other coherence regimes (not in the error bar) and an
    'x' for a point with an overrun window."""
    if stat.others:
        ax.scatter([x] * len(stat.others), stat.others, s=28, facecolors="none",
                   edgecolors=color, marker="o", linewidths=0.9, zorder=4)
    if stat.overrun:
        ax.scatter([x], [stat.mean], s=60, color="black", marker="x", zorder=6)


def regime_legend(ax, others: bool, overrun: bool) -> None:
    """Legend entries explaining hollow markers and overrun crosses, once per panel."""
    if others:
        ax.scatter([], [], s=28, facecolors="none", edgecolors="0.3", marker="o",
                   label="other coherence regime (not averaged)")
    if overrun:
        ax.scatter([], [], s=60, color="black", marker="x", label="overrun window")


def threads_panel(ax, data: FamilyData, figure: str, panel: str,
                  runs: List[Tuple[Run, List[Point]]], metric: str, fit_usl: bool = True,
                  ideal: bool = True, x_name: str = "threads") -> bool:
    """Draw `metric` against threads, one line per (run, variant): error bars from one regime's
    repetitions (other regimes hollow, overrun points crossed), the ideal line, a USL fit, topology
    markers, a colour+marker per series. Returns False (with a note) without the metric."""
    ax.set_title(panel, fontsize=10)
    summaries = [(run, summarize(pts, metric)) for run, pts in runs]
    summaries = [(run, s) for run, s in summaries if s]
    if not summaries:
        empty_panel(ax, panel, f"metric '{metric}' not in these rows")
        return False
    multi = len(summaries) > 1
    variants = [v for _, s in summaries for v in s]
    if len(variants) > MAX_SERIES:
        keep, fixed, left = narrow_variants(variants, MAX_SERIES // len(summaries) or 1)
        summaries = [(run, {v: by for v, by in s.items() if v in keep}) for run, s in summaries]
        summaries = [(run, s) for run, s in summaries if s]
        ax.set_title(f"{panel} [only {' '.join(f'{k}:{v}' for k, v in fixed.items())}; "
                     f"{left} other configuration{'s' if left != 1 else ''} not drawn]",
                     fontsize=10)
    y_top = 0.0
    regime = majority_regime(st.regime for _, s in summaries for by_n in s.values()
                             for st in by_n.values() if st.regime)
    varying = varying_keys(v for _, s in summaries for v in s)
    style_cycle = ["-", "--", "-.", ":"]
    unfitted = []
    all_threads = set()
    style_of: Dict[str, Tuple[str, str]] = {}
    any_other = any_overrun = False
    for run_idx, (run, summary) in enumerate(summaries):
        for variant, by_n in sorted(summary.items()):
            label = series_label(variant, varying)
            full = f"{label} [{run.label}]" if multi else label
            # One colour + marker per legend entry: overlaid runs never share one.
            color, marker = style_of.setdefault(full, series_style(len(style_of)))
            ns = sorted(by_n)
            all_threads.update(ns)
            ys = [by_n[n].mean for n in ns]
            errs = [by_n[n].std for n in ns]
            y_top = max([y_top] + [y + e for y, e in zip(ys, errs)]
                        + [max(by_n[n].others, default=0.0) for n in ns])
            # A point of another regime than most of the panel's: hollow, never joined.
            joined = [i for i, n in enumerate(ns) if by_n[n].regime in ("", regime)]
            ax.errorbar([ns[i] for i in joined], [ys[i] for i in joined],
                        yerr=[errs[i] for i in joined], marker=marker, ms=4, capsize=2,
                        color=color, linestyle=style_cycle[run_idx % len(style_cycle)], label=full)
            apart = [i for i in range(len(ns)) if i not in joined]
            ax.scatter([ns[i] for i in apart], [ys[i] for i in apart], s=28, marker=marker,
                       facecolors="none", edgecolors=color, zorder=4)
            any_other |= bool(apart)
            for n in ns:
                mark_other_regimes(ax, n, by_n[n], color)
                any_other |= bool(by_n[n].others)
                any_overrun |= by_n[n].overrun
                data.record(figure, panel, full, run, x_name, n, metric, by_n[n],
                            params=params_json(variant))
            if ideal and 1 in by_n and len(ns) > 1:
                ax.plot(ns, [by_n[1].mean * n for n in ns], linestyle=":", color=color,
                        linewidth=0.8, alpha=0.7)
            if fit_usl:
                _usl_overlay(ax, data, (figure, panel, full), run, metric, ns, ys, color, unfitted)
        for n, text in (topology_markers(run, all_threads) if x_name == "threads" else []):
            ax.axvline(n, color="0.5", linewidth=0.8, linestyle="-.")
            # Labels at the bottom: legends live top-left, curves rarely reach the bottom.
            ax.text(n, 0.02, f"{text} ", transform=ax.get_xaxis_transform(), rotation=90,
                    fontsize=7, va="bottom", ha="right", color="0.3")
    if ideal:
        ax.plot([], [], linestyle=":", color="0.3", label="ideal (1-thread × N)")
    regime_legend(ax, any_other, any_overrun)
    if unfitted:
        note(ax, "USL: " + unfitted[0].split(": ", 1)[-1]
             + (f" ({len(unfitted)} series)" if len(unfitted) > 1 else ""))
    if len(all_threads) > 1 and min(all_threads) > 0 and x_name == "threads":
        ax.set_xscale("log", base=2)   # thread sweeps double; topology boundaries stay legible
    ax.set_xticks(sorted(all_threads))
    ax.set_xticklabels([str(n) for n in sorted(all_threads)],
                       rotation=90 if len(all_threads) > 12 else 0)
    if y_top > 0:
        # The ideal line would dwarf the measured curves; keep them readable.
        ax.set_ylim(0, y_top * 1.25)
    ax.set_xlabel(x_name if x_name == "threads" else f"{x_name} (benchmark argument or counter)")
    ax.set_ylabel(axis_label(metric))
    ax.grid(True, alpha=0.3)
    outside_legend(ax)
    return True


def _usl_overlay(ax, data: FamilyData, names: Tuple[str, str, str], run: Run, metric: str,
                 ns: List[int], ys: List[float], color: str, unfitted: List[str]) -> None:
    """A series' USL fit drawn dashed over `ns`, recorded in data.usl_rows (`names` = (figure,
    panel, series)); a refused fit is appended to `unfitted` with the reason."""
    figure, panel, full = names
    try:
        fit = usl_mod.fit_usl(ns, ys)
    except usl_mod.UslError as err:
        unfitted.append(f"{full}: {err}")
        return
    grid = [ns[0] * (ns[-1] / ns[0]) ** (i / 100) for i in range(101)]
    ax.plot(grid, usl_mod.usl(grid, fit.lam, fit.sigma, fit.kappa), linestyle="--",
            color=color, linewidth=1, alpha=0.8, label=f"USL {fit.summary()}")
    data.usl_rows.append({
        "figure": figure, "panel": panel, "series": full, "run": run.label,
        "metric": metric, "lambda": fit.lam, "sigma": fit.sigma,
        "sigma_lo": fit.sigma_ci[0], "sigma_hi": fit.sigma_ci[1], "kappa": fit.kappa,
        "kappa_lo": fit.kappa_ci[0], "kappa_hi": fit.kappa_ci[1],
        "peak_threads": fit.peak_threads,
        "peak_threads_lo": fit.peak_threads_ci[0] if fit.peak_threads_ci else None,
        "peak_threads_hi": fit.peak_threads_ci[1] if fit.peak_threads_ci else None,
        "peak_throughput": fit.peak_throughput})


def narrow_variants(variants: Iterable[Tuple[Tuple[str, str], ...]], limit: int
                    ) -> Tuple[set, Dict[str, str], int]:
    """(variants kept, parameters fixed, number left out): fixes one varying parameter at a time to
    its most common value ("-": absent) until at most `limit` series remain."""
    allv = list(dict.fromkeys(variants))
    keep = list(allv)
    fixed: Dict[str, str] = {}
    while len(keep) > limit:
        best = None
        for k in varying_keys(keep):
            values = collections.Counter(dict(v).get(k, "-") for v in keep)
            top = min(values, key=lambda x: (-values[x], _natural(x)))
            if values[top] < len(keep) and (best is None or values[top] > best[2]):
                best = (k, top, values[top])
        if best is None:
            break
        k, top, _ = best
        fixed[k] = top
        keep = [v for v in keep if dict(v).get(k, "-") == top]
    return set(keep), fixed, len(allv) - len(keep)


def _natural(value: str) -> Tuple:
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


def param_panel(ax, data: FamilyData, figure: str, panel: str,
                runs: List[Tuple[Run, List[Point]]], metric: str, x_name: str) -> bool:
    """`metric` against the numeric parameter or user counter `x_name` (linear axis, no USL or
    ideal line), one series per other parameter combination and thread count; non-integer values
    left out."""
    shifted_runs = []
    for run, pts in runs:
        moved = []
        # A counter read per repetition varies a little: each series' x is its repetitions'
        # median, so one argument's repetitions stay one point of a line.
        counter_x: Dict[Tuple, float] = {}
        if all(x_name not in p.params for p in pts):
            seen = grouped((p for p in pts if isinstance(p.metrics.get(x_name), (int, float))),
                           lambda p: (p.variant, p.threads, p.aggregate))
            counter_x = {k: sorted(float(p.metrics[x_name]) for p in v)[len(v) // 2]
                         for k, v in seen.items()}
        for p in pts:
            raw = p.params.get(x_name, counter_x.get((p.variant, p.threads, p.aggregate),
                                                     p.metrics.get(x_name)))
            try:
                value = float(raw)
            except (TypeError, ValueError):
                continue
            x = int(value) if value.is_integer() else value
            params = {k: v for k, v in p.params.items() if k != x_name}
            if p.threads > 1:
                params["threads"] = str(p.threads)
            moved.append(dataclasses.replace(p, params=params, threads=x))
        if moved:
            shifted_runs.append((run, moved))
    if not shifted_runs:
        empty_panel(ax, panel, f"no numeric argument or counter '{x_name}'")
        return False
    # An argument that varies one-to-one with a counter on the x axis (BM_fill/N with counter
    # elements = 1000 N) only restates it: not a series of its own.
    moved_all = [p for _, moved in shifted_runs for p in moved]
    for key in {k for p in moved_all for k in p.params}:
        pairs = {(p.params.get(key), p.threads) for p in moved_all}
        if len(pairs) == len({v for v, _ in pairs}) == len({x for _, x in pairs}) > 1:
            shifted_runs = [(run, [dataclasses.replace(p, params={
                k: v for k, v in p.params.items() if k != key}) for p in moved])
                for run, moved in shifted_runs]
            moved_all = [p for _, moved in shifted_runs for p in moved]
    return threads_panel(ax, data, figure, panel, shifted_runs, metric, fit_usl=False,
                         ideal=False, x_name=x_name)


def relative_panel(ax, data: FamilyData, figure: str, panel: str,
                   runs: List[Tuple[Run, List[Point]]], metric: str, baseline: str) -> bool:
    """Each variant's `metric` as a ratio to the matching `baseline` variant against threads, with
    its 95 % rerun interval (stats.compare_points, for_rerun); too few repetitions: hollow, no
    interval. Returns False with a note when no series has the baseline."""
    import stats
    ax.set_title(panel, fontsize=10)
    # The parameter that has value `baseline` in some row (e.g. 'layout').
    key = next((k for _, pts in runs for p in pts for k, v in p.params.items()
                if v == baseline), None)
    if key is None:
        empty_panel(ax, panel, f"no variant named '{baseline}'")
        return False
    multi = len(runs) > 1
    drawn = too_few = False
    all_threads = set()
    index = 0
    for run, pts in runs:
        groups = by_variant(p for p in pts if p.aggregate is None and metric in p.metrics)
        varying = [k for k in varying_keys(groups) if k != key] + [key]
        for variant, by_n in sorted(groups.items()):
            params = dict(variant)
            if key not in params or params[key] == baseline:
                continue
            base = groups.get(tuple(sorted({**params, key: baseline}.items())))
            if not base:
                continue
            ns = [n for n in sorted(by_n) if n in base]
            if not ns:
                continue
            label = series_label(variant, varying) + (f" [{run.label}]" if multi else "")
            color, marker = series_style(index)
            index += 1
            xs, ys, lo, hi, hollow = [], [], [], [], []
            for n in ns:
                # The verdict of these rows where there is one (paired where the run has their
                # duet), else the verdicts' computation, rerun interval included.
                c = _verdict_of(run, base[n][0].key, by_n[n][0].key, metric) or \
                    stats.for_rerun(stats.compare_points(base[n], by_n[n], metric))
                if c.effect is None:
                    continue
                ratio = 1.0 + c.effect
                if c.ci is None:
                    hollow.append((n, ratio))
                else:
                    xs.append(n)
                    ys.append(ratio)
                    lo.append(ratio - (1.0 + c.ci[0]))
                    hi.append((1.0 + c.ci[1]) - ratio)
                data.record(figure, panel, label, run, "threads", n, f"{metric}/{baseline}",
                            Stat(ratio, 0.0, min(c.n_base, c.n_variant), bool(c.dropped),
                                 c.regime),
                            ci_lo=None if c.ci is None else 1.0 + c.ci[0],
                            ci_hi=None if c.ci is None else 1.0 + c.ci[1], status=c.status,
                            params=params_json(variant), base_key=base[n][0].key,
                            variant_key=by_n[n][0].key)
                all_threads.add(n)
                drawn = True
            if xs:
                ax.errorbar(xs, ys, yerr=[lo, hi], marker=marker, ms=4, capsize=2, color=color,
                            label=label)
            if hollow:
                ax.scatter([h[0] for h in hollow], [h[1] for h in hollow], s=30,
                           facecolors="none", edgecolors=color, marker=marker,
                           label=None if xs else label)
                too_few = True
    if not drawn:
        empty_panel(ax, panel, f"no series to compare with '{baseline}'")
        return False
    if too_few:
        ax.scatter([], [], s=30, facecolors="none", edgecolors="0.3", marker="o",
                   label=f"too few same-regime repetitions (< {stats.MIN_REPETITIONS}): no "
                         "interval")
    ax.axhline(1.0, color="0.3", linewidth=0.8)
    if len(all_threads) > 1:
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(all_threads))
        ax.set_xticklabels([str(n) for n in sorted(all_threads)])
    ax.set_xlabel("threads")
    ax.set_ylabel("\n".join(textwrap.wrap(f"{metric} / {key}:{baseline} (ratio, 95 % "
                                          "rerun interval)", 34)), fontsize=8)
    ax.grid(True, alpha=0.3)
    outside_legend(ax)
    return True


def _verdict_of(run: Run, base_key: str, variant_key: str, metric: str):
    """The verdicts.json record of a comparison of exactly these rows, as a stats.Comparison
    (effect, ci, status, counts), or None; the run's verdicts are computed once."""
    import stats
    if not hasattr(run, "_verdicts"):
        from verdicts import compute_verdicts
        run._verdicts = compute_verdicts(run)
    for v in run._verdicts:
        if (v["base_key"], v["variant_key"], v["metric"]) == (base_key, variant_key, metric):
            return stats.Comparison(v["comparison"], v["effect"],
                                    tuple(v["ci"]) if v["ci"] else None,
                                    "" if v["regime"] == "all" else v["regime"], v["n_base"],
                                    v["n_variant"], v["dropped"], v["status"])
    return None


def write_csv(path: str, rows: List[Dict[str, Any]]) -> None:
    """Write dict rows with the union of their keys as header (first-seen order), through an
    exclusively created temporary file renamed into place (outputs.write_atomic)."""
    import io
    from outputs import write_atomic
    fields = dict.fromkeys(k for row in rows for k in row)
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(fields))
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(path, text.getvalue())


MAX_SERIES = 8  # series (legend entries that name data) a panel may draw (project rule)


def verdict_figure(run: Run, verdicts: Sequence[Dict[str, Any]], title: str
                   ) -> Tuple[Optional[Figure], Dict[str, Dict[str, Any]]]:
    """One question's figure from its verdicts' own samples (verdicts.verdict_samples), a panel per
    verdict: samples of its regime, the effect as a line, the rerun interval as a band, other
    regimes hollow. Returns (figure, drawn: {id: effect, interval, count}); (None, {}) without."""
    from verdicts import verdict_samples
    if not verdicts:
        return None, {}
    fig, axes = new_figure(len(verdicts), title, [run], cols=min(2, len(verdicts)), width=6.4,
                           height=3.2)
    drawn: Dict[str, Dict[str, Any]] = {}
    for ax, v in zip(axes, verdicts):
        s = verdict_samples(run.points, v)
        ci = v.get("ci")
        # "no effect measured" read as a finding; the verdict's status says why there is none.
        words = (f"no effect computed ({str(v.get('status')).replace('_', ' ')})"
                 if v.get("effect") is None else
                 f"{v['effect'] * 100:+.1f} %" + (f" [{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}]"
                                                  if ci else " (no interval)"))
        if v.get("status") == "not_answerable":
            words = f"not answerable here\nmeasured {words}, not an answer"
        ax.set_title(f"{v.get('id')}: {words}", fontsize=8)
        where = f"{s['regime']}-regime " if s["regime"] else ""
        if s["kind"] == "paired":
            cols = [("window pairs", s["used"])]
            others = [(0, lab, r) for _, lab, r in s["others"]]
            xlabel = f"{len(s['used'])} {where}window pairs (paired windows): B / A"
        else:
            base = s["base_median"] or 1.0
            a, b = (v.get(k, "").split("/") for k in ("base_key", "variant_key"))
            cols = [(" ".join(x for x in a if x not in b) or "base", [x / base for x in s["base"]]),
                    (" ".join(x for x in b if x not in a) or "variant",
                     [x / base for x in s["variant"]])]
            others = [(int(side == "variant"), lab, x / base) for side, lab, x in s["others"]]
            xlabel = (f"{len(s['base'])} / {len(s['variant'])} {where}repetitions: "
                      "% of the base median")
        for i, (_, ys) in enumerate(cols):
            xs = [i + 0.3 * (k / max(1, len(ys) - 1) - 0.5) for k in range(len(ys))]
            ax.scatter(xs, [100 * (y - 1) for y in ys], s=10, color="tab:blue", zorder=3)
        for k, lab in enumerate(sorted({lab for _, lab, _ in others})):
            pts = [(i, y) for i, la, y in others if la == lab]
            ax.scatter([i + 0.2 for i, _ in pts], [100 * (y - 1) for _, y in pts], s=18,
                       facecolors="none", edgecolors=f"C{k + 1}", zorder=2,
                       label=f"other regime {lab}: not in the effect")
        x1 = len(cols) - 1
        if s["effect"] is not None:
            ax.hlines(100 * s["effect"], x1 - 0.35, x1 + 0.35, color="black", lw=1.5,
                      label="effect (median)", zorder=4)
        if ci:
            ax.fill_between([x1 - 0.35, x1 + 0.35], 100 * ci[0], 100 * ci[1], color="0.5",
                            alpha=0.25, label="95 % rerun interval")
        ax.axhline(0, color="0.3", lw=0.6)
        ax.set_xticks(range(len(cols)))
        ax.set_xticklabels([name for name, _ in cols], fontsize=7)
        ax.set_xlim(-0.6, len(cols) - 0.4)
        ys = [100 * (y - 1) for _, c in cols for y in c] + [100 * (y - 1) for _, _, y in others]
        ys += [0.0] + [100 * c for c in (ci or [])]
        lo, hi = min(ys) - 0.1 * (max(ys) - min(ys)) - 1, max(ys) * 1.15 + 1
        if max(abs(y) for y in ys) > 300:
            # Linear within +-100 %, logarithmic beyond; a factor of 2 of room at the ends.
            ax.set_yscale("symlog", linthresh=100)
            lo, hi = min(lo, 2 * min(ys)), max(hi, 2 * max(ys))
        ax.set_ylim(lo, hi)
        ax.set_ylabel("effect (%)", fontsize=8)
        ax.set_xlabel(xlabel, fontsize=7)
        ax.grid(True, axis="y", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, loc="best")
        drawn[v["id"]] = {"effect": s["effect"], "ci": ci, "regime": s["regime"],
                          "n": len(s.get("used", s.get("variant", [])))}
    return finish(fig, [run]), drawn
