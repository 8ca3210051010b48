// Builds in duet: the current lockline binary and an earlier build run every
// point's windows in alternation on the same PUs, so a swing of the machine (a
// coherence-regime change, a noisy neighbour, a frequency step) hits both
// builds of a window pair, not one side of runs minutes apart. It is
// harness/measure/duet.h's paired-window method with the sides in two
// processes, each with its own threads and model code.
//
// Protocol (`lockline --duet-with=OLD ...`): the client (this binary) starts
// `OLD --window-server <the run's selection flags>` on a Unix socket pair (its
// stdin and stdout). The server selects the same suite and says
//   "lockline-window-server proto=1 schema=<kSchemaVersion> points=N layout=1",
//   N lines "key <row key>", then "end".
// The client refuses (UsageError: one `lockline: error:` line, exit 2, before
// the run directory exists) another protocol or result schema, or other keys
// (naming the keys only one side has). Then per repetition of every point:
//   "open <key> <window_ns> <windows> <pus> <oversubscribed> [layout=<seed>]"
//     (<pus>: planned OS PU indices, comma-separated, -1 unpinned; layout=:
//     the repetition's LayoutSampling seed, sent when the hello ends
//     "layout=1", so both builds place their structures at one layout)
//     -> "ok <fixed_work 0|1>" (workload, team on those PUs, Prepare,
//     SetupThread) or "error <text>";
//   "window" -> "done <ops> <seconds> <overrun 0|1> <cpu_seconds>
//     [<max_off_cpu>]" (one ThreadTeam::RunWindow; cpu_seconds: its threads'
//     CLOCK_THREAD_CPUTIME_ID; max_off_cpu: WindowResult::max_off_cpu);
//   "close" -> "closed <json>" ({"verify": "", "metrics": {...},
//     "address_layout": {...} | null} after TeardownThread, Report, Verify);
// and "quit" (or end of input). An answer out of protocol (none within 300 s,
// $LOCKLINE_DUET_ANSWER_TIMEOUT; a line over 16 MiB; a "closed" JSON nested
// over 32 deep or whose verify is not a string; the connection closed) stops
// the run: one `lockline: error:` line, exit 3, the rows written kept. The old
// build runs in its own process group, killed however lockline ends (by a
// watchdog process should lockline die). One side runs at a time: during a
// server window the client's thread 0 sleeps in a read on the socket.
//
// Each repetition follows a DuetSchedule (harness/measure/duet.h; A = the old
// build, B = this one); a one-window (fixed-work) variant runs one pair per
// repetition without warm-up. The row keeps this build's metrics and details
// and adds `build_ratio` (median new/old pair ratio), `old_ops_per_s`,
// `new_ops_per_s` and `details.build_duet` (results/SCHEMA.md), answered by
// ci/compare.py --builds. Each pair has two rates per side: per second of wall
// time and per second of its threads' CPU time; on an oversubscribed machine
// the wall-clock rate is mostly the scheduler's CPU share, the CPU rate is not.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "harness/family.h"

namespace lockline {

struct RunState;

/// Protocol version of the window server (the hello line's proto=).
inline constexpr int kWindowServerProtocol = 1;

/// Repetitions of a one-window (fixed-work) point in a build duet: one window
/// pair each, and ci/compare.py --builds needs 8 pairs of one coherence regime
/// for an interval. 20: a 2-thread point's repetitions may split between the
/// near and the far regime, and 10 can leave fewer than 8 in the larger one.
inline constexpr int kBuildDuetOneWindowRepetitions = 20;

/// Address-space randomization off for a build duet, so both processes map
/// code, libraries and stacks alike (branch predictors and 4 KiB aliasing see
/// virtual addresses): sets ADDR_NO_RANDOMIZE (as `setarch -R`) and
/// re-executes /proc/self/exe (the old build inherits it); returns when it is
/// already set ("off") or cannot be set ("on", with a warning: e.g. seccomp
/// refuses personality(2)). Call after the arguments are checked.
std::string DisableAslrForDuet(char** argv);

/// `lockline --duet-with=OLD`: starts OLD's window server with the run's
/// selection flags, checks it (build_duet.cpp's WindowClient), and makes
/// every point of `run` a build duet (its windows 2 x (warm-up + pairs), its
/// workload a BuildDuetWorkload: this build's workload paired window by
/// window with the old build's). Call after BuildPoints, before the run
/// directory is claimed. Throws UsageError on refusal.
void PrepareBuildDuet(RunState& run);

/// `lockline --window-server`: serves windows of run.points on stdin/stdout
/// until "quit" or end of input (see the file comment), answering "error
/// <text>" to a command it cannot carry out. Returns 0.
int ServeWindows(RunState& run);

/// A wrapper around a family's workloads, registered by test builds (the
/// planted slowdown of tests/plant/planted_slowdown.cpp, which only the
/// lockline_planted target links); lockline itself registers none.
using WorkloadWrap = std::function<std::unique_ptr<Workload>(
    const std::string& family, std::unique_ptr<Workload> inner)>;
/// Registers `wrap` (call from a static initializer). Returns true.
bool RegisterWorkloadWrap(WorkloadWrap wrap);
/// Applies the registered wraps to every variant of `run` (after BuildPoints,
/// in every mode: a run, a duet client, a window server).
void ApplyWorkloadWraps(RunState& run);

}  // namespace lockline
