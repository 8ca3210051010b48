// --until-resolved[=MAX_DURATION]: after the planned repetitions, measure the
// points of unresolved comparisons again until every comparison is decided or
// the extra time is spent. The statistics live in Python (plots/verdicts.py
// writes RUN_DIR/verdicts.json; format in results/SCHEMA.md); this side runs
// it, reads which comparisons are open, and re-runs their base and variant
// points interleaved, appending repetitions (repetition_index continuing) to
// the same lockline.json.
#pragma once

#include <benchmark/benchmark.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "harness/run/options.h"
#include "harness/run/runner.h"

namespace lockline {

/// The interpreter that runs plots/verdicts.py (Debian's, with numpy/scipy).
inline constexpr const char* kVerdictsPython = "/usr/bin/python3";

/// Directory holding verdicts.py: $LOCKLINE_PLOTS_DIR when set and non-empty,
/// else the source tree's plots/ compiled in (LOCKLINE_PLOTS_DIR_DEFAULT).
std::string PlotsDir();

/// Async-signal-safe: SIGKILLs the verdicts.py child when one is running, so
/// it ends with lockline (PR_SET_PDEATHSIG covers lockline dying outright).
void KillVerdictsChild();

/// Validation of --until-resolved before anything is created: "" when the run
/// can use it (or the flag is off), else the `lockline: error:` message:
/// PlotsDir()/verdicts.py or the interpreter missing, or --benchmark_out given
/// (Google Benchmark rewrites that file on every round, so it would lose the
/// planned repetitions; lockline.json is the full record).
std::string CheckUntilResolved(const Options& o);

/// An open comparison of verdicts.json: the row keys it is measured on (its
/// duet_key, or base_key and variant_key), the regime its answer uses (""
/// for "all") and its rerun interval (fractions; NaN without one).
struct OpenComparison {
  std::vector<std::string> keys;
  std::string regime;
  double effect = NAN, lo = NAN, hi = NAN;
};

/// What verdicts.json says: how many comparisons, how many are open
/// (resolved == false), the row keys to measure again (each once, in file
/// order) and each open comparison.
struct VerdictSummary {
  int total = 0;
  int open = 0;
  std::vector<std::string> keys;
  std::vector<OpenComparison> comparisons;
  double min_effect = 0.05;
};

/// Reads a verdicts.json document (schema 1: {"verdicts": [{"resolved": bool,
/// "base_key": ..., "variant_key": ...}, ...]}). Throws std::runtime_error
/// naming the path when it is missing or malformed.
VerdictSummary ReadVerdicts(const std::string& path);

/// The repetitions the next round gives each open comparison's points within
/// `seconds`, regime by regime: a comparison needs units (repetitions in its
/// regime) until its interval, shrinking as 1/sqrt(units) and widened 1.25x
/// for the next look, fits inside +-min_effect or clear of 0 (8 while it has
/// no interval); each of its points gets the repetitions it lacks in that
/// regime over the share of its repetitions landing there, so a point short
/// where its partner has them gets more. Cheapest comparisons first, the
/// last funded one scaled to the time left; at most 8x the run's repetitions a
/// point. Costs: what each point's repetitions took (their rows' timing).
std::vector<std::pair<const Point*, int>> PlanRound(const RunState& run,
                                                    const VerdictSummary& v,
                                                    double seconds);

/// After the planned repetitions (run.finish_on_finalize false): while some
/// comparison is open and the time is not spent (opts.until_resolved_s, or
/// the default run's --budget from its start: opts.until_resolved_auto),
/// re-runs the open points in rounds (PlanRound) through Google Benchmark
/// (rows carry resolve_round), one console line per round; then recomputes
/// aggregates, marks the file finished and records
/// context.lockline.until_resolved (RUN_DIR/verdicts_planned.json keeps the
/// planned verdicts). verdicts.py runs with --look=round+1: intervals widen
/// with every look (alpha spending, plots/stats.py), so stopping when
/// resolved keeps the false-resolution rate at 5 %; it is killed past the
/// time limit plus 60 s. A failing verdicts.py is reported, stops the rounds,
/// records `open` null and returns false (the default run without verdicts.py
/// says so and returns true).
bool RunUntilResolved(RunState& run, benchmark::BenchmarkReporter& reporter);

}  // namespace lockline
