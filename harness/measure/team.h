// The thread team: persistent pinned threads running windows from a start
// barrier, the wall-clock bound, and the ping-pong probe behind coherence.
#pragma once

#include <pthread.h>

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
  double max_off_cpu = 0;  ///< MaxOffCpuShare of the window
  std::vector<int> last_cpus;  ///< sched_getcpu at RunWindow's return, or -1
};

/// `pus.size()` persistent threads, thread i bound to OS PU pus[i] (unless
/// -1, or `topo` is null or not the host; TopologyError if it cannot bind).
class ThreadTeam {
 public:
  /// `no_page_fault_counters`: non-empty leaves the page-fault events out.
  ThreadTeam(const Topology* topo, std::vector<int> pus,
             CounterSession* counters, std::string no_page_fault_counters = "");
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return static_cast<int>(pus_.size()); }

  /// Runs fn(i) on every thread i and waits; rethrows the first exception.
  void RunOnAll(const std::function<void(int)>& fn);

  /// RunOnAll waiting at most `limit_ns`: past it one `lockline: error:` line
  /// naming `what`, RestoreAll, exit 3.
  void RunOnAllWithin(const std::function<void(int)>& fn, uint64_t limit_ns,
                      const std::string& what);

  /// One window of `wl` from a spin barrier until the stop flag (`duration_ns`
  /// after release) or, fixed work, every thread's return. Past `bound_ns`:
  /// overrun; at `hard_limit_ns`: exit with an error.
  WindowResult RunWindow(Workload& wl, const std::vector<ThreadCtx>& ctx,
                         uint64_t duration_ns, uint64_t bound_ns,
                         uint64_t hard_limit_ns);

  /// Every thread's counters since ResetCounters (empty without a session).
  std::vector<std::vector<CounterReading>> ReadCounters();
  void ResetCounters();

  /// Per thread, its sched_getaffinity PUs, sorted (empty if unreadable).
  std::vector<std::vector<int>> BoundPus();

  /// One-way latency (ns) between threads a and b: {median, min} of round
  /// trip / 2 over batches of 64 for `budget_ns`.
  std::pair<double, double> PingPong(int a, int b, uint64_t budget_ns);

 private:
  /// One thread's window record (PaddedSlots, --padding apart).
  struct alignas(kCacheLine) Slot {
    uint64_t ops = 0;
    uint64_t start_ns = 0, end_ns = 0;
    uint64_t cpu_ns = 0;
    uint64_t run_delay_ns = kNoRunDelay;  // over the window
    int last_cpu = -1;  // sched_getcpu() when RunWindow returned
    std::unique_ptr<ThreadCounters> counters;
  };
  void ThreadMain(int index);
  /// Starts thread `index` on a stack of its own placed by
  /// SampleStackPlacement; throws ThreadFailure's text (EAGAIN when its
  /// stack cannot be mapped, as pthread_create says).
  void StartThreadOnOwnStack(int index);
  static void* ThreadEntry(void* team_and_index);
  void Shutdown();  // joins every thread, unmaps their stacks; idempotent
  // With mu_ held: hands `fn` to every thread / rethrows a thread's error.
  void Post(const std::function<void(int)>& fn);
  void RethrowError();

  const Topology* topo_;
  std::vector<int> pus_;
  CounterSession* counter_session_;
  std::string no_page_fault_counters_;  // "" or why they are left out
  std::vector<pthread_t> threads_;
  std::vector<std::pair<void*, std::size_t>> stacks_;  // mapping, bytes
  PaddedSlots<Slot> slots_;

  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  uint64_t generation_ = 0;
  int done_ = 0;
  bool quit_ = false;
  std::function<void(int)> task_;
  std::exception_ptr error_;

  /// The start barrier and stop flag, on a page of their own at a sampled
  /// offset (their aliasing with the structures is sampled per repetition).
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

/// How long thread set-up may take: 120 s, or $LOCKLINE_SETUP_TIMEOUT.
uint64_t SetupTimeoutNs();

/// Topology::Load on a helper thread (hwloc may hang binding to each PU),
/// rethrowing TopologyError; past `limit_ns`: one error line, exit 3.
std::unique_ptr<Topology> LoadTopologyWithin(
    const std::string& spec, uint64_t limit_ns,
    std::unique_ptr<Topology> (*load)(const std::string&) = &Topology::Load);

/// max over i of run delay(i) / (end(i) - start(i)), in [0, 1]; where the
/// delay is kNoRunDelay, wall - cpu(i) (which counts a voluntary sleep too).
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

/// Overrun bound: 2 x the window + 20 ms (the stop's scheduling delay under
/// load); fixed work 60 s.
uint64_t OverrunBoundNs(uint64_t window_ns, bool fixed_work);

}  // namespace lockline
