#!/usr/bin/python3
"""Per-question verdicts of a lockline run, and RUN_DIR/verdicts.json.

    plots/verdicts.py RUN_DIR [--min-effect PCT] [--quiet]

COMPARISONS below is the one place that says which row keys answer which of the five seed
questions (BACKGROUND.md; question ids "000".."004" = report sections q1..q5). For each
comparison present in the run, the effect of the variant against the base at one thread count
comes from plots/stats.py (ratio of medians with a 95 % bootstrap interval from the
repetitions of one coherence regime). Writes RUN_DIR/verdicts.json (format in HELPERS.md's
contract and results/SCHEMA.md), prints one verdict line per comparison, and exits 0; 2 with
one `verdicts.py: error:` line on bad input. `lockline --until-resolved` re-runs the base_key
and variant_key of every verdict whose `resolved` is false.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lockline_results import Point, ResultError, Run, load_runs  # noqa: E402
import stats  # noqa: E402

SCHEMA = 1


@dataclasses.dataclass(frozen=True)
class ComparisonSpec:
    """Which rows answer a question: rows of `bench` whose `param` is `base` vs `variant`, all
    other parameters equal, at the largest (threads="max") or smallest ("min") thread count
    both have.

    metrics: the first one the rows carry is compared. group_by: one comparison per value of
    these parameters (e.g. per lock kind). prefer: when several parameter combinations match,
    the one agreeing with most of these wins (then the first in sorted order). only: rows
    must have these parameter values (a what-if row's lock). base_name / variant_name: words
    for the text ("lock before free_area").
    """

    question: str
    bench: str
    param: str
    base: str
    variant: str
    base_name: str
    variant_name: str
    metrics: Tuple[str, ...] = ("ops_per_s",)
    threads: str = "max"
    group_by: Tuple[str, ...] = ()
    prefer: Tuple[Tuple[str, str], ...] = ()
    only: Tuple[Tuple[str, str], ...] = ()


# The comparisons that answer the five seed questions. effect = variant / base - 1.
# Each era's lock (issue 23): 2.6.9 / 2.6.16 x86 a test-and-test-and-set byte lock (ttas),
# 4.0 the ticket lock, 5.8 qspinlock. pagevec rows run calibrated fault-path work per page
# (work_ns:cal); the saturated case (work_ns:0) is its own labelled verdict.
_PV_2004 = (("kernel", "2.6.9"), ("release", "unmap"), ("scanner", "off"), ("lock", "ttas"),
            ("policy", "fixed"), ("mode", "deferred"))
_PV_2020 = (("kernel", "5.8"), ("release", "none"), ("scanner", "on"), ("lock", "qspinlock"),
            ("offset", "0"), ("policy", "fixed"), ("mode", "deferred"))
COMPARISONS: Tuple[ComparisonSpec, ...] = (
    ComparisonSpec("000", "pagevec", "slots", "16", "15", "16 slots (2.6.9)",
                   "15 slots (128-byte pagevec)", ("pages_per_s", "ops_per_s"),
                   group_by=("work_ns",), prefer=_PV_2004 + (("offset", "0"),)),
    ComparisonSpec("000", "pagevec", "layout", "pagevec_v2_6_9", "pagevec_v2_6_10",
                   "2.6.9's pagevec (16 slots, 136 bytes)",
                   "2.6.10's pagevec (14 slots, 128 bytes)", ("pages_per_s", "ops_per_s"),
                   group_by=("work_ns",), prefer=_PV_2004 + (("offset", "0"),)),
    ComparisonSpec("000", "pagevec", "offset", "0", "8", "16 slots at offset 0",
                   "16 slots at offset 8 (misaligned)", ("pages_per_s", "ops_per_s"),
                   prefer=_PV_2004 + (("slots", "16"), ("work_ns", "0"))),
    # 2015: 4.0's lock is the ticket lock; the question's verdict is its. The other locks'
    # rows stay as labelled what-if verdicts.
    ComparisonSpec("001", "zone_lock", "layout", "lock_before_free_area", "lock_after_free_area",
                   "lock before free_area (3484b2de9499, v3.16-v3.19)",
                   "lock after free_area (a368ab67aa55, v4.0)", ("ops_per_s",),
                   group_by=("lock",), only=(("lock", "ticket"),),
                   prefer=(("pcp_batch", "31"), ("config", "cma"), ("line", "64"),
                           ("zones", "per_numa"), ("work_ns", "cal"))),
) + tuple(
    ComparisonSpec("001", "zone_lock", "layout", "lock_before_free_area", "lock_after_free_area",
                   f"what-if {lock} (not 4.0's lock): lock before free_area",
                   f"what-if {lock} (not 4.0's lock): lock after free_area", ("ops_per_s",),
                   group_by=("lock",), only=(("lock", lock),),
                   prefer=(("pcp_batch", "31"), ("config", "cma"), ("line", "64"),
                           ("zones", "per_numa"), ("work_ns", "cal")))
    for lock in ("qspinlock", "pthread_mutex")) + (
    ComparisonSpec("002", "page_free", "variant", "atomic", "fastpath", "atomic put_page",
                   "fast-path put_page", ("ops_per_s",), threads="min",
                   prefer=(("on_lru_pct", "0"), ("free_cpu", "same"), ("lock", "ttas"))),
    ComparisonSpec("003", "pagevec", "slots", "15", "31", "15 slots", "31 slots",
                   ("pages_per_s", "ops_per_s"), group_by=("work_ns",), prefer=_PV_2020),
    ComparisonSpec("004", "prezero", "mode", "zero_on_alloc", "prezeroed_idle",
                   "zero on allocation", "pre-zeroed with idle time",
                   ("allocs_per_s", "ops_per_s"), prefer=(("method", "memset"),)),
    ComparisonSpec("004", "prezero", "mode", "zero_on_alloc", "prezeroed_busy",
                   "zero on allocation", "pre-zeroed, zeroer CPUs busy",
                   ("allocs_per_s", "ops_per_s"), prefer=(("method", "memset"),)),
)

# 2004's two positions on pre-zeroing, with the burst protocol (bench/prezero.cpp): after an
# idle period a pool of P pre-zeroed pages serves a burst of B = P allocations (Lameter's case),
# and the same zeroer when the machine was busy (Holt's objection).
COMPARISONS += tuple(
    ComparisonSpec("004", "prezero", "zeroer", "none", zeroer, "zero on allocation",
                   f"pre-zeroed after idle ({words})", ("allocs_per_s", "ops_per_s"),
                   threads="min", prefer=(("protocol", "idle_burst"), ("burst_pages", "4096")))
    for zeroer, words in (("engine", "engine, order >= 4 blocks"),
                          ("idle_cpus", "idle CPUs")))
COMPARISONS += (
    ComparisonSpec("004", "prezero", "protocol", "idle_burst", "busy",
                   "pre-zeroed after idle (idle CPUs)", "the same zeroer while busy",
                   ("allocs_per_s", "ops_per_s"), threads="min",
                   prefer=(("zeroer", "idle_cpus"), ("burst_pages", "4096"))),)

# Report section of each question id.
QUESTION_SECTION = {"000": "q1", "001": "q2", "002": "q3", "003": "q4", "004": "q5"}


def _variants(points: Sequence[Point]) -> Dict[Tuple, Dict[int, List[Point]]]:
    out: Dict[Tuple, Dict[int, List[Point]]] = {}
    for p in points:
        out.setdefault(p.variant, {}).setdefault(p.threads, []).append(p)
    return out


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
    by_variant = _variants([p for p in rows if metric in p.metrics])
    groups: Dict[Tuple, List[Tuple]] = {}
    for variant in by_variant:
        params = dict(variant)
        if params.get(spec.param) != spec.base:
            continue
        if any(params.get(k) != v for k, v in spec.only):
            continue
        other = _swap(variant, spec.param, spec.variant)
        if other not in by_variant:
            continue
        common = set(by_variant[variant]) & set(by_variant[other])
        if not common:
            continue
        group = tuple((k, params.get(k, "")) for k in spec.group_by)
        groups.setdefault(group, []).append(variant)
    out = []
    for group, candidates in sorted(groups.items()):
        def score(variant):
            params = dict(variant)
            return (-sum(1 for k, v in spec.prefer if params.get(k) == v), variant)
        best = min(candidates, key=score)
        other = _swap(best, spec.param, spec.variant)
        common = sorted(set(by_variant[best]) & set(by_variant[other]))
        n = common[-1] if spec.threads == "max" else common[0]
        out.append((metric, by_variant[best][n], by_variant[other][n], n, group))
    return out


def verdict_record(spec: ComparisonSpec, metric: str, base: List[Point], variant: List[Point],
                   threads: int, group: Tuple, min_effect: float) -> Dict[str, Any]:
    """One verdicts.json entry (the contract's fields plus `threads`, `total_base`,
    `total_variant`, `bench`) for a base/variant pair of repetitions."""
    where = ", ".join([f"{k}:{v}" for k, v in group] + [f"threads:{threads}"])
    label = f"{spec.variant_name} ({where})"
    comparison = stats.compare_points(base, variant, metric, label, min_effect)
    return {
        "question": spec.question,
        "comparison": f"{spec.variant_name} vs {spec.base_name} ({where})",
        "metric": metric,
        "base_key": base[0].key,
        "variant_key": variant[0].key,
        "threads": threads,
        "effect": comparison.effect,
        "ci": list(comparison.ci) if comparison.ci else None,
        "regime": comparison.regime or "all",
        "n_base": comparison.n_base,
        "n_variant": comparison.n_variant,
        "total_base": comparison.total_base,
        "total_variant": comparison.total_variant,
        "dropped": comparison.dropped,
        "resolved": comparison.resolved,
        "status": comparison.status,
        "text": comparison.text(),
    }


def compute_verdicts(run: Run, min_effect: float = stats.MIN_EFFECT) -> List[Dict[str, Any]]:
    """Every COMPARISONS entry present in `run`, as verdicts.json records, in question order."""
    out = []
    for spec in COMPARISONS:
        for metric, base, variant, n, group in find_pairs(spec, run.points):
            out.append(verdict_record(spec, metric, base, variant, n, group, min_effect))
    return out


def verdicts_document(run: Run, min_effect: float = stats.MIN_EFFECT) -> Dict[str, Any]:
    """The verdicts.json object: {"schema": 1, "min_effect": ..., "verdicts": [...]}, plus
    the rule in words."""
    return {"schema": SCHEMA, "min_effect": min_effect,
            "rule": (f"effect = median(variant) / median(base) - 1 over the repetitions of one "
                     f"coherence regime; {int(stats.CONFIDENCE * 100)} % percentile bootstrap "
                     f"interval ({stats.BOOTSTRAP_RESAMPLES} resamples, seed {stats.SEED}); "
                     f"resolved when the interval excludes 0 or is narrower than min_effect; "
                     f"at least {stats.MIN_REPETITIONS} same-regime repetitions a side"),
            "verdicts": compute_verdicts(run, min_effect)}


def write_verdicts(run_dir: str, run: Optional[Run] = None,
                   min_effect: float = stats.MIN_EFFECT) -> Tuple[str, Dict[str, Any]]:
    """Compute and write RUN_DIR/verdicts.json (exclusive temporary file + rename); returns
    (path, document). Raises ResultError for a bad run directory."""
    from outputs import write_atomic
    if not os.path.isdir(run_dir):
        raise ResultError(f"{run_dir}: not a directory (expected a lockline run directory)")
    if run is None:
        run = load_runs([run_dir])[0]
    doc = verdicts_document(run, min_effect)
    path = os.path.join(run_dir, "verdicts.json")
    write_atomic(path, json.dumps(doc, indent=1) + "\n")
    return path, doc


def main(argv: Optional[Sequence[str]] = None) -> int:
    """CLI entry point; returns the exit status."""
    parser = argparse.ArgumentParser(
        description="Write RUN_DIR/verdicts.json: the five seed questions' effects with 95 % "
                    "intervals from one coherence regime.")
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("--min-effect", type=float, default=stats.MIN_EFFECT * 100,
                        metavar="PCT", help="minimum effect in percent (default 5)")
    parser.add_argument("--quiet", action="store_true", help="do not print the verdict lines")
    args = parser.parse_args(argv)
    try:
        if not 0 < args.min_effect < 100:
            raise ResultError(f"--min-effect {args.min_effect:g}: expected a percentage "
                              "between 0 and 100")
        path, doc = write_verdicts(args.run_dir, min_effect=args.min_effect / 100)
    except ResultError as err:
        print(f"verdicts.py: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"verdicts.py: error: cannot write verdicts.json: {err}", file=sys.stderr)
        return 2
    if not args.quiet:
        for v in doc["verdicts"]:
            print(f"[{v['question']}] {v['text']}")
        resolved = sum(1 for v in doc["verdicts"] if v["resolved"])
        print(f"{resolved} of {len(doc['verdicts'])} comparisons resolved; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
