// The thread team: persistent pinned threads that run measurement windows, the
// start barrier, per-thread operation counts on their own cache lines, the
// wall-clock bound, and the core-to-core ping-pong probe used for coherence
// labels.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "harness/family.h"
#include "harness/machine/cpu.h"
#include "harness/machine/padded_slots.h"
#include "harness/machine/topology.h"
#include "harness/measure/counters.h"

namespace lockline {

/// The outcome of one measurement window.
struct WindowResult {
  double seconds = 0;  ///< wall time: first thread's start to last thread's end
  std::vector<uint64_t> ops;  ///< per thread
  uint64_t total_ops = 0;
  double cpu_seconds = 0;  ///< summed thread CPU time (CLOCK_THREAD_CPUTIME_ID)
  bool overrun = false;    ///< ran past the wall-clock bound
  /// The largest share of its window one thread spent preempted
  /// (MaxOffCpuShare): a spinning waiter of a preempted holder spins on a lock
  /// that cannot be released; a sleeping waiter (futex_wait) is not counted.
  double max_off_cpu = 0;
  std::vector<int> last_cpus;  ///< sched_getcpu at RunWindow's return, or -1
};

/// Team of `pus.size()` threads; thread i binds itself to OS PU pus[i] (no
/// binding when -1 or when `topo` is null or not the host). Threads persist
/// until destruction and run one task at a time. Throws TopologyError from the
/// constructor when a thread cannot bind (the failing PU and errno are named)
/// after joining the threads it started.
class ThreadTeam {
 public:
  /// `no_page_fault_counters`: "" opens every counter of the session;
  /// otherwise the page-fault software events are left out, with this reason
  /// (CounterSession::OpenForThisThreadWithoutPageFaults).
  ThreadTeam(const Topology* topo, std::vector<int> pus,
             CounterSession* counters, std::string no_page_fault_counters = "");
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return static_cast<int>(pus_.size()); }

  /// Runs fn(i) on every thread i concurrently and waits; rethrows the first
  /// exception.
  void RunOnAll(const std::function<void(int)>& fn);

  /// RunOnAll for set-up steps, waiting at most `limit_ns`: past it (a thread
  /// that cannot be joined) one `lockline: error:` line naming `what` and the
  /// limit, RestoreAll, exit 3; results already written are kept.
  void RunOnAllWithin(const std::function<void(int)>& fn, uint64_t limit_ns,
                      const std::string& what);

  /// One window of `wl`: threads leave a spin barrier together, counters start,
  /// RunWindow runs until the stop flag (set `duration_ns` after release) or,
  /// for fixed work, until every thread returns. Still running `bound_ns`
  /// after release: flagged overrun; at `hard_limit_ns`: exit with an error.
  WindowResult RunWindow(Workload& wl, const std::vector<ThreadCtx>& ctx,
                         uint64_t duration_ns, uint64_t bound_ns,
                         uint64_t hard_limit_ns);

  /// Counter readings of every thread since the last ResetCounters (empty
  /// without a session).
  std::vector<std::vector<CounterReading>> ReadCounters();
  void ResetCounters();

  /// Per thread, the OS PUs its CPU affinity allows, read back from the
  /// kernel (sched_getaffinity) on the thread itself; sorted. Never throws
  /// for an unreadable mask (that thread's list is empty).
  std::vector<std::vector<int>> BoundPus();

  /// One-way core-to-core latency between team threads a and b, ns: one cache
  /// line ping-ponged for about `budget_ns` in batches of 64 round trips;
  /// {median, min} of the batches' round trip / 2 (as
  /// nviennot/core-to-core-latency).
  std::pair<double, double> PingPong(int a, int b, uint64_t budget_ns);

 private:
  /// One thread's window record, written by that thread in every window: a
  /// slot of a PaddedSlots array (--padding apart).
  struct alignas(kCacheLine) Slot {
    uint64_t ops = 0;
    uint64_t start_ns = 0, end_ns = 0;
    uint64_t cpu_ns = 0;
    uint64_t run_delay_ns = kNoRunDelay;  // over the window
    int last_cpu = -1;  // sched_getcpu() when RunWindow returned
    std::unique_ptr<ThreadCounters> counters;
  };
  void ThreadMain(int index);
  void Shutdown();  // joins every thread; idempotent
  // With mu_ held: hands `fn` to every thread / rethrows a thread's error.
  void Post(const std::function<void(int)>& fn);
  void RethrowError();

  const Topology* topo_;
  std::vector<int> pus_;
  CounterSession* counter_session_;
  std::string no_page_fault_counters_;  // "" or why they are left out
  std::vector<std::thread> threads_;
  PaddedSlots<Slot> slots_;

  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  uint64_t generation_ = 0;
  int done_ = 0;
  bool quit_ = false;
  std::function<void(int)> task_;
  std::exception_ptr error_;

  /// The start barrier's count and the stop flag every RunWindow loop reads,
  /// on a page of their own at the offset LayoutSampling draws: a duet's two
  /// builds read them at one page offset, and their 4 KiB aliasing with the
  /// structures under test is sampled per repetition, not a per-process bias.
  struct Flags {
    alignas(kDestructiveLine) std::atomic<int> arrived{0};
    alignas(kDestructiveLine) std::atomic<bool> stop{false};
  };
  struct FlagsDeleter {
    std::size_t offset = 0;
    void operator()(Flags* f) const;
  };
  static std::unique_ptr<Flags, FlagsDeleter> NewFlags();
  std::unique_ptr<Flags, FlagsDeleter> flags_ = NewFlags();
  std::atomic<int>& arrived_ = flags_->arrived;
  std::atomic<bool>& stop_ = flags_->stop;
};

/// How long thread set-up (ThreadTeam's binding and counters, a family's
/// SetupThread) may take before the run stops with an error: 120 s, or
/// $LOCKLINE_SETUP_TIMEOUT (a duration, e.g. "500ms", for tests and slow
/// machines).
uint64_t SetupTimeoutNs();

/// Topology::Load(spec) on a helper thread, waiting at most `limit_ns`:
/// hwloc's "host" discovery binds a thread to each PU in turn (CPUID on x86),
/// and a binding may never return. Past the limit: one `lockline: error:` line
/// naming the spec, the limit and LOCKLINE_SETUP_TIMEOUT, RestoreAll, exit 3.
/// Rethrows Load's TopologyError. `load`: a test may inject a hang.
std::unique_ptr<Topology> LoadTopologyWithin(
    const std::string& spec, uint64_t limit_ns,
    std::unique_ptr<Topology> (*load)(const std::string&) = &Topology::Load);

/// The largest share of a window one of `n` threads spent off its CPU against
/// its will: max over i of delay(i) / (end(i) - start(i)), delay being the run
/// delay (ThreadRunDelayNs: runnable, not running); where that is kNoRunDelay,
/// wall - cpu(i) instead (which counts a voluntary sleep too). In [0, 1].
template <class Start, class End, class Cpu, class Delay>
double MaxOffCpuShare(int n, Start start, End end, Cpu cpu, Delay delay) {
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t s = start(i), e = end(i), c = cpu(i), d = delay(i);
    if (e <= s) continue;
    const double wall = static_cast<double>(e - s);
    const double off = d != kNoRunDelay ? static_cast<double>(d)
                                        : wall - static_cast<double>(c);
    if (off > 0) worst = std::max(worst, std::min(1.0, off / wall));
  }
  return worst;
}

/// The wall-clock bound of a window (ThreadTeam::RunWindow's `bound_ns`): past
/// it the window is flagged overrun and its repetition is left out of
/// comparisons. A timed window: 2 x its length + 20 ms (the slack covers a
/// loaded machine's scheduling delay of the stop, not a window that ran on).
/// A fixed-work window has no planned length: 60 s.
uint64_t OverrunBoundNs(uint64_t window_ns, bool fixed_work);

}  // namespace lockline
