#!/usr/bin/python3
"""Write a self-contained HTML report for one lockline run.

    plots/report.py RUN_DIR [-o FILE]

Draws the run's figures into RUN_DIR/plots/, writes RUN_DIR/verdicts.json (plots/verdicts.py)
and RUN_DIR/report.html (its sections: docs/report.md), every file created exclusively and
renamed into place (plots/outputs.py). Images are PNG data URIs under a Content-Security-Policy
forbidding network access; an inline script sets `data-images="ok"` on <body> once every image
loaded. Exit 0 on success, 2 on bad input with one line on stderr."""

from __future__ import annotations

import argparse
import html
import json
import os
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lockline_results import ResultError, Run, error_status, grouped, load_runs  # noqa: E402
from report_tables import (DERIVED_COUNTERS, FAULT_SEED_COLUMNS, KERNEL_FAMILIES,  # noqa: E402
                           NOT_RUN, Cell, _dict, derived_counter_rows, fault_seed_rows, kernel_rows,
                           prezero_burst_rows, prezero_steady_rows, seed_tables)
from predict_report import _img, predicted_sections  # noqa: E402
import stats  # noqa: E402


_CSS = """
body{font-family:sans-serif;max-width:1400px;margin:1em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #bbb;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}
td{overflow-wrap:anywhere}img{max-width:100%;height:auto;border:1px solid #eee}
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
    ['Width', 'Height'].forEach(function (d) {
      var sizes = Array.prototype.map.call(document.querySelectorAll('table'),
                                           function (t) { return t['offset' + d]; });
      document.body.setAttribute('data-largest-table-' + d.toLowerCase(),
                                 String(Math.max.apply(null, [0].concat(sizes))));
    });
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


def _para(cls: str, text: str) -> List[str]:
    """`text` as a <p> of class `cls`; [] for no text."""
    return [f'<p class="{cls}">{html.escape(text)}</p>'] if text else []


def rows_note(verdicts: List[Dict[str, Any]], question: str) -> str:
    """Which rows answer a question's verdicts (the stats:off twins) and which give lock_stat's
    evidence, naming any verdict only instrumented rows answer; "" for other questions."""
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
    """The question's other COMPARISONS without rows in this run, named with the rows they need; ""
    when there are none."""
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
    """(rows to show, names left out) of a question's table: with verdicts, "not run" rows are
    named below the table instead."""
    def not_run(row):
        cell = row[2] if len(row) > 2 else ""
        return has_verdicts and not isinstance(cell, Cell) and str(cell).startswith(NOT_RUN)
    return [r for r in rows if not not_run(r)], [str(r[0]) for r in rows if not_run(r)]


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    return "\n".join(
        ["<table><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in header) + "</tr>"]
        + ["<tr>" + "".join(f"<td>{c if isinstance(c, Cell) else html.escape(_cell(c))}</td>"
                            for c in row) + "</tr>" for row in rows] + ["</table>"])


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


def _keys(records: Iterable[Any], keys: List[str]) -> List[str]:
    """`keys`, then every other key of the dict records, in order of appearance."""
    for rec in records:
        if isinstance(rec, dict):
            keys += [k for k in rec if k not in keys]
    return keys


def _plans_table(plans: Dict[str, Any]) -> str:
    keys = _keys(plans.values(), [])

    def order(item):
        try:
            return int(item[0])
        except ValueError:
            return 1 << 30
    rows = [[n] + [plan.get(k, "") if isinstance(plan, dict) else plan for k in keys]
            for n, plan in sorted(plans.items(), key=order)]
    return _table(["threads"] + keys, rows)


def _records_table(records: List[Any]) -> str:
    keys = _keys(records, [k for k in ("name", "status", "reason")
                           if any(isinstance(r, dict) and k in r for r in records)])
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
        return "\n".join(parts + ([_kv_table(rest)] if rest else []))
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


def evidence_html(evidence: Optional[Dict[str, Any]]) -> str:
    """A verdict's lock_stat evidence (verdicts.evidence_record) under its line, class "evidence"
    (never data-comparison); "" without."""
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
    """The verdict lines of one question as an HTML list (class per status), each with its machine
    (Run.scale_text)."""
    if not verdicts:
        return "<p>verdict: not run (no rows answer this question in this run)</p>"
    items = []
    for v in verdicts:
        cls = {"resolved": "ok", "not_resolved": "warn", "too_few": "warn",
               "not_answerable": "warn"}.get(v["status"], "")
        n = v.get("threads")
        scale = ("" if run is None else "measured with "
                 + run.scale_text(n if isinstance(n, int) else None) + "; ")
        items.append(f'<li class="{cls}"><span class="cmp" data-comparison="'
                     f'{html.escape(v.get("id", ""))}">{html.escape(v["text"])}</span> '
                     f'<span class="caption scale">({html.escape(scale)}'
                     f'{html.escape(v["metric"])}; rows '
                     f'{html.escape(str(v.get("rows", "")))})</span>'
                     + evidence_html(v.get("evidence")) + '</li>')
    return '<p><b>Verdict</b> (effect with its 95 % rerun interval, where the estimate of a rerun falls, from one coherence regime):</p><ul ' \
           'class="verdicts">' + "".join(items) + "</ul>"


# The seed's machine class for an answer this machine cannot give: the 16-core Xeon KVM guest
# of tests/fixtures/big-machine (its lstopo XML, copied; provenance in docs/experiments.md).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREDICT_TOPOLOGY = os.path.join(ROOT, "results", "recorded", "xeon-16c-kvm-topology.xml")
PREDICT_SECONDS = 10


def predicted_answer(run: Run, question: str) -> Tuple[List[Dict[str, Any]], str]:
    """(verdicts of `question` predict(run, PREDICT_TOPOLOGY) gives at its largest thread count
    that leaves a PU for a helper, as the runner plans 003's scanner, "") or ([], why none:
    predict failed, or took over PREDICT_SECONDS, left running in a daemon thread)."""
    import contextlib
    import io
    import tempfile
    import threading
    from predict import predict
    box: Dict[str, Any] = {}

    def work() -> None:
        said = io.StringIO()
        try:
            with tempfile.TemporaryDirectory() as out, contextlib.redirect_stderr(said):
                box["doc"] = predict(os.path.abspath(run.path), PREDICT_TOPOLOGY, out_dir=out,
                                     figures=False)
        except SystemExit:  # predict's fail(): one "lockline: error: predict: ..." line
            box["error"] = said.getvalue().strip().replace("lockline: error: ", "")
        except Exception as err:  # noqa: BLE001 - any failure is said, never raised
            box["error"] = f"predict failed: {type(err).__name__}: {err}"
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(PREDICT_SECONDS)
    if thread.is_alive():
        return [], f"predict took longer than {PREDICT_SECONDS} s"
    if "error" in box:
        return [], box["error"]
    pus = (box["doc"].get("topology") or {}).get("usable_pus")
    mine = [v for v in box["doc"].get("verdicts", []) if v.get("question") == question
            and (not isinstance(pus, int) or v["threads"] < pus)]
    top = max((v["threads"] for v in mine), default=None)
    picked = [v for v in mine if v["threads"] == top]
    return picked, "" if picked else "predict gives no verdict of this question for this run"


def predicted_answer_html(run: Run, question: str) -> str:
    """The predicted answer of a question this machine cannot answer, labelled predicted."""
    esc = html.escape
    head = (f"<p><b>Predicted, not measured</b>, for a machine that can answer it: the 16-core "
            f"Xeon ({esc(os.path.relpath(PREDICT_TOPOLOGY, ROOT))}, the seed's "
            "machine class), by plots/predict.py from this run's rows")
    found, why = predicted_answer(run, question)
    if not found:
        return head + f": unavailable ({esc(why)}).</p>"
    return (head + ":</p><ul class=\"predicted\">"
            + "".join(f"<li>predicted: {esc(v['text'])}</li>" for v in found) + "</ul>")


def coherence_note(run: Run, families: Optional[Sequence[str]] = None) -> str:
    """One sentence counting the contended repetitions of `families` (all: None) by coherence label
    ("Contended repetitions: 34 near, 149 far ..."); "" when there are none."""
    by_label = grouped((p for p in run.points if p.aggregate is None and p.threads > 1 and (
        families is None or p.bench in families or p.family in families)),
        lambda p: p.coherence or "unknown")
    if not by_label:
        return ""

    def named(label):
        # A label ranks this run's regimes only: say its regime_name, else its median ns.
        rows = [p.row.get("coherence") for p in by_label[label] if isinstance(p.row, dict)]
        names = [c.get("regime_name") for c in rows if isinstance(c, dict)]
        names = [n for n in names if isinstance(n, str) and n]
        if names:
            return max(names, key=names.count)
        values = sorted(p.regime_ns for p in by_label[label] if p.regime_ns)
        return f"{label} ({stats.ns_text(values[len(values) // 2])} ns)" if values else label
    note = ("Contended repetitions (2+ threads) by coherence regime: " + ", ".join(
        f"{len(by_label[k])} {named(k)}" for k in sorted(by_label, key=stats.regime_rank)) + ".")
    if len([k for k in by_label if k not in stats.NO_REGIME]) > 1:
        note += (" A cache line moved between the point's PUs at different costs in different "
                 "repetitions (the host moved the vCPUs, or the machine was busy): means and "
                 "effects here use the repetitions of one regime per point; figures draw the "
                 "other regimes' repetitions as hollow markers.")
    return note


# The sections after the questions, in the table of contents: id and title.
TAIL_SECTIONS = (("false_sharing", "Cache-line distance"), ("other", "Other figures"),
                 ("machine", "Machine and provenance"), ("plans", "Placement"),
                 ("counters", "Counters"), ("warnings", "Warnings"), ("layouts", "Layouts"),
                 ("checks", "Checks of this report"))


def build_html(run: Run, images: Dict[str, str],
               verdicts: Optional[List[Dict[str, Any]]] = None) -> str:
    """The report as one HTML string; `images` maps figure stem -> PNG path; `verdicts` the
    verdicts.json records (computed when None)."""
    from verdicts import compute_verdicts
    if verdicts is None:
        verdicts = compute_verdicts(run)
    title = f"lockline report: {run.host}, {run.context.get('date', '?')}"
    body = _heading(run, title, verdicts)
    used: set = set()
    tables = seed_tables(run, verdicts)
    for question in QUESTIONS:
        body += question_section(run, question, images, verdicts, tables[question[0]], used)
    body += _false_sharing_section(run, images, used)
    body.append('<section id="other"><h2>Other figures</h2>')
    others = [s for s in images if s not in used]
    body.extend(_img(images[s], f"{s} figure") for s in others)
    if not others:
        body.append("<p>none</p>")
    body.append("</section>")
    body.extend(predicted_sections(os.path.abspath(run.path)))
    body += _machine_sections(run)
    csp = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
           "script-src 'unsafe-inline'")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            f"<title>{html.escape(title)}</title><style>{_CSS}</style>"
            f"<script>{_SCRIPT}</script></head>\n<body>\n" + "\n".join(body)
            + "\n</body></html>\n")


# A run is starved when the median row's windows got under STARVED_SHARE of a CPU per thread
# (cpu_util, results/SCHEMA.md) or over STARVED_OVERRUN of its rows overran (docs/report.md).
STARVED_SHARE = 0.8
STARVED_OVERRUN = 0.05


def starved_note(run: Run) -> str:
    """What the reader must know first: the starved run's CPU share, load, overrun rows and time
    against the estimate, and any re-planning (context.lockline.replanned); "" for neither."""
    ll = run.lockline
    rows = [p.row for p in run.points if p.aggregate is None and isinstance(p.row, dict)]
    shares = sorted(float(r["cpu_util"]) for r in rows
                    if isinstance(r.get("cpu_util"), (int, float)))
    over = sum(1 for r in rows if r.get("overrun") is True)
    parts = []
    median = shares[len(shares) // 2] if shares else 1.0
    if median < STARVED_SHARE or over > STARVED_OVERRUN * max(len(rows), 1):
        load = [f"{x[0] if isinstance(x, list) and x else x:.1f} at the {when}"
                for x, when in ((run.context.get("load_avg"), "start"),
                                (ll.get("load_avg_end"), "end"))
                if isinstance(x, (int, float)) or (isinstance(x, list) and x)]
        tenth = [shares[int(q * (len(shares) - 1))] for q in (0.1, 0.9)] if shares else [1, 1]
        parts.append(f"This run was starved: its windows got a median {median * 100:.0f} % of a "
                     f"CPU per thread (10th-90th percentile {tenth[0] * 100:.0f}-"
                     f"{tenth[1] * 100:.0f} % over {len(shares)} rows; a quiet machine gives "
                     "about 100 %), load average"
                     f" {' and '.join(load) or 'not recorded'}; {over} of {len(rows)} rows "
                     "overran their windows")
        times = _dict(ll.get("run_time"))
        if all(isinstance(times.get(k), (int, float)) for k in ("actual_s", "estimated_s")):
            parts[-1] += (f"; it ran {times['actual_s']:.0f} s against its estimate of "
                          f"{times['estimated_s']:.0f} s")
        parts[-1] += ". Its answers are those of a machine busy with other work."
    replanned = _dict(ll.get("replanned"))
    if replanned:
        dropped = [str(k) for k in replanned.get("dropped") or []]
        parts.append(f"The run was re-planned {replanned.get('at_s', 0):.0f} s in (elapsed "
                     f"{replanned.get('elapsed_s', 0):.0f} s against an estimate of "
                     f"{replanned.get('estimate_s', 0):.0f} s) and dropped {len(dropped)} "
                     "point(s)" + (": " + ", ".join(dropped) if dropped else "") + ".")
    return " ".join(parts)


def _heading(run: Run, title: str, verdicts: List[Dict[str, Any]]) -> List[str]:
    """The title, the run's caption and source, the table of contents, the run's coherence
    regimes, whether it finished, how many comparisons resolved, what "seed" figures are."""
    esc = html.escape
    ll = run.lockline
    body = [f"<h1>{esc(title)}</h1>", f'<p class="caption">{esc(run.caption())}</p>',
            f'<p class="caption">source: {esc(os.path.abspath(run.path))}; suite '
            f'{esc(str(ll.get("suite", "n/a")))}; finished {esc(str(ll.get("finished", "n/a")))}</p>']
    if starved := starved_note(run):
        body.append(f'<p class="warn" id="starved"><strong>{esc(starved)}</strong></p>')
    toc = [(qid, t) for qid, t, _, _ in QUESTIONS] + list(TAIL_SECTIONS)
    body.append("<ul>" + "".join(f'<li><a href="#{i}">{esc(t)}</a></li>' for i, t in toc)
                + "</ul>")
    body += _para("warn", coherence_note(run))
    if run.finished is False:
        body.append('<p class="warn">This run did not finish (context.lockline.finished is '
                    'false): it holds only the points measured before it stopped.</p>')
    if verdicts:
        resolved = sum(1 for v in verdicts if v["resolved"])
        unfit = sum(1 for v in verdicts if v["status"] == "not_answerable")
        body.append(f"<p>{resolved} of {len(verdicts)} comparisons resolved on this machine "
                    + (f"and {unfit} not answerable on it (their mechanism cannot occur "
                       "here) " if unfit else "") + "(verdicts.json).</p>")
    body.append('<p class="caption">"Seed discussion" figures are the numbers quoted in the '
                "public Linux memory-management threads each question comes from (see "
                "docs/experiments.md in the lockline repository): measured on other machines, "
                "decades apart; compare directions and ratios, not absolute values.</p>")
    return body


def question_section(run: Run, question: Tuple[str, str, str, List[str]],
                     images: Dict[str, str], verdicts: List[Dict[str, Any]],
                     table: List[List[Any]], used: set) -> List[str]:
    """One seed question's <section>: question, figures (stems added to `used`), verdict lines,
    seed table with its row notes, the real kernel's rows, question 5's tables, coherence note."""
    from verdicts import QUESTION_SECTION
    esc = html.escape
    qid, qtitle, text, stems = question
    mine = [v for v in verdicts if QUESTION_SECTION.get(v["question"], "") == qid]
    body = [f'<section id="{qid}"><h2>{esc(qtitle)}</h2><p class="q">{esc(text)}</p>',
            f'<p class="caption scale">Measured here on {esc(run.scale_text())}; the '
            "seed discussion's machine is not this one.</p>"]
    shown = [s for s in [f"verdicts_{qid}"] + stems if s in images]
    body += [_img(images[stem], f"{stem} figure") for stem in shown]
    used.update(shown)
    if not shown:
        body.append(f"<p>{NOT_RUN}: no {esc(', '.join(stems))} results in this run.</p>")
    body.append(verdict_html(mine, run))
    if any(v["status"] == "not_answerable" for v in mine if v["question"] == "003"):
        body.append(predicted_answer_html(run, "003"))
    qrows, absent = verdict_table_rows(table, bool(mine))
    body.append(_table(["quantity", "seed discussion", "measured here",
                        "comparable with the seed?"], qrows))
    if absent:
        body.append('<p class="caption">Not measured in this run, so not in the table: '
                    + esc("; ".join(absent)) + ".</p>")
    number = {v: k for k, v in QUESTION_SECTION.items()}[qid]
    body += _para("caption rows-note", rows_note(verdicts, number))
    body += _para("caption", unanswered_note(verdicts, number))
    body += _kernel_tables(run, qid)
    if qid == "q5":
        body += _prezero_tables(run)
    body += _para("warn", coherence_note(run, stems + KERNEL_FAMILIES.get(qid, [])))
    body.append("</section>")
    return body


def _kernel_tables(run: Run, qid: str) -> List[str]:
    """The real kernel's rows of a question (kernel_rows), [] when the run has none."""
    if not (krows := kernel_rows(run, KERNEL_FAMILIES.get(qid, []))):
        return []
    body = ["<h3>The real kernel, measured the same way</h3>"]
    batch = _dict(_dict(run.lockline.get("kernel_config")).get("folio_batch_size")).get("value")
    if qid in ("q1", "q4"):
        body.append('<p class="caption">The same kernel_lru rows under questions 1 '
                    "and 4: this kernel's batch is fixed"
                    + (f" (folio_batch of {html.escape(str(batch))} slots)" if batch else "")
                    + ", so they show the real LRU path's cost at this batch, not a "
                    "batch-size comparison.</p>")
    body.append(_table(["row", "threads", "throughput", "lock:contention_begin per op",
                        "attribution", "sources"], krows))
    return body


def _prezero_tables(run: Run) -> List[str]:
    """Question 5's pre-zeroing tables (bursts against the pool, steady state) and its faults
    in the 2004 table's columns, each only when the run has such rows."""
    body = []
    if burst := prezero_burst_rows(run):
        body += ["<h3>Pre-zeroing with bursts: burst B against pool P</h3>",
                 _table(["protocol", "zeroer", "mode", "burst B (pages)", "pool P (pages)",
                         "B/P", "threads", "rate (faults/s)", "pre-zeroed share"], burst)]
    if steady := prezero_steady_rows(run):
        body += ["<h3>Pre-zeroing in steady state: allocations that write every line</h3>",
                 _table(["mode", "method", "idle (us)", "threads", "rate (faults/s)",
                         "pre-zeroed share", "touches"], steady)]
    if frows := fault_seed_rows(run):
        body.append("<h3>Faults in the 2004 table's columns</h3>")
        body.append('<p class="caption">The 2004 table\'s own wall-second column is '
                    "inconsistent with its faults/wall-s column by about 10x (1 GB = "
                    "262144 faults at 90849 faults/wall-s is 2.9 s, not the 0.29 s "
                    "implied); compare rates, not its wall seconds.</p>")
        body.append(_table(FAULT_SEED_COLUMNS, frows))
    return body


def _false_sharing_section(run: Run, images: Dict[str, str], used: set) -> List[str]:
    """The cache-line distance section (families.false_sharing_verdicts and its figure), []
    when the run has neither."""
    from families import false_sharing_verdicts
    fs_rows = false_sharing_verdicts(p for p in run.points)
    if not fs_rows and "false_sharing" not in images:
        return []
    body = ['<section id="false_sharing"><h2>Cache-line distance: how far apart must '
            'two threads\' counters be?</h2>',
            '<p class="q">Two pinned threads increment their own counters 0-256 bytes '
            "apart on a PU pair of each sharing class (64 vs 128 byte padding: Intel's "
            "adjacent-line prefetcher pairs lines; POWER and some Arm cores have "
            "128-byte lines). Effects are ns/op against the farthest distance, with "
            "95 % intervals from one coherence regime.</p>"]
    if "false_sharing" in images:
        body.append(_img(images["false_sharing"], "false_sharing figure"))
        used.add("false_sharing")
    body.append(_table(["PU pair", "op", "smallest distance with no slowdown",
                        "ns/op effect against the farthest distance"],
                       [[r["pair"], r["op"], r["smallest"], r["effects"]] for r in fs_rows]))
    body.append("</section>")
    return body


def _machine_sections(run: Run) -> List[str]:
    """The machine and provenance, placement plans, counters, warnings and layouts
    sections, from context.lockline."""
    ll = run.lockline
    machine = {k: v for k, v in run.context.items() if k != "lockline"}
    prov = {k: v for k, v in ll.items() if k not in ("plans", "counters", "warnings", "layouts",
                                                     "topology", "environment", "versions",
                                                     "skipped_points")}
    body = ['<section id="machine"><h2>Machine and provenance</h2>',
            "<h3>Google Benchmark context</h3>" + _kv_table(machine)]
    if prov:
        body.append("<h3>lockline</h3>" + _kv_table(prov))
    body += [f"<h3>{key}</h3>" + _kv_table(ll[key])
             for key in ("topology", "environment", "versions") if isinstance(ll.get(key), dict)]
    body.append("</section>")
    plans = ll.get("plans")
    body += ['<section id="plans"><h2>Placement plans</h2>',
             _plans_table(plans) if isinstance(plans, dict) and plans else
             "<p>no placement plans recorded (not a lockline run?)</p>", "</section>"]
    body += ['<section id="counters"><h2>Counters availability</h2>',
             _counters(ll.get("counters"))]
    if derived := derived_counter_rows(run):
        body += ["<h3>Derived counters</h3>",
                 _table(["row", "threads"] + list(DERIVED_COUNTERS), derived)]
    body.append("</section>")
    warnings = warning_lines(run)
    body += ['<section id="warnings"><h2>Warnings</h2>',
             "<ul>" + "".join(f'<li class="warn">{html.escape(w)}</li>' for w in warnings)
             + "</ul>" if warnings else "<p>none</p>", "</section>"]
    layouts = ll.get("layouts")
    body += ['<section id="layouts"><h2>Layouts</h2>',
             _layouts(layouts) if isinstance(layouts, dict) and layouts else
             "<p>no layouts recorded</p>", "</section>"]
    return body


def warning_lines(run: Run) -> List[str]:
    """The run's warnings: context.lockline.warnings, skipped points, failed rows, a fake PMU,
    and every point with an overrun window (its repetitions are dropped from comparisons)."""
    ll = run.lockline
    warnings = ([str(w) for w in ll.get("warnings", []) if w]
                if isinstance(ll.get("warnings"), list) else [])
    skipped_points = ll.get("skipped_points")
    if isinstance(skipped_points, list):
        warnings += [f"skipped point: {s}" for s in skipped_points]
    warnings += [f"failed row: {r}" for r in run.skipped_rows]
    warnings += [w for w in run.warnings if "FAKE PMU" in w]
    return warnings + [f"overrun window: {key} (its repetitions are dropped from comparisons)"
                       for key in run.overrun_keys()]


def write_verdict_figures(run: Run, verdicts: List[Dict[str, Any]], plot_dir: str,
                          problems: List[str]) -> Dict[str, str]:
    """plot_dir/verdicts_qN.png per question with verdicts and plot_dir/verdicts.csv (what each
    panel draws); readability problems go to `problems`. Returns {stem: path}."""
    from figures import plt, verdict_figure, write_csv
    from outputs import write_atomic
    from report_checks import figure_problems
    from verdicts import QUESTION_SECTION
    out, rows = {}, []
    for qid, qtitle, _, _ in QUESTIONS:
        mine = [v for v in verdicts if QUESTION_SECTION.get(v.get("question")) == qid]
        fig, drawn = verdict_figure(run, mine, f"{qtitle.split('(')[0].strip()}: each "
                                    "verdict's own samples (one coherence regime per panel)")
        if fig is None:
            continue
        problems += figure_problems(fig, f"verdicts_{qid}")
        path = os.path.join(plot_dir, f"verdicts_{qid}.png")
        write_atomic(path, lambda handle, fig=fig: fig.savefig(handle, format="png", dpi=110))
        plt.close(fig)
        out[f"verdicts_{qid}"] = path
        rows += [{"figure": f"verdicts_{qid}", "id": cid, **d} for cid, d in drawn.items()]
    if rows:
        write_csv(os.path.join(plot_dir, "verdicts.csv"), rows)
    return out


def checks_html(problems: List[str]) -> str:
    """The report's own checks (report_checks) as its last section."""
    items = "".join(f'<li class="warn">{html.escape(p)}</li>' for p in problems)
    return ('<section id="checks"><h2>Checks of this report</h2><p>The figures were measured '
            "for clipped and overlapping text and crowded panels, and the page was read "
            "against verdicts.json (verdict lines, tables, relative plots, verdict figures): "
            + (f"{len(problems)} problems.</p><ul>{items}</ul>" if problems else
               "no problem found.</p>") + "</section>")


def write_report(run_dir: str, out: Optional[str] = None,
                 notes: Optional[List[str]] = None) -> Tuple[str, List[str]]:
    """Plot run_dir into run_dir/plots, write verdicts.json and the report (a symlinked plots/ is
    refused), check them (report_checks); return the report's path and problems; `notes` gets
    the starved_note. Raises ResultError for bad input."""
    import families
    from outputs import write_atomic
    from plot import plot_runs
    from report_checks import all_problems, read_run_dir
    from verdicts import write_verdicts

    if not os.path.isdir(run_dir):
        raise ResultError(f"{run_dir}: not a directory (expected a lockline run directory)")
    run = load_runs([run_dir])[0]
    if notes is not None and starved_note(run):
        notes.append(starved_note(run))
    plot_dir = os.path.join(run_dir, "plots")
    problems: List[str] = []
    families.FIGURE_PROBLEMS = problems
    try:
        written = plot_runs([run], plot_dir, formats=("png", "svg"))
    finally:
        families.FIGURE_PROBLEMS = None
    images = {os.path.splitext(os.path.basename(p))[0]: p for p in written if p.endswith(".png")}
    _, doc = write_verdicts(run_dir, run)
    images.update(write_verdict_figures(run, doc["verdicts"], plot_dir, problems))
    out = out or os.path.join(run_dir, "report.html")
    page = build_html(run, images, doc["verdicts"])
    problems += all_problems(page, doc["verdicts"], read_run_dir(run_dir, page)[2])
    write_atomic(out, page.replace("</body>", checks_html(problems) + "\n</body>"))
    return out, problems


def main(argv: Optional[Sequence[str]] = None) -> int:
    """CLI entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description="Write RUN_DIR/report.html for a lockline run.")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory holding lockline.json")
    parser.add_argument("-o", "--out", metavar="FILE", help="report path (default RUN_DIR/report.html)")
    args = parser.parse_args(argv)
    notes: List[str] = []
    try:
        path, problems = write_report(args.run_dir, args.out, notes)
    except (ResultError, OSError) as err:
        return error_status("report.py", err, "the report")
    print(path)
    for note in notes:
        print(f"report.py: {note}")
    print(f"report.py: checks: {len(problems) or 'no'} problem{'s' if len(problems) != 1 else ''}"
          " in the figures and the page" + "".join(f"\n  {p}" for p in problems))
    return 0


if __name__ == "__main__":
    sys.exit(main())
