// --runs=N: N independent lockline processes (ASLR, vCPUs and page cache only
// change across processes) into RUN_DIR/run-1..N, then plots/reproduce.py.
#pragma once

#include <string>
#include <vector>

#include "harness/run/options.h"

namespace lockline {

/// results/<host>-<UTC YYYYMMDDTHHMMSSZ> ("host" when gethostname fails).
std::string DefaultRunDir();

/// The path of this executable (/proc/self/exe); "" when it cannot be read.
std::string SelfPath();

/// Run `index`'s arguments: `args` without --runs / --out, plus its --out.
std::vector<std::string> RunArguments(const std::vector<std::string>& args,
                                      const std::string& dir, int index);

/// Runs `o.runs` processes into `o.out` (new or empty), writes runs.json and
/// runs reproduce.py; signals go to the running child and stop further runs.
/// Returns 2 when the directory is taken, else the first nonzero child
/// status, else 1 when reproduce.py failed, else 0.
int RunIndependentProcesses(int argc, char** argv, const Options& o);

}  // namespace lockline
