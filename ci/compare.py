#!/usr/bin/python3
"""Decide whether CURRENT regressed against BASELINE: lockline's CI regression check.

Two gates, one command line (ci/REGRESSION.md says how each decides, and why):
- `compare.py BASELINE CURRENT [options]` (gate_runs.py): BASELINE and CURRENT are each a
  Google Benchmark JSON file (lockline's or any other), a comma-separated list of such files
  (their repetitions are pooled), or a run directory holding lockline.json. A row regresses
  when its change is in the metric's bad direction, significant (Mann-Whitney U, Holm over the
  rows, alpha 0.05) and at least the minimum effect T (5 %); it answers "no change larger than
  T %" when the 95 % interval of its change lies within +-T; else it is "undecided".
- `compare.py --builds RUN [options]` (gate_builds.py): one run of lockline --duet-with=OLD,
  answered from the window pairs of the two builds.
What they share (statistics, verdicts, exit status, output): gate_common.py.

Exit status (ci/REGRESSION.md): 0 no regression and every row decided (--builds: up to
--max-undecided % undecided), 1 regression or broken row, 2 bad or incomparable input, 3
undecided or missing rows. `compare.py --check-filter=X` says whether --filter takes X.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# The names the tests and other tools use through this module.
from gate_common import (EXIT_BAD_INPUT, EXIT_OK, EXIT_REGRESSION,  # noqa: E402,F401
                         EXIT_UNDECIDED, InputError, KeyFilter, min_attainable_p,
                         repetitions_needed)
from gate_runs import compare, main_runs  # noqa: E402,F401
from gate_builds import main_builds  # noqa: E402


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
