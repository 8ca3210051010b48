// The contract between experiment families (bench/*.cpp) and the harness,
// which owns the threads: per point it pins them, calls SetupThread, then runs
// windows (from a start barrier, RunWindow until the stop flag or the fixed
// work is done), one Google Benchmark iteration each. An operation is
// `work_ns` of private work plus the critical section (the family's update,
// optionally `cs_ns` more); docs/measurement.md has the model.
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

/// Which suites a variant belongs to (kDefault: default and full).
enum class Suite { kQuick = 0, kDefault = 1, kFull = 2 };

/// Ordered key:value parameters of a point (without threads).
using Params = std::vector<std::pair<std::string, std::string>>;

/// The value of parameter `k` in `p`, or `absent` when the key leaves it out
/// (a duet's DuetSpec::absent: stats "on").
std::string ParamOf(const Params& p, const std::string& k,
                    const std::string& absent = "");

/// What a thread knows about itself inside a point.
struct ThreadCtx {
  int index = 0;    ///< 0 .. threads-1
  int threads = 1;  ///< threads of the point
  int pu = -1;      ///< OS index of the PU it is bound to (-1 when --pin=none)
  int numa = -1;    ///< logical NUMA node of that PU (-1 unknown)
  uint64_t window_ns = 0;       ///< planned window length
  bool oversubscribed = false;  ///< spinning waiters yield (spin_wait.h)
};

/// A workload's results after its windows: flat metrics and row `details`.
struct PointReport {
  std::vector<std::pair<std::string, double>> metrics;
  nlohmann::json details = nlohmann::json::object();
  std::vector<std::string> layouts;  ///< layout names (reported in the context)
  void Metric(const std::string& name, double value) {
    metrics.emplace_back(name, value);
  }
};

/// One point's workload, made per repetition on the main thread. Shared
/// structures come from the constructor or Prepare(), thread-private ones
/// from SetupThread (first touched by the pinned thread).
class Workload {
 public:
  virtual ~Workload() = default;
  /// Placed like the structures under test (AllocSampledObject): its fields
  /// are read in every timed iteration, and a heap placement's aliasing with
  /// the lock line differs between processes (docs/validation.md).
  static void* operator new(std::size_t bytes);
  static void* operator new(std::size_t bytes, std::align_val_t align);
  static void operator delete(void* p) noexcept;
  static void operator delete(void* p, std::align_val_t align) noexcept;
  /// Once on the main thread after the team exists, before any SetupThread.
  virtual void Prepare(int /*threads*/) {}
  /// On each pinned thread, before the first window.
  virtual void SetupThread(const ThreadCtx& /*ctx*/) {}
  /// One window on one thread: operations until `stop` reads true (a relaxed
  /// load suffices), returning how many. Fixed work ignores stop.
  virtual uint64_t RunWindow(const ThreadCtx& ctx,
                             const std::atomic<bool>& stop) = 0;
  /// On each thread after the last window.
  virtual void TeardownThread(const ThreadCtx& /*ctx*/) {}
  /// True when a window is a fixed amount of work rather than a fixed duration.
  virtual bool fixed_work() const { return false; }
  /// Non-empty when it counts its page faults itself: the page-fault software
  /// events are left out with this reason.
  virtual std::string page_fault_counters_left_out() const { return ""; }
  /// True when the threads write a shared cache line: the harness probes the
  /// PU pair's coherence around the point (coherence.h); false: label "none".
  virtual bool shares_lines() const { return true; }
  /// After all windows, on the main thread (`window_seconds`, `ops`: sums).
  virtual void Report(PointReport& /*out*/, double /*window_seconds*/,
                      uint64_t /*ops*/) {}
  /// After Report: "" when the invariants hold, else what broke (row error).
  virtual std::string Verify() { return ""; }
  /// Before Verify: "" when it ran as planned, else why not ("needs root").
  virtual std::string SetupError() { return ""; }
};

/// A wrapper in one build of a duet: on the heap, so it draws no layout offset.
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
  /// Timed windows per repetition (a paired plan's 2 x (warm-up + pairs)).
  int windows = 0;
  std::string mem_policy;  ///< --mem value
  bool quick = false;      ///< --quick run: keep sizes small
  uint64_t fault_sample_period_ns = 2'000'000;  ///< --fault-sampling; 0: off
  int evidence_windows = 2;    ///< --evidence: kernel_* untimed windows; 0: off
  bool oversubscribe = false;  ///< a helper may share a measured PU
};

/// One variant of a family: parameters plus a factory, crossed with threads.
struct Variant {
  Params params;
  Suite suite = Suite::kDefault;
  /// Only in the quick suite: a smaller stand-in with its own key.
  bool quick_only = false;
  std::string description;
  std::function<std::unique_ptr<Workload>(const PointEnv&)> make;
  std::vector<int> threads;                ///< empty: the run's --threads list
  bool largest_thread_count_only = false;  ///< its largest thread count only
  /// The seed question ("000".."004") its rows answer; "" for figures only.
  std::string question;
  /// Paired windows, counted from --precision (PointEnv::windows).
  bool paired = false;
  bool needs_spare_pu = false;  ///< it starts a helper thread on its own PU
  /// It starts helpers that run where a CPU is idle (SCHED_IDLE zeroers),
  /// on a PU of their own when one is free: the run probes that pair.
  bool helper_on_idle_pu = false;
  /// With needs_spare_pu: one helper per NUMA node, each on its own PU.
  bool helper_per_node = false;
  int windows = 0;  ///< 0: the run's default; fixed work usually wants 1
  int repetition_factor = 1;  ///< x the run's repetitions
  /// Its windows are fixed work (for the budget's plan, until the point ran).
  bool fixed_work = false;
  /// A repetition's cost besides its windows, for the budget: `cost_mib` MiB
  /// first touched plus `cost_s` seconds of anything else.
  double cost_mib = 0;
  double cost_s = 0;
  /// The share of cost_mib and cost_s left in a --quick run.
  double quick_cost_fraction = 1;
  std::vector<int> pus;  ///< the threads' OS PU indices, overriding --pin
  /// Why this machine cannot run it ("" when it can: clzero on a CPU without
  /// it): its points are listed as skipped with this reason, never run.
  std::string unavailable;
};

/// A family: a name (first component of every row key) and its variants.
struct Family {
  std::string name;
  std::string description;
  std::function<std::vector<Variant>()> variants;
  /// Instead of `variants`: variants of the PUs in placement order.
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

/// Spins about `ns` ns of dependent integer work, calibrated once per process
/// (no clock reads, so counters are not perturbed).
void ThinkNs(uint64_t ns);

}  // namespace lockline

#define LOCKLINE_CONCAT_INNER(a, b) a##b
#define LOCKLINE_CONCAT(a, b) LOCKLINE_CONCAT_INNER(a, b)
/// In bench/NAME.cpp: LOCKLINE_REGISTER_FAMILY(Family{...});
#define LOCKLINE_REGISTER_FAMILY(...)                                        \
  static const bool LOCKLINE_CONCAT(lockline_family_registered_, __LINE__) = \
      ::lockline::RegisterFamily(__VA_ARGS__)
