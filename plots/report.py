#!/usr/bin/python3
"""Write a self-contained HTML report for one lockline run.

    plots/report.py RUN_DIR [-o FILE]

Draws the run's figures into RUN_DIR/plots/ (plot.py's functions), writes RUN_DIR/verdicts.json
(plots/verdicts.py) and then RUN_DIR/report.html: one section per seed question of
BACKGROUND.md (the question, its verdict lines: effects with 95 % intervals from one coherence
regime, or "not resolved on this machine" / "too few same-regime repetitions"; its figure; a
table of the seed discussion's figures next to the ones measured here, "not run" where the
family is absent; the real kernel's rows beside the model's; for pre-zeroing the burst/pool
table and the faults in the 2004 table's columns), then other figures, the machine and
provenance, placement plans, counters' availability and derived counters, warnings (failed
rows, overrun windows), and data-structure layouts. Every file is created exclusively and
renamed into place (plots/outputs.py). Images are PNG data
URIs and a Content-Security-Policy forbids any network access, so the file opens anywhere.
A small inline script sets `data-images="ok"` on <body> once every image has loaded (the
headless-Chromium test checks it). Exit 0 on success, 2 on bad input with one line on stderr.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import os
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lockline_results import (Point, ResultError, Run, Stat, labelled_duet_pairs,  # noqa: E402
                              load_runs, summarize, summarize_side_by_side)
import stats  # noqa: E402

NOT_RUN = "not run"

_CSS = """
body{font-family:sans-serif;max-width:1400px;margin:1em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #bbb;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;height:auto;border:1px solid #eee}
pre{background:#f7f7f7;padding:.5em;overflow-x:auto;font-size:.85em}
.q{font-style:italic;color:#444}.warn{color:#a40}.ok{color:#060}.caption{font-size:.85em;color:#555}
"""

# Sets data-images on <body>: "ok" when every image decoded, else "broken:N". Wrapped in
# try/catch so the check itself can never raise a console error.
_SCRIPT = """
window.addEventListener('load', function () {
  try {
    var imgs = Array.prototype.slice.call(document.images);
    var bad = imgs.filter(function (i) { return !i.complete || i.naturalWidth === 0; });
    document.body.setAttribute('data-images', bad.length ? 'broken:' + bad.length : 'ok');
    document.body.setAttribute('data-image-count', String(imgs.length));
  } catch (e) {
    document.body.setAttribute('data-images', 'script-error');
  }
});
"""

QUESTIONS = [
    ("q1", "1. pagevec: size and cacheline alignment (LKML, September 2004)",
     "Does shrinking the pagevec from 16 to 15 slots, so the struct fits a power-of-two size, "
     "and aligning it change throughput, or was the re-aim gain noise? Which batch size is best "
     "at each CPU count, against the proposed 4·lg N and 2^(2.5·√lg N − 1)?",
     ["pagevec"]),
    ("q2", "2. zone->lock placement (linux-mm, March 2015)",
     "How much does putting zone->lock in the cache line of free_area[] (the order-0 free lists) "
     "cost against moving it after free_area, and how does it depend on the lock kind?",
     ["zone_lock", "zone_lock_relative"]),
    ("q3", "3. atomic versus fast-path page free (linux-mm, March 2006)",
     "What does the fast path (plain test of count == 1 && !PageLRU) save over the atomic "
     "decrement, and is it safe when reclaim takes a reference concurrently?",
     ["page_free", "page_free_race", "calibration"]),
    ("q4", "4. pagevec 15 vs 31 slots (seed: large systems, LKML, June 2020)",
     "Does going from 15 to 31 slots cut LRU lock contention and raise pages/s on a large "
     "machine, and at what memory cost per pagevec?",
     ["pagevec"]),
    ("q5", "5. background page pre-zeroing (linux-mm, December 2004)",
     "How much faster do faults get with pre-zeroed pages, does the gain survive when the "
     "zeroing CPUs are busy, and what bandwidth does each zeroing method reach?",
     ["fault", "prezero", "zeroing"]),
]


def fmt(value: Optional[float], digits: int = 3) -> str:
    """Number with `digits` significant digits and thousands separators; NOT_RUN for None."""
    if value is None:
        return NOT_RUN
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def pct_change(old: Optional[float], new: Optional[float]) -> str:
    """'+12.3 %' from old to new, or NOT_RUN."""
    if old is None or new is None or old == 0:
        return NOT_RUN
    return f"{(new / old - 1) * 100:+.1f} %"


def select(run: Run, bench: str, metric: str, where: Dict[str, str], threads: Any = "max",
           prefer: Optional[Dict[str, str]] = None) -> List[Point]:
    """Repetitions of one variant at one thread count: rows whose key starts with `bench` (the
    family, or a sub-benchmark such as page_free_race), that carry `metric` and whose params
    include `where`.

    prefer: extra params used when some rows match them (e.g. {"line": "private"}), ignored
    otherwise, so older files without that parameter still match. threads: an int, "max"
    (largest thread count measured) or "min". When several variants still match, the first in
    sorted order is used. [] when nothing matches.
    """
    pts = [p for p in run.points if p.bench == bench and metric in p.metrics
           and p.aggregate is None and all(p.params.get(k) == v for k, v in where.items())]
    if prefer:
        narrowed = [p for p in pts if all(p.params.get(k) == v for k, v in prefer.items())]
        pts = narrowed or pts
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
    pts = select(run, bench, metric, where, threads, prefer)
    if not pts:
        return None
    summary = summarize(pts, metric)
    by_n = summary[sorted(summary)[0]]
    return next(iter(by_n.values()))


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
    """stat_text of each group's `metric`, all from the one coherence regime the groups share
    (lockline_results.summarize_side_by_side): the numbers of a "before -> after" cell or of
    adjacent table rows. A group without repetitions in that regime says so rather than
    showing a number from another regime (issue 35: no arrow across regimes)."""
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


def change(base: List[Point], variant: List[Point], metric: str,
           invert: bool = False) -> str:
    """The change from `base` to `variant` repetitions as an interval (plots/stats.py): '+6 %
    [+2 %, +10 %], 9 near-regime repetitions a side', 'not resolved ...' or 'too few ...';
    NOT_RUN when a side is missing. invert: report base relative to variant instead."""
    if not base or not variant:
        return NOT_RUN
    if invert:
        base, variant = variant, base
    return stats.compare_points(base, variant, metric).text()


def _max_threads(run: Run, bench: str, where: Dict[str, str]) -> Optional[int]:
    ns = [p.threads for p in run.points if p.bench == bench
          and all(p.params.get(k) == v for k, v in where.items())]
    return max(ns) if ns else None


class Cell(str):
    """A table cell that is already HTML (a rendering of a comparison with its data-
    attributes); _table inserts it unescaped. Plain str cells are escaped."""


def comparison_cell(verdict: Optional[Dict[str, Any]], cid: str, missing: str = "") -> Cell:
    """The one rendering of a verdicts.json entry in a table cell: its `text`, marked
    data-comparison=ID (the consistency test compares every such mark with verdicts.json); for
    a comparison without a verdict, 'not run: <missing>' with the same mark."""
    if verdict is None:
        text = NOT_RUN + (f": {missing}" if missing else "")
    else:
        text = verdict["text"]
    return Cell(f'<span class="cmp" data-comparison="{html.escape(cid)}">'
                f"{html.escape(text)}</span>")


def other_comparison_cell(base: List[Point], variant: List[Point], metric: str,
                          what: str) -> Cell:
    """A comparison that is not a verdicts.json entry, labelled with its own rows (base and
    variant keys) so it is never read as one: 'other comparison, rows A vs B: +3 % [...]'."""
    if not base or not variant:
        return Cell(html.escape(f"{what}: no such rows in this run"))
    rows = f"{base[0].key} vs {variant[0].key}"
    text = f"other comparison, rows {rows}: {stats.compare_points(base, variant, metric).text()}"
    return Cell(f'<span class="other" data-rows="{html.escape(rows)}">{html.escape(text)}'
                "</span>")


def verdict_points(run: Run, verdict: Dict[str, Any]) -> Tuple[List[Point], List[Point]]:
    """The repetitions a verdict used (its base_key and variant_key rows)."""
    def rows(key):
        return [p for p in run.points if p.key == key and p.aggregate is None]
    return rows(verdict["base_key"]), rows(verdict["variant_key"])


def comparison_rows(run: Run, verdicts: List[Dict[str, Any]], question: str
                    ) -> List[List[Any]]:
    """Table rows [comparison, seed discussion, measured here, comparable?] of every
    COMPARISONS entry of `question`: one per verdict (its text, the same computation as the
    verdict line), or 'not run' naming the rows the comparison needs when the run has none."""
    from verdicts import COMPARISONS, rows_text
    out: List[List[Any]] = []
    answered = any(v.get("question") == question for v in verdicts)
    for spec in COMPARISONS:
        if spec.question != question:
            continue
        mine = [v for v in verdicts if v.get("id", "").split("[")[0] == spec.id]
        for v in mine:
            out.append([v["comparison"], spec.seed, comparison_cell(v, v["id"]),
                        spec.comparable])
        if not mine and not answered:
            out.append([f"{spec.variant_name} vs {spec.base_name}", spec.seed,
                        comparison_cell(None, spec.id, f"no {rows_text(spec)} rows in this run"),
                        spec.comparable])
    return out


def rows_note(verdicts: List[Dict[str, Any]], question: str) -> str:
    """Which rows answer a question's verdicts and which give lock_stat's evidence (issue 40
    item 3): the uninstrumented twins (stats:off) answer; the instrumented twins' wait share
    and their effect are evidence beside it. Names any verdict this run could only answer from
    instrumented rows. "" for questions not answered from uninstrumented rows."""
    from verdicts import UNINSTRUMENTED_QUESTIONS
    mine = [v for v in verdicts if v.get("question") == question]
    if question not in UNINSTRUMENTED_QUESTIONS or not mine:
        return ""
    off = [v for v in mine if v.get("instrumented") is False]
    on = [v for v in mine if v.get("instrumented")]
    text = (f"Rows: {len(off)} of {len(mine)} verdicts are answered from the uninstrumented "
            "rows (lock_stat off, keys ending /stats:off; paired windows on stats:off both "
            "sides where the run holds the duet). The lock wait share (lock_stat) comes from "
            "their instrumented twins (the same keys without /stats:off) and is evidence, not "
            "the answer; each verdict's evidence also gives the same comparison on those "
            "instrumented rows.")
    if on:
        text += (" From instrumented rows, because this run has no stats:off twins of them: "
                 + "; ".join(v["id"] for v in on) + ".")
    return text


def unanswered_note(verdicts: List[Dict[str, Any]], question: str) -> str:
    """For a question some comparisons answer: the other COMPARISONS of it that have no rows
    in this run (another protocol or suite), named with the rows they need, so a reader never
    sees 'not run' beside a verdict on the same question; "" when there are none."""
    from verdicts import COMPARISONS, rows_text
    if not any(v.get("question") == question for v in verdicts):
        return ""
    ids = {v.get("id", "").split("[")[0] for v in verdicts}
    missing = [f"{spec.variant_name} vs {spec.base_name} ({rows_text(spec)})"
               for spec in COMPARISONS if spec.question == question and spec.id not in ids]
    if not missing:
        return ""
    return ("Defined for this question but without rows in this run (another protocol or "
            "suite), so not shown: " + "; ".join(missing) + ".")


def verdict_table_rows(rows: List[List[Any]], has_verdicts: bool
                       ) -> Tuple[List[List[Any]], List[str]]:
    """(rows to show, names of rows left out) of a question's table: when the question has
    verdicts, a row whose measured cell is "not run" is not set among them (issue 35: no "not
    run" row in the same table as verdicts); its quantity is named below the table instead."""
    if not has_verdicts:
        return rows, []
    keep, absent = [], []
    for row in rows:
        cell = row[2] if len(row) > 2 else ""
        if not isinstance(cell, Cell) and str(cell).startswith(NOT_RUN):
            absent.append(str(row[0]))
        else:
            keep.append(row)
    return keep, absent


def _of(verdicts: List[Dict[str, Any]], cid: str) -> List[Dict[str, Any]]:
    return [v for v in verdicts if v.get("id", "").split("[")[0] == cid]


def seed_tables(run: Run, verdicts: Optional[List[Dict[str, Any]]] = None
                ) -> Dict[str, List[List[Any]]]:
    """Per question id, table rows [quantity, seed figure, measured here, comparable?]. Every
    comparison of COMPARISONS is rendered from its verdicts.json entry (comparison_rows), so a
    table never recomputes what a verdict line says; other comparisons name their rows.
    Measured values are the mean of one coherence regime with spread and count, taken from the
    rows a verdict used where one applies."""
    from verdicts import compute_verdicts
    if verdicts is None:
        verdicts = compute_verdicts(run)
    tables: Dict[str, List[List[Any]]] = {}

    def verdict_stats(cid, metric, unit, seed="-", comparable="-"):
        rows = []
        for v in _of(verdicts, cid):
            base, variant = verdict_points(run, v)
            texts = side_by_side([base, variant], metric, unit)
            for key, text in ((v["base_key"], texts[0]), (v["variant_key"], texts[1])):
                rows.append([f"{metric}, {key}", seed, text, comparable])
        return rows

    # 1. pagevec 2004
    b16 = _mean(measure(run, "pagevec", "pagevec_bytes", {"slots": "16"}))
    b15 = _mean(measure(run, "pagevec", "pagevec_bytes", {"slots": "15"}))
    from families import pagevec_sweep
    config, sweep = pagevec_sweep(run.points)
    best = _best_slots(sweep)
    where = " ".join(f"{k}:{v}" for k, v in config.items())
    tables["q1"] = [
        ["struct pagevec bytes, 16 slots (2.6.9)", "136 on LP64 (140 quoted)", fmt(b16),
         "same quantity"],
        ["struct pagevec bytes, 15 slots (proposed)", "128 on LP64 (124 quoted)", fmt(b15),
         "same quantity"],
    ] + comparison_rows(run, verdicts, "000") + verdict_stats(
        "pv_slots_16_15", "pages_per_s", "pages/s") + [
        [f"best slot count per thread count (pagevec {where or 'all rows'}, offset 0)",
         "4·lg N (4 on UP), later 2^(2.5·√lg N − 1): 4 CPUs -> 6, 16 -> 16, 1024 -> 120",
         best or NOT_RUN, "same quantity (a slot count)"],
    ]

    # 2. zone->lock 2015
    rows = comparison_rows(run, verdicts, "001")
    for v in _of(verdicts, "zone_lock_after_before"):
        before, after = verdict_points(run, v)
        rows.append([f"ops/s, {v['base_key']} -> {v['variant_key']}", "-",
                     arrow_text(before, after, "ops_per_s"), "-"])
        n = before[0].threads if before else None
        lock = before[0].params.get("lock") if before else None
        # The verdict's work_ns group (cal, or 0: saturated), where the rows carry one.
        work = before[0].params.get("work_ns") if before else None
        for label, extra in (("counter-example pcp_batch:0 (a lock per page, not 4.0's path)",
                              {"pcp_batch": "0", "line": "64"}),
                             ("config no_cma (the fixed lock shares the line of flags)",
                              {"pcp_batch": "31", "line": "64", "config": "no_cma"})):
            where = {"lock": lock, **extra} if lock else dict(extra)
            if work:
                where["work_ns"] = work
            b = select(run, "zone_lock", "ops_per_s", {"layout": "lock_before_free_area",
                                                       **where}, n if n else "max")
            a = _same_variant(b, select(run, "zone_lock", "ops_per_s",
                                        {"layout": "lock_after_free_area", **where},
                                        n if n else "max"), "layout")
            if b and a:
                rows.append([f"fix, {label} (lock:{lock})", "-",
                             other_comparison_cell(b, a, "ops_per_s", label),
                             "none: not the seed's configuration"])
    # What lock_stat costs: the question pair's uninstrumented twins (stats:off) against the
    # same rows instrumented.
    for layout in ("lock_before_free_area", "lock_after_free_area"):
        off = select(run, "zone_lock", "ops_per_s", {"layout": layout, "stats": "off"},
                     prefer={"work_ns": "0", "lock": "ticket"})
        if not off:
            continue
        same = {k: v for k, v in off[0].params.items() if k != "stats"}
        on = [p for p in run.points if p.bench == "zone_lock" and p.aggregate is None
              and p.params == same and p.threads == off[0].threads
              and "ops_per_s" in p.metrics]
        label = f"lock_stat on vs off ({layout})"
        # Paired where the run holds the twin pair as a duet row (bench/duet.cpp "instr"):
        # window pairs of one regime, not repetitions split across regimes. Rows with an
        # overrun window are kept: only its pairs are left out (row_duet_pairs, as find_duet).
        want = {**same, "of": "zone_lock", "param": "stats", "a": "on", "b": "off"}
        want.pop("layout", None)
        want["layout"] = layout
        duet = [p for p in run.points if p.bench == "duet" and p.aggregate is None
                and p.params == want and p.threads == off[0].threads]
        if duet:
            pairs = labelled_duet_pairs(duet)
            text = (f"other comparison, paired windows of {duet[0].key} (uninstrumented / "
                    f"instrumented): {stats.compare_pairs(pairs).text()}")
            cell = Cell(f'<span class="other" data-rows="{html.escape(duet[0].key)}">'
                        f"{html.escape(text)}</span>")
        else:
            cell = other_comparison_cell(off, on, "ops_per_s", label)
        rows.append([f"instrumentation cost, {label}", "-", cell,
                     "none: lockline's own instrumentation"])
    tables["q2"] = rows

    # 3. page free 2006
    private = {"line": "private"}
    atomic_op = measure(run, "calibration", "ns_per_op", {"op": "atomic_fetch_add"},
                        prefer=private)
    plain_op = measure(run, "calibration", "ns_per_op", {"op": "plain_inc"}, prefer=private)
    from families import race_verdicts
    races = race_verdicts(run.points)
    rows = [
        ["locked instruction (atomic_fetch_add)",
         "~17 cycles (Pentium 4), more with another in flight", stat_text(atomic_op, "ns"),
         "same quantity in other units (cycles of a 2006 CPU vs ns here)"],
        ["plain test / increment", "1-2 cycles", stat_text(plain_op, "ns"),
         "same quantity in other units"],
    ] + comparison_rows(run, verdicts, "002") + verdict_stats(
        "page_free_fast_atomic", "ns_per_op", "ns/op", "-",
        "none: netperf reports Mbit/s, not time per free")
    for v in races or [{"variant": "fastpath", "verdict": NOT_RUN}]:
        seed = ("racy: reclaim can take a reference between the two tests"
                if v["variant"] == "fastpath" else "-")
        what = f"race test, variant {v['variant']}"
        if v.get("scanner"):
            what += f", scanner {v['scanner']}"
        rows.append([what, seed, v["verdict"], "same question (safety), no seed figure"])
    tables["q3"] = rows

    # 4. pagevec 2020
    b31 = _mean(measure(run, "pagevec", "pagevec_bytes", {"slots": "31"}))
    rows = comparison_rows(run, verdicts, "003")
    for v in _of(verdicts, "pv_slots_15_31"):
        # The wait share is lock_stat's: from the verdict's instrumented twins (its evidence,
        # issue 40 item 3), or its own rows where they are the instrumented ones.
        ev = v.get("evidence") or {}
        if ev:
            base, variant = verdict_points(run, {"base_key": ev["base_key"],
                                                 "variant_key": ev["variant_key"]})
        else:
            base, variant = verdict_points(run, v)
        if not base or "stats:off" in base[0].key:
            continue
        rows.append([f"share of time waiting for lru_lock (lock_stat evidence), "
                     f"{base[0].key} -> {variant[0].key}",
                     "8.9 % -> 2.2 % of CPU cycles in lock contention "
                     "(pmbench, large machine)",
                     arrow_text(base, variant, "wait_share", "share waiting"),
                     "none: the seed's is a share of all CPU cycles of a whole workload; the "
                     "model's is the share of a lock-bound loop's time spent waiting, which "
                     "nears 1 when the loop does little else"])
    rows.append(["pagevec memory, 15 -> 31 slots", "128 -> 256 bytes of page pointers",
                 f"{fmt(b15)} -> {fmt(b31)} bytes (whole struct)" if b15 and b31 else NOT_RUN,
                 "same quantity (the model's is the whole struct)"])
    tables["q4"] = rows

    # 5. pre-zeroing 2004
    seed_before = {1: 90849, 2: 115679, 4: 152067, 8: 167449}
    seed_after = {1: 306791, 2: 283594, 4: 354015, 8: 279197}
    rows = comparison_rows(run, verdicts, "004")
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
    gbs = {}
    for method in ("memset", "rep_stosb", "nt_store", "clzero"):
        gbs[method] = measure(run, "zeroing", "gb_per_s", {"method": method},
                              prefer={"fill": "zero"})
    rows.append(["zeroing bandwidth per method", "hardware (Altix BTE) only for order >= 4",
                 "; ".join(f"{m} {stat_text(v, 'GB/s')}" for m, v in gbs.items()
                           if v is not None) or NOT_RUN, "none: no seed figure"])
    tables["q5"] = rows
    return tables


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


def _same_n(reference: List[Point], points: List[Point]) -> List[Point]:
    """`points` restricted to the thread count of `reference` when both are given: a change
    compares the same thread count; returns `points` unchanged when it cannot."""
    if not reference or not points:
        return points
    n = reference[0].threads
    return [p for p in points if p.threads == n] or points


def _scale(value: Optional[float], by: float = 1e-6) -> Optional[float]:
    return None if value is None else value * by


def _best_slots(pts: List[Point]) -> str:
    """'N=1: 4, N=4: 8, ...' measured best slot count (max pages/s) per thread count over the
    rows of one pagevec configuration (families.pagevec_sweep: the heatmap's rows)."""
    best: Dict[int, tuple] = {}
    by_slots: Dict[Tuple[int, int], List[Point]] = {}
    for p in pts:
        try:
            by_slots.setdefault((p.threads, int(p.params["slots"])), []).append(p)
        except (KeyError, ValueError):
            continue
    for variant, by_n in summarize(pts, "pages_per_s").items():
        try:
            slots = int(dict(variant)["slots"])
        except ValueError:
            continue
        for n, stat in by_n.items():
            if n not in best or stat.mean > best[n][0]:
                best[n] = (stat.mean, slots)
    out = []
    for n in sorted(best):
        # A slot count is "best" only where it beats every other beyond noise: each other
        # slot count is compared with it (plots/stats.py, one regime a pair).
        top = by_slots[(n, best[n][1])]
        ties = sorted(s for (m, s), other in by_slots.items()
                      if m == n and s != best[n][1]
                      and stats.compare_points(top, other, "pages_per_s").status != "resolved")
        if not ties:
            out.append(f"N={n}: {best[n][1]}")
        elif len(ties) + 1 == len([1 for (m, _) in by_slots if m == n]):
            out.append(f"N={n}: none resolved (every slot count within noise of "
                       f"{best[n][1]})")
        else:
            out.append(f"N={n}: {best[n][1]} or " + ", ".join(map(str, ties))
                       + " (not told apart)")
    return "; ".join(out)


def _img(path: str, alt: str) -> str:
    with open(path, "rb") as handle:
        data = base64.b64encode(handle.read()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in header) + "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{c if isinstance(c, Cell) else html.escape(_cell(c))}"
                                    "</td>" for c in row) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (dict, list)):
        if isinstance(value, list) and len(value) > 16 and all(isinstance(v, int) for v in value):
            return f"{len(value)} items: {value[0]}..{value[-1]}"
        return json.dumps(value)
    return str(value)


def _kv_table(mapping: Dict[str, Any]) -> str:
    return _table(["key", "value"], sorted(mapping.items()))


def _plans_table(plans: Dict[str, Any]) -> str:
    keys: List[str] = []
    for plan in plans.values():
        if isinstance(plan, dict):
            for k in plan:
                if k not in keys:
                    keys.append(k)

    def order(item):
        try:
            return int(item[0])
        except ValueError:
            return 1 << 30
    rows = [[n] + [plan.get(k, "") if isinstance(plan, dict) else plan for k in keys]
            for n, plan in sorted(plans.items(), key=order)]
    return _table(["threads"] + keys, rows)


def _records_table(records: List[Any]) -> str:
    keys: List[str] = [k for k in ("name", "status", "reason")
                       if any(isinstance(r, dict) and k in r for r in records)]
    for rec in records:
        if isinstance(rec, dict):
            for k in rec:
                if k not in keys:
                    keys.append(k)
    return _table(keys, [[rec.get(k, "") if isinstance(rec, dict) else rec for k in keys]
                         for rec in records])


def _counters(counters: Any) -> str:
    """Counters' availability: a list of event records, or an object holding one under
    `events` plus scalar facts (PMU name, perf_event_paranoid, ...)."""
    if isinstance(counters, list) and counters:
        return _records_table(counters)
    if isinstance(counters, dict) and counters:
        events = counters.get("events")
        rest = {k: v for k, v in counters.items() if k != "events"}
        parts = [_records_table(events)] if isinstance(events, list) and events else []
        if rest:
            parts.append(_kv_table(rest))
        return "\n".join(parts)
    return "<p>no counter information recorded</p>"


def _layouts(layouts: Dict[str, Any]) -> str:
    parts = []
    for name, layout in sorted(layouts.items()):
        parts.append(f"<h3>{html.escape(name)}</h3>")
        if isinstance(layout, dict) and isinstance(layout.get("pahole"), str):
            # The pahole text says everything the JSON fields do, readably.
            parts.append(f"<pre>{html.escape(layout['pahole'])}</pre>")
        elif isinstance(layout, dict):
            parts.append(_kv_table(layout))
        else:
            parts.append(f"<pre>{html.escape(_cell(layout))}</pre>")
    return "\n".join(parts)


# Kernel-side rows (helper k18's families) shown beside the model's figures per question.
KERNEL_FAMILIES = {"q1": ["kernel_lru"], "q2": ["kernel_zone"], "q3": ["kernel_put_page"],
                   "q4": ["kernel_lru"], "q5": []}
KERNEL_METRICS = ("pages_per_s", "ops_per_s", "MB_per_s")
DERIVED_COUNTERS = ("IPC", "cache-misses/op", "hitm/op")


def _latest_rows(run: Run, bench: str) -> List[Tuple[Tuple, int, List[Point]]]:
    """(variant, largest thread count, its repetitions) per variant of rows keyed `bench`."""
    by: Dict[Tuple, Dict[int, List[Point]]] = {}
    for p in run.points:
        if p.bench == bench and p.aggregate is None:
            by.setdefault(p.variant, {}).setdefault(p.threads, []).append(p)
    return [(v, max(ns), ns[max(ns)]) for v, ns in sorted(by.items())]


def _dict(value: Any) -> Dict[str, Any]:
    return value if isinstance(value, dict) else {}


def kernel_rows(run: Run, benches: Sequence[str]) -> List[List[str]]:
    """Rows [row, threads, throughput, lock:contention_begin per op, attribution, sources] of
    the kernel families (kernel_lru / kernel_zone / kernel_put_page: the real kernel measured
    the way the model is), at each variant's largest thread count. Missing figures say why
    (the row's details.kernel.sources reasons)."""
    out = []
    for bench in benches:
        for variant, n, pts in _latest_rows(run, bench):
            metric = next((m for m in KERNEL_METRICS if any(m in p.metrics for p in pts)), None)
            kernel = _dict(_dict(pts[0].row.get("details")).get("kernel"))
            sources = _dict(kernel.get("sources"))
            value = stat_text(summary_of(pts, metric), metric.replace("_per_s", "/s")) \
                if metric else "no throughput metric"
            if any("kernel_contention_per_op" in p.metrics for p in pts):
                contention = stat_text(summary_of(pts, "kernel_contention_per_op"), "events/op")
            else:
                reason = sources.get("tracepoints:reason") or sources.get("tracepoints") or \
                    "not on the row"
                contention = f"unavailable ({reason})"
            attribution = _dict(kernel.get("attribution"))
            attr = ", ".join(f"{k} {v}" for k, v in attribution.items()) or "-"
            src = ", ".join(f"{k}: {v}" for k, v in sources.items() if ":" not in k) or "-"
            out.append([f"{bench}/" + " ".join(f"{k}:{v}" for k, v in variant), str(n), value,
                        contention, attr, src])
    return out


def _common_thread_rows(run: Run, bench: str, param: str
                        ) -> List[Tuple[Tuple, int, List[Point]]]:
    """(variant, threads, repetitions) of the `bench` rows carrying `param`, all at one thread
    count (the largest that most variants have), so the rows of one table are read against
    each other at the same N; variants without rows at that count are left out."""
    by: Dict[Tuple, Dict[int, List[Point]]] = {}
    for p in run.points:
        if p.bench == bench and p.aggregate is None and param in p.params:
            by.setdefault(p.variant, {}).setdefault(p.threads, []).append(p)
    if not by:
        return []
    counts: Dict[int, int] = {}
    for ns in by.values():
        for n in ns:
            counts[n] = counts.get(n, 0) + 1
    n = max(counts, key=lambda k: (counts[k], k))
    return [(v, n, ns[n]) for v, ns in sorted(by.items()) if n in ns]


def prezero_burst_rows(run: Run) -> List[List[str]]:
    """Burst-protocol pre-zeroing rows (params protocol, zeroer, burst_pages, pool_pages):
    allocations/s and the share served pre-zeroed against the burst / pool ratio B/P (the
    2004 objection: pre-zeroing only helps while a burst fits the pool zeroed while idle)."""
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
    # Adjacent rows are read against each other: every number of the table from one regime.
    metric, unit = prezero_rate_metric(groups)
    allocs = side_by_side(groups, metric, unit)
    shares = side_by_side(groups, "prezeroed_share")
    return [row + [a, s] for row, a, s in zip(rows, allocs, shares)]


def prezero_rate_metric(groups: Sequence[Sequence[Point]]) -> Tuple[str, str]:
    """The prezero rows' rate and its unit: faults_per_s (every allocation a modelled fault,
    bench/prezero.cpp FaultRest; issue 40 item 8) when any row has it, else allocs_per_s
    (files from before it)."""
    if any("faults_per_s" in p.metrics for pts in groups for p in pts):
        return "faults_per_s", "faults/s"
    return "allocs_per_s", "allocs/s"


def prezero_steady_rows(run: Run) -> List[List[str]]:
    """Steady-state pre-zeroing rows (param `mode`: zero_on_alloc, prezeroed_idle,
    prezeroed_busy) with what each allocation touches (details.touches): every line of the
    page, the case the 2004 author excluded; rows written before the label carry the same
    label (the model always wrote every line)."""
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
    metric, unit = prezero_rate_metric(groups)
    allocs = side_by_side(groups, metric, unit)
    shares = side_by_side(groups, "prezeroed_share")
    return [row[:4] + [a, s, row[4]] for row, a, s in zip(rows, allocs, shares)]


FAULT_SEED_COLUMNS = ["row", "GB", "repetitions", "threads", "user s", "system s", "wall s",
                      "faults/cpu/s", "faults/wall-s", "zeroing share (modelled)",
                      "clear_page share (sampled)"]


def _sampled_share_text(pts: List[Point]) -> str:
    """The sampled clear_page share of fault rows (metric clear_page_sampled_share, the
    share of task-clock samples of the timed phases whose innermost kernel function is a
    clear_page variant): mean over repetitions with the first row's Wilson 95 % interval
    when one repetition was sampled, else 'unavailable (reason)' from
    details.clear_page_sampled, '-' for rows written before the field existed."""
    stat = summary_of([p for p in pts if "clear_page_sampled_share" in p.metrics],
                      "clear_page_sampled_share")
    sampled = [_dict(_dict(p.row.get("details")).get("clear_page_sampled")) for p in pts]
    if stat is not None:
        text = fmt(stat.mean)
        measured = [s for s in sampled if s.get("status") == "measured"]
        ci = measured[0].get("share_ci95") if len(measured) == 1 else None
        if isinstance(ci, list) and len(ci) == 2 and all(isinstance(x, (int, float))
                                                          for x in ci):
            text += f" [{fmt(ci[0])}, {fmt(ci[1])}]"
        return text
    reasons = [str(s.get("reason")) for s in sampled if s.get("reason")]
    return f"unavailable ({reasons[0]})" if reasons else "-"


def fault_seed_rows(run: Run) -> List[List[str]]:
    """Fault rows in the columns of the 2004 table (GB, repetitions, threads, user s, system
    s, wall s, faults/cpu/s, faults/wall-s), means of one coherence regime; GB from
    details.seed_columns.gb, else the row's mb / 1024; then zeroing's share of the fault
    time twice: modelled (zeroing_share) and sampled from the kernel (_sampled_share_text)."""
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
            stat = summary_of([p for p in pts if metric in p.metrics], metric)
            return fmt(stat.mean) if stat else "-"
        rows.append([" ".join(f"{k}:{v}" for k, v in variant), fmt(gb) if gb else "?",
                     str(len(pts)), str(n), mean("user_s"), mean("sys_s"), mean("wall_s"),
                     mean("faults_per_cpu_s"), mean("faults_per_wall_s"),
                     mean("zeroing_share"), _sampled_share_text(pts)])
    return rows


def derived_counter_rows(run: Run) -> List[List[str]]:
    """Per family and variant at its largest thread count: IPC, cache-misses/op, hitm/op when
    rows carry them (marked 'scaled' when multiplexed, with time_enabled/time_running), else
    'unavailable (reason)' from counters.status."""
    rows = []
    families: Dict[str, None] = {}
    for p in run.points:
        families.setdefault(p.bench, None)
    for bench in families:
        for variant, n, pts in _latest_rows(run, bench):
            counters = _dict(pts[0].row.get("counters"))
            status = _dict(counters.get("status"))
            scaling = _dict(counters.get("scaling"))
            cells, any_value = [], False
            for name in DERIVED_COUNTERS:
                stat = summary_of([p for p in pts if name in p.metrics], name)
                if stat is not None:
                    any_value = True
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
            if any_value or status:
                rows.append([f"{bench}/" + " ".join(f"{k}:{v}" for k, v in variant), str(n)]
                            + cells)
    # One line per distinct unavailability is enough when nothing was measured anywhere.
    if rows and not any(not c.startswith("unavailable") for r in rows for c in r[2:]):
        return [["all rows", "-"] + [rows[0][2 + i] for i in range(len(DERIVED_COUNTERS))]]
    return rows


def overrun_lines(run: Run) -> List[str]:
    """'overrun window: KEY' for every point with a window that ran past its bound."""
    return [f"overrun window: {key} (its repetitions are dropped from comparisons)"
            for key in run.overrun_keys()]


def evidence_html(evidence: Optional[Dict[str, Any]]) -> str:
    """A verdict's lock_stat evidence (verdicts.evidence_record) under its line: the wait share
    of each instrumented twin (one regime) and the same comparison on those rows, marked as
    evidence (class "evidence", never data-comparison: it is not the verdict); "" without."""
    if not evidence:
        return ""
    share = evidence.get("wait_share") or {}

    def pct(side):
        stat = share.get(side)
        return "not measured" if not stat else f"{stat['mean'] * 100:.1f} % ({stat['n']} reps)"
    text = (f"lock_stat evidence from the instrumented twins {evidence['base_key']} -> "
            f"{evidence['variant_key']}: share of thread time waiting {pct('base')} -> "
            f"{pct('variant')} ({share.get('regime', 'all')} regime); {evidence['text']}")
    return f'<br><span class="caption evidence">{html.escape(text)}</span>'


def verdict_html(verdicts: List[Dict[str, Any]], run: Optional[Run] = None) -> str:
    """The verdict lines of one question as an HTML list (class per status); each says the
    machine it was measured on (Run.scale_text: threads, PUs, cores/SMT, NUMA nodes) so a
    2-thread result of a small guest is never read as the seed's large machine."""
    if not verdicts:
        return "<p>verdict: not run (no rows answer this question in this run)</p>"
    items = []
    for v in verdicts:
        cls = {"resolved": "ok", "not_resolved": "warn", "too_few": "warn"}.get(v["status"], "")
        scale = ""
        if run is not None:
            n = v.get("threads")
            scale = ("measured with " + run.scale_text(n if isinstance(n, int) else None)
                     + "; ")
        items.append(f'<li class="{cls}"><span class="cmp" data-comparison="'
                     f'{html.escape(v.get("id", ""))}">{html.escape(v["text"])}</span> '
                     f'<span class="caption scale">({html.escape(scale)}'
                     f'{html.escape(v["metric"])}; rows '
                     f'{html.escape(str(v.get("rows", "")))})</span>'
                     + evidence_html(v.get("evidence")) + '</li>')
    return '<p><b>Verdict</b> (effect with its 95 % rerun interval, where the estimate of a rerun falls, from one coherence regime):</p><ul ' \
           'class="verdicts">' + "".join(items) + "</ul>"


def coherence_note(run: Run, families: Optional[Sequence[str]] = None) -> str:
    """One sentence counting the contended repetitions (2+ threads) of `families` (all when None)
    by coherence label ("Contended repetitions: 34 near, 149 far ..."); "" when there are none.
    Repetitions in different regimes are different experiments: means and effects use one."""
    counts: Dict[str, int] = {}
    ns: Dict[str, List[float]] = {}
    names: Dict[str, Dict[str, int]] = {}
    for p in run.points:
        if p.aggregate is None and p.threads > 1 and (families is None or p.bench in families
                                                      or p.family in families):
            label = p.coherence if p.coherence else "unknown"
            counts[label] = counts.get(label, 0) + 1
            if p.regime_ns:
                ns.setdefault(label, []).append(p.regime_ns)
            coherence = p.row.get("coherence") if isinstance(p.row, dict) else None
            name = coherence.get("regime_name") if isinstance(coherence, dict) else None
            if isinstance(name, str) and name:
                names.setdefault(label, {}).setdefault(name, 0)
                names[label][name] += 1
    if not sum(counts.values()):
        return ""
    order = sorted(counts, key=stats.regime_rank)

    def named(label):
        # A label ranks regimes within this run only: say what it is, the harness's
        # regime_name ("near 32 ns (matches start_of_run:0-1 30 ns)") when the rows carry it,
        # else its ns (the median of the rows').
        if names.get(label):
            return max(names[label], key=names[label].get)
        values = sorted(ns.get(label, []))
        return f"{label} ({stats.ns_text(values[len(values) // 2])} ns)" if values else label
    note = ("Contended repetitions (2+ threads) by coherence regime: "
            + ", ".join(f"{counts[k]} {named(k)}" for k in order) + ".")
    if len([k for k in counts if k not in stats.NO_REGIME]) > 1:
        note += (" A cache line moved between the point's PUs at different costs in different "
                 "repetitions (the host moved the vCPUs, or the machine was busy): means and "
                 "effects here use the repetitions of one regime per point; figures draw the "
                 "other regimes' repetitions as hollow markers.")
    return note


def build_html(run: Run, images: Dict[str, str],
               verdicts: Optional[List[Dict[str, Any]]] = None) -> str:
    """The report as one HTML string; `images` maps figure stem -> PNG path; `verdicts` the
    verdicts.json records (computed when None)."""
    from verdicts import QUESTION_SECTION, compute_verdicts
    ll = run.lockline
    esc = html.escape
    if verdicts is None:
        verdicts = compute_verdicts(run)
    tables = seed_tables(run, verdicts)
    by_section: Dict[str, List[Dict[str, Any]]] = {}
    for v in verdicts:
        by_section.setdefault(QUESTION_SECTION.get(v["question"], ""), []).append(v)
    title = f"lockline report: {run.host}, {run.context.get('date', '?')}"
    body = [f"<h1>{esc(title)}</h1>", f'<p class="caption">{esc(run.caption())}</p>',
            f'<p class="caption">source: {esc(os.path.abspath(run.path))}; suite '
            f'{esc(str(ll.get("suite", "n/a")))}; finished {esc(str(ll.get("finished", "n/a")))}</p>']
    toc = [f'<li><a href="#{qid}">{esc(t)}</a></li>' for qid, t, _, _ in QUESTIONS]
    toc += ['<li><a href="#false_sharing">Cache-line distance</a></li>',
            '<li><a href="#other">Other figures</a></li>', '<li><a href="#machine">Machine and '
            'provenance</a></li>', '<li><a href="#plans">Placement</a></li>',
            '<li><a href="#counters">Counters</a></li>', '<li><a href="#warnings">Warnings</a></li>',
            '<li><a href="#layouts">Layouts</a></li>']
    body.append("<ul>" + "".join(toc) + "</ul>")
    overall = coherence_note(run)
    if overall:
        body.append(f'<p class="warn">{esc(overall)}</p>')
    if run.finished is False:
        body.append('<p class="warn">This run did not finish (context.lockline.finished is '
                    'false): it holds only the points measured before it stopped.</p>')
    if verdicts:
        resolved = sum(1 for v in verdicts if v["resolved"])
        body.append(f"<p>{resolved} of {len(verdicts)} comparisons resolved on this machine "
                    "(verdicts.json).</p>")
    body.append('<p class="caption">"Seed discussion" figures are the numbers quoted in the '
                "public Linux memory-management threads each question comes from (see "
                "docs/experiments.md in the lockline repository): measured on other machines, "
                "decades apart; compare directions and ratios, not absolute values.</p>")
    used = set()
    for qid, qtitle, question, stems in QUESTIONS:
        body.append(f'<section id="{qid}"><h2>{esc(qtitle)}</h2><p class="q">{esc(question)}</p>')
        body.append(f'<p class="caption scale">Measured here on {esc(run.scale_text())}; the '
                    "seed discussion's machine is not this one.</p>")
        shown = [s for s in [f"verdicts_{qid}"] + stems if s in images]
        for stem in shown:
            body.append(_img(images[stem], f"{stem} figure"))
            used.add(stem)
        if not shown:
            body.append(f"<p>{NOT_RUN}: no {esc(', '.join(stems))} results in this run.</p>")
        body.append(verdict_html(by_section.get(qid, []), run))
        qrows, absent = verdict_table_rows(tables[qid], bool(by_section.get(qid)))
        body.append(_table(["quantity", "seed discussion", "measured here",
                            "comparable with the seed?"], qrows))
        if absent:
            body.append('<p class="caption">Not measured in this run, so not in the table: '
                        + esc("; ".join(absent)) + ".</p>")
        note = rows_note(verdicts, {v: k for k, v in QUESTION_SECTION.items()}[qid])
        if note:
            body.append(f'<p class="caption rows-note">{esc(note)}</p>')
        missing = unanswered_note(verdicts, {v: k for k, v in QUESTION_SECTION.items()}[qid])
        if missing:
            body.append(f'<p class="caption">{esc(missing)}</p>')
        krows = kernel_rows(run, KERNEL_FAMILIES.get(qid, []))
        if krows:
            body.append("<h3>The real kernel, measured the same way</h3>")
            batch = _dict(_dict(ll.get("kernel_config")).get("folio_batch_size")).get("value")
            if qid in ("q1", "q4"):
                body.append('<p class="caption">The same kernel_lru rows under questions 1 '
                            "and 4: this kernel's batch is fixed"
                            + (f" (folio_batch of {esc(str(batch))} slots)" if batch else "")
                            + ", so they show the real LRU path's cost at this batch, not a "
                            "batch-size comparison.</p>")
            body.append(_table(["row", "threads", "throughput", "lock:contention_begin per op",
                                "attribution", "sources"], krows))
        if qid == "q5":
            burst = prezero_burst_rows(run)
            if burst:
                body.append("<h3>Pre-zeroing with bursts: burst B against pool P</h3>")
                body.append(_table(["protocol", "zeroer", "mode", "burst B (pages)",
                                    "pool P (pages)", "B/P", "threads", "rate (faults/s)",
                                    "pre-zeroed share"], burst))
            steady = prezero_steady_rows(run)
            if steady:
                body.append("<h3>Pre-zeroing in steady state: allocations that write every "
                            "line</h3>")
                body.append(_table(["mode", "method", "idle (us)", "threads", "rate (faults/s)",
                                    "pre-zeroed share", "touches"], steady))
            frows = fault_seed_rows(run)
            if frows:
                body.append("<h3>Faults in the 2004 table's columns</h3>")
                body.append('<p class="caption">The 2004 table\'s own wall-second column is '
                            "inconsistent with its faults/wall-s column by about 10x (1 GB = "
                            "262144 faults at 90849 faults/wall-s is 2.9 s, not the 0.29 s "
                            "implied); compare rates, not its wall seconds.</p>")
                body.append(_table(FAULT_SEED_COLUMNS, frows))
        note = coherence_note(run, stems + KERNEL_FAMILIES.get(qid, []))
        if note:
            body.append(f'<p class="warn">{esc(note)}</p>')
        body.append("</section>")
    from families import false_sharing_verdicts
    fs_rows = false_sharing_verdicts(p for p in run.points)
    if fs_rows or "false_sharing" in images:
        body.append('<section id="false_sharing"><h2>Cache-line distance: how far apart must '
                    'two threads\' counters be?</h2>')
        body.append('<p class="q">Two pinned threads increment their own counters 0-256 bytes '
                    "apart on a PU pair of each sharing class (64 vs 128 byte padding: Intel's "
                    "adjacent-line prefetcher pairs lines; POWER and some Arm cores have "
                    "128-byte lines). Effects are ns/op against the farthest distance, with "
                    "95 % intervals from one coherence regime.</p>")
        if "false_sharing" in images:
            body.append(_img(images["false_sharing"], "false_sharing figure"))
            used.add("false_sharing")
        body.append(_table(["PU pair", "op", "smallest distance with no slowdown",
                            "ns/op effect against the farthest distance"],
                           [[r["pair"], r["op"], r["smallest"], r["effects"]] for r in fs_rows]))
        body.append("</section>")
    body.append('<section id="other"><h2>Other figures</h2>')
    others = [s for s in images if s not in used]
    body.extend(_img(images[s], f"{s} figure") for s in others)
    if not others:
        body.append("<p>none</p>")
    body.append("</section>")

    from predict_report import predicted_sections  # issue 26: lockline predict's output
    body.extend(predicted_sections(os.path.abspath(run.path)))

    body.append('<section id="machine"><h2>Machine and provenance</h2>')
    machine = {k: v for k, v in run.context.items() if k != "lockline"}
    prov = {k: v for k, v in ll.items() if k not in ("plans", "counters", "warnings", "layouts",
                                                     "topology", "environment", "versions",
                                                     "skipped_points")}
    body.append("<h3>Google Benchmark context</h3>" + _kv_table(machine))
    if prov:
        body.append("<h3>lockline</h3>" + _kv_table(prov))
    for key in ("topology", "environment", "versions"):
        if isinstance(ll.get(key), dict):
            body.append(f"<h3>{key}</h3>" + _kv_table(ll[key]))
    body.append("</section>")

    body.append('<section id="plans"><h2>Placement plans</h2>')
    plans = ll.get("plans")
    body.append(_plans_table(plans) if isinstance(plans, dict) and plans else
                "<p>no placement plans recorded (not a lockline run?)</p>")
    body.append("</section>")

    body.append('<section id="counters"><h2>Counters availability</h2>')
    body.append(_counters(ll.get("counters")))
    derived = derived_counter_rows(run)
    if derived:
        body.append("<h3>Derived counters</h3>")
        body.append(_table(["row", "threads"] + list(DERIVED_COUNTERS), derived))
    body.append("</section>")

    body.append('<section id="warnings"><h2>Warnings</h2>')
    warnings = [str(w) for w in ll.get("warnings", []) if w] if isinstance(ll.get("warnings"), list) else []
    skipped_points = ll.get("skipped_points")
    if isinstance(skipped_points, list):
        warnings += [f"skipped point: {s}" for s in skipped_points]
    warnings += [f"failed row: {r}" for r in run.skipped_rows]
    warnings += [w for w in run.warnings if "FAKE PMU" in w]
    warnings += overrun_lines(run)
    body.append("<ul>" + "".join(f'<li class="warn">{esc(w)}</li>' for w in warnings) + "</ul>"
                if warnings else "<p>none</p>")
    body.append("</section>")

    body.append('<section id="layouts"><h2>Layouts</h2>')
    layouts = ll.get("layouts")
    body.append(_layouts(layouts) if isinstance(layouts, dict) and layouts else
                "<p>no layouts recorded</p>")
    body.append("</section>")

    csp = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
           "script-src 'unsafe-inline'")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            f"<title>{esc(title)}</title><style>{_CSS}</style>"
            f"<script>{_SCRIPT}</script></head>\n<body>\n" + "\n".join(body)
            + "\n</body></html>\n")


def write_verdict_figures(run: Run, verdicts: List[Dict[str, Any]], plot_dir: str
                          ) -> Dict[str, str]:
    """plot_dir/verdicts_qN.png per question with verdicts (figures.verdict_figure: the rows
    each verdict uses, both bars from one regime); returns {stem: path}."""
    from figures import plt, verdict_figure
    from outputs import write_atomic
    from verdicts import QUESTION_SECTION
    out = {}
    for qid, qtitle, _, _ in QUESTIONS:
        mine = [v for v in verdicts if QUESTION_SECTION.get(v.get("question")) == qid]
        fig = verdict_figure(run, mine, f"{qtitle.split('(')[0].strip()}: the rows each "
                             "verdict compares (one coherence regime per panel)")
        if fig is None:
            continue
        path = os.path.join(plot_dir, f"verdicts_{qid}.png")
        write_atomic(path, lambda handle, fig=fig: fig.savefig(handle, format="png", dpi=110))
        plt.close(fig)
        out[f"verdicts_{qid}"] = path
    return out


def write_report(run_dir: str, out: Optional[str] = None) -> str:
    """Plot the run in run_dir into run_dir/plots, write run_dir/verdicts.json and the report;
    return the report's path.

    Every file is created exclusively and renamed into place (plots/outputs.py), so a symlink
    planted at report.html, report.html.tmp or a plot name never redirects a write; a
    symlinked plots/ directory is refused. Raises ResultError for a bad run directory or
    result file.
    """
    from outputs import write_atomic
    from plot import plot_runs
    from verdicts import write_verdicts

    if not os.path.isdir(run_dir):
        raise ResultError(f"{run_dir}: not a directory (expected a lockline run directory)")
    runs = load_runs([run_dir])
    run = runs[0]
    plot_dir = os.path.join(run_dir, "plots")
    written = plot_runs([run], plot_dir, formats=("png", "svg"))
    images = {os.path.splitext(os.path.basename(p))[0]: p for p in written if p.endswith(".png")}
    _, doc = write_verdicts(run_dir, run)
    images.update(write_verdict_figures(run, doc["verdicts"], plot_dir))
    out = out or os.path.join(run_dir, "report.html")
    write_atomic(out, build_html(run, images, doc["verdicts"]))
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    """CLI entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description="Write RUN_DIR/report.html for a lockline run.")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory holding lockline.json")
    parser.add_argument("-o", "--out", metavar="FILE", help="report path (default RUN_DIR/report.html)")
    args = parser.parse_args(argv)
    try:
        path = write_report(args.run_dir, args.out)
    except ResultError as err:
        print(f"report.py: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"report.py: error: cannot write the report: {err}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
