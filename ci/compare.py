#!/usr/bin/python3
"""Decide whether CURRENT regressed against BASELINE: lockline's CI regression check.

Two gates, one command line (ci/REGRESSION.md has the reasoning):
- `compare.py BASELINE CURRENT [options]` (gate_runs.py): BASELINE and CURRENT are each a
  Google Benchmark JSON file (lockline's or any other), a comma-separated list of such files
  (their repetitions are pooled), or a run directory holding lockline.json. A row regresses
  when its change is in the metric's bad direction, statistically significant (two-sided
  Mann-Whitney U over the repetitions, Holm-corrected over all rows compared, alpha 0.05) AND
  at least the minimum effect T (5 % by default). A row whose 95 % bootstrap interval of the
  change lies within +-T answers "no change larger than T %" (verdict "no change"). A row that
  is neither is "undecided" (too few repetitions, too much noise, or no common coherence
  regime), and the gate does not pass it silently. Improvements are reported, never fail.
  Follows pyperf / gbench compare.py (significance plus a minimum effect) and lkp-tests'
  compare table layout. A benchmark the baseline measured whose current repetitions all
  failed (e.g. "mutual exclusion violated") or all overran is "broken" and fails the gate like
  a regression; one missing from the current side is "only in baseline" and counts as
  undecided (exit 3) unless --allow-missing.
- `compare.py --builds RUN [options]` (gate_builds.py): one run of lockline --duet-with=OLD,
  answered from its window pairs of the two builds.
Files are read through plots/lockline_results.py (the project's one reader of result files);
effects and intervals come from plots/stats.py. What the gates share: gate_common.py.

Exit status: 0 every row decided and no regression, 1 regression or broken row, 2 bad or
incomparable input (one line on stderr), 3 undecided rows ("undecided: N rows; rerun with M
repetitions a side"; --allow-undecided turns it into 0) or baseline rows missing from the current
side (--allow-missing turns it into 0). `--builds` lets undecided rows pass while they are at most
--max-undecided % of the rows (default 10): a build duet on a noisy machine decides most rows,
rarely all, and each undecided row is listed with why.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# The names the tests and other tools use through this module.
from gate_common import (EXIT_BAD_INPUT, EXIT_OK, EXIT_REGRESSION,  # noqa: E402,F401
                         EXIT_UNDECIDED, min_attainable_p, repetitions_needed)
from gate_runs import compare, main_runs  # noqa: E402,F401
from gate_builds import main_builds  # noqa: E402


def main(argv=None):
    """Run the command line; returns the exit status (0, 1, 2 or 3)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "--builds":
        return main_builds(argv[1:])
    return main_runs(argv)


if __name__ == "__main__":
    sys.exit(main())
