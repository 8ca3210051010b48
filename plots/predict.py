#!/usr/bin/python3
"""Predict a run's lock-bound families on another machine: `lockline predict`.

    lockline predict RUN_DIR --topology=FILE.xml|synthetic:DESC [--latencies=FILE] [-o OUT]
                     [--fit-threads=1,2] [--threads=112,224] [--arch=x86|other]
    lockline predict RUN --validate-against=OTHER_RUN [--fit-threads=1,2] [--latencies=FILE]
    plots/predict.py  RUN_DIR ...  (the same; `lockline predict` execs this)

For every family and variant of the run that takes a lock and records lock statistics
(`locks` stats:on, `zone_lock`, `pagevec`, `page_free`), predicts throughput against thread
count on the target topology, with the target's own placement plan from the planner the runs
use (`lockline --plan=json --topology=... --pin=<the run's pin>`), and the predicted seed
verdicts (plots/verdicts.py's COMPARISONS) at the target's thread counts. Writes
OUT/predicted.json and OUT/predicted-<family>.png (OUT defaults to
RUN_DIR/predicted-<topology name>/); plots/report.py shows them ("Predicted for TOPOLOGY").

Inputs, all from the run (read with plots/lockline_results.py, the one reader of result files):
per variant the repetitions at 1 thread and at the run's multi-thread counts (--fit-threads
limits them: 2 on a small machine, up to 4 in the 16-core file; never the counts a prediction
is judged by): `ops_per_s`, `ns_per_op`, `hold_ns`, `acquisitions_per_op`, `wait_share`,
`contended_share` and the pair transfer of the row's coherence regime (`coherence.regime_ns`);
the lock kind (`lock` parameter) and what the family's rows say about lines under the lock;
and the calibration rows' core-to-core matrix (`calibration/c2c:pingpong/...`, `latency_ns`,
one-way) reduced to a transfer cost per distance class (smt, l2_shared, l3_shared,
package_local, package_remote; bench/false_sharing.cpp's PairClass) in one coherence regime
(--regime: near (default), far, all, lowest). The target's class costs come from --latencies
(a JSON object of ns per class, or a lockline.json of calibration/c2c rows run on the
target), else from this machine's classes; classes neither gives are ASSUMED_NS, marked
"assumed", and "assumed (x86 figures)" on a target that is not x86.

The model (fit_draws, _lock_x): plots/queueing.py's closed network per lock instance, one per
NUMA node of the target for the families whose kernel lock is per zone or per node
(LOCK_SCOPE); threads placed by the planner's order. Fitted on the multi-thread rows: the
lines the holder touches that the previous holder wrote (moved at the transfer between
successive holders), the outside-work slowdown with neighbours sharing an L3 (pooled over the
variants with the same outside work), and, with >= 3-thread rows, the bounded waiter term
(else the lock kind's structural prior). Not predicted (listed with the reason): stats:off
rows, the lock-free fast path, slots:auto policies, the alignment comparison.
Intervals: percentile bootstrap (fixed seed) over the input repetitions and c2c repetitions,
widened by the repetition noise of a measured median.

`--validate-against=OTHER_RUN` predicts OTHER_RUN's lock-family points (at each row's own
placement) from RUN and prints predicted vs measured per family and thread count, with the
share inside the 95 % interval and the seed comparisons (validate_against).

Outputs are written through a temporary file opened O_NOFOLLOW | O_EXCL and renamed (a planted
symlink is replaced, never followed). A run made in an emulator is refused unless
--allow-emulated (then labelled EMULATED).

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

# Largest one-way transfer (ns) taken as one: longer c2c repetitions are a descheduled probe.
MAX_TRANSFER_NS = 1e6

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
    if not isinstance(placement, dict) or not placement:
        return None

    def count(key: str) -> Optional[int]:
        v = placement.get(key)
        if v is None:
            return 1
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return None
        return int(v)
    packages, l3s = count("packages"), count("l3s")
    if packages is None or l3s is None:
        return None  # a malformed placement summary: the row says nothing usable
    if placement.get("smt_siblings") is True:
        return "smt"
    if packages > 1:
        return "package_remote"
    if l3s > 1:
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
        # > 1 ms one way is no line transfer (a descheduled probe, or a corrupt value).
        if v is None or not math.isfinite(v) or v <= 0 or v > MAX_TRANSFER_NS or cls is None:
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
        # The regime asked for is absent for this class: the lowest one, said so (never a
        # silent fall back to assumed figures).
        label = min(by, key=lambda k: float(np.median(by[k])))
        out[cls] = by[label]
        used[cls] = label if regime in ("lowest", "near") else \
            f"{label} (no '{regime}' rows for this class)"
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
    except RecursionError:
        raise ValueError(f"--latencies={path}: nested too deeply; accepted: a flat JSON "
                         "object of ns per class") from None
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
        acq = float(p.metrics.get("acquisitions_per_op") or 0.0)
        if p.params.get("kernel") == "2.6.9" and acq > 0:
            per_hold = 1.0 / acq  # pages per hold (an op is a page)
            return 1.0, 2.0 * per_hold, (
                "bench/pagevec.h LruZone: 2.6.9's lru_lock, active list head and nr_active "
                f"share one line; a hold adds {per_hold:.1f} pages (list head + nr_active "
                "written per page) on the lock's line; struct pages on their own lines")
        return 3.0, 0.0, ("bench/pagevec.h LruZone: 5.8's lruvec lists, lru_zone_size and "
                          "the LRU counters are on lines of their own (lock line: the lock)")
    if p.family == "page_free":
        return 2.0, 3.0, (
            "bench/page_free.cpp LruZone: lru_lock, the LRU list head and nr_lru share one "
            "line (2.6.16's struct zone); a free writes nr_lru and the list through it, a "
            "1-in-14 LRU add writes the head per page: about 3 writes per hold on the "
            "lock's line")
    return 1.0, 0.0, "assumed: one data line"


# Lock scope per family and kernel version: which lock instance the family's rows model and
# how many of it a target machine has. Runs are `zones:1` (one zone for all threads, the worst
# case); the kernel has one instance per zone or per node, so predict builds one network per
# NUMA node of the target. (Sources: include/linux/mmzone.h@v2.6.9 struct zone: `spinlock_t
# lock` (free lists) and `spinlock_t lru_lock` (the LRU lists) per zone, zones per node in
# struct pglist_data.node_zones; include/linux/mmzone.h@v5.8 struct pglist_data: `spinlock_t
# lru_lock` per node (moved from struct zone in v4.8, 599d0c954f91 "mm, vmscan: move LRU lists
# to node"), struct zone keeps `spinlock_t lock`; mm/page_alloc.c@v4.0 rmqueue_bulk /
# free_pcppages_bulk take zone->lock of the page's own zone. Line numbers not re-read here.)
LOCK_SCOPE = {
    ("zone_lock", ""): ("node", "zone->lock: one per zone of each node (mm/page_alloc.c "
                        "rmqueue_bulk / free_pcppages_bulk; struct zone, mmzone.h); the pcp "
                        "refills of a thread's pages go to its own node's zone"),
    ("pagevec", "2.6.9"): ("node", "2.6.9 zone->lru_lock: one per zone (struct zone, "
                           "include/linux/mmzone.h@v2.6.9); a node's pages are on its own "
                           "zones' LRUs"),
    ("pagevec", "5.8"): ("node", "5.8 pgdat->lru_lock: one per node (struct pglist_data, "
                         "include/linux/mmzone.h@v5.8; per node since v4.8)"),
    ("page_free", ""): ("node", "2.6.x zone->lru_lock: one per zone (mm/swap.c "
                        "__page_cache_release); a node's pages are on its own zones' LRUs"),
    ("locks", ""): ("machine", "the benchmark's one lock, shared by every thread"),
}


def lock_scope(family: str, params: Dict[str, str]) -> Tuple[str, str]:
    """(level, why): "node" = one lock instance per NUMA node of the target, "machine" = one
    for all threads; from the family and, for pagevec, the kernel version it models."""
    return LOCK_SCOPE.get((family, params.get("kernel", "")),
                          LOCK_SCOPE.get((family, ""), ("machine", "one lock (assumed)")))


# The waiter term (extra transfers per hand-off for each further spinning waiter) is bounded:
# k further waiters cost a * k / (1 + k / WAITER_HALF) transfers, at most a * WAITER_HALF. The
# reads of a line the holder released are served by the shared cache in parallel past a few
# readers; an unbounded term predicted 25-45 us per hand-off at 224 threads (issue 34).
WAITER_HALF = 4.0

# Structural waiter coefficient per lock kind (transfers per further waiter) used when the
# input has no row with >= 3 threads at a lock to fit it on (a 2-thread row has no further
# waiter). Ticket: every waiter re-reads now_serving before the next ticket sees its turn
# (Boyd-Wickizer et al. 2012); TAS/TTAS/pthread_spin: the waiters' reads and one xchg race per
# release, about half a transfer each (they go in parallel with the winner's); queued locks
# (MCS, qspinlock's MCS queue) hand to one waiter: 0. qspinlock's queue (>= 2 waiters) adds one
# hand-off line (the MCS node of the next waiter, kernel/locking/qspinlock.c@v5.8
# queued_spin_lock_slowpath: arch_mcs_spin_unlock_contended after taking the lock).
WAITER_PRIOR = {"ticket": 1.0, "tas": 0.5, "ttas": 0.5, "pthread_spin": 0.5, "mcs": 0.0,
                "qspinlock": 0.0, "pthread_mutex": 0.0}
QUEUE_LINES = {"qspinlock": 1.0}

# Families whose rows have no model input and are listed "not predicted" instead.
NOT_PREDICTED_PARAMS = (
    ("stats", "off", "stats:off rows record no hold time (no model input)"),
    ("slots", "auto", "the pagevec size follows the machine's CPU count (policy), so its "
                      "acquisitions per op on the target are not the input's; not modelled"),
)
# Comparisons the model has no input for (verdicts.py ids).
NOT_MODELLED_COMPARISONS = {
    "pv_offset_0_8": "alignment (offset) changes which lines a pagevec spans; the model has "
                     "no input for how that moves on the target",
}


def _median_boot(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    out = np.median(a[idx], axis=1)
    out[0] = np.median(a)
    return out


class VariantInputs:
    """One variant's repetitions at the fit thread counts (1 and the input's multi-thread
    counts allowed by --fit-threads) and what the model knows about its lock."""

    def __init__(self, key: str, family: str, params: Dict[str, str],
                 reps: Dict[int, List[Point]]):
        self.key, self.family, self.params = key, family, dict(params)
        self.lock = params.get("lock", "")
        self.reps = {n: list(r) for n, r in sorted(reps.items())}
        one = self.reps[1]
        self.ns_per_op = np.array([r.metrics["ns_per_op"] for r in one], dtype=float)
        self.hold = np.array([r.metrics["hold_ns"] for r in one], dtype=float)
        self.acq = np.array([r.metrics["acquisitions_per_op"] for r in one], dtype=float)
        self.wait = np.array([r.metrics.get("wait_share", 0.0) * r.metrics["ns_per_op"]
                              for r in one], dtype=float)
        self.scope, self.scope_why = lock_scope(family, params)
        self.per_node = self.scope == "node"
        self.data_lines, self.lock_writes, self.lines_why = family_lines(one[0])
        self.model = LOCK_MODEL.get(self.lock)
        self.description = str(one[0].row.get("description") or "")
        self.fit_summary: Dict[str, Any] = {}

    def fit_counts(self) -> List[int]:
        return [n for n in self.reps if n >= 2]

    def summary(self) -> Dict[str, Any]:
        med = lambda a: float(np.median(a))  # noqa: E731
        return {"ns_per_op_1thread": med(self.ns_per_op), "hold_ns": med(self.hold),
                "acquisitions_per_op": med(self.acq),
                "think_ns_per_acquisition": max(0.0, (med(self.ns_per_op) - med(self.wait))
                                                / med(self.acq) - med(self.hold)),
                "wait_ns_per_op_1thread": med(self.wait),
                "repetitions": int(self.ns_per_op.size),
                "fit_threads": self.fit_counts(),
                "repetitions_per_count": {str(n): len(r) for n, r in self.reps.items()},
                "lock_scope": self.scope, "lock_scope_source": self.scope_why,
                "data_lines": self.data_lines, "lock_line_writes_per_hold": self.lock_writes,
                "lines_source": self.lines_why,
                "lock_model": {k: v for k, v in (self.model or {}).items()},
                "per_node_locks": self.per_node, "fit": self.fit_summary}


def _usable(p: Point) -> bool:
    """The row carries the model's inputs with physical values (finite, >= 0, ns and ops/s
    below 1e12, acquisitions per op below 1e6); a row with 1e308 or negative values is left
    out, not propagated."""
    m = p.metrics
    lim = {"ns_per_op": 1e12, "hold_ns": 1e12, "acquisitions_per_op": 1e6, "ops_per_s": 1e12}
    return all(k in m and isinstance(m[k], (int, float)) and math.isfinite(m[k]) and
               (0 <= m[k] if k in ("hold_ns", "acquisitions_per_op") else 0 < m[k]) and
               m[k] <= top
               for k, top in lim.items())


def collect_variants(run: Run, fit_threads: Optional[Sequence[int]] = None
                     ) -> Tuple[List[VariantInputs], List[str]]:
    """Variants of the lock families with usable 1-thread repetitions, with their
    repetitions at the fit thread counts (fit_threads: the counts the model may be fitted on;
    None = every count the run has); and notes on the variants not predicted (stats:off rows,
    the lock-free fast path, an unknown lock kind)."""
    groups: Dict[str, Dict[int, List[Point]]] = {}
    first: Dict[str, Point] = {}
    skipped: List[str] = []
    seen_skip = set()
    for p in run.points:
        if p.family not in LOCK_FAMILIES or p.aggregate or p.bench != p.family:
            continue
        if fit_threads is not None and p.threads not in fit_threads:
            continue
        key = variant_key(p)
        why = next((w for k, v, w in NOT_PREDICTED_PARAMS if p.params.get(k) == v), None)
        if why is not None:
            if key not in seen_skip:
                seen_skip.add(key)
                skipped.append(f"{key}: not predicted: {why}")
            continue
        if not _usable(p) or p.metrics["ns_per_op"] <= 0:
            continue
        groups.setdefault(key, {}).setdefault(p.threads, []).append(p)
        first.setdefault(key, p)
    out = []
    for key in sorted(groups):
        p = first[key]
        acq = [r.metrics["acquisitions_per_op"] for reps in groups[key].values() for r in reps]
        if float(np.median(acq)) <= 0:
            skipped.append(f"{key}: not predicted: takes no lock (the lock-free fast path: "
                           "acquisitions_per_op 0); not modelled")
            continue
        # A repetition of a lock-taking variant that recorded no acquisition is no input.
        groups[key] = {n: [r for r in reps if r.metrics["acquisitions_per_op"] > 0]
                       for n, reps in groups[key].items()}
        groups[key] = {n: reps for n, reps in groups[key].items() if reps}
        if 1 not in groups[key]:
            skipped.append(f"{key}: not predicted: no 1-thread row")
            continue
        if p.params.get("lock") not in LOCK_MODEL:
            skipped.append(f"{key}: not predicted: lock kind '{p.params.get('lock')}' has no "
                           "hand-off model")
            continue
        out.append(VariantInputs(key, p.family, p.params, groups[key]))
    return out, sorted(skipped)


def clock_bias_ns(run: Run) -> Tuple[float, str]:
    """ns a sampled hold_ns carries besides the critical section: the clock read inside it
    (harness/locks/lock_stat.h: a sampled hold reads the clock after acquiring and before
    releasing). Estimated from the `locks` cs:0 stats:on 1-thread rows, whose critical section
    is nearly empty: median of hold_ns - ns_per_op (>= 0); 0 without such rows."""
    vals = [p.metrics["hold_ns"] - p.metrics["ns_per_op"] for p in run.points
            if p.family == "locks" and p.threads == 1 and not p.aggregate and
            p.params.get("cs") == "0" and p.params.get("stats") != "off" and _usable(p)]
    if not vals:
        return 0.0, "no locks cs:0 1-thread rows: 0 assumed"
    return max(0.0, float(np.median(vals))), (
        f"median hold_ns - ns_per_op of {len(vals)} locks cs:0 1-thread rows")


def row_transfer_ns(p: Point, fallback: float) -> float:
    """One-way transfer between the row's PUs: the c2c probe of its pair in its coherence
    regime (`coherence.regime_ns`), else `fallback` (the run's l3_shared or nearest class)."""
    t = p.regime_ns
    if t is not None and math.isfinite(t) and 0 < t < 1e5:
        return float(t)
    return fallback


def fit_draws(v: VariantInputs, draws: int, rng: np.random.Generator, bias: float,
              fallback_t: float) -> Dict[str, np.ndarray]:
    """Bootstrap draws of the variant's model parameters (draw 0: all repetitions).

    From the 1-thread rows: S1 = hold_ns - clock bias (the uncontended critical section),
    Z1 = ns per acquisition - 1-thread wait - S1 (outside work per acquisition).
    From the multi-thread fit rows (n >= 2), measured, not assumed:
    - L, lines per hand-off: hold_ns at n exceeds S1 by the lines the holder touches that the
      previous holder wrote; a hold after another thread's costs L transfers of the row's pair
      (`coherence.regime_ns`). Share of holds after another thread's: contended_share (a
      hand-off) + (1 - contended_share) (n - 1) / n (found free, last holder random).
    - g, outside-work slowdown per further thread sharing the L3 (the USL/Amdahl contention
      form Z1 (1 + g (k - 1)), k threads per L3: bounded throughput, no collapse): from the
      outside work
      per acquisition at n (ns per acquisition x (1 - wait_share) - hold) against Z1.
    - a, the waiter term: the structural WAITER_PRIOR unless a fit row has >= 3 threads and a
      wait share >= 0.2; then the a in [0, 3] whose predicted throughput at the largest such
      count matches the measured one (per draw).
    """
    def boot_count(reps: List[Point]) -> Dict[str, np.ndarray]:
        idx = rng.integers(0, len(reps), size=(draws, len(reps)))
        arr = lambda f: np.array([f(r) for r in reps], dtype=float)  # noqa: E731
        return {"ops": _median_boot(arr(lambda r: r.metrics["ops_per_s"]), idx),
                "acq": _median_boot(arr(lambda r: r.metrics["acquisitions_per_op"]), idx),
                "hold": _median_boot(arr(lambda r: r.metrics["hold_ns"]), idx),
                "ws": _median_boot(arr(lambda r: r.metrics.get("wait_share", 0.0) or 0.0), idx),
                "cs": _median_boot(arr(lambda r: r.metrics.get("contended_share", 1.0)
                                       if r.metrics.get("contended_share") is not None
                                       else 1.0), idx),
                "t": _median_boot(arr(lambda r: row_transfer_ns(r, fallback_t)), idx),
                "l3": float(np.median([max(1.0, float(r.placement.get("l3s") or 1))
                                       for r in reps]))}
    b = {n: boot_count(r) for n, r in v.reps.items()}
    one = b[1]
    c1 = 1e9 / (one["ops"] * one["acq"])
    s1 = np.maximum(one["hold"] - bias, 1.0)
    z1 = np.maximum(c1 * (1 - one["ws"]) - s1, 0.0)
    ls, rs, gl = [], [], []
    for n in v.fit_counts():
        m = b[n]
        hc = np.maximum(m["hold"] - bias, 0.0)
        pi = np.clip(m["cs"] + (1 - m["cs"]) * (n - 1) / n, 1.0 / n, 1.0)
        ls.append(np.maximum(hc - s1, 0.0) / (pi * m["t"]))
        cn = n * 1e9 / (m["ops"] * m["acq"])
        zn = cn * (1 - m["ws"]) - hc
        share = n / m["l3"]
        # A lock-bound row's sampled holds are stretched (clock read, spinners stealing the
        # line): its outside work is not measured by this difference (L takes its
        # throughput below).
        ws_n = float(np.median([r.metrics.get("wait_share", 0.0) or 0.0 for r in v.reps[n]]))
        if share > 1 and ws_n < 0.2:
            rs.append(zn / np.maximum(z1, 1e-9) - 1.0)
            gl.append(share - 1.0)
    lines = np.clip(np.mean(ls, axis=0), 0.0, 200.0) if ls else np.zeros_like(s1)
    lines_source = "sampled hold_ns at the fit counts" if ls else "none (no multi-thread row)"
    g_measured = bool(rs)
    if rs:
        gl_a = np.array(gl)[:, None]
        g = (np.array(rs) * gl_a).sum(axis=0) / (gl_a ** 2).sum()
        # Outside work too short to measure its slowdown (a lock-bound row): none assumed.
        g = np.where(z1 < 0.25 * c1, 0.0, np.clip(g, 0.0, 2.0))
    else:
        g = np.zeros_like(s1)
    a = np.full_like(s1, WAITER_PRIOR.get(v.lock, 0.0))
    a_source = "structural prior (no fit row with >= 3 threads and wait share >= 0.2)"
    ws_of = {n: float(np.median([r.metrics.get("wait_share", 0.0) or 0.0 for r in v.reps[n]]))
             for n in v.fit_counts()}
    d = {"s1": s1, "z1": z1, "lines": lines, "g": g, "acq": one["acq"], "a": a}

    def match(n: int, name: str, grid: np.ndarray) -> np.ndarray:
        """Per draw the grid value of d[name] whose predicted throughput at n threads (the
        row's pair transfer and threads per L3) is nearest the measured one (log scale)."""
        m = b[n]
        meas = m["ops"] * m["acq"] / 1e9  # acquisitions per ns
        errs = []
        for val in grid:
            x = _lock_x(n, m["t"], v, dict(d, **{name: np.full_like(s1, val)}),
                        max(0.0, n / m["l3"] - 1.0))
            errs.append(np.abs(np.log(x / meas)))
        return grid[np.argmin(np.array(errs), axis=0)]
    # A lock-bound row (wait share >= 0.2) is better measured by its throughput than by its
    # sampled holds (a sampled hold reads the clock and is stretched by spinners stealing the
    # line): L is the value that reproduces the smallest such count's throughput.
    bound = [n for n in v.fit_counts() if ws_of[n] >= 0.2]
    if bound:
        n = min(bound)
        d["lines"] = lines = match(n, "lines", np.linspace(0.0, 20.0, 81))
        lines_source = f"throughput of the {n}-thread rows (lock-bound: wait share " \
                       f"{ws_of[n]:.2f})"
    big = [n for n in v.fit_counts() if n >= 3 and ws_of[n] >= 0.2]
    if big:
        n = max(big)
        d["a"] = a = match(n, "a", np.linspace(0.0, 3.0, 31))
        a_source = (f"fitted on the {n}-thread rows (throughput), grid 0..3 per bootstrap "
                    "draw")
    d["noise"] = repetition_noise(v)
    d["g_measured"] = g_measured
    v.fit_summary = {
        "lines_source": lines_source, "median_noise_log": d["noise"],
        "clock_bias_ns": bias, "S1_ns": float(s1[0]), "Z1_ns": float(z1[0]),
        "lines_per_handoff": float(lines[0]),
        "lines_per_handoff_ci": [float(x) for x in np.percentile(lines[1:], [2.5, 97.5])],
        "outside_slowdown_per_neighbour": float(g[0]), "waiter_coefficient": float(a[0]),
        "waiter_source": a_source, "waiter_half": WAITER_HALF,
        "fit_threads": v.fit_counts()}
    return d


# Parameters naming the outside work of a variant (what its threads do between acquisitions):
# variants that agree on these share one outside-work slowdown (fit_all).
OUTSIDE_WORK_PARAMS = ("kernel", "work_ns", "release", "scanner", "mode", "config", "free_cpu",
                       "on_lru_pct", "cs")


def fit_all(variants: Sequence[VariantInputs], draws: int, rng: np.random.Generator,
            bias: float, fallback_t: float, lat_d: Dict[str, np.ndarray]
            ) -> Dict[str, Dict[str, Any]]:
    """fit_draws for every variant, with the latency draws added; then the outside-work
    slowdown g pooled (per draw, the median) over the variants of one family whose outside
    work is the same (OUTSIDE_WORK_PARAMS) and whose g was measured: the slowdown is a
    property of the work between acquisitions, not of the lock's layout, and one noisy
    per-variant estimate extrapolated to many neighbours would decide a verdict."""
    fits = {v.key: dict(fit_draws(v, draws, rng, bias, fallback_t),
                        **{f"lat_{c}": lat_d[c] for c in CLASSES}) for v in variants}
    groups: Dict[Tuple, List[VariantInputs]] = {}
    for v in variants:
        if fits[v.key]["g_measured"]:
            key = (v.family,) + tuple(v.params.get(k, "") for k in OUTSIDE_WORK_PARAMS)
            groups.setdefault(key, []).append(v)
    for members in groups.values():
        pooled = np.median(np.array([fits[v.key]["g"] for v in members]), axis=0)
        for v in members:
            fits[v.key]["g"] = pooled
            v.fit_summary["outside_slowdown_per_neighbour"] = float(pooled[0])
            v.fit_summary["outside_slowdown_pooled_over"] = len(members)
    return fits


def repetition_noise(v: VariantInputs) -> float:
    """Standard deviation (log scale) of the median of r repetitions of one point, r = the
    input's usual repetitions per point: 1.2533 x (1.4826 MAD of log ops_per_s within each
    fit count, pooled) / sqrt(r). The measured median a prediction is judged by carries this
    noise besides the model's parameter uncertainty."""
    devs, sizes = [], []
    for reps in v.reps.values():
        x = np.log([r.metrics["ops_per_s"] for r in reps])
        if x.size >= 2:
            devs.extend(np.abs(x - np.median(x)).tolist())
            sizes.append(x.size)
    if not devs:
        return 0.0
    sigma = 1.4826 * float(np.median(devs))
    return 1.2533 * sigma / math.sqrt(float(np.median(sizes)))


def interval(ops: np.ndarray, noise: float) -> Tuple[float, float]:
    """95 % interval of a predicted point for the median a run would measure: the bootstrap
    percentiles of the model (draws 1..), widened in log space by the repetition noise of a
    median (repetition_noise), the two half-widths added in quadrature. Contains ops[0]."""
    p = float(ops[0])
    lo, hi = (np.percentile(ops[1:], [2.5, 97.5]) if ops.size > 2 else (p, p))
    lo, hi = min(float(lo), p), max(float(hi), p)
    z = 1.96 * noise
    wl = math.sqrt(math.log(p / lo) ** 2 + z * z) if lo > 0 else math.inf
    wh = math.sqrt(math.log(hi / p) ** 2 + z * z)
    return p * math.exp(-wl), p * math.exp(wh)


def _lock_x(m: int, transfer, v: VariantInputs, d: Dict[str, np.ndarray],
            l3_neighbours: float, stats: bool = False):
    """Acquisitions per ns of one lock instance shared by m threads (per draw): the closed
    network of plots/queueing.py with
    S(1) = S1 + (m - 1) / m L t                      (found free; last holder random)
    S(j >= 2) = S1 + L t + h t + q t [j >= 3] + a t k / (1 + k / WAITER_HALF), k = j - 2
    (h: the lock kind's hand-off lines, q: qspinlock's MCS node), think Z1 (1 + g neighbours),
    neighbours = threads per L3 - 1.
    """
    t = np.asarray(transfer, dtype=float) * np.ones_like(d["s1"])
    z = d["z1"] * (1.0 + d["g"] * l3_neighbours)
    if m == 1:
        x = 1.0 / (z + d["s1"])
        return (x, np.zeros_like(x)) if stats else x
    mdl = v.model
    j = np.arange(1, m + 1, dtype=float)[None, :]
    k = np.maximum(j - 2, 0.0)
    lines = d["lines"][:, None]
    # Spinners on a lock line the holder also writes (the family's rows say which: zone_lock
    # with the free list on the lock's line) steal it between the holder's writes: each
    # further spinner costs the waiter coefficient times the writes that can be stolen in one
    # hold (at most one per transfer time of the critical section), bounded as the waiter
    # term. Queued locks (qspinlock's queue, MCS) have at most one spinner on the word.
    # The first write follows the acquiring atomic while the line is still exclusive: only
    # the writes after it can be stolen (bench/locks.cpp's one counter write: none).
    steal = 0.0
    if mdl["spin_cap"] > 1 and v.lock_writes > 1:
        writes = np.minimum(v.lock_writes - 1.0, d["s1"] / np.maximum(t, 1e-9))[:, None]
        steal = writes * d["a"][:, None] * k / (1.0 + k / WAITER_HALF)
    per = np.where(j == 1, (m - 1) / m * lines,
                   lines + mdl["handoff_lines"] + QUEUE_LINES.get(v.lock, 0.0) * (j >= 3)
                   + d["a"][:, None] * k / (1.0 + k / WAITER_HALF) + steal)
    service = d["s1"][:, None] + t[:, None] * per
    x, q, u = queueing.birth_death(m, z, service, stats=True)
    return (x, q - u) if stats else x


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
    if total <= 0:
        return np.zeros_like(d["s1"])
    return sum(pair_counts[c] / total * d[f"lat_{c}"] for c in CLASSES)


def predict_lock(n: int, pair_counts: Dict[str, float], v: VariantInputs,
                 d: Dict[str, np.ndarray], stats: bool = False, neighbours: float = 0.0):
    """Acquisitions per ns of one lock instance shared by n threads, per draw; stats=True:
    (X, mean threads waiting (not holding) for the lock). d: fit_draws plus lat_<class>."""
    return _lock_x(n, group_transfer(pair_counts, d), v, d, neighbours, stats=stats)


def predict_variant(v: VariantInputs, order, counts, d) -> List[Dict[str, Any]]:
    """The predicted curve: per count ops/s (point estimate, 95 % interval), lock instances,
    mean transfer ns and lock utilisation."""
    rows = []
    for n in counts:
        groups = lock_groups(order, n, v.per_node)
        dbl = l3_neighbours(order[:n])
        x = np.zeros_like(d["s1"])
        waiting = np.zeros_like(d["s1"])
        for g in groups:
            xg, wg = predict_lock(len(g), class_pair_counts(g), v, d, stats=True,
                                  neighbours=dbl)
            x, waiting = x + xg, waiting + wg
        ops = x * 1e9 / d["acq"]
        share = waiting / n  # share of the threads' time spent waiting for the lock
        lo, hi = interval(ops, d.get("noise", 0.0))
        wlo, whi = np.percentile(share[1:], [2.5, 97.5]) if ops.size > 2 else (share[0],) * 2
        rows.append({"threads": n, "ops_per_s": float(ops[0]), "lo": float(lo),
                     "hi": float(hi), "wait_share": float(share[0]),
                     "wait_share_ci": [float(wlo), float(whi)],
                     "lock_instances": len(groups), "_draws": ops})
    return rows


# ----------------------------------------------------------------------------- verdicts

def predicted_verdicts(variants: List[VariantInputs], curves: Dict[str, List[Dict]],
                       counts: Sequence[int], all_keys: Sequence[str] = (),
                       skipped: Sequence[str] = ()) -> List[Dict[str, Any]]:
    """plots/verdicts.py's COMPARISONS applied to the predictions at the target's planned
    thread counts: effect = variant / base - 1 of predicted ops/s, 95 % interval from the
    same bootstrap draws (paired: both sides use the same latency draws). The rows are chosen
    as verdicts.py chooses them (`only`, then the best `prefer` match) among every variant of
    the run, predicted or not; a pair the model has no input for (a stats:off or lock-free
    side, an alignment comparison) gives one entry with predicted false, effect and ci null
    and the reason. Each text names its own lock."""
    try:
        from verdicts import COMPARISONS
    except ImportError:
        return []
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
            if getattr(spec, "uninstrumented", False) and params.get("stats") == "off":
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
                    out.append(dict(base, effect=None, ci=None, predicted=False,
                                    reason=reason,
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


# ----------------------------------------------------------------------------- figures

# Most curves in one panel; a family with more is drawn as small multiples.
PER_PANEL = 8


def write_figures(out_dir: str, title: str, variants, curves, assumed: str = "",
                  date: str = "") -> List[str]:
    """One PNG per family: predicted ops/s against threads, a 95 % band per variant; at most
    PER_PANEL curves per panel (small multiples past that), every panel with its legend;
    `assumed` (a note that the target's latencies are assumed x86 figures) is printed on the
    figure. Written through write_file (no symlink followed)."""
    import io
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    files = []
    fams = sorted({v.family for v in variants})
    for fam in fams:
        vs = [v for v in variants if v.family == fam]
        panels = [vs[i:i + PER_PANEL] for i in range(0, len(vs), PER_PANEL)]
        cols, rows = 1, len(panels)
        fig, axes = plt.subplots(rows, cols, figsize=(13, 4.0 * rows + 0.6), squeeze=False)
        for ax in axes.flat[len(panels):]:
            ax.set_visible(False)
        common = set.intersection(*[set(v.key.split("/")[1:]) for v in vs])
        for pi, (ax, pv) in enumerate(zip(axes.flat, panels)):
            for v in pv:
                c = curves[v.key]
                t = [r["threads"] for r in c]
                label = "/".join(x for x in v.key.split("/")[1:] if x not in common) or \
                    v.key[len(fam) + 1:]
                line, = ax.plot(t, [r["ops_per_s"] for r in c], lw=1, label=label)
                ax.fill_between(t, [r["lo"] for r in c], [r["hi"] for r in c],
                                color=line.get_color(), alpha=0.15, lw=0)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("threads (target placement plan)")
            ax.set_ylabel("predicted ops/s")
            part = f" ({pi + 1}/{len(panels)})" if len(panels) > 1 else ""
            ax.set_title(f"{fam}{part}: PREDICTED", fontsize=9)
            ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5),
                      frameon=False)
            ax.grid(True, which="both", alpha=0.3)
        head = f"{fam}: PREDICTED for {title}" + (f", input run {date}" if date else "")
        if common:
            head += "\nall curves: " + "/".join(sorted(common))
        if assumed:
            head += "\n" + assumed
        fig.suptitle(head, fontsize=9)
        fig.tight_layout()
        name = f"predicted-{fam}.png"
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")  # legends outside
        plt.close(fig)
        write_file(os.path.join(out_dir, name), buf.getvalue())
        files.append(name)
    return files


def write_file(path: str, data: bytes) -> None:
    """Writes `data` to `path` as the result file is written: a new temporary file beside it
    (O_CREAT | O_EXCL | O_NOFOLLOW), then rename over `path` (rename replaces a planted symlink
    itself, never its target). Raises OSError."""
    tmp = f"{path}.tmp.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ----------------------------------------------------------------------------- validation

def placement_pus(pl: Dict[str, Any], n: int) -> List[Dict[str, Any]]:
    """n PUs laid out as a row's placement summary says (packages, NUMA nodes, L3s, cores,
    SMT siblings), threads spread evenly: what the model needs of the measured placement
    (distance classes and threads per L3) without the machine's topology file."""
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
    reps: Dict[str, Dict[int, List[Point]]] = {}
    for p in run.points:
        if p.family not in LOCK_FAMILIES or p.aggregate or p.bench != p.family:
            continue
        if counts is not None and p.threads not in counts:
            continue
        v = p.metrics.get("ops_per_s")
        if not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 < v <= 1e12:
            continue
        reps.setdefault(variant_key(p), {}).setdefault(p.threads, []).append(p)
    return {k: {n: (float(np.median([r.metrics["ops_per_s"] for r in rs])), len(rs),
                    rs[0].placement) for n, rs in by.items()} for k, by in reps.items()}


def validate_against(run_path: str, other_path: str, fit_threads: Optional[Sequence[int]],
                     latencies: Optional[str] = None, regime: str = "near", draws: int = 200,
                     seed: int = 26) -> Dict[str, Any]:
    """`lockline predict RUN --validate-against=OTHER`: predict every lock-family point OTHER
    measured (at each row's own placement: packages, nodes, L3s, cores) from RUN and compare.

    Fitted on RUN's rows at fit_threads (None: all of RUN's counts); judged on OTHER's counts
    (when OTHER is RUN itself, only the counts not fitted on). Target latencies: --latencies,
    else OTHER's own calibration/c2c classes, else RUN's, else assumed. Returns {"rows": [per
    variant and count: key, family, threads, predicted, lo, hi, measured, n, error, inside],
    "verdicts": [seed comparisons: predicted vs measured effect], "notes": [...]}."""
    run = read_run(run_path)
    other = run if os.path.abspath(other_path) == os.path.abspath(run_path) else \
        read_run(other_path)
    same = other is run
    variants, skipped = collect_variants(run, fit_threads)
    if not variants:
        fail(f"{run_path}: no variant of {', '.join(LOCK_FAMILIES)} with 1-thread rows to fit")
    fitted = set(fit_threads) if fit_threads is not None else \
        {n for v in variants for n in v.reps}
    judged_counts = None
    meas = measured_points(other, judged_counts)
    given = {}
    if latencies:
        try:
            given = read_latencies(latencies)
        except ValueError as err:
            fail(str(err))
    there, there_regime = c2c_by_class(other, regime)
    here, here_regime = c2c_by_class(run, regime)
    for c in here:
        if c not in there:
            there[c], there_regime[c] = here[c], here_regime[c] + " (the input run's)"
    lat = target_latencies(given, there, there_regime, latencies or "")
    rng = np.random.default_rng(seed)
    lat_d = latency_draws(lat, draws, rng)
    bias, _ = clock_bias_ns(run)
    fallback = float(np.median(here.get("l3_shared") or here.get("package_local") or
                               [ASSUMED_NS["l3_shared"]]))
    rows, draws_of = [], {}
    fits = fit_all(variants, draws, rng, bias, fallback, lat_d)
    for v in variants:
        d = fits[v.key]
        for n, (m, reps, pl) in sorted(meas.get(v.key, {}).items()):
            if same and n in fitted:
                continue
            pus = placement_pus(pl or {}, n)
            groups = lock_groups(pus, n, v.per_node)
            x = np.zeros_like(d["s1"])
            for g in groups:
                x = x + predict_lock(len(g), class_pair_counts(g), v, d,
                                     neighbours=l3_neighbours(pus))
            ops = x * 1e9 / d["acq"]
            lo, hi = interval(ops, d["noise"])
            draws_of[(v.key, n)] = ops
            rows.append({"key": v.key, "family": v.family, "lock": v.lock, "threads": n,
                         "predicted": float(ops[0]), "lo": float(lo), "hi": float(hi),
                         "measured": m, "n": reps, "error": float(ops[0]) / m - 1.0,
                         "inside": bool(lo <= m <= hi), "fit": v.fit_summary})
    # Seed comparisons at the judged counts: predicted effect (paired draws) vs measured.
    verdicts = []
    try:
        from verdicts import COMPARISONS
    except ImportError:
        COMPARISONS = ()
    keys = {r["key"] for r in rows}
    counts = sorted({r["threads"] for r in rows})
    pv = predicted_verdicts(variants, {k: [{"threads": n, "_draws": o} for (kk, n), o in
                                           draws_of.items() if kk == k] for k in keys},
                            counts, list(meas), skipped) if COMPARISONS else []
    for v in pv:
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
    notes = [f"fitted on {os.path.basename(run_path)} at {sorted(fitted)} threads",
             f"judged on {os.path.basename(other_path)}"
             + (" at the counts not fitted on" if same else ""),
             "target latencies: " + ", ".join(f"{c} {lat[c]['ns']:.0f} ns ({lat[c]['source']})"
                                              for c in CLASSES)]
    notes += [s for s in skipped]
    return {"rows": rows, "verdicts": verdicts, "notes": notes}


def validation_report(res: Dict[str, Any]) -> str:
    """Markdown of validate_against: per family and thread count the median error, median
    |error| and how many measured points fall inside the predicted 95 % interval; then every
    point; then the seed comparisons."""
    rows = res["rows"]
    lines = ["predicted vs measured (error = predicted / measured - 1; measured = median ops/s "
             "of the repetitions; inside = in the predicted 95 % interval)", ""]
    lines += [f"- {n}" for n in res["notes"]]
    lines += ["", "| family | threads | points | median error | median abs error | inside 95 % |",
              "|---|---|---|---|---|---|"]
    groups: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["family"], str(r["threads"])), []).append(r)
        groups.setdefault((r["family"], "all"), []).append(r)
        groups.setdefault(("all", "all"), []).append(r)
    for (fam, n), rs in sorted(groups.items(), key=lambda kv: (kv[0][0] == "all", kv[0][0],
                                                               kv[0][1] == "all", kv[0][1])):
        errs = np.array([r["error"] for r in rs])
        inside = sum(r["inside"] for r in rs)
        lines.append(f"| {fam} | {n} | {len(rs)} | {np.median(errs) * 100:+.0f} % | "
                     f"{np.median(np.abs(errs)) * 100:.0f} % | {inside} of {len(rs)} |")
    lines += ["", "| variant | threads | predicted ops/s [95 %] | measured (n) | error | "
              "inside |", "|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["key"], r["threads"])):
        lines.append(f"| {r['key']} | {r['threads']} | {r['predicted']:.3g} "
                     f"[{r['lo']:.3g}, {r['hi']:.3g}] | {r['measured']:.3g} ({r['n']}) | "
                     f"{r['error'] * 100:+.0f} % | {'yes' if r['inside'] else 'no'} |")
    if res["verdicts"]:
        lines += ["", "| comparison | threads | predicted [95 %] | measured | sign | "
                  "within 2x |", "|---|---|---|---|---|---|"]
        for v in res["verdicts"]:
            name = v["text"].split(", " + str(v["threads"]) + " threads")[0]
            if not v["predicted"]:
                lines.append(f"| {name} | {v['threads']} | not predicted ({v['reason']}) | "
                             f"{v['measured_effect'] * 100:+.1f} % | - | - |")
                continue
            lines.append(f"| {name} | {v['threads']} | {v['effect'] * 100:+.1f} % "
                         f"[{v['ci'][0] * 100:+.1f}, {v['ci'][1] * 100:+.1f}] | "
                         f"{v['measured_effect'] * 100:+.1f} % | "
                         f"{'right' if v['right_sign'] else 'WRONG'} | "
                         + ("n/a (measured < 5 %)" if v["within_2x"] is None else
                            "yes" if v["within_2x"] else "no") + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main

def read_run(path: str) -> Run:
    """load_run of a run directory, a lockline.json or a gzip-compressed one (.json.gz, as
    tests/fixtures/big-machine/ keeps it); fail()s with one line on anything unreadable."""
    if os.path.isdir(path):
        path = os.path.join(path, "lockline.json")
    try:
        if path.endswith(".gz"):
            import gzip
            import tempfile
            with gzip.open(path, "rb") as handle:
                data = handle.read(1 << 31)
            with tempfile.TemporaryDirectory(prefix="lockline-predict-") as tmp:
                plain = os.path.join(tmp, "lockline.json")
                with open(plain, "wb") as handle:
                    handle.write(data)
                return load_run(plain)
        return load_run(path)
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
            fit_threads: Optional[Sequence[int]] = None, arch: str = "") -> Dict[str, Any]:
    """Everything `lockline predict` does; returns the predicted.json document (also written).

    Errors (fail(): one line, exit 2, nothing written): unreadable run, no lock family with
    1-thread rows, a topology the planner refuses, a bad --latencies file, an output path that
    is not a directory we may create."""
    path = os.path.join(run_dir, "lockline.json") if os.path.isdir(run_dir) else run_dir
    run = read_run(path)
    variants, skipped = collect_variants(run, fit_threads)
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
    lctx = run.lockline
    emulated = run.emulated
    pin = str(lctx.get("pin") or "cores")
    if not re.fullmatch(r"[a-z-]+", pin):
        pin = "cores"  # an explicit PU list names the run's machine, not the target
    plan = plan_target(find_lockline(lockline), topology, pin)
    here, here_regime = c2c_by_class(run, regime)
    lat = target_latencies(given, here, here_regime, latencies or "")
    x86 = {"x86": True, "other": False}.get(arch, target_is_x86(topology))
    assumed_note = ""
    if x86 is False and any(lat[c]["source"] != "given" for c in CLASSES):
        for c in CLASSES:
            if lat[c]["source"] != "given":
                lat[c]["source"] = "assumed (x86 figures)"
                lat[c]["why"] = ("the target is not x86; this figure is an x86 one (" +
                                 lat[c]["why"] + "): give --latencies for the target")
        assumed_note = ("target latencies ASSUMED (x86 figures) on a non-x86 target: every "
                        "predicted number below rests on them")
    run_dir_abs = os.path.dirname(os.path.abspath(path))
    out_dir = out_dir or os.path.join(run_dir_abs, f"predicted-{topology_name(topology)}")
    make_out_dir(out_dir)

    rng = np.random.default_rng(seed)
    lat_d = latency_draws(lat, draws, rng)
    counts = curve_counts(plan, threads)
    bias, bias_why = clock_bias_ns(run)
    fallback = float(np.median(here.get("l3_shared") or here.get("package_local") or
                               [ASSUMED_NS["l3_shared"]]))
    curves = {}
    fits = fit_all(variants, draws, rng, bias, fallback, lat_d)
    for v in variants:
        curves[v.key] = predict_variant(v, plan["order"], counts, fits[v.key])
    target_counts = [c for c in plan.get("threads_list", []) if c in counts]
    all_keys = sorted({variant_key(p) for p in run.points if p.family in LOCK_FAMILIES and
                       p.bench == p.family and not p.aggregate})
    verdicts = predicted_verdicts(variants, curves, target_counts, all_keys, skipped)
    title = f"{topology_name(topology)} ({plan.get('packages')} packages, "\
            f"{plan.get('numa_nodes')} NUMA nodes, {plan.get('l3s')} L3s, {plan.get('pus')} PUs)"
    if assumed_note:
        for r in verdicts:
            r["text"] += " (latencies assumed: x86 figures)"
    doc = {
        "schema": SCHEMA, "predicted": True,
        "topology": {k: plan.get(k) for k in ("source", "packages", "numa_nodes", "l3s",
                                              "cores", "pus", "usable_pus", "pin",
                                              "threads_list")},
        "title": title,
        "target_x86": x86,
        "latencies_assumed_note": assumed_note or None,
        "run": {"path": os.path.abspath(path), "host": run.context.get("host_name"),
                "git_commit": lctx.get("git_commit"), "cpu_model": lctx.get("cpu_model"),
                "emulated": emulated},
        "emulated_input": emulated,
        "latencies_ns": {c: {k: v for k, v in lat[c].items() if k != "samples"}
                         for c in CLASSES},
        "regime": regime,
        "clock_bias_ns": {"ns": bias, "why": bias_why},
        "fit_threads": sorted({n for v in variants for n in v.reps}),
        "model": ("closed queueing network per lock instance (plots/queueing.py), one "
                  "instance per NUMA node of the target for per-node locks (each variant's "
                  "lock_scope, from the kernel version it models): N threads do outside work "
                  "Z per acquisition and queue FCFS for the lock; service = the 1-thread "
                  "critical section + the lines the holder touches that the previous holder "
                  "wrote (fitted per variant on the input's multi-thread holds) moved at the "
                  "mean one-way latency between the plan's PUs, + the lock kind's hand-off "
                  "lines, + a bounded waiter term (and, for spinning locks whose line holds "
                  "data written under the lock, the same bounded term per stealable write); "
                  "Z grows linearly with the threads "
                  "sharing an L3 (fitted on the multi-thread rows); exact product-form "
                  "solution"),
        "simplifications": [
            "exponential think and service times; successive holders are a uniformly random "
            "pair of the instance's PUs (no NUMA-aware or unfair hand-off order)",
            "the waiter term is bounded (at most a x WAITER_HALF transfers per hand-off); "
            "without >= 3-thread input rows its coefficient is the lock kind's structural "
            "prior, not measured",
            "outside-work slowdown is fitted per further thread sharing an L3 and "
            "extrapolated linearly (USL contention form); no memory-bandwidth or interconnect saturation model",
            "pagevec scanner threads and the page_free remote-free path are not modelled "
            "apart from their measured 1-thread wait; sleeping locks' wake-up is not modelled",
            "the input machine's critical-section and outside-work times are used on the "
            "target as measured (no CPU-speed scaling between machines)"],
        "bootstrap": {"draws": draws, "seed": seed,
                      "over": "repetitions of each variant at every fit thread count and c2c "
                              "repetitions"},
        "skipped": skipped,
        "variants": [],
        "verdicts": verdicts,
    }
    if emulated:
        doc["simplifications"].insert(0, "EMULATED INPUT: the run was made in an emulator; "
                                      "its timings are not a machine's")
        title += " - from an EMULATED run"
        doc["title"] = title
    for v in variants:
        doc["variants"].append({
            "key": v.key, "family": v.family, "params": v.params, "lock": v.lock,
            "description": v.description, "inputs": v.summary(),
            "curve": [{k: r[k] for k in r if not k.startswith("_")} for r in curves[v.key]]})
    try:
        doc["figures"] = write_figures(out_dir, title, variants, curves, assumed_note,
                                       str(run.context.get("date") or "")[:10]) \
            if figures else []
        write_file(os.path.join(out_dir, "predicted.json"),
                   json.dumps(doc, indent=1).encode("utf-8"))
    except OSError as err:
        fail(f"-o={out_dir}: cannot write the prediction there ({err})")
    doc["_out_dir"] = out_dir
    doc["_curves"] = curves
    return doc


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
    out = []
    for t in filter(None, text.split(",")):
        if not t.isdigit() or not 1 <= int(t) <= 10**6:
            fail(f"{flag}={text}: accepted a comma-separated list of counts 1..1000000")
        out.append(int(t))
    return out


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (not argparse's usage + text)
        fail(message)


def main(argv: Optional[Sequence[str]] = None) -> int:
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
    ap.add_argument("--validate-against", metavar="OTHER_RUN",
                    help="predict OTHER_RUN's measured lock-family points (at their own "
                    "placements) from RUN and print predicted vs measured with coverage; "
                    "nothing is written")
    a = ap.parse_args(argv)
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
    if not os.path.exists(a.run_dir):
        fail(f"{a.run_dir}: no such run directory or result file")
    if a.validate_against:
        if not os.path.exists(a.validate_against):
            fail(f"--validate-against={a.validate_against}: no such run directory or file")
        run = read_run(a.run_dir)
        if run.emulated and not a.allow_emulated:
            fail(f"{a.run_dir}: the run was made in an emulator (its timings are not a "
                 "machine's); accepted: a run on real hardware, or --allow-emulated")
        other = a.validate_against
        other = os.path.join(other, "lockline.json") if os.path.isdir(other) else other
        path = os.path.join(a.run_dir, "lockline.json") if os.path.isdir(a.run_dir) \
            else a.run_dir
        print(validation_report(validate_against(path, other, fit, a.latencies, a.regime,
                                                 draws)))
        return 0
    if not a.topology:
        fail("--topology=FILE.xml|synthetic:DESCRIPTION is required (the target to predict)")
    run = read_run(a.run_dir)
    if run.emulated and not a.allow_emulated:
        fail(f"{a.run_dir}: the run was made in an emulator (its timings are not a "
             "machine's); accepted: a run on real hardware, or --allow-emulated")
    doc = predict(a.run_dir, a.topology, a.latencies, a.out, a.lockline, a.regime, draws,
                  figures=not a.no_figures, threads=extra, fit_threads=fit,
                  arch=a.arch)
    print(f"predicted for {doc['title']}: {len(doc['variants'])} variants, "
          f"{len(doc['verdicts'])} verdicts -> {doc['_out_dir']}/predicted.json")
    for c in CLASSES:
        lat = doc["latencies_ns"][c]
        print(f"  {c:15s} {lat['ns']:8.1f} ns  {lat['source']}")
    for v in doc["verdicts"]:
        if v["threads"] in doc["topology"]["threads_list"][-2:]:
            print("  " + v["text"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
