"""Tests of plots/queueing.py (the lock model's solvers) and plots/predict.py (issue 26).

The solver tests need nothing else and are deterministic (fixed seeds). The end-to-end tests
plan the targets with the real binary (LOCKLINE_BINARY, set by ctest) and are skipped with a
reason without it. The recorded run is tests/python/fixtures/predict/run/lockline.json (see the
README there).
"""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "plots"))

import queueing  # noqa: E402
import predict  # noqa: E402
import predict_fit  # noqa: E402
import predict_report  # noqa: E402

BINARY = os.environ.get("LOCKLINE_BINARY", "")
FIXTURE = os.path.join(HERE, "fixtures", "predict", "run")
TOPOS = os.path.join(ROOT, "tests", "fixtures", "topologies")
needs_binary = pytest.mark.skipif(not os.access(BINARY, os.X_OK),
                                  reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an "
                                  "executable lockline (ctest sets it)")


# ------------------------------------------------------------------ closed forms

@pytest.mark.parametrize("think,service", [(0.0, 1.0), (10.0, 1.0), (3.0, 0.5)])
def test_mva_one_thread_is_one_cycle(think, service):
    x, r, q = queueing.mva(1, think, service)[0]
    assert x == pytest.approx(1.0 / (think + service))
    assert r == pytest.approx(service)
    assert queueing.mva_load_dependent(1, think, lambda j: service)[0] == pytest.approx(x)


def test_mva_saturates_at_one_over_service_and_respects_the_bounds():
    think, service = 20.0, 2.0
    rows = queueing.mva(200, think, service)
    for n, (x, _, _) in enumerate(rows, start=1):
        # Asymptotic bounds of a closed network: X <= min(n / (Z + S), 1 / S).
        assert x <= min(n / (think + service), 1.0 / service) * (1 + 1e-12)
    assert rows[-1][0] == pytest.approx(1.0 / service, rel=1e-9)
    # No think time: the lock is busy from n = 1 on.
    assert queueing.mva(5, 0.0, service)[-1][0] == pytest.approx(1.0 / service)


@pytest.mark.parametrize("n", [1, 2, 3, 8, 30])
@pytest.mark.parametrize("think,service", [(10.0, 1.0), (1.0, 1.0), (0.5, 2.0)])
def test_mva_equals_the_machine_repairman_formula(n, think, service):
    expected = queueing.machine_repairman(n, think, service)
    assert queueing.mva(n, think, service)[-1][0] == pytest.approx(expected, rel=1e-10)
    assert queueing.mva_load_dependent(n, think, lambda j: service)[0] == \
        pytest.approx(expected, rel=1e-10)
    assert float(queueing.birth_death(n, think, np.full(n, service))[0]) == \
        pytest.approx(expected, rel=1e-10)


def test_machine_repairman_by_hand():
    # n = 2, Z = S = 1: p0 = 1 / (1 + 2 + 2) = 0.2, X = 0.8.
    assert queueing.machine_repairman(2, 1.0, 1.0) == pytest.approx(0.8)


def test_load_dependent_mva_equals_the_birth_death_solution():
    for n in (2, 5, 17):
        for think in (0.0, 0.3, 4.0):
            fn = lambda j: 1.0 + 0.4 * (j - 1)  # noqa: E731
            a = queueing.mva_load_dependent(n, think, fn)[0]
            b = float(queueing.birth_death(n, think, [fn(j) for j in range(1, n + 1)])[0])
            assert a == pytest.approx(b, rel=1e-9)
    # Vectorised over draws, thousands of threads without overflow.
    s = np.tile(np.linspace(1, 3, 4096), (3, 1))
    x = queueing.birth_death(4096, np.array([1.0, 100.0, 1e5]), s)
    assert np.all(np.isfinite(x)) and np.all(x > 0)


# ------------------------------------------------------------------ simulator

def grid_check(ns, thinks, services, completions=40000, seed=7):
    """Simulator against MVA on a grid: [(n, think, service, X_mva, X_sim)] for a
    waiter-dependent service service(j) = service * (1 + 0.25 (j - 1))."""
    rows = []
    for n in ns:
        for z in thinks:
            for s in services:
                fn = (lambda j, s=s: s * (1 + 0.25 * (j - 1)))
                x_mva = queueing.mva_load_dependent(n, z, fn)[0]
                x_sim = queueing.simulate(n, z, fn, completions=completions, seed=seed)
                rows.append((n, z, s, x_mva, x_sim))
    return rows


def test_simulator_agrees_with_mva_within_two_percent():
    rows = grid_check(ns=(1, 2, 4, 16), thinks=(0.0, 1.0, 10.0), services=(0.2, 1.0),
                      completions=40000, seed=7)
    worst = max(abs(sim / mva - 1) for _, _, _, mva, sim in rows)
    assert worst < 0.02, rows


def test_simulator_is_deterministic():
    fn = lambda j: 1.0  # noqa: E731
    assert queueing.simulate(4, 2.0, fn, 5000, seed=3) == queueing.simulate(4, 2.0, fn, 5000,
                                                                            seed=3)


# ------------------------------------------------------------------ predict pieces

def test_pair_classes_of_a_plan():
    pu = lambda i, core, l3, pkg, smt=0: {"pu": i, "core": core, "smt": smt, "l2": core,  # noqa
                                          "l3": l3, "numa": pkg, "package": pkg}
    pus = [pu(0, 0, 0, 0), pu(1, 0, 0, 0, 1), pu(2, 1, 0, 0), pu(3, 2, 1, 0), pu(4, 3, 2, 1)]
    c = predict.class_pair_counts(pus)
    assert sum(c.values()) == 5 * 4
    assert c["smt"] == 2
    assert c["l3_shared"] == 4  # (0,2), (1,2) both ways
    assert c["package_remote"] == 8  # PU 4 against the 4 others, both ways
    assert c["package_local"] == 6  # PU 3 against 0, 1, 2 both ways
    assert c["l2_shared"] == 0


def test_latencies_file_is_checked(tmp_path):
    good = tmp_path / "lat.json"
    good.write_text(json.dumps({"package_remote": 180, "l3_shared": 25}))
    assert predict_fit.read_latencies(str(good)) == {"package_remote": 180.0, "l3_shared": 25.0}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hops": 3}))
    with pytest.raises(ValueError, match="unknown class 'hops'"):
        predict_fit.read_latencies(str(bad))
    bad.write_text(json.dumps({"smt": -1}))
    with pytest.raises(ValueError, match="accepted: ns > 0"):
        predict_fit.read_latencies(str(bad))


def _predict_cli(*args, cwd=None):
    return subprocess.run([sys.executable, os.path.join(ROOT, "plots", "predict.py"), *args,
                           f"--lockline={BINARY}"], capture_output=True, text=True,
                          timeout=300, cwd=cwd, check=False)


TARGETS = [
    ("llnl-corona-epyc7402-2p-16l3-96pu-hwloc1format.xml", "2-socket EPYC 7402, hwloc 1.x"),
    ("opteron6276-4p-8n-64c.xml", "many-node Opteron 6276"),
    ("intel-lakefield-i5-l16g7-1p4e-hybrid.xml", "hybrid Lakefield"),
    ("synthetic:pack:2 numa:2 l3:8 core:4 pu:1", "Arm-like 2-socket, 16 L3s per socket"),
    ("synthetic:pack:2 numa:2 core:12 pu:8", "POWER-like SMT8"),
]


@needs_binary
@pytest.mark.parametrize("topology,what", TARGETS)
def test_predict_end_to_end(tmp_path, topology, what):
    spec = topology if topology.startswith("synthetic:") else os.path.join(TOPOS, topology)
    out = tmp_path / "out"
    res = _predict_cli(FIXTURE, f"--topology={spec}", f"-o={out}", "--draws=40")
    assert res.returncode == 0, res.stderr
    doc = json.loads((out / "predicted.json").read_text())
    assert doc["predicted"] is True and doc["variants"], what
    top = max(doc["topology"]["threads_list"])
    for v in doc["variants"]:
        counts = [r["threads"] for r in v["curve"]]
        assert counts[0] == 1 and counts[-1] == top
        for r in v["curve"]:
            assert 0 < r["lo"] <= r["ops_per_s"] * 1.0001 or r["lo"] <= r["ops_per_s"]
            assert math.isfinite(r["hi"])
    assert doc["figures"] and all((out / f).is_file() for f in doc["figures"])
    classes = doc["latencies_ns"]
    assert {v["source"] for v in classes.values()} <= {"measured", "assumed", "given"}
    assert any(v["source"] == "assumed" for v in classes.values())  # a 2-vCPU run lacks most


@needs_binary
def test_given_latencies_are_used_and_per_node_locks_split(tmp_path):
    lat = tmp_path / "lat.json"
    lat.write_text(json.dumps({"package_remote": 400.0}))
    out = tmp_path / "o"
    res = _predict_cli(FIXTURE, "--topology=synthetic:pack:2 numa:2 core:8 pu:1",
                       f"--latencies={lat}", f"-o={out}", "--draws=30")
    assert res.returncode == 0, res.stderr
    doc = json.loads((out / "predicted.json").read_text())
    assert doc["latencies_ns"]["package_remote"] == {"ns": 400.0, "source": "given",
                                                    "why": f"--latencies={lat}"}
    per_node = [v for v in doc["variants"] if v["params"].get("zones") == "per_numa"]
    for v in per_node:
        assert v["curve"][-1]["lock_instances"] == 4
    # The report's section renders it, every number labelled predicted.
    html_parts = predict_report.predicted_sections(str(tmp_path / "nowhere"))
    assert html_parts == []
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    os.symlink(out, run_dir / "predicted-x")
    parts = predict_report.predicted_sections(str(run_dir))
    assert len(parts) == 1 and "Predicted for" in parts[0] and "PREDICTED" in parts[0]


@needs_binary
@pytest.mark.parametrize("args,needle", [
    (["--topology=/nonexistent.xml"], "the planner refused it"),
    (["--topology=synthetic:pack:2 numa:2 core:8 pu:1", "--latencies=/nonexistent.json"],
     "--latencies=/nonexistent.json"),
])
def test_bad_input_is_one_error_line_and_writes_nothing(tmp_path, args, needle):
    out = tmp_path / "o"
    res = _predict_cli(FIXTURE, *args, f"-o={out}")
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lockline: error:") and needle in lines[0]
    assert not out.exists()


@needs_binary
def test_lockline_predict_subcommand_and_plan_json(tmp_path):
    res = subprocess.run([BINARY, "--plan=json", "--topology=synthetic:pack:2 core:2 pu:2"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert len(plan["order"]) == 8 and plan["packages"] == 2
    assert {"pu", "core", "smt", "l2", "l3", "numa", "package"} <= set(plan["order"][0])
    out = tmp_path / "p"
    env = dict(os.environ, LOCKLINE_PLOTS_DIR=os.path.join(ROOT, "plots"))
    res = subprocess.run([BINARY, "predict", FIXTURE, "--topology=synthetic:pack:2 core:4 pu:1",
                          f"-o={out}", "--draws=20", "--no-figures"], capture_output=True,
                         text=True, timeout=300, env=env, check=False)
    assert res.returncode == 0, res.stderr
    assert (out / "predicted.json").is_file()
