// Builds in duet (`lockline --duet-with=OLD`): this binary and an earlier
// build run every point's windows in alternation on the same PUs (duet.h's
// paired windows with the sides in two processes). OLD serves windows
// (`--window-server`) on a socket pair; the line protocol, its refusals and
// exits are in docs/measurement.md "Build duet protocol".
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "harness/family.h"

namespace lockline {

struct RunState;

/// Protocol version of the window server (the hello line's proto=).
inline constexpr int kWindowServerProtocol = 1;

/// Repetitions of a one-window (fixed-work) point in a build duet (one pair
/// each): compare.py --builds needs 8 pairs of one regime, and 2 regimes may
/// split 10 repetitions below that.
inline constexpr int kBuildDuetOneWindowRepetitions = 20;

/// Sets ADDR_NO_RANDOMIZE (as `setarch -R`) and re-executes /proc/self/exe so
/// both builds map code and stacks alike; returns "off" when already set, "on"
/// (with a warning) when it cannot be set. Call after the arguments are checked.
std::string DisableAslrForDuet(char** argv);

/// Starts OLD's window server with the run's selection flags, checks it, and
/// makes every point of `run` a build duet. Call after BuildPoints, before the
/// run directory is claimed. Throws UsageError on refusal.
void PrepareBuildDuet(RunState& run);

/// `lockline --window-server`: serves run.points on stdin/stdout until "quit"
/// or end of input. Returns 0.
int ServeWindows(RunState& run);

/// A wrapper around a family's workloads, registered only by test builds
/// (tests/plant/planted_slowdown.cpp).
using WorkloadWrap = std::function<std::unique_ptr<Workload>(
    const std::string& family, std::unique_ptr<Workload> inner)>;
/// Registers `wrap` (call from a static initializer). Returns true.
bool RegisterWorkloadWrap(WorkloadWrap wrap);
/// Applies the registered wraps to every variant of `run` (after BuildPoints).
void ApplyWorkloadWraps(RunState& run);

}  // namespace lockline
