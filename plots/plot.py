#!/usr/bin/python3
"""Plot lockline results (or any Google Benchmark JSON): one figure per family, PNG and SVG.

    plots/plot.py PATH... -o DIR [--baseline-variant NAME] [--family F] [--x-arg NAME]

PATH is a run directory or a result JSON; several overlay one family, labelled host@commit.
Writes to DIR per family `<family>.png/.svg` (throughput against threads), `<family>_relative.*`
(ratio to a baseline variant), `c2c_latency.*`, `<family>.csv` and `<family>_usl.csv`, each
created exclusively and renamed into place (plots/outputs.py), and prints each file written.
Exit 0 on success, 2 on bad input with one line on stderr. Runs headless (Agg)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lockline_results import ResultError, Run, error_status, load_runs  # noqa: E402


def family_data(runs: Sequence[Run], family: str, baseline: Optional[str] = None,
                x_arg: Optional[str] = None):
    """FamilyData holding `family`'s points from every run that has them."""
    from figures import FamilyData
    return FamilyData(family=family, baseline=baseline, x_arg=x_arg,
                      runs=[(run, [p for p in run.points if p.family == family]) for run in runs
                            if any(p.family == family for p in run.points)])


def plot_runs(runs: Sequence[Run], out_dir: str, baseline: Optional[str] = None,
              families: Optional[Sequence[str]] = None, formats=("png", "svg"),
              x_arg: Optional[str] = None) -> List[str]:
    """Draw every family (or only `families`) of `runs` into out_dir; return the files written.
    Raises ResultError when a requested family is in none of the runs."""
    from families import plot_family
    from figures import plt, write_csv

    present = list(dict.fromkeys(fam for run in runs for fam in run.families()))
    wanted = list(families) if families else present
    missing = [f for f in wanted if f not in present]
    if missing:
        raise ResultError(f"family '{missing[0]}' not in the results (present: {', '.join(present)})")
    if x_arg:
        check_x_arg(runs, x_arg, wanted)
    from outputs import ensure_dir, write_atomic
    ensure_dir(out_dir)
    written: List[str] = []
    for fam in wanted:
        data = family_data(runs, fam, baseline, x_arg)
        for stem, fig in plot_family(data):
            for ext in formats:
                path = os.path.join(out_dir, f"{_safe(stem)}.{ext}")
                write_atomic(path, lambda handle, fig=fig, ext=ext: fig.savefig(
                    handle, format=ext, dpi=110 if ext == "png" else None))
                written.append(path)
            plt.close(fig)
        for suffix, rows in (("", data.csv_rows), ("_usl", data.usl_rows)):
            if rows:
                path = os.path.join(out_dir, f"{_safe(fam)}{suffix}.csv")
                write_csv(path, rows)
                written.append(path)
    return written


# Metrics every foreign row gets from Google Benchmark's own fields: not user counters.
_OWN_METRICS = {"real_time_ns", "cpu_time_ns", "throughput_per_s", "iterations"}


def check_x_arg(runs: Sequence[Run], x_arg: str, families: Sequence[str]) -> None:
    """Raise ResultError unless `x_arg` is a benchmark argument (`arg0`, a `name:value`
    argument's name) or a user counter of some row of `families`, naming those available."""
    points = [p for run in runs for p in run.points if p.family in families]
    args = {k for p in points for k in p.params}
    counters = {m for p in points for m in p.metrics if m not in _OWN_METRICS}
    if x_arg in args or x_arg in counters:
        return
    raise ResultError(f"--x-arg {x_arg}: not an argument or counter of the rows (arguments: "
                      f"{', '.join(sorted(args)) or 'none'}; counters: "
                      f"{', '.join(sorted(counters)) or 'none'})")


def _safe(name: str) -> str:
    """File-system-safe stem (foreign benchmark names may contain '<', ':' or spaces)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "family"


def main(argv: Optional[Sequence[str]] = None) -> int:
    """CLI entry point; returns the exit status."""
    parser = argparse.ArgumentParser(
        description="Plot lockline / Google Benchmark results: throughput against threads per "
                    "family, PNG + SVG + CSV.")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="run directory or result JSON")
    parser.add_argument("-o", "--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--baseline-variant", metavar="NAME",
                        help="variant every other is divided by (e.g. lock_after_free_area)")
    parser.add_argument("--family", action="append", metavar="F",
                        help="plot only this family (repeatable)")
    parser.add_argument("--x-arg", metavar="NAME",
                        help="plot against this benchmark argument (arg0, arg1, or a name:value "
                             "argument's name) or user counter (e.g. a worker count) instead "
                             "of threads; numeric, sorted as numbers")
    args = parser.parse_args(argv)
    try:
        runs = load_runs(args.paths)
        written = plot_runs(runs, args.out, args.baseline_variant, args.family, x_arg=args.x_arg)
    except (ResultError, OSError) as err:
        return error_status("plot.py", err, f"to {args.out}")
    for path in written:
        print(path)
    for run in runs:
        for warning in run.warnings:
            print(f"plot.py: warning: {run.path}: {warning}", file=sys.stderr)
        for row in run.skipped_rows:
            print(f"plot.py: note: {run.path}: skipped failed row {row}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
