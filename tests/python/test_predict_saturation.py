"""`lockline predict` past saturation and on another machine's speed (issue 51): the waiter
term per lock kind, outside work that cannot lift a busy lock, the bounded shared-cache term,
fits that say when they hit the end of their range, the layout's data lines, `--target` and
the invariants the predictor checks on its own output before printing (one test each).

Fitted on tests/fixtures/big-machine/ (a 16-core Xeon's 1-4 thread rows); the curves are
built on placements from placement_pus (one package, one L3), so no binary is needed except by
the tests marked needs_binary (the planner).
"""

import gzip
import json
import math
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "plots"))

import predict  # noqa: E402
import predict_fit  # noqa: E402

BIG = os.path.join(ROOT, "tests", "fixtures", "big-machine")
RUN = os.path.join(BIG, "xeon-16c-lockline-threads1-4.json.gz")
TOPO = os.path.join(BIG, "xeon-16c-kvm-topology.xml")
VM = os.path.join(HERE, "fixtures", "consistency", "vm-default", "lockline.json.gz")
BINARY = os.environ.get("LOCKLINE_BINARY", "")
needs_binary = pytest.mark.skipif(not os.access(BINARY, os.X_OK),
                                  reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an "
                                  "executable lockline (ctest sets it)")
COUNTS = [1, 2, 4, 8, 16]
PV = ("pagevec/kernel:2.6.9/lock:ttas/mode:deferred/offset:0/policy:fixed/release:unmap/"
      "scanner:off/slots:16/work_ns:{}/zones:1")


def _fit(fit_threads, draws=30):
    run = predict.read_run(RUN)
    variants, _ = predict_fit.collect_variants(run, fit_threads)
    here = predict_fit.c2c_by_class(run, "near")
    lat = predict_fit.target_latencies({}, here[0], here[1], "")
    fits, _ = predict.fit_run(run, variants, lat, here[0], draws, 26)
    return {v.key: v for v in variants}, fits


@pytest.fixture(scope="module")
def curves():
    variants, fits = _fit(None)
    order = predict.placement_pus({"packages": 1, "l3s": 1, "cores": 16}, 16)
    return variants, {k: {r["threads"]: r for r in predict.predict_variant(v, order, COUNTS,
                                                                           fits[k])}
                      for k, v in variants.items()}


def _lock(curves, kind):
    return curves[1][f"locks/cs:0/lock:{kind}/stats:on"]


def test_ticket_and_tas_fall_past_saturation_queued_locks_do_not(curves):
    for kind in ("ticket", "tas"):
        c = _lock(curves, kind)
        assert c[16]["ops_per_s"] < 0.7 * c[8]["ops_per_s"] < 0.7 * c[4]["ops_per_s"], kind
    for kind in ("mcs", "qspinlock", "ttas", "pthread_mutex"):
        c = _lock(curves, kind)
        assert c[16]["ops_per_s"] > 0.7 * c[8]["ops_per_s"], kind


def test_outside_work_cannot_lift_a_busy_lock(curves):
    """The 2.6.9 16-slot pagevec at 16 threads: the calibrated rows take the same lock and
    holds as the work_ns:0 rows; the old model predicted them 3.9x apart."""
    zero, cal = curves[1][PV.format("0")][16], curves[1][PV.format("cal")][16]
    assert cal["ops_per_s"] < 1.5 * zero["ops_per_s"]
    assert curves[0][PV.format("cal")].fit_summary["lines_source"].startswith("the lock-bound")


def test_outside_work_slowdown_has_a_knee():
    assert predict_fit.knee(0.0) == 0.0
    assert predict_fit.knee(1.0) < predict_fit.knee(3.0) < predict_fit.knee(223.0)
    assert predict_fit.knee(223.0) < predict_fit.OUTSIDE_KNEE
    assert predict_fit.knee(223.0) / predict_fit.knee(1.0) < 6.3


def test_no_parameter_sits_at_the_end_of_its_range_unreported(curves):
    for v in curves[0].values():
        f = v.fit_summary
        at_top = f["lines_per_handoff"] >= 0.999 * predict_fit.LINES_MAX
        assert at_top == any("lines per hand-off clipped" in c for c in f["clipped"]), v.key
        at_top = f["waiter_coefficient"] >= 0.999 * predict_fit.WAITER_MAX
        assert at_top == any("waiter coefficient clipped" in c for c in f["clipped"]), v.key
    # zone_lock before/ticket/work_ns:0 hit the old grid's top (20.00); now fitted inside.
    key = ("zone_lock/config:cma/layout:lock_before_free_area/line:64/lock:ticket/"
           "pcp_batch:31/work_ns:0/zones:1")
    assert 20.0 < curves[0][key].fit_summary["lines_per_handoff"] < predict_fit.LINES_MAX


def test_without_multi_thread_rows_the_layout_gives_the_lines():
    variants, fits = _fit([1], draws=20)
    for key, v in variants.items():
        assert fits[key]["lines"][0] == v.data_lines, key
        assert "layout" in v.fit_summary["lines_source"]
    assert {v.data_lines for k, v in variants.items() if "kernel:5.8" in k} == {3.0}


def _rows():
    """A curve that keeps every invariant: saturating at 4 threads, widening past 2."""
    return [{"threads": n, "ops_per_s": 1e6 * min(n, 4), "lo": 0.9e6 * min(n, 4) / n ** 0.1,
             "hi": 1.1e6 * min(n, 4) * n ** 0.1, "lock_utilization": min(1.0, n / 4)}
            for n in COUNTS]


class _V:
    key, reps = "fam/x:1", {1: [], 2: []}


def test_invariant_lock_utilization_at_most_one():
    predict.check_invariants(_V(), _rows())
    with pytest.raises(predict.InvariantError, match="lock utilization 1.200 > 1"):
        predict.check_invariants(_V(), [dict(r, lock_utilization=1.2) if r["threads"] == 8
                                        else r for r in _rows()])


def test_invariant_no_point_above_the_one_thread_rate_times_threads():
    rows = [dict(r, ops_per_s=3.5e6, hi=4e6) if r["threads"] == 2 else r for r in _rows()]
    with pytest.raises(predict.InvariantError, match="exceeds the 1-thread rate x threads"):
        predict.check_invariants(_V(), rows)


def test_invariant_intervals_widen_with_the_distance_from_the_inputs():
    rows = [dict(r, lo=3.9e6, hi=4.1e6) if r["threads"] == 16 else r for r in _rows()]
    with pytest.raises(predict.InvariantError, match="interval narrower"):
        predict.check_invariants(_V(), rows)


def test_real_curves_keep_the_invariants(curves):
    for key, c in curves[1].items():
        rows = [c[n] for n in COUNTS]
        predict.check_invariants(curves[0][key], rows)
        assert all(0 <= r["lock_utilization"] <= 1 for r in rows)


def test_a_broken_prediction_is_refused_and_nothing_is_written(tmp_path, monkeypatch, capsys):
    if not os.access(BINARY, os.X_OK):
        pytest.skip("LOCKLINE_BINARY is not an executable lockline")
    real = predict._lock_x

    def broken(*args, **kw):
        out = real(*args, **kw)
        return (out[0], out[1], out[2] * 3.0) if kw.get("stats") else out
    monkeypatch.setattr(predict, "_lock_x", broken)
    with pytest.raises(SystemExit) as exit_:
        predict.predict(VM, TOPO, out_dir=str(tmp_path / "o"), lockline=BINARY, draws=20,
                        figures=False)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("lockline: error: predict: the prediction "
                                               "breaks its own invariant")
    assert not (tmp_path / "o" / "predicted.json").exists()


def _cut(tmp_path):
    """The 16-core file cut to its 1-thread and calibration/c2c rows (what a
    `lockline --calibrate-only` run on the target holds)."""
    with gzip.open(RUN, "rt", encoding="utf-8") as handle:
        doc = json.load(handle)
    doc["benchmarks"] = [b for b in doc["benchmarks"] if "/threads:1/" in b["name"] + "/"
                         or "c2c:pingpong" in b["name"]]
    path = tmp_path / "target.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump(doc, handle)
    return str(path)


def test_target_rescales_one_thread_costs_and_gives_the_latencies(tmp_path):
    target = _cut(tmp_path)
    res = predict.validate_against(VM, RUN, None, draws=30, target=target)
    notes = "\n".join(res["notes"])
    assert f"--target={target}: 1-thread costs rescaled" in notes
    assert "c2c classes l3_shared from it" in notes
    assert "no 1-thread row on the target" in notes  # the family-median fallback is said
    ones = [r for r in res["rows"] if r["threads"] == 1]
    assert ones and all(abs(r["error"]) < 0.05 for r in ones)  # the target's own speed
    assert all(0 < r["fit"]["target_speed_ratio"] < 1 for r in res["rows"])


def test_a_target_without_matching_rows_is_one_error_line(tmp_path, capsys):
    target = tmp_path / "t.json"
    with open(os.path.join(HERE, "fixtures", "predict", "run", "lockline.json"),
              encoding="utf-8") as handle:
        doc = json.load(handle)
    doc["benchmarks"] = [b for b in doc["benchmarks"] if b["name"].startswith("calibration")]
    target.write_text(json.dumps(doc))
    with pytest.raises(SystemExit):
        predict.validate_against(VM, RUN, None, draws=20, target=str(target))
    err = capsys.readouterr().err
    assert err.startswith("lockline: error: predict: --target=") and "no 1-thread row" in err


def test_latencies_accept_a_gzip_result_file(tmp_path):
    lat = predict_fit.read_latencies(_cut(tmp_path))
    assert 50 < lat["l3_shared"] < 200
    assert predict_fit.read_latencies(RUN) == lat


@needs_binary
def test_predict_with_target_writes_notes(tmp_path):
    doc = predict.predict(VM, TOPO, out_dir=str(tmp_path / "o"), lockline=BINARY, draws=20,
                          figures=False, target=_cut(tmp_path))
    assert any("1-thread costs rescaled" in n for n in doc["notes"])
    assert doc["latencies_ns"]["l3_shared"]["source"] == "measured"
    assert "--target's" in doc["latencies_ns"]["l3_shared"]["why"]
    assert any("CPU speed" in s for s in doc["simplifications"])
    assert all(math.isfinite(r["ops_per_s"]) for v in doc["variants"] for r in v["curve"])
    assert np.all([r["lock_utilization"] <= 1 for v in doc["variants"] for r in v["curve"]])
