"""Issue 25: one report, one truth. The report of three recorded runs (this VM's default run,
the emulated 4-node rehearsal, a synthetic run with known effects) is rendered and checked by
parsing report.html, verdicts.json and the plots' CSV files (tests/python/consistency.py):
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
sys.path.insert(0, HERE)

import consistency  # noqa: E402

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
def synthetic(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic")
    subprocess.run(["/usr/bin/python3", os.path.join(FIX, "make_synthetic.py"), str(out)],
                   check=True, timeout=120)
    consistency.render(str(out))
    return str(out)


def test_synthetic_run_is_consistent(synthetic):
    assert consistency.check_run(synthetic, render_first=False) == []


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
    problems = consistency.check_run(str(bad), render_first=False)
    assert any(first["id"] in p for p in problems), problems


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_run_is_consistent(name, tmp_path):
    if not os.path.isfile(os.path.join(FIX, name, "lockline.json.gz")):
        pytest.skip(f"fixture {name} not recorded")
    run_dir = _copy(name, tmp_path)
    assert consistency.check_run(run_dir) == []
