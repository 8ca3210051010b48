// The contract between experiment families (bench/*.cpp) and the harness.
//
// Measurement model (shared by every family, after will-it-scale and
// Concurrency Kit): lockline owns the threads. For one point (one row key) the
// harness starts `threads` threads, pins each to its planned PU, calls
// Workload::SetupThread on it (first touch of thread-private memory), then runs
// measurement windows: all threads leave a start barrier together, call
// RunWindow, which loops over the operation until the stop flag is set after
// `window` seconds (or, for a fixed-work workload, returns when its work is
// done), and report the operations they did. One Google Benchmark iteration is
// one window; the window's wall time is reported as manual time. Threads
// persist across the windows of one point. A window that runs past its
// wall-clock bound is flagged `overrun` in the results.
//
// Contention model: an operation is `work_ns` of thread-private work outside
// the lock plus the critical section (the family's data-structure update,
// optionally `cs_ns` more). Families name these knobs in their parameters so
// points are comparable across families.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "harness/machine/topology.h"

namespace lockline {

/// Which suites a variant belongs to; a variant marked kDefault is in default
/// and full.
enum class Suite { kQuick = 0, kDefault = 1, kFull = 2 };

/// Ordered key:value parameters of a point (without threads); they make the row
/// key `family/key:value/.../threads:N` and the row's `params` object.
using Params = std::vector<std::pair<std::string, std::string>>;

/// What a thread knows about itself inside a point.
struct ThreadCtx {
  int index = 0;    ///< 0 .. threads-1
  int threads = 1;  ///< threads of the point
  int pu = -1;      ///< OS index of the PU it is bound to (-1 when --pin=none)
  int numa = -1;    ///< logical NUMA node of that PU (-1 unknown)
  uint64_t window_ns = 0;       ///< planned window length
  bool oversubscribed = false;  ///< spinning waiters yield (spin_wait.h)
};

/// Per-point results a workload adds after its windows: flat metrics (Google
/// Benchmark counters on the row) and the row's `details` object.
struct PointReport {
  std::vector<std::pair<std::string, double>> metrics;
  nlohmann::json details = nlohmann::json::object();
  std::vector<std::string> layouts;  ///< layout names (reported in the context)
  void Metric(const std::string& name, double value) {
    metrics.emplace_back(name, value);
  }
};

/// One point's workload. Created once per point (per repetition) on the main
/// thread; threads call the per-thread hooks on themselves. Shared structures
/// are allocated in the constructor or Prepare(); thread-private ones in
/// SetupThread (first touch by the pinned thread).
class Workload {
 public:
  virtual ~Workload() = default;
  /// Every workload object is placed like the structures under test
  /// (AllocSampledObject: its own pages, at the offset the live LayoutSampling
  /// draws): its fields are read in every iteration of a timed loop, and a
  /// heap placement's cache set and 4 KiB aliasing with the lock line differ
  /// between processes (an A/A build duet read a 1-thread ticket lock 5 %
  /// apart). A wrapper on one side of a duet only is a HeapPlacedWorkload.
  static void* operator new(std::size_t bytes);
  static void* operator new(std::size_t bytes, std::align_val_t align);
  static void operator delete(void* p) noexcept;
  static void operator delete(void* p, std::align_val_t align) noexcept;
  /// Called once on the main thread after the team exists, before any
  /// SetupThread.
  virtual void Prepare(int /*threads*/) {}
  /// On each pinned thread, before the first window.
  virtual void SetupThread(const ThreadCtx& /*ctx*/) {}
  /// One window on one thread: do operations until `stop` reads true (relaxed
  /// load is enough: the harness's release store happens-before the join),
  /// return how many were done. A fixed-work workload (fixed_work() true)
  /// ignores stop and returns when its share is done.
  virtual uint64_t RunWindow(const ThreadCtx& ctx,
                             const std::atomic<bool>& stop) = 0;
  /// On each thread after the last window.
  virtual void TeardownThread(const ThreadCtx& /*ctx*/) {}
  /// True when a window is a fixed amount of work rather than a fixed duration.
  virtual bool fixed_work() const { return false; }
  /// Non-empty when every operation is a page fault the workload counts
  /// itself: the point's counters leave the page-fault software events out
  /// (OpenForThisThreadWithoutPageFaults) with this reason.
  virtual std::string page_fault_counters_left_out() const { return ""; }
  /// True when the threads write at least one cache line they share (a lock
  /// word, a list head): the harness probes the PU pair's coherence before and
  /// after (coherence.h). False for private memory only: label "none", no
  /// probe.
  virtual bool shares_lines() const { return true; }
  /// After all windows, on the main thread: add metrics and details
  /// (`window_seconds`, `ops`: sums over windows and threads).
  virtual void Report(PointReport& /*out*/, double /*window_seconds*/,
                      uint64_t /*ops*/) {}
  /// After Report: "" when the structure's invariants hold, else what broke
  /// (the row is marked an error).
  virtual std::string Verify() { return ""; }
  /// After Report, before Verify: "" when the point ran as planned, else
  /// what stopped it ("needs root", a fork refused): not a broken invariant.
  virtual std::string SetupError() { return ""; }
};

/// A wrapper in one process of a build duet only: on the heap, so it draws no
/// layout offset and both processes keep the same sampled offsets.
class HeapPlacedWorkload : public Workload {
 public:
  static void* operator new(std::size_t bytes) { return ::operator new(bytes); }
  static void operator delete(void* p) noexcept { ::operator delete(p); }
};

/// Everything a workload factory may need about the run and the point.
struct PointEnv {
  const Topology* topology = nullptr;
  const ThreadPlan* plan = nullptr;
  int threads = 1;
  uint64_t window_ns = 0;
  /// Timed windows per repetition of this point (Variant::windows, or the
  /// paired plan's 2 x (warm-up + measured pairs)).
  int windows = 0;
  std::string mem_policy;  ///< --mem value
  bool quick = false;      ///< --quick run: keep sizes small
  uint64_t fault_sample_period_ns = 2'000'000;  ///< --fault-sampling; 0: off
  int evidence_windows = 2;    ///< --evidence: kernel_* untimed windows; 0: off
  bool oversubscribe = false;  ///< a helper may share a measured PU
};

/// One variant of a family: parameters plus a factory, crossed with thread
/// counts.
struct Variant {
  Params params;
  Suite suite = Suite::kDefault;
  /// Only in the quick suite: a smaller stand-in with its own key (mb:32 for
  /// mb:256), so quick and default rows never pair.
  bool quick_only = false;
  std::string description;
  std::function<std::unique_ptr<Workload>(const PointEnv&)> make;
  std::vector<int> threads;  ///< empty: the run's --threads list
  /// Run the largest thread count only (a comparison at the contended end).
  bool largest_thread_count_only = false;
  /// The seed question ("000".."004", plots/verdicts.py) this variant's rows
  /// answer; "" for rows that serve the figures.
  std::string question;
  /// Paired windows: their count comes from --precision (PlanPairs), read
  /// from PointEnv::windows.
  bool paired = false;
  bool needs_spare_pu = false;  ///< it starts a helper thread on its own PU
  /// With needs_spare_pu: one helper per NUMA node of the machine, each on a
  /// PU of its own (pagevec zones:per_numa: a reclaim scanner per lru_lock).
  bool helper_per_node = false;
  int windows = 0;  ///< 0: the run's default; fixed work usually wants 1
  /// Its points run this many times the run's repetitions (a comparison whose
  /// repetitions fall in two modes needs enough for every run to see both).
  int repetition_factor = 1;
  /// Its windows are fixed work (for the budget's plan, until the point ran).
  bool fixed_work = false;
  /// What one repetition costs besides its timed windows and the harness's
  /// work (HarnessRepetitionCostS), for fitting the window to --budget:
  /// `cost_mib` MiB first touched (priced by MeasureFaultInSecondsPerMiB) plus
  /// `cost_s` seconds of anything else (building a model, forking tasks).
  double cost_mib = 0;
  double cost_s = 0;
  /// The share of cost_mib and cost_s left in a --quick run.
  double quick_cost_fraction = 1;
  /// Explicit OS PU indices for the threads, overriding the placement policy
  /// (core-to-core latency pairs).
  std::vector<int> pus;
};

/// A family: a name (first component of every row key), a description, and a
/// generator of its variants for the run.
struct Family {
  std::string name;
  std::string description;
  std::function<std::vector<Variant>()> variants;
  /// Optional instead of `variants`: variants of the usable PUs in placement
  /// order (e.g. a core-to-core latency matrix's pairs).
  std::function<std::vector<Variant>(const std::vector<PuInfo>& order)>
      planned_variants;
};

/// Registers a family (LOCKLINE_REGISTER_FAMILY).
bool RegisterFamily(Family family);
/// All registered families, in name order.
const std::vector<Family>& Families();

/// Builds "family/k:v/.../threads:N".
std::string RowKey(const std::string& family, const Params& params,
                   int threads);

/// Thread-private work outside the lock: spins for about `ns` nanoseconds of
/// dependent integer work calibrated once per process (not a clock read loop,
/// so it does not perturb counters).
void ThinkNs(uint64_t ns);

}  // namespace lockline

#define LOCKLINE_CONCAT_INNER(a, b) a##b
#define LOCKLINE_CONCAT(a, b) LOCKLINE_CONCAT_INNER(a, b)
/// In bench/NAME.cpp: LOCKLINE_REGISTER_FAMILY(Family{...});
#define LOCKLINE_REGISTER_FAMILY(...)                                        \
  static const bool LOCKLINE_CONCAT(lockline_family_registered_, __LINE__) = \
      ::lockline::RegisterFamily(__VA_ARGS__)
