// lockline's command line: its own flags (documented in kUsage and README) and
// the
// --benchmark_* flags passed through to Google Benchmark.
#pragma once

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
  bool list = false;
  bool oversubscribe = false;
  bool help = false;
  bool emulated = false;  ///< --emulated: mark the run and every row emulated
  std::string layouts;    ///< "", "text" or "json"
  std::vector<std::string>
      benchmark_args;             ///< --benchmark_* passed to Google Benchmark
  std::string benchmark_filter;   ///< value of --benchmark_filter, if given
  int repetitions = 3;            ///< from --benchmark_repetitions, default 3
  std::vector<std::string> argv;  ///< the full command line, for provenance
};

/// Parses argv. Throws UsageError for an unknown flag, a missing or malformed
/// value (naming it and the accepted forms). Does not touch the topology (see
/// harness/topology.h for --pin,
/// --threads and --topology checks).
Options ParseOptions(int argc, char** argv);

/// Parses a duration: "90" or "90s", "500ms", "20m", "1h". Throws UsageError
/// naming `flag`.
double ParseDurationSeconds(const std::string& text, const std::string& flag);

/// The --help text.
extern const char* const kUsage;

}  // namespace lockline
