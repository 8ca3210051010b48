"""The fit of `lockline predict`: the run's inputs per lock variant and the model's parameters
fitted on them, with bootstrap draws (the model: plots/predict.py's docstring and _lock_x)."""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from lockline_results import Point, ResultError, Run, grouped, load_run
import queueing

# Distance classes between two PUs, nearest first (bench/false_sharing.cpp PairClass).
CLASSES = ("smt", "l2_shared", "l3_shared", "package_local", "package_remote")

# Largest one-way transfer (ns) taken as one: longer c2c repetitions are a descheduled probe.
MAX_TRANSFER_NS = 1e6

# Only for classes neither --latencies nor this machine's c2c gives (marked "assumed"): the order
# of published x86 server c2c charts (AnandTech, Chips and Cheese: EPYC Rome/Milan, Xeon SP,
# 2019-2023); real machines differ by 2x either way.
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

# What predicted.json says of the model and what it leaves out (shown in the report).
MODEL = ("closed queueing network per lock instance (plots/queueing.py: a Markov chain in the "
         "number of threads at the lock), one instance per NUMA node of the target for per-node "
         "locks: N threads do outside work Z per acquisition and queue for the lock; the hold + "
         "hand-off depends on the queue it causes: the 1-thread critical section + the lines "
         "the holder touches that the previous holder wrote (fitted per variant on the input's "
         "multi-thread rows, else the layout's data lines) + the lock kind's hand-off lines, "
         "all moved at the mean one-way latency between the plan's PUs, + a waiter term "
         "(linear in the spinners for ticket/TAS: retrograde past saturation; bounded for "
         "TTAS/pthread_spin; none for MCS/qspinlock/pthread_mutex); Z grows with the threads "
         "sharing an L3 up to a knee; exact product-form solution")
SIMPLIFICATIONS = (
    "exponential think and service times; successive holders are a uniformly random "
    "pair of the instance's PUs (no NUMA-aware or unfair hand-off order)",
    "without >= 3-thread input rows the waiter coefficient is the lock kind's structural "
    "prior, not measured",
    "outside-work slowdown with L3 neighbours is fitted on the input's few neighbours and "
    "bounded by an assumed knee (at most 4x the slowdown per neighbour); no memory-bandwidth "
    "or interconnect saturation model",
    "pagevec scanner threads and the page_free remote-free path are not modelled "
    "apart from their measured 1-thread wait; sleeping locks' wake-up and vCPU preemption "
    "of queued waiters are not modelled",
    "CPU speed: the input machine's critical-section and outside-work times are used on the "
    "target as measured unless --target gives the target's 1-thread rows (then rescaled per "
    "variant by the ratio of ns_per_op)")

# Families whose rows carry lock statistics (harness/locks/lock_stat.h AddLockStatMetrics).
LOCK_FAMILIES = ("locks", "zone_lock", "pagevec", "page_free")


# ----------------------------------------------------------------------------- inputs

def pair_class_from_placement(placement: Dict[str, Any]) -> Optional[str]:
    """Distance class of a 2-thread row from its placement summary; rows do not name the L2,
    so l2_shared pairs count as l3_shared."""
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
        return None
    if placement.get("smt_siblings") is True:
        return "smt"
    if packages > 1:
        return "package_remote"
    if l3s > 1:
        return "package_local"
    return "l3_shared"


def c2c_by_class(run: Run, regime: str) -> Tuple[Dict[str, List[float]], Dict[str, str]]:
    """({class: [latency_ns of the c2c repetitions]}, {class: regime used}) in `regime`: a
    label, `all` (pooled) or `lowest` (each class's lowest-latency regime)."""
    raw: Dict[str, Dict[str, List[float]]] = {}
    for p in run.points:
        if p.family != "calibration" or p.params.get("c2c") != "pingpong" or p.aggregate:
            continue
        v = p.metrics.get("latency_ns")
        cls = pair_class_from_placement(p.placement)
        if v is None or not math.isfinite(v) or v <= 0 or v > MAX_TRANSFER_NS or cls is None:
            continue
        raw.setdefault(cls, {}).setdefault(p.coherence or "unknown", []).append(float(v))
    out, used = {}, {}
    for cls, by in raw.items():
        if regime == "all":
            out[cls], used[cls] = [v for vs in by.values() for v in vs], "all"
        elif regime in by:
            out[cls], used[cls] = by[regime], regime
        else:  # absent for this class: the lowest one, said so (never a silent assumed figure)
            label = min(by, key=lambda k: float(np.median(by[k])))
            out[cls] = by[label]
            used[cls] = label if regime in ("lowest", "near") else \
                f"{label} (no '{regime}' rows for this class)"
    return out, used


def read_latencies(path: str) -> Dict[str, float]:
    """--latencies: {"l3_shared": 30, ...} (optionally under "latencies_ns"), or a
    lockline.json of calibration/c2c rows run on the target (median of each class, lowest
    regime), or its run directory. Raises ValueError naming the file and what is accepted."""
    if os.path.isdir(path):
        path = os.path.join(path, "lockline.json")
    try:
        with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, EOFError, ValueError) as err:
        raise ValueError(f"--latencies={path}: cannot read a JSON object ({err})") from None
    except RecursionError:
        raise ValueError(f"--latencies={path}: nested too deeply; accepted: a flat JSON "
                         "object of ns per class") from None
    if isinstance(data, dict) and isinstance(data.get("benchmarks"), list):
        try:
            run = load_result(path)
        except (ResultError, OSError, EOFError, ValueError) as err:
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


def load_result(path: str) -> Run:
    """load_run of a lockline.json, or of a gzip-compressed one (.json.gz, as
    tests/fixtures/big-machine/ keeps it) through a private temporary copy."""
    if not path.endswith(".gz"):
        return load_run(path)
    with gzip.open(path, "rb") as handle:
        data = handle.read(1 << 31)
    with tempfile.TemporaryDirectory(prefix="lockline-predict-") as tmp:
        plain = os.path.join(tmp, "lockline.json")
        with open(plain, "wb") as handle:
            handle.write(data)
        return load_run(plain)


def target_latencies(given: Dict[str, float], here: Dict[str, List[float]],
                     here_regime: Dict[str, str], source: str) -> Dict[str, Dict[str, Any]]:
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
                "bench/pagevec/lru.h LruZone: 2.6.9's lru_lock, active list head and nr_active "
                f"share one line; a hold adds {per_hold:.1f} pages (list head + nr_active "
                "written per page) on the lock's line; struct pages on their own lines")
        return 3.0, 0.0, ("bench/pagevec/lru.h LruZone: 5.8's lruvec lists, lru_zone_size and "
                          "the LRU counters are on lines of their own (lock line: the lock)")
    if p.family == "page_free":
        return 2.0, 3.0, (
            "bench/page_free.cpp LruZone: lru_lock, the LRU list head and nr_lru share one "
            "line (2.6.16's struct zone); a free writes nr_lru and the list through it, a "
            "1-in-14 LRU add writes the head per page: about 3 writes per hold on the "
            "lock's line")
    return 1.0, 0.0, "assumed: one data line"


# Lock scope per family and kernel version (runs are `zones:1`; the kernel has one instance per
# zone or node, so predict builds one network per NUMA node of the target). Sources in the
# values; lru_lock moved from struct zone to pglist_data in v4.8 (599d0c954f91).
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


# The waiter term w(k) per further waiter (docs/prediction.md): a * k for ticket and TAS
# (unbounded: retrograde), a * k / (1 + k / WAITER_HALF) for TTAS and pthread_spin, 0 queued.
WAITER_HALF = 4.0
UNBOUNDED_WAITERS = ("ticket", "tas")

# Waiter coefficient a when no row has >= 3 threads at the lock to fit it: ticket 1 (every waiter
# re-reads now_serving), TAS/TTAS/pthread_spin 0.5 (reads race the winner's xchg), queued 0.
# qspinlock's queue adds one hand-off line (the next waiter's MCS node,
# kernel/locking/qspinlock.c@v5.8 queued_spin_lock_slowpath: arch_mcs_spin_unlock_contended).
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
                "repetitions": int(self.ns_per_op.size), "fit_threads": self.fit_counts(),
                "repetitions_per_count": {str(n): len(r) for n, r in self.reps.items()},
                "lock_scope": self.scope, "lock_scope_source": self.scope_why,
                "data_lines": self.data_lines, "lock_line_writes_per_hold": self.lock_writes,
                "lines_source": self.lines_why, "lock_model": dict(self.model or {}),
                "per_node_locks": self.per_node, "fit": self.fit_summary}


def _usable(p: Point) -> bool:
    """The row carries the model's inputs, finite and in range (1e308 or negative: left out)."""
    m = p.metrics
    lim = {"ns_per_op": 1e12, "hold_ns": 1e12, "acquisitions_per_op": 1e6, "ops_per_s": 1e12}
    return all(k in m and isinstance(m[k], (int, float)) and math.isfinite(m[k]) and
               (0 <= m[k] if k in ("hold_ns", "acquisitions_per_op") else 0 < m[k]) and
               m[k] <= top
               for k, top in lim.items())


def collect_variants(run: Run, fit_threads: Optional[Sequence[int]] = None
                     ) -> Tuple[List[VariantInputs], List[str]]:
    """Variants of the lock families with usable 1-thread repetitions, with their repetitions
    at `fit_threads` (None: all), and notes on the variants not predicted."""
    groups: Dict[str, Dict[int, List[Point]]] = {}
    skipped: List[str] = []
    for p in run.points:
        if p.family not in LOCK_FAMILIES or p.aggregate or p.bench != p.family:
            continue
        if fit_threads is not None and p.threads not in fit_threads:
            continue
        key = variant_key(p)
        why = next((w for k, v, w in NOT_PREDICTED_PARAMS if p.params.get(k) == v), None)
        if why is not None:
            if f"{key}: not predicted: {why}" not in skipped:
                skipped.append(f"{key}: not predicted: {why}")
            continue
        if not _usable(p) or p.metrics["ns_per_op"] <= 0:
            continue
        groups.setdefault(key, {}).setdefault(p.threads, []).append(p)
    out = []
    for key in sorted(groups):
        p = next(iter(groups[key].values()))[0]  # the key's first row
        acq = [r.metrics["acquisitions_per_op"] for reps in groups[key].values() for r in reps]
        if float(np.median(acq)) <= 0:
            skipped.append(f"{key}: not predicted: takes no lock (the lock-free fast path: "
                           "acquisitions_per_op 0); not modelled")
            continue
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


def target_speed(variants: Sequence[VariantInputs], target: Run
                 ) -> Tuple[Dict[str, float], List[str]]:
    """--target: per variant the target's 1-thread ns_per_op / the input's (medians), notes for the
    variants without one (family median, else all). ValueError when no variant matches."""
    there = grouped((p for p in target.points if p.family in LOCK_FAMILIES and p.threads == 1
                     and not p.aggregate and _usable(p)), variant_key)
    ratio = {v.key: float(np.median([p.metrics["ns_per_op"] for p in there[v.key]])
                          / np.median(v.ns_per_op)) for v in variants if v.key in there}
    if not ratio:
        raise ValueError("no 1-thread row of any variant the input predicts (accepted: a run "
                         "on the target with 1-thread rows of the same families and variants)")
    out, notes = dict(ratio), []
    for v in variants:
        if v.key in ratio:
            continue
        fam = [r for k, r in ratio.items() if k.split("/")[0] == v.family]
        out[v.key] = float(np.median(fam or list(ratio.values())))
        notes.append(f"{v.key}: no 1-thread row on the target: speed ratio {out[v.key]:.3g}, "
                     f"the median of {len(fam) or len(ratio)} matched "
                     f"{'variants of its family' if fam else 'variants (none of its family)'}")
    return out, notes


def clock_bias_ns(run: Run) -> Tuple[float, str]:
    """ns a sampled hold_ns carries besides the critical section (the clock read inside it): median
    of hold_ns - ns_per_op (>= 0) of the `locks` cs:0 stats:on 1-thread rows; 0 without them."""
    vals = [p.metrics["hold_ns"] - p.metrics["ns_per_op"] for p in run.points
            if p.family == "locks" and p.threads == 1 and not p.aggregate and
            p.params.get("cs") == "0" and p.params.get("stats") != "off" and _usable(p)]
    if not vals:
        return 0.0, "no locks cs:0 1-thread rows: 0 assumed"
    return max(0.0, float(np.median(vals))), (
        f"median hold_ns - ns_per_op of {len(vals)} locks cs:0 1-thread rows")


def row_transfer_ns(p: Point, fallback: float) -> float:
    """One-way transfer between the row's PUs: `coherence.regime_ns`, else `fallback`."""
    t = p.regime_ns
    return float(t) if t is not None and math.isfinite(t) and 0 < t < 1e5 else fallback


def _boot_count(reps: List[Point], draws: int, rng: np.random.Generator,
                fallback_t: float) -> Dict[str, Any]:
    """Bootstrap medians (draw 0: all repetitions) of one thread count's metrics, each resample
    the same rows for every metric; `l3`: the median number of L3s the rows span."""
    idx = rng.integers(0, len(reps), size=(draws, len(reps)))

    def boot(f) -> np.ndarray:
        return _median_boot(np.array([f(r) for r in reps], dtype=float), idx)
    return {"ops": boot(lambda r: r.metrics["ops_per_s"]),
            "acq": boot(lambda r: r.metrics["acquisitions_per_op"]),
            "hold": boot(lambda r: r.metrics["hold_ns"]),
            "ws": boot(lambda r: r.metrics.get("wait_share", 0.0) or 0.0),
            "cs": boot(lambda r: r.metrics.get("contended_share", 1.0)
                       if r.metrics.get("contended_share") is not None else 1.0),
            "t": boot(lambda r: row_transfer_ns(r, fallback_t)),
            "l3": float(np.median([max(1.0, float(r.placement.get("l3s") or 1)) for r in reps]))}


# Outside work slows with threads sharing an L3 up to a knee: Z1 (1 + g knee(k)), k = threads per
# L3 - 1, at most g x OUTSIDE_KNEE (an assumption stated in predicted.json; docs/prediction.md).
OUTSIDE_KNEE = 4.0

# Upper ends of the fitted parameters (bisection on the measured throughput): a value at its
# end is reported in the fit summary and the notes ("clipped"), never silently.
LINES_MAX = 200.0  # lines per hand-off: a 31-page pcp refill touches ~2 lines per page
WAITER_MAX = 8.0   # transfers per further waiter


def knee(k):
    return k / (1.0 + k / OUTSIDE_KNEE)


def _hold_fit(v: VariantInputs, b: Dict[int, Dict[str, Any]], s1: np.ndarray,
              z1: np.ndarray, c1: np.ndarray, bias: float, ws_of: Dict[int, float]
              ) -> Tuple[np.ndarray, np.ndarray, bool]:
    """(L, g, whether g was measured) per draw from the fit counts' holds (fit_draws)."""
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
        if share > 1 and ws_of[n] < 0.2:
            rs.append(zn / np.maximum(z1, 1e-9) - 1.0)
            gl.append(knee(share - 1.0))
    lines = np.clip(np.mean(ls, axis=0), 0.0, LINES_MAX) if ls else \
        np.full_like(s1, v.data_lines)
    if not rs:
        return lines, np.zeros_like(s1), False
    gl_a = np.array(gl)[:, None]
    g = (np.array(rs) * gl_a).sum(axis=0) / (gl_a ** 2).sum()
    # Outside work too short to measure its slowdown (a lock-bound row): none assumed.
    return lines, np.where(z1 < 0.25 * c1, 0.0, np.clip(g, 0.0, 2.0)), True


def _match(v: VariantInputs, m: Dict[str, Any], n: int, d: Dict[str, np.ndarray], name: str,
           top: float) -> Tuple[np.ndarray, bool]:
    """(per draw the value of d[name] in [0, top] whose predicted throughput at n threads is
    the measured one, whether draw 0 sits at `top`): bisection, throughput falling in it."""
    meas = m["ops"] * m["acq"] / 1e9  # acquisitions per ns
    lo, hi = np.zeros_like(d["s1"]), np.full_like(d["s1"], top)
    for _ in range(30):
        mid = (lo + hi) / 2
        fast = _lock_x(n, m["t"], v, dict(d, **{name: mid}), max(0.0, n / m["l3"] - 1.0)) > meas
        lo, hi = np.where(fast, mid, lo), np.where(fast, hi, mid)
    val = (lo + hi) / 2
    return val, bool(val[0] >= top * 0.999)


def fit_draws(v: VariantInputs, draws: int, rng: np.random.Generator, bias: float,
              fallback_t: float) -> Dict[str, np.ndarray]:
    """Bootstrap draws of the variant's model parameters (draw 0: all repetitions): S1 (1-thread
    hold_ns - clock bias), Z1 (outside work per acquisition), and from the multi-thread fit rows L
    (lines per hand-off, from hold_ns or, lock-bound, the throughput; else family_lines), g (the
    L3-sharing slowdown) and a (the waiter term, fitted at >= 3 threads and wait share >= 0.2, else
    WAITER_PRIOR). The model: docs/prediction.md."""
    b = {n: _boot_count(r, draws, rng, fallback_t) for n, r in v.reps.items()}
    one = b[1]
    c1 = 1e9 / (one["ops"] * one["acq"])
    s1 = np.maximum(one["hold"] - bias, 1.0)
    z1 = np.maximum(c1 * (1 - one["ws"]) - s1, 0.0)
    ws_of = {n: float(np.median([r.metrics.get("wait_share", 0.0) or 0.0 for r in v.reps[n]]))
             for n in v.fit_counts()}
    lines, g, g_measured = _hold_fit(v, b, s1, z1, c1, bias, ws_of)
    lines_source = ("sampled hold_ns at the fit counts" if v.fit_counts() else
                    f"the layout's data lines under the lock ({v.lines_why}; no multi-thread row)")
    a = np.full_like(s1, WAITER_PRIOR.get(v.lock, 0.0))
    a_source = "structural prior (no fit row with >= 3 threads and wait share >= 0.2)"
    d = {"s1": s1, "z1": z1, "lines": lines, "g": g, "acq": one["acq"], "a": a}
    clipped = [f"{v.key}: lines per hand-off clipped at {LINES_MAX:g}"] \
        if lines[0] >= LINES_MAX else []
    bound = [n for n in v.fit_counts() if ws_of[n] >= 0.2]
    if bound:
        n = min(bound)
        d["lines"], top = _match(v, b[n], n, d, "lines", LINES_MAX)
        lines_source = f"throughput of the {n}-thread rows (lock-bound: wait share " \
                       f"{ws_of[n]:.2f})"
        clipped += [f"{v.key}: lines per hand-off clipped at {LINES_MAX:g}"] if top else []
    big = [n for n in v.fit_counts() if n >= 3 and ws_of[n] >= 0.2]
    if big:
        n = max(big)
        d["a"], top = _match(v, b[n], n, d, "a", WAITER_MAX)
        a_source = f"fitted on the {n}-thread rows (throughput), 0..{WAITER_MAX:g}"
        clipped += [f"{v.key}: waiter coefficient clipped at {WAITER_MAX:g}"] if top else []
    d["noise"] = repetition_noise(v)
    d["g_measured"] = g_measured
    v.fit_summary = {
        "lines_source": lines_source, "median_noise_log": d["noise"],
        "clock_bias_ns": bias, "S1_ns": float(s1[0]), "Z1_ns": float(z1[0]),
        "lines_per_handoff": float(d["lines"][0]),
        "lines_per_handoff_ci": [float(x) for x in np.percentile(d["lines"][1:], [2.5, 97.5])],
        "outside_slowdown_per_neighbour": float(g[0]), "outside_knee": OUTSIDE_KNEE,
        "waiter_coefficient": float(d["a"][0]), "waiter_source": a_source,
        "waiter_bound": None if v.lock in UNBOUNDED_WAITERS else WAITER_HALF,
        "clipped": clipped, "fit_threads": v.fit_counts()}
    return d


# Parameters naming the outside work of a variant (what its threads do between acquisitions):
# variants that agree on these share one outside-work slowdown (fit_all).
OUTSIDE_WORK_PARAMS = ("kernel", "work_ns", "release", "scanner", "mode", "config", "free_cpu",
                       "on_lru_pct", "cs")


def fit_all(variants: Sequence[VariantInputs], draws: int, rng: np.random.Generator,
            bias: float, fallback_t: float, lat_d: Dict[str, np.ndarray],
            speed: Optional[Dict[str, float]] = None) -> Dict[str, Dict[str, Any]]:
    """fit_draws for every variant; g pooled (median per draw) over a family's variants of the same
    outside work; variants differing only in work_ns take the lock-bound member's L and a; `speed`
    (--target) scales S1 and Z1."""
    fits = {v.key: dict(fit_draws(v, draws, rng, bias, fallback_t),
                        **{f"lat_{c}": lat_d[c] for c in CLASSES}) for v in variants}
    locks = grouped(variants, lambda v: v.key.replace(f"/work_ns:{v.params.get('work_ns')}/", "/"))
    groups = grouped((v for v in variants if fits[v.key]["g_measured"]),
                     lambda v: (v.family, *(v.params.get(k, "") for k in OUTSIDE_WORK_PARAMS)))
    for members in groups.values():
        pooled = np.median(np.array([fits[v.key]["g"] for v in members]), axis=0)
        for v in members:
            fits[v.key]["g"] = pooled
            v.fit_summary["outside_slowdown_per_neighbour"] = float(pooled[0])
            v.fit_summary["outside_slowdown_pooled_over"] = len(members)
    for members in locks.values():
        bound = [v for v in members if v.fit_summary["lines_source"].startswith("throughput")]
        for v in [v for v in members if bound and v not in bound]:
            fits[v.key]["lines"] = fits[bound[0].key]["lines"]
            fits[v.key]["a"] = np.maximum(fits[v.key]["a"], fits[bound[0].key]["a"])
            v.fit_summary["lines_source"] = f"the lock-bound {bound[0].key}'s"
            v.fit_summary["lines_per_handoff"] = float(fits[v.key]["lines"][0])
    for v in variants:
        r = (speed or {}).get(v.key, 1.0)
        fits[v.key]["s1"], fits[v.key]["z1"] = fits[v.key]["s1"] * r, fits[v.key]["z1"] * r
        v.fit_summary["target_speed_ratio"] = r
    return fits


def repetition_noise(v: VariantInputs) -> float:
    """Log-scale standard deviation of the median of r repetitions (the input's usual count):
    1.2533 x pooled 1.4826 MAD of log ops_per_s per fit count / sqrt(r)."""
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


def _lock_x(m: int, transfer, v: VariantInputs, d: Dict[str, np.ndarray],
            l3_neighbours: float, stats: bool = False):
    """Acquisitions per ns of one lock instance shared by m threads (per draw):
    queueing.birth_death with the service S(j) and think time of docs/prediction.md. stats=True:
    (X, mean threads waiting, utilization)."""
    t = np.asarray(transfer, dtype=float) * np.ones_like(d["s1"])
    z = d["z1"] * (1.0 + d["g"] * knee(l3_neighbours))
    if m == 1:
        x = 1.0 / (z + d["s1"])
        return (x, np.zeros_like(x), x * d["s1"]) if stats else x
    mdl = v.model
    j = np.arange(1, m + 1, dtype=float)[None, :]
    k = np.maximum(j - 2, 0.0)
    waiters = k if v.lock in UNBOUNDED_WAITERS else k / (1.0 + k / WAITER_HALF)
    lines = d["lines"][:, None]
    # Spinners steal a lock line the holder also writes (zone_lock's free list) between its
    # writes after the first: a * waiters per stealable write, at most one per transfer time.
    steal = 0.0
    if mdl["spin_cap"] > 1 and v.lock_writes > 1:
        writes = np.minimum(v.lock_writes - 1.0, d["s1"] / np.maximum(t, 1e-9))[:, None]
        steal = writes * d["a"][:, None] * waiters
    # Found free (j = 1): the lines still come from the last holder (m - 1) / m of the time.
    per = np.where(j == 1, (m - 1) / m * (lines + mdl["handoff_lines"]),
                   lines + mdl["handoff_lines"] + QUEUE_LINES.get(v.lock, 0.0) * (j >= 3)
                   + d["a"][:, None] * waiters + steal)
    service = d["s1"][:, None] + t[:, None] * per
    x, q, u = queueing.birth_death(m, z, service, stats=True)
    return (x, q - u, u) if stats else x
