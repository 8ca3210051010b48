#!/usr/bin/python3
"""Predict a run's lock-bound families on another machine: `lockline predict`.

    lockline predict RUN_DIR --topology=FILE.xml|synthetic:DESC [--latencies=FILE] [-o OUT]
    plots/predict.py  RUN_DIR --topology=...  (the same; `lockline predict` execs this)

For every family and variant of the run that takes a lock and records lock statistics
(`locks` stats:on, `zone_lock`, `pagevec`, `page_free`), predicts throughput against thread
count on the target topology, with the target's own placement plan from the planner the runs
use (`lockline --plan=json --topology=... --pin=<the run's pin>`), and the predicted seed
verdicts (plots/verdicts.py's COMPARISONS) at the target's thread counts. Writes
OUT/predicted.json and OUT/predicted-<family>.png (OUT defaults to
RUN_DIR/predicted-<topology name>/); plots/report.py shows them ("Predicted for TOPOLOGY").

Inputs, all from the run (read with plots/lockline_results.py, the one reader of result files):
per variant the 1-thread repetitions' `ns_per_op`, `hold_ns` and `acquisitions_per_op`
(think time per acquisition = ns_per_op / acquisitions_per_op - hold_ns); the lock kind
(`lock` parameter) and what the family's rows say about lines under the lock; and the
calibration rows' core-to-core matrix (`calibration/c2c:pingpong/...`, `latency_ns`, one-way)
reduced to a transfer cost per distance class (smt, l2_shared, l3_shared, package_local,
package_remote; the classes of bench/false_sharing.cpp's PairClass) in one coherence regime
(--regime, default the lowest: `near`). The target's class costs come from --latencies (a JSON
object of ns per class, or a lockline.json of `--benchmark_filter=calibration/c2c` run on the
target), else from this machine's classes; classes neither gives are filled from
ASSUMED_NS and marked "assumed" with their source.

The model: plots/queueing.py (a closed network per lock instance, exact MVA with a
waiter-dependent hand-off term; per-node locks, `zones:per_numa`, are one network per NUMA
node of the plan). Intervals: percentile bootstrap (fixed seed) over the input repetitions
(1-thread rows and c2c rows), propagated through the model.

Exit 0; 2 with one `lockline: error:` line for bad input (before anything is written).
"""

from __future__ import annotations

import argparse
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

from lockline_results import Point, ResultError, Run, load_run  # noqa: E402
import queueing  # noqa: E402

SCHEMA = 1
HERE = os.path.dirname(os.path.abspath(__file__))

# Distance classes between two PUs, nearest first (bench/false_sharing.cpp PairClass).
CLASSES = ("smt", "l2_shared", "l3_shared", "package_local", "package_remote")

# Used only for classes that neither --latencies nor this machine's c2c matrix gives; marked
# "assumed" in predicted.json and the report. One-way core-to-core latencies of the order
# published for current x86 servers (core-to-core latency charts of AnandTech and Chips and
# Cheese for AMD EPYC Rome/Milan and Intel Xeon Scalable, 2019-2023): SMT siblings ~7 ns,
# cores under one L2 ~20 ns, one L3 ~30 ns, another L3/die of the package ~100 ns, another
# package ~200 ns. Real machines differ by 2x either way: give --latencies for a real target.
ASSUMED_NS = {"smt": 7.0, "l2_shared": 20.0, "l3_shared": 30.0, "package_local": 100.0,
              "package_remote": 200.0}
ASSUMED_SOURCE = ("assumed: typical one-way core-to-core latency of current x86 servers "
                  "(published c2c charts, EPYC Rome/Milan, Xeon SP); not measured")

# How each lock kind hands off (harness/locks/*.h): handoff_lines = line transfers to the next
# holder (lock line; MCS also its queue node), waiter_reads = extra transfers per further
# waiter at a hand-off (every spinning ticket/TAS/TTAS waiter re-reads the lock line),
# spin_cap = how many waiters spin on the lock's own line.
LOCK_MODEL = {
    "tas": dict(handoff_lines=1.0, waiter_reads=1.0, spin_cap=10**9,
                note="test-and-set: every waiter spins with xchg on the lock line"),
    "ttas": dict(handoff_lines=1.0, waiter_reads=1.0, spin_cap=10**9,
                 note="test-and-test-and-set: every waiter re-reads the lock line per release"),
    "ticket": dict(handoff_lines=1.0, waiter_reads=1.0, spin_cap=10**9,
                   note="ticket: every waiter re-reads now_serving per release"),
    "pthread_spin": dict(handoff_lines=1.0, waiter_reads=1.0, spin_cap=10**9,
                         note="glibc pthread_spin_lock: test-and-test-and-set"),
    "mcs": dict(handoff_lines=2.0, waiter_reads=0.0, spin_cap=0,
                note="MCS: hands to one waiter (its queue node, then the lock's data line)"),
    "qspinlock": dict(handoff_lines=1.0, waiter_reads=0.0, spin_cap=1,
                      note="queued spinlock: only the head waiter spins on the lock word"),
    "pthread_mutex": dict(handoff_lines=1.0, waiter_reads=0.0, spin_cap=0,
                          note="sleeping lock: futex wake-up latency is NOT modelled"),
}

# How many holder writes to the lock's own line a spinning waiter steals (predict_lock);
# --steals sets it. "lower" (the default) fits the locks family's 2-thread points on the
# development VM (ticket +4 % against -27 % with "upper"; issue 26's closing note).
STEALS = "lower"

# Families whose rows carry lock statistics (harness/locks/lock_stat.h AddLockStatMetrics).
LOCK_FAMILIES = ("locks", "zone_lock", "pagevec", "page_free")


def fail(msg: str) -> None:
    """Print one `lockline: error:` line and exit 2."""
    print(f"lockline: error: predict: {msg}", file=sys.stderr)
    sys.exit(2)


# ----------------------------------------------------------------------------- inputs

def pair_class_from_placement(placement: Dict[str, Any]) -> Optional[str]:
    """Distance class of a 2-thread row from its placement summary (cores / L3s / packages
    spanned, SMT siblings). l2_shared cannot be told apart from l3_shared there (rows do not
    name the L2); such pairs count as l3_shared."""
    if not placement:
        return None
    if placement.get("smt_siblings"):
        return "smt"
    if int(placement.get("packages") or 1) > 1:
        return "package_remote"
    if int(placement.get("l3s") or 1) > 1:
        return "package_local"
    return "l3_shared"


def c2c_by_class(run: Run, regime: str) -> Tuple[Dict[str, List[float]], Dict[str, str]]:
    """The run's c2c repetitions (`latency_ns`) per distance class in one coherence regime.

    regime: a label (`near`, `far`, ...), `all` (pooled) or `lowest` (the lowest-latency
    regime each class has). Returns ({class: [ns, ...]}, {class: regime used})."""
    raw: Dict[str, Dict[str, List[float]]] = {}
    for p in run.points:
        if p.family != "calibration" or p.params.get("c2c") != "pingpong" or p.aggregate:
            continue
        v = p.metrics.get("latency_ns")
        cls = pair_class_from_placement(p.placement)
        if v is None or not math.isfinite(v) or v <= 0 or cls is None:
            continue
        raw.setdefault(cls, {}).setdefault(p.coherence or "unknown", []).append(float(v))
    out, used = {}, {}
    for cls, by in raw.items():
        if regime == "all":
            out[cls] = [v for vs in by.values() for v in vs]
            used[cls] = "all"
            continue
        if regime in by:
            out[cls], used[cls] = by[regime], regime
            continue
        if regime == "lowest" or regime == "near":
            label = min(by, key=lambda k: float(np.median(by[k])))
            out[cls], used[cls] = by[label], label
    return out, used


def read_latencies(path: str) -> Dict[str, float]:
    """--latencies: {"l3_shared": 30, ...} (optionally under "latencies_ns"), or a
    lockline.json of calibration/c2c rows run on the target (median of each class, lowest
    regime). Raises ValueError naming the file and what is accepted."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as err:
        raise ValueError(f"--latencies={path}: cannot read a JSON object ({err})") from None
    if isinstance(data, dict) and isinstance(data.get("benchmarks"), list):
        try:
            run = load_run(path)
        except ResultError as err:
            raise ValueError(f"--latencies={path}: {err}") from None
        samples, _ = c2c_by_class(run, "lowest")
        if not samples:
            raise ValueError(f"--latencies={path}: the result file has no calibration/c2c rows "
                             "with latency_ns")
        return {c: float(np.median(v)) for c, v in samples.items()}
    if isinstance(data, dict) and isinstance(data.get("latencies_ns"), dict):
        data = data["latencies_ns"]
    if not isinstance(data, dict) or not data:
        raise ValueError(f"--latencies={path}: expected a JSON object of ns per class "
                         f"({', '.join(CLASSES)})")
    out = {}
    for key, value in data.items():
        if key not in CLASSES:
            raise ValueError(f"--latencies={path}: unknown class '{key}'; accepted: "
                             f"{', '.join(CLASSES)}")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or \
                not math.isfinite(value) or value <= 0 or value > 1e6:
            raise ValueError(f"--latencies={path}: {key} = {value!r}; accepted: ns > 0 and "
                             "<= 1e6")
        out[key] = float(value)
    return out


def target_latencies(given: Dict[str, float], here: Dict[str, List[float]],
                     here_regime: Dict[str, str], source: str
                     ) -> Dict[str, Dict[str, Any]]:
    """Per class: {"ns", "source" (given|measured|assumed), "why", "samples" (measured only)}."""
    out: Dict[str, Dict[str, Any]] = {}
    for cls in CLASSES:
        if cls in given:
            out[cls] = {"ns": given[cls], "source": "given", "why": f"--latencies={source}"}
        elif cls in here:
            out[cls] = {"ns": float(np.median(here[cls])), "source": "measured",
                        "why": (f"this machine's calibration/c2c rows, regime "
                                f"{here_regime.get(cls)}, {len(here[cls])} repetitions"),
                        "samples": list(here[cls])}
        else:
            out[cls] = {"ns": ASSUMED_NS[cls], "source": "assumed", "why": ASSUMED_SOURCE}
    return out


def variant_key(p: Point) -> str:
    """`family/k:v/...` without the thread count (the row key's stem)."""
    return "/".join([p.bench] + [f"{k}:{v}" for k, v in sorted(p.params.items())])


def family_lines(p: Point) -> Tuple[float, float, str]:
    """(data_lines, lock_line_writes, why): lines written under the lock that the next holder
    must fetch besides the lock line, and holder writes per hold to the lock's own line (a
    spinning waiter steals the line back between them). From what the family's rows say."""
    d = p.row.get("details") if isinstance(p.row.get("details"), dict) else {}
    if p.family == "locks":
        return 0.0, 1.0, ("bench/locks.cpp: the counter sits on the lock's line (no other data "
                          "line); the holder writes it once per hold")
    if p.family == "zone_lock":
        shares = bool(d.get("movable_list_shares_lock_line"))
        nr_free = bool(d.get("order0_nr_free_shares_lock_line"))
        batch = float(p.params.get("pcp_batch", "31") or 31)
        per_hold = max(batch, 1.0)
        data = 2.0 - (1.0 if shares else 0.0)
        writes = per_hold if shares else (1.0 if nr_free else 0.0)
        return data, writes, (
            "zone_lock details: order-0 free list head "
            f"{'shares' if shares else 'does not share'} the lock line, nr_free "
            f"{'shares' if nr_free else 'does not'}; a refill/drain moves {per_hold:g} pages "
            "through the list head (a write each); data lines = free list head + nr_free")
    if p.family == "pagevec":
        return 2.0, 0.0, "assumed: the LRU list head line and the zone's LRU counters line"
    if p.family == "page_free":
        return 2.0, 0.0, "assumed: the LRU list head line and the zone's LRU counters line"
    return 1.0, 0.0, "assumed: one data line"


class VariantInputs:
    """The 1-thread repetitions of one variant and its model parameters."""

    def __init__(self, key: str, family: str, params: Dict[str, str], reps: List[Point]):
        self.key, self.family, self.params = key, family, dict(params)
        self.lock = params.get("lock", "")
        self.ns_per_op = np.array([r.metrics["ns_per_op"] for r in reps], dtype=float)
        self.hold = np.array([r.metrics["hold_ns"] for r in reps], dtype=float)
        self.acq = np.array([r.metrics["acquisitions_per_op"] for r in reps], dtype=float)
        # Time the 1-thread row itself waited for the lock (a pagevec scanner thread holds it
        # too): not outside work. ns per op.
        self.wait = np.array([r.metrics.get("wait_share", 0.0) * r.metrics["ns_per_op"]
                              for r in reps], dtype=float)
        self.per_node = params.get("zones") == "per_numa"
        self.data_lines, self.lock_writes, self.lines_why = family_lines(reps[0])
        self.model = LOCK_MODEL.get(self.lock)
        self.description = str(reps[0].row.get("description") or "")

    def summary(self) -> Dict[str, Any]:
        med = lambda a: float(np.median(a))  # noqa: E731
        return {"ns_per_op_1thread": med(self.ns_per_op), "hold_ns": med(self.hold),
                "acquisitions_per_op": med(self.acq),
                "think_ns_per_acquisition": max(0.0, (med(self.ns_per_op) - med(self.wait))
                                                / med(self.acq) - med(self.hold)),
                "wait_ns_per_op_1thread": med(self.wait),
                "repetitions": int(self.ns_per_op.size),
                "data_lines": self.data_lines, "lock_line_writes_per_hold": self.lock_writes,
                "lines_source": self.lines_why,
                "lock_model": {k: v for k, v in (self.model or {}).items()},
                "per_node_locks": self.per_node}


def collect_variants(run: Run) -> Tuple[List[VariantInputs], List[str]]:
    """Variants of the lock families with usable 1-thread repetitions; and notes on the ones
    left out (no hold_ns: stats:off rows; unknown lock kind)."""
    groups: Dict[str, List[Point]] = {}
    first: Dict[str, Point] = {}
    skipped: List[str] = []
    for p in run.points:
        if p.family not in LOCK_FAMILIES or p.aggregate or p.threads != 1:
            continue
        if p.bench != p.family:
            continue
        key = variant_key(p)
        m = p.metrics
        if not all(k in m and math.isfinite(m[k]) for k in ("ns_per_op", "hold_ns",
                                                               "acquisitions_per_op")):
            continue
        if m["acquisitions_per_op"] <= 0 or m["ns_per_op"] <= 0:
            continue
        groups.setdefault(key, []).append(p)
        first.setdefault(key, p)
    out = []
    for key in sorted(groups):
        p = first[key]
        if p.params.get("lock") not in LOCK_MODEL:
            skipped.append(f"{key}: lock kind '{p.params.get('lock')}' has no hand-off model")
            continue
        out.append(VariantInputs(key, p.family, p.params, groups[key]))
    return out, skipped


# ----------------------------------------------------------------------------- target plan

def find_lockline(explicit: Optional[str]) -> str:
    """The lockline binary that plans the target: --lockline, $LOCKLINE_BIN (set by
    `lockline predict`), the source tree's build/lockline, or `lockline` on PATH."""
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
    """Ordered pairs (i != j) of `pus` per distance class (PairClass precedence: same core ->
    smt, other package -> package_remote, same L2 -> l2_shared, same L3 -> l3_shared, else
    package_local), counted through nested keys in O(n)."""
    def count(keyf) -> float:
        tally: Dict[Tuple, int] = {}
        for p in pus:
            k = keyf(p)
            tally[k] = tally.get(k, 0) + 1
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
    if not per_node:
        return [pus]
    by: Dict[int, List[Dict[str, Any]]] = {}
    for p in pus:
        by.setdefault(p.get("numa", -1), []).append(p)
    return list(by.values())


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

def draw_inputs(v: VariantInputs, lat: Dict[str, Dict[str, Any]], draws: int,
                rng: np.random.Generator, lat_draws: Dict[str, np.ndarray]
                ) -> Dict[str, np.ndarray]:
    """Bootstrap draws (medians of resampled repetitions) of the variant's inputs; draw 0 is
    the point estimate (medians of all repetitions)."""
    # One index draw for all inputs: a repetition's ns_per_op, hold, acquisitions and wait
    # stay together.
    idx = rng.integers(0, v.ns_per_op.size, size=(draws, v.ns_per_op.size))

    def boot(a: np.ndarray) -> np.ndarray:
        out = np.median(a[idx], axis=1)
        out[0] = np.median(a)
        return out
    ns, hold, acq, wait = boot(v.ns_per_op), boot(v.hold), boot(v.acq), boot(v.wait)
    think = np.maximum((ns - wait) / acq - hold, 0.0)
    return {"hold": hold, "acq": acq, "think": think, **{f"lat_{c}": lat_draws[c]
                                                         for c in CLASSES}}


def latency_draws(lat: Dict[str, Dict[str, Any]], draws: int, rng: np.random.Generator
                  ) -> Dict[str, np.ndarray]:
    """Per class an array of draws: resampled medians for measured classes, constant else."""
    out = {}
    for c in CLASSES:
        s = lat[c].get("samples")
        if lat[c]["source"] == "measured" and s:
            a = np.asarray(s, dtype=float)
            idx = rng.integers(0, a.size, size=(draws, a.size))
            d = np.median(a[idx], axis=1)
            d[0] = np.median(a)
            out[c] = d
        else:
            out[c] = np.full(draws, float(lat[c]["ns"]))
    return out


def predict_lock(n: int, pair_counts: Dict[str, float], v: VariantInputs,
                 d: Dict[str, np.ndarray], stats: bool = False):
    """Acquisitions per ns of one lock instance shared by n threads, per draw; stats=True:
    (X, mean threads waiting (not holding) for the lock)."""
    if n == 1:
        x = 1.0 / (d["think"] + d["hold"])
        return (x, np.zeros_like(x)) if stats else x
    total = sum(pair_counts.values())
    transfer = sum(pair_counts[c] / total * d[f"lat_{c}"] for c in CLASSES)
    m = v.model
    # Holder writes to the lock line that a spinning waiter steals back. "upper": every such
    # write costs a transfer; "lower": at most one per transfer time of the 1-thread hold.
    writes = np.full_like(transfer, v.lock_writes)
    if STEALS == "lower":
        writes = np.minimum(writes, d["hold"] / np.maximum(transfer, 1e-9))
    j = np.arange(1, n + 1, dtype=float)[None, :]
    handoff = np.where(j == 1, (n - 1) / n, 1.0) * (m["handoff_lines"] + v.data_lines)
    handoff = handoff + m["waiter_reads"] * np.maximum(j - 2, 0)
    spinners = np.minimum(j - 1, m["spin_cap"])
    steal = writes[:, None] * (spinners > 0)
    service = d["hold"][:, None] + transfer[:, None] * (handoff + steal)
    x, q, u = queueing.birth_death(n, d["think"], service, stats=True)
    return (x, q - u) if stats else x


def predict_variant(v: VariantInputs, order, counts, d) -> List[Dict[str, Any]]:
    """The predicted curve: per count ops/s (point estimate, 95 % interval), lock instances,
    mean transfer ns and lock utilisation."""
    rows = []
    for n in counts:
        groups = lock_groups(order, n, v.per_node)
        x = np.zeros_like(d["hold"])
        waiting = np.zeros_like(d["hold"])
        for g in groups:
            xg, wg = predict_lock(len(g), class_pair_counts(g), v, d, stats=True)
            x, waiting = x + xg, waiting + wg
        ops = x * 1e9 / d["acq"]
        share = waiting / n  # share of the threads' time spent waiting for the lock
        lo, hi = np.percentile(ops[1:], [2.5, 97.5]) if ops.size > 2 else (ops[0], ops[0])
        wlo, whi = np.percentile(share[1:], [2.5, 97.5]) if ops.size > 2 else (share[0],) * 2
        rows.append({"threads": n, "ops_per_s": float(ops[0]), "lo": float(lo),
                     "hi": float(hi), "wait_share": float(share[0]),
                     "wait_share_ci": [float(wlo), float(whi)],
                     "lock_instances": len(groups), "_draws": ops})
    return rows


# ----------------------------------------------------------------------------- verdicts

def predicted_verdicts(variants: List[VariantInputs], curves: Dict[str, List[Dict]],
                       counts: Sequence[int]) -> List[Dict[str, Any]]:
    """plots/verdicts.py's COMPARISONS applied to the predictions at the target's planned
    thread counts: effect = variant / base - 1 of predicted ops/s, 95 % interval from the
    same bootstrap draws (paired: both sides use the same latency draws)."""
    try:
        from verdicts import COMPARISONS
    except ImportError:
        return []
    by_key = {v.key: v for v in variants}
    out = []
    for spec in COMPARISONS:
        bases = [v for v in variants if v.family == spec.bench and
                 v.params.get(spec.param) == spec.base]
        chosen: Dict[Tuple, Tuple[int, VariantInputs, VariantInputs]] = {}
        for b in bases:
            other = dict(b.params, **{spec.param: spec.variant})
            vk = "/".join([b.family] + [f"{k}:{val}" for k, val in sorted(other.items())])
            if vk not in by_key:
                continue
            group = tuple(b.params.get(g, "") for g in spec.group_by)
            score = sum(1 for k, val in spec.prefer if b.params.get(k) == val)
            if group not in chosen or score > chosen[group][0]:
                chosen[group] = (score, b, by_key[vk])
        for group, (_, b, var) in sorted(chosen.items()):
            cb = {r["threads"]: r for r in curves[b.key]}
            cv = {r["threads"]: r for r in curves[var.key]}
            for n in counts:
                if n == 1 or n not in cb or n not in cv:
                    continue
                eff = cv[n]["_draws"] / cb[n]["_draws"] - 1.0
                lo, hi = np.percentile(eff[1:], [2.5, 97.5])
                words = ", ".join(f"{g} {val}" for g, val in zip(spec.group_by, group))
                text = (f"{spec.variant_name} vs {spec.base_name}"
                        f"{', ' + words if words else ''}, {n} threads on this topology: "
                        f"predicted {eff[0] * 100:+.1f} % [{lo * 100:+.1f}, {hi * 100:+.1f}]")
                out.append({"question": spec.question, "base_key": b.key,
                            "variant_key": var.key, "threads": n, "effect": float(eff[0]),
                            "ci": [float(lo), float(hi)], "predicted": True, "text": text})
    return out


# ----------------------------------------------------------------------------- figures

def write_figures(out_dir: str, title: str, variants, curves) -> List[str]:
    """One PNG per family: predicted ops/s against threads, a 95 % band per variant."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    files = []
    fams = sorted({v.family for v in variants})
    for fam in fams:
        vs = [v for v in variants if v.family == fam]
        fig, ax = plt.subplots(figsize=(8, 5))
        for v in vs:
            c = curves[v.key]
            t = [r["threads"] for r in c]
            label = v.key[len(fam) + 1:]
            line, = ax.plot(t, [r["ops_per_s"] for r in c], lw=1, label=label)
            ax.fill_between(t, [r["lo"] for r in c], [r["hi"] for r in c],
                            color=line.get_color(), alpha=0.15, lw=0)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("threads (target placement plan)")
        ax.set_ylabel("predicted ops/s")
        ax.set_title(f"{fam}: PREDICTED for {title}", fontsize=10)
        if len(vs) <= 16:
            ax.legend(fontsize=6, loc="best")
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        name = f"predicted-{fam}.png"
        fig.savefig(os.path.join(out_dir, name), dpi=90)
        plt.close(fig)
        files.append(name)
    return files


# ----------------------------------------------------------------------------- validation

def validate_two_threads(run_path: str, draws: int = 200, seed: int = 26
                         ) -> List[Dict[str, Any]]:
    """Validation 1 of issue 26: each variant's 2-thread point predicted from the same run's
    1-thread rows and the transfer latency of the regime the 2-thread rows ran in
    (`coherence.regime_ns`: the c2c probe of that PU pair in that regime), against the 2-thread
    repetitions of that regime. One row per variant and regime with >= 2 repetitions:
    {key, family, lock, regime, transfer_ns, predicted, lo, hi, measured, n, error}
    (error = predicted / measured - 1; measured = median ops_per_s)."""
    try:
        run = load_run(run_path)
    except ResultError as err:
        fail(str(err))
    variants, _ = collect_variants(run)
    two: Dict[str, Dict[str, List[Point]]] = {}
    for p in run.points:
        if p.family in LOCK_FAMILIES and p.bench == p.family and not p.aggregate and \
                p.threads == 2 and "ops_per_s" in p.metrics and p.regime_ns and \
                p.regime_ns < 1e5:  # a regime of descheduled probes is no transfer cost
            two.setdefault(variant_key(p), {}).setdefault(p.coherence, []).append(p)
    rng = np.random.default_rng(seed)
    out = []
    for v in variants:
        for regime, reps in sorted(two.get(v.key, {}).items()):
            if len(reps) < 2:
                continue
            t = float(np.median([r.regime_ns for r in reps]))
            lat = {c: {"ns": t, "source": "given"} for c in CLASSES}
            d = draw_inputs(v, lat, draws, rng, latency_draws(lat, draws, rng))
            pair = [{"pu": 0, "core": 0, "l2": -1, "l3": 0, "numa": 0, "package": 0},
                    {"pu": 1, "core": 1, "l2": -1, "l3": 0, "numa": 0, "package": 0}]
            x = predict_lock(2, class_pair_counts(pair), v, d) * 1e9 / d["acq"]
            if v.per_node and int(reps[0].placement.get("numa_nodes") or 1) > 1:
                x = 2 * (1e9 / d["acq"]) / (d["think"] + d["hold"])
            meas = float(np.median([r.metrics["ops_per_s"] for r in reps]))
            lo, hi = np.percentile(x[1:], [2.5, 97.5])
            w = v.lock_writes if STEALS == "upper" else min(v.lock_writes,
                                                             float(np.median(v.hold)) / t)
            out.append({"key": v.key, "family": v.family, "lock": v.lock, "regime": regime,
                        "hold_1": float(np.median(v.hold)),
                        "hold_2_measured": float(np.median([r.metrics.get("hold_ns", np.nan)
                                                            for r in reps])),
                        "hold_2_model_with_waiter": float(np.median(v.hold)) +
                        (w * t if v.model["spin_cap"] > 0 else 0.0),
                        "transfer_ns": t, "predicted": float(x[0]), "lo": float(lo),
                        "hi": float(hi), "measured": meas, "n": len(reps),
                        "error": float(x[0]) / meas - 1.0})
    return out


def validation_table(rows: List[Dict[str, Any]]) -> str:
    """Markdown tables of validate_two_threads: per variant, then median |error| per family
    and lock kind (per regime)."""
    lines = ["| variant | regime | transfer ns | hold ns: 1 thread, 2 measured, 2 model "
             "| predicted ops/s [95 %] | measured ops/s (n) | error |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['key']} | {r['regime']} | {r['transfer_ns']:.0f} | "
                     f"{r['hold_1']:.0f}, {r['hold_2_measured']:.0f}, "
                     f"{r['hold_2_model_with_waiter']:.0f} | "
                     f"{r['predicted']:.3g} [{r['lo']:.3g}, {r['hi']:.3g}] | "
                     f"{r['measured']:.3g} ({r['n']}) | {r['error'] * 100:+.0f} % |")
    lines += ["", "| family | lock | regime | variants | median error | median abs error |",
              "|---|---|---|---|---|---|"]
    groups: Dict[Tuple[str, str, str], List[float]] = {}
    for r in rows:
        groups.setdefault((r["family"], r["lock"], r["regime"]), []).append(r["error"])
        groups.setdefault((r["family"], "all", r["regime"]), []).append(r["error"])
        groups.setdefault(("all", "all", r["regime"]), []).append(r["error"])
    for (fam, lock, reg), errs in sorted(groups.items()):
        lines.append(f"| {fam} | {lock} | {reg} | {len(errs)} | "
                     f"{np.median(errs) * 100:+.0f} % | "
                     f"{np.median(np.abs(errs)) * 100:.0f} % |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main

def topology_name(spec: str) -> str:
    """A directory-safe name for the target: the XML's base name or the synthetic string."""
    base = spec[len("synthetic:"):] if spec.startswith("synthetic:") else os.path.basename(spec)
    base = re.sub(r"\.xml$", "", base)
    return re.sub(r"[^A-Za-z0-9._-]+", "_", base).strip("_") or "topology"


def predict(run_dir: str, topology: str, latencies: Optional[str] = None,
            out_dir: Optional[str] = None, lockline: Optional[str] = None,
            regime: str = "near", draws: int = 200, seed: int = 26,
            figures: bool = True, threads: Sequence[int] = ()) -> Dict[str, Any]:
    """Everything `lockline predict` does; returns the predicted.json document (also written).

    Errors (fail(): one line, exit 2, nothing written): unreadable run, no lock family with
    1-thread rows, a topology the planner refuses, a bad --latencies file."""
    path = os.path.join(run_dir, "lockline.json") if os.path.isdir(run_dir) else run_dir
    try:
        run = load_run(path)
    except ResultError as err:
        fail(str(err))
    variants, skipped = collect_variants(run)
    if not variants:
        fail(f"{path}: no 1-thread row of {', '.join(LOCK_FAMILIES)} with hold_ns and "
             "acquisitions_per_op (the model's inputs)")
    given = {}
    if latencies:
        try:
            given = read_latencies(latencies)
        except ValueError as err:
            fail(str(err))
    if draws < 20 or draws > 100000:
        fail(f"--draws={draws}: accepted 20..100000")
    lctx = run.context.get("lockline", {}) if isinstance(run.context.get("lockline"), dict) \
        else {}
    pin = str(lctx.get("pin") or "cores")
    if not re.fullmatch(r"[a-z-]+", pin):
        pin = "cores"  # an explicit PU list names the run's machine, not the target
    plan = plan_target(find_lockline(lockline), topology, pin)
    here, here_regime = c2c_by_class(run, regime)
    lat = target_latencies(given, here, here_regime, latencies or "")
    run_dir_abs = os.path.dirname(os.path.abspath(path))
    out_dir = out_dir or os.path.join(run_dir_abs, f"predicted-{topology_name(topology)}")
    os.makedirs(out_dir, exist_ok=True)

    rng = np.random.default_rng(seed)
    lat_d = latency_draws(lat, draws, rng)
    counts = curve_counts(plan, threads)
    curves = {}
    for v in variants:
        d = draw_inputs(v, lat, draws, rng, lat_d)
        curves[v.key] = predict_variant(v, plan["order"], counts, d)
    target_counts = [c for c in plan.get("threads_list", []) if c in counts]
    verdicts = predicted_verdicts(variants, curves, target_counts)
    title = f"{topology_name(topology)} ({plan.get('packages')} packages, "\
            f"{plan.get('numa_nodes')} NUMA nodes, {plan.get('l3s')} L3s, {plan.get('pus')} PUs)"
    doc = {
        "schema": SCHEMA, "predicted": True,
        "topology": {k: plan.get(k) for k in ("source", "packages", "numa_nodes", "l3s",
                                              "cores", "pus", "usable_pus", "pin",
                                              "threads_list")},
        "title": title,
        "run": {"path": os.path.abspath(path), "host": run.context.get("host_name"),
                "git_commit": lctx.get("git_commit"), "cpu_model": lctx.get("cpu_model")},
        "latencies_ns": {c: {k: v for k, v in lat[c].items() if k != "samples"}
                         for c in CLASSES},
        "regime": regime,
        "steals": STEALS,
        "model": ("closed queueing network per lock instance (plots/queueing.py): N threads "
                  "think (outside work per acquisition, from the 1-thread rows) and queue FCFS "
                  "for the lock; service = hold + transfers to the next holder at the mean "
                  "one-way latency between plan PUs (every ordered pair equally likely); "
                  "ticket/TAS/TTAS add one transfer per further waiter and per holder write "
                  "to the lock line a spinner steals; MCS/qspinlock hand to one waiter; "
                  "exact product-form (MVA) solution; zones:per_numa = one network per node"),
        "simplifications": [
            "exponential think and service times (MVA); successive holders are a uniformly "
            "random pair of the plan's PUs (no NUMA-aware or unfair hand-off order)",
            "hold time under contention = the 1-thread hold plus modelled transfers "
            "(no bandwidth or interconnect saturation, no memory-placement effects)",
            "pagevec scanner threads and the page_free remote-free path are not in the "
            "model; sleeping locks' wake-up latency is not modelled",
            "lines under the lock: from the family's rows where they say (zone_lock), "
            "assumed otherwise (see each variant's lines_source)"],
        "bootstrap": {"draws": draws, "seed": seed,
                      "over": "1-thread repetitions of each variant and c2c repetitions"},
        "skipped": skipped,
        "variants": [],
        "verdicts": verdicts,
    }
    for v in variants:
        doc["variants"].append({
            "key": v.key, "family": v.family, "params": v.params, "lock": v.lock,
            "description": v.description, "inputs": v.summary(),
            "curve": [{k: r[k] for k in r if not k.startswith("_")} for r in curves[v.key]]})
    doc["figures"] = write_figures(out_dir, title, variants, curves) if figures else []
    tmp = os.path.join(out_dir, "predicted.json.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(doc, handle, indent=1)
    os.replace(tmp, os.path.join(out_dir, "predicted.json"))
    doc["_out_dir"] = out_dir
    doc["_curves"] = curves
    return doc


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="lockline predict", description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", help="run directory (or its lockline.json)")
    ap.add_argument("--topology",
                    help="hwloc XML (1.x or 2.x) or synthetic:DESCRIPTION of the target")
    ap.add_argument("--latencies", help="JSON of ns per class, or a c2c lockline.json")
    ap.add_argument("-o", "--out", help="output directory (default RUN_DIR/predicted-NAME)")
    ap.add_argument("--lockline", help="lockline binary that plans the target")
    ap.add_argument("--regime", default="near",
                    help="coherence regime of this machine's c2c rows (near, far, all)")
    ap.add_argument("--draws", type=int, default=200, help="bootstrap draws (20..100000)")
    ap.add_argument("--threads", default="", help="extra thread counts, e.g. 112,224")
    ap.add_argument("--no-figures", action="store_true")
    ap.add_argument("--steals", choices=("upper", "lower"), default="lower",
                    help="holder writes to the lock line a spinning waiter steals: every one "
                    "(upper) or at most hold/transfer (lower, the default: it fits the "
                    "locks family's 2-thread points on the development VM)")
    ap.add_argument("--validate-here", action="store_true",
                    help="print issue 26's validation 1 (2-thread points of this run predicted "
                    "from its 1-thread rows) as Markdown and exit; --topology is ignored")
    a = ap.parse_args(argv)
    global STEALS
    STEALS = a.steals
    if a.validate_here:
        path = os.path.join(a.run_dir, "lockline.json") if os.path.isdir(a.run_dir) \
            else a.run_dir
        print(validation_table(validate_two_threads(path, a.draws)))
        return 0
    if not a.topology:
        fail("--topology=FILE.xml|synthetic:DESCRIPTION is required (the target to predict)")
    extra = []
    for t in filter(None, a.threads.split(",")):
        if not t.isdigit() or int(t) < 1:
            fail(f"--threads={a.threads}: accepted a comma-separated list of counts >= 1")
        extra.append(int(t))
    if not os.path.exists(a.run_dir):
        fail(f"{a.run_dir}: no such run directory")
    doc = predict(a.run_dir, a.topology, a.latencies, a.out, a.lockline, a.regime, a.draws,
                  figures=not a.no_figures, threads=extra)
    print(f"predicted for {doc['title']}: {len(doc['variants'])} variants, "
          f"{len(doc['verdicts'])} verdicts -> {doc['_out_dir']}/predicted.json")
    for c in CLASSES:
        l = doc["latencies_ns"][c]
        print(f"  {c:15s} {l['ns']:8.1f} ns  {l['source']}")
    for v in doc["verdicts"]:
        if v["threads"] in doc["topology"]["threads_list"][-2:]:
            print("  " + v["text"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
