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

from lockline_results import Point, ResultError, Run, Stat, load_runs, summarize  # noqa: E402
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
    ("q4", "4. pagevec size on large systems (LKML, June 2020)",
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


def seed_tables(run: Run) -> Dict[str, List[List[str]]]:
    """Per question id, table rows [quantity, seed figure, measured here]. Measured values are
    the mean of one coherence regime with spread and count; changes are effects with a 95 %
    interval from one regime (plots/stats.py) or say why they are not resolved."""
    tables: Dict[str, List[List[str]]] = {}

    # 1. pagevec 2004
    base = {"offset": "0"}
    # 2004: 2.6.9's per-page work under lru_lock, no reclaim scanner (bench/pagevec.cpp).
    fixed = {"policy": "fixed", "kernel": "2.6.9", "scanner": "off"}
    # 2020: 5.8's __pagevec_lru_add_fn with the reclaim scanner on.
    fixed_58 = {"policy": "fixed", "kernel": "5.8", "scanner": "on"}
    pv58 = {slots: select(run, "pagevec", "pages_per_s", {"slots": slots, **base},
                          prefer=fixed_58) for slots in ("15", "31")}
    n1 = _max_threads(run, "pagevec", {"slots": "16"})
    pv = {slots: select(run, "pagevec", "pages_per_s", {"slots": slots, **base}, prefer=fixed)
          for slots in ("15", "16", "31")}
    p16o8 = select(run, "pagevec", "pages_per_s", {"slots": "16", "offset": "8"}, prefer=fixed)
    b16 = _mean(measure(run, "pagevec", "pagevec_bytes", {"slots": "16"}))
    b15 = _mean(measure(run, "pagevec", "pagevec_bytes", {"slots": "15"}))

    def pv_stat(slots):
        return stat_text(summary_of(pv[slots], "pages_per_s"), "pages/s")
    best = _best_slots(run)
    tables["q1"] = [
        ["struct pagevec bytes, 16 slots (2.6.9)", "136 on LP64 (140 quoted)", fmt(b16)],
        ["struct pagevec bytes, 15 slots (proposed)", "128 on LP64 (124 quoted)", fmt(b15)],
        [f"throughput, 16 slots (N={n1 or '?'})", "re-aim 4144-4207 jobs/min", pv_stat("16")],
        [f"throughput, 15 slots (N={n1 or '?'})", "re-aim 4493-4718 jobs/min", pv_stat("15")],
        ["change 16 -> 15 slots", "+6.8 % to +13.9 % (doubted as noise)",
         change(pv["16"], pv["15"], "pages_per_s")],
        ["16 slots, offset 8 vs 0 (alignment)", "not measured in 2004",
         change(_same_n(pv["16"], p16o8), p16o8, "pages_per_s")],
        ["best slot count per thread count", "4·lg N (4 on UP), later 2^(2.5·√lg N − 1): "
         "4 CPUs -> 6, 16 -> 16, 1024 -> 120", best or NOT_RUN],
    ]

    # 2. zone->lock 2015
    rows = []
    locks = sorted({p.params.get("lock", "?") for p in run.points if p.bench == "zone_lock"})
    # Linux 4.0's path: pcp batch 31, CMA config, 64-byte lines; one zone per NUMA node where
    # the run has it (the default on multi-node machines), else the single zone.
    zbase = {"pcp_batch": "31", "line": "64", "config": "cma"}
    zprefers = [{**zbase, "zones": "per_numa"}, zbase, {"line": "64"}]

    def zsel(layout, where, extra=None):
        for prefer in ([extra] if extra else zprefers):
            pts = select(run, "zone_lock", "ops_per_s", {"layout": layout, **where},
                         prefer=prefer)
            if pts and all(pts[0].params.get(k) == v for k, v in prefer.items()):
                return pts
        return select(run, "zone_lock", "ops_per_s", {"layout": layout, **where})
    for lock in locks or ["(any)"]:
        where = {"lock": lock} if locks else {}
        n = _max_threads(run, "zone_lock", where)
        after = zsel("lock_after_free_area", where)
        before = zsel("lock_before_free_area", where)
        rows.append([f"3484b2de9499 (v3.16-v3.19): lock next to free_area (lock:{lock}, "
                     f"N={n or '?'})", "aim7 152288 -> 81911 jobs/min (-46.2 %)",
                     change(after, before, "ops_per_s")])
        rows.append([f"fix a368ab67aa55 (v4.0): lock after free_area (lock:{lock}, "
                     f"N={n or '?'})", "aim7 84568 -> 164280 jobs/min (+94.3 %)",
                     change(before, after, "ops_per_s")])
        for label, extra in (("counter-example pcp_batch:0 (a lock per page, not 4.0's path)",
                              {"pcp_batch": "0", "line": "64"}),
                             ("config no_cma (the fixed lock shares the line of flags)",
                              {"pcp_batch": "31", "line": "64", "config": "no_cma"})):
            b, a = zsel("lock_before_free_area", where, extra), zsel("lock_after_free_area",
                                                                       where, extra)
            if b and a and all(b[0].params.get(k) == v for k, v in extra.items()):
                rows.append([f"fix, {label} (lock:{lock})", "-", change(b, a, "ops_per_s")])
        rows.append([f"ops/s before -> after (lock:{lock})", "-",
                     f"{stat_text(summary_of(before, 'ops_per_s'))} -> "
                     f"{stat_text(summary_of(after, 'ops_per_s'))}" if after and before
                     else NOT_RUN])
    tables["q2"] = rows

    # 3. page free 2006
    private = {"line": "private"}
    atomic_op = measure(run, "calibration", "ns_per_op", {"op": "atomic_fetch_add"},
                        prefer=private)
    plain_op = measure(run, "calibration", "ns_per_op", {"op": "plain_inc"}, prefer=private)
    free_where = {"free_cpu": "same", "on_lru_pct": "0"}
    atomic_free = select(run, "page_free", "ns_per_op", {"variant": "atomic", **free_where},
                         threads="min")
    fast_free = select(run, "page_free", "ns_per_op", {"variant": "fastpath", **free_where},
                       threads="min")
    from families import race_verdicts
    verdicts = race_verdicts(run.points)
    rows = [
        ["locked instruction (atomic_fetch_add)", "~17 cycles (Pentium 4), more with another in flight",
         stat_text(atomic_op, "ns")],
        ["plain test / increment", "1-2 cycles", stat_text(plain_op, "ns")],
        ["page free, atomic (on_lru 0 %, same CPU)", "netperf ~8126 Mbit/s",
         stat_text(summary_of(atomic_free, "ns_per_op"), "ns/op")],
        ["page free, fast path (on_lru 0 %, same CPU)", "netperf ~8199 Mbit/s (+0.9 %)",
         stat_text(summary_of(fast_free, "ns_per_op"), "ns/op")],
        ["fast path vs atomic, time per free", "+0.9 % throughput (netperf)",
         change(atomic_free, fast_free, "ns_per_op")],
    ]
    for v in verdicts or [{"variant": "fastpath", "verdict": NOT_RUN}]:
        seed = ("racy: reclaim can take a reference between the two tests"
                if v["variant"] == "fastpath" else "-")
        what = f"race test, variant {v['variant']}"
        if v.get("scanner"):
            what += f", scanner {v['scanner']}"
        rows.append([what, seed, v["verdict"]])
    tables["q3"] = rows

    # 4. pagevec 2020
    n4 = _max_threads(run, "pagevec", {"slots": "31"})
    w15 = measure(run, "pagevec", "wait_share", {"slots": "15", **base}, prefer=fixed_58)
    w31 = measure(run, "pagevec", "wait_share", {"slots": "31", **base}, prefer=fixed_58)
    b31 = _mean(measure(run, "pagevec", "pagevec_bytes", {"slots": "31"}))
    tables["q4"] = [
        [f"lock contention, 15 -> 31 slots (N={n4 or '?'})", "8.9 % -> 2.2 % of CPU cycles",
         f"{stat_text(w15, 'share waiting', 1.0)} -> {stat_text(w31, 'share waiting', 1.0)}"
         if w15 is not None and w31 is not None else NOT_RUN],
        [f"throughput, 15 -> 31 slots (N={n4 or '?'})", "pmbench 88.8 -> 95.1 Mpages/s (+7.1 %)",
         change(pv58["15"], _same_n(pv58["15"], pv58["31"]), "pages_per_s")],
        ["pagevec memory, 15 -> 31 slots", "128 -> 256 bytes of page pointers",
         f"{fmt(b15)} -> {fmt(b31)} bytes (whole struct)" if b15 and b31 else NOT_RUN],
    ]

    # 5. pre-zeroing 2004
    seed_before = {1: 90849, 2: 115679, 4: 152067, 8: 167449}
    seed_after = {1: 306791, 2: 283594, 4: 354015, 8: 279197}
    rows = []
    warm = {"tasks": "threads", "start": "warm"}
    for n in (1, 2, 4, 8):
        zoa = select(run, "prezero", "allocs_per_s", {"mode": "zero_on_alloc"}, n)
        idle = select(run, "prezero", "allocs_per_s", {"mode": "prezeroed_idle"}, n)
        busy = select(run, "prezero", "allocs_per_s", {"mode": "prezeroed_busy"}, n)
        plain = measure(run, "fault", "faults_per_wall_s", {"mode": "plain"}, n, warm)
        if not (zoa or idle or busy or plain):
            rows.append([f"{n} threads: faults (allocations) per wall second",
                         f"{seed_before[n]:,} before, {seed_after[n]:,} after", NOT_RUN])
            continue
        zoa_idle = [p for p in run.points if p.bench == "prezero" and p.threads == n
                    and p.aggregate is None and p.params.get("mode") == "zero_on_alloc"
                    and idle and p.params.get("idle_us") == idle[0].params.get("idle_us")]
        zoa_busy = [p for p in run.points if p.bench == "prezero" and p.threads == n
                    and p.aggregate is None and p.params.get("mode") == "zero_on_alloc"
                    and busy and p.params.get("idle_us") == busy[0].params.get("idle_us")]
        rows.append([f"{n} threads: faults (allocations) per wall second",
                     f"{seed_before[n]:,} before, {seed_after[n]:,} after (+238 % at 1 thread)"
                     if n == 1 else f"{seed_before[n]:,} before, {seed_after[n]:,} after",
                     f"model: pre-zeroed with idle time vs zero on alloc: "
                     f"{change(zoa_idle or zoa, idle, 'allocs_per_s')}; busy zeroer: "
                     f"{change(zoa_busy or zoa, busy, 'allocs_per_s')}; real faults "
                     f"(mode:plain) {stat_text(plain, 'faults/wall-s')}"])
    for zeroer in ("engine", "idle_cpus"):
        burst = {"protocol": "idle_burst", "burst_pages": "4096", "pool_pages": "4096"}
        none = select(run, "prezero", "allocs_per_s", {**burst, "zeroer": "none"}, 1)
        pre = select(run, "prezero", "allocs_per_s", {**burst, "zeroer": zeroer}, 1)
        busy = select(run, "prezero", "allocs_per_s",
                      {**burst, "protocol": "busy", "zeroer": zeroer}, 1)
        if none or pre:
            rows.append([f"1 thread, burst B = pool P after an idle period, zeroer {zeroer}",
                         "favourable case (idle machine) vs Holt: no pre-zeroed pages when busy",
                         f"idle then burst vs zero on alloc: {change(none, pre, 'allocs_per_s')}"
                         f"; busy vs idle then burst: {change(pre, busy, 'allocs_per_s')}"])
    rows.append(prezero_faults_per_s_row(run, warm))
    cpu = measure(run, "fault", "faults_per_cpu_s", {"mode": "plain"}, 1, warm)
    idle_cpu = measure(run, "fault", "faults_per_cpu_s",
                       {"mode": "plain", "start": "after_idle"}, 1)
    rows.append(["1 thread: faults per CPU-second", "90933 -> 307839",
                 f"plain warm {stat_text(cpu)}, after idle {stat_text(idle_cpu)}" if cpu
                 else NOT_RUN])
    gbs = {}
    for method in ("memset", "rep_stosb", "nt_store", "clzero"):
        gbs[method] = measure(run, "zeroing", "gb_per_s", {"method": method},
                              prefer={"fill": "zero"})
    rows.append(["zeroing bandwidth per method", "hardware (Altix BTE) only for order >= 4",
                 "; ".join(f"{m} {stat_text(v, 'GB/s')}" for m, v in gbs.items()
                           if v is not None) or NOT_RUN])
    tables["q5"] = rows
    return tables


def prezero_faults_per_s(fault_ns: float, clear_share: Optional[float],
                         saving_ns: Optional[float]) -> Dict[str, Optional[float]]:
    """Question 004 in faults per second (issue 23 item 5), one thread: `fault_ns` the fault
    family's CPU ns per fault, `clear_share` its sampled clear_page share of fault time,
    `saving_ns` the prezero pool's measured zeroing saving per allocation (zero on allocation
    minus pre-zeroed alloc_ns). Returns faults/s now, the kernel-level bound if every
    clear_page left the fault path (now / (1 - share)), and the pool-based estimate (1e9 /
    (fault_ns - saving), never beyond the bound); None where an input is missing."""
    now = 1e9 / fault_ns if fault_ns > 0 else None
    bound = now / (1 - clear_share) if now and clear_share is not None and clear_share < 1 \
        else None
    est = None
    if now and saving_ns is not None:
        floor = fault_ns * (1 - clear_share) if clear_share is not None else 0.0
        after = max(fault_ns - max(saving_ns, 0.0), floor)
        est = 1e9 / after if after > 0 else None
    return {"now": now, "bound": bound, "pool": est}


def prezero_faults_per_s_row(run: Run, warm: Dict[str, str]) -> List[str]:
    """The q5 row answering in faults/s: the pool's zeroing saving combined with the fault
    family's per-fault cost and sampled clear_page share (method named in the row)."""
    label = "1 thread: faults/s with pre-zeroed pages (the seed's unit)"
    seed = "90,849 -> 306,791 faults/s (+238 %)"
    fault = measure(run, "fault", "cpu_ns_per_fault", {"mode": "plain"}, 1, warm)
    share = measure(run, "fault", "clear_page_sampled_share", {"mode": "plain"}, 1, warm)
    zoa = measure(run, "prezero", "alloc_ns", {"mode": "zero_on_alloc"}, 1)
    pre = measure(run, "prezero", "alloc_ns", {"mode": "prezeroed_idle"}, 1)
    if fault is None:
        return [label, seed, NOT_RUN + " (needs the fault family)"]
    saving = zoa.mean - pre.mean if zoa is not None and pre is not None else None
    r = prezero_faults_per_s(fault.mean, share.mean if share else None, saving)
    parts = [f"now {fmt(r['now'])} faults/CPU-s ({stat_text(fault, 'ns/fault')})"]
    if r["bound"]:
        parts.append(f"kernel-level bound 1/(1 - clear_page share {share.mean * 100:.0f} %): "
                     f"{fmt(r['bound'])} faults/s ({(r['bound'] / r['now'] - 1) * 100:+.0f} %)")
    if r["pool"]:
        parts.append(f"pool's measured zeroing saving {saving:.0f} ns per allocation taken off "
                     f"the fault: {fmt(r['pool'])} faults/s "
                     f"({(r['pool'] / r['now'] - 1) * 100:+.0f} %)")
    parts.append("method: fault family's CPU ns per fault and sampled clear_page share, "
                 "combined with the prezero pool's alloc_ns saving; derived from regime means, "
                 "no interval")
    return [label, seed, "; ".join(parts)]


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


def _best_slots(run: Run) -> str:
    """'N=1: 4, N=4: 8, ...' measured best slot count (max pages/s, offset 0) per thread count."""
    pts = [p for p in run.points if p.bench == "pagevec" and "slots" in p.params
           and p.params.get("offset", "0") == "0" and p.params.get("policy", "fixed") == "fixed"]
    best: Dict[int, tuple] = {}
    for variant, by_n in summarize(pts, "pages_per_s").items():
        try:
            slots = int(dict(variant)["slots"])
        except ValueError:
            continue
        for n, stat in by_n.items():
            if n not in best or stat.mean > best[n][0]:
                best[n] = (stat.mean, slots)
    return ", ".join(f"N={n}: {best[n][1]}" for n in sorted(best))


def _img(path: str, alt: str) -> str:
    with open(path, "rb") as handle:
        data = base64.b64encode(handle.read()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in header) + "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{html.escape(_cell(c))}</td>" for c in row) + "</tr>")
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


def prezero_burst_rows(run: Run) -> List[List[str]]:
    """Burst-protocol pre-zeroing rows (params protocol, zeroer, burst_pages, pool_pages):
    allocations/s and the share served pre-zeroed against the burst / pool ratio B/P (the
    2004 objection: pre-zeroing only helps while a burst fits the pool zeroed while idle)."""
    rows = []
    for variant, n, pts in _latest_rows(run, "prezero"):
        params = dict(variant)
        if "protocol" not in params:
            continue
        try:
            ratio = f"{float(params.get('burst_pages')) / float(params.get('pool_pages')):.2g}"
        except (TypeError, ValueError, ZeroDivisionError):
            ratio = "?"
        rows.append([params.get("protocol", "?"), params.get("zeroer", "?"),
                     params.get("mode", "-"), params.get("burst_pages", "?"),
                     params.get("pool_pages", "?"), ratio, str(n),
                     stat_text(summary_of(pts, "allocs_per_s"), "allocs/s"),
                     stat_text(summary_of(pts, "prezeroed_share"))])
    return rows


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


def verdict_html(verdicts: List[Dict[str, Any]]) -> str:
    """The verdict lines of one question as an HTML list (class per status)."""
    if not verdicts:
        return "<p>verdict: not run (no rows answer this question in this run)</p>"
    items = []
    for v in verdicts:
        cls = {"resolved": "ok", "not_resolved": "warn", "too_few": "warn"}.get(v["status"], "")
        items.append(f'<li class="{cls}">{html.escape(v["text"])} <span class="caption">'
                     f'({html.escape(v["metric"])})</span></li>')
    return '<p><b>Verdict</b> (effect with 95 % interval from one coherence regime):</p><ul ' \
           'class="verdicts">' + "".join(items) + "</ul>"


def coherence_note(run: Run, families: Optional[Sequence[str]] = None) -> str:
    """One sentence counting the contended repetitions (2+ threads) of `families` (all when None)
    by coherence label ("Contended repetitions: 34 near, 149 far ..."); "" when there are none.
    Repetitions in different regimes are different experiments: means and effects use one."""
    counts: Dict[str, int] = {}
    for p in run.points:
        if p.aggregate is None and p.threads > 1 and (families is None or p.bench in families
                                                      or p.family in families):
            label = p.coherence if p.coherence else "unknown"
            counts[label] = counts.get(label, 0) + 1
    if not sum(counts.values()):
        return ""
    order = sorted(counts, key=stats.regime_rank)
    note = ("Contended repetitions (2+ threads) by coherence regime: "
            + ", ".join(f"{counts[k]} {k}" for k in order) + ".")
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
    tables = seed_tables(run)
    if verdicts is None:
        verdicts = compute_verdicts(run)
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
                "BACKGROUND.md): measured on other machines, decades apart; compare directions "
                "and ratios, not absolute values.</p>")
    used = set()
    for qid, qtitle, question, stems in QUESTIONS:
        body.append(f'<section id="{qid}"><h2>{esc(qtitle)}</h2><p class="q">{esc(question)}</p>')
        shown = [s for s in stems if s in images]
        for stem in shown:
            body.append(_img(images[stem], f"{stem} figure"))
            used.add(stem)
        if not shown:
            body.append(f"<p>{NOT_RUN}: no {esc(', '.join(stems))} results in this run.</p>")
        body.append(verdict_html(by_section.get(qid, [])))
        body.append(_table(["quantity", "seed discussion", "measured here"], tables[qid]))
        krows = kernel_rows(run, KERNEL_FAMILIES.get(qid, []))
        if krows:
            body.append("<h3>The real kernel, measured the same way</h3>")
            body.append(_table(["row", "threads", "throughput", "lock:contention_begin per op",
                                "attribution", "sources"], krows))
        if qid == "q5":
            burst = prezero_burst_rows(run)
            if burst:
                body.append("<h3>Pre-zeroing with bursts: burst B against pool P</h3>")
                body.append(_table(["protocol", "zeroer", "mode", "burst B (pages)",
                                    "pool P (pages)", "B/P", "threads", "allocations/s",
                                    "pre-zeroed share"], burst))
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
