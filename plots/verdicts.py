#!/usr/bin/python3
"""Per-question verdicts of a lockline run, and RUN_DIR/verdicts.json.

    plots/verdicts.py RUN_DIR [--min-effect PCT] [--look K] [--quiet]

COMPARISONS is the one place that says which row keys answer which of the five seed questions
(docs/experiments.md; question ids "000".."004" = report sections q1..q5); each effect comes
from plots/stats.py. Writes RUN_DIR/verdicts.json (results/SCHEMA.md), prints one line per
verdict, exits 0; 2 with one `verdicts.py: error:` line on bad input. `lockline
--until-resolved` re-runs the base_key and variant_key of every verdict not `resolved`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lockline_results import (Point, ResultError, Run, by_variant, error_status,  # noqa: E402
                              labelled_duet_pairs, load_runs, summarize_side_by_side)
import stats  # noqa: E402

SCHEMA = 1


@dataclasses.dataclass(frozen=True)
class ComparisonSpec:
    """Which rows answer a question: rows of `bench` whose `param` is `base` vs `variant`, all
    other parameters equal, at the largest (threads="max") or smallest ("min") thread count
    both have. id: verdicts.json `id` (the report's data-comparison). metrics: the first one
    the rows carry is compared. group_by: one comparison per value of these parameters.
    prefer: of several matching parameter combinations, the one agreeing with most of these
    wins (then sorted order). base_name / variant_name: words for the text. only: rows must
    have these parameter values. A `prefer` or `only` value "" means the rows lack that
    parameter. seed: the seed discussion's figure; comparable: how it relates to the model's."""

    id: str
    question: str
    bench: str
    param: str
    base: str
    variant: str
    base_name: str
    variant_name: str
    metrics: Tuple[str, ...]
    threads: str
    group_by: Tuple[str, ...]
    prefer: Tuple[Tuple[str, str], ...]
    seed: str
    comparable: str
    only: Tuple[Tuple[str, str], ...] = ()
    # "ratio" (the effect variant / base - 1 is the answer) or "ns_saved" (the answer is ns
    # saved per operation, base ns/op x (1 - 1 / (1 + effect)), its interval mapped from the
    # effect's: question 002 in ns saved per free).
    unit: str = "ratio"
    # A value of `param` whose rows hold this comparison as paired bursts of one team
    # (details.duet.pairs: A = base, B = variant), e.g. prezero zeroer:none_vs_idle_cpus
    # (bench/prezero.cpp BurstPairWorkload): the verdict reads their pairs as it reads a duet
    # row's. "" for none.
    paired_value: str = ""

    @property
    def uninstrumented(self) -> bool:
        """True: the uninstrumented twins (stats:off) answer, the instrumented rows give the
        lock wait share as `evidence`; a run without the twins is answered from the
        instrumented rows, and the record says so (`instrumented`, and the text)."""
        return self.question in UNINSTRUMENTED_QUESTIONS


# Questions answered from the uninstrumented twins: their rows take a lock lock_stat would
# instrument (lru_lock, zone->lock), and its path (trylock, a clock read, then the lock; a clock
# read inside 1 hold in 64) slows saturated rows measurably. 002: 2.6.16's put_page takes
# lru_lock on every final put (__page_cache_release, mm/swap.c@v2.6.16), the fast path at
# on_lru_pct:0 never does, so lock_stat would count as saved by the fast path.
UNINSTRUMENTED_QUESTIONS = ("000", "001", "002", "003")
_spec = ComparisonSpec  # the short name of the table below


PAGES = ("pages_per_s", "ops_per_s")
# Question 004 answers in faults/s: every prezero allocation carries the rest of a calibrated
# anonymous fault (bench/prezero.cpp FaultRest); older files' allocs_per_s are labelled so.
FAULTS = ("faults_per_s", "allocs_per_s", "ops_per_s")
# Each era's lock: 2.6.9 / 2.6.16 x86 a test-and-test-and-set byte lock (ttas), 4.0 the ticket
# lock, 5.8 qspinlock. pagevec rows run calibrated fault-path work per page (work_ns:cal); the
# saturated case (work_ns:0) is its own labelled verdict (group_by work_ns).
PV_2004 = (("kernel", "2.6.9"), ("release", "unmap"), ("scanner", "off"), ("lock", "ttas"),
           ("policy", "fixed"), ("mode", "deferred"), ("stats", "off"))
# 2020 on a multi-node machine: 5.8's lru_lock is per node (pgdat->lru_lock), so zones:per_numa,
# as 001's zone->lock; zones:1 (one lock for the machine) doubles the adders a lock has.
PV_2020 = (("kernel", "5.8"), ("release", "none"), ("scanner", "on"), ("lock", "qspinlock"),
           ("policy", "fixed"), ("mode", "deferred"), ("stats", "off"), ("zones", "per_numa"))
# zone_lock rows, like pagevec's, run work_ns:cal (the answer) and work_ns:0 (saturated).
ZONE_PREFER = (("pcp_batch", "31"), ("config", "cma"), ("line", "64"), ("zones", "per_numa"),
               ("work_ns", "cal"), ("stats", "off"))
ZONE_SEED = ("3484b2de9499: aim7 152288 -> 81911 jobs/min (-46.2 %); its fix a368ab67aa55: "
             "84568 -> 164280 jobs/min (+94.3 %)")
BURST = (("protocol", "idle_burst"), ("burst_pages", "4096"))
# Holt's busy-machine comparison's id (the report names it when a file lacks its rows).
HOLT = "prezero_busy_holt"
# The label of the steady-state prezero rows (param `mode`), which write every line of each page
# (bench/prezero.cpp DirtyPage), in their verdicts and report rows.
PREZERO_TOUCHES = ("touches all 64 lines of each page: the case the 2004 author excluded (his "
                   "argument assumed a fault touches few lines of the new page)")
# How the 004 rows' faults/s relate to the seed's (bench/prezero.cpp FaultRest).
PREZERO_FAULTS = ("direction only: both are faults/s, but the model's fault is this machine's "
                  "anonymous fault path (calibrated, less its zeroing) plus the pool's own "
                  "allocation and zeroing; the seed's a 2004 kernel on another machine")
DIRECTION_ONLY = ("direction only: the seed measured a whole workload on another machine; "
                  "the model measures only the code path in question")

# The comparisons that answer the five seed questions: effect = variant / base - 1. Changing
# which rows answer a question is an edit of its entry.
COMPARISONS: Tuple[ComparisonSpec, ...] = (
    _spec("pv_slots_16_15", "000", "pagevec", "slots", "16", "15", "16 slots (2.6.9)",
          "15 slots (128-byte pagevec)", PAGES, "max", ("work_ns",), PV_2004 + (("offset", "0"),),
          "re-aim 4144-4207 -> 4493-4718 jobs/min (+6.8 % to +13.9 %, doubted as noise)",
          DIRECTION_ONLY + " (re-aim jobs/min vs pages/s through lru_lock)"),
    _spec("pv_layout_2_6_9_2_6_10", "000", "pagevec", "layout", "pagevec_v2_6_9",
          "pagevec_v2_6_10", "2.6.9's pagevec (16 slots, 136 bytes)",
          "2.6.10's pagevec (14 slots, 128 bytes)", PAGES, "max", ("work_ns",),
          PV_2004 + (("offset", "0"),),
          "the 2.6.10 layout shipped; the thread measured the 2004 proposal (15 slots)",
          "none: no seed figure for the shipped layout"),
    _spec("pv_offset_0_8", "000", "pagevec", "offset", "0", "8", "offset 0 (aligned)",
          "offset 8 (misaligned)", PAGES, "max", ("work_ns",), PV_2004 + (("slots", "16"),),
          "not measured in 2004", "none: no seed figure"),
    # 2015: 4.0's lock is the ticket lock; the question's verdict is its. The other locks'
    # rows stay as labelled what-if verdicts.
    _spec("zone_lock_after_before", "001", "zone_lock", "layout", "lock_before_free_area",
          "lock_after_free_area", "lock before free_area (3484b2de9499, v3.16-v3.19)",
          "lock after free_area (a368ab67aa55, v4.0)", ("ops_per_s",), "max", ("lock", "work_ns"),
          ZONE_PREFER, ZONE_SEED,
          DIRECTION_ONLY + " (aim7 jobs/min vs zone->lock alloc/free ops/s)",
          (("lock", "ticket"),)),
    *(_spec(f"zone_lock_after_before_whatif_{lock}", "001", "zone_lock", "layout",
            "lock_before_free_area", "lock_after_free_area",
            f"what-if {lock} (not 4.0's lock): lock before free_area",
            f"what-if {lock} (not 4.0's lock): lock after free_area", ("ops_per_s",), "max",
            ("lock", "work_ns"), ZONE_PREFER, ZONE_SEED,
            "none: a what-if; 4.0 ran the ticket lock", (("lock", lock),))
      for lock in ("qspinlock", "pthread_mutex")),
    # 002 in ns saved per free: both sides end in free_hot_cold_page's common base (irq
    # save/restore, free_pages_check), bench/page_free.cpp CostCtx::FreeHot.
    _spec("page_free_fast_atomic", "002", "page_free", "variant", "atomic", "fastpath",
          "atomic put_page", "fast-path put_page", ("ops_per_s",), "min", (),
          (("on_lru_pct", "0"), ("free_cpu", "same"), ("lock", "ttas"), ("stats", "off")),
          "netperf 8126 -> 8199 Mbit/s (+0.9 %)",
          "none: netperf's Mbit/s is a whole network stack in which put_page is a small part; "
          "the model's ns saved per free is put_page and free_hot_cold_page alone",
          unit="ns_saved"),
    _spec("pv_slots_15_31", "003", "pagevec", "slots", "15", "31", "15 slots", "31 slots",
          PAGES, "max", ("work_ns",), PV_2020 + (("offset", "0"),),
          "pmbench 88.8 -> 95.1 Mpages/s (+7.1 %)",
          "direction only: pages/s of a whole workload (pmbench) vs pages/s through lru_lock"),
    _spec("prezero_idle", "004", "prezero", "mode", "zero_on_alloc", "prezeroed_idle",
          "zero on allocation", "pre-zeroed with idle time", FAULTS, "max", (),
          (("method", "memset"),), "faults/wall-s 90849 -> 306791 at 1 thread (+238 %)",
          PREZERO_FAULTS + "; " + PREZERO_TOUCHES),
    # mode:prezeroed_busy: the allocator never sleeps and the zeroer has a PU of its own, so
    # most pages can arrive pre-zeroed (prezeroed_share, said in the verdict); not Holt's busy
    # machine (the protocol:busy verdict below). Paired in the default suite (bench/duet.cpp).
    _spec("prezero_steady_own_pu", "004", "prezero", "mode", "zero_on_alloc", "prezeroed_busy",
          "zero on allocation", "pre-zeroed by a zeroer on a PU of its own while the allocator "
          "never sleeps (steady state)", FAULTS, "max", (), (("method", "memset"),),
          "Holt: no pre-zeroed pages when the machine is busy",
          "none: an objection, not a measurement; this row is not Holt's busy machine (the "
          "zeroer has a PU of its own; see the burst verdict with every PU allocating); "
          + PREZERO_TOUCHES),
    _spec("prezero_burst_engine", "004", "prezero", "zeroer", "none", "engine",
          "zero on allocation", "pre-zeroed after idle (engine, order >= 4 blocks)", FAULTS,
          "min", (), BURST, "Altix BTE zeroing engine, order >= 4 only: no figure",
          "none: no seed figure", paired_value="none_vs_engine"),
    _spec("prezero_burst_idle_cpus", "004", "prezero", "zeroer", "none", "idle_cpus",
          "zero on allocation", "pre-zeroed after idle (idle CPUs)", FAULTS, "min", (), BURST,
          "faults/wall-s 90849 -> 306791 at 1 thread (+238 %)", PREZERO_FAULTS,
          only=(("protocol", "idle_burst"),), paired_value="none_vs_idle_cpus"),
    # Holt's comparison (issue 50): a busy machine (every usable PU allocating) with its idle-CPU
    # zeroers against zeroing on demand, from the paired bursts of protocol:busy
    # zeroer:none_vs_idle_cpus. Older files have no such rows: the report says so.
    _spec(HOLT, "004", "prezero", "zeroer", "none", "idle_cpus",
          "zeroing on demand at every PU (busy, no zeroer)",
          "the busy machine with its idle-CPU zeroers", FAULTS, "max", (),
          (("burst_pages", "4096"),), "Holt: no pre-zeroed pages when the machine is busy",
          "none: an objection, not a measurement", only=(("protocol", "busy"),),
          paired_value="none_vs_idle_cpus"),
)

# A compared metric named in the verdict's words where the question's unit is not ops/s.
METRIC_WORDS = {"faults_per_s": "in faults/s",
                "allocs_per_s": "in allocations/s (rows from before faults/s)"}

# Report section of each question id.
QUESTION_SECTION = {"000": "q1", "001": "q2", "002": "q3", "003": "q4", "004": "q5"}


def usable_pus(run: Run) -> Optional[int]:
    """The run's usable PUs (context.lockline.topology), None when not recorded."""
    topo = run.lockline.get("topology") if isinstance(run.lockline.get("topology"), dict) else {}
    n = topo.get("usable_pus") or topo.get("pus")
    return n if isinstance(n, int) and n > 0 else None


def _per_lock(rows: Sequence[Point]) -> int:
    """The fewest threads a row puts on one lock: zones:per_numa spreads them over the NUMA
    nodes they ran on (placement.numa_nodes; one where not recorded)."""
    def nodes(p):
        n = p.placement.get("numa_nodes") if p.params.get("zones") == "per_numa" else 1
        return n if isinstance(n, int) and n > 0 else 1
    return min(p.threads // nodes(p) for p in rows)


def _lru_lock_needs(rows: Sequence[Point], run: Run) -> Optional[str]:
    """003: adders compete for a per-node lru_lock beside its reclaim scanner."""
    adders = _per_lock(rows)
    shared = any(((p.row.get("details") or {}).get("scanner") or {}).get("shares_measured_pu")
                 for p in rows)
    if adders >= 2 and not shared:
        return None
    return ("needs at least 2 threads adding pages per lru_lock plus a PU of its own for each "
            "lock's reclaim scanner (3 PUs for one node's lru_lock, 3 per node with "
            f"zones:per_numa); these rows have {adders} adder{'s' if adders != 1 else ''} per "
            "lock" + (" and a scanner on a measured PU" if shared else ""))


def _zone_lock_needs(rows: Sequence[Point], run: Run) -> Optional[str]:
    """001: free_area's line moves between CPUs only when threads share a zone->lock."""
    per = _per_lock(rows)
    return None if per >= 2 else ("needs at least 2 threads per zone->lock (2 PUs for one "
                                  f"zone); these rows have {per}")


def _busy_needs(rows: Sequence[Point], run: Run) -> Optional[str]:
    """004: Holt's busy machine is every usable PU allocating beside an idle-time zeroer."""
    busy = [p.threads for p in rows if p.params.get("protocol", "").endswith("busy")
            and p.params.get("zeroer") == "idle_cpus"]
    pus = usable_pus(run)
    if not busy or pus is None or min(busy) >= pus:
        return None
    return (f"Holt's busy machine needs every PU allocating ({pus} here) beside the zeroer; "
            f"these rows run {min(busy)}")


# A question is answered only where its mechanism can occur (docs/experiments.md "Where a
# question can be answered"): per question, why the verdict's rows cannot show it on this run's
# machine, or None. Refused: status "not_answerable", the effect kept, labelled not an answer.
ANSWERABLE = {"001": _zone_lock_needs, "003": _lru_lock_needs, "004": _busy_needs}


def answerability(record: Dict[str, Any], rows: Sequence[Point], run: Run) -> Dict[str, Any]:
    """`record` (a verdict_record) with its question's ANSWERABLE rule applied."""
    rule = ANSWERABLE.get(record["question"])
    needs = rule(rows, run) if rule and rows else None
    if needs is None:
        return record
    pus = usable_pus(run)
    return {**record, "status": "not_answerable", "resolved": False,
            "not_answerable": {"needs": needs, "usable_pus": pus},
            "text": (f"not answerable {f'on {pus} PUs' if pus else 'here'}: {needs}; measured "
                     f"here, not an answer: {record['text']}")}


def _swap(variant: Tuple, key: str, value: str) -> Tuple:
    return tuple(sorted({**dict(variant), key: value}.items()))


def find_pairs(spec: ComparisonSpec, points: Sequence[Point]
               ) -> List[Tuple[str, List[Point], List[Point], int, Tuple]]:
    """The (metric, base repetitions, variant repetitions, threads, group) pairs of one spec in
    `points`: one per group_by value, the best `prefer` match, at the spec's thread count."""
    rows = [p for p in points if p.bench == spec.bench and p.aggregate is None]
    metric = next((m for m in spec.metrics if any(m in p.metrics for p in rows)), None)
    if metric is None:
        return []
    table = by_variant([p for p in rows if metric in p.metrics])
    groups: Dict[Tuple, List[Tuple]] = {}
    for variant in table:
        params = dict(variant)
        if params.get(spec.param) != spec.base or any(params.get(k, "") != v
                                                      for k, v in spec.only):
            continue
        other = _swap(variant, spec.param, spec.variant)
        if other not in table or not set(table[variant]) & set(table[other]):
            continue  # no thread count both have
        group = tuple((k, params.get(k, "")) for k in spec.group_by)
        groups.setdefault(group, []).append(variant)
    out = []
    for group, candidates in sorted(groups.items(), key=lambda item: _group_order(item[0])):
        def score(variant):
            params = dict(variant)
            # Uninstrumented questions: a pair of stats:off twins wins first.
            twin = spec.uninstrumented and params.get("stats") == "off"
            return (not twin, -sum(1 for k, v in spec.prefer if params.get(k, "") == v), variant)
        best = min(candidates, key=score)
        other = _swap(best, spec.param, spec.variant)
        common = sorted(set(table[best]) & set(table[other]))
        n = common[-1] if spec.threads == "max" else common[0]
        out.append((metric, table[best][n], table[other][n], n, group))
    return out


def _group_order(group: Tuple) -> Tuple:
    """Sort key of a comparison's group: in group_by order, work_ns:cal (the answer) before
    work_ns:0 (the labelled saturated case), other values in sorted order."""
    return tuple((k, 0 if (k, v) == ("work_ns", "cal") else 1, v) for k, v in group)


def group_text(group: Tuple) -> List[str]:
    """A group's parameters in a verdict's words, work_ns labelled; parameters the rows do not
    carry are left out."""
    labels = {("work_ns", "0"): " (saturated: no work outside the lock)",
              ("work_ns", "cal"): " (calibrated fault-path work per page)"}
    return [f"{k}:{v}" + labels.get((k, v), "") for k, v in group if v != ""]


def comparison_id(spec: ComparisonSpec, group: Tuple = ()) -> str:
    """verdicts.json `id` of one comparison: the spec's id plus its group ("zone_lock_after_before
    [lock:ticket]"); group parameters the rows do not carry are left out."""
    named = [f"{k}:{v}" for k, v in group if v != ""]
    return spec.id + ("[" + " ".join(named) + "]" if named else "")


def rows_text(spec: ComparisonSpec, base: Optional[Point] = None) -> str:
    """The rows a comparison uses, in words: 'pagevec slots:16 vs slots:15 (kernel:2.6.9 ...)'
    (the other parameters of the chosen rows when given)."""
    text = f"{spec.bench} {spec.param}:{spec.base} vs {spec.param}:{spec.variant}"
    if base is not None:
        rest = " ".join(f"{k}:{v}" for k, v in sorted(base.params.items()) if k != spec.param)
        text += f" ({rest}, threads:{base.threads})" if rest else f" (threads:{base.threads})"
    return text


def find_duet(spec: ComparisonSpec, base: List[Point], points: Sequence[Point]) -> List[Point]:
    """The paired-windows repetitions (family `duet`, bench/duet.cpp) of `base`'s comparison
    (`of`/`param`/`a`/`b`: the spec's bench, parameter, base, variant; the rest as base's), or
    first, with `paired_value`, the bench's paired-burst rows whose `param` is that value;
    overrun windows drop only their pairs (row_duet_pairs)."""
    if spec.paired_value:
        paired = {**base[0].params, spec.param: spec.paired_value}
        rows = [p for p in points if p.bench == spec.bench and p.aggregate is None
                and p.threads == base[0].threads and p.params == paired]
        if rows:
            return rows
    want = {k: v for k, v in base[0].params.items() if k != spec.param}
    want.update({"of": spec.bench, "param": spec.param, "a": spec.base, "b": spec.variant})
    return [p for p in points if p.bench == "duet" and p.aggregate is None
            and p.threads == base[0].threads and p.params == want]


def instrumented_twins(spec: ComparisonSpec, rows: List[Point], points: Sequence[Point]
                       ) -> List[Point]:
    """The instrumented repetitions (lock_stat on: the key without stats) of the point whose
    uninstrumented twin (stats:off) `rows` are: same family, parameters but stats, threads."""
    if not rows or rows[0].params.get("stats") != "off":
        return []
    want = {k: v for k, v in rows[0].params.items() if k != "stats"}
    return [p for p in points if p.bench == spec.bench and p.aggregate is None
            and p.threads == rows[0].threads and p.params == want]


def evidence_record(spec: ComparisonSpec, metric: str, base: List[Point],
                    variant: List[Point], points: Sequence[Point], min_effect: float,
                    confidence: float) -> Optional[Dict[str, Any]]:
    """A verdict's lock_stat evidence, never its answer: the keys of its stats:off rows'
    instrumented twins, each side's wait share in one regime, and the same comparison on them
    (paired where the run holds their duet). None without stats:off rows or their twins."""
    on_base = instrumented_twins(spec, base, points)
    on_variant = instrumented_twins(spec, variant, points)
    if not on_base or not on_variant:
        return None
    regime, shares = summarize_side_by_side([on_base, on_variant], "wait_share")
    comparison = stats.compare_points(on_base, on_variant, metric, "instrumented rows",
                                      min_effect, confidence=confidence)
    duet = find_duet(spec, on_base, points)
    pairs = labelled_duet_pairs(duet)
    if pairs:
        comparison = stats.compare_pairs(pairs, "instrumented rows", min_effect,
                                         confidence=confidence)

    def share(stat):
        return None if stat is None else {"mean": stat.mean, "n": stat.n}
    return {
        "what": ("lock_stat evidence from the instrumented twins of the verdict's rows (not "
                 "the verdict's rows: lock_stat's trylock and clock reads change the timing)"),
        "base_key": on_base[0].key, "variant_key": on_variant[0].key,
        "wait_share": {"base": share(shares[0]), "variant": share(shares[1]),
                       "regime": regime or "all"},
        "instrumented_effect": comparison.effect,
        "instrumented_ci": list(comparison.ci) if comparison.ci else None,
        "instrumented_method": comparison.method, "instrumented_status": comparison.status,
        "instrumented_duet_key": duet[0].key if pairs else None,
        "text": f"the same comparison on the instrumented rows: {comparison.text()}"}


def verdict_record(spec: ComparisonSpec, metric: str, base: List[Point], variant: List[Point],
                   threads: int, group: Tuple, min_effect: float,
                   duet: Sequence[Point] = (), look: int = 0,
                   points: Sequence[Point] = ()) -> Dict[str, Any]:
    """One verdicts.json entry for a base/variant pair of repetitions: the one computation every
    rendering of this comparison (verdict line, table cell, relative plot) shows. With `duet`
    rows the verdict is the paired effect (stats.compare_pairs, method "paired"), the unpaired
    one kept as `unpaired`, never the answer. `look` > 0: the look-th verdict of an adaptively
    stopped sample (--until-resolved) at stats.sequential_confidence(look) (`sequential`).
    spec.uninstrumented: `instrumented` says whether the rows had lock_stat on, `evidence`
    (evidence_record, from `points`) gives the instrumented twins' wait share."""
    # Preferred parameters the chosen rows lack are said: the spec's words ("16 slots") must
    # never describe rows they do not match.
    params = base[0].params if base else {}
    departs = [f"{k}:{params[k]}" for k, v in spec.prefer if k in params and params[k] != v
               and k not in spec.group_by]
    unit = [METRIC_WORDS[metric]] if metric in METRIC_WORDS else []
    # How many allocations found a pre-zeroed page is measured, not assumed (a loaded 2-vCPU
    # VM's steady state gave 0.30, a 16-core one's 0.93): said beside the prezero verdicts.
    unit += prezero_share_words(variant, duet if spec.id == HOLT else ())
    where = ", ".join(group_text(group) + departs + [f"threads:{threads}"] + unit)
    label = f"{spec.variant_name} ({where})"
    confidence = stats.sequential_confidence(look) if look > 0 else stats.CONFIDENCE
    # Rerun intervals (stats.for_rerun): a verdict promises where the next run's
    # estimate falls, not only where this run's effect lies.
    unpaired = stats.for_rerun(stats.compare_points(base, variant, metric, label, min_effect,
                                                    confidence=confidence))
    comparison = unpaired
    pairs = labelled_duet_pairs(duet)
    if pairs:
        comparison = stats.for_rerun(stats.compare_pairs(pairs, label, min_effect,
                                                         confidence=confidence))
        ns = [p.regime_ns for p in duet if comparison.regime and p.regime == comparison.regime
              and p.regime_ns]
        comparison.regime_ns = sorted(ns)[len(ns) // 2] if ns else None
    text = comparison.text()
    sequential = None
    if look > 0:
        sequential = {"look": look, "confidence": confidence,
                      "rule": "alpha spending 5 % x 6 / (pi^2 k^2) at look k"}
        text += (f" (adaptively stopped sample, look {look}: {confidence * 100:.1f} % "
                 "interval)")
    extra: Dict[str, Any] = {"method": comparison.method}
    if spec.unit == "ns_saved":
        extra["ns_saved"] = saved = _ns_saved_of(base, comparison, pairs, duet)
        if saved is not None and comparison.ci and comparison.resolved:
            text = (f"{spec.variant_name} ({where}): {saved['ns']:.1f} ns saved per operation "
                    f"[{saved['ci'][0]:.1f}, {saved['ci'][1]:.1f}] on a base of "
                    f"{saved['base_ns']:.1f} ns ({saved['base_from']}; from: {text})")
    if spec.uninstrumented:
        instrumented = params.get("stats") != "off"
        extra["instrumented"] = instrumented
        extra["evidence"] = ev = (None if instrumented else
                                  evidence_record(spec, metric, base, variant, points,
                                                  min_effect, confidence))
        # lock_stat's wait share: the twins' (evidence) or, with no twins, the verdict's own.
        wait = (ev or {}).get("wait_share") or {}
        shares = ([None if x is None else x.mean for x in summarize_side_by_side(
            [base, variant], "wait_share")[1]] if instrumented else
            [(wait.get(k) or {}).get("mean") for k in ("base", "variant")])
        if instrumented:
            text = ("from instrumented rows (lock_stat on; this run has no stats:off twins of "
                    "them): " + text)
        if comparison.equivalent and None not in shares and max(shares) < 0.05:
            text += (f"; the lock is nearly idle here (lock_stat wait share "
                     f"{shares[0] * 100:.1f} % -> {shares[1] * 100:.1f} %), so "
                     "no effect is what a placement change can show at this load")
    if spec.unit == "ns_saved" and extra.get("ns_saved"):
        extra["lru_lock_part"] = part = _without_lru_lock(base, points, min_effect)
        if part is not None and comparison.resolved:
            # An interval across 0 is no saving told apart from none: then all of the saving
            # above is the lock round trip, and "the rest" of a negative saving misreads.
            spans = part["ci"][0] <= 0 <= part["ci"][1]
            text += (f"; against the 2.6.18-style rows (PageLRU tested first: no lru_lock at "
                     f"on_lru_pct:0; lock_stat on both sides) the fast path saves "
                     f"{part['ns']:.1f} ns [{part['ci'][0]:.1f}, {part['ci'][1]:.1f}]"
                     + (" (not told apart from 0), so the saving above is" if spans else
                        ", so the rest is")
                     + " 2.6.16's lru_lock round trip on every final put, not the atomic")
    if pairs:
        extra["duet_key"] = duet[0].key
        extra["unpaired"] = {"effect": unpaired.effect,
                             "ci": list(unpaired.ci) if unpaired.ci else None,
                             "regime": unpaired.regime or "all", "n_base": unpaired.n_base,
                             "n_variant": unpaired.n_variant, "status": unpaired.status}
    return _record(spec, group, where, metric, base, variant, threads, comparison, sequential,
                   text, extra)


def prezero_share_words(variant: List[Point], duet: Sequence[Point]) -> List[str]:
    """The share of the variant's allocations handed a pre-zeroed page, in words: the median and
    range of b_prezeroed_share over Holt's paired busy bursts (`duet`) where recorded, else the
    variant rows' prezeroed_share; [] without either."""
    paired = [pr["b_prezeroed_share"] for p in duet for pr in
              ((p.row.get("details") or {}).get("duet") or {}).get("pairs", [])
              if isinstance(pr, dict) and "b_prezeroed_share" in pr]
    if paired:
        return [f"its SCHED_IDLE zeroers still pre-zeroed {statistics.median(paired):.2f} of a "
                f"busy burst's pages (median; {min(paired):.2f}-{max(paired):.2f} over "
                f"{len(paired)} bursts: CFS's weight-3 share and the allocators' sleeps)"]
    shares = [p.metrics["prezeroed_share"] for p in variant if "prezeroed_share" in p.metrics]
    return [f"pre-zeroed share {statistics.median(shares):.2f}"] if shares else []


def _without_lru_lock(base: List[Point], points: Sequence[Point], min_effect: float
                      ) -> Optional[Dict[str, Any]]:
    """002's effect without 2.6.16's lru_lock round trip: the fast path against the 2.6.18
    put_page (lru_check_first_2_6_18: the atomic decrement, lru_lock only for a page on the
    LRU, mm/swap.c@v2.6.18:233-242) at the verdict's parameters, both instrumented rows (the
    2.6.18 rows have no stats:off twins), in ns saved per free; None without those rows."""
    want = {k: v for k, v in base[0].params.items() if k not in ("stats", "variant")}

    def rows(variant):
        return [p for p in points if p.bench == "page_free" and p.aggregate is None
                and p.threads == base[0].threads and p.params == {**want, "variant": variant}]
    old, fast = rows("lru_check_first_2_6_18"), rows("fastpath")
    if not old or not fast:
        return None
    c = stats.for_rerun(stats.compare_points(old, fast, "ops_per_s", "", min_effect))
    saved = ns_saved(old, c.effect, c.ci)
    return saved if saved and saved["ci"] else None


def _ns_saved_of(base: List[Point], comparison: stats.Comparison, pairs: Sequence[Tuple],
                 duet: Sequence[Point]) -> Optional[Dict[str, Any]]:
    """ns_saved of a comparison answered in ns saved per operation (spec.unit "ns_saved")."""
    # A paired answer's base is its own duet's base windows (in its regime): the base rows'
    # repetitions ran at other moments (under load 46 ns/op where the duet's read 19 ns).
    duet_base_ns = None
    if pairs:
        rates = [a for lab, a, _, _ in pairs
                 if (not comparison.regime or lab == comparison.regime) and a > 0]
        if rates:
            duet_base_ns = duet[0].threads * 1e9 / statistics.median(rates)
    return ns_saved(base, comparison.effect, comparison.ci, duet_base_ns)


def _record(spec: ComparisonSpec, group: Tuple, where: str, metric: str, base: List[Point],
            variant: List[Point], threads: int, comparison: stats.Comparison,
            sequential: Optional[Dict[str, Any]], text: str, extra: Dict[str, Any]
            ) -> Dict[str, Any]:
    """The verdicts.json entry of verdict_record: `extra` first, then the contract's fields
    in their fixed order. `ci` is a rerun interval (stats.for_rerun), `effect_ci` the
    effect's own confidence interval it was made from."""
    c = comparison
    return {**extra, "id": comparison_id(spec, group), "question": spec.question,
            "comparison": f"{spec.variant_name} vs {spec.base_name} ({where})",
            "metric": metric, "base_key": base[0].key, "variant_key": variant[0].key,
            "threads": threads, "effect": c.effect, "ci": list(c.ci) if c.ci else None,
            "interval": c.interval, "effect_ci": list(c.effect_ci) if c.effect_ci else None,
            "regime": c.regime or "all", "regime_ns": c.regime_ns,
            "rows": rows_text(spec, base[0]), "seed": spec.seed, "comparable": spec.comparable,
            "n_base": c.n_base, "n_variant": c.n_variant, "total_base": c.total_base,
            "total_variant": c.total_variant, "dropped": c.dropped, "resolved": c.resolved,
            "status": c.status, "sequential": sequential, "text": text}


def verdict_samples(points: Sequence[Point], verdict: Dict[str, Any]) -> Dict[str, Any]:
    """The samples a verdict's effect is the median of: paired, `used` (each duet_key window
    pair's B/A in its regime, stats.compare_pairs' rule); unpaired, `base` and `variant` (its
    base_key and variant_key rows' metric in its regime, stats.compare_points' rule). `effect`
    is recomputed from them (it equals the verdict's), `others` holds (side, regime, value) of
    other regimes, `base_median` the base side's median (paired: its A windows')."""
    regime = "" if verdict.get("regime") in ("all", None) else verdict["regime"]
    if verdict.get("method") == "paired":
        rows = [p for p in points if p.key == verdict.get("duet_key") and p.aggregate is None]
        good = [(lab, a, b) for lab, a, b, _ in labelled_duet_pairs(rows)
                if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0]

        def mine(lab):
            return lab == regime if regime else lab not in stats.NOT_A_REGIME
        used = [(a, b) for lab, a, b in good if mine(lab)]
        logs = [math.log(b / a) for a, b in used]
        return {"kind": "paired", "regime": regime, "used": [b / a for a, b in used],
                "others": [("pair", lab, b / a) for lab, a, b in good if not mine(lab)],
                "effect": math.exp(statistics.median(logs)) - 1 if logs else None,
                "base_median": statistics.median([a for a, _ in used]) if used else None}
    metric = verdict["metric"]

    def side(key):
        return [(p.regime, p.metrics[metric]) for p in points if p.key == key
                and p.aggregate is None and metric in p.metrics and not p.overrun]
    base, variant = side(verdict.get("base_key")), side(verdict.get("variant_key"))
    choice = stats.select_regime(base, variant)
    b_med = statistics.median(choice.base) if choice.base else None
    return {"kind": "unpaired", "regime": choice.regime, "base": choice.base,
            "variant": choice.variant, "base_median": b_med,
            "others": [(name, lab, v) for name, rows in (("base", base), ("variant", variant))
                       for lab, v in rows if lab != choice.regime and choice.regime],
            "effect": (statistics.median(choice.variant) / b_med - 1
                       if b_med and choice.variant else None)}


def ns_saved(base: Sequence[Point], effect: Optional[float], ci: Optional[Sequence[float]],
             base_ns: Optional[float] = None) -> Optional[Dict[str, Any]]:
    """ns saved per operation: base_ns x (1 - 1 / (1 + effect on ops/s)), the interval mapped
    bound by bound (without the base's spread). `base_ns`: the paired duet's base windows ("duet
    windows"), else the base rows' median ns_per_op; None without an effect or a base ns/op."""
    source = "duet windows"
    if base_ns is None:
        source = "base rows"
        ns = [p.metrics["ns_per_op"] for p in base if "ns_per_op" in p.metrics]
        if not ns:
            return None
        base_ns = statistics.median(ns)
    if effect is None or not base_ns > 0:
        return None

    def saved(e: float) -> float:
        return base_ns * (1 - 1 / (1 + e))
    return {"ns": saved(effect), "ci": [saved(ci[0]), saved(ci[1])] if ci else None,
            "base_ns": base_ns, "base_from": source,
            "unit": "ns saved per operation (one free per operation)"}


def compute_verdicts(run: Run, min_effect: float = stats.MIN_EFFECT, look: int = 0
                     ) -> List[Dict[str, Any]]:
    """Every COMPARISONS entry present in `run`, as verdicts.json records, in question order
    (`look`: see verdict_record)."""
    out = []
    for spec in COMPARISONS:
        for metric, base, variant, n, group in find_pairs(spec, run.points):
            duet = find_duet(spec, base, run.points)
            out.append(answerability(verdict_record(spec, metric, base, variant, n, group,
                                                    min_effect, duet, look, run.points),
                                     base + variant + list(duet), run))
    return out


def verdicts_document(run: Run, min_effect: float = stats.MIN_EFFECT, look: int = 0
                      ) -> Dict[str, Any]:
    """The verdicts.json object: {"schema": 1, "min_effect": ..., "verdicts": [...]}, plus
    the rule in words (and `look` > 0: the sequential design's look)."""
    doc = {"schema": SCHEMA, "min_effect": min_effect,
           "rule": (f"effect = median(variant) / median(base) - 1 over the repetitions of one "
                    f"coherence regime; {int(stats.CONFIDENCE * 100)} % percentile bootstrap "
                    f"interval ({stats.BOOTSTRAP_RESAMPLES} resamples, seed {stats.SEED}) "
                    f"widened for the few repetitions it rests on (expanded percentile); "
                    f"resolved when the interval excludes 0 or lies within +-min_effect "
                    f"(within it, the answer is 'no effect of min_effect or more' even when "
                    f"it excludes 0); "
                    f"at least {stats.MIN_REPETITIONS} same-regime repetitions a side. Where "
                    f"the run has the comparison as paired windows (family duet, method "
                    f"'paired'): effect = median over window pairs of B/A - 1, paired "
                    f"percentile bootstrap over the pairs of one coherence regime, "
                    f"repetitions resampled first, then pairs within them (widened likewise), "
                    f"at least {stats.MIN_PAIRS} pairs in {stats.MIN_PAIR_REPETITIONS} "
                    f"repetitions; a pair holding an overrun window is left out, not its "
                    f"repetition"),
           "verdicts": compute_verdicts(run, min_effect, look)}
    if look > 0:
        doc["sequential"] = {"look": look, "confidence": stats.sequential_confidence(look),
                             "rule": "adaptively stopped sample (lockline --until-resolved): "
                                     "the interval at look k has confidence 1 - 5 % x 6 / "
                                     "(pi^2 k^2), so any look resolving with a spurious effect "
                                     "has probability at most 5 % in total"}
    return doc


def write_verdicts(run_dir: str, run: Optional[Run] = None,
                   min_effect: float = stats.MIN_EFFECT, look: int = 0
                   ) -> Tuple[str, Dict[str, Any]]:
    """Compute and write RUN_DIR/verdicts.json (exclusive temporary file + rename); returns
    (path, document). Raises ResultError for a bad run directory."""
    from outputs import write_atomic
    if not os.path.isdir(run_dir):
        raise ResultError(f"{run_dir}: not a directory (expected a lockline run directory)")
    if run is None:
        run = load_runs([run_dir])[0]
    doc = verdicts_document(run, min_effect, look)
    path = os.path.join(run_dir, "verdicts.json")
    write_atomic(path, json.dumps(doc, indent=1) + "\n")
    return path, doc


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """RUN_DIR, --min-effect PCT and --quiet: the options of verdicts.py and reproduce.py."""
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("--min-effect", type=float, default=stats.MIN_EFFECT * 100,
                        metavar="PCT", help="minimum effect in percent (default 5)")
    parser.add_argument("--quiet", action="store_true", help="do not print the verdict lines")


def min_effect_of(percent: float) -> float:
    """--min-effect PCT as a fraction; ResultError unless 0 < PCT < 100."""
    if not 0 < percent < 100:
        raise ResultError(f"--min-effect {percent:g}: expected a percentage between 0 and 100")
    return percent / 100


def main(argv: Optional[Sequence[str]] = None) -> int:
    """CLI entry point; returns the exit status."""
    parser = argparse.ArgumentParser(
        description="Write RUN_DIR/verdicts.json: the five seed questions' effects with 95 % "
                    "intervals from one coherence regime.")
    add_run_options(parser)
    parser.add_argument("--look", type=int, default=0, metavar="K",
                        help="the K-th look at an adaptively stopped sample (lockline "
                             "--until-resolved): intervals at 1 - 5 %% x 6 / (pi^2 K^2) "
                             "confidence (default 0: one fixed-size sample, 95 %%)")
    args = parser.parse_args(argv)
    try:
        min_effect = min_effect_of(args.min_effect)
        if args.look < 0:
            raise ResultError(f"--look {args.look}: expected 0 or a look number from 1")
        path, doc = write_verdicts(args.run_dir, min_effect=min_effect, look=args.look)
    except (ResultError, OSError) as err:
        return error_status("verdicts.py", err, "verdicts.json")
    if not args.quiet:
        for v in doc["verdicts"]:
            print(f"[{v['question']}] {v['text']}")
        resolved = sum(1 for v in doc["verdicts"] if v["resolved"])
        print(f"{resolved} of {len(doc['verdicts'])} comparisons resolved; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
