#!/usr/bin/python3
"""Decide whether CURRENT regressed against BASELINE: lockline's CI regression check.

Two gates, one command line (ci/REGRESSION.md says how each decides, and why):
- `compare.py BASELINE CURRENT [options]` (gate_runs.py): each side a Google Benchmark JSON
  file, a comma-separated list of them (repetitions pooled) or a run directory.
- `compare.py --builds RUN [options]` (gate_builds.py): one run of lockline --duet-with=OLD.
What they share (statistics, verdicts, exit status, output): gate_common.py. Exit 0 no
regression and every row decided (--builds: up to --max-undecided % undecided), 1 regression or
broken row, 2 bad or incomparable input, 3 undecided or missing rows. `compare.py
--check-filter=X` says whether --filter takes X."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# The names the tests and other tools use through this module.
from gate_common import (EXIT_BAD_INPUT, EXIT_OK, EXIT_REGRESSION,  # noqa: E402,F401
                         EXIT_UNDECIDED, InputError, KeyFilter, min_attainable_p,
                         repetitions_needed)
import gate_runs  # noqa: E402
from gate_runs import compare, main_runs  # noqa: E402,F401
from gate_builds import main_builds  # noqa: E402

_metric_row_any_batch = gate_runs._metric_row


def _batch(sample):
    return sample["values"].get("batch_pages")


def metric_row_at_equal_batch(key, metric, bs, cs, ctx):
    """gate_runs' row from the repetitions at a batch_pages (kernel_zone: 2 x pcp high, which the
    kernel retunes under one key) both sides ran; no batch in common: incomparable."""
    batches = ({_batch(s) for s in bs}, {_batch(s) for s in cs})
    common = batches[0] & batches[1]
    if not bs or not cs or batches[0] == batches[1]:
        return _metric_row_any_batch(key, metric, bs, cs, ctx)
    if not common:
        row = _metric_row_any_batch(key, metric, bs, cs, ctx)
        if row is not None and row["verdict"] is None:
            row["verdict"] = "incomparable"
            row["notes"].append(
                f"batch_pages {sorted(batches[0], key=str)} (baseline) vs "
                f"{sorted(batches[1], key=str)} (current): different mapping sizes, not "
                "comparable (pcp high moved between the runs; rerun both at one setting)")
        return row
    kb = [s for s in bs if _batch(s) in common]
    kc = [s for s in cs if _batch(s) in common]
    row = _metric_row_any_batch(key, metric, kb, kc, ctx)
    if row is not None:
        row["warnings"].append(
            f"{len(bs) + len(cs) - len(kb) - len(kc)} repetition(s) at a batch_pages the other "
            f"side did not run left out (compared at {sorted(common, key=str)} only)")
    return row


gate_runs._metric_row = metric_row_at_equal_batch


def check_filter(text):
    """`compare.py --check-filter=REGEX`: exit 0 when --filter takes REGEX, else 2 with one
    error line (ci/regression.sh asks before its run)."""
    try:
        KeyFilter(text)
    except InputError as e:
        print(f"compare.py: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "--builds":
        return main_builds(argv[1:])
    if len(argv) == 1 and argv[0].startswith("--check-filter="):
        return check_filter(argv[0][len("--check-filter="):])
    return main_runs(argv)


if __name__ == "__main__":
    sys.exit(main())
