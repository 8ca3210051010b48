// Builds in duet: the current lockline binary and an earlier build
// run every point's windows in alternation on the same PUs, so that a swing of
// the machine (a coherence-regime change, a noisy neighbour, a frequency step)
// hits both builds of a window pair instead of one side of a comparison made
// from runs minutes apart. It is harness/measure/duet.h's paired-window method
// with the two sides in two processes: each side runs its own threads and its
// own model code (the old build's workload is the old build's).
//
// Protocol (`lockline --duet-with=OLD ...`): the current binary (the client)
// starts OLD as `OLD --window-server <the run's selection flags>` on a Unix
// socket pair (the server's stdin and stdout). The server selects the same
// suite, then says hello and lists its point keys:
//   server: "lockline-window-server proto=1 schema=<kSchemaVersion> points=N
//           layout=1"
//           N lines "key <row key>", then "end"
// The client refuses (UsageError: one `lockline: error:` line, exit 2, before
// the run directory exists) a server of another protocol or result schema, or
// one whose keys differ from the client's, naming the keys only one side has.
// Then per repetition of every point:
//   client: "open <key> <window_ns> <windows> <pus> <oversubscribed>
//           [layout=<seed>]"
//           (<pus>: the client's planned OS PU indices, comma-separated, -1
//           where unpinned; layout=: the repetition's LayoutSampling seed,
//           sent when the server's hello ends "layout=1": the server places
//           its structures at the offsets the client's have, so a window pair
//           compares the builds at one address layout)
//   server: "ok <fixed_work 0|1>" after creating the workload, its thread team
//           on those PUs, Prepare and SetupThread; or "error <text>"
//   client: "window"  ->  server: "done <ops> <seconds> <overrun 0|1>
//           <cpu_seconds> [<max_off_cpu>]" (one window of its team, timed as
//           ThreadTeam::RunWindow times one; cpu_seconds: its threads' CPU
//           time, CLOCK_THREAD_CPUTIME_ID; max_off_cpu: the largest share of
//           the window a thread spent preempted, WindowResult::max_off_cpu;
//           servers before the run-delay reading sent wall - CPU time)
//   client: "close"   ->  server: "closed <json>" ({"verify": "", "metrics":
//           {...}, "address_layout": {...} | null}: TeardownThread, Report,
//           Verify; the offsets it sampled from the layout seed), the team
//           joined
// and "quit" (or end of input) at the end. An answer out of protocol (none
// within 300 s, $LOCKLINE_DUET_ANSWER_TIMEOUT; a line over 16 MiB; a "closed"
// JSON nested over 32 deep or whose verify is not a string; the connection
// closed) stops the run: one `lockline: error:` line, exit 3, the rows written
// before kept; the old build runs in its own process group, killed on every
// way lockline ends (a watchdog process kills it should lockline die). Only one
// side runs at a time: while the server runs a window, the client's thread 0
// sleeps in a read on the socket and its other threads and main thread wait on
// condition variables.
//
// Each repetition follows a DuetSchedule (harness/measure/duet.h): one warm-up
// pair, then kDuetMinPairs pairs in a seeded random order (A = the old build, B
// = the current one). A variant of one window per repetition (fixed-work
// protocols) runs one pair per repetition without warm-up. The row keeps the
// current build's own metrics and details, and adds `build_ratio` (median new/
// old pair ratio of the repetition), `old_ops_per_s`, `new_ops_per_s` and
// `details.build_duet` (results/SCHEMA.md); ci/compare.py --builds answers
// each row from its pairs. Each pair has two rates per side: operations per
// second of window wall time, and per second of its threads' CPU time. The
// second is the code's speed while it ran: on an oversubscribed machine a
// window's wall-clock rate is mostly the CPU share the scheduler gave it,
// which differs between the two windows of a pair; the CPU-time rate is not.
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

/// Address-space randomization for a build duet: both processes should map
/// their code, libraries and thread stacks at the same addresses, so that one
/// binary against itself compares like with like (branch predictors and 4 KiB
/// aliasing see virtual addresses). When the personality flag
/// ADDR_NO_RANDOMIZE (as `setarch -R`) is not set, sets it and re-executes
/// /proc/self/exe with the same arguments (the old build, started later,
/// inherits it); returns only
/// when it is already set ("off") or cannot be set ("on": e.g. a container's
/// seccomp profile refuses personality(2); a warning says so once). Called
/// after every argument is checked and before anything is created.
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
