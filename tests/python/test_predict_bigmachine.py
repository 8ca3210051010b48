"""`lockline predict` against a real 16-core machine (issue 34), its input checks (issue 36
R6, R7) and past saturation, --target and its invariants (issue 51).

The fixture is tests/fixtures/big-machine/xeon-16c-lockline-threads1-4.json.gz (provenance in
tests/fixtures/README.md): a 16-core Xeon's rows at 1, 2 and 4 threads. The validation tests
fit on its 1-2 thread rows and judge the 4-thread rows; they need no binary (the rows'
placement summaries stand in for the topology). The accuracy bound asserted here is loose
(median |error| per family < 50 %; measured at the time of writing: 6-23 %): the test checks
that the validation runs and reports, not the model's accuracy, which the closing note of
issue 34 states. Tests that plan a target need the real binary (LOCKLINE_BINARY, set by ctest)
and are skipped with a reason without it.
"""

import gzip
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "plots"))

import predict  # noqa: E402
import predict_fit  # noqa: E402
import predict_output  # noqa: E402

BIG = os.path.join(ROOT, "tests", "fixtures", "big-machine")
RUN = os.path.join(BIG, "xeon-16c-lockline-threads1-4.json.gz")
TOPO = os.path.join(BIG, "xeon-16c-kvm-topology.xml")
SMALL = os.path.join(HERE, "fixtures", "predict", "run")
BINARY = os.environ.get("LOCKLINE_BINARY", "")
needs_binary = pytest.mark.skipif(not os.access(BINARY, os.X_OK),
                                  reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an "
                                  "executable lockline (ctest sets it)")
FAMILIES = ("locks", "page_free", "pagevec", "zone_lock")


def _cli(*args, binary=True, env=None):
    cmd = [sys.executable, os.path.join(ROOT, "plots", "predict.py"), *args]
    if binary and BINARY:
        cmd.append(f"--lockline={BINARY}")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False,
                          env=env)


def _one_error_line(res, needle):
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lockline: error:"), res.stderr
    assert needle in lines[0], lines[0]
    assert "Traceback" not in res.stderr


@pytest.fixture(scope="module")
def validation():
    return predict.validate_against(RUN, RUN, [1, 2], draws=60)


def test_fixture_holds_no_rows_past_four_threads():
    with gzip.open(RUN, "rt", encoding="utf-8") as handle:
        doc = json.load(handle)
    counts = {int(m.group(1)) for b in doc["benchmarks"]
              for m in [re.search(r"/threads:(\d+)", b.get("name", ""))] if m}
    assert counts and max(counts) <= 4


def test_validation_cli_reports_every_family_at_four_threads():
    res = _cli(RUN, f"--validate-against={RUN}", "--fit-threads=1,2", "--draws=60",
               binary=False)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    for fam in FAMILIES:
        m = re.search(rf"^\| {fam} \| 4 \| (\d+) \| [-+]\d+ % \| (\d+) % \| (\d+) of (\d+) \|$",
                      out, re.M)
        assert m, (fam, out[:3000])
        points, abs_err, inside, total = (int(x) for x in m.groups())
        assert points == total > 0
        assert abs_err < 50, (fam, abs_err)  # loose: the test checks it runs and reports
    assert not re.search(r"^\| [a-z_]+ \| [12] \|", out, re.M)  # fitted counts not judged
    assert "stats:off rows record no hold time" in out
    assert "takes no lock (the lock-free fast path" in out


def test_validation_fits_only_on_the_rows_it_is_not_judged_by(validation):
    rows = validation["rows"]
    assert rows and {r["threads"] for r in rows} == {4}
    for r in rows:
        assert r["fit"]["fit_threads"] == [2], r["key"]
        assert r["lo"] <= r["predicted"] <= r["hi"]
        assert math.isfinite(r["error"])
    assert not any("stats:off" in r["key"] for r in rows)


def test_verdicts_are_labelled_with_their_own_lock_and_not_predicted_without_input(
        validation):
    vs = validation["verdicts"]
    by_id = {}
    for v in vs:
        by_id.setdefault(v["id"], []).append(v)
        base = dict(kv.split(":", 1) for kv in v["base_key"].split("/")[1:])
        var = dict(kv.split(":", 1) for kv in v["variant_key"].split("/")[1:])
        assert base.get("lock") == var.get("lock") == v["lock"]
        assert f"{v['lock']} lock]" in v["text"]
    # spec.only: 2015's ticket-lock question is answered by ticket rows only, and every
    # zone_lock comparison appears once per (rows, thread count).
    assert {v["lock"] for v in by_id["zone_lock_after_before"]} == {"ticket"}
    keys = [(v["id"], v["base_key"], v["threads"]) for v in vs]
    assert len(keys) == len(set(keys))
    off = by_id["pv_offset_0_8"]
    assert off and all(not v["predicted"] and v["effect"] is None and v["ci"] is None
                       for v in off)
    fast = by_id["page_free_fast_atomic"]
    assert fast and all(not v["predicted"] and "no lock" in v["reason"] for v in fast)
    assert all("on_lru_pct:0" in v["base_key"] for v in fast)  # not the on_lru_pct:100 pair


def test_lock_scope_follows_the_kernel_version():
    assert predict_fit.lock_scope("pagevec", {"kernel": "5.8"})[0] == "node"
    assert "pgdat->lru_lock" in predict_fit.lock_scope("pagevec", {"kernel": "5.8"})[1]
    assert "zone->lru_lock" in predict_fit.lock_scope("pagevec", {"kernel": "2.6.9"})[1]
    assert predict_fit.lock_scope("zone_lock", {"zones": "1"})[0] == "node"
    assert predict_fit.lock_scope("locks", {})[0] == "machine"
    order = [{"pu": i, "core": i, "l2": i, "l3": i // 4, "numa": i // 8, "package": i // 8}
             for i in range(16)]
    assert [len(g) for g in predict.lock_groups(order, 16, True)] == [8, 8]
    assert [len(g) for g in predict.lock_groups(order, 16, False)] == [16]


def test_malformed_placements_do_not_raise():
    for bad in ({"packages": "two"}, {"l3s": [1]}, {"packages": float("nan")}, [], None):
        assert predict_fit.pair_class_from_placement(bad) is None
    pus = predict.placement_pus({"packages": "x", "cores": None, "l3s": -3}, 4)
    assert len(pus) == 4 and predict.l3_neighbours(pus) >= 0


def test_bad_arguments_are_one_error_line(tmp_path):
    _one_error_line(_cli(SMALL, "--topology=synthetic:pack:1 core:2 pu:1", "--regime=bogus",
                         binary=False), "--regime=bogus: accepted near, far, all, lowest")
    _one_error_line(_cli(SMALL, "--topology=synthetic:pack:1 core:2 pu:1", "--draws=abc",
                         binary=False), "--draws=abc")
    _one_error_line(_cli(SMALL, "--frobnicate", binary=False), "unrecognized arguments")
    _one_error_line(_cli(RUN, f"--validate-against={RUN}", "--fit-threads=2",
                         binary=False), "must include 1")


def test_an_emulated_run_is_refused(tmp_path):
    with open(os.path.join(SMALL, "lockline.json"), encoding="utf-8") as handle:
        doc = json.load(handle)
    doc["context"].setdefault("lockline", {})["emulated"] = True
    (tmp_path / "lockline.json").write_text(json.dumps(doc))
    out = tmp_path / "o"
    _one_error_line(_cli(str(tmp_path), "--topology=synthetic:pack:1 core:2 pu:1",
                         f"-o={out}", binary=False), "emulator")
    assert not out.exists()
    # Issue 48: an emulated run to validate against was accepted silently.
    _one_error_line(_cli(SMALL, f"--validate-against={tmp_path}", binary=False),
                    "--validate-against")


@needs_binary
def test_bad_output_and_latencies_are_one_error_line(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    topo = "--topology=synthetic:pack:1 core:2 pu:1"
    _one_error_line(_cli(SMALL, topo, f"-o={afile}"), "is not a directory")
    _one_error_line(_cli(SMALL, topo, f"-o={afile}/sub"), "cannot create the output")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    _one_error_line(_cli(SMALL, topo, f"--latencies={deep}", f"-o={tmp_path / 'o1'}"),
                    "--latencies=")
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({"l3_shared": 1e308}))
    _one_error_line(_cli(SMALL, topo, f"--latencies={huge}", f"-o={tmp_path / 'o2'}"),
                    "accepted: ns > 0 and <= 1e6")
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()


@needs_binary
def test_outputs_are_not_written_through_planted_symlinks(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    for name in ("predicted.json", "predicted-locks.png"):
        os.symlink(victim, out / name)
    res = _cli(SMALL, "--topology=synthetic:pack:1 core:2 pu:1", f"-o={out}", "--draws=20")
    assert res.returncode == 0, res.stderr
    assert victim.read_text() == "precious"
    assert not os.path.islink(out / "predicted.json")
    assert json.loads((out / "predicted.json").read_text())["predicted"] is True
    assert not os.path.islink(out / "predicted-locks.png")
    assert not [p for p in os.listdir(out) if ".tmp." in p]


@needs_binary
def test_predict_the_big_machine_at_8_and_16_threads(tmp_path):
    out = tmp_path / "p"
    res = _cli(RUN, f"--topology={TOPO}", f"-o={out}", "--draws=40")
    assert res.returncode == 0, res.stderr
    doc = json.loads((out / "predicted.json").read_text())
    assert doc["fit_threads"] == [1, 2, 4]
    assert doc["target_x86"] is True and doc["latencies_assumed_note"] is None
    for v in doc["variants"]:
        curve = {r["threads"]: r for r in v["curve"]}
        assert {8, 16} <= set(curve)
        for r in v["curve"]:
            assert 0 < r["lo"] <= r["ops_per_s"] <= r["hi"] < math.inf
    assert any(v["threads"] == 16 and v["predicted"] for v in doc["verdicts"])
    assert all(v["effect"] is None for v in doc["verdicts"] if not v["predicted"])


@needs_binary
def test_a_non_x86_target_is_marked_assumed(tmp_path):
    out = tmp_path / "p"
    res = _cli(SMALL, "--topology=synthetic:pack:2 numa:2 core:12 pu:4", "--arch=other",
               f"-o={out}", "--draws=20")
    assert res.returncode == 0, res.stderr
    doc = json.loads((out / "predicted.json").read_text())
    assert doc["latencies_assumed_note"] and "x86" in doc["latencies_assumed_note"]
    assert all(v["source"] == "assumed (x86 figures)" for v in doc["latencies_ns"].values())
    assert all("assumed" in v["text"] for v in doc["verdicts"])


def test_many_curves_are_small_multiples_with_legends(tmp_path):
    class V:
        def __init__(self, i):
            self.family, self.key = "fam", f"fam/x:{i}"
    vs = [V(i) for i in range(20)]
    curves = {v.key: [{"threads": n, "ops_per_s": 1e6 / n, "lo": 0.9e6 / n,
                       "hi": 1.1e6 / n} for n in (1, 2, 4)] for v in vs}
    files = predict_output.write_figures(str(tmp_path), "t", vs, curves, "assumed note", "2026-12-04")
    assert files == ["predicted-fam.png"] and (tmp_path / files[0]).stat().st_size > 0
    assert predict_output.PER_PANEL <= 8


def test_interval_contains_the_point_and_widens_with_noise():
    ops = np.array([100.0, 95, 105, 98, 102] * 10)
    lo0, hi0 = predict.interval(ops, 0.0)
    lo1, hi1 = predict.interval(ops, 0.05)
    assert lo1 < lo0 <= 100 <= hi0 < hi1


def test_an_explicit_lockline_that_is_missing_is_an_error_not_another_binary(tmp_path):
    """Issue 48 R7: --lockline=/nonexistent used to fall back silently to build/lockline."""
    out = tmp_path / "pred"
    res = _cli(SMALL, f"--topology={TOPO}", f"--out={out}", "--lockline=/nonexistent",
               binary=False)
    _one_error_line(res, "--lockline=/nonexistent")
    assert not out.exists()


# ----------------------------------------------------------------------------- issue 51
# Past saturation and on another machine's speed: the waiter term per lock kind, outside work
# that cannot lift a busy lock, the bounded shared-cache term, fits that say when they hit the
# end of their range, the layout's data lines, --target and the invariants the predictor
# checks on its own output before printing (one test each). Curves on placement_pus
# placements (one package, one L3): no binary needed.

VM = os.path.join(HERE, "fixtures", "consistency", "vm-default", "lockline.json.gz")
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


@pytest.mark.parametrize("n, change, message", [
    (8, {"lock_utilization": 1.2}, "lock utilization 1.200 > 1"),
    (2, {"ops_per_s": 3.5e6, "hi": 4e6}, "exceeds the 1-thread rate x threads"),
    (16, {"lo": 3.9e6, "hi": 4.1e6}, "interval narrower than nearer the inputs")])
def test_each_invariant_is_checked(n, change, message):
    predict.check_invariants(_V(), _rows())
    with pytest.raises(predict.InvariantError, match=message):
        predict.check_invariants(_V(), [dict(r, **change) if r["threads"] == n else r
                                        for r in _rows()])


def test_real_curves_keep_the_invariants(curves):
    for key, c in curves[1].items():
        rows = [c[n] for n in COUNTS]
        predict.check_invariants(curves[0][key], rows)
        assert all(0 <= r["lock_utilization"] <= 1 for r in rows)


@needs_binary
def test_a_broken_prediction_is_refused_and_nothing_is_written(tmp_path, monkeypatch, capsys):
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
    lat = predict_fit.read_latencies(target)  # --latencies takes a .json.gz too
    assert 50 < lat["l3_shared"] < 200 and predict_fit.read_latencies(RUN) == lat


def test_a_target_without_matching_rows_is_one_error_line(tmp_path, capsys):
    target = tmp_path / "t.json"
    with open(os.path.join(SMALL, "lockline.json"), encoding="utf-8") as handle:
        doc = json.load(handle)
    doc["benchmarks"] = [b for b in doc["benchmarks"] if b["name"].startswith("calibration")]
    target.write_text(json.dumps(doc))
    with pytest.raises(SystemExit):
        predict.validate_against(VM, RUN, None, draws=20, target=str(target))
    err = capsys.readouterr().err
    assert err.startswith("lockline: error: predict: --target=") and "no 1-thread row" in err


@needs_binary
def test_predict_with_target_writes_notes(tmp_path):
    doc = predict.predict(VM, TOPO, out_dir=str(tmp_path / "o"), lockline=BINARY, draws=20,
                          figures=False, target=_cut(tmp_path))
    assert any("1-thread costs rescaled" in n for n in doc["notes"])
    assert doc["latencies_ns"]["l3_shared"]["source"] == "measured"
    assert "--target's" in doc["latencies_ns"]["l3_shared"]["why"]
    assert any("CPU speed" in s for s in doc["simplifications"])
