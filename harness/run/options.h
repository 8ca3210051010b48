// lockline's command line: its own flags (documented in kUsage and README) and
// the --benchmark_* flags passed through to Google Benchmark.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/family.h"

namespace lockline {

/// Bad command-line input; what() names the value and what is accepted.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Extra time of --until-resolved given without a value, seconds.
inline constexpr double kDefaultUntilResolvedS = 300;

/// --fault-sampling: task-clock sampling period of the fault family's sampled
/// clear_page share (bench/fault.cpp), seconds. The default, 2 ms, costs a
/// KVM guest a few per cent of the faults' CPU time; accepted 100 us to 100
/// ms, or off.
inline constexpr double kDefaultFaultSamplingS = 2e-3;
inline constexpr double kMinFaultSamplingS = 1e-4;
inline constexpr double kMaxFaultSamplingS = 0.1;

/// --evidence=on: evidence windows per repetition of the kernel_* families
/// (one before the timed windows, one after); --evidence=N takes 1 to
/// kMaxEvidenceWindows.
inline constexpr int kDefaultEvidenceWindows = 2;
inline constexpr int kMaxEvidenceWindows = 20;
/// --runs=N: at most this many independent runs (each takes the whole budget).
inline constexpr int kMaxRuns = 20;

struct Options {
  std::string pin = "cores";
  std::string threads = "topo";
  std::string mem = "first-touch";
  std::string topology = "host";
  std::string events = "default";
  std::string out;  ///< run directory; empty: results/<host>-<UTC timestamp>
  Suite suite = Suite::kDefault;
  double budget_s = 0;  ///< 0: the suite's default
  double window_s = 0;  ///< 0: fitted to the budget
  bool plan = false;
  bool plan_json = false;  ///< --plan=json: the plan as JSON (plots/predict.py)
  bool list = false;
  bool oversubscribe =
      false;  ///< --oversubscribe: up to kMaxOversubscription x
  bool oversubscribe_force = false;  ///< --oversubscribe=force: no cap
  bool help = false;
  bool emulated = false;  ///< --emulated: mark the run and every row emulated
  std::string layouts;    ///< "", "text" or "json"
  std::vector<std::string>
      benchmark_args;            ///< --benchmark_* passed to Google Benchmark
  std::string benchmark_filter;  ///< value of --benchmark_filter, if given
  int repetitions = 5;           ///< from --benchmark_repetitions, default 5
  /// --until-resolved[=MAX_DURATION]: extra seconds for unresolved
  /// comparisons (harness/run/until_resolved.h); 0: off (the fixed budget).
  double until_resolved_s = 0;
  /// --precision=PCT: half-width of a paired effect's 95 % interval the plan
  /// aims at, as a fraction (harness/measure/duet.h PlanPairs).
  double precision = 0.03;
  /// --fault-sampling=DURATION|off: the fault rows' kernel sampling period,
  /// seconds; 0: off (rows say clear_page_sampled "unavailable").
  double fault_sampling_s = kDefaultFaultSamplingS;
  /// --evidence=on|off|N: evidence windows per repetition of the kernel_*
  /// families (on: kDefaultEvidenceWindows; off: 0, which also turns the
  /// fault rows' sampling off). Timed windows never collect evidence.
  int evidence_windows = kDefaultEvidenceWindows;
  /// --padding=BYTES: the distance between per-thread slots
  /// (harness/machine/padded_slots.h), a power of two from 64 to 4096; 128
  /// unless given (padding_given says whether it was).
  std::size_t padding = 128;
  bool padding_given = false;
  /// --runs=N: N independent lockline processes, one after the other, into
  /// RUN_DIR/run-1 .. run-N, then plots/reproduce.py over them
  /// (harness/run/runs.h); 1 (default): one run, as without the flag.
  int runs = 1;
  std::vector<std::string> argv;  ///< the full command line, for provenance
  /// --duet-with=OLD_BINARY: run every point in duet with that earlier build
  /// (harness/run/build_duet.h); "" off.
  std::string duet_with;
  /// --window-server: serve windows to a --duet-with run on stdin/stdout
  /// (internal; harness/run/build_duet.h).
  bool window_server = false;
};

/// Parses argv. Throws UsageError for an unknown flag, a missing or malformed
/// value (naming it and the accepted forms). Google Benchmark's flags are
/// checked here too, before any run directory exists: an unknown or misspelt
/// --benchmark_* flag, one --help says does not apply, a bad boolean or
/// --benchmark_out_format, a --benchmark_out whose directory does not exist or
/// is not writable, and a --benchmark_filter that is not an extended regular
/// expression are all UsageErrors. Does not touch the topology (see
/// harness/machine/topology.h for --pin, --threads and --topology checks).
Options ParseOptions(int argc, char** argv);

/// Parses a duration: "90" or "90s", "500ms", "20m", "1h" (decimal digits with
/// an optional fraction and exponent; no hex, inf or nan). Throws UsageError
/// naming `flag` and the accepted range when the text is malformed or the value
/// lies outside [min_s, max_s] seconds.
double ParseDurationSeconds(const std::string& text, const std::string& flag,
                            double min_s = 1e-3, double max_s = 7 * 86400);

/// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or
/// code points past U+10FFFF).
bool IsValidUtf8(const std::string& text);

/// `text` for an error line: control characters (below 0x20, 0x7f) and bytes
/// that are not part of valid UTF-8 become "\xNN"; the rest is kept.
std::string EscapeForMessage(const std::string& text);

/// Prints "lockline: error: MESSAGE" to stderr, escaped (EscapeForMessage:
/// one line, nothing a terminal interprets); returns 2.
int FailWithError(const std::string& message);

/// Accepted --window range, seconds: 0.1 ms to 10 min.
inline constexpr double kMinWindowSeconds = 1e-4;
inline constexpr double kMaxWindowSeconds = 600;
/// Accepted --budget range, seconds: 1 s to 7 days.
inline constexpr double kMinBudgetSeconds = 1;
inline constexpr double kMaxBudgetSeconds = 7 * 86400;

/// The --help text.
extern const char* const kUsage;

}  // namespace lockline
