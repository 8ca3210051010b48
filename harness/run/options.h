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

/// --calibrate-only's --budget and repetitions unless given: about 10 s.
inline constexpr double kCalibrateBudgetS = 10;
inline constexpr int kCalibrateRepetitions = 3;

/// Extra time of --until-resolved given without a value, seconds.
inline constexpr double kDefaultUntilResolvedS = 300;
/// Share of --budget the default run's planned repetitions fit; the rest is
/// the open comparisons'.
inline constexpr double kPlannedBudgetShare = 0.72;

/// --fault-sampling period, seconds (2 ms: a few per cent of a KVM guest's).
inline constexpr double kDefaultFaultSamplingS = 2e-3;
inline constexpr double kMinFaultSamplingS = 1e-4;
inline constexpr double kMaxFaultSamplingS = 0.1;

/// --evidence=on: one window before the timed ones, one after.
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
  bool oversubscribe = false;        ///< up to kMaxOversubscription x
  bool oversubscribe_force = false;  ///< --oversubscribe=force: no cap
  bool help = false;
  bool emulated = false;  ///< --emulated: mark the run and every row emulated
  std::string layouts;    ///< "", "text" or "json"
  std::vector<std::string> benchmark_args;  ///< passed to Google Benchmark
  std::string benchmark_filter;    ///< value of --benchmark_filter, if given
  int repetitions = 5;             ///< from --benchmark_repetitions, default 5
  bool repetitions_given = false;  ///< --benchmark_repetitions was given
  double until_resolved_s = 0;     ///< extra seconds (until_resolved.h); 0 off
  /// --until-resolved within --budget (the default run): until_resolved_s is
  /// the budget and the planned repetitions fit kPlannedBudgetShare of it.
  bool until_resolved_auto = false;
  double precision = 0.03;  ///< paired 95 % half-width aimed at (PlanPairs)
  double fault_sampling_s = kDefaultFaultSamplingS;  ///< 0: off
  /// kernel_* families' untimed evidence windows (0: off, fault sampling too)
  int evidence_windows = kDefaultEvidenceWindows;
  std::size_t padding = 128;  ///< padded_slots.h
  bool padding_given = false;
  int runs = 1;                   ///< --runs: independent processes (runs.h)
  std::vector<std::string> argv;  ///< the full command line, for provenance
  std::string duet_with;          ///< --duet-with (build_duet.h); "" off
  bool window_server = false;     ///< --window-server (internal)
  /// --calibrate-only: the default suite's 1-thread rows of the families
  /// `lockline predict` fits and its c2c rows, for predict's --target=.
  bool calibrate_only = false;
};

/// Seconds the planned repetitions fit: --budget, or kPlannedBudgetShare of it
/// when the default run resolves within it.
inline double PlannedBudgetS(const Options& o) {
  return o.budget_s * (o.until_resolved_auto ? kPlannedBudgetShare : 1.0);
}

/// The default run fits its points' repetitions to its budget too
/// (budget.h FitRepetitions); --benchmark_repetitions fixes them.
inline bool FitsRepetitions(const Options& o) {
  return o.until_resolved_auto && !o.repetitions_given;
}

/// Parses argv. Throws UsageError naming the flag and the accepted forms for an
/// unknown, inapplicable or malformed one, Google Benchmark's too (a bad
/// boolean or format, an unwritable --benchmark_out directory, a filter that
/// is not an extended regex). The topology's flags are checked in topology.h.
Options ParseOptions(int argc, char** argv);

/// Parses a duration: "90" or "90s", "500ms", "20m", "1h" (decimal, optional
/// fraction and exponent; no hex, inf or nan). Throws UsageError naming `flag`
/// and the range when malformed or outside [min_s, max_s] seconds.
double ParseDurationSeconds(const std::string& text, const std::string& flag,
                            double min_s = 1e-3, double max_s = 7 * 86400);

/// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or
/// code points past U+10FFFF).
bool IsValidUtf8(const std::string& text);

/// `text` for an error line: control characters (below 0x20, 0x7f) and bytes
/// that are not part of valid UTF-8 become "\xNN"; the rest is kept.
std::string EscapeForMessage(const std::string& text);

/// Prints "lockline: error: MESSAGE" (EscapeForMessage'd) to stderr; returns 2.
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
