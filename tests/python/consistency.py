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
