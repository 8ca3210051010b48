#!/usr/bin/python3
"""Verdicts over several independent runs, and in how many of them each held.

Usage: plots/reproduce.py RUN_DIR [--min-effect PCT] [--quiet]

RUN_DIR: a `lockline --runs=N` directory or any directory of run-K subdirectories. Writes each
RUN_DIR/run-K/verdicts.json and RUN_DIR/verdicts.json: every comparison over the repetitions of
all runs, with how many runs' own verdicts agree (results/SCHEMA.md "Several runs").
Exit 0; 2 with one `reproduce.py: error:` line for a bad directory."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lockline_results import ResultError, Run, error_status, load_runs, multi_run_dirs  # noqa: E402
import stats  # noqa: E402
import verdicts  # noqa: E402


def answer_of(v: Dict[str, Any], min_effect: float = stats.MIN_EFFECT) -> str:
    """stats.answer of a verdicts.json record, an effect with its sign ("effect+"/"effect-")."""
    a = stats.answer(tuple(v["ci"]) if v.get("ci") else None, min_effect)
    if a == "effect":
        return "effect+" if (v.get("effect") or 0) > 0 else "effect-"
    return a


def _contains(ci: Sequence[float], value: Optional[float]) -> bool:
    return value is not None and ci[0] <= value <= ci[1]


def runs_text(pooled_resolved: bool, held: int, resolved: int, runs: int) -> str:
    """What the runs alone said, in the pooled verdict's words: `held` of them give its answer,
    `resolved` resolve the comparison at all."""
    if not pooled_resolved:
        if not resolved:
            return f"not resolved in any of the {runs} runs alone either"
        return f"not resolved when pooled, though {resolved} of the {runs} runs alone resolve it"
    if not resolved:
        return f"resolved only when the {runs} runs are pooled: no single run resolves it"
    if held == runs:
        return f"the same answer in each of the {runs} runs alone"
    other = resolved - held
    return (f"the same answer in {held} of the {runs} runs alone" +
            (f", another in {other}" if other else "") +
            (f", not resolved in {runs - resolved}" if runs > resolved else ""))


def same_regime(a: Dict[str, Any], b: Dict[str, Any]) -> bool:
    """Two runs' verdicts from one state of the machine: the same label without latencies
    ("all", pooled), else regimes whose `regime_ns` are within stats.SAME_REGIME_RATIO.
    "near" in a run that never left its 220 ns placement is another run's "far"."""
    ns_a, ns_b = a.get("regime_ns"), b.get("regime_ns")
    if not ns_a or not ns_b:
        return a.get("regime") == b.get("regime") and not ns_a and not ns_b
    return max(ns_a, ns_b) / min(ns_a, ns_b) <= stats.SAME_REGIME_RATIO


def share_text(part: int, whole: int) -> str:
    """'89 %' of `whole`, or 'none compared'."""
    return f"{100.0 * part / whole:.0f} %" if whole else "none compared"


def combine(runs: Sequence[Run], names: Sequence[str],
            min_effect: float = stats.MIN_EFFECT) -> Dict[str, Any]:
    """The verdicts.json document of several runs (the module docstring), plus each run's own
    (`per_run_documents`, by name)."""
    own: List[Dict[str, Dict[str, Any]]] = []
    docs = {}
    for run, name in zip(runs, names):
        for p in run.points:
            if isinstance(p.row, dict):
                p.row["run"] = name
        doc = verdicts.verdicts_document(run, min_effect)
        docs[name] = doc
        own.append({v["id"]: v for v in doc["verdicts"]})
    pooled = Run(path=",".join(r.path for r in runs), context=runs[0].context if runs else {},
                 points=[p for r in runs for p in r.points], skipped_rows=[])
    doc = verdicts.verdicts_document(pooled, min_effect)
    totals = {"compared": 0, "contained": 0, "other_regime": 0, "sign_flips": 0}
    for v in doc["verdicts"]:
        mine = answer_of(v, min_effect)
        per_run = [{"run": name, "effect": r["effect"], "ci": r["ci"], "status": r["status"],
                    "answer": answer_of(r, min_effect), "regime": r.get("regime"),
                    "regime_ns": r.get("regime_ns")}
                   for name, table in zip(names, own) if (r := table.get(v["id"])) is not None]
        resolved = [r for r in per_run if r["status"] == "resolved" and r["ci"]]
        # Ordered pairs of resolved runs of one regime: does a's interval hold b's estimate?
        checks = [(a, b) for a in resolved for b in resolved
                  if a is not b and same_regime(a, b)]
        other_regime = sum(1 for a in resolved for b in resolved
                           if a is not b and not same_regime(a, b))
        reproduced = all(_contains(a["ci"], b["effect"]) for a, b in checks) if checks else None
        totals["compared"] += len(checks)
        totals["contained"] += sum(1 for a, b in checks if _contains(a["ci"], b["effect"]))
        totals["other_regime"] += other_regime
        totals["sign_flips"] += sum(
            1 for a, b in checks if a is not b and (a["effect"] or 0) * (b["effect"] or 0) < 0
            and answer_of(a, min_effect).startswith("effect")
            and answer_of(b, min_effect).startswith("effect"))
        held = sum(1 for r in per_run if r["answer"] == mine)
        v.update(runs=len(per_run), held_in_runs=held, per_run=per_run, reproduced=reproduced)
        v["text"] += f" ({runs_text(v['status'] == 'resolved', held, len(resolved), len(per_run))})"
    # Each sign flip was counted in both orders.
    totals["sign_flips"] //= 2
    doc["run_pairs"] = totals
    doc["runs"] = list(names)
    doc["rule"] += ("; several runs (lockline --runs): every verdict over the repetitions of "
                    "all runs, repetitions resampled as units; held_in_runs counts the runs "
                    "whose own verdict gives the same answer")
    doc["unfinished_runs"] = [n for r, n in zip(runs, names) if r.finished is False]
    doc["emulated_runs"] = [n for r, n in zip(runs, names) if r.emulated]
    doc["per_run_documents"] = docs
    return doc


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description="Verdicts over the runs of a lockline --runs=N directory and in how many "
                    "runs each held; writes RUN_DIR/verdicts.json and each run's own.")
    verdicts.add_run_options(parser)
    args = parser.parse_args(argv)
    from outputs import write_atomic
    try:
        min_effect = verdicts.min_effect_of(args.min_effect)
        dirs = multi_run_dirs(args.run_dir)
        if not dirs:
            raise ResultError(f"{args.run_dir}: no run-K/lockline.json inside (expected the "
                              "directory of lockline --runs=N)")
        runs = load_runs(dirs)
        names = [os.path.basename(d) for d in dirs]
        doc = combine(runs, names, min_effect)
        for name, d in zip(names, dirs):
            write_atomic(os.path.join(d, "verdicts.json"),
                         json.dumps(doc["per_run_documents"][name], indent=1) + "\n")
        del doc["per_run_documents"]
        path = os.path.join(args.run_dir, "verdicts.json")
        write_atomic(path, json.dumps(doc, indent=1) + "\n")
    except (ResultError, OSError) as err:
        return error_status("reproduce.py", err, "verdicts.json")
    for key, what in (("unfinished_runs", "did not finish (interrupted): its finished points "
                       "are pooled"),
                      ("emulated_runs", "ran emulated (QEMU TCG): its timings mean nothing, "
                       "and they are pooled")):
        for name in doc[key]:
            print(f"reproduce.py: warning: {name} {what}", file=sys.stderr)
    if not args.quiet:
        for v in doc["verdicts"]:
            print(f"[{v['question']}] {v['text']}")
        held = sum(1 for v in doc["verdicts"] if v["runs"] and v["held_in_runs"] == v["runs"])
        pooled_only = sum(1 for v in doc["verdicts"] if "no single run resolves it" in v["text"])
        t = doc["run_pairs"]
        print(f"{held} of {len(doc['verdicts'])} verdicts give the same answer in each of the "
              f"{len(runs)} runs alone, {pooled_only} resolved only when they are pooled; "
              f"{t['contained']} of {t['compared']} ordered run pairs that resolved a "
              f"comparison in one regime have an interval holding the other run's estimate "
              f"({share_text(t['contained'], t['compared'])}; a rerun interval promises 95 %: "
              f"fewer means host states one run did not see, docs/measurement.md; "
              f"{t['other_regime']} pairs from two regimes not set against each other; "
              f"{t['sign_flips']} sign flips); wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
