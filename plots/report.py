#!/usr/bin/python3
"""Write a self-contained HTML report for one lockline run.

    plots/report.py RUN_DIR [-o FILE]

Draws the run's figures into RUN_DIR/plots/ (plot.py's functions), then writes
RUN_DIR/report.html: one section per seed question of BACKGROUND.md (the question, its figure,
and a table of the seed discussion's figures next to the ones measured here, "not run" where
the family is absent), then other figures, the machine and provenance, placement plans,
counters' availability, warnings, failed rows and data-structure layouts. Images are PNG data
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
from typing import Any, Dict, Iterable, List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lockline_results import Point, ResultError, Run, Stat, load_runs, summarize  # noqa: E402

NOT_RUN = "not run"

_CSS = """
body{font-family:sans-serif;max-width:1400px;margin:1em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #bbb;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;height:auto;border:1px solid #eee}
pre{background:#f7f7f7;padding:.5em;overflow-x:auto;font-size:.85em}
.q{font-style:italic;color:#444}.warn{color:#a40}.caption{font-size:.85em;color:#555}
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


def measure(run: Run, bench: str, metric: str, where: Dict[str, str],
            threads: Any = "max", prefer: Optional[Dict[str, str]] = None) -> Optional[Stat]:
    """Stat of `metric` over rows whose key starts with `bench` (the family, or a sub-benchmark
    such as page_free_race) and whose params include `where`.

    prefer: extra params used when some rows match them (e.g. {"line": "private"}), ignored
    otherwise, so older files without that parameter still match. threads: an int, "max"
    (largest thread count measured) or "min". When several variants still match, the first in
    sorted order is used. None when nothing matches.
    """
    pts = [p for p in run.points if p.bench == bench and metric in p.metrics
           and all(p.params.get(k) == v for k, v in where.items())]
    if prefer:
        narrowed = [p for p in pts if all(p.params.get(k) == v for k, v in prefer.items())]
        pts = narrowed or pts
    if not pts:
        return None
    summary = summarize(pts, metric)
    by_n = summary[sorted(summary)[0]]
    if threads == "max":
        n = max(by_n)
    elif threads == "min":
        n = min(by_n)
    else:
        n = threads
    return by_n.get(n)


def _mean(stat: Optional[Stat], scale: float = 1.0) -> Optional[float]:
    return None if stat is None else stat.mean * scale


def _max_threads(run: Run, bench: str, where: Dict[str, str]) -> Optional[int]:
    ns = [p.threads for p in run.points if p.bench == bench
          and all(p.params.get(k) == v for k, v in where.items())]
    return max(ns) if ns else None


def seed_tables(run: Run) -> Dict[str, List[List[str]]]:
    """Per question id, table rows [quantity, seed figure, measured here]."""
    tables: Dict[str, List[List[str]]] = {}

    # 1. pagevec 2004
    base = {"offset": "0"}
    n1 = _max_threads(run, "pagevec", {"slots": "16"})
    p16 = _mean(measure(run, "pagevec", "pages_per_s", {"slots": "16", **base}))
    p15 = _mean(measure(run, "pagevec", "pages_per_s", {"slots": "15", **base}))
    p16o8 = _mean(measure(run, "pagevec", "pages_per_s", {"slots": "16", "offset": "8"}))
    b16 = _mean(measure(run, "pagevec", "pagevec_bytes", {"slots": "16"}))
    b15 = _mean(measure(run, "pagevec", "pagevec_bytes", {"slots": "15"}))
    best = _best_slots(run)
    tables["q1"] = [
        ["struct pagevec bytes, 16 slots (2.6.9)", "136 on LP64 (140 quoted)", fmt(b16)],
        ["struct pagevec bytes, 15 slots (proposed)", "128 on LP64 (124 quoted)", fmt(b15)],
        [f"throughput, 16 slots (N={n1 or '?'})", "re-aim 4144-4207 jobs/min",
         fmt(p16) + (" pages/s" if p16 else "")],
        [f"throughput, 15 slots (N={n1 or '?'})", "re-aim 4493-4718 jobs/min",
         fmt(p15) + (" pages/s" if p15 else "")],
        ["change 16 -> 15 slots", "+6.8 % to +13.9 % (doubted as noise)", pct_change(p16, p15)],
        ["16 slots, offset 8 vs 0 (alignment)", "not measured in 2004", pct_change(p16, p16o8)],
        ["best slot count per thread count", "4·lg N (4 on UP), later 2^(2.5·√lg N − 1): "
         "4 CPUs -> 6, 16 -> 16, 1024 -> 120", best or NOT_RUN],
    ]

    # 2. zone->lock 2015
    rows = []
    locks = sorted({p.params.get("lock", "?") for p in run.points if p.bench == "zone_lock"})
    for lock in locks or ["(any)"]:
        where = {"lock": lock} if locks else {}
        n = _max_threads(run, "zone_lock", where)
        after = _mean(measure(run, "zone_lock", "ops_per_s",
                              {"layout": "lock_after_free_area", **where}))
        before = _mean(measure(run, "zone_lock", "ops_per_s",
                               {"layout": "lock_before_free_area", **where}))
        rows.append([f"lock next to free_area (lock:{lock}, N={n or '?'})",
                     "aim7 152288 -> 81911 jobs/min (-46.2 %)",
                     f"{fmt(after)} -> {fmt(before)} ops/s ({pct_change(after, before)})"
                     if after and before else NOT_RUN])
        rows.append([f"fix: lock after free_area (lock:{lock})",
                     "aim7 84568 -> 164280 jobs/min (+94.3 %)",
                     f"{fmt(before)} -> {fmt(after)} ops/s ({pct_change(before, after)})"
                     if after and before else NOT_RUN])
    tables["q2"] = rows

    # 3. page free 2006
    private = {"line": "private"}
    atomic_op = _mean(measure(run, "calibration", "ns_per_op", {"op": "atomic_fetch_add"},
                              prefer=private))
    plain_op = _mean(measure(run, "calibration", "ns_per_op", {"op": "plain_inc"}, prefer=private))
    free_where = {"free_cpu": "same", "on_lru_pct": "0"}
    atomic_free = _mean(measure(run, "page_free", "ns_per_op", {"variant": "atomic", **free_where},
                                threads="min"))
    fast_free = _mean(measure(run, "page_free", "ns_per_op", {"variant": "fastpath", **free_where},
                              threads="min"))
    from families import race_verdicts
    verdicts = race_verdicts(run.points)
    rows = [
        ["locked instruction (atomic_fetch_add)", "~17 cycles (Pentium 4), more with another in flight",
         fmt(atomic_op) + (" ns" if atomic_op else "")],
        ["plain test / increment", "1-2 cycles", fmt(plain_op) + (" ns" if plain_op else "")],
        ["page free, atomic (on_lru 0 %, same CPU)", "netperf ~8126 Mbit/s",
         fmt(atomic_free) + (" ns/op" if atomic_free else "")],
        ["page free, fast path (on_lru 0 %, same CPU)", "netperf ~8199 Mbit/s (+0.9 %)",
         fmt(fast_free) + (" ns/op" if fast_free else "")
         + (f" ({pct_change(atomic_free, fast_free)} time)" if atomic_free and fast_free else "")],
    ]
    for v in verdicts or [{"variant": "fastpath", "verdict": NOT_RUN}]:
        seed = ("racy: reclaim can take a reference between the two tests"
                if v["variant"] == "fastpath" else "-")
        rows.append([f"race test, variant {v['variant']}", seed, v["verdict"]])
    tables["q3"] = rows

    # 4. pagevec 2020
    n4 = _max_threads(run, "pagevec", {"slots": "31"})
    w15 = _mean(measure(run, "pagevec", "wait_share", {"slots": "15", **base}))
    w31 = _mean(measure(run, "pagevec", "wait_share", {"slots": "31", **base}))
    p31 = _mean(measure(run, "pagevec", "pages_per_s", {"slots": "31", **base}))
    b31 = _mean(measure(run, "pagevec", "pagevec_bytes", {"slots": "31"}))
    tables["q4"] = [
        [f"lock contention, 15 -> 31 slots (N={n4 or '?'})", "8.9 % -> 2.2 % of CPU cycles",
         f"{w15 * 100:.1f} % -> {w31 * 100:.1f} % of time waiting" if w15 is not None
         and w31 is not None else NOT_RUN],
        [f"throughput, 15 -> 31 slots (N={n4 or '?'})", "pmbench 88.8 -> 95.1 Mpages/s (+7.1 %)",
         f"{fmt(_scale(p15))} -> {fmt(_scale(p31))} Mpages/s ({pct_change(p15, p31)})"
         if p15 and p31 else NOT_RUN],
        ["pagevec memory, 15 -> 31 slots", "128 -> 256 bytes of page pointers",
         f"{fmt(b15)} -> {fmt(b31)} bytes (whole struct)" if b15 and b31 else NOT_RUN],
    ]

    # 5. pre-zeroing 2004
    seed_before = {1: 90849, 2: 115679, 4: 152067, 8: 167449}
    seed_after = {1: 306791, 2: 283594, 4: 354015, 8: 279197}
    rows = []
    warm = {"tasks": "threads", "start": "warm"}
    for n in (1, 2, 4, 8):
        zoa = _mean(measure(run, "prezero", "allocs_per_s", {"mode": "zero_on_alloc"}, n))
        idle = _mean(measure(run, "prezero", "allocs_per_s", {"mode": "prezeroed_idle"}, n))
        busy = _mean(measure(run, "prezero", "allocs_per_s", {"mode": "prezeroed_busy"}, n))
        plain = _mean(measure(run, "fault", "faults_per_wall_s", {"mode": "plain"}, n, warm))
        rows.append([f"{n} threads: faults (allocations) per wall second",
                     f"{seed_before[n]:,} before, {seed_after[n]:,} after "
                     f"({pct_change(seed_before[n], seed_after[n])})",
                     f"model: zero on alloc {fmt(zoa)}, pre-zeroed idle {fmt(idle)} "
                     f"({pct_change(zoa, idle)}), busy {fmt(busy)} ({pct_change(zoa, busy)}); "
                     f"real faults (mode:plain) {fmt(plain)}/wall-s"])
    cpu = _mean(measure(run, "fault", "faults_per_cpu_s", {"mode": "plain"}, 1, warm))
    idle_cpu = _mean(measure(run, "fault", "faults_per_cpu_s",
                             {"mode": "plain", "start": "after_idle"}, 1))
    rows.append(["1 thread: faults per CPU-second", "90933 -> 307839",
                 f"plain warm {fmt(cpu)}, after idle {fmt(idle_cpu)}" if cpu else NOT_RUN])
    gbs = {}
    for method in ("memset", "rep_stosb", "nt_store", "clzero"):
        gbs[method] = _mean(measure(run, "zeroing", "gb_per_s", {"method": method},
                                    prefer={"fill": "zero"}))
    rows.append(["zeroing bandwidth per method", "hardware (Altix BTE) only for order >= 4",
                 ", ".join(f"{m} {fmt(v)} GB/s" for m, v in gbs.items() if v is not None)
                 or NOT_RUN])
    tables["q5"] = rows
    return tables


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


def coherence_note(run: Run, families: Optional[Sequence[str]] = None) -> str:
    """One sentence counting the contended repetitions (2+ threads) of `families` (all when None)
    by coherence label, e.g. "Contended repetitions: 34 baseline, 149 shifted, 0 unknown ...";
    "" when there are none. Shifted repetitions ran while the probed PU pair's line transfer was
    more than 1.5x away from its baseline (see README), so their numbers compare poorly."""
    counts = {"baseline": 0, "shifted": 0, "unknown": 0}
    for p in run.points:
        if p.aggregate is None and p.threads > 1 and (families is None or p.bench in families
                                                      or p.family in families):
            counts[p.coherence if p.coherence in counts else "unknown"] += 1
    if not sum(counts.values()):
        return ""
    note = (f"Contended repetitions (2+ threads): {counts['baseline']} baseline, "
            f"{counts['shifted']} shifted, {counts['unknown']} unknown coherence.")
    if counts["shifted"]:
        note += (" Shifted repetitions ran while a cache line took more than 1.5x its baseline "
                 "time to move between the point's PUs (the host moved the vCPUs or the machine "
                 "was busy): treat differences between them as noise unless they repeat on "
                 "baseline points. Figures draw them as hollow red squares.")
    return note


def build_html(run: Run, images: Dict[str, str]) -> str:
    """The report as one HTML string; `images` maps figure stem -> PNG path."""
    ll = run.lockline
    esc = html.escape
    tables = seed_tables(run)
    title = f"lockline report: {run.host}, {run.context.get('date', '?')}"
    body = [f"<h1>{esc(title)}</h1>", f'<p class="caption">{esc(run.caption())}</p>',
            f'<p class="caption">source: {esc(os.path.abspath(run.path))}; suite '
            f'{esc(str(ll.get("suite", "n/a")))}; finished {esc(str(ll.get("finished", "n/a")))}</p>']
    toc = [f'<li><a href="#{qid}">{esc(t)}</a></li>' for qid, t, _, _ in QUESTIONS]
    toc += ['<li><a href="#other">Other figures</a></li>', '<li><a href="#machine">Machine and '
            'provenance</a></li>', '<li><a href="#plans">Placement</a></li>',
            '<li><a href="#counters">Counters</a></li>', '<li><a href="#warnings">Warnings</a></li>',
            '<li><a href="#layouts">Layouts</a></li>']
    body.append("<ul>" + "".join(toc) + "</ul>")
    overall = coherence_note(run)
    if overall:
        body.append(f'<p class="warn">{esc(overall)}</p>')
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
        body.append(_table(["quantity", "seed discussion", "measured here"], tables[qid]))
        note = coherence_note(run, stems)
        if note:
            body.append(f'<p class="warn">{esc(note)}</p>')
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
    body.append("</section>")

    body.append('<section id="warnings"><h2>Warnings</h2>')
    warnings = [str(w) for w in ll.get("warnings", []) if w] if isinstance(ll.get("warnings"), list) else []
    skipped_points = ll.get("skipped_points")
    if isinstance(skipped_points, list):
        warnings += [f"skipped point: {s}" for s in skipped_points]
    warnings += [f"failed row: {r}" for r in run.skipped_rows]
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
    """Plot the run in run_dir into run_dir/plots and write the report; return its path.

    Raises ResultError for a bad run directory or result file.
    """
    from plot import plot_runs

    if not os.path.isdir(run_dir):
        raise ResultError(f"{run_dir}: not a directory (expected a lockline run directory)")
    runs = load_runs([run_dir])
    run = runs[0]
    plot_dir = os.path.join(run_dir, "plots")
    written = plot_runs([run], plot_dir, formats=("png", "svg"))
    images = {os.path.splitext(os.path.basename(p))[0]: p for p in written if p.endswith(".png")}
    out = out or os.path.join(run_dir, "report.html")
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(build_html(run, images))
    os.replace(tmp, out)
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
