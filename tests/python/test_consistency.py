"""Issue 25: one report, one truth. The report of three recorded runs (this VM's default run,
the emulated 4-node rehearsal, a synthetic run with known effects) is rendered and checked by
parsing report.html, verdicts.json and the plots' CSV files (plots/report_checks.py, the
checks report.py runs on every report):
every comparison mentioned twice carries the same numbers, every "not run" has no verdict,
relative plots draw the verdicts' effects, and every figure's series come from rows that
differ only in the plotted parameters. Fixtures: tests/python/fixtures/consistency (README)."""

import gzip
import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures", "consistency")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "plots"))

import report  # noqa: E402
from report_checks import class_problems, page_problems, read_run_dir  # noqa: E402


def render(run_dir):
    """Write plots, verdicts.json and report.html; returns the problems report.py found."""
    return report.write_report(run_dir)[1]


def check_run(run_dir):
    return page_problems(*read_run_dir(run_dir))

RECORDED = ("vm-default", "rehearsal-4s4n")


def _copy(name, tmp_path):
    """The recorded run `name` (stored gzipped, trimmed by trim_run.py) as a run directory."""
    out = tmp_path / name
    out.mkdir()
    with gzip.open(os.path.join(FIX, name, "lockline.json.gz"), "rb") as src, \
            open(out / "lockline.json", "wb") as dst:
        shutil.copyfileobj(src, dst)
    return str(out)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """rendered(name) -> (run_dir, render's problems) of a recorded run (RECORDED or
    "xeon-16c"), rendered once for every test of this file."""
    done = {}

    def get(name):
        if name not in done:
            tmp = tmp_path_factory.mktemp("recorded")
            if name == "xeon-16c":
                (tmp / name).mkdir()
                with gzip.open(BIG, "rb") as src, open(tmp / name / "lockline.json", "wb") as dst:
                    shutil.copyfileobj(src, dst)
                run_dir = str(tmp / name)
            else:
                run_dir = _copy(name, tmp)
            done[name] = (run_dir, render(run_dir))
        return done[name]
    return get


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic")
    subprocess.run(["/usr/bin/python3", os.path.join(FIX, "make_synthetic.py"), str(out)],
                   check=True, timeout=120)
    render(str(out))
    return str(out)


def test_synthetic_run_is_consistent(synthetic):
    assert check_run(synthetic) == []


def test_synthetic_run_verdicts_find_the_known_effects(synthetic):
    """Each verdict's interval holds the effect the synthetic run was built with (so the
    rows chosen are the intended ones: offset 8 in the deferred mode, not the rapid one)."""
    sys.path.insert(0, FIX)
    from make_synthetic import EFFECTS
    with open(os.path.join(synthetic, "verdicts.json")) as handle:
        verdicts = {v["id"]: v for v in json.load(handle)["verdicts"]}
    assert set(EFFECTS) == set(verdicts)
    for cid, effect in EFFECTS.items():
        lo, hi = verdicts[cid]["ci"]
        assert lo - 0.02 <= effect <= hi + 0.02, (cid, effect, verdicts[cid]["ci"])


def test_synthetic_heatmap_uses_one_configuration(synthetic):
    """The 31-slot heatmap row is the kernel:2.6.9 scanner:off row, not the 5.8 one."""
    import csv
    with open(os.path.join(synthetic, "plots", "pagevec.csv"), newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["panel"].startswith("pages/s, slots x")
                and r["params"]]
    assert rows and all(json.loads(r["params"])["kernel"] == "2.6.9" for r in rows)
    assert "kernel:2.6.9 mode:deferred scanner:off" in rows[0]["panel"]


def test_synthetic_locks_figure_has_no_empty_wait_panel(synthetic):
    import csv
    with open(os.path.join(synthetic, "plots", "locks.csv"), newline="") as handle:
        panels = {r["panel"] for r in csv.DictReader(handle)}
    assert not any("waiting" in p for p in panels), panels


def test_checker_catches_a_contradiction(synthetic, tmp_path):
    """The checker itself: a table cell that disagrees with verdicts.json is reported."""
    bad = tmp_path / "bad"
    shutil.copytree(synthetic, bad)
    text = (bad / "report.html").read_text()
    with open(os.path.join(synthetic, "verdicts.json")) as handle:
        first = json.load(handle)["verdicts"][0]
    import html
    escaped = html.escape(first["text"])
    assert text.count(escaped) >= 2
    last = text.rindex(escaped)
    (bad / "report.html").write_text(text[:last] + escaped.replace("+", "-", 1)
                                     + text[last + len(escaped):])
    problems = check_run(str(bad))
    assert any(first["id"] in p for p in problems), problems


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_run_is_consistent(name, rendered):
    if not os.path.isfile(os.path.join(FIX, name, "lockline.json.gz")):
        pytest.skip(f"fixture {name} not recorded")
    run_dir, problems = rendered(name)
    assert problems == []
    assert check_run(run_dir) == []
    if name == "vm-default":  # recorded at load 7-16: starved, and the top of the page says so
        with open(os.path.join(run_dir, "report.html"), encoding="utf-8") as handle:
            top = handle.read().split("<ul>")[0]
        assert 'id="starved"' in top and "median 5 % of a CPU per thread" in top


def _starved_note(tmp_path, edit):
    """report.starved_note of the recorded vm-default run after `edit(document)`."""
    from lockline_results import load_runs
    tmp_path.mkdir()
    run_dir = _copy("vm-default", tmp_path)
    path = os.path.join(run_dir, "lockline.json")
    with open(path, encoding="utf-8") as handle:
        doc = json.load(handle)
    edit(doc)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(doc, handle)
    return report.starved_note(load_runs([run_dir])[0])


def test_a_starved_run_says_what_its_windows_got_and_a_quiet_one_says_nothing(tmp_path):
    """Issue 49: a run at load 9-14 got 17 % of the CPU and its report never said so."""
    note = _starved_note(tmp_path / "a", lambda doc: doc["context"]["lockline"].update(
        load_avg_end=[9.5, 12.0, 11.0], replanned={"at_s": 60, "estimate_s": 104,
                                                   "elapsed_s": 240, "dropped": ["fam/x:1"]}))
    assert note.startswith("This run was starved: its windows got a median 5 % of a CPU per "
                           "thread (10th-90th percentile 2-15 % over 245 rows")
    assert "load average 16.2 at the start and 9.5 at the end; 3 of 245 rows overran" in note
    assert "it ran 563 s against its estimate of 104 s" in note
    assert note.endswith("re-planned 60 s in (elapsed 240 s against an estimate of 104 s) and "
                         "dropped 1 point(s): fam/x:1.")

    def quiet(doc):
        for row in doc["benchmarks"]:
            row.update(cpu_util=0.99, overrun=False)
    assert _starved_note(tmp_path / "b", quiet) == ""

    def overrun(doc):  # full CPU shares, but 13 of 245 rows overran (> 5 %)
        quiet(doc)
        for row in [r for r in doc["benchmarks"] if r.get("run_type") == "iteration"][:13]:
            row["overrun"] = True
    assert "13 of 245 rows overran" in _starved_note(tmp_path / "c", overrun)


# ---- issue 35: each class on recorded runs and on runs built to trigger it -------------------

BIG = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "fixtures", "big-machine",
                   "xeon-16c-lockline-threads1-4.json.gz")


def _no_class_problems(run_dir):
    found = class_problems(*read_run_dir(run_dir)[:2])
    return {k: v for k, v in found.items() if v}


@pytest.mark.parametrize("name", RECORDED + ("xeon-16c",))
def test_recorded_run_has_no_issue35_class(name, rendered):
    assert _no_class_problems(rendered(name)[0]) == {}


@pytest.mark.parametrize("name", ("vm-default", "xeon-16c"))
def test_recorded_report_reads(name, rendered, tmp_path):
    """test_figures.assert_report_reads on the recorded runs' reports (rendered once, here)."""
    from test_figures import assert_report_reads
    run_dir, problems = rendered(name)
    assert_report_reads(run_dir, os.path.join(run_dir, "report.html"), problems, tmp_path)


def test_synthetic_run_has_no_issue35_class(synthetic):
    assert _no_class_problems(synthetic) == {}


def _pts(bench, params, regimes, value, metric="ops_per_s", threads=2):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "plots"))
    from lockline_results import Point
    key = bench + "/" + "/".join(f"{k}:{v}" for k, v in params.items()) + f"/threads:{threads}"
    return [Point(bench, bench, dict(params), threads, {metric: value * (1 + 0.01 * i)},
                  repetition=i, coherence=r, key=key) for i, r in enumerate(regimes)]


def test_arrow_never_crosses_regimes():
    """Class 1: base has 3 far + 1 near repetitions, variant 4 near: both numbers of the arrow
    come from the near regime (the comparison's), never 3 far -> 4 near."""
    import report_tables
    base = _pts("zone_lock", {"layout": "before"}, ["far"] * 3 + ["near"], 7.47e6) \
        + _pts("zone_lock", {"layout": "before"}, ["near"] * 3, 30e6)
    variant = _pts("zone_lock", {"layout": "after"}, ["near"] * 4, 36.1e6)
    text = report_tables.arrow_text(base, variant, "ops_per_s")
    assert text.count("near-regime") == 2 and "far-regime" not in text, text
    # No regime in common: no arrow at all.
    far_only = _pts("zone_lock", {"layout": "before"}, ["far"] * 4, 7.47e6)
    assert " -> " not in report_tables.arrow_text(far_only, variant, "ops_per_s")
    # Adjacent rows of a table: one regime for all of them.
    rows = report_tables.side_by_side([far_only + _pts("p", {}, ["near"], 1.0), variant],
                               "ops_per_s")
    assert all("near-regime" in r for r in rows), rows


def test_checker_catches_each_class(synthetic, tmp_path):
    """The class checker on a report edited to break each class."""
    bad = tmp_path / "bad"
    shutil.copytree(synthetic, bad)
    text = (bad / "report.html").read_text()
    # 1: an arrow across regimes.
    text = text.replace("</table>", "<tr><td>x</td><td>-</td><td>1 (3 far-regime reps) -&gt; "
                        "2 (4 near-regime reps)</td><td>-</td></tr></table>", 1)
    # 2 and 7: the verdict figure and the machine words removed.
    text = text.replace('alt="verdicts_q1 figure"', 'alt="x"')
    text = text.replace("measured with", "with")
    # 6 and 8: a 'not run' row among verdicts, a seed figure without comparability.
    q1 = text.index('<section id="q1">')
    first = text.index("</table>", text.index("<th>quantity</th>", q1))
    text = text[:first] + ("<tr><td>y</td><td>seed 1 -&gt; 2</td><td>not run</td><td></td>"
                           "</tr>") + text[first:]
    (bad / "report.html").write_text(text)
    found = class_problems(*read_run_dir(str(bad))[:2])
    for k in (1, 2, 6, 7, 8):
        assert found[k], (k, found)


def test_cache_line_summary_agrees_with_slower_rows():
    """Class 5: closer distances 13x slower by median but with intervals too wide: the answer
    never says 'no slowdown down to 256 B'."""
    from families import false_sharing_verdicts
    pts = []
    for d, v in ((8, 13.0), (32, 13.0), (64, 1.0), (128, 1.0), (256, 1.0)):
        vals = [v * f for f in (0.2, 1.0, 3.0, 0.5, 2.0)]
        for i, x in enumerate(vals):
            pts += _pts("false_sharing", {"pair": "l3_shared", "op": "inc", "distance": str(d)},
                        ["near"], x, metric="ns_per_op")
            pts[-1].repetition = i
    [row] = false_sharing_verdicts(pts)
    assert "down to 256 B" not in row["smallest"], row["smallest"]
    assert "slower" in row["smallest"], row["smallest"]


def test_checker_catches_a_figure_or_table_off_its_verdict(synthetic, tmp_path):
    """Issue 47: a verdict figure drawing another effect, or a table's sides whose ratio is not
    the verdict's, are reported."""
    import csv
    bad = tmp_path / "bad47"
    shutil.copytree(synthetic, bad)
    path = bad / "plots" / "verdicts.csv"
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows[0]["effect"] = str(float(rows[0]["effect"]) + 0.1)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    text = (bad / "report.html").read_text()
    start = text.index('class="sides"')
    end = text.index(" -&gt; ", start)
    (bad / "report.html").write_text(text[:end] + "0" + text[end:])
    problems = "\n".join(check_run(str(bad)))
    assert f"{rows[0]['id']}: its figure draws" in problems, problems
    assert "its verdict" in problems, problems
