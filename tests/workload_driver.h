// Drives one lockline::Workload in a test the way the harness's runner
// (harness/run/runner.cpp) does, on the harness's own thread team
// (harness/measure/team.h), so the family tests exercise the same code path as
// real runs: Prepare on the calling thread, SetupThread on every team thread,
// windows through ThreadTeam::RunWindow (start barrier, stop flag set `seconds`
// after the last thread arrives, fixed-work windows run to completion), then
// TeardownThread on the same threads, Report and Verify.
//
// Differences from a real run, all deliberate: threads are not bound (tests run
// on any machine; ctx.pu = -1), there are no counters and no ping-pong probes,
// and ctx.numa is a synthetic `index % numa_nodes` so a test can split threads
// over zones on a one-node machine.
//
// Note: this namespace is lockline::testing, so code inside namespace lockline
// must spell GoogleTest's namespace `::testing`.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/family.h"
#include "harness/machine/cpu.h"
#include "harness/measure/team.h"

namespace lockline::testing {

/// The PointEnv of a test point: `threads` threads, no topology or plan,
/// first-touch memory, quick sizes.
inline PointEnv TestEnv(int threads) {
  PointEnv env;
  env.threads = threads;
  env.mem_policy = "first-touch";
  env.quick = true;
  return env;
}

/// One point of `wl` on a ThreadTeam of `threads` unbound threads. The
/// constructor calls Prepare(threads) and SetupThread on every team thread;
/// Window runs one measurement window; Teardown calls TeardownThread on every
/// team thread (not called by the destructor: a test may inspect the state a
/// point leaves before teardown, or never tear down). Exceptions thrown by the
/// workload on a team thread are rethrown on the calling thread.
class WorkloadDriver {
 public:
  /// ctx.numa of thread i is i % numa_nodes (numa_nodes >= 1); ctx.pu is -1.
  WorkloadDriver(Workload& wl, int threads, int numa_nodes = 1)
      : wl_(wl),
        team_(nullptr, std::vector<int>(threads, -1), nullptr),
        last_ops_(threads, 0),
        per_thread_(threads, 0) {
    for (int i = 0; i < threads; ++i) {
      ThreadCtx c;
      c.index = i;
      c.threads = threads;
      c.numa = i % std::max(numa_nodes, 1);
      ctx_.push_back(c);
    }
    wl_.Prepare(threads);
    team_.RunOnAll([&](int i) { wl_.SetupThread(ctx_[i]); });
  }

  /// One window of about `seconds` through ThreadTeam::RunWindow with the
  /// runner's bounds (fixed work: 60 s; else max(10 x window, 2 s); exit 120 s
  /// later). Returns the window's summed ops; last_ops() has them per thread.
  ///
  /// `seconds` <= 0 is a different, minimal window: RunWindow is called on
  /// every team thread with `stop` already true, so each thread does exactly
  /// the workload's minimum (one round / one iteration). A 0 ns
  /// ThreadTeam::RunWindow does not guarantee that: it clears the stop flag and
  /// sets it only after the start barrier, so a thread may finish several
  /// rounds first. This variant has no start barrier and its wall time is the
  /// whole RunOnAll call.
  uint64_t Window(double seconds) {
    const int n = team_.size();
    if (seconds <= 0) {
      const std::atomic<bool> stop{true};
      const uint64_t t0 = NowNs();
      team_.RunOnAll(
          [&](int i) { last_ops_[i] = wl_.RunWindow(ctx_[i], stop); });
      seconds_ += static_cast<double>(NowNs() - t0) / 1e9;
    } else {
      const auto window_ns = static_cast<uint64_t>(seconds * 1e9);
      for (ThreadCtx& c : ctx_) c.window_ns = window_ns;
      const uint64_t bound_ns =
          wl_.fixed_work()
              ? 60'000'000'000ull
              : std::max<uint64_t>(10 * window_ns, 2'000'000'000ull);
      const WindowResult r = team_.RunWindow(wl_, ctx_, window_ns, bound_ns,
                                             bound_ns + 120'000'000'000ull);
      last_ops_ = r.ops;
      seconds_ += r.seconds;
      overrun_ |= r.overrun;
    }
    last_ops_.resize(n, 0);
    uint64_t sum = 0;
    for (int i = 0; i < n; ++i) {
      per_thread_[i] += last_ops_[i];
      sum += last_ops_[i];
    }
    ops_ += sum;
    return sum;
  }

  /// Windows of about `seconds` (> 0) until `done()` holds after one, at most
  /// `max_windows`: for a progress bound that one window can miss on a CI
  /// runner busy with the parallel tests (a FIFO lock whose next owner is
  /// preempted hands over about once per timeslice). Returns their summed ops.
  template <class Done>
  uint64_t WindowsUntil(double seconds, Done&& done, int max_windows = 100) {
    uint64_t sum = 0;
    for (int i = 0; i < max_windows; ++i) {
      sum += Window(seconds);
      if (done()) break;
    }
    return sum;
  }

  /// TeardownThread on every team thread (call at most once).
  void Teardown() {
    team_.RunOnAll([&](int i) { wl_.TeardownThread(ctx_[i]); });
  }

  /// The workload's Report(out, seconds, ops) into a fresh PointReport.
  PointReport Report(double seconds, uint64_t ops) {
    PointReport out;
    wl_.Report(out, seconds, ops);
    return out;
  }

  /// Per-thread ops of the last window.
  const std::vector<uint64_t>& last_ops() const { return last_ops_; }
  /// Per-thread ops summed over all windows.
  const std::vector<uint64_t>& per_thread_ops() const { return per_thread_; }
  /// Summed ops and summed window wall time (s) of all windows.
  uint64_t ops() const { return ops_; }
  double seconds() const { return seconds_; }
  /// Some window ran past its bound (never asserted on: the VM is noisy).
  bool overrun() const { return overrun_; }
  const std::vector<ThreadCtx>& ctx() const { return ctx_; }
  ThreadTeam& team() { return team_; }

 private:
  Workload& wl_;
  ThreadTeam team_;
  std::vector<ThreadCtx> ctx_;
  std::vector<uint64_t> last_ops_;
  std::vector<uint64_t> per_thread_;
  uint64_t ops_ = 0;
  double seconds_ = 0;
  bool overrun_ = false;
};

/// The value of metric `name` in `r`; records a test failure and returns -1
/// when it is missing.
inline double MetricOf(const PointReport& r, const std::string& name) {
  for (const auto& [k, v] : r.metrics) {
    if (k == name) return v;
  }
  ADD_FAILURE() << "metric " << name << " missing";
  return -1;
}

/// Usable PUs of a machine with `nodes` NUMA nodes, 2 PUs each.
inline std::vector<PuInfo> Machine(int nodes) {
  std::vector<PuInfo> order;
  for (int i = 0; i < 2 * nodes; ++i) {
    PuInfo pu;
    pu.os_index = pu.logical_index = pu.core = i;
    pu.numa = i / 2;
    pu.package = 0;
    order.push_back(pu);
  }
  return order;
}

}  // namespace lockline::testing
