"""One small plotting function per lockline family, registered in FAMILY_PLOTTERS with
`@register("name")`: it takes a figures.FamilyData and returns [(file stem, Figure)]; others get
`plot_generic`. A missing metric turns into a panel with a note, never an exception."""

from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from figures import (MAX_SERIES, THROUGHPUT_METRICS, UNITS, FamilyData, Figure, _natural,
                     axis_label, empty_panel, finish, narrow_variants, new_figure, note,
                     param_panel, params_json, plt, relative_panel, series_label,
                     threads_panel, varying_keys)
from lockline_results import Stat, grouped, summarize, summarize_side_by_side
import stats

Plotter = Callable[[FamilyData], List[Tuple[str, Figure]]]
FAMILY_PLOTTERS: Dict[str, Plotter] = {}

# Baseline variant of the relative view when the user names none: zone_lock's is the verdict's
# base, so the ratio drawn is the verdict's effect + 1.
DEFAULT_BASELINES = {"zone_lock": "lock_before_free_area"}


def register(family: str) -> Callable[[Plotter], Plotter]:
    """Decorator: make `fn` the plotter of `family`."""
    def wrap(fn: Plotter) -> Plotter:
        FAMILY_PLOTTERS[family] = fn
        return fn
    return wrap


def _runs_of(data: FamilyData):
    return [run for run, _ in data.runs]


def _pick_metric(data: FamilyData, pred=lambda p: True, preferred=THROUGHPUT_METRICS) -> Optional[str]:
    """First preferred metric present, else any `*_per_s`, else `ns_per_op`/`real_time_ns`."""
    for metric in preferred:
        if data.has_metric(metric, pred):
            return metric
    names = sorted({m for _, pts in data.select(pred) for p in pts for m in p.metrics})
    rates = [m for m in names if m.endswith(("_per_s", "/s"))]
    return (rates + [m for m in ("ns_per_op", "real_time_ns") if m in names] + names + [None])[0]


def plot_generic(data: FamilyData) -> List[Tuple[str, Figure]]:
    """Throughput against threads, one panel per benchmark prefix, plus a relative view when a
    baseline variant applies."""
    benches = sorted({p.bench for _, pts in data.runs for p in pts})
    metrics = {b: _pick_metric(data, lambda p, b=b: p.bench == b) for b in benches}
    shown = {m for m in metrics.values() if m}
    what = axis_label(shown.pop()) if len(shown) == 1 else "throughput"
    axes_of = {b: _x_axis(data, data.select(lambda p, b=b: p.bench == b)) for b in benches}
    # The title names the panels' x axis: threads, an argument, or bars.
    xs = {axes_of[b] or ("threads" if len({p.threads for _, pts in data.select(
        lambda p, b=b: p.bench == b) for p in pts}) > 1 else "") for b in benches}
    against = (f" against {xs.pop()}" if len(xs) == 1 and "" not in xs
               else " per benchmark" if xs == {""} else " against threads or arguments")
    fig, axes = new_figure(len(benches), f"{data.family}: {what}{against}", _runs_of(data))
    for ax, bench in zip(axes, benches):
        pred = lambda p, b=bench: p.bench == b
        metric = metrics[bench]
        if metric is None:
            empty_panel(ax, bench, "no numeric metric")
            continue
        selected = data.select(pred)
        x_arg = axes_of[bench]
        if x_arg:
            param_panel(ax, data, data.family, f"{bench}: {axis_label(metric)}", selected, metric,
                        x_arg)
        elif len({p.threads for _, pts in selected for p in pts}) == 1:
            bar_panel(ax, data, data.family, f"{bench}: {axis_label(metric)}", selected, metric)
        else:
            threads_panel(ax, data, data.family, f"{bench}: {axis_label(metric)}", selected,
                          metric)
    return [(data.family, finish(fig, _runs_of(data)))] + _relative(data, benches)


def _x_axis(data: FamilyData, selected) -> Optional[str]:
    """The parameter to plot against instead of threads: data.x_arg when the rows have it; else, at
    one thread count, the last integer argN that varies; None for a thread axis or bars."""
    pts = [p for _, ps in selected for p in ps]
    names = {k for p in pts for k in p.params}
    if data.x_arg:
        # plot.py has checked that some family's rows have it (argument or counter).
        found = data.x_arg in names or any(data.x_arg in p.metrics for p in pts)
        return data.x_arg if found else None
    if len({p.threads for p in pts}) > 1:
        return None
    for name in sorted((k for k in names if k.startswith("arg") and k[3:].isdigit()),
                       key=lambda k: -int(k[3:])):
        values = {p.params.get(name) for p in pts}
        if len(values) > 1 and all(v is not None and v.lstrip("-").isdigit() for v in values):
            return name
    return None


def bar_panel(ax, data: FamilyData, figure: str, panel: str, runs, metric: str) -> None:
    """Bars of `metric` per (run, variant, thread count), error bars from repetitions; used
    where there is nothing to plot against threads (one thread count)."""
    labels, means, errs = [], [], []
    for run, pts in runs:
        summary = summarize(pts, metric)
        varying = varying_keys(summary)
        # Numeric values sort as numbers (1, 2, 16, not 1, 16, 2).
        for variant, by_n in sorted(summary.items(),
                                    key=lambda kv: tuple((k,) + _natural(v) for k, v in kv[0])):
            for n, stat in sorted(by_n.items()):
                label = series_label(variant, varying) + (f" [{run.label}]" if len(runs) > 1 else "")
                if len({p.threads for p in pts}) > 1:
                    label += f" N={n}"
                labels.append(label)
                means.append(stat.mean)
                errs.append(stat.std)
                data.record(figure, panel, label, run, "threads", n, metric, stat)
    if not labels:
        empty_panel(ax, panel, f"metric '{metric}' not in these rows")
        return
    positive = [m for m in means if m > 0]
    horizontal = len(labels) > 3 or max(len(lab) for lab in labels) > 14
    if horizontal:  # many or long category names: readable on the y axis
        pos = list(range(len(labels)))[::-1]
        ax.barh(pos, means, xerr=errs, capsize=3)
    else:
        pos = list(range(len(labels)))
        ax.bar(pos, means, yerr=errs, capsize=3)
    value, name = ("x", "y") if horizontal else ("y", "x")
    if positive and max(positive) / min(positive) > 100:
        getattr(ax, f"set_{value}scale")("log")
    getattr(ax, f"set_{name}ticks")(pos)
    getattr(ax, f"set_{name}ticklabels")(labels, fontsize=7)
    getattr(ax, f"set_{value}label")(axis_label(metric))
    ax.grid(True, axis=value, alpha=0.3)
    ax.set_title(panel, fontsize=10)


def _relative(data: FamilyData, benches: List[str]) -> List[Tuple[str, Figure]]:
    """`<family>_relative` figure when data.baseline names a variant present in the family."""
    baseline = data.baseline or DEFAULT_BASELINES.get(data.family)
    if not baseline or not any(baseline in p.params.values() for _, pts in data.runs for p in pts):
        return []
    fig, axes = new_figure(len(benches), f"{data.family}: relative to {baseline}", _runs_of(data))
    for ax, bench in zip(axes, benches):
        pred = lambda p, b=bench: p.bench == b
        metric = _pick_metric(data, pred)
        if metric:
            relative_panel(ax, data, f"{data.family}_relative", f"{bench}: {metric} ratio",
                           data.select(pred), metric, baseline)
    return [(f"{data.family}_relative", finish(fig, _runs_of(data)))]


@register("locks")
def plot_locks(data: FamilyData) -> List[Tuple[str, Figure]]:
    """Lock throughput and wait share against threads: one row of panels per critical section /
    instrumentation combination, one series per lock kind."""
    def group_of(p):
        return tuple((k, v) for k, v in p.variant if k != "lock")
    sels = [(g, data.select(lambda p, g=g: group_of(p) == g))
            for g in sorted({group_of(p) for _, pts in data.runs for p in pts})]
    # A wait-share panel only for groups whose rows carry wait_share (stats:on).
    sels = [(g, sel, any("wait_share" in p.metrics for _, pts in sel for p in pts))
            for g, sel in sels]
    panels = sum(2 if wait else 1 for _, _, wait in sels)
    waits = any(wait for _, _, wait in sels)
    fig, axes = new_figure(panels, "locks: throughput (ops/s)" + (
        " and share of time waiting" if waits else "") + " against threads, per critical "
        "section", _runs_of(data), width=7.4)
    i = 0
    for group, sel, wait in sels:
        where = " ".join(f"{k}:{v}" for k, v in group) or "all"
        threads_panel(axes[i], data, "locks", f"ops/s, {where}", sel, "ops_per_s")
        i += 1
        if wait:
            threads_panel(axes[i], data, "locks", f"share of time waiting, {where}", sel,
                          "wait_share", fit_usl=False, ideal=False)
            i += 1
    return [("locks", finish(fig, _runs_of(data)))] + _relative(data, ["locks"])


@register("zone_lock")
def plot_zone_lock(data: FamilyData) -> List[Tuple[str, Figure]]:
    """zone->lock placement: throughput per layout, one panel per lock kind, and the ratio of
    each layout to the baseline layout (default lock_after_free_area)."""
    locks = sorted({p.params.get("lock", "?") for _, pts in data.runs for p in pts})
    sels = [data.select(lambda p, l=lock: p.params.get("lock", "?") == l) for lock in locks]
    fig, axes = new_figure(len(locks), "zone_lock: zone->lock placement, throughput (ops/s) "
                           "against threads", _runs_of(data))
    for ax, lock, sel in zip(axes, locks, sels):
        threads_panel(ax, data, "zone_lock", f"lock:{lock}", sel, "ops_per_s")
    out = [("zone_lock", finish(fig, _runs_of(data)))]
    baseline = data.baseline or DEFAULT_BASELINES["zone_lock"]
    fig, axes = new_figure(len(locks), f"zone_lock: each layout's ops/s / {baseline}'s (ratio)",
                           _runs_of(data))
    for ax, lock, sel in zip(axes, locks, sels):
        relative_panel(ax, data, "zone_lock_relative", f"lock:{lock}", sel, "ops_per_s", baseline)
    out.append(("zone_lock_relative", finish(fig, _runs_of(data))))
    return out


def pagevec_formulas(n: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The 2004 proposals: 4*lg(N) (4 at N=1) and 2^(2.5*sqrt(lg N) - 1) (N=4 -> 6, 16 -> 16)."""
    lg = np.log2(np.maximum(n, 1))
    return np.where(n <= 1, 4.0, 4.0 * lg), 2.0 ** (2.5 * np.sqrt(lg) - 1.0)


def pagevec_sweep(points) -> Tuple[Dict[str, str], List]:
    """(configuration, rows) of the ONE pagevec configuration to plot against slots: fixed-policy
    rows at offset 0 whose other parameters equal the configuration with most slot counts (ties:
    kernel:2.6.9 scanner:off mode:deferred, then sorted order)."""
    rows = [p for p in points if p.bench == "pagevec" and p.aggregate is None
            and "layout" not in p.params and p.params.get("offset", "0") == "0"
            and p.params.get("policy", "fixed") == "fixed"
            and p.params.get("slots", "").isdigit()]
    by_config = grouped(rows, lambda p: tuple((k, v) for k, v in p.variant if k != "slots"))
    configs = {c: {p.params["slots"] for p in ps} for c, ps in by_config.items()}
    if not configs:
        return {}, []
    prefer = {"kernel": "2.6.9", "scanner": "off", "mode": "deferred"}

    def score(config):
        params = dict(config)
        return (-len(configs[config]), -sum(params.get(k) == v for k, v in prefer.items()), config)
    best = min(configs, key=score)
    return dict(best), by_config[best]


def _config_words(config: Dict[str, str]) -> str:
    return " ".join(f"{k}:{v}" for k, v in config.items() if k not in ("offset", "policy"))


@register("pagevec")
def plot_pagevec(data: FamilyData) -> List[Tuple[str, Figure]]:
    """pagevec: slots x threads heatmap with the best slot count and the proposed formulas; 16 vs
    15 slots and offset 0 vs 8; wait share against slots; pages/s against threads for the seed slot
    counts; all from pagevec_sweep's configuration."""
    runs = _runs_of(data)
    fig, axes = new_figure(5, "pagevec: pages/s by batch size (slots) and alignment, lock wait "
                           "share; the 2020 question's 5.8 rows", runs)
    run, pts = data.runs[0]
    config, sweep = pagevec_sweep(pts)
    words = _config_words(config)
    _pagevec_heatmap(axes[0], data, run, sweep, words)
    _pagevec_pairs(axes[1], data, run, pts, config)
    _pagevec_wait(axes[2], data, run, sweep, words)
    seeds = {"15", "16", "31"}
    threads_panel(axes[3], data, "pagevec", f"pages/s for 15, 16, 31 slots ({words}, offset 0)",
                  data.select(lambda p: p.bench == "pagevec" and p.params.get("slots") in seeds
                              and "layout" not in p.params
                              and {k: v for k, v in p.params.items() if k != "slots"} == config),
                  "pages_per_s")
    # The rows the 2020 verdicts chose (find_pairs falls back from 5.8 qspinlock as they do).
    from verdicts import COMPARISONS, PV_2020, find_pairs
    spec = next(c for c in COMPARISONS if c.id == "pv_slots_15_31")
    configs = [{k: v for k, v in base[0].params.items() if k not in ("slots", "stats")}
               for _, base, _, _, _ in find_pairs(spec, pts)] or [
        {k: v for k, v in PV_2020 + (("offset", "0"),) if k != "stats"}]
    want = {k: v for k, v in configs[0].items() if all(c.get(k) == v for c in configs)}
    threads_panel(axes[4], data, "pagevec", "pages/s, 15 vs 31 slots (the 2020 question's "
                  "rows: " + _config_words(want) + ")",
                  data.select(lambda p: p.bench == "pagevec" and p.params.get("slots") in
                              ("15", "31") and {k: v for k, v in p.params.items()
                                                if k not in ("slots", "stats")} in configs),
                  "pages_per_s")
    if len(data.runs) > 1:
        note(axes[0], f"heatmap: first run only ({run.label})")
    return [("pagevec", finish(fig, runs))]


def _grid(ax, points, metric, title, why):
    """{(slots, threads): (Stat, variant)} of `metric`, one regime per thread count
    (summarize_side_by_side); none: `ax` marked empty with `why`."""
    cells = grouped((p for p in points if p.aggregate is None and metric in p.metrics
                     and p.params.get("slots", "").isdigit()),
                    lambda p: (int(p.params["slots"]), p.threads))
    out = {}
    for n in sorted({n for _, n in cells}):
        keys = sorted(k for k in cells if k[1] == n)
        _, stats_ = summarize_side_by_side([cells[k] for k in keys], metric)
        for key, stat in zip(keys, stats_):
            if stat is not None:
                out[key] = (stat, cells[key][0].variant)
    if not out:
        empty_panel(ax, title, why)
    return out


def best_slots(pts) -> Dict[int, Tuple[int, List[int], int]]:
    """{threads: (best slot count, slot counts not told apart from it, slot counts measured)}: best
    only where it beats every other beyond noise (stats.compare_points)."""
    by_slots = grouped((p for p in pts if p.params.get("slots", "").isdigit()),
                       lambda p: (p.threads, int(p.params["slots"])))
    best: Dict[int, tuple] = {}
    for variant, by_n in summarize(pts, "pages_per_s").items():
        slots = dict(variant).get("slots", "")
        for n, stat in by_n.items():
            if slots.isdigit() and (n not in best or stat.mean > best[n][0]):
                best[n] = (stat.mean, int(slots))
    out = {}
    for n, (_, top) in best.items():
        ties = sorted(s for (m, s), other in by_slots.items() if m == n and s != top and
                      stats.compare_points(by_slots[(n, top)], other, "pages_per_s").status
                      != "resolved")
        out[n] = (top, ties, sum(1 for m, _ in by_slots if m == n))
    return out


def _pagevec_heatmap(ax, data, run, sweep, words):
    title = f"pages/s, slots x threads ({words}, offset 0)"
    grid = _grid(ax, sweep, "pages_per_s", title, "no pages_per_s rows with a slots parameter")
    if not grid:
        return
    slots = sorted({s for s, _ in grid})
    threads = sorted({n for _, n in grid})
    values = np.full((len(slots), len(threads)), np.nan)
    for (s, n), (stat, variant) in grid.items():
        values[slots.index(s), threads.index(n)] = stat.mean
        data.record("pagevec", title, f"slots:{s}", run, "threads", n, "pages_per_s", stat,
                    params=params_json(variant))
    mesh = ax.pcolormesh(np.arange(len(threads) + 1) - 0.5, np.arange(len(slots) + 1) - 0.5,
                         np.ma.masked_invalid(values), shading="flat", cmap="viridis")
    plt.colorbar(mesh, ax=ax, label="pages/s")
    resolved = {n: b for n, (b, ties, _) in best_slots(sweep).items() if not ties}
    # A star only on a drawn cell (the grid keeps one regime per thread count).
    starred = [(n, b) for n, b in resolved.items() if n in threads and b in slots]
    if starred:
        ax.plot([threads.index(n) for n, _ in starred], [slots.index(b) for _, b in starred],
                "w*", ms=10, label="best slots (resolved)")
    for n, b in resolved.items():
        data.record("pagevec", title, "best_slots", run, "threads", n, "slots", Stat(b, 0.0, 1))
    # Formulas, mapped onto the categorical slot axis by interpolating in log2(slots).
    f1, f2 = pagevec_formulas(np.array(threads, dtype=float))
    log_slots = np.log2(slots)
    for values_f, style, label in ((f1, "r--", "4·lg N"), (f2, "m:", "2^(2.5·√lg N − 1)")):
        # Not drawn outside the measured slots (np.interp would pin 4 to a 15 row).
        ys = np.interp(np.log2(values_f), log_slots, range(len(slots)))
        ys[(values_f < slots[0] * 0.99) | (values_f > slots[-1] * 1.01)] = np.nan
        ax.plot(range(len(threads)), ys, style, marker="o", ms=3, linewidth=1.5, label=label)
    for xy, values, label in (("x", threads, "threads"), ("y", slots, "pagevec slots")):
        getattr(ax, f"set_{xy}ticks")(range(len(values)))
        getattr(ax, f"set_{xy}ticklabels")([str(v) for v in values])
        getattr(ax, f"set_{xy}label")(label)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=6, loc="upper left")


def _pagevec_pairs(ax, data, run, pts, config):
    """Bars at the largest thread count: 16 vs 15 slots at offset 0 and 8 in the sweep's
    configuration, then every named layout there."""
    title = "16 vs 15 slots, offset 0 vs 8, named layouts"
    rest = {k: v for k, v in config.items() if k not in ("slots", "offset")}

    def same(p, skip):
        return all(p.params.get(k) == v for k, v in rest.items() if k not in skip)
    chosen = [p for p in pts if p.bench == "pagevec" and "pages_per_s" in p.metrics
              and p.aggregate is None
              and ((p.params.get("slots") in ("15", "16") and same(p, ()))
                   or ("layout" in p.params and same(p, ("policy",))))]
    if not chosen:
        empty_panel(ax, title, "no 15/16-slot or layout rows with pages_per_s")
        return
    n_max = max(p.threads for p in chosen)
    groups = [(f"slots:{slots}\noffset:{offset}",
               lambda p, s=slots, o=offset: "layout" not in p.params and p.params.get("slots") == s
               and p.params.get("offset", "0") == o)
              for slots in ("16", "15") for offset in ("0", "8")]
    for layout in sorted({p.params["layout"] for p in chosen if "layout" in p.params}):
        groups.append((f"layout:{layout}\noffset:0",
                       lambda p, l=layout: p.params.get("layout") == l
                       and p.params.get("offset", "0") == "0"))
    sets = [(label, [p for p in chosen if p.threads == n_max and pred(p)])
            for label, pred in groups]
    sets = [(label, pts_) for label, pts_ in sets if pts_]
    # Bars of one panel are read against each other: one coherence regime for all of them.
    regime, stats_ = summarize_side_by_side([pts_ for _, pts_ in sets], "pages_per_s")
    bars = [(label, pts_, stat) for (label, pts_), stat in zip(sets, stats_) if stat is not None]
    labels = [label for label, _, _ in bars]
    for label, pts_, stat in bars:
        variant = sorted({p.variant for p in pts_})[0]
        data.record("pagevec", title, label.replace("\n", " "), run, "threads",
                    pts_[0].threads, "pages_per_s", stat, params=params_json(variant))
    if not labels:
        empty_panel(ax, title, "no rows of one coherence regime")
        return
    if not any("offset:8" in lab for lab in labels):
        title = title.replace(", offset 0 vs 8", "")
    ax.bar(range(len(labels)), [s.mean for _, _, s in bars], yerr=[s.std for _, _, s in bars],
           capsize=3, color=[f"C{i % 10}" for i in range(len(labels))])
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel(axis_label("pages_per_s"))
    ax.set_title(f"{title} (N={n_max}; {_config_words(rest)})", fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)


def _pagevec_wait(ax, data, run, sweep, words):
    title = f"lock wait share against slots ({words})"
    grid = _grid(ax, sweep, "wait_share", title, "no wait_share metric")
    if not grid:
        return
    for n in sorted({n for _, n in grid}):
        xs = sorted(s for s, m in grid if m == n)
        ax.plot(xs, [grid[(s, n)][0].mean for s in xs], marker="o", ms=4, label=f"{n} threads")
        for s in xs:
            data.record("pagevec", title, f"threads:{n}", run, "slots", s, "wait_share",
                        grid[(s, n)][0], params=params_json(grid[(s, n)][1]))
    ax.set_xscale("log", base=2)
    ticks = []
    for t in sorted({s for s, _ in grid}):
        # Neighbours closer than ~7 % on the log axis (31 and 32) would print over each other.
        if not ticks or math.log2(t / ticks[-1]) >= 0.1:
            ticks.append(t)
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks], fontsize=7, rotation=90)
    ax.set_xlabel("pagevec slots")
    ax.set_ylabel(axis_label("wait_share"))
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6)


RACE_VIOLATIONS = ("violations_freed_referenced", "violations_freed_on_lru")


def race_verdicts(points) -> List[Dict[str, str]]:
    """Per page_free_race variant (and `scanner`): violations over all repetitions and windows
    (`violations`, or freed_referenced + freed_on_lru), frees, and a verdict string; none in F
    frees: the rule of three, below 3 / F per free at 95 % (`violation_rate_upper_95`)."""
    rows = []
    by_variant = grouped((p for p in points if p.bench == "page_free_race" and p.aggregate is None
                          and ("violations" in p.metrics
                               or any(k in p.metrics for k in RACE_VIOLATIONS))),
                         lambda p: (p.params.get("variant", "?"), p.params.get("scanner", "")))
    for (variant, scanner), pts in sorted(by_variant.items()):
        parts = {k: sum(p.metrics.get(k, 0.0) for p in pts) for k in RACE_VIOLATIONS}
        split = any(k in p.metrics for p in pts for k in RACE_VIOLATIONS)
        violations = (sum(parts.values()) if split
                      else sum(p.metrics.get("violations", 0.0) for p in pts))
        frees = sum(p.metrics.get("frees", 0) for p in pts)
        windows = sorted({p.params.get("race_window_ns", "") for p in pts} - {""})
        if violations:
            detail = (f" ({parts['violations_freed_referenced']:.0f} freed while referenced, "
                      f"{parts['violations_freed_on_lru']:.0f} freed on the LRU)" if split else "")
            verdict = f"UNSAFE: {violations:.0f} violations{detail} in {frees:.3g} frees"
        elif frees > 0:
            verdict = (f"no violation in {frees:.3g} frees: rate < {3.0 / frees:.2g} per free "
                       "(95 %, rule of three); not a proof of safety")
        else:
            verdict = "no frees measured"
        if windows:
            verdict += f"; race windows {', '.join(windows)} ns"
        rows.append({"variant": variant, "scanner": scanner, "violations": f"{violations:.0f}",
                     "frees": f"{frees:.3g}", "verdict": verdict})
    return rows


@register("page_free_race")
def plot_page_free_race(data: FamilyData) -> List[Tuple[str, Figure]]:
    """page_free_race: verdict table and violations per million frees per variant and window."""
    runs = _runs_of(data)
    metric = "violations_per_million" if data.has_metric("violations_per_million") else "violations"
    fig, axes = new_figure(1, "page_free_race: lost references per variant "
                           f"({axis_label(metric)})", runs, width=10.0,
                           height=max(4.4, 0.22 * len({(p.variant, p.threads) for _, pts in data.runs
                                                        for p in pts}) + 1.5))
    bar_panel(axes[0], data, data.family, axis_label(metric), data.runs, metric)
    return [("page_free_race", finish(fig, runs))]


@register("page_free")
def plot_page_free(data: FamilyData) -> List[Tuple[str, Figure]]:
    """page free: ns/op per variant against the share of pages on the LRU (one panel per
    freeing CPU), and the race test's verdict table when its rows are in this family."""
    runs = _runs_of(data)
    cost = data.select(lambda p: p.bench != "page_free_race")
    has_race = any(p.bench == "page_free_race" for _, pts in data.runs for p in pts)
    cpus = sorted({p.params.get("free_cpu", "?") for _, pts in cost for p in pts}) or ["?"]
    fig, axes = new_figure(len(cpus) + int(has_race),
                           "page_free: cost of freeing a page (ns/op)" + (", and safety" if has_race else ""),
                           runs)
    for ax, cpu in zip(axes, cpus):
        title = f"ns/op against on_lru_pct (free_cpu:{cpu})"
        drawn = False
        for run, pts in cost:
            sel = [p for p in pts if p.params.get("free_cpu", "?") == cpu]
            summary = summarize(sel, "ns_per_op")
            varying = [k for k in varying_keys(summary) if k not in ("on_lru_pct", "free_cpu")]
            by_series: Dict[str, Dict[float, Stat]] = {}
            series_of: Dict[str, Tuple] = {}
            for variant, by_n in summary.items():
                params = dict(variant)
                try:
                    pct = float(params.get("on_lru_pct", "nan"))
                except ValueError:
                    continue
                rest = tuple((k, v) for k, v in variant if k in varying) or (("variant", "?"),)
                for n, stat in by_n.items():
                    key = (series_label(rest, varying) + f" N={n}"
                           + (f" [{run.label}]" if len(cost) > 1 else ""))
                    by_series.setdefault(key, {})[pct] = stat
                    series_of[key] = rest + (("threads", str(n)), ("run", run.label))
            if len(by_series) > MAX_SERIES:
                keep, fixed, left = narrow_variants(series_of.values(), MAX_SERIES)
                by_series = {k: v for k, v in by_series.items() if series_of[k] in keep}
                title += (f" [only {' '.join(f'{k}:{v}' for k, v in fixed.items())}; {left} "
                          "other configurations not drawn]")
            for label, by_pct in sorted(by_series.items()):
                xs = sorted(by_pct)
                ax.errorbar(xs, [by_pct[x].mean for x in xs], yerr=[by_pct[x].std for x in xs],
                            marker="o", ms=4, capsize=2, label=label)
                for x in xs:
                    data.record("page_free", title, label, run, "on_lru_pct", x, "ns_per_op",
                                by_pct[x])
                drawn = True
        if not drawn:
            empty_panel(ax, title, "no ns_per_op rows with on_lru_pct")
            continue
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("pages on the LRU (%)")
        ax.set_ylabel(axis_label("ns_per_op"))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    if has_race:
        bar_panel(axes[-1], data, data.family, "race test (page_free_race): lost references "
                  "per variant", data.select(lambda p: p.bench == "page_free_race"), "violations")
    return [("page_free", finish(fig, runs))]


def _prezero_panels(axes, data: FamilyData, runs) -> None:
    """Three panels: faults/s against threads of the burst rows at the 004 verdicts' burst size and
    of the steady-state rows, and the pre-zeroed share; the paired-burst rows (no rate of their
    own) are left out."""
    runs = [(run, [p for p in pts if "_vs_" not in p.params.get("protocol", "")
                   + p.params.get("zeroer", "")]) for run, pts in runs]
    metric = "faults_per_s" if any("faults_per_s" in p.metrics for _, pts in runs
                                   for p in pts) else "allocs_per_s"
    sizes = [p.params.get("burst_pages") for _, pts in runs for p in pts if "protocol" in p.params]
    size = "4096" if "4096" in sizes else max(set(sizes), key=sizes.count, default=None)
    def burst(p):
        return p.params.get("burst_pages") == size

    def steady(p):
        return "mode" in p.params and "protocol" not in p.params
    for ax, title, pred, m in (
            (axes[0], f"bursts of {size} pages: {UNITS[metric]}", burst, metric),
            (axes[1], f"steady state: {UNITS[metric]}", steady, metric),
            (axes[2], f"share of allocations given a pre-zeroed page (bursts of {size} pages, "
             "steady state)", lambda p: burst(p) or steady(p), "prezeroed_share")):
        threads_panel(ax, data, data.family, title, [(run, [p for p in pts if pred(p)])
                                                     for run, pts in runs], m,
                      fit_usl=m == metric, ideal=m == metric)


ZEROING = "zeroing bandwidth per method (GB/s)"


@register("fault")
def plot_fault(data: FamilyData) -> List[Tuple[str, Figure]]:
    """faults: faults per wall second against tasks per mode (a panel per threads/processes);
    pre-zeroing and zeroing panels too when those rows are part of this family."""
    runs = _runs_of(data)
    faults = data.select(lambda p: p.bench == "fault")
    prezero = data.select(lambda p: p.bench == "prezero")
    zeroing = data.select(lambda p: p.bench == "zeroing")
    tasks = sorted({p.params.get("tasks", "threads") for _, pts in faults for p in pts}) or ["threads"]
    panels = len(tasks) + 3 * bool(prezero) + bool(zeroing)
    fig, axes = new_figure(panels, "fault: page faults per wall second (faults/s) against tasks", runs)
    for ax, kind in zip(axes, tasks):
        threads_panel(ax, data, "fault", f"faults/wall-s, tasks:{kind}",
                      data.select(lambda p, k=kind: p.bench == "fault"
                                  and p.params.get("tasks", "threads") == k), "faults_per_wall_s")
    i = len(tasks)
    if prezero:
        _prezero_panels(axes[i:i + 3], data, prezero)
        i += 3
    if zeroing:
        bar_panel(axes[i], data, data.family, ZEROING, zeroing, "gb_per_s")
    return [("fault", finish(fig, runs))]


@register("prezero")
def plot_prezero(data: FamilyData) -> List[Tuple[str, Figure]]:
    """pre-zeroing model: allocations/s against threads per mode (zero on alloc, pre-zeroed
    with idle time, pre-zeroed while busy) and the share of pre-zeroed pages."""
    runs = _runs_of(data)
    fig, axes = new_figure(3, "prezero: faults/s with and without pre-zeroed pages", runs)
    _prezero_panels(axes, data, data.runs)
    return [("prezero", finish(fig, runs))]


@register("zeroing")
def plot_zeroing(data: FamilyData) -> List[Tuple[str, Figure]]:
    """zeroing: fill throughput (GB/s) per method, zero and pattern fills."""
    runs = _runs_of(data)
    fig, axes = new_figure(1, "zeroing: fill throughput per method (GB/s)", runs, cols=1)
    bar_panel(axes[0], data, data.family, ZEROING, data.runs, "gb_per_s")
    return [("zeroing", finish(fig, runs))]


@register("calibration")
def plot_calibration(data: FamilyData) -> List[Tuple[str, Figure]]:
    """Calibration: ns per operation of plain/atomic/CAS increments, and the core-to-core
    latency heatmap (c2c_latency)."""
    runs = _runs_of(data)
    out = []
    ops = data.select(lambda p: "op" in p.params and "ns_per_op" in p.metrics)
    fig, axes = new_figure(1, "calibration: cost of one operation (ns/op, 1 thread unless "
                           "labelled)", runs, cols=1)
    ax = axes[0]
    if ops:
        bars = []
        for run, pts in ops:
            summary = summarize(pts, "ns_per_op")
            varying = varying_keys(summary)
            for variant, by_n in sorted(summary.items()):
                for n, stat in sorted(by_n.items()):
                    label = (series_label(variant, varying).replace(" ", "\n")
                             + (f"\n{n} threads" if n != 1 else "")
                             + (f"\n{run.label}" if len(ops) > 1 else ""))
                    bars.append((label, stat))
                    data.record("calibration", "ns per op", label, run, "threads", n, "ns_per_op", stat)
        ax.bar(range(len(bars)), [s.mean for _, s in bars], yerr=[s.std for _, s in bars],
               capsize=3)
        ax.set_xticks(range(len(bars)))
        ax.set_xticklabels([label for label, _ in bars], fontsize=8)
        ax.set_ylabel(axis_label("ns_per_op"))
        ax.set_title("ns per operation", fontsize=10)
    else:
        empty_panel(ax, "ns per operation", "no calibration op rows with ns_per_op")
    out.append(("calibration", finish(fig, runs)))
    if (heat := c2c_figure(data)) is not None:
        out.append(("c2c_latency", heat))
    return out


def c2c_figure(data: FamilyData) -> Optional[Figure]:
    """Core-to-core latency heatmap (median ns) over PU os indices, one panel per run; pairs
    not measured stay blank. None when no run has c2c rows."""
    c2c = data.select(lambda p: "pu_a" in p.params and "pu_b" in p.params
                      and "latency_ns" in p.metrics)
    # Repetitions, not overrun ones (aggregates name no regime: a panel of stddevs); a file
    # of aggregates only draws its `median` rows.
    c2c = [(run, [p for p in pts if p.aggregate is None and not p.overrun]
            or [p for p in pts if p.aggregate == "median"]) for run, pts in c2c]
    c2c = [(run, pts) for run, pts in c2c if pts]
    if not c2c:
        return None
    runs = [run for run, _ in c2c]
    # One panel per run and coherence regime: a median over two regimes (31 ns and 175 ns)
    # is a latency no pair has.
    panels = [(run, regime, [p for p in pts if p.regime == regime])
              for run, pts in c2c for regime in sorted({p.regime for p in pts},
                                                       key=stats.regime_rank)]
    fig, axes = new_figure(len(panels), "core-to-core latency (median, ns), per coherence "
                           "regime", runs, width=6.0, height=5.2)
    for ax, (run, regime, pts) in zip(axes, panels):
        cells: Dict[Tuple[int, int], List[float]] = {}
        for p in pts:
            try:
                a, b = int(p.params["pu_a"]), int(p.params["pu_b"])
            except ValueError:
                continue
            cells.setdefault((a, b), []).append(p.metrics["latency_ns"])
        pus = sorted({a for a, _ in cells} | {b for _, b in cells})
        matrix = np.full((len(pus), len(pus)), np.nan)
        spread = []
        for (a, b), values in cells.items():
            i, j, median = pus.index(a), pus.index(b), float(np.median(values))
            # Repetitions a factor 4 apart under one probe label (224 ns and 11.5 ms: a
            # preempted pair) have no latency between them: the cell stays blank, marked.
            if min(values) <= 0 or max(values) > 4 * min(values):
                spread.append((i, j))
                continue
            # A ping-pong measures both directions of a pair: fill the mirror cell too.
            matrix[i, j] = matrix[j, i] = median
            data.record("c2c_latency", f"{run.label} {regime}", f"pu_a:{a}", run, "pu_b", b,
                        "latency_ns", Stat(median, float(np.std(values)), len(values),
                                           regime=regime))
        im = ax.imshow(np.ma.masked_invalid(matrix), cmap="magma_r", interpolation="nearest")
        if np.isfinite(matrix).any():
            plt.colorbar(im, ax=ax, label="latency (ns)")
        step = max(1, len(pus) // 16)
        for xy, side in (("x", "b"), ("y", "a")):
            getattr(ax, f"set_{xy}ticks")(range(0, len(pus), step))
            getattr(ax, f"set_{xy}ticklabels")([str(p) for p in pus[::step]], fontsize=7)
            getattr(ax, f"set_{xy}label")(f"PU {side} (os index)")
        ax.set_title(f"{run.label}, {regime or 'no'} regime"
                     + ("\nx: repetitions over 4x apart, no latency" if spread else ""),
                     fontsize=10)
        if spread:
            ax.scatter([j for i, j in spread] + [i for i, j in spread],
                       [i for i, j in spread] + [j for i, j in spread], marker="x", color="red")
        if len(pus) <= 12:
            for i, j in zip(*np.nonzero(np.isfinite(matrix))):
                ax.text(j, i, f"{matrix[i, j]:.0f}", ha="center", va="center", fontsize=6,
                        color="white" if matrix[i, j] > np.nanmean(matrix) else "black")
    return finish(fig, runs)


# None, or report.py's list of the drawn figures' readability problems (figure_problems).
FIGURE_PROBLEMS: Optional[List[str]] = None


def plot_family(data: FamilyData) -> List[Tuple[str, Figure]]:
    """Dispatch to the family's registered plotter, falling back to plot_generic; each figure
    is checked into FIGURE_PROBLEMS when report.py collects them."""
    out = FAMILY_PLOTTERS.get(data.family, plot_generic)(data)
    if FIGURE_PROBLEMS is not None:
        from report_checks import figure_problems
        for stem, fig in out:
            FIGURE_PROBLEMS.extend(figure_problems(fig, stem))
    return out


FALSE_SHARING_CLASSES = ("smt", "l2_shared", "l3_shared", "package_local", "package_remote")


def false_sharing_verdicts(points, min_effect: Optional[float] = None) -> List[Dict[str, str]]:
    """Per false_sharing (pair class, op): dicts of pair, op, effects (each distance's ns/op
    effect against the farthest) and smallest (in words, the smallest distance from which nothing
    farther is slower by the minimum effect; "not resolved here" when an interval is too wide)."""
    threshold = stats.MIN_EFFECT if min_effect is None else min_effect
    groups: Dict[Tuple[str, str], Dict[int, List]] = {}
    for p in points:
        if p.bench != "false_sharing" or p.aggregate is not None:
            continue
        try:
            d = int(p.params.get("distance", ""))
        except ValueError:
            continue
        key = (p.params.get("pair", "?"), p.params.get("op", "?"))
        groups.setdefault(key, {}).setdefault(d, []).append(p)
    out = []
    order = {c: i for i, c in enumerate(FALSE_SHARING_CLASSES)}
    for (pair, op), by_d in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1])):
        far = max(by_d)
        # One comparison per distance: the effects cell and the answer both render it.
        results = {d: stats.compare_points(by_d[far], by_d[d], "ns_per_op",
                                           f"{d} B vs {far} B", threshold)
                   for d in sorted(by_d, reverse=True) if d != far}

        def kind(c):
            if c.ci is not None and c.ci[1] < threshold:
                return "same"     # no slowdown of threshold or more
            if c.ci is not None and c.ci[0] > 0:
                return "slower"   # resolved: slower than the farthest distance
            return "open"         # too few repetitions, or an interval across the threshold
        smallest, first = far, None
        for d, c in results.items():   # farthest first
            if kind(c) == "same":
                smallest = d
            else:
                first = d
                break
        slower = [f"{d} B {results[d].interval_text()}" for d in sorted(results)
                  if kind(results[d]) == "slower"]
        open_ = [f"{d} B ({results[d].interval_text()})" for d in sorted(results)
                 if kind(results[d]) == "open"]
        tail = f"; resolved: slower than {far} B at " + ", ".join(slower) if slower else ""
        if open_:
            tail += "; not resolved against " + f"{far} B: " + ", ".join(open_)
        if first is None:
            answer = f"{smallest} B: even the closest distance shows no slowdown"
        elif kind(results[first]) == "slower":
            answer = (f"{smallest} B: the next closer distance ({first} B) is slower "
                      f"({results[first].interval_text()})") + tail
        elif smallest == far:
            # Nothing was shown free of slowdown: no "no slowdown down to <far>" (vacuous, and
            # read as the opposite of rows whose medians are slower).
            answer = (f"not resolved here: no distance closer than {far} B is told apart from "
                      f"it (every interval is too wide)") + _median_words(results) + tail
        else:
            answer = (f"not resolved here: no slowdown of {threshold * 100:g} % or more from "
                      f"{far} B down to {smallest} B; {first} B's interval is too wide to say"
                      ) + _median_words(results) + tail
        effects = [f"{d} B: {results[d].interval_text()}" for d in sorted(results)]
        out.append({"pair": pair, "op": op, "effects": "; ".join(effects), "smallest": answer})
    return out


def _median_words(results) -> str:
    """'; medians: closer distances slower, up to +130 % (not resolved)' when the unresolved
    comparisons' medians point one way, so the answer never reads against its rows."""
    meds = [c.effect for c in results.values() if c.effect is not None
            and (c.ci is None or not (c.ci[0] > 0 or c.ci[1] < 0))]
    if not meds:
        return ""
    # A median of exactly 0 (equal medians) points no way: it neither makes the closer
    # distances "slower" nor turns the words into "both ways".
    up = [m for m in meds if m > 0]
    down = [m for m in meds if m < 0]
    if up and not down:
        return f"; medians: closer distances slower, up to {max(up) * 100:+.0f} % (not resolved)"
    if down and not up:
        return f"; medians: closer distances faster, down to {min(down) * 100:+.0f} % (not resolved)"
    if not up and not down:
        return "; medians: no difference (not resolved)"
    return "; medians point both ways"


@register("false_sharing")
def plot_false_sharing(data: FamilyData) -> List[Tuple[str, Figure]]:
    """false_sharing: ns per increment against the two counters' distance (bytes), one panel per
    op, one series per PU-pair class (error bars from one coherence regime)."""
    runs = _runs_of(data)
    ops = sorted({p.params.get("op", "?") for _, pts in data.runs for p in pts})
    fig, axes = new_figure(max(1, len(ops)), "false_sharing: ns per increment against counter "
                           "distance (bytes)", runs, cols=min(2, max(1, len(ops))))
    for ax, op in zip(axes, ops):
        selected = data.select(lambda p, op=op: p.params.get("op") == op)
        if not param_panel(ax, data, "false_sharing", f"op:{op}", selected, "ns_per_op",
                           "distance"):
            continue
        ax.set_xscale("symlog", base=2, linthresh=8)
        ax.set_xlabel("distance between the two counters (bytes; 0 = one shared counter)")
        for x, label in ((64, "64 B line"), (128, "128 B pair")):
            ax.axvline(x, color="0.6", lw=0.8, ls=":")
            ax.text(x, 0.02, label, transform=ax.get_xaxis_transform(), fontsize=7,
                    ha="right", va="bottom", rotation=90, color="0.4")
    return [("false_sharing", finish(fig, runs))]


@register("duet")
def plot_duet(data: FamilyData) -> List[Tuple[str, Figure]]:
    """Paired windows, per comparison and run: each pair's ratio B/A as a dot and the paired effect
    with its 95 % interval (stats.compare_pairs) as a bar."""
    import textwrap
    from lockline_results import labelled_duet_pairs
    runs = _runs_of(data)
    count = max(len({(p.variant, p.threads) for p in pts}) for _, pts in data.runs)
    fig, axes = new_figure(len(data.runs), "duet: paired-window effect B / A - 1 (%)", runs,
                           cols=1, width=9.0, height=max(3.0, 0.7 * count + 1.5))
    for ax, (run, pts) in zip(axes, data.runs):
        # Rows with an overrun window are kept: only its pairs are left out
        # (row_duet_pairs), as the verdicts do (verdicts.find_duet).
        series = grouped((p for p in pts if p.aggregate is None), lambda p: (p.variant, p.threads))
        if not series:
            empty_panel(ax, run.host, "no paired-window rows")
            continue
        labels = []
        # Every parameter that tells two series apart is in their labels (wrapped).
        shown = [k for k in varying_keys(v for v, _ in series) if k not in ("of", "param",
                                                                            "a", "b")]
        for y, ((variant, threads), reps) in enumerate(sorted(series.items())):
            params = dict(variant)
            extra = " ".join([f"threads:{threads}"] + [f"{k}:{params[k]}" for k in shown
                                                        if k in params])
            labels.append("\n".join(textwrap.wrap(
                f"{params.get('of')} {params.get('param')}: {params.get('a')} -> "
                f"{params.get('b')}", 40) + textwrap.wrap(extra, 40)))
            pairs = labelled_duet_pairs(reps)
            ratios = [p[2] / p[1] - 1 for p in pairs if p[1] > 0 and p[2] > 0]
            ax.scatter([100 * r for r in ratios], [y] * len(ratios), s=6, color="0.6",
                       alpha=0.5, zorder=1)
            c = stats.compare_pairs(pairs)
            if c.effect is None:
                continue
            color = "tab:blue" if c.resolved else "tab:orange"
            if c.ci is not None:
                ax.errorbar([100 * c.effect], [y], xerr=[[100 * (c.effect - c.ci[0])],
                                                        [100 * (c.ci[1] - c.effect)]],
                            fmt="o", color=color, capsize=3, zorder=3)
            else:
                ax.plot([100 * c.effect], [y], "o", mfc="none", color=color, zorder=3)
        # Linear within +-100 %, logarithmic beyond: a +3700 % pair does not flatten -16 %
        # and +44 % into the zero line.
        ax.set_xscale("symlog", linthresh=100, linscale=2)
        ax.axvline(0, color="0.3", lw=0.8)
        for edge in (-100 * stats.MIN_EFFECT, 100 * stats.MIN_EFFECT):
            ax.axvline(edge, color="0.6", lw=0.6, ls=":")
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels, fontsize=7)
        ax.set_ylim(-0.6, len(labels) - 0.4)
        ax.set_xlabel("B / A - 1 (%) of each window pair (grey), B the second value named; "
                      "log beyond +-100 %", fontsize=8)
        ax.set_title(f"{run.host}: median pair ratio and 95 % interval (blue resolved, "
                     f"orange not); dotted: +-{100 * stats.MIN_EFFECT:g} %", fontsize=9)
    return [("duet", finish(fig, runs))]
