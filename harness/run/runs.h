// --runs=N: a reproducibility check users can run. N independent
// lockline processes, one after the other, each a whole run (its own
// coherence baselines, calibration, address layouts and --budget) into
// RUN_DIR/run-1 .. RUN_DIR/run-N; then plots/reproduce.py computes every
// verdict over the repetitions of all runs (repetitions resampled as units:
// plots/stats.py) and says in how many runs it held (RUN_DIR/verdicts.json,
// results/SCHEMA.md "Several runs"). Processes, not repetitions in one
// process, because what differs between runs (ASLR and heap addresses, the
// vCPUs the host gives, the page cache) only changes across processes.
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

/// Runs `o.runs` independent lockline processes (this executable,
/// /proc/self/exe, with RunArguments) one after the other into `o.out` (or
/// results/<host>-<UTC time>), which must not exist yet or be empty; writes
/// RUN_DIR/runs.json ({"runs", "dirs", "exit_status", "command_line"}) and
/// runs PlotsDir()/reproduce.py RUN_DIR. SIGINT/SIGTERM/SIGHUP are passed to
/// the running child and no further run starts. Returns the exit status:
/// 2 (with one `lockline: error:` line) when the directory is taken or
/// cannot be created, else the first nonzero child status, else 1 when
/// reproduce.py failed, else 0.
int RunIndependentProcesses(int argc, char** argv, const Options& o);

}  // namespace lockline
