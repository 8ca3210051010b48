"""Tests for plots/: the result loader, the USL fit, the family plotters and plot.py's CLI.

Fixtures: tests/python/fixtures/plots (synthetic lockline runs from make_fixtures.py and two
real Google Benchmark files). Plotting is slow (matplotlib), so each figure set is drawn once
per module.
"""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PLOTS = os.path.join(ROOT, "plots")
FIX = os.path.join(HERE, "fixtures", "plots")
RUN_A = os.path.join(FIX, "run_a")
RUN_B = os.path.join(FIX, "run_b")
GBENCH_FIX = os.path.join(HERE, "..", "fixtures", "gbench-json")
GB_OLD = os.path.join(GBENCH_FIX, "gbench-tools-test1_run1.json")
GB_LIBFORK = os.path.join(GBENCH_FIX, "libfork-laptop-matmul.json")
sys.path.insert(0, PLOTS)

import families  # noqa: E402
import lockline_results as lr  # noqa: E402
import plot  # noqa: E402
import usl  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def out_a(tmp_path_factory):
    """run_a plotted once: (output dir, printed stdout)."""
    out = tmp_path_factory.mktemp("plot_a")
    assert plot.main([RUN_A, "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def out_ab(tmp_path_factory):
    """run_a and run_b overlaid, zone_lock only."""
    out = tmp_path_factory.mktemp("plot_ab")
    assert plot.main([RUN_A, RUN_B, "-o", str(out), "--family", "zone_lock"]) == 0
    return out


# --- USL --------------------------------------------------------------------------------------

def test_usl_recovers_true_parameters_within_intervals():
    rng = np.random.default_rng(20261130)
    lam, sigma, kappa = 1000.0, 0.02, 0.0005
    n = np.arange(1, 65)
    x = usl.usl(n, lam, sigma, kappa) * (1 + 0.02 * rng.standard_normal(n.size))
    fit = usl.fit_usl(n, x)
    assert fit.sigma_ci[0] <= sigma <= fit.sigma_ci[1]
    assert fit.kappa_ci[0] <= kappa <= fit.kappa_ci[1]
    true_peak = np.sqrt((1 - sigma) / kappa)
    assert abs(fit.peak_threads - true_peak) / true_peak < 0.10
    assert fit.peak_threads_ci[0] <= fit.peak_threads <= fit.peak_threads_ci[1]
    true_peak_x = float(usl.usl(true_peak, lam, sigma, kappa))
    assert abs(fit.peak_throughput - true_peak_x) / true_peak_x < 0.10


def test_usl_linear_scaling_has_no_peak():
    n = np.array([1, 2, 4, 8, 16])
    fit = usl.fit_usl(n, 100.0 * n)
    assert fit.sigma < 1e-3 and fit.kappa < 1e-5
    assert fit.peak_threads is None or fit.peak_threads > 1000


def test_usl_refuses_fewer_than_four_thread_counts():
    with pytest.raises(usl.UslError, match="fewer than 4 thread counts"):
        usl.fit_usl([1, 2, 4, 4, 2], [1, 2, 3, 3, 2])


# --- loader -----------------------------------------------------------------------------------

def test_lockline_run_loads_every_family_and_drops_failed_rows():
    run = lr.load_run(os.path.join(RUN_A, "lockline.json"))
    assert run.families() == ["calibration", "locks", "zone_lock", "pagevec", "page_free",
                              "page_free_race", "fault", "prezero", "zeroing"]
    assert len(run.skipped_rows) == 1 and "EINVAL" in run.skipped_rows[0]
    assert run.label == "bigbox-2s@abc1234def"
    assert "pin cores" in run.caption() and "commit abc1234def" in run.caption()
    zl = [p for p in run.points if p.family == "zone_lock"]
    assert {p.params["layout"] for p in zl} == {"lock_before_free_area", "lock_after_free_area"}
    assert "threads" not in zl[0].params
    c2c = [p for p in run.points if "pu_a" in p.params]
    assert c2c and all(p.family == p.bench == "calibration" for p in c2c)


def test_summarize_reduces_repetitions_and_flags_shifted_points():
    run = lr.load_run(os.path.join(RUN_A, "lockline.json"))
    locks = [p for p in run.points if p.family == "locks"]
    summary = lr.summarize(locks, "ops_per_s")
    ticket = summary[(("cs", "0"), ("lock", "ticket"), ("stats", "on"))]
    assert sorted(ticket) == [1, 2, 4, 8, 16, 32, 64]
    assert ticket[1].n == 2 and ticket[1].std > 0
    assert ticket[32].shifted and not ticket[16].shifted


def test_topology_markers_from_plans():
    run = lr.load_run(os.path.join(RUN_A, "lockline.json"))
    markers = lr.topology_markers(run, [1, 2, 4, 8, 16, 32, 64])
    assert markers == [(16, "2 L3s"), (32, "2 NUMA nodes, 2 packages"), (64, "SMT siblings")]


def test_old_gbench_format_groups_single_benchmarks_and_converts_units():
    run = lr.load_run(GB_OLD)
    assert run.families() == ["benchmarks"]
    by_name = {p.params["benchmark"]: p for p in run.points}
    assert "MyComplexityTest" not in by_name  # BigO / RMS rows have no time to plot
    assert by_name["BM_DifferentTimeUnit"].metrics["real_time_ns"] == pytest.approx(1e9)
    assert by_name["BM_SameTimes"].metrics["real_time_ns"] == pytest.approx(10)
    assert by_name["BM_DifferentTimeUnit"].metrics["throughput_per_s"] == pytest.approx(1.0)


def test_libfork_argument_is_a_parameter_not_a_thread_count():
    """`matmul_libfork<...>/2` passes the worker count as an argument: it is parameter arg0 on a
    plain axis, never a thread count (only the JSON threads field or a threads: component is);
    percentage (cv) aggregates are dropped."""
    run = lr.load_run(GB_LIBFORK)
    lib = [p for p in run.points if p.family == "matmul_libfork"]
    assert {p.threads for p in lib} == {1}
    assert {p.params["arg0"] for p in lib} == {"1", "2"}
    assert {p.params["template"] for p in lib} == {"busy_pool, numa_strategy::fan",
                                                   "busy_pool, numa_strategy::seq"}
    assert all(p.aggregate != "cv" for p in run.points)
    summary = lr.summarize(lib, "throughput_per_s")
    assert all(stat.n == 5 for by_n in summary.values() for stat in by_n.values())


def test_foreign_argument_axis_and_x_arg(tmp_path):
    """plot.py draws matmul_libfork against arg0 (named after the argument), with no USL fit;
    --x-arg picks the argument explicitly."""
    out = tmp_path / "o"
    assert plot.main([GB_LIBFORK, "-o", str(out), "--family", "matmul_libfork"]) == 0
    rows = read_csv(out / "matmul_libfork.csv")
    assert {r["x_name"] for r in rows} == {"arg0"} and {r["x"] for r in rows} == {"1", "2"}
    assert not (out / "matmul_libfork_usl.csv").exists()
    out2 = tmp_path / "o2"
    assert plot.main([GB_LIBFORK, "-o", str(out2), "--family", "matmul_omp", "--x-arg",
                      "arg0"]) == 0
    assert {r["x_name"] for r in read_csv(out2 / "matmul_omp.csv")} == {"arg0"}


def test_aggregates_only_spread_and_idle_cpu_warning(tmp_path, capsys):
    """An aggregates-only file: throughput error bars from the time stddev by the delta method
    (not 1/stddev); a threaded row whose cpu_time is far below real_time x threads warns."""
    rows = [
        {"name": "BM_a/threads:4_mean", "run_name": "BM_a/threads:4", "run_type": "aggregate",
         "aggregate_name": "mean", "aggregate_unit": "time", "threads": 4, "real_time": 2.0,
         "cpu_time": 0.5, "time_unit": "ms"},
        {"name": "BM_a/threads:4_stddev", "run_name": "BM_a/threads:4", "run_type": "aggregate",
         "aggregate_name": "stddev", "aggregate_unit": "time", "threads": 4, "real_time": 0.1,
         "cpu_time": 0.01, "time_unit": "ms"},
        {"name": "BM_a/threads:1", "run_name": "BM_a/threads:1", "run_type": "iteration",
         "threads": 1, "real_time": 1.0, "cpu_time": 1.0, "time_unit": "ms"},
        {"name": "BM_a/threads:4", "run_name": "BM_a/threads:4", "run_type": "iteration",
         "threads": 4, "real_time": 2.0, "cpu_time": 0.5, "time_unit": "ms"},
    ]
    path = write_json(tmp_path, "agg.json", {"context": {}, "benchmarks": rows[:2]})
    run = lr.load_run(path)
    stat = lr.summarize(run.points, "throughput_per_s")[()][4]
    assert stat.mean == pytest.approx(500.0) and stat.std == pytest.approx(25.0)
    path = write_json(tmp_path, "idle.json", {"context": {}, "benchmarks": rows[2:]})
    assert plot.main([path, "-o", str(tmp_path / "o")]) == 0
    assert "cpu_time far below real_time x threads" in capsys.readouterr().err


def write_json(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


def test_other_library_versions_plot(tmp_path):
    """Missing family_index, repetitions 0, `skipped`, mixed units, percentage aggregates,
    only-aggregate series and threads given as an argument all load and plot."""
    rows = [
        {"name": "BM_q/threads:1", "run_name": "BM_q/threads:1", "run_type": "iteration",
         "repetitions": 0, "threads": 1, "iterations": 10, "real_time": 1.0, "cpu_time": 1.0,
         "time_unit": "ms"},
        {"name": "BM_q/threads:2", "run_name": "BM_q/threads:2", "run_type": "iteration",
         "repetitions": 0, "threads": 2, "iterations": 10, "real_time": 600.0, "cpu_time": 1.0,
         "time_unit": "us"},
        {"name": "BM_q/threads:4", "skipped": True, "skip_message": "not enough CPUs"},
        {"name": "BM_q/threads:2_cv", "run_name": "BM_q/threads:2", "run_type": "aggregate",
         "aggregate_name": "cv", "aggregate_unit": "percentage", "real_time": 0.05,
         "cpu_time": 0.01, "time_unit": "us"},
        {"name": "BM_agg/8/real_time_mean", "run_name": "BM_agg/8/real_time",
         "run_type": "aggregate", "aggregate_name": "mean", "aggregate_unit": "time",
         "threads": 1, "real_time": 2.0, "cpu_time": 2.0, "time_unit": "s"},
        {"name": "BM_agg/8/real_time_stddev", "run_name": "BM_agg/8/real_time",
         "run_type": "aggregate", "aggregate_name": "stddev", "aggregate_unit": "time",
         "threads": 1, "real_time": 0.1, "cpu_time": 0.1, "time_unit": "s"},
    ]
    path = write_json(tmp_path, "other.json", {"context": {"date": "x"}, "benchmarks": rows})
    run = lr.load_run(path)
    q = lr.summarize([p for p in run.points if p.family == "BM_q"], "real_time_ns")
    assert {n: s.mean for n, s in q[()].items()} == {1: pytest.approx(1e6), 2: pytest.approx(6e5)}
    agg = lr.summarize([p for p in run.points if p.family == "BM_agg"], "real_time_ns")
    stat = agg[(("arg0", "8"),)][1]     # /8 is an argument, not 8 threads
    assert stat.mean == pytest.approx(2e9) and stat.std == pytest.approx(1e8)
    assert run.skipped_rows == ["BM_q/threads:4: not enough CPUs"]
    assert plot.main([path, "-o", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "BM_q.png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize("content,message", [
    ("{", "not valid JSON"),
    ("[1, 2]", "not a Google Benchmark result"),
    ('{"benchmarks": []}', "no benchmark row has a plottable value"),
    ('{"benchmarks": [{"name": "a", "error_occurred": true, "error_message": "x"}]}',
     "1 with errors"),
    ('{"benchmarks": [{"name": "a", "real_time": "fast"}]}', "no benchmark row"),
    ("\xff\xfe", "not valid JSON"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, content, message):
    path = write_json(tmp_path, "bad.json", content)
    assert plot.main([path, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and path in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_json_position_is_said_once(tmp_path, capsys):
    """json's "Unterminated string starting at" was followed by " at line ...": "starting at
    at line" (issue 27 item 15)."""
    path = write_json(tmp_path, "bad.json", '{"benchmarks": "abc')
    assert plot.main([path, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "Unterminated string starting at line 1 column 16" in err, err
    assert "at at" not in err


def test_bad_paths_and_family(tmp_path, capsys):
    assert plot.main([str(tmp_path / "missing"), "-o", str(tmp_path / "o")]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert plot.main([str(tmp_path / "empty"), "-o", str(tmp_path / "o")]) == 2
    assert "no lockline.json" in capsys.readouterr().err
    assert plot.main([RUN_B, "-o", str(tmp_path / "o"), "--family", "nope"]) == 2
    assert "family 'nope' not in the results (present: zone_lock)" in capsys.readouterr().err


def test_cli_subprocess_bad_input_has_no_traceback(tmp_path):
    path = write_json(tmp_path, "bad.json", '{"benchmarks": 3}')
    proc = subprocess.run([sys.executable, os.path.join(PLOTS, "plot.py"), path, "-o",
                           str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("plot.py: error:") and "Traceback" not in proc.stderr


# --- figures ----------------------------------------------------------------------------------

def test_every_family_writes_png_svg_and_csv(out_a):
    for fam in ("calibration", "locks", "zone_lock", "pagevec", "page_free", "page_free_race",
                "fault", "prezero", "zeroing"):
        assert (out_a / f"{fam}.png").read_bytes().startswith(PNG_MAGIC), fam
        assert b"<svg" in (out_a / f"{fam}.svg").read_bytes()[:2000], fam
        assert read_csv(out_a / f"{fam}.csv"), fam
    assert (out_a / "c2c_latency.png").read_bytes().startswith(PNG_MAGIC)
    assert (out_a / "zone_lock_relative.png").read_bytes().startswith(PNG_MAGIC)


def test_csv_holds_every_series_with_error_and_shift(out_a):
    rows = read_csv(out_a / "locks.csv")
    ticket = [r for r in rows if r["series"] == "lock:ticket" and r["y_name"] == "ops_per_s"]
    assert sorted(int(r["x"]) for r in ticket) == [1, 2, 4, 8, 16, 32, 64]
    assert all(r["run"] == "bigbox-2s@abc1234def" for r in ticket)
    # One repetition at 32 threads ran in the shifted state: the mean is the other regime's.
    assert {int(r["x"]): int(r["repetitions"]) for r in ticket}[32] == 1
    assert all(int(r["repetitions"]) == 2 for r in ticket if r["x"] != "32")
    assert [r["coherence_shifted"] for r in ticket if r["x"] == "32"] == ["1"]
    rel = [r for r in read_csv(out_a / "zone_lock.csv") if r["figure"] == "zone_lock_relative"]
    assert {r["y_name"] for r in rel} == {"ops_per_s/lock_before_free_area"}
    assert all(float(r["y"]) > 0 for r in rel)


def test_usl_csv_and_fit_quality(out_a):
    fits = read_csv(out_a / "zone_lock_usl.csv")
    assert len(fits) == 4  # 2 layouts x 2 locks
    for fit in fits:
        assert float(fit["sigma_lo"]) <= float(fit["sigma"]) <= float(fit["sigma_hi"])
    # Fixture truth: sigma 0.03 for every zone_lock series.
    assert all(0.015 < float(f["sigma"]) < 0.05 for f in fits)


def test_c2c_matrix_leaves_missing_pairs_blank(out_a):
    rows = read_csv(out_a / "calibration.csv")
    cells = {(r["series"], r["x"]) for r in rows if r["figure"] == "c2c_latency"}
    assert ("pu_a:0", "1") in cells and ("pu_a:2", "3") not in cells
    assert len(cells) == 11  # 4 x 4 minus the diagonal and one missing pair


def test_pagevec_best_slots_and_formulas(out_a):
    rows = read_csv(out_a / "pagevec.csv")
    best = {int(r["x"]): float(r["y"]) for r in rows if r["series"] == "best_slots"}
    # A star only where the best slot count is told apart from every other (issue 47): with
    # two repetitions a side none is (the report's cell says "none resolved").
    assert best == {}
    f1, f2 = families.pagevec_formulas(np.array([1.0, 4.0, 16.0, 1024.0]))
    assert list(f1) == [4, 8, 16, 40]
    assert np.allclose(f2[1:], [2 ** (2.5 * np.sqrt(2) - 1), 16, 2 ** (2.5 * np.sqrt(10) - 1)])
    assert round(f2[1]) == 6 and round(f2[3]) == 120


def test_runs_overlaid_and_labelled_by_host_and_commit(out_ab):
    rows = read_csv(out_ab / "zone_lock.csv")
    assert {r["run"] for r in rows} == {"bigbox-2s@abc1234def", "bigbox-4s@fed9876cba"}
    assert any("[bigbox-4s@fed9876cba]" in r["series"] for r in rows)
    assert sorted(os.listdir(out_ab)) == sorted([
        "zone_lock.png", "zone_lock.svg", "zone_lock_relative.png", "zone_lock_relative.svg",
        "zone_lock.csv", "zone_lock_usl.csv"])


def test_baseline_variant_option_and_unknown_family_fallback(tmp_path):
    run = lr.load_run(os.path.join(RUN_A, "lockline.json"))
    for p in run.points:
        if p.family == "locks":
            p.family = "brand_new_family"  # no registered plotter: generic figure
    written = plot.plot_runs([run], str(tmp_path), baseline="mcs",
                             families=["brand_new_family"], formats=("png",))
    names = sorted(os.path.basename(p) for p in written)
    assert names == ["brand_new_family.csv", "brand_new_family.png",
                     "brand_new_family_relative.png", "brand_new_family_usl.csv"]
    rel = [r for r in read_csv(tmp_path / "brand_new_family.csv") if "relative" in r["figure"]]
    assert {r["y_name"] for r in rel} == {"ops_per_s/mcs"} and rel


def test_sub_benchmarks_inside_one_family_get_their_panels(tmp_path):
    """Rows keyed prezero/..., zeroing/... and page_free_race/... but tagged with family fault
    or page_free (an earlier naming) still get their panels and CSV series."""
    run = lr.load_run(os.path.join(RUN_A, "lockline.json"))
    for p in run.points:
        if p.family in ("prezero", "zeroing"):
            p.family = "fault"
        elif p.family == "page_free_race":
            p.family = "page_free"
    plot.plot_runs([run], str(tmp_path), families=["fault", "page_free"], formats=("png",))
    fault = read_csv(tmp_path / "fault.csv")
    assert {r["y_name"] for r in fault} >= {"faults_per_wall_s", "allocs_per_s", "gb_per_s"}
    free = read_csv(tmp_path / "page_free.csv")
    assert {r["y_name"] for r in free} >= {"ns_per_op", "violations"}


def test_registry_dispatches_and_missing_metrics_do_not_fail(tmp_path):
    calls = []

    @families.register("test_only_family")
    def _plotter(data):
        calls.append(data.family)
        return []
    try:
        run = lr.load_run(os.path.join(RUN_B, "lockline.json"))
        for p in run.points:
            p.family = "test_only_family"
        plot.plot_runs([run], str(tmp_path / "a"), formats=("png",))
        assert calls == ["test_only_family"]
    finally:
        del families.FAMILY_PLOTTERS["test_only_family"]
    # zone_lock rows that lack ops_per_s: the panels say so instead of raising.
    run = lr.load_run(os.path.join(RUN_B, "lockline.json"))
    for p in run.points:
        p.metrics = {"renamed_metric_per_s": 1.0}
    written = plot.plot_runs([run], str(tmp_path / "b"), formats=("png",))
    assert any(p.endswith("zone_lock.png") for p in written)


def test_overrun_and_other_regime_points_are_marked(tmp_path):
    """A point with an overrun window is flagged in the CSV (and crossed in the figure); a
    repetition in another coherence regime is kept out of the mean and counted."""
    doc = json.load(open(os.path.join(RUN_B, "lockline.json")))
    first = doc["benchmarks"][0]
    copies = [dict(first, repetition_index=i, ops_per_s=first["ops_per_s"] * (1 + 0.01 * i))
              for i in (1, 2)]
    doc["benchmarks"][1:1] = copies
    reps = [first] + copies
    reps[0]["overrun"] = True
    reps[0]["coherence"] = {"label": "far", "regime_ns": 156.0}
    for r in reps[1:]:
        r["coherence"] = {"label": "near", "regime_ns": 32.0}
    path = write_json(tmp_path, "run.json", doc)
    out = tmp_path / "o"
    assert plot.main([path, "-o", str(out), "--family", "zone_lock"]) == 0
    params = reps[0]["params"]
    rows = [r for r in read_csv(out / "zone_lock.csv") if r["figure"] == "zone_lock"
            and r["x"] == str(params["threads"]) and params["layout"] in r["series"]
            and f"lock:{params['lock']}" in r["panel"]]
    assert rows and rows[0]["overrun"] == "1" and rows[0]["regime"] == "near"
    assert int(rows[0]["other_regime_repetitions"]) == 1
    assert int(rows[0]["repetitions"]) == len(reps) - 1


# ---- issue 35: foreign Google Benchmark files -------------------------------------------------

def _gbench_file(path, version, rows, host="h"):
    ctx = {"host_name": host, "date": "2026-12-01T00:00:00+00:00", "num_cpus": 8}
    if version:
        ctx["library_version"] = version
    path.write_text(json.dumps({"context": ctx, "benchmarks": rows}))
    return str(path)


def _row(name, threads, real_ns, cpu_ns, **extra):
    return {"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
            "repetition_index": 0, "threads": threads, "iterations": 10, "real_time": real_ns,
            "cpu_time": cpu_ns, "time_unit": "ns", **extra}


def test_threaded_time_computed_the_same_way_across_gb_1_9(tmp_path):
    """One sleeping benchmark (20 ms per iteration per thread) at 1 and 8 threads: 1.7.1
    reports real_time 20 ms / 8 at 8 threads, 1.9.1 reports 20 ms (PR #1836) and per-thread
    items/s. Both files read as 50 -> 400 iterations/s."""
    old = _gbench_file(tmp_path / "old.json", "v1.7.1", [
        _row("BM_sleep/threads:1", 1, 20e6, 2e4, items_per_second=50.0),
        _row("BM_sleep/threads:8", 8, 2.5e6, 2e4, items_per_second=400.0)])
    new = _gbench_file(tmp_path / "new.json", "v1.9.1", [
        _row("BM_sleep/threads:1", 1, 20e6, 2e4, items_per_second=50.0),
        _row("BM_sleep/threads:8", 8, 20e6, 2e4, items_per_second=50.0)])
    old2 = _gbench_file(tmp_path / "old2.json", "v1.7.1", [
        _row("BM_sleep/threads:1", 1, 20e6, 2e4), _row("BM_sleep/threads:8", 8, 2.5e6, 2e4)])
    new2 = _gbench_file(tmp_path / "new2.json", "v1.9.1", [
        _row("BM_sleep/threads:1", 1, 20e6, 2e4), _row("BM_sleep/threads:8", 8, 20e6, 2e4)])
    for first, second, metric in ((old, new, "items_per_second"),
                                  (old2, new2, "throughput_per_s")):
        a, b = lr.load_run(first), lr.load_run(second)
        va = {p.threads: p.metrics[metric] for p in a.points}
        vb = {p.threads: p.metrics[metric] for p in b.points}
        assert va == pytest.approx(vb), (metric, va, vb)
        assert vb[8] == pytest.approx(8 * vb[1])
        assert any("1.9.1" in w and "pre-1.9.0" in w for w in b.warnings)


def test_busy_1_9_threaded_row_is_not_called_idle(tmp_path):
    """A 95 %-busy 4-thread row of a 1.9.1 file: cpu_time 0.95 x real_time (both per thread
    since 1.9.0): no 'mostly idle' warning."""
    path = _gbench_file(tmp_path / "busy.json", "v1.9.1", [
        _row("BM_busy/threads:1", 1, 1000.0, 950.0),
        _row("BM_busy/threads:4", 4, 1000.0, 950.0)])
    assert not any("idle" in w for w in lr.load_run(path).warnings)


@pytest.mark.parametrize("name,counter", [("BM_spawn/workers:8", None),
                                          ("BM_spawn/8", None),
                                          ("BM_spawn/8", "green_threads")])
def test_worker_warning_does_not_depend_on_the_argument_name(tmp_path, name, counter):
    extra = {counter: 8} if counter else {}
    path = _gbench_file(tmp_path / "w.json", "v1.9.1",
                        [_row(name, 1, 1e6, 1e4, **extra)])
    warnings = lr.load_run(path).warnings
    assert any("cpu_time far below real_time" in w and "timing thread" in w
               for w in warnings), warnings


def test_x_arg_counter_that_varies_per_repetition_draws_one_line(tmp_path):
    """--x-arg COUNTER where the counter differs slightly between repetitions (bytes read per
    run): one line through the arguments, not one-point series."""
    rows = []
    for n in (1, 2, 4, 8):
        for rep in range(3):
            row = _row(f"BM_fill/{n}", 1, 1000.0 * n, 1000.0 * n, elements=1000 * n + rep)
            row.update(repetitions=3, repetition_index=rep)
            rows.append(row)
    path = _gbench_file(tmp_path / "c.json", "v1.9.1", rows)
    run = lr.load_run(path)
    data = plot.family_data([run], "BM_fill", x_arg="elements")
    (stem, fig), = families.plot_generic(data)
    series = {r["series"] for r in data.csv_rows if r["x_name"] == "elements"}
    assert len(series) == 1, series
    assert sorted(float(r["x"]) for r in data.csv_rows
                  if r["x_name"] == "elements") == [1001, 2001, 4001, 8001]
    families.plt.close(fig)
