"""The checks report.py runs on every report it writes (and the tests on recorded runs), each
problem one sentence: figure_problems (text outside the canvas or overlapping, over MAX_SERIES
series, repeated legend labels; Agg renderer), page_problems (the page agrees with
verdicts.json: texts, intervals, relative plots, verdict figures, "before -> after" cells) and
class_problems (arrows across regimes, a question without its verdict figure, vacuous
cache-line answers, 'not run' verdicts, verdict lines without their machine or comparability)."""

import csv
import glob
import html as _html
import html.parser
import json
import math
import os
import re
from typing import Dict, List, Tuple

INTERVAL = re.compile(r"[+-]\d[\d.]* %, [+-]?\d[\d.]* %\]")
NUMBER = re.compile(r"-?\d[\d,]*\.?\d*(?:e[+-]?\d+)?")

from figures import MAX_SERIES  # noqa: E402
from lockline_results import grouped  # noqa: E402


def _panel_series(ax) -> list:
    """Labels of the data series drawn in `ax`, without helper entries (ideal/USL lines,
    regime and overrun markers, fits, intervals)."""
    helpers = ("ideal", "USL", "other coherence regime", "other regime", "overrun window",
               "fit", "seed", "interval", "effect", "model", "4·lg", "2^(")
    _, labels = ax.get_legend_handles_labels()
    return [lab for lab in labels if not any(lab.startswith(h) or h in lab for h in helpers)]


def _repeats(texts: List[str]) -> List[str]:
    return sorted({t for t in texts if texts.count(t) > 1})


def figure_problems(fig, name: str = "") -> list:
    """Readability problems of a drawn figure, from the Agg renderer's text extents (display
    pixels), one sentence each ([] = readable)."""
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
        if box.x0 < -1 or box.y0 < -1 or box.x1 > width + 1 or box.y1 > height + 1:
            problems.append(f"{name}: text outside the canvas: {label!r}")
        boxes.append((box, label))
    for i, (a, la) in enumerate(boxes):
        for b, lb in boxes[i + 1:]:
            # A pixel of touching is rounding, not overlap.
            if min(a.x1, b.x1) - max(a.x0, b.x0) > 1.5 and min(a.y1, b.y1) - max(a.y0, b.y0) > 1.5:
                problems.append(f"{name}: text boxes overlap: {la!r} and {lb!r}")
    for k, ax in enumerate(fig.axes):
        series = _panel_series(ax)
        title = ax.get_title() or f"panel {k + 1}"
        if len(series) > MAX_SERIES:
            problems.append(f"{name}: {len(series)} series in panel {title!r} (> {MAX_SERIES})")
        legend = ax.get_legend()
        dup = _repeats([t.get_text() for t in legend.get_texts()]) if legend else []
        if dup:
            problems.append(f"{name}: legend of panel {title!r} repeats {dup}")
    problems += [f"{name}: figure legend repeats {dup}" for legend in fig.legends
                 if (dup := _repeats([t.get_text() for t in legend.get_texts()]))]
    return problems


class _Report(html.parser.HTMLParser):
    """Collects data-comparison spans (id, text, section, in a table), table rows per section
    (cells: text, mark, data-sides id) and the verdict lines' ids per section."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.section = ""
        self.spans = []
        self.rows = []
        self._span = None
        self._cell = None
        self._row = None
        self._table = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.section = a.get("id", "")
        elif tag == "table":
            self._table += 1
        elif tag == "tr":
            self._row = []
        elif tag == "td":
            self._cell = ["", None, None]
        elif tag == "span" and {"data-comparison", "data-rows", "data-sides"} & set(a):
            self._span = ["", a.get("data-comparison")]
            if self._cell is not None:
                self._cell[1] = ("comparison" if "data-comparison" in a else
                                 "sides" if "data-sides" in a else "rows")
                self._cell[2] = a.get("data-sides")

    def handle_endtag(self, tag):
        if tag == "span" and self._span is not None:
            if self._span[1] is not None:
                self.spans.append((self._span[1], self._span[0], self.section, self._table > 0))
            self._span = None
        elif tag == "td" and self._cell is not None:
            self._row.append(tuple(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row:
                self.rows.append((self.section, self._row))
            self._row = None
        elif tag == "table":
            self._table -= 1

    def handle_data(self, data):
        if self._span is not None:
            self._span[0] += data
        if self._cell is not None:
            self._cell[0] += data


def read_run_dir(run_dir: str, text: str = "") -> Tuple[str, List[dict], List[dict]]:
    """(report.html text (`text` when given), verdicts.json records, every plots/*.csv row
    but the USL fits')."""
    if not text:
        with open(os.path.join(run_dir, "report.html"), encoding="utf-8") as handle:
            text = handle.read()
    with open(os.path.join(run_dir, "verdicts.json"), encoding="utf-8") as handle:
        verdicts = json.load(handle)["verdicts"]
    rows = []
    for path in sorted(glob.glob(os.path.join(run_dir, "plots", "*.csv"))):
        if not path.endswith("_usl.csv"):
            with open(path, newline="", encoding="utf-8") as handle:
                rows += list(csv.DictReader(handle))
    return text, verdicts, rows


def _close(a: float, b: float, rel: float = 1e-9) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def page_problems(text: str, verdict_list: List[dict], csv_rows: List[dict]) -> List[str]:
    """Checks 1-6 of the module docstring on a rendered report ([] = consistent)."""
    from verdicts import QUESTION_SECTION
    verdicts = {v["id"]: v for v in verdict_list}
    parser = _Report()
    parser.feed(text)
    problems = []
    seen: Dict[str, list] = {}
    for cid, span, section, in_table in parser.spans:
        seen.setdefault(cid, []).append((section, in_table))
        v = verdicts.get(cid)
        if v is None:
            if not span.startswith("not run"):
                problems.append(f"{cid}: no verdict, but rendered as {span!r}")
        elif span != v["text"]:
            problems.append(f"{cid}: rendered {span!r}, verdicts.json says {v['text']!r}")
    for cid, v in verdicts.items():
        section = QUESTION_SECTION.get(v["question"])
        where = [t for s, t in seen.get(cid, []) if s == section]
        if False not in where:
            problems.append(f"{cid}: no verdict line in section {section}")
        if True not in where:
            problems.append(f"{cid}: not in section {section}'s table")
    for section, cells in parser.rows:
        for cell, mark, _ in cells:
            if INTERVAL.search(cell) and mark is None and section.startswith("q"):
                problems.append(f"{section}: unlabelled interval in a table cell: {cell!r}")
    problems += _sides_problems(parser.rows, verdicts)
    problems += _plot_problems(csv_rows, verdicts)
    return problems


def _sides_problems(rows, verdicts: Dict[str, dict]) -> List[str]:
    """Check 6: a table row about a verdict's two rows shows the verdict's numbers."""
    problems = []
    keys = {(v["base_key"], v["variant_key"]): v for v in verdicts.values()}
    for section, cells in rows:
        label = cells[0][0] if cells else ""
        for col, (cell, mark, cid) in enumerate(cells):
            if mark == "sides":
                v = verdicts.get(cid)
                nums = [float(n.replace(",", "")) for n in NUMBER.findall(cell.split(":")[0])]
                if v is None or v["effect"] is None or len(nums) < 2 or not nums[0]:
                    problems.append(f"{section}: sides cell {cell!r} without its verdict")
                    continue
                ratio = nums[1] / nums[0] if v.get("ns_saved") is None else nums[0] / nums[1]
                if not _close(ratio, 1 + v["effect"], 0.012):
                    problems.append(f"{section}: {cell!r} is {ratio - 1:+.3f}, its verdict "
                                    f"{cid} {v['effect']:+.3f}")
                saved = (v.get("ns_saved") or {}).get("ns")
                if saved is not None and f"{saved:.1f} ns saved" not in cell:
                    problems.append(f"{section}: {cell!r} does not say {cid}'s "
                                    f"{saved:.1f} ns saved")
            elif col == 2 and mark is None and " -> " in cell and any(b in label and a in label for b, a in keys):
                problems.append(f"{section}: {label!r} computes its own numbers beside its "
                                f"verdict: {cell[:80]!r}")
    return problems


def _plot_problems(csv_rows: List[dict], verdicts: Dict[str, dict]) -> List[str]:
    """Checks 3-5 on the plots' CSV rows."""
    problems = []
    for v in verdicts.values():
        if v["effect"] is None:
            continue
        for r in csv_rows:
            if r.get("base_key") == v["base_key"] and r.get("variant_key") == v["variant_key"] \
                    and r.get("y_name", "").startswith(v["metric"] + "/"):
                if not _close(float(r["y"]), 1 + v["effect"]):
                    problems.append(f"{v['id']}: relative plot draws {r['y']}, verdict "
                                    f"effect {v['effect']}")
                if v["ci"] and r.get("ci_lo") and not _close(float(r["ci_lo"]), 1 + v["ci"][0]):
                    problems.append(f"{v['id']}: relative plot interval differs from the "
                                    "verdict's")
        drawn = [r for r in csv_rows if r.get("figure", "").startswith("verdicts_q")
                 and r.get("id") == v["id"]]
        if not drawn:
            problems.append(f"{v['id']}: no verdict figure draws it")
        for r in drawn:
            if not r.get("effect") or not _close(float(r["effect"]), v["effect"]):
                problems.append(f"{v['id']}: its figure draws {r.get('effect')!r}, the verdict "
                                f"says {v['effect']}")
    panels = grouped((r for r in csv_rows if r.get("params")),
                     lambda r: (r["figure"], r["panel"], r["run"]))
    for (figure, panel, _), rows in panels.items():
        params = [json.loads(r["params"]) for r in rows]
        named = {tok.split(":", 1)[0] for r in rows for tok in r["series"].split() if ":" in tok}
        x_names = {r["x_name"] for r in rows}
        for k in {k for p in params for k in p}:
            # A key some series lack (layout rows have no slots) is another parametrisation,
            # not a mixed one; a key with two values is a mix unless a label names it.
            if len({p[k] for p in params if k in p}) > 1 and k not in named | x_names:
                problems.append(f"figure {figure}, panel {panel!r}: series differ in {k} "
                                f"({sorted({str(p.get(k)) for p in params})}) but no label "
                                "names it")
    return problems


REPS = re.compile(r"\((\d+) ([\w]+)-regime reps")
TABLE = re.compile(r"<table>(.*?)</table>", re.S)
ROW = re.compile(r"<tr>(.*?)</tr>", re.S)
CELL = re.compile(r"<t[dh][^>]*>(.*?)</t[dh]>", re.S)


def _plain(fragment: str) -> str:
    return _html.unescape(re.sub(r"<[^>]+>", "", fragment))


def class_problems(text: str, verdicts: List[dict]) -> Dict[int, List[str]]:
    """{class: [problems]} of a rendered report (all empty: the page agrees): 1 an 'A -> B' cell or
    a pre-zeroing column across regimes; 2 a question's verdicts without their figure; 5 a vacuous
    cache-line answer; 6 'not run' among verdicts; 7 a verdict line or question without its
    machine; 8 a seed figure without a comparability cell."""
    from verdicts import QUESTION_SECTION
    sections = dict(re.findall(r'<section id="([^"]+)">(.*?)</section>', text, re.S))
    problems: Dict[int, List[str]] = {k: [] for k in (1, 2, 5, 6, 7, 8)}
    answered = {QUESTION_SECTION.get(v["question"]) for v in verdicts}
    for sid, body in sections.items():
        for table in TABLE.findall(body):
            rows = [[_plain(c) for c in CELL.findall(r)] for r in ROW.findall(table)]
            header = rows[0] if rows else []
            for row in rows[1:]:
                for cell in row:
                    regimes = {m.group(2) for m in REPS.finditer(cell)}
                    if " -> " in cell and len(regimes) > 1:
                        problems[1].append(f"{sid}: arrow across regimes {sorted(regimes)}: "
                                           f"{cell[:120]!r}")
                if sid in answered and header[:1] == ["quantity"] and len(row) > 2 \
                        and row[2].startswith("not run"):
                    problems[6].append(f"{sid}: 'not run' row among verdicts: {row[0]!r}")
                if header[:2] == ["quantity", "seed discussion"] and len(row) >= 2 \
                        and row[1].strip() not in ("", "-") \
                        and (len(row) < 4 or row[3].strip() in ("", "-")):
                    problems[8].append(f"{sid}: seed figure without a comparability cell: "
                                       f"{row[0]!r}")
            if header[:2] in (["protocol", "zeroer"], ["mode", "method"]):
                for col, name in enumerate(header):
                    regimes = {m.group(2) for row in rows[1:] if col < len(row)
                               for m in REPS.finditer(row[col])}
                    if len(regimes) > 1:
                        problems[1].append(f"{sid}: column {name!r} mixes regimes "
                                           f"{sorted(regimes)}")
        if sid in answered:
            if f'alt="verdicts_{sid} figure"' not in body:
                problems[2].append(f"{sid}: no figure of its verdicts' rows")
            for li in re.findall(r"<li[^>]*>(.*?)</li>", body, re.S):
                if "data-comparison" in li and "measured with" not in li:
                    problems[7].append(f"{sid}: verdict line without its machine: "
                                       f"{_plain(li)[:80]!r}")
        if sid.startswith("q") and "Measured here on" not in body:
            problems[7].append(f"{sid}: no scale line")
    for table in TABLE.findall(sections.get("false_sharing", "")):
        for row in ROW.findall(table)[1:]:
            cells = [_plain(c) for c in CELL.findall(row)]
            if len(cells) < 4:
                continue
            dists = [int(d) for d in re.findall(r"(\d+) B:", cells[3])]
            m = re.search(r"no slowdown of [\d.]+ % or more (?:from \d+ B )?down to (\d+) B",
                          cells[2])
            if m and dists and int(m.group(1)) >= max(dists) and int(m.group(1)) not in dists:
                problems[5].append(f"false_sharing: 'no slowdown down to {m.group(1)} B' is "
                                   f"the farthest distance itself: {cells[2][:100]!r}")
    return problems


def all_problems(text: str, verdicts: List[dict], csv_rows: List[dict]) -> List[str]:
    """page_problems and every class_problems entry, one list."""
    return page_problems(text, verdicts, csv_rows) + [
        p for found in class_problems(text, verdicts).values() for p in found]
