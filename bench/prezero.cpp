// prezero: the experiment of the 2004 background page pre-zeroing proposal
// (BACKGROUND.md section 5; the model, pools, zone->lock and zeroers, is
// bench/prezero/model.h). Two protocols:
//   the burst protocol (default; protocol:idle_burst|busy, zeroer:none|
//     idle_cpus|engine): see the section comment at BurstWorkload; a
//     comparison's two sides run as paired bursts of one thread team
//     (BurstPairWorkload: zeroer:none_vs_idle_cpus ...);
//   the steady-state modes (mode:zero_on_alloc|prezeroed_idle|prezeroed_busy;
//     quick and full): allocations and frees in a loop, with `idle_us` of sleep
//     between allocations or none, and a zeroer on its own PU (prezeroed_busy
//     is that steady state with an allocator that never sleeps, not a busy
//     machine).
// Every allocation is a modelled page fault (FaultRest), so the rows' rate,
// faults_per_s, is question 004's unit. Not measured: the kernel's buddy
// allocator and fault path (see the `fault` family).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench/prezero/model.h"
#include "harness/family.h"
#include "harness/machine/memory.h"
#include "harness/machine/padded_slots.h"
#include "harness/measure/barrier.h"
#include "harness/measure/duet.h"
#include "harness/measure/page_work.h"
#include "harness/measure/shared_calibration.h"
#include "harness/measure/zeroing.h"

namespace lockline::prezero_bench {

/// Every allocating thread of a point: what they write into each page they are
/// handed. The steady-state modes write every cache line (DirtyPage); the 2004
/// argument assumed a fault touches few lines of its new page.
inline constexpr const char* kTouchesAllLines =
    "all 64 lines of each page: the case the 2004 author excluded (his "
    "argument assumed a fault touches few lines of the new page)";

enum class Mode { kZeroOnAlloc, kPrezeroedIdle, kPrezeroedBusy };

inline const char* ModeName(Mode m) {
  static const char* const kNames[] = {"zero_on_alloc", "prezeroed_idle",
                                       "prezeroed_busy"};
  return kNames[static_cast<int>(m)];
}

/// Uses a page like a workload would: one non-zero store per cache line plus
/// the last word (so both words the cheap check reads are dirtied).
inline void DirtyPage(char* p) {
  for (std::size_t off = 0; off < kPage; off += 64) {
    *reinterpret_cast<uint64_t*>(p + off) = off + 1;
  }
  *reinterpret_cast<uint64_t*>(p + kPage - 8) = 1;
}

/// The rest of an anonymous page fault besides its zeroing (question 004
/// answers in faults/s, the seed's unit): every allocation of
/// both protocols is followed by `rest_ns` of register spin (ThinkNs) outside
/// the pool lock, so an allocation is a modelled fault and allocations/s are
/// faults/s. rest_ns = the machine's anonymous fault path per 4 KiB page
/// (harness/measure/page_work.h MeasureFaultNsPerPage: mmap, first write,
/// munmap; it includes clear_page) minus one page's zeroing
/// (MeasureZeroNsPerPage: memset of an L2-resident page), clamped at 0;
/// measured once per process under the same calibration names as work_ns:cal
/// (SharedCalibration), so a build duet's two processes use one value. What the
/// model does per allocation (take, zero or not, check, touch, free) stands for
/// the fault's page allocation and clear_page; the spin for everything else
/// (page tables, LRU add, the unmap's release), which pre-zeroing does not
/// change.
struct FaultRest {
  double fault_ns_per_page = 0;
  double zero_ns_per_page = 0;
  uint64_t rest_ns = 0;
};

/// The process's FaultRest (measured at the first call, ~0.1 s).
inline const FaultRest& FaultRestCalibration() {
  static const FaultRest rest = [] {
    const double fault =
        SharedCalibration("fault_ns_per_page", MeasureFaultNsPerPage);
    const double zero =
        SharedCalibration("zero_ns_per_page", MeasureZeroNsPerPage);
    return FaultRest{fault, zero,
                     static_cast<uint64_t>(std::max(fault - zero, 0.0))};
  }();
  return rest;
}

/// details.fault_rest of a prezero row.
inline nlohmann::json FaultRestJson(const FaultRest& r) {
  return {{"rest_ns", r.rest_ns},
          {"fault_ns_per_page", r.fault_ns_per_page},
          {"zero_ns_per_page", r.zero_ns_per_page},
          {"what",
           "after every allocation, rest_ns of register spin outside the pool "
           "lock: the machine's anonymous fault path per page minus one "
           "page's zeroing, so allocations/s are modelled faults/s "
           "(faults_per_s)"}};
}

/// One allocating thread's counts, its slot of a PaddedSlots array (--padding
/// apart; written by that thread only; summed after the windows). Both
/// protocols count the same way.
struct alignas(kCacheLine) AllocCounts {
  uint64_t allocs = 0;       ///< pages handed out
  uint64_t prezeroed = 0;    ///< of them, taken already zeroed
  uint64_t self_zeroed = 0;  ///< of them, zeroed by the allocating thread
  uint64_t nonzero = 0;      ///< of them, found not zero (must stay 0)
  uint64_t alloc_ns = 0;     ///< steady-state modes: take + zero time, ns

  void Add(const AllocCounts& o) {
    allocs += o.allocs;
    prezeroed += o.prezeroed;
    self_zeroed += o.self_zeroed;
    nonzero += o.nonzero;
    alloc_ns += o.alloc_ns;
  }
};

/// a / b, or 0 when b is not positive.
inline double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

/// The sum of every thread's counts.
inline AllocCounts SumCounts(const PaddedSlots<AllocCounts>& counts) {
  AllocCounts t;
  for (std::size_t i = 0; i < counts.size(); ++i) t.Add(counts[i]);
  return t;
}

/// The details every prezero row has: the pool lock, the counts `t`, the
/// pages the zeroers cleaned, their places and the rest of the fault.
inline void ReportPoolDetails(nlohmann::json& d, const AllocCounts& t,
                              uint64_t zeroer_pages,
                              const std::vector<HelperPlace>& places,
                              const FaultRest& rest) {
  d["pool_lock"] = PoolLock::kName;
  d["pool_lock_stands_for"] = PoolLock::kStandsFor;
  d["allocs"] = t.allocs;
  d["prezeroed"] = t.prezeroed;
  d["self_zeroed"] = t.self_zeroed;
  d["nonzero_pages"] = t.nonzero;
  d["zeroer_pages"] = zeroer_pages;
  AddHelperColumnsJson(d, places);
  d["fault_rest"] = FaultRestJson(rest);
}

/// The point's workload: see the file comment.
class PrezeroWorkload : public Workload {
 public:
  /// `full_check`: verify every byte of every handed-out page (tests) instead
  /// of the first and last words. `cpu`: the features the method is checked
  /// against (tests force "no clzero").
  PrezeroWorkload(Mode mode, ZeroMethod method, uint64_t idle_us,
                  const PointEnv& env, bool full_check = false,
                  const ZeroingCpu& cpu = DetectZeroingCpu())
      : mode_(mode),
        method_(method),
        idle_us_(idle_us),
        env_(env),
        full_check_(full_check),
        unsupported_(ZeroMethodUnsupportedReason(method, 0, cpu)),
        rest_(FaultRestCalibration()) {}
  ~PrezeroWorkload() override { StopZeroer(); }

  void Prepare(int threads) override {
    counts_ = PaddedSlots<AllocCounts>(static_cast<std::size_t>(threads));
    if (!unsupported_.empty()) return;
    pool_ = std::make_unique<PagePool>(kPoolPages);
    if (mode_ != Mode::kZeroOnAlloc) StartZeroer();
  }

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    if (!unsupported_.empty()) return 0;
    AllocCounts& c = counts_[ctx.index];  // once, outside the loop
    // A zeroer sharing a measured PU (--oversubscribe) runs at SCHED_IDLE: see
    // PoolLock.
    const bool was_shared = PoolLock::SetSharesPuWithZeroer(zeroer_shares_pu_);
    active_.fetch_add(1, std::memory_order_acq_rel);
    uint64_t ops = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const uint64_t t0 = NowNs();
      bool prezeroed = false;
      char* page = pool_->Take(&prezeroed);
      if (page ==
          nullptr) {  // every page held by other threads / the zeroer: retry
        CpuRelax();
        continue;
      }
      if (!prezeroed) ZeroWith(method_, page, kPage);
      c.alloc_ns += NowNs() - t0;
      const bool zero =
          full_check_
              ? AllZero(page, kPage)
              : (reinterpret_cast<const uint64_t*>(page)[0] |
                 reinterpret_cast<const uint64_t*>(page)[kPage / 8 - 1]) == 0;
      c.nonzero += zero ? 0 : 1;
      (prezeroed ? c.prezeroed : c.self_zeroed) += 1;
      DirtyPage(page);
      benchmark::ClobberMemory();
      pool_->Free(page);
      ThinkNs(rest_.rest_ns);  // the rest of the fault, outside the lock
      ++ops;
      if (idle_us_ > 0 && mode_ != Mode::kPrezeroedBusy) {
        // A real idle gap (the thread sleeps), so a zeroer sharing this PU
        // could use it.
        std::this_thread::sleep_for(std::chrono::microseconds(idle_us_));
      }
    }
    active_.fetch_sub(1, std::memory_order_acq_rel);
    PoolLock::SetSharesPuWithZeroer(was_shared);
    c.allocs += ops;
    return ops;
  }

  void Report(PointReport& out, double window_seconds, uint64_t ops) override {
    StopZeroer();  // quiescent pool for Report and Verify
    const AllocCounts t = Totals();
    const auto allocs = static_cast<double>(t.allocs);
    // One allocation = one modelled fault (FaultRest): faults/s.
    out.Metric("faults_per_s", Ratio(static_cast<double>(ops), window_seconds));
    out.Metric("prezeroed_share",
               Ratio(static_cast<double>(t.prezeroed), allocs));
    out.Metric(
        "zeroer_pages_per_s",
        Ratio(static_cast<double>(zeroer_pages_.load()), window_seconds));
    out.Metric("alloc_ns", Ratio(static_cast<double>(t.alloc_ns), allocs));
    auto& d = out.details;
    d["mode"] = ModeName(mode_);
    d["method"] = ZeroMethodName(method_);
    d["method_native"] = FillMethodIsNative(method_);
    d["idle_us"] = idle_us_;
    d["pool_pages"] = kPoolPages;
    d["touches"] = kTouchesAllLines;
    ReportPoolDetails(d, t, zeroer_pages_.load(), {zeroer_place_}, rest_);
    d["zeroer_pu"] = zeroer_pu_;
    if (!zeroer_place_.reason.empty()) d["helper_note"] = zeroer_place_.reason;
    d["zeroer_shares_pu"] = zeroer_shares_pu_;
    d["zeroer_policy"] =
        zeroer_shares_pu_ ? "SCHED_IDLE on a shared PU: idle CPU time and "
                            "CFS's weight-3 share"
        : zeroer_place_.smt_sibling_of_measured
            ? "normal priority on an idle SMT sibling of a measured thread "
              "(no free core on any node; helper_note says so)"
            : "normal priority on a spare PU (the idle CPU)";
    d["zeroer_note"] =
        "batches of 16 pages per lock round trip; frozen between windows";
    d["alloc_ns_note"] =
        "take + (self-)zero per allocation, two clock reads included";
    if (!unsupported_.empty()) d["skipped"] = unsupported_;
  }

  std::string Verify() override {
    if (!unsupported_.empty()) return unsupported_;
    StopZeroer();
    const AllocCounts t = Totals();
    if (t.prezeroed + t.self_zeroed != t.allocs) {
      return "prezeroed " + std::to_string(t.prezeroed) + " + self-zeroed " +
             std::to_string(t.self_zeroed) + " != allocations " +
             std::to_string(t.allocs);
    }
    if (t.nonzero != 0) {
      return std::to_string(t.nonzero) + " pages handed out not all zero";
    }
    const std::size_t dirty = pool_->dirty_count(),
                      zeroed = pool_->zeroed_count();
    if (dirty + zeroed != pool_->pages()) {
      return "pool lost pages: dirty " + std::to_string(dirty) + " + zeroed " +
             std::to_string(zeroed) + " != " + std::to_string(pool_->pages());
    }
    // Every page the zeroer cleaned was either handed out pre-zeroed or is
    // still on the stack.
    if (zeroer_pages_.load() != t.prezeroed + zeroed) {
      return "zeroer cleaned " + std::to_string(zeroer_pages_.load()) +
             " pages but " + std::to_string(t.prezeroed) +
             " were handed out pre-zeroed and " + std::to_string(zeroed) +
             " remain";
    }
    return "";
  }

 private:
  AllocCounts Totals() const { return SumCounts(counts_); }

  // The zeroer's PU by the helper rule (PlaceHelpersNear); with no free PU
  // at all (only under --oversubscribe: needs_spare_pu), the plan's last PU,
  // shared at SCHED_IDLE. -1 (unbound) without a host topology (tests).
  void PickZeroerPu() {
    if (env_.topology == nullptr || !env_.topology->is_host()) return;
    if (env_.plan == nullptr) return;
    HelperRule rule;
    rule.topo = env_.topology;
    const auto places =
        PlaceHelpersNear(env_.topology->usable_pus(), *env_.plan, 1, rule);
    if (!places.empty()) {
      zeroer_place_ = places.front();
      zeroer_pu_ = zeroer_place_.pu;
      return;
    }
    if (!env_.plan->pus.empty()) {
      const PuInfo& pu = env_.plan->pus.back();
      zeroer_pu_ = pu.os_index;
      zeroer_place_ = {.pu = pu.os_index,
                       .core = pu.core,
                       .numa = pu.numa,
                       .reason =
                           "shares a measured thread's PU (no free PU: "
                           "--oversubscribe)",
                       .l3 = pu.l3,
                       .cpukind = pu.cpukind,
                       .shares_measured_pu = true};
      zeroer_shares_pu_ = true;
    }
  }

  void StartZeroer() {
    PickZeroerPu();
    zeroer_ = StartThread("zeroer", [this] {
      // Sharing an allocator's PU: SCHED_IDLE, as the 2004 proposal's
      // idle-CPU zeroer (CFS still gives it weight 3 of 1027). On a spare PU it
      // keeps normal priority: that PU is the idle CPU, and SCHED_IDLE there
      // would only let unrelated load preempt it while it holds the pool lock
      // (priority inversion on a shared machine).
      if (!EnterZeroerPlace(env_.topology, zeroer_pu_, zeroer_shares_pu_))
        zeroer_pu_ = -1;  // reported as unbound; the model still holds
      RunPoolZeroer(*pool_, method_, active_, quit_, zeroer_pages_);
    });
  }

  void StopZeroer() {
    if (!zeroer_.joinable()) return;
    quit_.store(true, std::memory_order_release);
    zeroer_.join();
  }

  Mode mode_;
  ZeroMethod method_;
  uint64_t idle_us_;
  PointEnv env_;
  bool full_check_;
  std::string unsupported_;
  FaultRest rest_;
  PaddedSlots<AllocCounts> counts_;
  std::unique_ptr<PagePool> pool_;
  std::thread zeroer_;
  int zeroer_pu_ = -1;
  HelperPlace zeroer_place_;
  bool zeroer_shares_pu_ = false;
  alignas(kDestructiveLine) std::atomic<int> active_{0};
  alignas(kDestructiveLine) std::atomic<bool> quit_{false};
  alignas(kDestructiveLine) std::atomic<uint64_t> zeroer_pages_{0};
};

// ---- the burst protocol -----------------------------------------------------
//
// The 2004 argument as it was made: Christoph Lameter's favourable case is a
// pool of pre-zeroed pages filled while the machine sits idle, then a burst of
// faults; Robin Holt's objection is that a busy machine never has an idle
// period, so the pool is empty. One point = one repetition = one protocol run:
//   Prepare: free memory of max(B, P) dirty pages in order-4 blocks
//     (BurstPool); protocol:idle_burst: the zeroer(s) fill the pre-zeroed pool
//     (at most P pages) during an idle period of up to kIdleMs while the
//     measured threads sleep (ended early once the pool is full);
//     protocol:busy: no idle period, the zeroer(s) start with the burst.
//   The window: a burst of B allocations at full speed by N threads: a page
//     from the pre-zeroed pool when there is one, else a dirty page zeroed by
//     the allocating thread (rep stosb, the clear_page_erms analogue); every
//     page is checked zero, touched and held (a burst of faults keeps its
//     memory).
// allocs/s therefore falls towards the zero-on-alloc rate (zeroer:none) once B
// exceeds what the pool held. zeroer:idle_cpus: one SCHED_IDLE zeroer per NUMA
// node (NodeZeroerPlaces). protocol:busy (Holt's busy machine) runs an
// allocating thread on every usable PU of the run (all but one under
// zeroer:engine). zeroer:engine: one dedicated helper (the Altix
// block-transfer engine analogue) at normal priority on a spare PU, zeroing
// only whole order-4 blocks with non-temporal stores (they bypass the caches
// as a DMA engine's writes do). Not modelled: the engine's own bandwidth and
// setup cost, the buddy allocator's merging (one burst per point).

/// Idle period T of protocol:idle_burst, ms: an upper bound; it ends early
/// once the pool is full (an unloaded zeroer fills 16 MiB in a few ms).
inline constexpr uint64_t kIdleMs = 100;

enum class Protocol { kIdleBurst, kBusy };
enum class Zeroer { kNone, kIdleCpus, kEngine };

inline const char* ProtocolName(Protocol p) {
  return p == Protocol::kIdleBurst ? "idle_burst" : "busy";
}
inline const char* ZeroerName(Zeroer z) {
  static const char* const kNames[] = {"none", "idle_cpus", "engine"};
  return kNames[static_cast<int>(z)];
}

/// One burst point: see the section comment.
class BurstWorkload : public Workload {
 public:
  /// `idle_ms`: the idle period's upper bound (tests shorten it).
  BurstWorkload(Protocol protocol, Zeroer zeroer, std::size_t burst_pages,
                std::size_t pool_pages, const PointEnv& env,
                uint64_t idle_ms = kIdleMs)
      : protocol_(protocol),
        zeroer_(zeroer),
        burst_(burst_pages),
        pool_pages_(pool_pages),
        env_(env),
        idle_ms_(idle_ms),
        rest_(FaultRestCalibration()) {}
  ~BurstWorkload() override { StopZeroers(); }

  bool fixed_work() const override { return true; }

  void Prepare(int threads) override {
    threads_ = threads;
    counts_ = PaddedSlots<AllocCounts>(static_cast<std::size_t>(threads));
    held_ = PaddedSlots<std::vector<char*>>(static_cast<std::size_t>(threads));
    pool_ =
        std::make_unique<BurstPool>(std::max(burst_, pool_pages_), pool_pages_);
    if (zeroer_ == Zeroer::kNone) return;
    PlaceZeroers();
    if (zeroer_ == Zeroer::kEngine && places_.empty()) {
      setup_error_ =
          "skipped: zeroer:engine needs a spare PU on its own core on the "
          "measured threads' NUMA node (harness/machine/helpers.h); none here";
      return;
    }
    StartZeroers();
    if (protocol_ == Protocol::kIdleBurst) IdlePeriod();
  }

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& /*stop*/) override {
    if (!setup_error_.empty()) return 0;
    if (ctx.index == 0) {
      zeroed_at_start_ = pool_->zeroed_count();
      run_.store(true, std::memory_order_release);  // busy: zeroers start now
    }
    AllocCounts& c = counts_[ctx.index];  // once, outside the loop
    const std::size_t share =
        burst_ / threads_ +
        (static_cast<std::size_t>(ctx.index) < burst_ % threads_ ? 1 : 0);
    std::vector<char*>& held = held_[ctx.index];
    held.reserve(share);
    // A SCHED_IDLE zeroer on this thread's PU (or, unbound, on any PU: tests)
    // must get the PU to release the pool lock: see PoolLock.
    const bool was_shared = PoolLock::SetSharesPuWithZeroer(
        on_measured_ && (ctx.pu < 0 || shared_pus_.count(ctx.pu) > 0));
    uint32_t misses = 0;
    while (held.size() < share) {
      bool prezeroed = false;
      char* page = pool_->Take(&prezeroed);
      if (page == nullptr) {  // the rest is being zeroed: wait for it
        // (sleeping once the wait is long: the zeroer may need this PU)
        if (++misses < PoolLock::kSpinsBeforeSleep) {
          CpuRelax();
        } else {
          std::this_thread::sleep_for(std::chrono::microseconds(1));
        }
        continue;
      }
      if (!prezeroed) ZeroWith(ZeroMethod::kRepStosb, page, kPage);
      const auto* w = reinterpret_cast<const uint64_t*>(page);
      c.nonzero += (w[0] | w[kPage / 8 - 1]) == 0 ? 0 : 1;
      (prezeroed ? c.prezeroed : c.self_zeroed) += 1;
      page[kPage / 2] = 1;  // the faulting access
      benchmark::ClobberMemory();
      held.push_back(page);
      ThinkNs(rest_.rest_ns);  // the rest of the fault, outside the lock
    }
    // Busy machine: a thread done with its share leaves its PU idle, and a
    // SCHED_IDLE zeroer there would pre-zero the others' tail of the burst in
    // time no busy machine has; the zeroers stop at the first thread's end.
    if (protocol_ == Protocol::kBusy && zeroer_ == Zeroer::kIdleCpus)
      run_.store(false, std::memory_order_release);
    PoolLock::SetSharesPuWithZeroer(was_shared);
    c.allocs += held.size();
    return held.size();
  }

  void Report(PointReport& out, double window_seconds, uint64_t ops) override {
    StopZeroers();
    const AllocCounts t = Totals();
    const auto pool = static_cast<double>(pool_pages_);
    // One allocation = one modelled fault (FaultRest): faults/s.
    out.Metric("faults_per_s", Ratio(static_cast<double>(ops), window_seconds));
    out.Metric("prezeroed_share", Ratio(static_cast<double>(t.prezeroed),
                                        static_cast<double>(t.allocs)));
    out.Metric("burst_over_pool", Ratio(static_cast<double>(burst_), pool));
    out.Metric("pool_fill_at_burst",
               Ratio(static_cast<double>(zeroed_at_start_), pool));
    const uint64_t zp = zeroer_pages_.load();
    out.Metric("zeroer_pages_idle", static_cast<double>(zeroer_pages_idle_));
    out.Metric("zeroer_pages_burst",
               static_cast<double>(zp - zeroer_pages_idle_));
    auto& d = out.details;
    d["protocol"] = ProtocolName(protocol_);
    d["zeroer"] = ZeroerName(zeroer_);
    d["burst_pages"] = burst_;
    d["pool_pages"] = pool_pages_;
    d["free_pages"] = pool_ ? pool_->pages() : 0;
    d["block_pages"] = kBlockPages;
    d["idle_ms"] = protocol_ == Protocol::kIdleBurst ? idle_ms_ : 0;
    d["idle_used_ms"] = idle_used_ms_;
    d["zeroed_at_burst_start"] = zeroed_at_start_;
    ReportPoolDetails(d, t, zp, places_, rest_);
    d["self_zero_method"] = ZeroMethodName(ZeroMethod::kRepStosb);
    d["zeroer_method"] = zeroer_ == Zeroer::kEngine
                             ? ZeroMethodName(ZeroMethod::kNonTemporal)
                             : ZeroMethodName(ZeroMethod::kRepStosb);
    std::string notes;  // helper_note: a string, as on every helper row
    for (std::size_t i = 0; i < places_.size(); ++i)
      if (!places_[i].reason.empty())
        notes += (notes.empty() ? "" : "; ") + std::string("zeroer ") +
                 std::to_string(i) + ": " + places_[i].reason;
    if (!notes.empty()) d["helper_note"] = notes;
    d["zeroer_on_measured_pus"] = on_measured_;
    d["zeroers"] = zeroer_ == Zeroer::kNone ? 0 : places_.size();
    // Busy PUs: every allocating thread runs its share of the burst without
    // sleeping (under protocol:busy from the start; under idle_burst after the
    // idle period, in which they sleep).
    const int usable =
        env_.topology != nullptr
            ? static_cast<int>(env_.topology->usable_pus().size())
            : -1;
    d["busy_pus"] = threads_;
    d["usable_pus"] = usable;
    if (protocol_ == Protocol::kBusy) {
      d["busy_note"] =
          zeroer_ == Zeroer::kEngine
              ? "every usable PU but the engine's runs an allocating thread "
                "(the engine thread stands for the block-transfer engine, "
                "hardware beside the CPUs)"
          : zeroer_ == Zeroer::kNone
              ? "every usable PU runs an allocating thread that zeroes each "
                "page on allocation (Holt's zeroing on demand)"
              : "every usable PU runs an allocating thread, yet a SCHED_IDLE "
                "zeroer is not confined to idle time: CFS gives it weight 3 "
                "against a nice-0 thread's 1024 (~0.3 % of its PU, in whole "
                "scheduler slices) and all of the PU while its allocator "
                "sleeps (the pool lock's or empty pool's back-off: 1 us "
                "asked, ~50 us of timer slack given); zeroing a page costs a "
                "small part of a fault, so that share can pre-zero much of a "
                "burst. The zeroers stop when the first thread ends its share; "
                "prezeroed_share is what they pre-zeroed";
    }
    d["zeroer_policy"] =
        zeroer_ == Zeroer::kNone ? "no zeroer: every page zeroed on allocation"
        : zeroer_ == Zeroer::kEngine
            ? "dedicated helper at normal priority on a spare PU (own core, "
              "same NUMA node), whole order-4 blocks only, non-temporal stores"
            : "one SCHED_IDLE zeroer per NUMA node of the measured threads "
              "(scrubd's shape): on a spare PU of the node by the helper rule, "
              "else sharing the node's least-loaded measured PU (runs when "
              "its thread sleeps or stalls: busy_note); 16-page batches, rep "
              "stosb";
    d["note"] =
        "faults_per_s is the burst alone (the idle period is in Prepare, not "
        "the window); it falls towards zeroer:none's rate once burst_pages "
        "exceeds what the pool held (pool_fill_at_burst x pool_pages)";
    if (!setup_error_.empty()) d["skipped"] = setup_error_;
  }

  // The burst conserves pages: pages held + free == all pages; every
  // allocation was pre-zeroed or self-zeroed and handed out zero; every page
  // a zeroer cleaned was handed out or is still in the pool. Then the held
  // pages go back and all pages must be free.
  std::string Verify() override {
    if (!setup_error_.empty()) return setup_error_;
    StopZeroers();
    return CheckBurst();
  }

  // ---- several bursts on one workload (BurstPairWorkload) ----

  /// Pages of the last burst that were handed out pre-zeroed.
  uint64_t prezeroed() const { return Totals().prezeroed; }

  /// Stops the zeroers' work without ending them: no zeroer holds pages
  /// being zeroed when it returns.
  void PauseZeroers() {
    run_.store(false, std::memory_order_seq_cst);
    while (busy_.load(std::memory_order_seq_cst) != 0)
      std::this_thread::sleep_for(std::chrono::microseconds(10));
  }
  /// Before another burst (zeroers paused, the last burst checked by
  /// CheckBurst): the pool dirty and full again, the counts at zero, then
  /// under protocol:idle_burst the idle period (the calling thread waits; the
  /// measured threads must sleep meanwhile). "" or the setup error.
  std::string PrepareBurst() {
    if (!setup_error_.empty()) return setup_error_;
    PauseZeroers();
    pool_->Reset();
    for (std::size_t i = 0; i < held_.size(); ++i) held_[i].clear();
    for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] = AllocCounts{};
    zeroer_pages_.store(0);
    zeroer_pages_idle_ = 0;
    zeroed_at_start_ = 0;
    if (protocol_ == Protocol::kIdleBurst && zeroer_ != Zeroer::kNone)
      IdlePeriod();
    return "";
  }
  /// The checks of Verify on the last burst (zeroers stopped or paused),
  /// then its pages go back to the pool: "" or what is wrong.
  std::string CheckBurst() {
    const AllocCounts t = Totals();
    std::size_t held = 0;
    for (std::size_t i = 0; i < held_.size(); ++i) {
      const std::vector<char*>& h = held_[i];
      held += h.size();
      for (const char* p : h)
        if (!pool_->Owns(p)) return "an allocation is not a pool page";
    }
    if (t.allocs != burst_ || held != burst_)
      return "burst allocated " + std::to_string(t.allocs) + " pages, holds " +
             std::to_string(held) + ", expected " + std::to_string(burst_);
    if (t.prezeroed + t.self_zeroed != t.allocs)
      return "prezeroed + self-zeroed != allocations";
    if (t.nonzero != 0)
      return std::to_string(t.nonzero) + " pages handed out not all zero";
    if (held + pool_->free_pages() != pool_->pages())
      return "pool lost pages: held " + std::to_string(held) + " + free " +
             std::to_string(pool_->free_pages()) +
             " != " + std::to_string(pool_->pages());
    if (zeroer_pages_.load() != t.prezeroed + pool_->zeroed_count())
      return "zeroers cleaned " + std::to_string(zeroer_pages_.load()) +
             " pages, " + std::to_string(t.prezeroed) + " handed out, " +
             std::to_string(pool_->zeroed_count()) + " left";
    if (pool_->zeroed_count() > pool_->cap()) return "pool above its cap";
    for (std::size_t i = 0; i < held_.size(); ++i) {
      std::vector<char*>& h = held_[i];
      for (char* p : h) pool_->Free(p);
      h.clear();
    }
    if (pool_->free_pages() != pool_->pages())
      return "after freeing the burst, " + std::to_string(pool_->free_pages()) +
             " of " + std::to_string(pool_->pages()) + " pages are free";
    return "";
  }

 private:
  AllocCounts Totals() const { return SumCounts(counts_); }

  // The idle period: the measured threads sleep (the team waits); the
  // zeroers fill the pool. Ends at idle_ms_ or when the pool is full.
  void IdlePeriod() {
    run_.store(true, std::memory_order_seq_cst);
    const uint64_t t0 = NowNs();
    while (NowNs() - t0 < idle_ms_ * 1'000'000 &&
           pool_->zeroed_count() < pool_->cap()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    idle_used_ms_ = static_cast<double>(NowNs() - t0) / 1e6;
    zeroer_pages_idle_ = zeroer_pages_.load();
  }

  // Engine: one helper place by the helper rule. idle_cpus: one zeroer per
  // NUMA node of the measured threads (NodeZeroerPlaces). Without a topology
  // and plan (tests): one unbound thread. Threads are bound only on the host's
  // topology; on a synthetic one (tests) the places are computed and recorded.
  void PlaceZeroers() {
    const bool planned = env_.topology != nullptr && env_.plan != nullptr;
    if (!planned) {
      places_.push_back({.reason = "unbound (no host topology)"});
      return;
    }
    if (zeroer_ == Zeroer::kEngine) {
      HelperRule rule;
      rule.topo = env_.topology;
      places_ =
          PlaceHelpersNear(env_.topology->usable_pus(), *env_.plan, 1, rule);
      return;
    }
    places_ = NodeZeroerPlaces(env_.topology->usable_pus(), *env_.plan);
    for (const HelperPlace& h : places_) {
      bool on_measured = false;
      for (const PuInfo& pu : env_.plan->pus)
        on_measured = on_measured || pu.os_index == h.pu;
      shared_pus_.insert(h.pu);
      on_measured_ = on_measured_ || on_measured;
    }
  }

  void StartZeroers() {
    const bool engine = zeroer_ == Zeroer::kEngine;
    const bool bind = env_.topology != nullptr && env_.topology->is_host();
    for (const HelperPlace& place : places_) {
      zeroers_.push_back(StartThread("zeroer", [this, place, engine, bind] {
        // Unbound when binding fails: the row's helper_pu still names the
        // intended PU.
        EnterZeroerPlace(bind ? env_.topology : nullptr, place.pu, !engine);
        RunBurstZeroer(*pool_, engine, run_, quit_, busy_, zeroer_pages_);
      }));
    }
  }

  void StopZeroers() {
    quit_.store(true, std::memory_order_release);
    for (auto& t : zeroers_)
      if (t.joinable()) t.join();
    zeroers_.clear();
  }

  Protocol protocol_;
  Zeroer zeroer_;
  std::size_t burst_, pool_pages_;
  PointEnv env_;
  uint64_t idle_ms_;
  FaultRest rest_;
  int threads_ = 0;
  PaddedSlots<AllocCounts> counts_;
  /// Per thread: the pages it holds; a slot each (the vector's end pointer
  /// moves with every allocation of the burst).
  PaddedSlots<std::vector<char*>> held_;
  std::unique_ptr<BurstPool> pool_;
  std::vector<HelperPlace> places_;
  std::set<int> shared_pus_;  ///< OS indices of the idle_cpus zeroers' PUs
  bool on_measured_ = false;
  std::vector<std::thread> zeroers_;
  std::string setup_error_;
  double idle_used_ms_ = 0;
  uint64_t zeroer_pages_idle_ = 0;
  std::size_t zeroed_at_start_ = 0;
  alignas(kDestructiveLine) std::atomic<bool> run_{false};
  alignas(kDestructiveLine) std::atomic<bool> quit_{false};
  alignas(kDestructiveLine) std::atomic<uint64_t> zeroer_pages_{0};
  alignas(kDestructiveLine) std::atomic<int> busy_{0};  ///< zeroers working
};

/// Burst pairs per repetition of a paired-burst row, after one discarded
/// warm-up pair.
inline constexpr int kBurstPairs = 16;

/// Paired bursts of two sides (e.g. zeroer:none_vs_idle_cpus). One
/// repetition (one window, fixed work) runs 1 + kBurstPairs pairs of bursts on
/// one thread team, A and B in a seeded random order within each pair
/// (harness/measure/duet.h DuetSchedule). Before each burst thread 0 resets
/// that side's pool (BurstWorkload::PrepareBurst, with its idle period) while
/// the other threads sleep in a barrier; each burst is timed by its threads
/// (first start to last end), so the idle periods and resets are outside the
/// pairs' faults/s. The pairs are the row's details.duet.pairs, read by
/// plots/verdicts.py as paired windows of one coherence regime (the separate
/// rows' repetitions fell in different regimes too often to resolve).
class BurstPairWorkload : public Workload {
 public:
  /// One side of a pair: a burst protocol and its zeroer.
  struct Side {
    Protocol protocol;
    Zeroer zeroer;
  };
  BurstPairWorkload(Side a, Side b, std::size_t burst, std::size_t pool,
                    const PointEnv& env, uint64_t seed, int pairs = kBurstPairs,
                    uint64_t idle_ms = kIdleMs)
      : a_(a.protocol, a.zeroer, burst, pool, env, idle_ms),
        b_(b.protocol, b.zeroer, burst, pool, env, idle_ms),
        a_name_(SideName(a)),
        b_name_(SideName(b)),
        burst_(burst),
        schedule_(DuetSchedule(kDuetWarmupPairs, pairs, seed)),
        prezeroed_(schedule_.size(), 0) {}
  /// "protocol:P zeroer:Z".
  static std::string SideName(Side s) {
    return std::string("protocol:") + ProtocolName(s.protocol) +
           " zeroer:" + ZeroerName(s.zeroer);
  }

  bool fixed_work() const override { return true; }

  void Prepare(int threads) override {
    a_.Prepare(threads);
    b_.Prepare(threads);
    barrier_.Reset(threads);
    logs_ = PaddedSlots<Log>(static_cast<std::size_t>(threads));
    for (std::size_t i = 0; i < logs_.size(); ++i) {
      logs_[i].start_ns.assign(schedule_.size(), 0);
      logs_[i].end_ns.assign(schedule_.size(), 0);
      logs_[i].ops.assign(schedule_.size(), 0);
    }
  }

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    Log& log = logs_[ctx.index];  // once, outside the loop
    uint64_t ops = 0;
    for (std::size_t w = 0; w < schedule_.size(); ++w) {
      const bool b =
          schedule_[w] == DuetSide::kB || schedule_[w] == DuetSide::kWarmupB;
      BurstWorkload& side = b ? b_ : a_;
      if (ctx.index == 0) {
        const std::string e = side.PrepareBurst();
        if (error_.empty()) error_ = e;
      }
      barrier_.Wait();
      const uint64_t t0 = NowNs();
      const uint64_t n = side.RunWindow(ctx, stop);
      const uint64_t t1 = NowNs();
      log.start_ns[w] = t0;
      log.end_ns[w] = t1;
      log.ops[w] = n;
      ops += n;
      barrier_.Wait();
      if (ctx.index == 0) {
        side.PauseZeroers();
        prezeroed_[w] = side.prezeroed();
        const std::string e = side.CheckBurst();
        if (!e.empty() && error_.empty())
          error_ = (b ? b_name_ : a_name_) + " burst " + std::to_string(w) +
                   ": " + e;
      }
    }
    barrier_.Wait();
    return ops;
  }

  void Report(PointReport& out, double window_seconds, uint64_t ops) override {
    std::vector<uint64_t> wops(schedule_.size(), 0);
    std::vector<double> secs(schedule_.size(), 0);
    for (std::size_t w = 0; w < schedule_.size(); ++w) {
      uint64_t first = UINT64_MAX, last = 0;
      for (std::size_t i = 0; i < logs_.size(); ++i) {
        wops[w] += logs_[i].ops[w];
        first = std::min(first, logs_[i].start_ns[w]);
        last = std::max(last, logs_[i].end_ns[w]);
      }
      secs[w] = last > first ? static_cast<double>(last - first) / 1e9 : 0;
    }
    const std::vector<DuetPair> pairs = DuetPairs(schedule_, wops, secs);
    // Each burst's pre-zeroed pages over its burst_ allocations.
    const std::vector<DuetPair> shares = DuetPairs(
        schedule_, prezeroed_,
        std::vector<double>(schedule_.size(), static_cast<double>(burst_)));
    nlohmann::json jp = nlohmann::json::array();
    std::vector<double> ra, rb, sa, sb;
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      const DuetPair& p = pairs[i];
      jp.push_back({{"a_ops_per_s", p.a_ops_per_s},
                    {"b_ops_per_s", p.b_ops_per_s},
                    {"b_first", p.b_first},
                    {"a_prezeroed_share", shares[i].a_ops_per_s},
                    {"b_prezeroed_share", shares[i].b_ops_per_s}});
      ra.push_back(p.a_ops_per_s);
      rb.push_back(p.b_ops_per_s);
      sa.push_back(shares[i].a_ops_per_s);
      sb.push_back(shares[i].b_ops_per_s);
    }
    const auto median = [](std::vector<double> v) {
      if (v.empty()) return 0.0;
      std::sort(v.begin(), v.end());
      return v.size() % 2 ? v[v.size() / 2]
                          : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    };
    out.Metric("a_faults_per_s", median(ra));
    out.Metric("b_faults_per_s", median(rb));
    out.Metric("a_prezeroed_share", median(sa));
    out.Metric("b_prezeroed_share", median(sb));
    PointReport pa, pb;
    a_.Report(pa, window_seconds, ops);
    b_.Report(pb, window_seconds, ops);
    auto& d = out.details;
    d["duet"] = {{"a", a_name_},
                 {"b", b_name_},
                 {"pairs", jp},
                 {"warmup_pairs", kDuetWarmupPairs},
                 {"unit",
                  "faults/s of each burst (its threads' first start to last "
                  "end)"}};
    // Where each helper ran: both sides' zeroers have the same places.
    for (const char* k :
         {"helper_pu", "helper_core", "helper_numa", "helper_l3", "helper_kind",
          "helper_note", "zeroer_on_measured_pus", "zeroers", "zeroer_policy",
          "busy_pus", "usable_pus", "fault_rest", "pool_lock",
          "pool_lock_stands_for", "burst_pages", "pool_pages", "block_pages"})
      if (pb.details.contains(k))
        d[k] = pb.details[k];
      else if (pa.details.contains(k))
        d[k] = pa.details[k];
    d["a_last_burst"] = pa.details;
    d["b_last_burst"] = pb.details;
    d["note"] =
        "a_faults_per_s / b_faults_per_s: median over the pairs; the row's "
        "ops_per_s includes the idle periods and pool resets between bursts "
        "and is not a rate of either side; the verdict reads the pairs";
  }

  std::string Verify() override {
    a_.PauseZeroers();
    b_.PauseZeroers();
    return error_;
  }

 private:
  struct Log {
    std::vector<uint64_t> start_ns, end_ns, ops;
  };
  BurstWorkload a_, b_;
  std::string a_name_, b_name_;
  std::size_t burst_;
  std::vector<DuetSide> schedule_;
  std::vector<uint64_t> prezeroed_;  ///< per burst (thread 0 only)
  SleepBarrier barrier_;
  PaddedSlots<Log> logs_;
  std::string error_;  ///< the first failed check (thread 0 only)
};

/// Pre-zeroed pool size of the default burst grid: 4096 pages (16 MiB), past
/// any core's L2; burst sizes 0.5, 1, 2 and 4 times it.
inline constexpr std::size_t kBurstPoolPages = 4096;

/// What every burst row shares: its key (zeroer named `zeroer`), one
/// fixed-work window per repetition.
Variant BurstRow(Protocol protocol, const std::string& zeroer,
                 std::size_t burst, std::size_t pool, Suite suite,
                 std::vector<int> threads) {
  Variant v;
  v.params = {{"protocol", ProtocolName(protocol)},
              {"zeroer", zeroer},
              {"burst_pages", std::to_string(burst)},
              {"pool_pages", std::to_string(pool)}};
  v.suite = suite;
  v.threads = std::move(threads);
  v.windows = 1;
  v.fixed_work = true;
  return v;
}

Variant MakeBurstVariant(Protocol protocol, Zeroer zeroer, std::size_t burst,
                         std::size_t pool, Suite suite,
                         std::vector<int> threads) {
  Variant v = BurstRow(protocol, ZeroerName(zeroer), burst, pool, suite,
                       std::move(threads));
  // For the budget: the burst's pages and the pool filled before it (about
  // half of them fault in again per repetition).
  v.cost_mib = static_cast<double>(burst + pool / 2) * 4096 / (1 << 20);
  v.needs_spare_pu = zeroer == Zeroer::kEngine;
  v.description =
      std::string(protocol == Protocol::kIdleBurst
                      ? "idle period (zeroer fills the pool), then "
                  : zeroer == Zeroer::kEngine
                      ? "no idle period (busy machine: every usable PU "
                        "but the engine's allocates), "
                      : "no idle period (busy machine: every usable PU "
                        "allocates), ") +
      "a burst of " + std::to_string(burst) + " page allocations against a " +
      std::to_string(pool) + "-page pre-zeroed pool; zeroer: " +
      (zeroer == Zeroer::kNone       ? "none (zero on allocation)"
       : zeroer == Zeroer::kIdleCpus ? "one SCHED_IDLE thread per NUMA node"
                                     : "dedicated engine, order-4 blocks");
  v.make = [=](const PointEnv& env) -> std::unique_ptr<Workload> {
    return std::make_unique<BurstWorkload>(protocol, zeroer, burst, pool, env);
  };
  return v;
}

/// A paired-burst row (BurstPairWorkload) of sides `a` and `b`, which differ
/// in their zeroer only: its key names them "A_vs_B" (zeroer:none_vs_idle_cpus
/// ...), on `threads` threads.
Variant MakeBurstPairVariant(BurstPairWorkload::Side a,
                             BurstPairWorkload::Side b, std::size_t burst,
                             std::size_t pool, Suite suite,
                             std::vector<int> threads) {
  Variant v = BurstRow(
      a.protocol,
      std::string(ZeroerName(a.zeroer)) + "_vs_" + ZeroerName(b.zeroer), burst,
      pool, suite, std::move(threads));
  v.needs_spare_pu = a.zeroer == Zeroer::kEngine || b.zeroer == Zeroer::kEngine;
  const int bursts = 2 * (kDuetWarmupPairs + kBurstPairs);
  // For the budget: the two pools, mapped and filled once per repetition
  // (the bursts reuse their pages), and per burst ~6 ms of burst, reset and
  // idle period.
  v.cost_mib =
      2 * static_cast<double>(std::max(burst, pool)) * 4096 / (1 << 20);
  v.cost_s = bursts * 0.006;
  v.description =
      "paired bursts: " + std::to_string(kBurstPairs) +
      " pairs (after one warm-up pair) of A = " +
      BurstPairWorkload::SideName(a) +
      " and B = " + BurstPairWorkload::SideName(b) +
      " (idle_burst: idle period, then the " +
      "burst; busy: no idle period, every usable PU allocating), a burst of " +
      std::to_string(burst) + " page allocations against a " +
      std::to_string(pool) +
      "-page pool each; each burst timed on its own (faults/s per pair side)";
  const std::string key = RowKey("prezero", v.params, 0);
  v.make = [=](const PointEnv& env) -> std::unique_ptr<Workload> {
    // A fresh order for every repetition, reproducible from the key, the
    // thread count and the repetition's sequence number in the process.
    static std::map<std::string, uint64_t> repetition;
    const std::string k = key + std::to_string(env.threads);
    const uint64_t seed =
        std::hash<std::string>{}(k)*0x9E3779B97F4A7C15ull + repetition[k]++;
    return std::make_unique<BurstPairWorkload>(a, b, burst, pool, env, seed);
  };
  return v;
}

/// Default: zeroer:none (the zero-on-alloc rate) and both zeroers under both
/// protocols at burst/pool 0.5, 1, 2, 4. protocol:idle_burst with one
/// allocating thread (the engine needs a spare PU), plus 2 threads and all
/// `usable` PUs for none and idle_cpus at burst/pool 1 (the pairs of
/// protocol:busy and of the 2-thread rows). protocol:busy with an allocating
/// thread on every usable PU (Holt's busy machine): `usable` threads for
/// idle_cpus, usable - 1 for the engine (its thread keeps a PU; none on a 1-PU
/// machine), and at B = P for none (zeroing on demand at every PU). Quick: one
/// small idle_burst point of each zeroer.
std::vector<Variant> BurstVariants(int usable) {
  usable = std::max(usable, 1);
  std::vector<Variant> v;
  const std::size_t p = kBurstPoolPages;
  const auto counts = [](std::vector<int> c) {
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    return c;
  };
  for (std::size_t b : {p / 2, p, 2 * p, 4 * p}) {
    v.push_back(MakeBurstVariant(
        Protocol::kIdleBurst, Zeroer::kNone, b, p, Suite::kDefault,
        b == p ? counts({1, 2, usable}) : counts({1})));
    for (Zeroer z : {Zeroer::kIdleCpus, Zeroer::kEngine}) {
      for (Protocol pr : {Protocol::kIdleBurst, Protocol::kBusy}) {
        std::vector<int> threads = {1};
        if (pr == Protocol::kBusy) {
          threads = {z == Zeroer::kEngine ? usable - 1 : usable};
          if (threads[0] < 1) continue;  // engine, 1 PU: no busy machine
        } else if (z == Zeroer::kIdleCpus && b == p) {
          threads = counts({1, 2, usable});
        }
        v.push_back(
            MakeBurstVariant(pr, z, b, p, Suite::kDefault, std::move(threads)));
      }
    }
  }
  v.push_back(MakeBurstVariant(Protocol::kBusy, Zeroer::kNone, p, p,
                               Suite::kDefault, {usable}));
  // The question's comparisons at B = P as paired bursts of one team:
  // zero on allocation against each zeroer after idle (1 thread), and Holt's:
  // the busy machine with its idle-CPU zeroers against zeroing on demand
  // (every usable PU).
  using S = BurstPairWorkload::Side;
  v.push_back(MakeBurstPairVariant(S{Protocol::kIdleBurst, Zeroer::kNone},
                                   S{Protocol::kIdleBurst, Zeroer::kIdleCpus},
                                   p, p, Suite::kDefault, {1}));
  v.push_back(MakeBurstPairVariant(S{Protocol::kIdleBurst, Zeroer::kNone},
                                   S{Protocol::kIdleBurst, Zeroer::kEngine}, p,
                                   p, Suite::kDefault, {1}));
  v.push_back(MakeBurstPairVariant(S{Protocol::kBusy, Zeroer::kNone},
                                   S{Protocol::kBusy, Zeroer::kIdleCpus}, p, p,
                                   Suite::kDefault, {usable}));
  for (Zeroer z : {Zeroer::kNone, Zeroer::kIdleCpus, Zeroer::kEngine}) {
    v.push_back(MakeBurstVariant(Protocol::kIdleBurst, z, 1024, 512,
                                 Suite::kQuick, {1}));
    v.back().quick_only = true;
  }
  return v;
}

/// Idle gap of the idle variants, µs: about a syscall-heavy request's think
/// time; long against one 4 KiB zeroing (~0.1-1 µs) so an unloaded zeroer
/// always keeps up.
inline constexpr uint64_t kIdleUs = 100;

Variant MakeVariant(Mode mode, ZeroMethod method, uint64_t idle_us,
                    Suite suite) {
  Variant v;
  v.params = {{"mode", ModeName(mode)},
              {"method", ZeroMethodName(method)},
              {"idle_us", std::to_string(idle_us)}};
  v.suite = suite;
  v.threads = {1};
  v.needs_spare_pu = mode != Mode::kZeroOnAlloc;
  v.cost_s = 0.1;  // for the budget: setup measured on the 2-vCPU VM
  if (suite == Suite::kFull) v.threads = {};
  static const char* const kText[] = {
      "every allocation zeroes its page (no background zeroer)",
      "background zeroer (a free core, else an idle SMT sibling: "
      "helper_note); allocations leave idle gaps",
      "background zeroer on a PU of its own (a free core, else an idle SMT "
      "sibling: helper_note) while the allocator never sleeps: a steady "
      "state in which nearly every page arrives pre-zeroed (prezeroed_share), "
      "not the busy machine of the 2004 objection (protocol:busy)"};
  v.description = std::string(kText[static_cast<int>(mode)]) + "; zeroing by " +
                  ZeroMethodName(method) + ", idle " + std::to_string(idle_us) +
                  " us; touches " + kTouchesAllLines;
  v.make = [=](const PointEnv& env) -> std::unique_ptr<Workload> {
    return std::make_unique<PrezeroWorkload>(mode, method, idle_us, env);
  };
  return v;
}

/// Default: the burst protocol grid (BurstVariants) on the run's usable PUs
/// (`order`). The steady-state modes (per-allocation idle gaps, a zeroer
/// frozen between windows) stay in quick (two points) and full (every method,
/// the run's threads).
std::vector<Variant> Variants(const std::vector<PuInfo>& order) {
  std::vector<Variant> v;
  v.push_back(
      MakeVariant(Mode::kZeroOnAlloc, ZeroMethod::kMemset, 0, Suite::kQuick));
  v.push_back(MakeVariant(Mode::kZeroOnAlloc, ZeroMethod::kMemset, kIdleUs,
                          Suite::kFull));
  v.push_back(MakeVariant(Mode::kPrezeroedIdle, ZeroMethod::kMemset, kIdleUs,
                          Suite::kFull));
  v.push_back(
      MakeVariant(Mode::kPrezeroedBusy, ZeroMethod::kMemset, 0, Suite::kQuick));
  for (Variant& b : BurstVariants(static_cast<int>(order.size())))
    v.push_back(std::move(b));
  for (ZeroMethod m :
       {ZeroMethod::kRepStosb, ZeroMethod::kNonTemporal, ZeroMethod::kClzero}) {
    v.push_back(MakeVariant(Mode::kZeroOnAlloc, m, 0, Suite::kFull));
    v.push_back(MakeVariant(Mode::kPrezeroedIdle, m, kIdleUs, Suite::kFull));
    v.push_back(MakeVariant(Mode::kPrezeroedBusy, m, 0, Suite::kFull));
  }
  return v;
}

}  // namespace lockline::prezero_bench

LOCKLINE_REGISTER_FAMILY(lockline::Family{
    "prezero",
    "Pre-zeroed page pool model: allocations zero their own page or take one a "
    "background "
    "zeroer cleaned, with and without idle time; allocations/s and the "
    "pre-zeroed share",
    nullptr, lockline::prezero_bench::Variants});
