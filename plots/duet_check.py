#!/usr/bin/python3
"""How much paired windows buy, from one run: plots/duet_check.py RUN_DIR [--json]

For every duet row series, the paired effect (stats.compare_pairs) beside the unpaired effect of
the same windows, their half-widths and ratio (same unit and widening: what pairing buys); A/A
series counted apart (their share excluding 0: the false-effect rate).
Exit 0; 2 with one `duet_check.py: error:` line on a bad run directory."""

from __future__ import annotations

import argparse
import json
import os
import math
import statistics
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lockline_results import (ResultError, error_status, grouped,  # noqa: E402
                              labelled_duet_pairs, load_runs)
import stats  # noqa: E402


def half_width(c: stats.Comparison) -> Optional[float]:
    return None if c.ci is None else (c.ci[1] - c.ci[0]) / 2.0


def unpaired(pairs: Sequence[Tuple], regime: str) -> Dict[str, Any]:
    """B against A from the windows of `regime`'s pairs ("": all but mixed) as two independent
    samples, with compare_pairs' unit and widening (hierarchical medians,
    small_sample_expansion)."""
    sides: Dict[Any, Tuple[List[float], List[float]]] = {}
    for lab, a, b, g in pairs:
        if (lab == regime if regime else lab not in stats.NOT_A_REGIME) and min(a, b) > 0 and \
                math.isfinite(a) and math.isfinite(b):
            sides.setdefault(g, ([], []))[0].append(math.log(a))
            sides[g][1].append(math.log(b))
    out = {"effect": None, "ci": None, "status": "too_few", "excludes_zero": False}
    if len(sides) < stats.MIN_PAIR_REPETITIONS:
        return out
    rng = np.random.default_rng(stats.SEED)
    boot = [stats.hierarchical_bootstrap_medians([np.asarray(v[i]) for v in sides.values()],
                                                 stats.BOOTSTRAP_RESAMPLES, rng) for i in (0, 1)]
    med = float(np.median([x for v in sides.values() for x in v[1]]) -
                np.median([x for v in sides.values() for x in v[0]]))
    tail = (1.0 - stats.CONFIDENCE) / 2.0
    lo, hi = np.quantile(boot[1] - boot[0], [tail, 1.0 - tail])
    f = stats.small_sample_expansion(len(sides))
    lo, hi = med - f * (med - min(lo, med)), med + f * (max(hi, med) - med)
    ci = (math.exp(lo) - 1.0, math.exp(hi) - 1.0)
    out.update(effect=math.exp(med) - 1, ci=ci, excludes_zero=ci[0] > 0 or ci[1] < 0,
               status="resolved" if stats.is_resolved(ci) else "not_resolved")
    return out


def check(run) -> Dict[str, Any]:
    """Per duet series: paired and unpaired comparisons of the same windows; the A/A summary."""
    # Rows with an overrun window stay: only its pairs are left out.
    series = grouped((p for p in run.points if p.bench == "duet" and p.aggregate is None),
                     lambda p: p.key)
    rows = []
    for key, reps in sorted(series.items()):
        pairs = labelled_duet_pairs(reps)
        paired = stats.compare_pairs(pairs)
        apart = unpaired(pairs, paired.regime)
        params = reps[0].params
        hp, hu = half_width(paired), apart["ci"] and (apart["ci"][1] - apart["ci"][0]) / 2.0
        rows.append({"key": key, "aa": params.get("a") == params.get("b"),
                     "threads": reps[0].threads, "repetitions": len(reps),
                     "paired": {"effect": paired.effect, "ci": paired.ci,
                                "half_width": hp, "status": paired.status,
                                "excludes_zero": paired.excludes_zero, "regime": paired.regime,
                                "pairs": paired.n_base},
                     "unpaired": dict(apart, half_width=hu),
                     "narrower": (hu / hp) if hp and hu else None})
    aa = [r for r in rows if r["aa"] and r["paired"]["ci"] is not None]
    ratios = [r["narrower"] for r in rows if r["narrower"]]
    return {"series": rows,
            "aa": {"series": len(aa),
                   "false_effects": sum(1 for r in aa
                                        if stats.answer(r["paired"]["ci"]) == "effect")},
            "median_narrower": statistics.median(ratios) if ratios else None}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    try:
        run = load_runs([args.run_dir])[0]
    except ResultError as err:
        return error_status("duet_check.py", err)
    doc = check(run)
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    for r in doc["series"]:
        p, u = r["paired"], r["unpaired"]
        hw = lambda h: "-" if h is None else f"+-{100 * h:.1f} %"
        print(f"{'A/A ' if r['aa'] else ''}{r['key']}: paired {stats.pct(p['effect'])} "
              f"{hw(p['half_width'])} ({p['pairs']} {p['regime'] or 'pooled'} pairs, "
              f"{p['status']}); unpaired, same repetitions {stats.pct(u['effect'])} "
              f"{hw(u['half_width'])} ({u['status']}); "
              f"{'%.1fx narrower' % r['narrower'] if r['narrower'] else ''}")
    aa = doc["aa"]
    if aa["series"]:
        print(f"A/A: {aa['false_effects']} of {aa['series']} paired intervals exclude 0")
    if doc["median_narrower"]:
        print(f"median: paired intervals {doc['median_narrower']:.1f}x narrower than unpaired "
              "ones from the same repetitions (the repetition the unit of both)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
