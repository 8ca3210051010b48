"""The report's tables as rows (plots/report.py renders them): seed_tables (the seed discussion's
figures beside this run's), kernel, pre-zeroing, fault and derived-counter tables. Verdicts are
shown from verdicts.json (comparison_cell), never recomputed; measured values are one coherence
regime's mean with spread and count."""

from __future__ import annotations

import html
from typing import Any, Dict, List, Optional, Sequence, Tuple

from lockline_results import (Point, Run, Stat, by_variant, labelled_duet_pairs, summarize,
                              summarize_side_by_side)
import stats

NOT_RUN = "not run"


def fmt(value: Optional[float], digits: int = 3) -> str:
    """Number with `digits` significant digits and thousands separators; NOT_RUN for None."""
    if value is None:
        return NOT_RUN
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def select(run: Run, bench: str, metric: str, where: Dict[str, str], threads: Any = "max",
           prefer: Optional[Dict[str, str]] = None) -> List[Point]:
    """Repetitions of one variant at one thread count: rows whose key starts with `bench`, carrying
    `metric`, whose params include `where` (and `prefer` when some rows match it). threads: an
    int, "max" or "min". Several variants: the first in sorted order; [] when nothing matches."""
    pts = [p for p in run.points if p.bench == bench and metric in p.metrics
           and p.aggregate is None and all(p.params.get(k) == v for k, v in where.items())]
    if prefer:
        pts = [p for p in pts if all(p.params.get(k) == v for k, v in prefer.items())] or pts
    if not pts:
        return []
    variant = sorted({p.variant for p in pts})[0]
    pts = [p for p in pts if p.variant == variant]
    ns = sorted({p.threads for p in pts})
    n = ns[-1] if threads == "max" else ns[0] if threads == "min" else threads
    return [p for p in pts if p.threads == n]


def measure(run: Run, bench: str, metric: str, where: Dict[str, str],
            threads: Any = "max", prefer: Optional[Dict[str, str]] = None) -> Optional[Stat]:
    """Stat of `metric` (mean of one coherence regime, see lockline_results.summarize) of the
    rows select() picks; None when nothing matches."""
    return summary_of(select(run, bench, metric, where, threads, prefer), metric)


def _mean(stat: Optional[Stat], scale: float = 1.0) -> Optional[float]:
    return None if stat is None else stat.mean * scale


def stat_text(stat: Optional[Stat], unit: str = "", scale: float = 1.0) -> str:
    """'1.23e+07 ops/s ± 2 % (5 near-regime reps)': the mean of one coherence regime with its
    spread and count, never a bare median of mixed states; NOT_RUN for None."""
    if stat is None:
        return NOT_RUN
    text = fmt(stat.mean * scale) + (f" {unit}" if unit else "")
    if stat.n > 1 and stat.mean:
        text += f" ± {abs(stat.std / stat.mean) * 100:.0f} %"
    where = f"{stat.regime}-regime " if stat.regime else ""
    text += f" ({stat.n} {where}rep{'s' if stat.n != 1 else ''}"
    if stat.others:
        text += f"; {len(stat.others)} in other regimes not averaged"
    return text + ")"


def side_by_side(groups: Sequence[List[Point]], metric: str, unit: str = "",
                 scale: float = 1.0) -> List[str]:
    """stat_text of each group's `metric`, all in the one regime the groups share; a group
    without repetitions in it says so (no arrow across regimes)."""
    regime, stats_ = summarize_side_by_side(groups, metric)
    out = []
    for group, stat in zip(groups, stats_):
        if stat is not None:
            out.append(stat_text(stat, unit, scale))
        elif any(metric in p.metrics for p in group):
            out.append(f"no repetition in the {regime} regime of the rows beside it: not set "
                       "side by side")
        else:
            out.append(NOT_RUN)
    return out


def arrow_text(base: List[Point], variant: List[Point], metric: str, unit: str = "") -> str:
    """'A -> B' of `metric` from one coherence regime (side_by_side), or a sentence saying
    the two sides share no regime (then no arrow is drawn)."""
    a, b = side_by_side([base, variant], metric, unit)
    if "not set side by side" in a or "not set side by side" in b or NOT_RUN in (a, b):
        return ("not set side by side: the two rows have no coherence regime in common"
                if NOT_RUN not in (a, b) else NOT_RUN)
    return f"{a} -> {b}"


class Cell(str):
    """A table cell that is already HTML (a rendering of a comparison with its data-
    attributes); _table inserts it unescaped. Plain str cells are escaped."""


def comparison_cell(verdict: Optional[Dict[str, Any]], cid: str, missing: str = "") -> Cell:
    """A verdicts.json entry's `text` in a table cell, marked data-comparison=ID; 'not run:
    <missing>' with the same mark without a verdict."""
    text = NOT_RUN + (f": {missing}" if missing else "") if verdict is None else verdict["text"]
    return Cell(f'<span class="cmp" data-comparison="{html.escape(cid)}">'
                f"{html.escape(text)}</span>")


def other_comparison_cell(base: List[Point], variant: List[Point], metric: str, what: str) -> Cell:
    """A comparison that is not a verdicts.json entry, labelled with its own rows (base and
    variant keys) so it is never read as one: 'other comparison, rows A vs B: +3 % [...]'."""
    if not base or not variant:
        return Cell(html.escape(f"{what}: no such rows in this run"))
    rows = f"{base[0].key} vs {variant[0].key}"
    text = f"other comparison, rows {rows}: {stats.compare_points(base, variant, metric).text()}"
    return _other_cell(rows, text)


def _other_cell(rows: str, text: str) -> Cell:
    """`text` in a cell marked data-rows=ROWS (class "other"): never read as a verdict."""
    return Cell(f'<span class="other" data-rows="{html.escape(rows)}">{html.escape(text)}</span>')


def verdict_points(run: Run, verdict: Dict[str, Any]) -> Tuple[List[Point], List[Point]]:
    """The repetitions a verdict used (its base_key and variant_key rows)."""
    def rows(key):
        return [p for p in run.points if p.key == key and p.aggregate is None]
    return rows(verdict["base_key"]), rows(verdict["variant_key"])


def comparison_rows(verdicts: List[Dict[str, Any]], question: str) -> List[List[Any]]:
    """Rows [comparison, seed discussion, measured here, comparable?] of `question`'s COMPARISONS:
    one per verdict, or 'not run' naming the rows it needs."""
    from verdicts import COMPARISONS, rows_text
    out: List[List[Any]] = []
    answered = any(v.get("question") == question for v in verdicts)
    for spec in COMPARISONS:
        if spec.question != question:
            continue
        mine = _of(verdicts, spec.id)
        for v in mine:
            out.append([v["comparison"], spec.seed, comparison_cell(v, v["id"]), spec.comparable])
        if not mine and not answered:
            out.append([f"{spec.variant_name} vs {spec.base_name}", spec.seed,
                        comparison_cell(None, spec.id, f"no {rows_text(spec)} rows in this run"),
                        spec.comparable])
    return out


def _of(verdicts: List[Dict[str, Any]], cid: str) -> List[Dict[str, Any]]:
    return [v for v in verdicts if v.get("id", "").split("[")[0] == cid]


def seed_tables(run: Run, verdicts: Optional[List[Dict[str, Any]]] = None
                ) -> Dict[str, List[List[Any]]]:
    """Per question id, rows [quantity, seed figure, measured here, comparable?]: COMPARISONS from
    verdicts.json (comparison_rows), others naming their rows, in one regime."""
    from verdicts import compute_verdicts
    if verdicts is None:
        verdicts = compute_verdicts(run)
    return {"q1": _pagevec_2004_rows(run, verdicts), "q2": _zone_lock_rows(run, verdicts),
            "q3": _page_free_rows(run, verdicts), "q4": _pagevec_2020_rows(run, verdicts),
            "q5": _prezero_rows(run, verdicts)}


def sides_cell(run: Run, verdict: Dict[str, Any]) -> Cell:
    """A verdict's two sides in its own samples' numbers (data-sides=ID): base median -> base x
    (1 + effect), or for ns saved base ns/op -> base / (1 + effect) and the ns saved."""
    from figures import UNITS
    from verdicts import verdict_samples
    s = verdict_samples(run.points, verdict)
    effect, saved = verdict["effect"], verdict.get("ns_saved")
    what = ("the median window pair ratio applied" if s["kind"] == "paired"
            else "medians of the repetitions")
    where = f"{s['regime']}-regime" if s["regime"] else "pooled"
    if effect is None or not s["base_median"]:
        text = f"no effect: {verdict['status']}"
    elif saved:
        text = (f"{saved['base_ns']:.1f} -> {saved['base_ns'] / (1 + effect):.1f} ns/op: "
                f"{saved['ns']:.1f} ns saved ({saved['base_from']}, {where})")
    else:
        text = (f"{fmt(s['base_median'])} -> {fmt(s['base_median'] * (1 + effect))} "
                f"{UNITS.get(verdict['metric'], verdict['metric'])}: {where}, {what}")
    if effect is not None and verdict["status"] != "resolved":
        text += f" (the verdict: {verdict['status'].replace('_', ' ')}, not an answer)"
    return Cell(f'<span class="sides" data-sides="{html.escape(verdict["id"])}">'
                f"{html.escape(text)}</span>")


def _verdict_sides(run: Run, verdicts: List[Dict[str, Any]], cid: str) -> List[List[Any]]:
    """A row per verdict of `cid`: its two sides (sides_cell)."""
    return [[f"base -> variant of {v['id']} (the verdict's own samples)", "-",
             sides_cell(run, v), "-"] for v in _of(verdicts, cid)]


def _pagevec_2004_rows(run: Run, verdicts: List[Dict[str, Any]]) -> List[List[Any]]:
    """Question 1 (pagevec 2004): struct sizes, the verdicts, the best slot count per N."""
    from families import pagevec_sweep
    b16 = _mean(measure(run, "pagevec", "pagevec_bytes", {"slots": "16"}))
    b15 = _mean(measure(run, "pagevec", "pagevec_bytes", {"slots": "15"}))
    config, sweep = pagevec_sweep(run.points)
    best = _best_slots(sweep)
    where = " ".join(f"{k}:{v}" for k, v in config.items())
    return [
        ["struct pagevec bytes, 16 slots (2.6.9)", "136 on LP64 (140 quoted)", fmt(b16),
         "same quantity"],
        ["struct pagevec bytes, 15 slots (proposed)", "128 on LP64 (124 quoted)", fmt(b15),
         "same quantity"],
    ] + comparison_rows(verdicts, "000") + _verdict_sides(run, verdicts, "pv_slots_16_15") + [
        [f"best slot count per thread count (pagevec {where or 'all rows'}, offset 0)",
         "4·lg N (4 on UP), later 2^(2.5·√lg N − 1): 4 CPUs -> 6, 16 -> 16, 1024 -> 120",
         best or NOT_RUN, "same quantity (a slot count)"],
    ]


def _zone_lock_rows(run: Run, verdicts: List[Dict[str, Any]]) -> List[List[Any]]:
    """Question 2 (zone->lock 2015): the verdicts, each one's ops/s before -> after and the
    fix in other configurations, then what lock_stat costs."""
    rows = comparison_rows(verdicts, "001")
    for v in _of(verdicts, "zone_lock_after_before"):
        rows += _verdict_sides(run, [v], v["id"].split("[")[0])
        rows += _zone_fix_rows(run, verdict_points(run, v)[0])
    return rows + _instrumentation_cost_rows(run)


def _zone_fix_rows(run: Run, before: List[Point]) -> List[List[Any]]:
    """The zone->lock fix (lock after free_area) in the counter-example configurations, at the
    verdict's lock, thread count and work_ns: other comparisons, labelled as such."""
    rows = []
    n = before[0].threads if before else "max"
    # The verdict's lock and work_ns group (cal, or 0: saturated), where the rows carry them.
    known = {k: before[0].params.get(k) for k in ("lock", "work_ns")} if before else {}
    lock = known.get("lock")
    for label, extra in (("counter-example pcp_batch:0 (a lock per page, not 4.0's path)",
                          {"pcp_batch": "0", "line": "64"}),
                         ("config no_cma (the fixed lock shares the line of flags)",
                          {"pcp_batch": "31", "line": "64", "config": "no_cma"})):
        where = {**extra, **{k: v for k, v in known.items() if v}}
        b = select(run, "zone_lock", "ops_per_s", {"layout": "lock_before_free_area", **where}, n)
        a = _same_variant(b, select(run, "zone_lock", "ops_per_s",
                                    {"layout": "lock_after_free_area", **where}, n), "layout")
        if b and a:
            rows.append([f"fix, {label} (lock:{lock})", "-",
                         other_comparison_cell(b, a, "ops_per_s", label),
                         "none: not the seed's configuration"])
    return rows


def _instrumentation_cost_rows(run: Run) -> List[List[Any]]:
    """What lock_stat costs: the question pair's uninstrumented twins (stats:off) against the
    same rows instrumented, paired where the run holds the twins as a duet row."""
    rows = []
    for layout in ("lock_before_free_area", "lock_after_free_area"):
        off = select(run, "zone_lock", "ops_per_s", {"layout": layout, "stats": "off"},
                     prefer={"work_ns": "0", "lock": "ticket"})
        if not off:
            continue
        same = {k: v for k, v in off[0].params.items() if k != "stats"}
        on = [p for p in run.points if p.bench == "zone_lock" and p.aggregate is None
              and p.params == same and p.threads == off[0].threads and "ops_per_s" in p.metrics]
        label = f"lock_stat on vs off ({layout})"
        # Paired where the run holds the twins as a duet row (bench/duet.cpp "instr"); an
        # overrun window leaves out only its pairs (row_duet_pairs, as find_duet).
        want = {**same, "of": "zone_lock", "param": "stats", "a": "on", "b": "off"}
        duet = [p for p in run.points if p.bench == "duet" and p.aggregate is None
                and p.params == want and p.threads == off[0].threads]
        if duet:
            pairs = labelled_duet_pairs(duet)
            text = (f"other comparison, paired windows of {duet[0].key} (uninstrumented / "
                    f"instrumented): {stats.compare_pairs(pairs).text()}")
            cell = _other_cell(duet[0].key, text)
        else:
            cell = other_comparison_cell(off, on, "ops_per_s", label)
        rows.append([f"instrumentation cost, {label}", "-", cell,
                     "none: lockline's own instrumentation"])
    return rows


def _page_free_rows(run: Run, verdicts: List[Dict[str, Any]]) -> List[List[Any]]:
    """Question 3 (page free 2006): the locked and plain instructions, the verdicts, the race
    test's verdicts."""
    from families import race_verdicts
    private = {"line": "private"}
    atomic_op = measure(run, "calibration", "ns_per_op", {"op": "atomic_fetch_add"},
                        prefer=private)
    plain_op = measure(run, "calibration", "ns_per_op", {"op": "plain_inc"}, prefer=private)
    races = race_verdicts(run.points)
    rows = [
        ["locked instruction (atomic_fetch_add)",
         "~17 cycles (Pentium 4), more with another in flight", stat_text(atomic_op, "ns"),
         "same quantity in other units (cycles of a 2006 CPU vs ns here)"],
        ["plain test / increment", "1-2 cycles", stat_text(plain_op, "ns"),
         "same quantity in other units"],
    ] + comparison_rows(verdicts, "002") + _verdict_sides(run, verdicts, "page_free_fast_atomic")
    for v in races or [{"variant": "fastpath", "verdict": NOT_RUN}]:
        seed = ("racy: reclaim can take a reference between the two tests"
                if v["variant"] == "fastpath" else "-")
        what = f"race test, variant {v['variant']}" + (
            f", scanner {v['scanner']}" if v.get("scanner") else "")
        rows.append([what, seed, v["verdict"], "same question (safety), no seed figure"])
    return rows


def _pagevec_2020_rows(run: Run, verdicts: List[Dict[str, Any]]) -> List[List[Any]]:
    """Question 4 (pagevec 2020): the verdicts, lock_stat's wait share of their instrumented
    twins, the memory cost."""
    b15 = _mean(measure(run, "pagevec", "pagevec_bytes", {"slots": "15"}))
    b31 = _mean(measure(run, "pagevec", "pagevec_bytes", {"slots": "31"}))
    rows = comparison_rows(verdicts, "003")
    for v in _of(verdicts, "pv_slots_15_31"):
        # The wait share is lock_stat's: from the verdict's instrumented twins (its
        # evidence), or its own rows where they are the instrumented ones.
        ev = v.get("evidence") or {}
        base, variant = verdict_points(run, ev or v)
        if not base or "stats:off" in base[0].key:
            continue
        rows.append([f"share of time waiting for lru_lock (lock_stat evidence), "
                     f"{base[0].key} -> {variant[0].key}",
                     "8.9 % -> 2.2 % of CPU cycles in lock contention "
                     "(pmbench, large machine)",
                     _other_cell(base[0].key, arrow_text(base, variant, "wait_share",
                                                         "share waiting")),
                     "none: the seed's is a share of all CPU cycles of a whole workload; the "
                     "model's is the share of a lock-bound loop's time spent waiting, which "
                     "nears 1 when the loop does little else"])
    rows.append(["pagevec memory, 15 -> 31 slots", "128 -> 256 bytes of page pointers",
                 f"{fmt(b15)} -> {fmt(b31)} bytes (whole struct)" if b15 and b31 else NOT_RUN,
                 "same quantity (the model's is the whole struct)"])
    return rows


def _prezero_rows(run: Run, verdicts: List[Dict[str, Any]]) -> List[List[Any]]:
    """Question 5 (pre-zeroing 2004): the verdicts, faults per wall and CPU second against the
    2004 table, the zeroing bandwidth per method."""
    seed_before = {1: 90849, 2: 115679, 4: 152067, 8: 167449}
    seed_after = {1: 306791, 2: 283594, 4: 354015, 8: 279197}
    rows = comparison_rows(verdicts, "004")
    from verdicts import HOLT
    if not _of(verdicts, HOLT) and any(v.get("question") == "004" for v in verdicts):
        # Said in words, not as a 'not run' comparison cell among the verdicts.
        rows.append(["Holt's busy machine: its idle-CPU zeroers vs zeroing on demand at every PU",
                     "Holt: no pre-zeroed pages when the machine is busy",
                     "not measured in this file (no protocol:busy zeroer:none and "
                     "none_vs_idle_cpus rows at burst_pages:4096)",
                     "none: an objection, not a measurement"])
    warm = {"tasks": "threads", "start": "warm"}
    for n in (1, 2, 4, 8):
        plain = measure(run, "fault", "faults_per_wall_s", {"mode": "plain"}, n, warm)
        rows.append([f"{n} threads: faults per wall second (fault mode:plain, this kernel)",
                     f"{seed_before[n]:,} before, {seed_after[n]:,} after",
                     stat_text(plain, "faults/wall-s"),
                     "same quantity for 'before' (this kernel does not pre-zero); 'after' has "
                     "no counterpart here"])
    cpu = measure(run, "fault", "faults_per_cpu_s", {"mode": "plain"}, 1, warm)
    idle_cpu = measure(run, "fault", "faults_per_cpu_s",
                       {"mode": "plain", "start": "after_idle"}, 1)
    rows.append(["1 thread: faults per CPU-second", "90933 -> 307839",
                 f"plain warm {stat_text(cpu)}, after idle {stat_text(idle_cpu)}" if cpu
                 else NOT_RUN, "same quantity for 'before'"])
    gbs = {m: measure(run, "zeroing", "gb_per_s", {"method": m}, prefer={"fill": "zero"})
           for m in ("memset", "rep_stosb", "nt_store", "clzero")}
    rows.append(["zeroing bandwidth per method", "hardware (Altix BTE) only for order >= 4",
                 "; ".join(f"{m} {stat_text(v, 'GB/s')}" for m, v in gbs.items()
                           if v is not None) or NOT_RUN, "none: no seed figure"])
    return rows


def _same_variant(reference: List[Point], points: List[Point], param: str) -> List[Point]:
    """The rows of `points` whose parameters equal the reference rows' except `param`, at the
    same thread count ([] when none): the variant side of a comparison built by select()."""
    if not reference:
        return []
    want = {k: v for k, v in reference[0].params.items() if k != param}
    n = reference[0].threads
    return [p for p in points if p.threads == n
            and {k: v for k, v in p.params.items() if k != param} == want]


def summary_of(points: List[Point], metric: str) -> Optional[Stat]:
    """The one Stat of repetitions of one variant at one thread count; None for []."""
    if not points:
        return None
    summary = summarize(points, metric)
    return next(iter(summary[sorted(summary)[0]].values())) if summary else None


def _best_slots(pts: List[Point]) -> str:
    """'N=1: 4, N=4: 8, ...' measured best slot count per thread count over the rows of one
    pagevec configuration (families.best_slots: the heatmap's stars)."""
    from families import best_slots
    out = []
    for n, (best, ties, total) in sorted(best_slots(pts).items()):
        if not ties:
            out.append(f"N={n}: {best}")
        elif len(ties) + 1 == total:
            out.append(f"N={n}: none resolved (every slot count within noise of {best})")
        else:
            out.append(f"N={n}: {best} or " + ", ".join(map(str, ties)) + " (not told apart)")
    return "; ".join(out)


# Kernel-side rows (helper k18's families) shown beside the model's figures per question.
KERNEL_FAMILIES = {"q1": ["kernel_lru"], "q2": ["kernel_zone"], "q3": ["kernel_put_page"],
                   "q4": ["kernel_lru"], "q5": []}
KERNEL_METRICS = ("pages_per_s", "ops_per_s", "MB_per_s")
DERIVED_COUNTERS = ("IPC", "cache-misses/op", "hitm/op")


def _by_variant(run: Run, bench: str, param: str = "") -> Dict[Tuple, Dict[int, List[Point]]]:
    """{variant: {threads: repetitions}} of the `bench` rows (carrying `param` when given)."""
    return by_variant(p for p in run.points if p.bench == bench and p.aggregate is None
                      and (not param or param in p.params))


def _latest_rows(run: Run, bench: str) -> List[Tuple[Tuple, int, List[Point]]]:
    """(variant, largest thread count, its repetitions) per variant of rows keyed `bench`."""
    return [(v, max(ns), ns[max(ns)]) for v, ns in sorted(_by_variant(run, bench).items())]


def _dict(value: Any) -> Dict[str, Any]:
    return value if isinstance(value, dict) else {}


def kernel_rows(run: Run, benches: Sequence[str]) -> List[List[str]]:
    """Rows [row, threads, throughput, lock:contention_begin per op, attribution, sources] of the
    kernel families at each variant's largest thread count; missing figures say why."""
    out = []
    for bench in benches:
        for variant, n, pts in _latest_rows(run, bench):
            metric = next((m for m in KERNEL_METRICS if any(m in p.metrics for p in pts)), None)
            kernel = _dict(_dict(pts[0].row.get("details")).get("kernel"))
            sources = _dict(kernel.get("sources"))
            value = stat_text(summary_of(pts, metric), metric.replace("_per_s", "/s")) \
                if metric else "no throughput metric"
            stat = summary_of(pts, "kernel_contention_per_op")
            reason = sources.get("tracepoints:reason") or sources.get("tracepoints")
            contention = (stat_text(stat, "events/op") if stat
                          else f"unavailable ({reason or 'not on the row'})")
            attribution = _dict(kernel.get("attribution"))
            attr = ", ".join(f"{k} {v}" for k, v in attribution.items()) or "-"
            src = ", ".join(f"{k}: {v}" for k, v in sources.items() if ":" not in k) or "-"
            out.append([f"{bench}/" + " ".join(f"{k}:{v}" for k, v in variant), str(n), value,
                        contention, attr, src])
    return out


def _common_thread_rows(run: Run, bench: str, param: str) -> List[Tuple[Tuple, int, List[Point]]]:
    """(variant, threads, repetitions) of the `bench` rows carrying `param` at the one thread count
    most variants have; others left out."""
    by = _by_variant(run, bench, param)
    counts = [n for ns in by.values() for n in ns]
    if not counts:
        return []
    n = max(counts, key=lambda k: (counts.count(k), k))
    return [(v, n, ns[n]) for v, ns in sorted(by.items()) if n in ns]


def prezero_burst_rows(run: Run) -> List[List[str]]:
    """Burst-protocol pre-zeroing rows: allocations/s and the share served pre-zeroed against the
    burst / pool ratio B/P."""
    rows, groups = [], []
    for variant, n, pts in _common_thread_rows(run, "prezero", "protocol"):
        params = dict(variant)
        if "_vs_" in params.get("protocol", "") + params.get("zeroer", ""):
            continue  # paired bursts: the 004 burst verdicts read them
        try:
            ratio = f"{float(params.get('burst_pages')) / float(params.get('pool_pages')):.2g}"
        except (TypeError, ValueError, ZeroDivisionError):
            ratio = "?"
        rows.append([params.get("protocol", "?"), params.get("zeroer", "?"),
                     params.get("mode", "-"), params.get("burst_pages", "?"),
                     params.get("pool_pages", "?"), ratio, str(n)])
        groups.append(pts)
    return [row + [a, s] for row, (a, s) in zip(rows, _rates_and_shares(groups))]


def _rates_and_shares(groups: Sequence[Sequence[Point]]):
    """Each prezero group's rate (faults_per_s when any row has it, else allocs_per_s) and
    pre-zeroed share: adjacent rows are read against each other, so all from one regime."""
    rate = (("faults_per_s", "faults/s") if any("faults_per_s" in p.metrics for pts in groups
                                                for p in pts) else ("allocs_per_s", "allocs/s"))
    return zip(side_by_side(groups, *rate), side_by_side(groups, "prezeroed_share"))


def prezero_steady_rows(run: Run) -> List[List[str]]:
    """Steady-state pre-zeroing rows (param `mode`) with what each allocation touches
    (details.touches; older rows: every line)."""
    from verdicts import PREZERO_TOUCHES
    rows, groups = [], []
    for variant, n, pts in _latest_rows(run, "prezero"):
        params = dict(variant)
        if "mode" not in params or "protocol" in params:
            continue
        touches = _dict(pts[0].row.get("details")).get("touches") or PREZERO_TOUCHES
        rows.append([params.get("mode", "?"), params.get("method", "?"),
                     params.get("idle_us", "?"), str(n), str(touches)])
        groups.append(pts)
    return [row[:4] + [a, s, row[4]] for row, (a, s) in zip(rows, _rates_and_shares(groups))]


FAULT_SEED_COLUMNS = ["row", "GB", "repetitions", "threads", "user s", "system s", "wall s",
                      "faults/cpu/s", "faults/wall-s",
                      "pages/s as page_fault1 (unmapping timed)", "zeroing share (modelled)",
                      "clear_page share (sampled)"]


def _sampled_share_text(pts: List[Point]) -> str:
    """The fault rows' clear_page_sampled_share: mean with the first row's Wilson 95 % interval for
    one sampled repetition, else 'unavailable (reason)', '-' for older rows."""
    stat = summary_of(pts, "clear_page_sampled_share")
    sampled = [_dict(_dict(p.row.get("details")).get("clear_page_sampled")) for p in pts]
    if stat is not None:
        text = fmt(stat.mean)
        measured = [s for s in sampled if s.get("status") == "measured"]
        ci = measured[0].get("share_ci95") if len(measured) == 1 else None
        if isinstance(ci, list) and len(ci) == 2 and all(isinstance(x, (int, float)) for x in ci):
            text += f" [{fmt(ci[0])}, {fmt(ci[1])}]"
        return text
    reasons = [str(s.get("reason")) for s in sampled if s.get("reason")]
    return f"unavailable ({reasons[0]})" if reasons else "-"


def fault_seed_rows(run: Run) -> List[List[str]]:
    """Fault rows in the 2004 table's columns (GB, repetitions, threads, user/system/wall s,
    faults/cpu/s, faults/wall-s), one regime's means, then zeroing's share of fault time modelled
    (zeroing_share) and sampled (_sampled_share_text)."""
    rows = []
    for variant, n, pts in _latest_rows(run, "fault"):
        if not any("faults_per_wall_s" in p.metrics for p in pts):
            continue
        params = dict(variant)
        seed = _dict(_dict(pts[0].row.get("details")).get("seed_columns"))
        gb = seed.get("gb")
        if gb is None:
            try:
                gb = float(params.get("mb", "")) / 1024
            except ValueError:
                gb = None

        def mean(metric):
            stat = summary_of(pts, metric)
            return fmt(stat.mean) if stat else "-"
        rows.append([" ".join(f"{k}:{v}" for k, v in variant), fmt(gb) if gb else "?",
                     str(len(pts)), str(n), mean("user_s"), mean("sys_s"), mean("wall_s"),
                     mean("faults_per_cpu_s"), mean("faults_per_wall_s"),
                     mean("pages_per_s_as_page_fault1"), mean("zeroing_share"),
                     _sampled_share_text(pts)])
    return rows


def derived_counter_rows(run: Run) -> List[List[str]]:
    """Per family and variant at its largest thread count: IPC, cache-misses/op, hitm/op ('scaled'
    when multiplexed), else 'unavailable (reason)' from counters.status."""
    rows = []
    for bench in dict.fromkeys(p.bench for p in run.points):
        for variant, n, pts in _latest_rows(run, bench):
            counters = _dict(pts[0].row.get("counters"))
            status = _dict(counters.get("status"))
            scaling = _dict(counters.get("scaling"))
            cells = []
            for name in DERIVED_COUNTERS:
                stat = summary_of(pts, name)
                if stat is not None:
                    text = fmt(stat.mean)
                    scaled = [e for e, st in status.items() if st == "scaled"]
                    if scaled:
                        text += " (scaled: " + ", ".join(
                            f"{e} x{scaling[e]:.3g}" if isinstance(scaling.get(e), (int, float))
                            else e for e in scaled) + ")"
                    cells.append(text)
                else:
                    reasons = [str(v) for k, v in status.items() if k.endswith(":reason")]
                    cells.append(f"unavailable ({reasons[0]})" if reasons else "unavailable")
            if status or any(not c.startswith("unavailable") for c in cells):
                rows.append([f"{bench}/" + " ".join(f"{k}:{v}" for k, v in variant), str(n)]
                            + cells)
    # One line per distinct unavailability is enough when nothing was measured anywhere.
    if rows and not any(not c.startswith("unavailable") for r in rows for c in r[2:]):
        return [["all rows", "-"] + [rows[0][2 + i] for i in range(len(DERIVED_COUNTERS))]]
    return rows
