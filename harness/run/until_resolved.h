// --until-resolved[=MAX_DURATION]: after the planned repetitions, measure the
// points of open comparisons again, interleaved, until all are decided or the
// time is spent, appending to lockline.json (repetition_index continuing).
// The statistics live in plots/verdicts.py (RUN_DIR/verdicts.json,
// results/SCHEMA.md); this side runs it and reads which are open.
#pragma once

#include <benchmark/benchmark.h>

#include <cmath>
#include <set>
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

/// Before anything is created: "" when the run can use --until-resolved (or
/// does not), else the `lockline: error:` message: verdicts.py or its
/// interpreter missing, or --benchmark_out given (Google Benchmark rewrites
/// that file every round, losing the planned repetitions).
std::string CheckUntilResolved(const Options& o);

/// An open comparison of verdicts.json: its row keys (duet_key, or base_key and
/// variant_key), its regime ("" for "all") and interval (fractions; NaN: none).
struct OpenComparison {
  std::vector<std::string> keys;
  std::string regime;
  double effect = NAN, lo = NAN, hi = NAN;
};

/// What verdicts.json says: comparisons, open ones, and the row keys to measure
/// again (each once, in file order).
struct VerdictSummary {
  int total = 0;
  int open = 0;
  std::vector<std::string> keys;
  std::vector<OpenComparison> comparisons;
  double min_effect = 0.05;
};

/// Reads verdicts.json (schema 1: {"verdicts": [{"resolved": bool, "base_key":
/// ..., "variant_key": ...}, ...]}); std::runtime_error naming the path when it
/// is missing or malformed. With `stopped`: the ids of the comparisons resolved
/// at an earlier look, which stay resolved (each comparison stops at its first
/// resolving look, as the sequential design assumes: a later, stricter look
/// would reopen it without new data); this look's resolved ids are added.
VerdictSummary ReadVerdicts(const std::string& path,
                            std::set<std::string>* stopped = nullptr);

/// The repetitions the next round gives each open comparison's points within
/// `seconds`. A comparison needs units (repetitions in its regime) until its
/// interval, shrinking as 1/sqrt(units) and widened 1.25x for the next look,
/// fits inside +-min_effect or clear of 0 (8 without an interval); each point
/// gets the units it lacks over the share of its repetitions in that regime.
/// Cheapest comparisons first (costs from the rows' timing), the last one
/// scaled to the time left; at most 8x the run's repetitions a point.
std::vector<std::pair<const Point*, int>> PlanRound(const RunState& run,
                                                    const VerdictSummary& v,
                                                    double seconds);

/// After the planned repetitions (run.finish_on_finalize false): while a
/// comparison is open and time is left (opts.until_resolved_s, or with
/// until_resolved_auto the --budget from the run's start), re-runs the open
/// points in rounds (PlanRound; rows carry resolve_round); then marks the file
/// finished and records context.lockline.until_resolved (verdicts_planned.json
/// keeps the planned verdicts). verdicts.py runs with --look=round+1:
/// intervals widen with every look (alpha spending, plots/stats.py), keeping
/// the false-resolution rate at 5 %; it is killed at the time limit. A failing
/// verdicts.py stops the rounds, records `open` null and returns false (the
/// default run without verdicts.py says so and returns true).
bool RunUntilResolved(RunState& run, benchmark::BenchmarkReporter& reporter);

}  // namespace lockline
