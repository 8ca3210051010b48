"""The report's "Predicted for TOPOLOGY" sections from RUN_DIR/predicted-*/, every number labelled
predicted; an unreadable predicted.json gives a one-line section."""

from __future__ import annotations

import base64
import glob
import html
import json
import os
from typing import Any, List

# Most variants listed in one section's table (the figure shows all).
MAX_ROWS = 60


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        if x == 0:
            return "0"
        if abs(x) >= 1e6:
            return f"{x / 1e6:.3g} M"
        if abs(x) >= 1e3:
            return f"{x / 1e3:.3g} k"
        return f"{x:.3g}"
    return str(x)


def _img(path: str, alt: str) -> str:
    """A PNG file as an <img> with a data URI (the report loads nothing from the network)."""
    with open(path, "rb") as handle:
        data = base64.b64encode(handle.read()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def _table(header: List[str], rows: List[List[Any]]) -> str:
    esc = html.escape
    out = ["<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{esc(_fmt(c))}</td>" for c in r) + "</tr>")
    return "".join(out) + "</table>"


def _counts(counts: Any) -> str:
    return ", ".join(str(c) for c in counts) if isinstance(counts, list) and counts else "1"


def _section(path: str) -> str:
    esc = html.escape
    try:
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
        assert isinstance(doc, dict) and isinstance(doc.get("variants"), list)
    except (OSError, ValueError, AssertionError):
        return (f'<section class="predicted"><h2>Predicted (unreadable)</h2><p class="warn">'
                f"{esc(path)}: not a predicted.json of plots/predict.py</p></section>")
    d = os.path.dirname(path)
    title = str(doc.get("title") or os.path.basename(d))
    topo = doc.get("topology") or {}
    counts = [c for c in topo.get("threads_list") or [] if isinstance(c, int)]
    parts = [f'<section class="predicted" id="{esc(os.path.basename(d))}">',
             f"<h2>Predicted for {esc(title)}</h2>",
             '<p class="q">Every number in this section is PREDICTED by a queueing model from '
             f"this run's rows at {esc(_counts(doc.get('fit_threads')))} threads and "
             "core-to-core latencies, not measured on the target. "
             f"{esc(str(doc.get('model', '')))}.</p>"]
    note = doc.get("latencies_assumed_note")
    if note:
        parts.append(f'<p class="warn">{esc(str(note))}</p>')
    if doc.get("emulated_input"):
        parts.append('<p class="warn">The input run was made in an EMULATOR: its timings are '
                     "not a machine's.</p>")
    sims = doc.get("simplifications") or []
    if sims:
        parts.append("<p class=\"caption\">Simplifications: " +
                     esc("; ".join(str(s) for s in sims)) + "</p>")
    lat = doc.get("latencies_ns") or {}
    parts.append("<h3>Target transfer costs (one-way ns per distance class)</h3>")
    parts.append(_table(["class", "ns", "source", "from"],
                        [[c, float(v.get("ns", 0)), v.get("source", ""), v.get("why", "")]
                         for c, v in lat.items() if isinstance(v, dict)]))
    verdicts = [v for v in doc.get("verdicts") or [] if isinstance(v, dict)]
    if verdicts:
        parts.append("<h3>Predicted seed verdicts at the target's thread counts</h3><ul>")
        parts.extend(f"<li>{esc(str(v.get('text', '')))}</li>" for v in verdicts
                     if v.get("predicted", True) is not False)
        parts.extend(f"<li class=\"caption\">{esc(str(v.get('text', '')))}</li>"
                     for v in verdicts if v.get("predicted", True) is False)
        parts.append("</ul>")
    for name in doc.get("figures") or []:
        fig = os.path.join(d, os.path.basename(str(name)))
        if os.path.isfile(fig) and not os.path.islink(fig):
            parts.append(_img(fig, f"{name} (predicted)"))
    shown = counts[-3:] if counts else []
    header = (["variant", "lock", "1-thread ns/op", "hold ns", "acq/op", "think ns/acq"]
              + [f"predicted ops/s at {n} [95 %]" for n in shown])
    rows = []
    for v in doc["variants"][:MAX_ROWS]:
        inp = v.get("inputs") or {}
        curve = {r.get("threads"): r for r in v.get("curve") or []}
        row = [v.get("key", ""), v.get("lock", ""), inp.get("ns_per_op_1thread"),
               inp.get("hold_ns"), inp.get("acquisitions_per_op"),
               inp.get("think_ns_per_acquisition")]
        rows.append(row + [f"{_fmt(r['ops_per_s'])} [{_fmt(r['lo'])}, {_fmt(r['hi'])}]"
                           if (r := curve.get(n)) else "-" for n in shown])
    parts += ["<h3>Inputs (measured here) and predicted throughput</h3>", _table(header, rows)]
    if len(doc["variants"]) > MAX_ROWS:
        parts.append(f"<p class=\"caption\">{len(doc['variants']) - MAX_ROWS} more variants "
                     f"in {esc(path)}</p>")
    skipped = doc.get("skipped") or []
    if skipped:
        parts.append("<p class=\"caption\">Not predicted: " +
                     esc("; ".join(str(s) for s in skipped)) + "</p>")
    parts.append("</section>")
    return "\n".join(parts)


def predicted_sections(run_dir: str) -> List[str]:
    """One HTML <section> per RUN_DIR/predicted-*/predicted.json, by directory name."""
    if os.path.isfile(run_dir):
        run_dir = os.path.dirname(run_dir)
    paths = sorted(glob.glob(os.path.join(glob.escape(run_dir), "predicted-*", "predicted.json")))
    return [_section(p) for p in paths]
