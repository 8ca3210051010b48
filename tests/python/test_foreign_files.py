"""Issue 25: plot.py reading Google Benchmark files written by other projects. Every test reads
a file made for its defect (tests/fixtures/gbench-json/issue25, written by its make_fixtures.py;
made-up values, not another project's results)."""

import csv
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PLOTS = os.path.join(ROOT, "plots")
FIX = os.path.join(ROOT, "tests", "fixtures", "gbench-json", "issue25")
sys.path.insert(0, PLOTS)

import families  # noqa: E402
import lockline_results as lr  # noqa: E402
import plot  # noqa: E402
from figures import plt  # noqa: E402

WORKERS = os.path.join(FIX, "workers-arg.json")


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def run_plot(*args):
    return subprocess.run(["/usr/bin/python3", os.path.join(PLOTS, "plot.py"), *args],
                          capture_output=True, text=True, timeout=300)


def test_worker_count_argument_warns_about_cpu_time(tmp_path):
    """threads stays 1, the worker count is the argument `workers`: cpu_time (the timing
    thread's) is far below real_time x workers, and plot.py says so."""
    run = lr.load_run(WORKERS)
    assert any("worker count from 'workers'" in w and "timing thread" in w
               for w in run.warnings), run.warnings
    p = run_plot(WORKERS, "-o", str(tmp_path / "out"), "--family", "BM_spawn")
    assert p.returncode == 0, p.stderr
    assert "plot.py: warning:" in p.stderr and "workers" in p.stderr


def test_x_arg_argument_sorted_numerically_and_titled(tmp_path):
    """--x-arg workers: a line against the worker count in numeric order (1, 2, 4, 8, 16, not
    1, 16, 2, ...), and the title says what the x axis is."""
    p = run_plot(WORKERS, "-o", str(tmp_path), "--x-arg", "workers", "--family", "BM_spawn")
    assert p.returncode == 0, p.stderr
    rows = [r for r in read_csv(tmp_path / "BM_spawn.csv") if r["figure"] == "BM_spawn"]
    assert [r["x_name"] for r in rows] == ["workers"] * 5
    assert [int(r["x"]) for r in rows] == [1, 2, 4, 8, 16]
    run = lr.load_run(WORKERS)
    data = plot.family_data([run], "BM_spawn", x_arg="workers")
    (stem, fig), = families.plot_generic(data)
    assert "against workers" in fig._suptitle.get_text(), fig._suptitle.get_text()
    assert "against threads" not in fig._suptitle.get_text()
    plt.close(fig)


def test_x_arg_user_counter(tmp_path):
    """--x-arg elements: a user counter is an x axis too (the positional argument that only
    restates it is not a series of its own)."""
    p = run_plot(WORKERS, "-o", str(tmp_path), "--x-arg", "elements", "--family", "BM_fill")
    assert p.returncode == 0, p.stderr
    rows = [r for r in read_csv(tmp_path / "BM_fill.csv") if r["figure"] == "BM_fill"]
    assert [float(r["x"]) for r in rows] == [1000, 2000, 4000, 8000, 16000]
    assert len({r["series"] for r in rows}) == 1


def test_x_arg_unknown_name_is_refused_with_the_names(tmp_path):
    p = run_plot(WORKERS, "-o", str(tmp_path / "out"), "--x-arg", "wrokers")
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("plot.py: error: --x-arg wrokers"), err
    assert "workers" in err[0] and "elements" in err[0] and "arg0" in err[0]
    assert not (tmp_path / "out").exists()


def test_overlaid_foreign_runs_get_their_own_labels_and_colours(tmp_path):
    """Two files of the same name from the same host (another day): different legend labels
    and different colours; two differently named files are labelled by file."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    shutil.copy(os.path.join(FIX, "pool-1.9.1-threads.json"), a / "result.json")
    shutil.copy(os.path.join(FIX, "pool-1.9.1-threads-again.json"), b / "result.json")
    runs = lr.load_runs([str(a / "result.json"), str(b / "result.json")])
    assert runs[0].label != runs[1].label, [r.label for r in runs]
    assert "2026-12-02" in runs[1].label
    data = plot.family_data(runs, "BM_pool")
    (stem, fig), = families.plot_generic(data)
    ax = fig.axes[0]
    handles, labels = ax.get_legend_handles_labels()
    series = [(h, lab) for h, lab in zip(handles, labels) if lab.startswith("all")
              or "[" in lab and not lab.startswith("USL")]
    assert len({lab for _, lab in series}) == len(series) >= 2, labels
    colours = {str(h.lines[0].get_color()) if hasattr(h, "lines") else str(h.get_color())
               for h, _ in series}
    assert len(colours) == len(series), colours
    plt.close(fig)
    named = lr.load_runs([os.path.join(FIX, "pool-1.9.1-threads.json"),
                          os.path.join(FIX, "pool-1.9.1-threads-again.json")])
    assert [r.label for r in named] == ["host-b@pool-1.9.1-threads.json",
                                        "host-b@pool-1.9.1-threads-again.json"]


def test_aggregate_only_file_records_its_repetitions(tmp_path):
    """--benchmark_report_aggregates_only files: the CSV says the 5 repetitions the aggregates
    summarise (and that the value is an aggregate's), not 0."""
    p = run_plot(os.path.join(FIX, "aggregate-only.json"), "-o", str(tmp_path))
    assert p.returncode == 0, p.stderr
    rows = read_csv(tmp_path / "BM_agg.csv")
    assert rows and {r["repetitions"] for r in rows} == {"5"}, rows
    assert {r["from_aggregates"] for r in rows} == {"1"}
    assert [float(r["x"]) for r in rows if r["figure"] == "BM_agg"] == [1, 2, 16]


def test_x_arg_not_the_last_argument_draws_lines(tmp_path):
    """Issue 48: --x-arg naming an argument that is not the last one in the name (size in
    BM_q/size:N/workers:W) draws one line per other argument with a point per size, never
    one-point series."""
    import json
    rows = [{"name": f"BM_q/size:{s}/workers:{w}/real_time", "run_name":
             f"BM_q/size:{s}/workers:{w}/real_time", "run_type": "iteration", "iterations": 100,
             "real_time": 10.0 * s / w, "cpu_time": 10.0 * s / w, "time_unit": "ns",
             "items_per_second": 1e9 * w / s, "threads": 1}
            for s in (8, 16, 32) for w in (2, 4)]
    path = tmp_path / "q.json"
    path.write_text(json.dumps({"context": {"num_cpus": 2}, "benchmarks": rows}))
    p = run_plot(str(path), "-o", str(tmp_path / "out"), "--x-arg", "size", "--family", "BM_q")
    assert p.returncode == 0, p.stderr
    drawn = [r for r in read_csv(tmp_path / "out" / "BM_q.csv") if r["figure"] == "BM_q"]
    by_series = {}
    for r in drawn:
        by_series.setdefault(r["series"], []).append(float(r["x"]))
    assert len(by_series) == 2, by_series
    assert all(sorted(xs) == [8, 16, 32] for xs in by_series.values()), by_series
