// --until-resolved[=MAX_DURATION]: after the planned repetitions, measure the
// points of unresolved comparisons again until every comparison is decided or
// the extra time is spent. The statistics live in Python (plots/verdicts.py
// writes RUN_DIR/verdicts.json; format in results/SCHEMA.md); this side runs
// it, reads which comparisons are open, and re-runs their base and variant
// points interleaved, appending repetitions (repetition_index continuing) to
// the same lockline.json.
#pragma once

#include <benchmark/benchmark.h>

#include <string>
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

/// What verdicts.json says: how many comparisons, how many are open
/// (resolved == false), and the row keys to measure again (base_key and
/// variant_key of every open one, each once, in file order).
struct VerdictSummary {
  int total = 0;
  int open = 0;
  std::vector<std::string> keys;
};

/// Reads a verdicts.json document (schema 1: {"verdicts": [{"resolved": bool,
/// "base_key": ..., "variant_key": ...}, ...]}). Throws std::runtime_error
/// naming the path when it is missing or malformed.
VerdictSummary ReadVerdicts(const std::string& path);

/// After the planned repetitions (run.finish_on_finalize false): while some
/// comparison is open and opts.until_resolved_s is not spent, re-runs the
/// open points' repetitions in rounds through Google Benchmark (rows carry
/// resolve_round), one console line per round; then recomputes aggregates,
/// marks the file finished and records context.lockline.until_resolved
/// (RUN_DIR/verdicts_planned.json keeps the planned verdicts). verdicts.py
/// runs with --look=round+1: intervals widen with every look (alpha spending,
/// plots/stats.py), so stopping when resolved keeps the false-resolution rate
/// at 5 %; it is killed past the time limit plus 60 s. A failing verdicts.py
/// is reported, stops the rounds, records `open` null and returns false.
bool RunUntilResolved(RunState& run, benchmark::BenchmarkReporter& reporter);

}  // namespace lockline
