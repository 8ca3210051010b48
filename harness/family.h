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
  bool oversubscribed = false;  ///< more threads than usable PUs: spinning
                                ///< waiters yield (harness/locks/spin_wait.h)
};

/// Per-point results a workload adds after its windows: flat numeric metrics
/// (become Google Benchmark counters on the row, e.g. "pages_per_s",
/// "wait_share") and structured details (go into the row's `details` object,
/// e.g. lock statistics, layout names).
struct PointReport {
  std::vector<std::pair<std::string, double>> metrics;
  nlohmann::json details = nlohmann::json::object();
  std::vector<std::string>
      layouts;  ///< layout names used (their reports go in the context)
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
  /// Every workload object is placed like the structures under test (issue
  /// 38): its fields (the pointers to the lock, the zone, the per-thread
  /// slots, the parameters) are read in every iteration of a timed loop, so
  /// where the heap put the object moved its cache set and its 4 KiB aliasing
  /// with the lock line from one process to the other: an A/A build duet read
  /// a 1-thread ticket lock with lock_stat -5.4 % [-5.8, -5.0] and -5.3 % in
  /// two runs. Allocated by AllocSampledObject (harness/machine/memory.h): its
  /// own pages, at the page offset the live LayoutSampling draws, which both
  /// builds of a duet draw alike. A wrapper that exists on one side only
  /// (the build duet's, a test build's planted slowdown) is a
  /// HeapPlacedWorkload, so both sides draw the same sequence.
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
  /// itself (getrusage minor faults): the harness then opens the point's
  /// counters without the page-fault software events (perf runs a hook on
  /// every fault for them) and their readings give this reason.
  virtual std::string page_fault_counters_left_out() const { return ""; }
  /// True when the threads of a point write at least one cache line they share
  /// (a lock word, a counter, a list head), so the point's speed depends on how
  /// fast lines move between its PUs and the harness probes that before and
  /// after it (a coherence regime label: near, far, ...; see
  /// harness/measure/coherence.h). Workloads whose threads only touch private
  /// memory (page faults on private mappings, zeroing a private buffer, an
  /// atomic on a private line) return false: their rows carry the label "none"
  /// and no probe is run.
  virtual bool shares_lines() const { return true; }
  /// After all windows, on the main thread: add metrics and details.
  /// `window_seconds` is the summed wall time of all windows, `ops` the summed
  /// operations of all threads.
  virtual void Report(PointReport& /*out*/, double /*window_seconds*/,
                      uint64_t /*ops*/) {}
  /// After Report: check the structure's invariants (pages conserved, list
  /// intact, counts add up). Returns "" when correct, else a description; the
  /// harness marks the row as an error.
  virtual std::string Verify() { return ""; }
  /// After Report, before Verify: "" when the point ran as planned, else
  /// what stopped it before or during its windows (a refused setup such as
  /// "needs root", a task that could not fork: "Too many open files"). The
  /// harness reports it as such, not as a broken invariant.
  virtual std::string SetupError() { return ""; }
};

/// A workload that wraps another and exists in one process of a build duet
/// only (BuildDuetWorkload, a test build's planted slowdown): allocated on the
/// heap, so it draws no layout offset and both processes' structures keep the
/// same sampled offsets (Workload::operator new).
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
  /// --fault-sampling: task-clock sampling period of the fault family's
  /// sampled clear_page share, ns; 0: off.
  uint64_t fault_sample_period_ns = 2'000'000;
  /// --evidence: evidence windows per repetition of the kernel_* families
  /// (bench/kernel_tasks.h), outside the timed windows; 0: off.
  int evidence_windows = 2;
  /// --oversubscribe: a helper thread may share a measured PU (flagged in
  /// the row) where no PU of its own is free.
  bool oversubscribe = false;
};

/// One variant of a family: parameters plus a factory. The harness crosses it
/// with thread counts (the run's list, or `threads` when the variant fixes
/// them).
struct Variant {
  Params params;
  Suite suite = Suite::kDefault;
  /// Only in the quick suite: a smaller stand-in for a default variant, with
  /// its own key (e.g. mb:32 instead of mb:256), so quick and default rows
  /// never pair by key.
  bool quick_only = false;
  std::string description;
  std::function<std::unique_ptr<Workload>(const PointEnv&)> make;
  std::vector<int> threads;  ///< empty: the run's --threads list
  /// Of those thread counts (`threads`, or the run's list), run the largest
  /// only: a paired comparison asked at the contended end (bench/duet.cpp).
  bool largest_thread_count_only = false;
  /// The seed question ("000".."004", plots/verdicts.py) whose verdict this
  /// variant's rows give directly (the paired rows of bench/duet.cpp); "" for
  /// rows that serve the figures. The plan prints the time per question.
  std::string question;
  /// Paired windows (bench/duet.cpp): the harness sets the point's windows
  /// from --precision (PlanPairs, harness/measure/duet.h) instead of `windows`,
  /// and the factory reads them from PointEnv::windows.
  bool paired = false;
  bool needs_spare_pu =
      false;  ///< the workload starts one helper thread on a PU of its own
  int windows =
      0;  ///< 0: the run's default; fixed-work variants usually want 1
  /// Its points run this many times the run's repetitions
  /// (--benchmark_repetitions): a comparison whose repetitions fall in one of
  /// two modes needs enough of them for every run to see both.
  int repetition_factor = 1;
  /// Its workload's windows are fixed work (Workload::fixed_work()): their
  /// length does not follow the fitted window. For the budget's plan; the
  /// runner corrects it from the workload once the point has run.
  bool fixed_work = false;
  /// What one repetition costs besides its timed windows and the harness's
  /// own per-point work (harness/run/budget.h HarnessRepetitionCostS), for
  /// fitting the window to --budget only (the run rescales it by what each
  /// family's points measure): `cost_mib` MiB of anonymous memory first touched
  /// (faulted in and zeroed: a pool filled in setup, a warm-up pass, the pages
  /// of fixed-work windows; priced at plan time by
  /// MeasureFaultInSecondsPerMiB), plus `cost_s` seconds of anything else
  /// (building a model, forking tasks, an idle period).
  double cost_mib = 0;
  double cost_s = 0;
  /// The share of cost_mib and cost_s left in a --quick run, for a workload
  /// that shrinks its sizes there (PointEnv::quick) under the same row key.
  double quick_cost_fraction = 1;
  /// Explicit OS PU indices for the threads (size = the one entry of
  /// `threads`), overriding the placement policy: for measurements of given PU
  /// pairs (core-to-core latency).
  std::vector<int> pus;
};

/// A family: a name (first component of every row key), a description, and a
/// generator of its variants for the run.
struct Family {
  std::string name;
  std::string description;
  std::function<std::vector<Variant>()> variants;
  /// Optional instead of `variants`: variants that depend on the machine, given
  /// the usable PUs in placement order (e.g. the PU pairs of a core-to-core
  /// latency matrix).
  std::function<std::vector<Variant>(const std::vector<PuInfo>& order)>
      planned_variants;
};

/// Registers a family (call from a static initializer: see
/// LOCKLINE_REGISTER_FAMILY).
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
