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

/// Async-signal-safe: SIGKILLs the verdicts.py child when one is running (the
/// interrupt handler of harness/run/main.cpp calls it, so the child ends with
/// lockline instead of writing into the interrupted run directory later).
/// The child also gets SIGKILL should lockline die outright (PR_SET_PDEATHSIG).
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

/// After the planned repetitions (run.finish_on_finalize false): relabels the
/// coherence regimes, runs verdicts.py on the run directory, and while some
/// comparison is open and the extra time (opts.until_resolved_s) is not
/// spent, re-runs the open points' repetitions in rounds through Google
/// Benchmark (random interleaving, `reporter` records them; rows carry
/// resolve_round), then recomputes their aggregates, marks the file finished
/// and records context.lockline.until_resolved. The verdicts after the planned
/// repetitions are kept as RUN_DIR/verdicts_planned.json. Prints one line per
/// round with the comparisons still open. verdicts.py runs with --look=K (K =
/// round + 1): a sequential design whose intervals widen with every look
/// (alpha spending, plots/stats.py sequential_confidence), so stopping when
/// resolved keeps the false-resolution rate at 5 %; the verdicts say the
/// sample was adaptively stopped. verdicts.py is killed when it runs past the
/// time limit plus 60 s. Never throws for a failing verdicts.py: it reports
/// it, stops adding repetitions (results are kept), records `open` as null and
/// returns false (main exits 1).
bool RunUntilResolved(RunState& run, benchmark::BenchmarkReporter& reporter);

}  // namespace lockline
