// prezero: the 2004 background pre-zeroing proposal (BACKGROUND.md section 5;
// pools and zeroers: bench/prezero/model.h). The burst protocol (default:
// protocol:idle_burst|busy x zeroer:none|idle_cpus|engine, and paired bursts)
// and the steady-state modes (mode:*, quick and full). Every allocation is a
// modelled fault (FaultRest): faults_per_s. Protocols: docs/experiments.md.
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

#include "bench/common.h"
#include "bench/prezero/model.h"
#include "harness/family.h"
#include "harness/machine/memory.h"
#include "harness/machine/padded_slots.h"
#include "harness/measure/barrier.h"
#include "harness/measure/duet.h"
#include "harness/measure/kernel_probe.h"
#include "harness/measure/page_work.h"
#include "harness/measure/shared_calibration.h"
#include "harness/measure/zeroing.h"

namespace lockline::prezero_bench {

/// What the steady-state modes write into each page (DirtyPage).
inline constexpr const char* kTouchesAllLines =
    "all 64 lines of each page: the case the 2004 author excluded (his "
    "argument assumed a fault touches few lines of the new page)";

enum class Mode { kZeroOnAlloc, kPrezeroedIdle, kPrezeroedBusy };

inline const char* ModeName(Mode m) {
  static const char* const kNames[] = {"zero_on_alloc", "prezeroed_idle",
                                       "prezeroed_busy"};
  return kNames[static_cast<int>(m)];
}

/// One non-zero store per cache line plus the last word (both words the
/// cheap check reads).
inline void DirtyPage(char* p) {
  for (std::size_t off = 0; off < kPage; off += 64)
    *reinterpret_cast<uint64_t*>(p + off) = off + 1;
  *reinterpret_cast<uint64_t*>(p + kPage - 8) = 1;
}

/// The rest of a fault besides its zeroing, spun after every allocation
/// outside the pool lock: MeasureFaultNsPerPage minus MeasureZeroNsPerPage
/// (harness/measure/page_work.h), at least 0, shared by a duet's processes
/// (SharedCalibration).
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

/// One allocating thread's counts (PaddedSlots, summed after the windows).
struct alignas(kCacheLine) AllocCounts {
  uint64_t allocs = 0;       ///< pages handed out
  uint64_t prezeroed = 0;    ///< of them, taken already zeroed
  uint64_t self_zeroed = 0;  ///< of them, zeroed by the allocating thread
  uint64_t nonzero = 0;      ///< of them, found not zero (must stay 0)
  uint64_t alloc_ns = 0;     ///< steady-state modes: take + zero time, ns
};

/// The sum of every thread's counts.
inline AllocCounts SumCounts(const PaddedSlots<AllocCounts>& counts) {
  using C = AllocCounts;
  C t;
  for (std::size_t i = 0; i < counts.size(); ++i)
    kernel::AddFields(t, counts[i], &C::allocs, &C::prezeroed, &C::self_zeroed,
                      &C::nonzero, &C::alloc_ns);
  return t;
}

/// The details every prezero row has.
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
  d["fault_rest"] = {
      {"rest_ns", rest.rest_ns},
      {"fault_ns_per_page", rest.fault_ns_per_page},
      {"zero_ns_per_page", rest.zero_ns_per_page},
      {"what",
       "after every allocation, rest_ns of register spin outside the pool "
       "lock: the machine's anonymous fault path per page minus one page's "
       "zeroing, so allocations/s are modelled faults/s (faults_per_s)"}};
}

/// A steady-state mode's workload.
class PrezeroWorkload : public Workload {
 public:
  /// `full_check`: every byte of every page (tests). `cpu`: tests force it.
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
    // A zeroer on this PU (--oversubscribe) is SCHED_IDLE: see PoolLock.
    const bool was_shared = PoolLock::SetSharesPuWithZeroer(zeroer_shares_pu_);
    active_.fetch_add(1, std::memory_order_acq_rel);
    uint64_t ops = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const uint64_t t0 = NowNs();
      bool prezeroed = false;
      char* page = pool_->Take(&prezeroed);
      if (page == nullptr) {  // every page held elsewhere: retry
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
        // A real idle gap a zeroer sharing this PU could use.
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
    const AllocCounts t = SumCounts(counts_);
    out.Metric("faults_per_s", Ratio(ops, window_seconds));
    out.Metric("prezeroed_share", Ratio(t.prezeroed, t.allocs));
    out.Metric("zeroer_pages_per_s",
               Ratio(zeroer_pages_.load(), window_seconds));
    out.Metric("alloc_ns", Ratio(t.alloc_ns, t.allocs));
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
    if (!unsupported_.empty()) return "skipped: " + unsupported_;
    StopZeroer();
    const AllocCounts t = SumCounts(counts_);
    if (t.prezeroed + t.self_zeroed != t.allocs)
      return "prezeroed " + std::to_string(t.prezeroed) + " + self-zeroed " +
             std::to_string(t.self_zeroed) + " != allocations " +
             std::to_string(t.allocs);
    if (t.nonzero != 0)
      return std::to_string(t.nonzero) + " pages handed out not all zero";
    const std::size_t dirty = pool_->dirty_count(),
                      zeroed = pool_->zeroed_count();
    if (dirty + zeroed != pool_->pages())
      return "pool lost pages: dirty " + std::to_string(dirty) + " + zeroed " +
             std::to_string(zeroed) + " != " + std::to_string(pool_->pages());
    if (zeroer_pages_.load() != t.prezeroed + zeroed)
      return "zeroer cleaned " + std::to_string(zeroer_pages_.load()) +
             " pages but " + std::to_string(t.prezeroed) +
             " were handed out pre-zeroed and " + std::to_string(zeroed) +
             " remain";
    return "";
  }

 private:
  // The helper rule's PU, else (--oversubscribe) the plan's last, shared at
  // SCHED_IDLE; -1 without a host topology (tests).
  void PickZeroerPu() {
    if (env_.topology == nullptr || !env_.topology->is_host()) return;
    if (env_.plan == nullptr) return;
    const auto places = PlaceHelpersNear(
        env_.topology->usable_pus(), *env_.plan, 1, {.topo = env_.topology});
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
      // SCHED_IDLE only on a shared PU; on a spare PU (the idle CPU) normal
      // priority, so unrelated load cannot preempt it holding the pool lock.
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

// ---- the burst protocol: one point = one run of Prepare (free memory; under
// idle_burst the zeroers fill the pool while the team sleeps) and a burst of B
// allocations held by N threads (docs/experiments.md) -------------------------

/// Upper bound of idle_burst's idle period, ms (it ends once the pool is full).
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

/// One burst point.
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
      if (page == nullptr) {  // being zeroed; sleep later (the zeroer's PU)
        PoolLock::Backoff(&misses);
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
    // Busy machine: the zeroers stop at the first thread's end (its idle PU
    // is time no busy machine has).
    if (protocol_ == Protocol::kBusy && zeroer_ == Zeroer::kIdleCpus)
      run_.store(false, std::memory_order_release);
    PoolLock::SetSharesPuWithZeroer(was_shared);
    c.allocs += held.size();
    return held.size();
  }

  void Report(PointReport& out, double window_seconds, uint64_t ops) override {
    StopZeroers();
    const AllocCounts t = SumCounts(counts_);
    out.Metric("faults_per_s", Ratio(ops, window_seconds));
    out.Metric("prezeroed_share", Ratio(t.prezeroed, t.allocs));
    out.Metric("burst_over_pool", Ratio(burst_, pool_pages_));
    out.Metric("pool_fill_at_burst", Ratio(zeroed_at_start_, pool_pages_));
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
              "else sharing the node's least-loaded measured PU (runs when its "
              "thread sleeps or stalls: busy_note); 16-page batches, rep stosb";
    d["note"] =
        "faults_per_s is the burst alone (the idle period is in Prepare, not "
        "the window); it falls towards zeroer:none's rate once burst_pages "
        "exceeds what the pool held (pool_fill_at_burst x pool_pages)";
    if (!setup_error_.empty()) d["skipped"] = setup_error_;
  }

  std::string Verify() override {
    if (!setup_error_.empty()) return setup_error_;
    StopZeroers();
    return CheckBurst();
  }

  // ---- several bursts on one workload (BurstPairWorkload) ----

  /// Pages of the last burst that were handed out pre-zeroed.
  uint64_t prezeroed() const { return SumCounts(counts_).prezeroed; }

  /// Stops the zeroers' work (none holds a page when it returns).
  void PauseZeroers() {
    run_.store(false, std::memory_order_seq_cst);
    while (busy_.load(std::memory_order_seq_cst) != 0)
      std::this_thread::sleep_for(std::chrono::microseconds(10));
  }
  /// Before another burst (paused, checked): pool and counts reset, then
  /// idle_burst's idle period. "" or the setup error.
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
  /// The burst conserves pages, each handed out zero, each zeroed page
  /// accounted; then its pages go back. "" or what is wrong.
  std::string CheckBurst() {
    const AllocCounts t = SumCounts(counts_);
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
  // The team sleeps while the zeroers fill the pool (to idle_ms_ or full).
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

  // Engine: the helper rule; idle_cpus: NodeZeroerPlaces; no plan (tests):
  // one unbound thread. Bound only on the host's topology.
  void PlaceZeroers() {
    const bool planned = env_.topology != nullptr && env_.plan != nullptr;
    if (!planned) {
      places_.push_back({.reason = "unbound (no host topology)"});
      return;
    }
    if (zeroer_ == Zeroer::kEngine) {
      places_ = PlaceHelpersNear(env_.topology->usable_pus(), *env_.plan, 1,
                                 {.topo = env_.topology});
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
        // Unbound if binding fails (helper_pu names the intended PU).
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
  /// Per thread: the pages it holds (a slot each: written every allocation).
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

/// Burst pairs per repetition, after one warm-up pair.
inline constexpr int kBurstPairs = 16;

/// Paired bursts of two sides on one team (zeroer:none_vs_idle_cpus ...) in
/// DuetSchedule's order, each side reset by thread 0 before its burst, each
/// burst timed first start to last end (details.duet.pairs).
class BurstPairWorkload : public Workload {
 public:
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
    const std::vector<DuetPair> shares = DuetPairs(
        schedule_, prezeroed_,
        std::vector<double>(schedule_.size(), static_cast<double>(burst_)));
    nlohmann::json jp = nlohmann::json::array();
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      const DuetPair& p = pairs[i];
      jp.push_back({{"a_ops_per_s", p.a_ops_per_s},
                    {"b_ops_per_s", p.b_ops_per_s},
                    {"b_first", p.b_first},
                    {"a_prezeroed_share", shares[i].a_ops_per_s},
                    {"b_prezeroed_share", shares[i].b_ops_per_s}});
    }
    const auto median = [](const std::vector<DuetPair>& ps,
                           double DuetPair::*side) {
      std::vector<double> v;
      for (const DuetPair& p : ps) v.push_back(p.*side);
      if (v.empty()) return 0.0;
      std::sort(v.begin(), v.end());
      return v.size() % 2 ? v[v.size() / 2]
                          : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    };
    out.Metric("a_faults_per_s", median(pairs, &DuetPair::a_ops_per_s));
    out.Metric("b_faults_per_s", median(pairs, &DuetPair::b_ops_per_s));
    out.Metric("a_prezeroed_share", median(shares, &DuetPair::a_ops_per_s));
    out.Metric("b_prezeroed_share", median(shares, &DuetPair::b_ops_per_s));
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
    // Both sides' zeroers have the same places.
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

/// The burst grid's pool: 4096 pages (16 MiB, past any L2); bursts 0.5-4x.
inline constexpr std::size_t kBurstPoolPages = 4096;

/// A burst row's key and its one fixed-work window per repetition.
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
  // Budget: the burst and about half the pool fault in per repetition.
  v.cost_mib = static_cast<double>(burst + pool / 2) * 4096 / (1 << 20);
  v.needs_spare_pu = zeroer == Zeroer::kEngine;
  v.helper_on_idle_pu = zeroer == Zeroer::kIdleCpus;
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

/// A paired-burst row of sides differing in their zeroer: key "A_vs_B".
Variant MakeBurstPairVariant(BurstPairWorkload::Side a,
                             BurstPairWorkload::Side b, std::size_t burst,
                             std::size_t pool, Suite suite,
                             std::vector<int> threads) {
  Variant v = BurstRow(
      a.protocol,
      std::string(ZeroerName(a.zeroer)) + "_vs_" + ZeroerName(b.zeroer), burst,
      pool, suite, std::move(threads));
  v.needs_spare_pu = a.zeroer == Zeroer::kEngine || b.zeroer == Zeroer::kEngine;
  v.helper_on_idle_pu =
      a.zeroer == Zeroer::kIdleCpus || b.zeroer == Zeroer::kIdleCpus;
  // Budget: the two pools once per repetition, plus per burst of a side its
  // idle period (kIdleMs in full with no zeroer to end it early) or the busy
  // protocol's spinning PUs.
  v.cost_mib =
      2 * static_cast<double>(std::max(burst, pool)) * 4096 / (1 << 20);
  for (const auto& side : {a, b}) {
    const bool waits = side.protocol == Protocol::kIdleBurst;
    v.cost_s += (kDuetWarmupPairs + kBurstPairs) *
                (waits && side.zeroer == Zeroer::kNone ? kIdleMs / 1e3
                 : waits                               ? 0.01
                                                       : 0.03);
  }
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
    // A fresh order per repetition, from key, threads and sequence number.
    static std::map<std::string, uint64_t> repetition;
    const std::string k = key + std::to_string(env.threads);
    const uint64_t seed =
        std::hash<std::string>{}(k)*0x9E3779B97F4A7C15ull + repetition[k]++;
    return std::make_unique<BurstPairWorkload>(a, b, burst, pool, env, seed);
  };
  return v;
}

/// Default: each zeroer at burst/pool 0.5-4; idle_burst at 1 thread (and 2,
/// `usable` for none and idle_cpus at B = P); busy on every usable PU (the
/// engine's own PU kept). Quick: one small idle_burst point per zeroer.
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
  // The question's comparisons at B = P as paired bursts (Holt's: busy).
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

/// Idle gap, µs: a request's think time, long against a 4 KiB zeroing.
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
  v.unavailable = ZeroMethodUnsupportedReason(method, 0);
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

/// Default: the burst grid on the usable PUs; the steady-state modes in
/// quick (two points) and full (every method).
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
    "background zeroer cleaned, with and without idle time; allocations/s and "
    "the pre-zeroed share",
    nullptr, lockline::prezero_bench::Variants});
