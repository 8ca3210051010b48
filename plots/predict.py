#!/usr/bin/python3
"""Predict a run's lock-bound families on another machine: `lockline predict`.

    lockline predict RUN_DIR --topology=FILE.xml|synthetic:DESC [--latencies=FILE] [-o OUT]
                     [--fit-threads=1,2] [--threads=112,224] [--arch=x86|other]
                     [--target=CALIBRATION_RUN]
    lockline predict RUN --validate-against=OTHER_RUN [--fit-threads=1,2] [--target=...]
    plots/predict.py  RUN_DIR ...  (the same; `lockline predict` execs this)

Writes OUT/predicted.json and OUT/predicted-<family>.png (OUT defaults to
RUN_DIR/predicted-<topology name>/) through plots/predict_output.py; the inputs, the model
(plots/predict_fit.py) and what it leaves out are docs/prediction.md. Exit 0; 2 with one
`lockline: error:` line for bad input (before anything is written)."""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import json
import math
import os
import re
import shutil
import subprocess
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lockline_results import Point, ResultError, Run, grouped  # noqa: E402
from predict_fit import (ASSUMED_NS, CLASSES, LOCK_FAMILIES, NOT_MODELLED_COMPARISONS,  # noqa: E402
                         VariantInputs, _lock_x, _median_boot, c2c_by_class, clock_bias_ns, collect_variants,
                         fit_all, load_result, read_latencies, target_latencies, target_speed,
                         variant_key)
from predict_output import predicted_document, validation_report, write_figures  # noqa: E402
from outputs import write_atomic  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(msg: str) -> None:
    """Print one `lockline: error:` line and exit 2."""
    print(f"lockline: error: predict: {msg}", file=sys.stderr)
    sys.exit(2)


# Model uncertainty of extrapolating in thread count (log-scale standard deviation per e-fold of
# threads beyond the largest fitted count): issue 34/51's validations missed by 10-15 % from 2
# to 4 threads (one doubling: 0.7 e-folds) on rows the bootstrap alone covered 2 in 3 of.
EXTRAPOLATION_SIGMA = 0.2


def interval(ops: np.ndarray, noise: float, beyond: float = 1.0) -> Tuple[float, float]:
    """95 % interval of a predicted point: the model's bootstrap percentiles (draws 1..) widened in
    log space, in quadrature, by repetition_noise and EXTRAPOLATION_SIGMA per e-fold of `beyond`.
    Contains ops[0]."""
    p = float(ops[0])
    lo, hi = (np.percentile(ops[1:], [2.5, 97.5]) if ops.size > 2 else (p, p))
    lo, hi = min(float(lo), p), max(float(hi), p)
    z2 = (1.96 * noise) ** 2 + (1.96 * EXTRAPOLATION_SIGMA * math.log(max(beyond, 1.0))) ** 2
    wl = math.sqrt(math.log(p / lo) ** 2 + z2) if lo > 0 else math.inf
    wh = math.sqrt(math.log(hi / p) ** 2 + z2)
    return p * math.exp(-wl), p * math.exp(wh)


class InvariantError(Exception):
    """The prediction broke one of its own invariants (check_invariants)."""


def check_invariants(v: VariantInputs, rows: Sequence[Dict[str, Any]]) -> None:
    """InvariantError naming the variant and count when its curve has a lock utilization above 1,
    a point above the 1-thread rate x threads, or intervals narrowing away from the fit counts."""
    fitted = max(v.reps)
    one = next((r["ops_per_s"] for r in rows if r["threads"] == 1), None)
    width = 0.0
    for r in sorted(rows, key=lambda r: r["threads"]):
        n, where = r["threads"], f"{v.key} at {r['threads']} threads"
        if not r["lock_utilization"] <= 1.0 + 1e-9:
            raise InvariantError(f"{where}: lock utilization {r['lock_utilization']:.3f} > 1")
        if one is not None and not r["ops_per_s"] <= one * n * (1 + 1e-9):
            raise InvariantError(f"{where}: {r['ops_per_s']:.4g} ops/s exceeds the 1-thread "
                                 f"rate x threads ({one * n:.4g})")
        w = math.log(r["hi"] / r["lo"]) if r["lo"] > 0 else math.inf
        if n > fitted and w < width * (1 - 1e-9):
            raise InvariantError(f"{where}: interval narrower than nearer the inputs "
                                 f"(log width {w:.3f} < {width:.3f})")
        width = max(width, w) if n >= fitted else width


# ----------------------------------------------------------------------------- target plan

def find_lockline(explicit: Optional[str]) -> str:
    """The planning binary: --lockline (must be executable, never replaced), $LOCKLINE_BIN, the
    tree's build/lockline, or `lockline` on PATH."""
    if explicit and not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
        fail(f"--lockline={explicit}: not an executable file (accepted: a lockline binary)")
    for cand in (explicit, os.environ.get("LOCKLINE_BIN"),
                 os.path.join(os.path.dirname(HERE), "build", "lockline"),
                 shutil.which("lockline")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    fail("no lockline binary to plan the target with: build it (build/lockline), or give "
         "--lockline=PATH")
    return ""


def plan_target(binary: str, topology: str, pin: str) -> Dict[str, Any]:
    """`lockline --plan=json --topology=T --pin=P` parsed; fail()s with lockline's own error
    line when the planner refuses the topology."""
    cmd = [binary, "--plan=json", f"--topology={topology}", f"--pin={pin}"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        fail(f"cannot run {' '.join(cmd)}: {err}")
    if res.returncode != 0:
        msg = (res.stderr.strip().splitlines() or ["(no message)"])[-1]
        msg = re.sub(r"^lockline: error: ", "", msg)
        fail(f"--topology={topology}: the planner refused it: {msg}")
    try:
        plan = json.loads(res.stdout)
        assert isinstance(plan.get("order"), list) and plan["order"]
    except (ValueError, AssertionError, AttributeError):
        fail(f"{binary} --plan=json printed no plan (is it a lockline built with --plan=json?)")
    return plan


def class_pair_counts(pus: Sequence[Dict[str, Any]]) -> Dict[str, float]:
    """Ordered pairs (i != j) of `pus` per distance class (PairClass precedence), in O(n)."""
    def count(keyf) -> float:
        tally = collections.Counter(keyf(p) for p in pus)
        return float(sum(c * (c - 1) for c in tally.values()))

    def own(p, level):  # -1: no such object; the core stands in (shares with nobody)
        return (p[level],) if p.get(level, -1) >= 0 else ("core", p["core"])

    n = len(pus)
    total = float(n * (n - 1))
    same_core = count(lambda p: (p["package"], p["core"]))
    same_pkg = count(lambda p: (p["package"],))
    same_l2 = count(lambda p: (p["package"],) + own(p, "l2"))
    same_l3_not_l2 = count(lambda p: (p["package"],) + own(p, "l3")) - \
        count(lambda p: (p["package"],) + own(p, "l3") + own(p, "l2"))
    l2 = max(0.0, same_l2 - same_core)
    l3 = max(0.0, same_l3_not_l2)
    return {"smt": same_core, "l2_shared": l2, "l3_shared": l3,
            "package_local": max(0.0, same_pkg - same_core - l2 - l3),
            "package_remote": total - same_pkg}


def lock_groups(order: Sequence[Dict[str, Any]], threads: int, per_node: bool
                ) -> List[List[Dict[str, Any]]]:
    """The PUs of a `threads`-thread plan (a prefix of the placement order, as PlanThreads
    takes it) grouped by lock instance: one group, or one per NUMA node with per-node locks."""
    pus = list(order[:threads])
    return list(grouped(pus, lambda p: p.get("numa", -1)).values()) if per_node else [pus]


def curve_counts(plan: Dict[str, Any], extra: Sequence[int] = ()) -> List[int]:
    """Thread counts to predict: the target's planned counts plus a geometric grid up to the
    placement order's length (at most ~40 counts)."""
    top = len(plan["order"])
    counts = {int(c) for c in plan.get("threads_list", []) if 1 <= int(c) <= top}
    c = 1.0
    while c <= top:
        counts.add(int(round(c)))
        c *= 1.25
    counts.add(top)
    counts.update(x for x in extra if 1 <= x <= top)
    return sorted(counts)


# ----------------------------------------------------------------------------- the model

def latency_draws(lat: Dict[str, Dict[str, Any]], draws: int, rng: np.random.Generator
                  ) -> Dict[str, np.ndarray]:
    """Per class an array of draws: resampled medians for measured classes, constant else."""
    out = {}
    for c in CLASSES:
        s = lat[c].get("samples")
        if lat[c]["source"] == "measured" and s:
            a = np.asarray(s, dtype=float)
            out[c] = _median_boot(a, rng.integers(0, a.size, size=(draws, a.size)))
        else:
            out[c] = np.full(draws, float(lat[c]["ns"]))
    return out


def l3_neighbours(pus: Sequence[Dict[str, Any]]) -> float:
    """Threads per L3 among `pus` minus 1 (>= 0): the neighbours that share a thread's caches
    and memory path, the outside-work slowdown's argument (fit_draws: g)."""
    l3s = {(p.get("package"), p.get("l3") if p.get("l3", -1) >= 0 else ("core", p.get("core")))
           for p in pus}
    return max(0.0, len(pus) / max(1, len(l3s)) - 1.0)


def group_transfer(pair_counts: Dict[str, float], d: Dict[str, np.ndarray]) -> np.ndarray:
    """Mean one-way transfer (ns, per draw) between two successive holders: every ordered pair
    of the group's PUs equally likely."""
    total = sum(pair_counts.values())
    return (sum(pair_counts[c] / total * d[f"lat_{c}"] for c in CLASSES) if total > 0
            else np.zeros_like(d["s1"]))


def predict_pus(v: VariantInputs, pus: Sequence[Dict[str, Any]], d: Dict[str, np.ndarray]
                ) -> Tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """Per draw, of one thread on each of `pus`: (ops/s, waiting share, lock instances shared, the
    highest instance's utilization)."""
    groups = lock_groups(pus, len(pus), v.per_node)
    neighbours = l3_neighbours(pus)
    x, waiting, util = (np.zeros_like(d["s1"]) for _ in range(3))
    for g in groups:
        xg, wg, ug = _lock_x(len(g), group_transfer(class_pair_counts(g), d), v, d,
                             neighbours, stats=True)
        x, waiting, util = x + xg, waiting + wg, np.maximum(util, ug)
    return x * 1e9 / d["acq"], waiting / len(pus), len(groups), util


def predict_variant(v: VariantInputs, order, counts, d) -> List[Dict[str, Any]]:
    """The predicted curve: per count ops/s (point estimate, 95 % interval, widening past the
    fitted counts), lock instances, wait share and lock utilization; check_invariants'd."""
    rows = []
    for n in counts:
        ops, share, instances, util = predict_pus(v, order[:n], d)
        lo, hi = interval(ops, d.get("noise", 0.0), n / max(v.reps))
        wlo, whi = np.percentile(share[1:], [2.5, 97.5]) if ops.size > 2 else (share[0],) * 2
        if n > max(v.reps) and rows:  # never narrower than nearer the fitted counts
            prev = rows[-1]
            lo = min(lo, ops[0] * prev["lo"] / prev["ops_per_s"])
            hi = max(hi, ops[0] * prev["hi"] / prev["ops_per_s"])
        rows.append({"threads": n, "ops_per_s": float(ops[0]), "lo": float(lo),
                     "hi": float(hi), "wait_share": float(share[0]),
                     "wait_share_ci": [float(wlo), float(whi)],
                     "lock_instances": instances, "lock_utilization": float(util[0]),
                     "_draws": ops})
    check_invariants(v, rows)
    return rows


# ----------------------------------------------------------------------------- verdicts

def predicted_verdicts(variants: List[VariantInputs], curves: Dict[str, List[Dict]],
                       counts: Sequence[int], all_keys: Sequence[str] = (),
                       skipped: Sequence[str] = ()) -> List[Dict[str, Any]]:
    """verdicts.py's COMPARISONS on the predictions at the target's thread counts (effect of
    predicted ops/s, interval from the same paired draws), rows chosen as verdicts.py does; a pair
    without model input gives predicted false, effect and ci null and the reason."""
    from verdicts import COMPARISONS
    by_key = {v.key: v for v in variants}
    why_skipped = {s.split(": not predicted: ")[0]: s.split(": not predicted: ")[-1]
                   for s in skipped}
    keys = sorted(set(all_keys) | set(by_key))
    parsed = {k: dict(kv.split(":", 1) for kv in k.split("/")[1:]) for k in keys}
    out = []
    for spec in COMPARISONS:
        chosen: Dict[Tuple, Tuple[int, str, str]] = {}
        for key in keys:
            fam = key.split("/")[0]
            params = parsed[key]
            if fam != spec.bench or params.get(spec.param) != spec.base:
                continue
            if any(params.get(k, "") != val for k, val in spec.only):
                continue
            # The measured verdicts of these questions come from the stats:off twins; the
            # model's inputs are the instrumented rows' hold times (twins record none).
            if spec.uninstrumented and params.get("stats") == "off":
                continue
            other = dict(params, **{spec.param: spec.variant})
            vk = "/".join([fam] + [f"{k}:{val}" for k, val in sorted(other.items())])
            if vk not in parsed:
                continue
            group = tuple(params.get(g, "") for g in spec.group_by)
            score = sum(1 for k, val in spec.prefer if params.get(k, "") == val)
            if group not in chosen or score > chosen[group][0]:
                chosen[group] = (score, key, vk)
        for group, (_, bk, vk) in sorted(chosen.items()):
            words = ", ".join(f"{g} {val}" for g, val in zip(spec.group_by, group))
            lock = parsed[bk].get("lock", "")
            label = (f"[{spec.id}, {spec.bench} {lock} lock] {spec.variant_name} vs "
                     f"{spec.base_name}{', ' + words if words else ''}")
            reason = NOT_MODELLED_COMPARISONS.get(spec.id)
            if reason is None and (bk not in by_key or vk not in by_key):
                missing = bk if bk not in by_key else vk
                reason = f"{missing}: {why_skipped.get(missing, 'not predicted')}"
            for n in counts:
                if n == 1:
                    continue
                base = {"question": spec.question, "id": spec.id, "lock": lock,
                        "base_key": bk, "variant_key": vk, "threads": n}
                if reason is not None:
                    out.append(dict(base, effect=None, ci=None, predicted=False, reason=reason,
                                    text=f"{label}, {n} threads: not predicted ({reason})"))
                    continue
                cb = {r["threads"]: r for r in curves.get(bk, [])}
                cv = {r["threads"]: r for r in curves.get(vk, [])}
                if n not in cb or n not in cv:
                    continue
                eff = cv[n]["_draws"] / cb[n]["_draws"] - 1.0
                lo, hi = np.percentile(eff[1:], [2.5, 97.5])
                lo, hi = min(lo, eff[0]), max(hi, eff[0])
                text = (f"{label}, {n} threads on this topology: predicted "
                        f"{eff[0] * 100:+.1f} % [{lo * 100:+.1f}, {hi * 100:+.1f}]")
                out.append(dict(base, effect=float(eff[0]), ci=[float(lo), float(hi)],
                                predicted=True, text=text))
    return out

# ----------------------------------------------------------------------------- validation

def placement_pus(pl: Dict[str, Any], n: int) -> List[Dict[str, Any]]:
    """n PUs laid out as a row's placement summary says, threads spread evenly (distance classes
    and threads per L3 without the topology file)."""
    def num(k: str) -> int:
        try:
            return max(1, min(n, int(pl.get(k) or 1)))
        except (TypeError, ValueError):
            return 1
    pk, nodes, l3s, cores = num("packages"), num("numa_nodes"), num("l3s"), num("cores")
    nodes, l3s = max(nodes, pk), max(l3s, pk)
    out = []
    for i in range(n):
        core = i * cores // n
        l3 = core * l3s // cores
        out.append({"pu": i, "core": core, "l2": core, "l3": l3,
                    "numa": l3 * nodes // l3s, "package": l3 * pk // l3s})
    return out


def measured_points(run: Run, counts: Optional[Sequence[int]]) -> Dict[str, Dict[int, Any]]:
    """{variant key: {threads: (median ops_per_s, repetitions, placement)}} of the lock
    families' rows (no stats:off, lock-free rows: the model predicts neither)."""
    def measured(p: Point) -> bool:
        v = p.metrics.get("ops_per_s")
        return (p.family in LOCK_FAMILIES and not p.aggregate and p.bench == p.family
                and (counts is None or p.threads in counts) and isinstance(v, (int, float))
                and math.isfinite(v) and 0 < v <= 1e12)
    return {k: {n: (float(np.median([r.metrics["ops_per_s"] for r in rs])), len(rs),
                    rs[0].placement) for n, rs in grouped(ps, lambda p: p.threads).items()}
            for k, ps in grouped(filter(measured, run.points), variant_key).items()}


def validate_against(run_path: str, other_path: str, fit_threads: Optional[Sequence[int]],
                     latencies: Optional[str] = None, regime: str = "near", draws: int = 200,
                     seed: int = 26, target: Optional[str] = None) -> Dict[str, Any]:
    """`lockline predict RUN --validate-against=OTHER`: predict OTHER's lock-family points (at each
    row's placement) from RUN fitted at fit_threads, judged on OTHER's counts (RUN itself: the
    unfitted ones). Returns {"rows": [key, family, threads, predicted, lo, hi, measured, n, error,
    inside], "verdicts": [predicted vs measured effect], "notes": [...]}."""
    run = read_run(run_path)
    other = run if os.path.abspath(other_path) == os.path.abspath(run_path) else \
        read_run(other_path)
    same = other is run
    variants, skipped = collect_variants(run, fit_threads)
    if not variants:
        fail(f"{run_path}: no variant of {', '.join(LOCK_FAMILIES)} with 1-thread rows to fit")
    fitted = set(fit_threads) if fit_threads is not None else \
        {n for v in variants for n in v.reps}
    meas = measured_points(other, None)
    here = c2c_by_class(run, regime)
    tgt = read_target(target, variants, regime) if target else ({}, [], ({}, {}))
    there = merge_c2c(tgt[2], merge_c2c(c2c_by_class(other, regime), here, " (the input run's)"))
    lat = target_latencies(given_latencies(latencies), there[0], there[1], latencies or "")
    fits, _ = fit_run(run, variants, lat, here[0], draws, seed, tgt[0])
    rows, draws_of = [], {}
    for v in variants:
        for n, (m, reps, pl) in sorted(meas.get(v.key, {}).items()):
            if same and n in fitted:
                continue
            ops = predict_pus(v, placement_pus(pl or {}, n), fits[v.key])[0]
            lo, hi = interval(ops, fits[v.key]["noise"], n / max(v.reps))
            draws_of[(v.key, n)] = ops
            rows.append({"key": v.key, "family": v.family, "lock": v.lock, "threads": n,
                         "predicted": float(ops[0]), "lo": float(lo), "hi": float(hi),
                         "measured": m, "n": reps, "error": float(ops[0]) / m - 1.0,
                         "inside": bool(lo <= m <= hi), "fit": v.fit_summary})
    notes = [f"fitted on {os.path.basename(run_path)} at {sorted(fitted)} threads",
             f"judged on {os.path.basename(other_path)}"
             + (" at the counts not fitted on" if same else ""),
             "target latencies: " + ", ".join(f"{c} {lat[c]['ns']:.0f} ns ({lat[c]['source']})"
                                              for c in CLASSES)] + tgt[1] + \
        [c for v in variants for c in v.fit_summary["clipped"]]
    return {"rows": rows,
            "verdicts": validated_verdicts(variants, rows, draws_of, meas, skipped),
            "notes": notes + list(skipped)}


def validated_verdicts(variants: List[VariantInputs], rows: List[Dict[str, Any]],
                       draws_of: Dict[Tuple[str, int], np.ndarray],
                       meas: Dict[str, Dict[int, Any]], skipped: Sequence[str]
                       ) -> List[Dict[str, Any]]:
    """The seed comparisons at the judged counts: predicted effect beside the measured one, whether
    the sign is right and the effect within 2x (None below a 5 % measured effect)."""
    keys = {r["key"] for r in rows}
    counts = sorted({r["threads"] for r in rows})
    curves = {k: [{"threads": n, "_draws": o} for (kk, n), o in draws_of.items() if kk == k]
              for k in keys}
    verdicts = []
    for v in predicted_verdicts(variants, curves, counts, list(meas), skipped):
        mb = meas.get(v["base_key"], {}).get(v["threads"])
        mv = meas.get(v["variant_key"], {}).get(v["threads"])
        if not mb or not mv:
            continue
        m_eff = mv[0] / mb[0] - 1.0
        entry = dict(v, measured_effect=m_eff)
        if v["predicted"]:
            p = v["effect"]
            entry["right_sign"] = bool((p > 0) == (m_eff > 0)) if abs(m_eff) > 0 else None
            entry["within_2x"] = None if abs(m_eff) < 0.05 else bool(
                p * m_eff > 0 and 0.5 <= p / m_eff <= 2.0)
        verdicts.append(entry)
    return verdicts


def given_latencies(path: Optional[str]) -> Dict[str, float]:
    """read_latencies of --latencies ({} without one); fail()s with its one line."""
    try:
        return read_latencies(path) if path else {}
    except ValueError as err:
        fail(str(err))
    return {}


def merge_c2c(first, then, label: str = ""):
    """(samples, regimes) per class: `first`'s classes, the others from `then` (+ label)."""
    out, used = dict(first[0]), dict(first[1])
    for c in then[0]:
        if c not in out:
            out[c], used[c] = then[0][c], then[1][c] + label
    return out, used


def read_target(path: str, variants: Sequence[VariantInputs], regime: str):
    """--target: (speed ratios per variant, notes, c2c classes) of a run from the target; fail()s
    with one line."""
    run = read_run(path)
    try:
        speed, notes = target_speed(variants, run)
    except ValueError as err:
        fail(f"--target={path}: {err}")
    c2c = c2c_by_class(run, regime)
    regimes = {c: f"{r} (--target's)" for c, r in c2c[1].items()}
    notes = [f"--target={path}: 1-thread costs rescaled per variant (target / input "
             f"ns_per_op); c2c classes {', '.join(sorted(c2c[0])) or 'none'} from it"] + notes
    return speed, notes, (c2c[0], regimes)


def fit_run(run: Run, variants: Sequence[VariantInputs], lat: Dict[str, Dict[str, Any]],
            here: Dict[str, List[float]], draws: int, seed: int,
            speed: Optional[Dict[str, float]] = None
            ) -> Tuple[Dict[str, Dict[str, Any]], Tuple[float, str]]:
    """(fit_all of `variants` with the target's latency draws, (clock bias ns, why)), one generator
    seeded with `seed`; a row without coherence.regime_ns takes l3_shared (else package_local, else
    ASSUMED_NS)."""
    rng = np.random.default_rng(seed)
    lat_d = latency_draws(lat, draws, rng)
    bias = clock_bias_ns(run)
    fallback = float(np.median(here.get("l3_shared") or here.get("package_local") or
                               [ASSUMED_NS["l3_shared"]]))
    return fit_all(variants, draws, rng, bias[0], fallback, lat_d, speed), bias


# ----------------------------------------------------------------------------- main

@functools.lru_cache(maxsize=4)  # main() reads RUN for its emulated flag, then predict()
def read_run(path: str) -> Run:
    """load_run of a run directory, a lockline.json or a gzip-compressed one (.json.gz, as
    tests/fixtures/big-machine/ keeps it); fail()s with one line on anything unreadable."""
    path = result_path(path)
    try:
        return load_result(path)
    except ResultError as err:
        fail(str(err))
    except (OSError, EOFError, ValueError) as err:
        fail(f"{path}: cannot read a result file ({err})")
    except RecursionError:
        fail(f"{path}: nested too deeply to be a lockline result file")
    raise AssertionError("unreachable")


def topology_name(spec: str) -> str:
    """A directory-safe name for the target: the XML's base name or the synthetic string."""
    base = spec[len("synthetic:"):] if spec.startswith("synthetic:") else os.path.basename(spec)
    base = re.sub(r"\.xml$", "", base)
    return re.sub(r"[^A-Za-z0-9._-]+", "_", base).strip("_") or "topology"


def target_is_x86(topology: str) -> Optional[bool]:
    """True / False when the hwloc XML names the target's architecture or CPU vendor, None
    when it does not say (a synthetic topology)."""
    if topology.startswith("synthetic:"):
        return None
    try:
        with open(topology, encoding="utf-8", errors="replace") as handle:
            text = handle.read(1 << 22)
    except OSError:
        return None
    arch = re.search(r'name="Architecture" value="([^"]+)"', text)
    if arch:
        return arch.group(1) in ("x86_64", "i686", "i386", "x86")
    vendor = re.search(r'name="CPUVendor" value="([^"]+)"', text)
    if vendor:
        return vendor.group(1) in ("GenuineIntel", "AuthenticAMD", "HygonGenuine")
    return None


def predict(run_dir: str, topology: str, latencies: Optional[str] = None,
            out_dir: Optional[str] = None, lockline: Optional[str] = None,
            regime: str = "near", draws: int = 200, seed: int = 26,
            figures: bool = True, threads: Sequence[int] = (),
            fit_threads: Optional[Sequence[int]] = None, arch: str = "",
            target: Optional[str] = None) -> Dict[str, Any]:
    """Everything `lockline predict` does; returns the predicted.json document (also written). Bad
    input fail()s (one line, exit 2, nothing written)."""
    path = result_path(run_dir)
    run, shared = drop_time_shared(read_run(path))
    variants, skipped = collect_variants(run, fit_threads)
    if shared:
        skipped.append(f"{shared} multi-thread repetition(s) not fitted: their threads were "
                       "seen on fewer PUs than threads (placement.observed_pus), taking turns "
                       "on a PU, not sharing an L3 side by side")
    if not variants:
        fail(f"{path}: no 1-thread row of {', '.join(LOCK_FAMILIES)} with hold_ns and "
             "acquisitions_per_op (the model's inputs)")
    given = given_latencies(latencies)
    if draws < 20 or draws > 100000:
        fail(f"--draws={draws}: accepted 20..100000")
    run_pin = pin = str(run.lockline.get("pin") or "cores")
    if not re.fullmatch(r"[a-z-]+", pin):
        pin = "cores"  # an explicit PU list names the run's machine, not the target
    plan = plan_target(find_lockline(lockline), topology, pin)
    here = c2c_by_class(run, regime)
    tgt = read_target(target, variants, regime) if target else ({}, [], ({}, {}))
    there = merge_c2c(tgt[2], here, " (the input run's)") if target else here
    lat = target_latencies(given, there[0], there[1], latencies or "")
    x86 = {"x86": True, "other": False}.get(arch, target_is_x86(topology))
    assumed_note = assume_x86_latencies(lat) if x86 is False else ""
    out_dir = out_dir or os.path.join(os.path.dirname(os.path.abspath(path)),
                                      f"predicted-{topology_name(topology)}")
    make_out_dir(out_dir)

    fits, bias = fit_run(run, variants, lat, here[0], draws, seed, tgt[0])
    counts = curve_counts(plan, threads)
    try:
        curves = {v.key: predict_variant(v, plan["order"], counts, fits[v.key]) for v in variants}
    except InvariantError as err:
        fail(f"the prediction breaks its own invariant, not printed: {err}")
    target_counts = [c for c in plan.get("threads_list", []) if c in counts]
    all_keys = sorted({variant_key(p) for p in run.points if p.family in LOCK_FAMILIES and
                       p.bench == p.family and not p.aggregate})
    verdicts = predicted_verdicts(variants, curves, target_counts, all_keys, skipped)
    title = f"{topology_name(topology)} ({plan.get('packages')} packages, "\
            f"{plan.get('numa_nodes')} NUMA nodes, {plan.get('l3s')} L3s, {plan.get('pus')} PUs)"
    if assumed_note:
        for r in verdicts:
            r["text"] += " (latencies assumed: x86 figures)"
    doc = predicted_document(run, path, plan, title, x86, assumed_note, lat, regime, bias,
                             variants, curves, verdicts, skipped, draws, seed)
    # The input run's and the target's placement policy, and what the prediction assumes.
    doc["placement"] = {"input": run_pin, "target": pin, "note": (
        "the input run's threads were not pinned; the target's are laid out in cores order as "
        "if pinned, where an unpinned run goes where its scheduler puts it"
        if run_pin == "none" else "")}
    doc["notes"] = tgt[1] + [c for v in variants for c in v.fit_summary["clipped"]]
    try:
        doc["figures"] = write_figures(out_dir, doc["title"], variants, curves, assumed_note,
                                       str(run.context.get("date") or "")[:10]) \
            if figures else []
        write_atomic(os.path.join(out_dir, "predicted.json"), json.dumps(doc, indent=1))
    except OSError as err:
        fail(f"-o={out_dir}: cannot write the prediction there ({err})")
    doc["_out_dir"] = out_dir
    doc["_curves"] = curves
    return doc


def drop_time_shared(run: Run) -> Tuple[Run, int]:
    """(`run` without multi-thread repetitions seen on fewer PUs than threads, how many dropped):
    their slowdown is time slicing, not L3 sharing."""
    def shared(p: Point) -> bool:
        seen = p.placement.get("observed_pus") if isinstance(p.placement, dict) else None
        if p.aggregate or p.threads < 2 or not isinstance(seen, list):
            return False
        pus = {pu for t in seen if isinstance(t, list) for pu in t if isinstance(pu, int)}
        return 0 < len(pus) < p.threads
    kept = [p for p in run.points if not shared(p)]
    return dataclasses.replace(run, points=kept), len(run.points) - len(kept)


def assume_x86_latencies(lat: Dict[str, Dict[str, Any]]) -> str:
    """Non-x86 target: classes --latencies did not give are marked "assumed (x86 figures)" in
    `lat`; returns the note ("" when all were given)."""
    assumed = [c for c in CLASSES if lat[c]["source"] != "given"]
    for c in assumed:
        lat[c]["source"] = "assumed (x86 figures)"
        lat[c]["why"] = ("the target is not x86; this figure is an x86 one (" +
                         lat[c]["why"] + "): give --latencies for the target")
    return ("target latencies ASSUMED (x86 figures) on a non-x86 target: every "
            "predicted number below rests on them") if assumed else ""


def result_path(run: str) -> str:
    """RUN_DIR/lockline.json for a run directory, else `run` itself (a result file)."""
    return os.path.join(run, "lockline.json") if os.path.isdir(run) else run


def make_out_dir(out_dir: str) -> None:
    """Creates the output directory (and parents); fail()s with one line when `out_dir` is not
    a directory we can create or write (a file, a dangling symlink, no permission)."""
    if os.path.islink(out_dir) and not os.path.isdir(out_dir):
        fail(f"-o={out_dir}: a dangling symlink; accepted: a directory path")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        fail(f"-o={out_dir}: exists and is not a directory; accepted: a directory path")
    try:
        os.makedirs(out_dir, exist_ok=True)
    except (OSError, ValueError) as err:
        fail(f"-o={out_dir}: cannot create the output directory ({err})")
    if not os.access(out_dir, os.W_OK | os.X_OK):
        fail(f"-o={out_dir}: not writable")


def parse_counts(text: str, flag: str) -> List[int]:
    """A comma-separated list of thread counts >= 1 (at most 1e6); fail()s otherwise."""
    counts = [t for t in text.split(",") if t]
    if not all(t.isdigit() and 1 <= int(t) <= 10**6 for t in counts):
        fail(f"{flag}={text}: accepted a comma-separated list of counts 1..1000000")
    return [int(t) for t in counts]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (not argparse's usage + text)
        fail(message)


def build_parser() -> argparse.ArgumentParser:
    """`lockline predict`'s options (errors: one `lockline: error:` line, exit 2)."""
    ap = _Parser(prog="lockline predict", description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", help="run directory (or its lockline.json[.gz])")
    ap.add_argument("--topology",
                    help="hwloc XML (1.x or 2.x) or synthetic:DESCRIPTION of the target")
    ap.add_argument("--latencies", help="JSON of ns per class, or a c2c lockline.json")
    ap.add_argument("-o", "--out", help="output directory (default RUN_DIR/predicted-NAME)")
    ap.add_argument("--lockline", help="lockline binary that plans the target")
    ap.add_argument("--regime", default="near",
                    help="coherence regime of the input's c2c rows: near, far, all, lowest")
    ap.add_argument("--draws", default="200", help="bootstrap draws (20..100000)")
    ap.add_argument("--threads", default="", help="extra thread counts, e.g. 112,224")
    ap.add_argument("--fit-threads", default="",
                    help="thread counts of the input the model may be fitted on (must "
                    "include 1; default: all the input has)")
    ap.add_argument("--arch", choices=("x86", "other"), default="",
                    help="the target's architecture when its topology does not say")
    ap.add_argument("--allow-emulated", action="store_true",
                    help="predict from a run made in an emulator (labelled EMULATED)")
    ap.add_argument("--no-figures", action="store_true")
    ap.add_argument("--target", metavar="PATH",
                    help="a run on the target (lockline --calibrate-only, or any run with "
                    "1-thread and c2c rows): rescales the 1-thread costs, gives the latencies")
    ap.add_argument("--validate-against", metavar="OTHER_RUN",
                    help="predict OTHER_RUN's measured lock-family points (at their own "
                    "placements) from RUN and print predicted vs measured with coverage; "
                    "nothing is written")
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    a = build_parser().parse_args(argv)
    if not re.fullmatch(r"[0-9]{1,6}", a.draws) or not 20 <= int(a.draws) <= 100000:
        fail(f"--draws={a.draws}: accepted an integer 20..100000")
    draws = int(a.draws)
    regimes = ("near", "far", "all", "lowest")
    if a.regime not in regimes:
        fail(f"--regime={a.regime}: accepted {', '.join(regimes)}")
    extra = parse_counts(a.threads, "--threads")
    fit = parse_counts(a.fit_threads, "--fit-threads") or None
    if fit is not None and 1 not in fit:
        fail(f"--fit-threads={a.fit_threads}: must include 1 (the model's 1-thread inputs)")
    for flag, path, what in (("", a.run_dir, "result file"), ("--target=", a.target, "result file"),
                             ("--validate-against=", a.validate_against, "file")):
        if (path or not flag) and not os.path.exists(path):
            fail(f"{flag}{path}: no such run directory or {what}")
    if not a.validate_against and not a.topology:
        fail("--topology=FILE.xml|synthetic:DESCRIPTION is required (the target to predict)")
    for flag, path, to in (("", a.run_dir, ""),
                           ("--validate-against=", a.validate_against, " to check against")):
        if path and read_run(path).emulated and not a.allow_emulated:
            fail(f"{flag}{path}: the run was made in an emulator (its timings are not a "
                 f"machine's{to}); accepted: a run on real hardware, or --allow-emulated")
    if a.validate_against:
        print(validation_report(validate_against(result_path(a.run_dir),
                                                 result_path(a.validate_against), fit,
                                                 a.latencies, a.regime, draws, target=a.target)))
        return 0
    doc = predict(a.run_dir, a.topology, a.latencies, a.out, a.lockline, a.regime, draws,
                  figures=not a.no_figures, threads=extra, fit_threads=fit,
                  arch=a.arch, target=a.target)
    print(f"predicted for {doc['title']}: {len(doc['variants'])} variants, "
          f"{len(doc['verdicts'])} verdicts -> {doc['_out_dir']}/predicted.json")
    pl = doc["placement"]
    print(f"  placement: input run --pin={pl['input']}, target --pin={pl['target']}"
          + (f" ({pl['note']})" if pl["note"] else ""))
    for s in [s for s in doc["skipped"] if "not fitted" in s] + doc["notes"]:
        print("  " + s)
    for c in CLASSES:
        lat = doc["latencies_ns"][c]
        print(f"  {c:15s} {lat['ns']:8.1f} ns  {lat['source']}")
    for v in doc["verdicts"]:
        if v["threads"] in doc["topology"]["threads_list"][-2:]:
            print("  " + v["text"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
