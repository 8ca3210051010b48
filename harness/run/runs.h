// --runs=N: a reproducibility check. N independent lockline processes, one
// after the other, each a whole run into RUN_DIR/run-1 .. run-N; then
// plots/reproduce.py computes every verdict over all runs' repetitions and
// says in how many runs it held (results/SCHEMA.md "Several runs"). Processes,
// because what differs between runs (ASLR, the host's vCPUs, the page cache)
// only changes across processes.
#pragma once

#include <string>
#include <vector>

#include "harness/run/options.h"

namespace lockline {

/// The default run directory, relative to the working directory:
/// results/<host name>-<UTC time as YYYYMMDDTHHMMSSZ> ("host" when
/// gethostname fails). Shared by a run and a --runs run.
std::string DefaultRunDir();

/// The path of this executable (/proc/self/exe); "" when it cannot be read.
std::string SelfPath();

/// The arguments of run `index` (1-based) of a --runs run: `args` (argv[1..])
/// without --runs=... and --out=..., plus --out=`dir`/run-`index`.
std::vector<std::string> RunArguments(const std::vector<std::string>& args,
                                      const std::string& dir, int index);

/// Runs `o.runs` processes of this executable (RunArguments) into `o.out` (or
/// DefaultRunDir()), which must be new or empty; writes RUN_DIR/runs.json and
/// runs PlotsDir()/reproduce.py RUN_DIR. SIGINT/SIGTERM/SIGHUP go to the
/// running child and stop further runs. Returns 2 (one `lockline: error:`
/// line) when the directory is taken or uncreatable, else the first nonzero
/// child status, else 1 when reproduce.py failed, else 0.
int RunIndependentProcesses(int argc, char** argv, const Options& o);

}  // namespace lockline
