"""The report consistency check of issue 25, shared by test_consistency.py: render a run's
report and check, by parsing report.html, verdicts.json and the plots' CSV files, that

1. every rendering of a comparison (data-comparison=ID: verdict lines and table cells) carries
   exactly its verdicts.json entry's text, and each verdict appears as a verdict line and in
   its section's table;
2. every "not run" about a comparison has no verdict (and no table cell states an effect
   interval unless it renders a verdict or names its own rows: data-rows);
3. every relative plot point of a verdict's rows is that verdict's effect and interval (+1);
4. every figure panel's series come from rows that differ only in the parameters the series
   labels name (or the x axis).

check_run(run_dir) returns a list of problems (empty = consistent).
"""

import csv
import glob
import html.parser
import json
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PLOTS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "plots")
if PLOTS not in sys.path:
    sys.path.insert(0, PLOTS)

INTERVAL = re.compile(r"[+-]\d[\d.]* %, [+-]?\d[\d.]* %\]")


class _Report(html.parser.HTMLParser):
    """Collects data-comparison spans (id, text, section), table rows per section (cells:
    text, marks) and the verdict lines' ids per section."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.section = ""
        self.spans = []          # (id, text, section, in_table)
        self.rows = []           # (section, [(text, mark)])
        self._span = None
        self._cell = None
        self._row = None
        self._table = 0
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.section = a.get("id", "")
        elif tag == "table":
            self._table += 1
        elif tag == "tr":
            self._row = []
        elif tag == "td":
            self._cell = ["", None]
        elif tag == "span" and ("data-comparison" in a or "data-rows" in a):
            self._span = ["", a.get("data-comparison"), a.get("data-rows")]
            if self._cell is not None:
                self._cell[1] = "comparison" if "data-comparison" in a else "rows"

    def handle_endtag(self, tag):
        if tag == "span" and self._span is not None:
            text, cid, _ = self._span
            if cid is not None:
                self.spans.append((cid, text, self.section, self._table > 0))
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


def render(run_dir):
    """Write plots, verdicts.json and report.html into run_dir (report.write_report)."""
    import report
    return report.write_report(run_dir)


def check_run(run_dir, render_first=True):
    """The problems found in run_dir's report (see the module docstring)."""
    from verdicts import QUESTION_SECTION
    if render_first:
        render(run_dir)
    problems = []
    with open(os.path.join(run_dir, "verdicts.json"), encoding="utf-8") as handle:
        verdicts = {v["id"]: v for v in json.load(handle)["verdicts"]}
    parser = _Report()
    with open(os.path.join(run_dir, "report.html"), encoding="utf-8") as handle:
        parser.feed(handle.read())
    # 1. every rendering is the verdict's text; each verdict is a line and a table cell.
    seen = {}
    for cid, text, section, in_table in parser.spans:
        seen.setdefault(cid, []).append((text, section, in_table))
        v = verdicts.get(cid)
        if v is None:
            if not text.startswith("not run"):
                problems.append(f"{cid}: no verdict, but rendered as {text!r}")
        elif text != v["text"]:
            problems.append(f"{cid}: rendered {text!r}, verdicts.json says {v['text']!r}")
    for cid, v in verdicts.items():
        where = seen.get(cid, [])
        section = QUESTION_SECTION.get(v["question"])
        if not any(not t for _, s, t in where if s == section):
            problems.append(f"{cid}: no verdict line in section {section}")
        if not any(t for _, s, t in where if s == section):
            problems.append(f"{cid}: not in section {section}'s table")
    # 2. no table cell gives an interval it does not take from a verdict or label with rows;
    # a "not run" cell of a comparison is one without a verdict (checked above).
    for section, cells in parser.rows:
        for text, mark in cells:
            if INTERVAL.search(text) and mark is None and section.startswith("q"):
                problems.append(f"{section}: unlabelled interval in a table cell: {text!r}")
    # 3. relative plots draw the verdict's effect.
    csv_rows = []
    for path in glob.glob(os.path.join(run_dir, "plots", "*.csv")):
        if path.endswith("_usl.csv"):
            continue
        with open(path, newline="", encoding="utf-8") as handle:
            csv_rows += list(csv.DictReader(handle))
    for v in verdicts.values():
        if v["effect"] is None:
            continue
        drawn = [r for r in csv_rows if r.get("base_key") == v["base_key"]
                 and r.get("variant_key") == v["variant_key"]
                 and r.get("y_name", "").startswith(v["metric"] + "/")]
        for r in drawn:
            if not math.isclose(float(r["y"]), 1 + v["effect"], rel_tol=1e-9):
                problems.append(f"{v['id']}: relative plot draws {r['y']}, verdict effect "
                                f"{v['effect']}")
            if v["ci"] and r.get("ci_lo") and not math.isclose(
                    float(r["ci_lo"]), 1 + v["ci"][0], rel_tol=1e-9):
                problems.append(f"{v['id']}: relative plot interval differs from the verdict's")
    # 4. series in one panel differ only in what their labels name (or the x axis).
    panels = {}
    for r in csv_rows:
        if r.get("params"):
            panels.setdefault((r["figure"], r["panel"], r["run"]), []).append(r)
    for (figure, panel, _), rows in panels.items():
        params = [json.loads(r["params"]) for r in rows]
        keys = {k for p in params for k in p}
        named = {tok.split(":", 1)[0] for r in rows for tok in r["series"].split()
                 if ":" in tok}
        x_names = {r["x_name"] for r in rows}
        for k in keys:
            # A key some series lack (layout rows have no slots) is another parametrisation,
            # not a mixed one; a key with two values is a mix unless a label names it.
            if len({p[k] for p in params if k in p}) > 1 and k not in named \
                    and k not in x_names:
                problems.append(f"figure {figure}, panel {panel!r}: series differ in {k} "
                                f"({sorted({str(p.get(k)) for p in params})}) but no label "
                                "names it")
    return problems


# ---- issue 35: the page around the verdicts agrees with them --------------------------------

REPS = re.compile(r"\((\d+) ([\w]+)-regime reps")
TABLE = re.compile(r"<table>(.*?)</table>", re.S)
ROW = re.compile(r"<tr>(.*?)</tr>", re.S)
CELL = re.compile(r"<t[dh][^>]*>(.*?)</t[dh]>", re.S)


def _plain(fragment):
    import html as _html
    return _html.unescape(re.sub(r"<[^>]+>", "", fragment))


def _sections(text):
    out = {}
    for m in re.finditer(r'<section id="([^"]+)">(.*?)</section>', text, re.S):
        out[m.group(1)] = m.group(2)
    return out


def check_classes(run_dir):
    """Issue 35's classes on a rendered report (report.html, verdicts.json): returns
    {class number: [problems]} (every list empty = the report agrees with its rows).

    1 no arrow across regimes: an 'A -> B' cell's two numbers name one regime; the
      pre-zeroing tables' rows (read against each other) name one regime per column.
    2 each question with verdicts shows the figure of its verdicts' rows (verdicts_qN).
    3/4 figures: checked by test_figures.py (figure_problems).
    5 the cache-line cell never says 'no slowdown ... down to' the farthest distance itself.
    6 no 'not run' row in a table of a question with verdicts.
    7 every verdict line says the machine it was measured on; every question says its scale.
    8 every seed figure beside a measured value has a comparability cell.
    """
    from verdicts import QUESTION_SECTION
    with open(os.path.join(run_dir, "report.html"), encoding="utf-8") as handle:
        text = handle.read()
    with open(os.path.join(run_dir, "verdicts.json"), encoding="utf-8") as handle:
        verdicts = json.load(handle)["verdicts"]
    sections = _sections(text)
    problems = {k: [] for k in (1, 2, 5, 6, 7, 8)}
    answered = {QUESTION_SECTION.get(v["question"]) for v in verdicts}
    for sid, body in sections.items():
        for table in TABLE.findall(body):
            rows = [[_plain(c) for c in CELL.findall(r)] for r in ROW.findall(table)]
            header = rows[0] if rows else []
            for row in rows[1:]:
                for cell in row:
                    if " -> " in cell:
                        regimes = {m.group(2) for m in REPS.finditer(cell)}
                        if len(regimes) > 1:
                            problems[1].append(f"{sid}: arrow across regimes {sorted(regimes)}: "
                                               f"{cell[:120]!r}")
                if sid in answered and header[:1] == ["quantity"] and len(row) > 2 \
                        and row[2].startswith("not run"):
                    problems[6].append(f"{sid}: 'not run' row among verdicts: {row[0]!r}")
                if header[:2] == ["quantity", "seed discussion"] and len(row) >= 2 \
                        and row[1].strip() not in ("", "-") \
                        and (len(row) < 4 or not row[3].strip() or row[3].strip() == "-"):
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
    fs = sections.get("false_sharing", "")
    for table in TABLE.findall(fs):
        for row in ROW.findall(table)[1:]:
            cells = [_plain(c) for c in CELL.findall(row)]
            if len(cells) < 4:
                continue
            dists = [int(d) for d in re.findall(r"(\d+) B:", cells[3])]
            m = re.search(r"no slowdown of [\d.]+ % or more (?:from \d+ B )?down to (\d+) B",
                          cells[2])
            if m and dists and int(m.group(1)) >= max(dists + [0]) and \
                    int(m.group(1)) not in dists:
                problems[5].append(f"false_sharing: 'no slowdown down to {m.group(1)} B' is the "
                                   f"farthest distance itself: {cells[2][:100]!r}")
    return problems
