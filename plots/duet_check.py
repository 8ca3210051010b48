#!/usr/bin/python3
"""How much paired windows buy, from one run: plots/duet_check.py RUN_DIR [--json]

For every paired-windows row series (family `duet`, bench/duet.cpp) of the run, prints the
paired effect (stats.compare_pairs: median pair ratio, paired bootstrap) beside the unpaired
effect of the SAME windows (stats.compare_samples over the A windows and the B windows as
independent samples: what repetitions run apart would give from the same total window time),
their interval half-widths and the ratio of the two. A/A series (a = b) are counted apart: the
share of them whose paired interval excludes 0 is the method's false-effect rate here.
Exit 0; 2 with one `duet_check.py: error:` line on a bad run directory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any, Dict, List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lockline_results import ResultError, labelled_duet_pairs, load_runs  # noqa: E402
import stats  # noqa: E402


def half_width(c: stats.Comparison) -> Optional[float]:
    return None if c.ci is None else (c.ci[1] - c.ci[0]) / 2.0


def check(run) -> Dict[str, Any]:
    """Per duet series: paired and unpaired comparisons of the same windows; the A/A summary."""
    series: Dict[str, List] = {}
    for p in run.points:
        # Rows with an overrun window stay: only its pairs are left out.
        if p.bench == "duet" and p.aggregate is None:
            series.setdefault(p.key, []).append(p)
    rows = []
    for key, reps in sorted(series.items()):
        pairs = labelled_duet_pairs(reps)
        paired = stats.compare_pairs(pairs)
        unpaired = stats.compare_samples([(lab, a) for lab, a, *_ in pairs],
                                         [(lab, b) for lab, _, b, *_ in pairs])
        params = reps[0].params
        hp, hu = half_width(paired), half_width(unpaired)
        rows.append({"key": key, "aa": params.get("a") == params.get("b"),
                     "threads": reps[0].threads, "repetitions": len(reps),
                     "paired": {"effect": paired.effect, "ci": paired.ci,
                                "half_width": hp, "status": paired.status,
                                "excludes_zero": paired.excludes_zero, "regime": paired.regime,
                                "pairs": paired.n_base},
                     "unpaired": {"effect": unpaired.effect, "ci": unpaired.ci,
                                  "half_width": hu, "status": unpaired.status,
                                  "excludes_zero": unpaired.excludes_zero},
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
        print(f"duet_check.py: error: {err}", file=sys.stderr)
        return 2
    doc = check(run)
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    for r in doc["series"]:
        p, u = r["paired"], r["unpaired"]
        hw = lambda h: "-" if h is None else f"+-{100 * h:.1f} %"
        print(f"{'A/A ' if r['aa'] else ''}{r['key']}: paired {stats.pct(p['effect'])} "
              f"{hw(p['half_width'])} ({p['pairs']} {p['regime'] or 'pooled'} pairs, "
              f"{p['status']}); unpaired, same windows {stats.pct(u['effect'])} "
              f"{hw(u['half_width'])} ({u['status']}); "
              f"{'%.1fx narrower' % r['narrower'] if r['narrower'] else ''}")
    aa = doc["aa"]
    if aa["series"]:
        print(f"A/A: {aa['false_effects']} of {aa['series']} paired intervals exclude 0")
    if doc["median_narrower"]:
        print(f"median: paired intervals {doc['median_narrower']:.1f}x narrower than unpaired "
              "ones from the same windows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
