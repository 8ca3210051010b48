#!/usr/bin/python3
"""Count A/A comparisons: how often lockline's rule claims an effect that is not there.

Usage: plots/aa_check.py RUN_DIR [RUN_DIR ...] [--min-effect PCT] [--metric NAME]
                         [--all-pairs] [--json]

Sources: each run's A/A duet rows (stats.compare_pairs), and keys measured in two runs of one
build (duet rows by stats.compare_pair_effects, others by stats.compare_points; identical rows
skipped). The false-effect rate carries a Wilson 95 % interval that treats comparisons as
independent (rows of one run pair are not: a rough bound). Exit 0 (a measurement, not a gate);
2 with one `aa_check.py: error:` line on bad input."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lockline_results import (ResultError, Run, error_status, grouped,  # noqa: E402
                              labelled_duet_pairs, load_runs, row_identity)
import stats  # noqa: E402

ANSWER_WORDS = {"effect": "an effect", "equivalent": "equal", "not_resolved": "not resolved",
                "too_few": "too few"}


def _series(run: Run) -> Dict[str, List[Any]]:
    """Repetitions per key, without aggregates or overrun ones (a duet row keeps its other
    window pairs)."""
    return grouped((p for p in run.points if p.aggregate is None
                    and (p.bench == "duet" or not p.overrun)), lambda p: p.key)


def _family(reps) -> str:
    p = reps[0]
    return p.params.get("of", p.family) if p.bench == "duet" else p.family


def _record(comparison: stats.Comparison, source: str, key: str, family: str, threads: int,
            runs: str) -> Dict[str, Any]:
    return {"source": source, "key": key, "family": family, "threads": threads, "runs": runs,
            "answer": stats.answer(comparison.ci, comparison.min_effect),
            "effect": comparison.effect, "ci": comparison.ci, "method": comparison.method,
            "regime": comparison.regime, "n_base": comparison.n_base,
            "n_variant": comparison.n_variant}


def within_run(run: Run, min_effect: float) -> List[Dict[str, Any]]:
    out = []
    for key, reps in sorted(_series(run).items()):
        p = reps[0]
        if p.bench != "duet" or p.params.get("a") is None or p.params.get("a") != p.params.get("b"):
            continue
        pairs = labelled_duet_pairs(reps)
        if not pairs:
            continue
        c = stats.compare_pairs(pairs, min_effect=min_effect)
        out.append(_record(c, "A/A duet row", key, _family(reps), p.threads, run.path))
    return out


def between_runs(base: Run, cur: Run, min_effect: float, metric: str,
                 skipped: List[str]) -> List[Dict[str, Any]]:
    """Every key of both runs compared between them; keys with identical rows go to `skipped`."""
    out = []
    bs, cs = _series(base), _series(cur)
    runs = f"{base.path} vs {cur.path}"
    for key in sorted(set(bs) & set(cs)):
        b, c = bs[key], cs[key]
        if len(b) == len(c) and all(row_identity(x.row) == row_identity(y.row)
                                    for x, y in zip(b, c)):
            skipped.append(key)
            continue
        bp, cp = labelled_duet_pairs(b), labelled_duet_pairs(c)
        if bp and cp:
            comp = stats.compare_pair_effects(bp, cp, min_effect=min_effect)
            source = "duet row, two runs"
        elif any(metric in p.metrics for p in b) and any(metric in p.metrics for p in c):
            comp = stats.compare_points(b, c, metric, min_effect=min_effect)
            source = "repetitions, two runs"
        else:
            continue
        out.append(_record(comp, source, key, _family(b), b[0].threads, runs))
    return out


def count(records: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    n = {a: sum(1 for r in records if r["answer"] == a) for a in ANSWER_WORDS}
    decided = n["effect"] + n["equivalent"] + n["not_resolved"]
    rate = n["effect"] / decided if decided else None
    wilson = list(stats.wilson_interval(n["effect"], decided)) if decided else None
    return {"comparisons": len(records), "with_interval": decided, "effect": n["effect"],
            "equal": n["equivalent"], "not_resolved": n["not_resolved"],
            "too_few": n["too_few"], "false_effect_rate": rate, "wilson95": wilson}


def check(runs: Sequence[Run], min_effect: float = stats.MIN_EFFECT, metric: str = "ops_per_s",
          all_pairs: bool = False) -> Dict[str, Any]:
    """Every A/A comparison of `runs` with its answer, and the counts."""
    records: List[Dict[str, Any]] = []
    notes: List[str] = []
    seen = set()
    for run in runs:
        where = os.path.realpath(run.path)
        if where in seen:
            notes.append(f"{run.path}: given more than once; its A/A duet rows counted once")
            continue
        seen.add(where)
        records += within_run(run, min_effect)
    if all_pairs:
        couples = list(itertools.combinations(runs, 2))
    else:
        couples = [(runs[i], runs[i + 1]) for i in range(0, len(runs) - 1, 2)]
        if len(runs) > 1 and len(runs) % 2:
            notes.append(f"{runs[-1].path}: an odd last run, not compared (disjoint pairs; "
                         "--all-pairs compares every pair)")
    for base, cur in couples:
        skipped: List[str] = []
        records += between_runs(base, cur, min_effect, metric, skipped)
        if skipped:
            notes.append(f"{base.path} vs {cur.path}: {len(skipped)} key(s) hold the same rows "
                         "in both (the same run twice?), not counted")
    def by(field):
        return {v: count([r for r in records if r[field] == v])
                for v in sorted({r[field] for r in records})}
    within = [r["source"] == "A/A duet row" for r in records]
    return {"min_effect": min_effect, "runs": [r.path for r in runs],
            "pairs_of_runs": len(couples), "total": count(records),
            "within_run": count([r for r, w in zip(records, within) if w]),
            "between_run": count([r for r, w in zip(records, within) if not w]),
            "by_source": by("source"), "by_family": by("family"), "comparisons": records,
            "notes": notes}


def count_text(c: Dict[str, Any], min_effect: float) -> str:
    if c["with_interval"]:
        lo, hi = c["wilson95"]
        rate = (f"false-effect rate {100 * c['false_effect_rate']:.1f} %, Wilson 95 % "
                f"[{100 * lo:.1f} %, {100 * hi:.1f} %]")
    else:
        rate = "no comparison with an interval"
    return (f"{c['comparisons']} comparisons: {c['effect']} an effect ({rate}), {c['equal']} "
            f"equal (no change larger than {100 * min_effect:g} %), {c['not_resolved']} not "
            f"resolved, {c['too_few']} too few")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="aa_check.py",
        description="Count A/A comparisons (A/A duet rows of each run; keys compared between "
                    "runs of the same build) answering 'an effect' (interval excludes 0: a "
                    "false effect), 'equal' (interval within +-min effect) or 'not resolved', "
                    "with a Wilson 95 %% interval on the false-effect rate. Exit 0; 2 on bad "
                    "input.",
        epilog="Runs are compared in disjoint consecutive pairs (1 vs 2, 3 vs 4, ...) unless "
               "--all-pairs. Duet rows are compared by their paired effect B/A, other rows by "
               "their repetitions of one coherence regime (plots/stats.py).")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR",
                   help="run directories (or lockline.json files) of the same build")
    p.add_argument("--min-effect", type=float, default=stats.MIN_EFFECT * 100, metavar="PCT",
                   help="equivalence bound in percent: 'equal' needs the interval within "
                        "+-PCT (default %(default)g)")
    p.add_argument("--metric", default="ops_per_s",
                   help="metric of non-duet rows compared between runs (default ops_per_s)")
    p.add_argument("--all-pairs", action="store_true",
                   help="compare every pair of runs, not disjoint consecutive pairs (the "
                        "comparisons then share runs and are not independent)")
    p.add_argument("--verbose", action="store_true", help="also print every comparison")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if not 0 <= args.min_effect < 1e6:
        print(f"aa_check.py: error: --min-effect {args.min_effect:g}: must be a percentage "
              "from 0 to below 1e6", file=sys.stderr)
        return 2
    try:
        runs = load_runs(args.runs)
    except ResultError as err:
        return error_status("aa_check.py", err)
    min_effect = args.min_effect / 100.0
    doc = check(runs, min_effect, args.metric, args.all_pairs)
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    if args.verbose:
        for r in doc["comparisons"]:
            ci = "-" if r["ci"] is None else f"[{stats.pct(r['ci'][0])}, {stats.pct(r['ci'][1])}]"
            print(f"{ANSWER_WORDS[r['answer']]:>12}  {stats.pct(r['effect']):>8} {ci:>20}  "
                  f"{r['source']}: {r['key']}")
    for source, c in doc["by_source"].items():
        print(f"{source}: {count_text(c, min_effect)}")
    for family, c in doc["by_family"].items():
        print(f"family {family}: {count_text(c, min_effect)}")
    for note in doc["notes"]:
        print(f"note: {note}")
    print(f"within-run (A/A duet rows of each run): "
          f"{count_text(doc['within_run'], min_effect)}")
    print(f"between-run ({doc['pairs_of_runs']} pair(s) of runs of one build): "
          f"{count_text(doc['between_run'], min_effect)}")
    print(f"A/A total ({len(runs)} run(s), {doc['pairs_of_runs']} pair(s) of runs): "
          f"{count_text(doc['total'], min_effect)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
