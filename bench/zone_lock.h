// zone_lock: the 2015 `zone->lock` placement regression (3484b2de9499, merged
// for v3.16, and its fix a368ab67aa55, in v4.0). Threads allocate and free
// order-0 pages the way Linux 4.0 does (mm/page_alloc.c@v4.0): lock-free
// fair-zone, watermark and statistics reads of the modelled `struct zone`
// (layouts/zone.h), then per-CPU pcp lists that take zone->lock only to refill
// `batch` pages (rmqueue_bulk) and to drain `batch` once `high` = 6 x batch
// are cached (free_pcppages_bulk). Under the lock the holder runs the buddy
// allocator over free_area[0..10] of a pool whose struct pages do not fit in
// cache (layouts/buddy.h): splits on refill, buddy checks and merges on
// drain. pcp_batch:0 (a lock per alloc and per free) is a counter-example:
// 4.0 has no such path for order-0 pages. Outside the lock each page gets the
// fault path's work (Options::work_ns, harness/measure/page_work.h; work_ns:cal
// from CalibratedWork); Options::stats off takes the lock without lock_stat.
// Not measured: __rmqueue_fallback and MIGRATE_RESERVE (one migrate type),
// the pageblock migratetype bitmap, zone_statistics' per-CPU NUMA counters,
// reclaim and compaction, interrupts (4.0 runs these paths with irqs off).
//
// Each zone layout (lock x placement x line x config: 112) is its own
// instantiation of ZoneLockWorkload, so the timed code addresses the zone's
// fields at compile-time offsets. The untimed Report and Verify bodies are
// compiled once in bench/zone_lock/model.cpp, and the layouts one placement
// per translation unit (bench/zone_lock/*.cpp), to keep the build affordable
// on a 2-CPU CI runner; bench/zone_lock.cpp holds the family's table.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/family.h"
#include "harness/locks/all_locks.h"
#include "harness/locks/lock_stat.h"
#include "harness/machine/cpu.h"
#include "harness/machine/memory.h"
#include "harness/machine/padded_slots.h"
#include "harness/machine/topology.h"
#include "harness/measure/page_work.h"
#include "layouts/buddy.h"
#include "layouts/page.h"
#include "layouts/report.h"
#include "layouts/zone.h"

namespace lockline::zone_lock {

/// The per-cpu page batches of the table: 31 = Linux 4.0's zone_batchsize()
/// for any zone of ~352 MiB or more (page_alloc.c@v4.0:4197-4228,
/// KernelBatchSize); 0 = no pcp lists (a counter-example); 63 = a what-if
/// batch with high = 6 x 63 as pageset_set_batch would set it, which 4.0
/// cannot produce (zone_batchsize stops at 31, and percpu_pagelist_fraction
/// sets high = 4 x batch, pageset_set_high, page_alloc.c@v4.0:4303-4311).
constexpr int kPcpBatches[] = {31, 0, 63};
/// The default batch (the kernel's for every zone this model stands for).
constexpr int kDefaultBatch = 31;
/// The cache-line sizes the zone is instantiated for (ZONE_PADDING, alignment).
constexpr std::size_t kLines[] = {kCacheLine64, kCacheLine128};
/// pcp->high = 6 * pcp->batch (pageset_set_batch, page_alloc.c@v4.0:4275).
constexpr int kPcpHighBatches = 6;
/// Struct pages in circulation per zone: 32 MiB of struct page (512 Ki pages,
/// a 2 GiB zone), 16-32x the L2 of current cores and as large as a Zen 4
/// CCX's L3, so the buddy work under the lock misses in the private caches as
/// Aaron Lu found on will-it-scale/page_fault1 (LKML 2018-02). Setup, teardown
/// and Verify are O(pool), so no larger; quick runs use 4 MiB.
constexpr std::size_t kColdStructPageBytes = 32u << 20;
constexpr std::size_t kQuickColdStructPageBytes = 4u << 20;
/// Upper bound of the per-cpu vm_stat threshold (calculate_normal_threshold,
/// mm/vmstat.c@v4.0:118).
constexpr int kMaxStatThreshold = 125;
/// The one migrate type used: user pages (aim7's anonymous and page-cache
/// memory) are MIGRATE_MOVABLE (the same index in both configs).
constexpr int kMigratetype = kMigrateMovable;
/// classzone_idx of a ZONE_NORMAL allocation (DMA, DMA32, NORMAL, MOVABLE).
constexpr int kClassZoneIdx = 2;
/// WMARK_LOW: the first get_page_from_freelist pass checks it.
constexpr int kWmarkLow = 1;
constexpr int kWmarkHigh = 2;
/// enum zone_flags bit 5 (mmzone.h@v4.0:532-546: RECLAIM_LOCKED, OOM_LOCKED,
/// CONGESTED, DIRTY, WRITEBACK, FAIR_DEPLETED): the zone's fair-policy batch
/// (NR_ALLOC_BATCH) is used up.
constexpr int kZoneFairDepleted = 5;
/// NR_PAGES_SCANNED, index 27 of 4.0's enum zone_stat_item (mmzone.h@v4.0),
/// read by every free_one_page / free_pcppages_bulk under the lock.
constexpr int kNrPagesScanned = 27;
/// Steps (one alloc or one free) between two loads of the stop flag; even, so
/// a window holds whole pairs.
constexpr int kStepsPerStopCheck = 16;
static_assert(kStepsPerStopCheck % 2 == 0, "windows hold whole pairs");
/// On the instrumented rows (lock_stat on) every kHoldTimeEvery-th refill and
/// drain is timed from acquisition to release (two NowNs, ~20-40 ns, inside
/// the hold), so the clock reads add < 1 ns to the mean hold. The stats:off
/// twins read no clock inside any hold: no hold_ns_per_refill / _per_drain.
constexpr uint64_t kHoldTimeEvery = 64;

/// zone_batchsize() of Linux 4.0 for a zone of `managed` 4 KiB pages:
/// managed/1024 capped at 128, /4, rounddown_pow_of_two(b + b/2) - 1.
inline int KernelBatchSize(unsigned long managed) {
  long batch = static_cast<long>(managed / 1024);
  if (batch * 4096 > 512 * 1024) batch = (512 * 1024) / 4096;
  batch /= 4;
  if (batch < 1) batch = 1;
  const unsigned long b = static_cast<unsigned long>(batch + batch / 2);
  return static_cast<int>(std::bit_floor(b)) - 1;
}

/// Per-thread burst: the pages a thread allocates before freeing them all
/// (page_fault1's shape): the thread's share of the cold circulation, at least
/// 16 batches (a balanced alloc/free pair would never leave the pcp list).
inline int BurstPages(int threads, int batch, bool quick) {
  const std::size_t cold =
      (quick ? kQuickColdStructPageBytes : kColdStructPageBytes) / sizeof(Page);
  const int share =
      static_cast<int>(cold / static_cast<std::size_t>(std::max(threads, 1)));
  return std::max(16 * std::max(batch, 1), share);
}

/// Per-thread burst when work runs outside the lock (work_ns > 0): 16384
/// pages (64 MiB, half of page_fault1's 128 MiB mapping per task), so the pcp
/// list's carry-over between phases (up to high = 186 pages that never reach
/// zone->lock) is under 1 % of the cycle and zone->lock is taken once per
/// `batch` pages in both phases, as page_fault1's cycle takes it (2/31 holds
/// per page at batch 31).
inline constexpr int kWorkBurstPages = 16384;
/// The burst of a point with work, at least 16 batches.
inline int WorkBurstPages(int batch) {
  return std::max(kWorkBurstPages, 16 * std::max(batch, 1));
}

/// Where a page's work (work_ns) runs: after the allocation (zeroing a page
/// of the ring, clear_page's stand-in, and a spin: the fault) and as a spin
/// before the free (zap_pte_range, page_remove_rmap, the TLB gather: the
/// unmap), in the machine's unmap / fault cost ratio r
/// (WorkCalibration::unmap_fault_ratio): a burst's free phase is r times as
/// long per page as its allocation phase, so its drains come 1/r times as
/// often as the refills, as page_fault1's do. In 4.0 a free that brings
/// pcp->count to high drains `batch` pages under zone->lock
/// (free_hot_cold_page, page_alloc.c@v4.0:1485-1530, calling
/// free_pcppages_bulk, :694-745); an allocation from an empty list refills
/// `batch` under it (rmqueue_bulk, :1274-1305).
struct WorkSplit {
  uint64_t alloc_spin_ns = 0;    ///< spin after the zeroing, per allocation
  uint64_t free_spin_ns = 0;     ///< spin before each free
  double unmap_fault_ratio = 1;  ///< the ratio the work was split by
};
/// The split of `work_ns` (zero_ns: the calibrated zeroing, 0 uncalibrated)
/// by the calibrated unmap / fault ratio r (1 when not measured): the
/// allocation step gets max(work / (1 + r), zero_ns) including the zeroing,
/// the free step the rest.
inline WorkSplit SplitWork(uint64_t work_ns, bool calibrated,
                           const WorkCalibration& c) {
  WorkSplit w;
  if (calibrated && c.unmap_fault_ratio > 0)
    w.unmap_fault_ratio = c.unmap_fault_ratio;
  if (work_ns == 0) return w;
  const uint64_t zero_ns =
      calibrated ? static_cast<uint64_t>(c.zero_ns_per_page) : 0;
  const auto fault_ns = static_cast<uint64_t>(static_cast<double>(work_ns) /
                                              (1 + w.unmap_fault_ratio));
  const uint64_t alloc_ns = std::min(work_ns, std::max(fault_ns, zero_ns));
  w.alloc_spin_ns = alloc_ns > zero_ns ? alloc_ns - zero_ns : 0;
  w.free_spin_ns = work_ns - alloc_ns;
  return w;
}

/// The steps thread `index` runs untimed before its first window, drawn from
/// (`seed`, index) over its 2 x `burst` step cycle (0 for seed 0): will-it-
/// scale's tasks leave one pipe together and drift apart, not in step.
inline uint64_t BurstPhaseSteps(uint64_t seed, int index, int burst) {
  if (seed == 0 || burst <= 0) return 0;
  std::mt19937_64 draw(seed ^ static_cast<uint64_t>(index));
  return draw() % (2 * static_cast<uint64_t>(burst));
}

/// Pool pages of a zone serving `zone_threads` threads: their bursts plus a
/// quarter more (so NR_FREE_PAGES stays far above the watermarks), a full pcp
/// list and one refill each, rounded up to MAX_ORDER_NR_PAGES.
inline unsigned long PoolPages(int zone_threads, int burst, int batch) {
  const unsigned long per_thread =
      static_cast<unsigned long>(burst) + burst / 4 +
      static_cast<unsigned long>(kPcpHighBatches * batch + batch);
  const unsigned long n =
      per_thread * static_cast<unsigned long>(std::max(zone_threads, 1)) +
      buddy::kMaxOrderNrPages;
  return (n + buddy::kMaxOrderNrPages - 1) / buddy::kMaxOrderNrPages *
         buddy::kMaxOrderNrPages;
}

/// The per-cpu vm_stat threshold of Linux 4.0 calculate_normal_threshold():
/// 2 * fls(cpus) * (1 + fls(zone MB / 128)), at most 125; threads stand for
/// CPUs, 4 KiB per page.
inline int StatThreshold(int threads, unsigned long pages) {
  const auto fls = [](unsigned long x) {
    return static_cast<int>(std::bit_width(x));
  };
  const unsigned long mem_128mb = pages / 32768;
  return std::min(
      kMaxStatThreshold,
      2 * fls(static_cast<unsigned long>(threads)) * (1 + fls(mem_128mb)));
}

/// The sampled zone->lock holds of one kind (refills or drains).
struct HoldTimes {
  uint64_t ns = 0, samples = 0;
};

/// Per-thread event counts (windows only; teardown's drain is not counted).
struct Counters {
  uint64_t ops = 0;      ///< frees (alloc+free pairs completed)
  uint64_t steps = 0;    ///< allocations + frees (RunWindow reports steps / 2)
  uint64_t allocs = 0;   ///< pages allocated
  uint64_t refills = 0;  ///< rmqueue_bulk calls (pcp lists only)
  uint64_t drains = 0;   ///< free_pcppages_bulk calls (pcp lists only)
  uint64_t alloc_failures = 0;      ///< empty free lists (and empty pcp)
  uint64_t watermark_failures = 0;  ///< WMARK_LOW check failed (allocation
                                    ///< still proceeds: no reclaim modelled)
  uint64_t stat_folds = 0;   ///< per-thread vm_stat diffs folded into the zone
  uint64_t fair_resets = 0;  ///< reset_alloc_batches (clear_bit on flags)
  uint64_t fair_depletions = 0;       ///< set_bit(ZONE_FAIR_DEPLETED)
  HoldTimes refill_hold, drain_hold;  ///< sampled holds (kHoldTimeEvery)
  /// Buddy merges (FreeOne) and splits (expand) this thread's holds did:
  /// counted in locals under the lock and added here after the release, so
  /// no line of ours is written inside a hold.
  uint64_t merges = 0, splits = 0;
};

/// One thread's private state, its PaddedSlots slot (first touched by its
/// thread in SetupThread).
struct alignas(kCacheLine) PerThread {
  LockStatThread stat;
  ListHead pcp_list;  ///< per_cpu_pages.lists[MIGRATE_MOVABLE]; hot end first
  int pcp_count = 0;
  int zone = 0;              ///< index of its zone (its NUMA node's)
  long stat_diff = 0;        ///< per_cpu_pageset.vm_stat_diff[NR_FREE_PAGES]
  long batch_diff = 0;       ///< per_cpu_pageset.vm_stat_diff[NR_ALLOC_BATCH]
  std::vector<Page*> held;   ///< allocated, not yet freed (a stack)
  bool freeing = false;      ///< burst phase: false = allocating
  uint64_t touch = 0;        ///< value written into each allocated page
  PageWorkRing work;         ///< work_ns: the ring of pages the work zeroes
  uint64_t phase_steps = 0;  ///< BurstPhaseSteps run before the windows
  Counters c;
};

/// What a point runs besides its layout, batch and zones: the work per page
/// outside zone->lock (work_ns:cal|0) and whether the lock is instrumented.
struct Options {
  uint64_t work_ns = 0;          ///< per allocated page, outside the lock
  bool work_calibrated = false;  ///< work_ns came from CalibratedWork
  WorkCalibration calibration;   ///< when work_calibrated: its inputs
  bool stats = true;  ///< lock_stat on zone->lock (false: plain lock/unlock)
  /// With work: the ring's sizing (page_work.h WorkRingPages; WithWorkRing).
  WorkCaches work_caches;
  std::size_t work_ring_pages = 0;
  /// The seed of the threads' burst phases (BurstPhaseSteps): the row's
  /// address_layout.seed; 0 (all threads in phase) outside a repetition.
  uint64_t phase_seed = 0;
};

/// `o` for `env`: the work's ring sized for its caches and thread count, and
/// the repetition's phase seed (LiveLayoutSeed) when one is live.
inline Options WithWorkRing(Options o, const PointEnv& env) {
  LiveLayoutSeed(&o.phase_seed);
  if (o.work_ns != 0) {
    o.work_caches = ReadWorkCaches(env.topology);
    o.work_ring_pages = WorkRingPages(o.work_caches, env.threads);
  }
  return o;
}

/// This model's own cost per page (one alloc+free pair) at work_ns:0 on one
/// unpinned thread in 4.0's configuration (ticket, lock_after_free_area,
/// pcp_batch 31, cma, 64-byte lines, one zone; `quick`: the quick pool), the
/// minimum over 3 whole burst cycles. Defined in lock_after_free_area.cpp.
double MeasureModelNsPerPage(bool quick);

/// work_ns:cal (harness/measure/page_work.h CalibrateWork with
/// MeasureModelNsPerPage), measured once per process (thread safe).
WorkCalibration CalibratedWork(bool quick);

/// The compile-time facts of one zone layout that its rows report.
struct LayoutFacts {
  std::string name;  ///< ZoneLayoutName: the layout report's name
  ZoneLockPlacement placement;
  ZoneConfig config;
  std::size_t line;         ///< bytes
  std::size_t zone_size;    ///< sizeof(Zone<...>), bytes
  const char* lock_name;    ///< Lock::kName
  std::size_t lock_size;    ///< sizeof(Lock), bytes
  std::size_t lock_offset;  ///< offsetof(Zone<...>, lock), bytes
  const char* lock_description;
};

/// One zone's state after the windows, as its row reports it.
struct ZoneSnapshot {
  unsigned long pool = 0;  ///< struct pages of the zone
  int threads = 0;         ///< threads using it
  unsigned long watermark_low = 0;
  int stat_threshold = 0;
  long nr_free = 0;  ///< vm_stat[NR_FREE_PAGES] (teardown folded the diffs)
  uint64_t merges = 0, splits = 0;  ///< buddy merges and splits
};

/// The body of ZoneLockWorkload::Report (bench/zone_lock/model.cpp, compiled
/// once, not per layout): a point's metrics and details.
void ReportZoneLock(PointReport& out, double window_seconds, uint64_t ops,
                    const LayoutFacts& layout,
                    const PaddedSlots<PerThread>& per_thread,
                    const std::vector<ZoneSnapshot>& zones, int batch, int high,
                    int burst, const Options& options);

/// The threads' part of ZoneLockWorkload::Verify for zone `zi`
/// (bench/zone_lock/model.cpp): every pcp list well formed and as long as its
/// pcp_count; its pages and the held ones pool pages in no free block (`seen`,
/// updated) and on no other list; no pool page unaccounted for; `nr_free_stat`
/// plus the unfolded diffs equal to `free_pages`. Returns "" or the first
/// violation, prefixed "zone <zi>: ".
std::string VerifyZoneThreads(int zi, const Page* pages, unsigned long pool,
                              long nr_free_stat, long free_pages,
                              std::vector<uint8_t>& seen,
                              const PaddedSlots<PerThread>& per_thread);

/// The workload of one variant: zone layout Zone<Lock, P, kLine, C>, pcp
/// batch, one zone or one per NUMA node.
template <LockAlgorithm Lock, ZoneLockPlacement P, std::size_t kLine,
          ZoneConfig C = ZoneConfig::kCma>
class ZoneLockWorkload final : public Workload {
 public:
  using Z = Zone<Lock, P, kLine, C>;
  using FA = typename Z::FreeAreaT;
  using Buddy = buddy::BuddyAllocator<FA>;
  static_assert(CheckZoneLayout<Z>());

  /// `batch` 0 (no pcp lists) or the pcp batch in pages; `zones` 1 or the
  /// machine's NUMA nodes (each zone and its struct pages bound to its node;
  /// a thread uses zone ctx.numa % zones); `options` the work per page and
  /// lock_stat; `burst` > 0 overrides BurstPages (tests). Throws
  /// std::invalid_argument for a negative batch or zones < 1, std::bad_alloc
  /// when memory cannot be mapped.
  ZoneLockWorkload(const PointEnv& env, int batch, int zones = 1,
                   const Options& options = {}, int burst = 0)
      : batch_(batch),
        high_(kPcpHighBatches * batch),
        burst_(burst > 0 ? burst
               : options.work_ns > 0
                   ? WorkBurstPages(batch)
                   : BurstPages(env.threads, std::max(batch, 0), env.quick)),
        work_ns_(options.work_ns),
        work_split_(SplitWork(options.work_ns, options.work_calibrated,
                              options.calibration)),
        stats_(options.stats),
        options_(WithWorkRing(options, env)),
        per_thread_(static_cast<std::size_t>(env.threads), kDeferConstruction) {
    if (batch < 0)
      throw std::invalid_argument("zone_lock: pcp_batch " +
                                  std::to_string(batch) +
                                  " must be 0 (no pcp lists) or positive");
    if (zones < 1)
      throw std::invalid_argument("zone_lock: zones " + std::to_string(zones) +
                                  " must be at least 1");
    // Threads per zone, from the plan when there is one (thread i is on node
    // plan->pus[i].numa), else spread evenly.
    std::vector<int> on_zone(zones, 0);
    for (int i = 0; i < env.threads; ++i) {
      int node = i % zones;
      if (env.plan != nullptr && i < static_cast<int>(env.plan->pus.size()) &&
          env.plan->pus[i].numa >= 0) {
        node = env.plan->pus[i].numa % zones;
      }
      ++on_zone[node];
    }
    const bool bind = zones > 1;
    for (int zi = 0; zi < zones; ++zi) {
      PointEnv zone_env = env;
      // A per-NUMA zone and its struct pages (mem_map) live on its node.
      if (bind) zone_env.mem_policy = "node:" + std::to_string(zi);
      auto zs = std::make_unique<ZoneState>();
      zs->pool = PoolPages(on_zone[zi], burst_, std::max(batch, 0));
      zs->zone = MakeShared<Z>(zone_env);
      zs->pages_mem = AllocShared(zs->pool * sizeof(Page), zone_env);
      zs->pages = static_cast<Page*>(zs->pages_mem.get());
      for (unsigned long i = 0; i < zs->pool; ++i) new (&zs->pages[i]) Page();
      Z& z = *zs->zone;
      ZoneInit(z);
      zs->buddy = std::make_unique<Buddy>(zs->pages, zs->pool, z.free_area);
      zs->buddy->Init(kMigratetype);
      // __setup_per_zone_wmarks (page_alloc.c@v4.0:5700-5745) for one zone:
      // min_free_kbytes = int_sqrt(lowmem_kbytes * 16); low/high = min +
      // min/4, + min/2; NR_ALLOC_BATCH = high - low.
      const unsigned long min_kb = static_cast<unsigned long>(
          std::sqrt(static_cast<double>(zs->pool) * 4.0 * 16.0));
      const unsigned long min = std::clamp(min_kb, 128ul, 65536ul) / 4;
      z.watermark[0] = min;
      z.watermark[kWmarkLow] = min + min / 4;
      z.watermark[kWmarkHigh] = min + min / 2;
      for (long& r : z.lowmem_reserve) r = 0;
      z.managed_pages = z.present_pages = z.spanned_pages = zs->pool;
      z.nr_isolate_pageblock = 0;
      z.name = "Normal";
      z.node = zi;
      z.vm_stat[kNrFreePages].store(static_cast<long>(zs->pool),
                                    std::memory_order_relaxed);
      z.vm_stat[kNrAllocBatch].store(
          static_cast<long>(z.watermark[kWmarkHigh] - z.watermark[kWmarkLow]),
          std::memory_order_relaxed);
      zs->threads = on_zone[zi];
      zs->stat_threshold = StatThreshold(env.threads, zs->pool);
      zones_.push_back(std::move(zs));
    }
  }

  void SetupThread(const ThreadCtx& ctx) override {
    PerThread* me =
        &per_thread_.Emplace(ctx.index);  // first touch by its thread
    ListInit(&me->pcp_list);
    me->zone = ctx.numa >= 0 ? ctx.numa % static_cast<int>(zones_.size())
                             : ctx.index % static_cast<int>(zones_.size());
    me->held.reserve(burst_);
    me->touch = static_cast<uint64_t>(ctx.index) << 48;
    if (work_ns_ != 0) me->work.Allocate(options_.work_ring_pages);
    // The drawn phase, run without the work; the windows count from here.
    me->phase_steps = BurstPhaseSteps(options_.phase_seed, ctx.index, burst_);
    ZoneState& zs = *zones_[me->zone];
    for (uint64_t i = 0; i < me->phase_steps; ++i)
      Step(zs, *me, /*work=*/false);
    me->c = Counters{};
    me->stat.Reset();
  }

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    PerThread& me = per_thread_[ctx.index];  // once, outside the timed loop
    ZoneState& zs = *zones_[me.zone];
    // One op = one alloc+free pair = two steps: steps / 2, unlike frees, does
    // not depend on where a window falls in a burst.
    const uint64_t steps0 = me.c.steps;
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < kStepsPerStopCheck; ++i) Step(zs, me);
      me.c.steps += kStepsPerStopCheck;
    }
    return (me.c.steps - steps0) / 2;
  }

  /// For tests and the calibration: exactly `steps` steps (allocations and
  /// frees of the burst cycle) on the calling thread, as RunWindow runs them.
  void RunSteps(const ThreadCtx& ctx, uint64_t steps) {
    PerThread& me = per_thread_[ctx.index];
    ZoneState& zs = *zones_[me.zone];
    for (uint64_t i = 0; i < steps; ++i) Step(zs, me);
    me.c.steps += steps;
  }

  /// Gives every page back to the buddy allocator (held pages freed, the pcp
  /// list drained, the stat diffs folded). Lock statistics and counters keep
  /// covering the windows only.
  void TeardownThread(const ThreadCtx& ctx) override {
    PerThread& me = per_thread_[ctx.index];
    ZoneState& zs = *zones_[me.zone];
    const LockStatThread stat = me.stat;
    const Counters counters = me.c;
    while (!me.held.empty()) {
      Page* page = me.held.back();
      me.held.pop_back();
      FreePage(zs, me, page);
    }
    if (me.pcp_count > 0) {
      Acquire(zs.zone->lock, me.stat);
      FreePcpBulk(zs, me, me.pcp_count);
      Release(zs.zone->lock, me.stat);
    }
    FoldStats(zs, me);
    me.stat = stat;
    me.c = counters;
  }

  void Report(PointReport& out, double window_seconds, uint64_t ops) override {
    const LayoutFacts layout{ZoneLayoutName<Lock, P, kLine, C>(),
                             P,
                             C,
                             kLine,
                             sizeof(Z),
                             Lock::kName,
                             sizeof(Lock),
                             offsetof(Z, lock),
                             Lock::kDescription};
    std::vector<ZoneSnapshot> zones;
    for (std::size_t zi = 0; zi < zones_.size(); ++zi) {
      const ZoneState& zs = *zones_[zi];
      uint64_t merges = 0, splits = 0;  // the zone's threads', windows only
      for (std::size_t i = 0; i < per_thread_.size(); ++i) {
        const PerThread* t = per_thread_.get(i);
        if (t == nullptr || t->zone != static_cast<int>(zi)) continue;
        merges += t->c.merges;
        splits += t->c.splits;
      }
      zones.push_back(
          {zs.pool, zs.threads, zs.zone->watermark[kWmarkLow],
           zs.stat_threshold,
           zs.zone->vm_stat[kNrFreePages].load(std::memory_order_relaxed),
           merges, splits});
    }
    ReportZoneLock(out, window_seconds, ops, layout, per_thread_, zones, batch_,
                   high_, burst_, options_);
  }

  /// Page conservation, list integrity and the buddy invariants, per zone
  /// (buddy::BuddyAllocator::Check, then VerifyZoneThreads). Call with the
  /// threads quiescent.
  std::string Verify() override {
    for (std::size_t zi = 0; zi < zones_.size(); ++zi) {
      const ZoneState& zs = *zones_[zi];
      std::vector<uint8_t> seen(zs.pool, 0);
      long free_pages = 0;
      const std::string err =
          zs.buddy->Check(MigrateTypesOf(C), seen, &free_pages);
      if (!err.empty()) return "zone " + std::to_string(zi) + ": " + err;
      const std::string threads_err = VerifyZoneThreads(
          static_cast<int>(zi), zs.pages, zs.pool,
          zs.zone->vm_stat[kNrFreePages].load(std::memory_order_relaxed),
          free_pages, seen, per_thread_);
      if (!threads_err.empty()) return threads_err;
    }
    return "";
  }

  /// For tests: a modelled zone, its pool size and its struct pages.
  Z& zone(int zi = 0) { return *zones_[zi]->zone; }
  unsigned long pool_pages(int zi = 0) const { return zones_[zi]->pool; }
  Page* pages(int zi = 0) { return zones_[zi]->pages; }
  int burst_pages() const { return burst_; }
  /// For tests: the buddy allocator of a zone (read-only after construction).
  const Buddy& buddy(int zi = 0) const { return *zones_[zi]->buddy; }
  const PerThread& thread(int i) const { return per_thread_[i]; }

 private:
  /// One zone: the struct zone, its struct pages and the buddy allocator over
  /// them.
  struct ZoneState {
    unsigned long pool = 0;
    int threads = 0;
    int stat_threshold = 0;
    std::shared_ptr<Z> zone;
    SharedPtr pages_mem;
    Page* pages = nullptr;
    std::unique_ptr<Buddy> buddy;
  };

  /// One step of the burst cycle: allocate until `burst_` pages are held,
  /// then free them all; `work`: with the page's work (work_ns).
  void Step(ZoneState& zs, PerThread& me, bool work = true) {
    if (!me.freeing) {
      Page* page = AllocPage(zs, me);
      if (page != nullptr) {
        // prep_new_page: the new owner writes the page (refcount, private),
        // then the fault path's work outside zone->lock (work_ns).
        set_page_count(*page, 1);
        page->private_ = 0;
        page->index = ++me.touch;
        if (work && work_ns_ != 0) me.work.Page(work_split_.alloc_spin_ns);
        me.held.push_back(page);
        ++me.c.allocs;
      } else {
        ++me.c.alloc_failures;
      }
      if (me.held.size() >= static_cast<std::size_t>(burst_) ||
          (page == nullptr && !me.held.empty())) {
        me.freeing = true;
      }
    } else {
      // The unmap's share of the page's work (WorkSplit), then the free.
      if (work && work_ns_ != 0) ThinkNs(work_split_.free_spin_ns);
      Page* page = me.held.back();
      me.held.pop_back();
      // free_pages_prepare: the last reference goes, the page is checked.
      set_page_count(*page, 0);
      benchmark::DoNotOptimize(page->index);
      FreePage(zs, me, page);
      ++me.c.ops;
      if (me.held.empty()) me.freeing = false;
    }
  }

  /// zone->lock with lock_stat (stats_) or plain (the uninstrumented twin
  /// row; the acquisition count is a private counter either way).
  void Acquire(Lock& lock, LockStatThread& st) {
    LockCounted(lock, st, stats_);
  }
  void Release(Lock& lock, LockStatThread& st) {
    UnlockCounted(lock, st, stats_);
  }

  /// `body()` under zone->lock; when lock_stat is on, every kHoldTimeEvery-th
  /// hold of its kind (`n`: that kind's holds so far) is timed into `h` from
  /// acquisition to release. Returns what `body` returns.
  template <class F>
  auto Held(ZoneState& zs, PerThread& me, HoldTimes& h, uint64_t n, F&& body) {
    const bool timed = stats_ && n % kHoldTimeEvery == 0;
    Acquire(zs.zone->lock, me.stat);
    const uint64_t t0 = timed ? NowNs() : 0;
    const auto r = body();
    const uint64_t t1 = timed ? NowNs() : 0;
    Release(zs.zone->lock, me.stat);
    if (timed) {
      h.ns += t1 - t0;
      ++h.samples;
    }
    return r;
  }

  /// test_bit on zone->flags, lock-free (an atomic read of the flags word).
  static bool TestZoneFlag(Z& z, int bit) {
    return (std::atomic_ref<unsigned long>(z.flags).load(
                std::memory_order_relaxed) >>
            bit) &
           1UL;
  }

  /// The lock-free part of get_page_from_freelist (page_alloc.c@v4.0:
  /// 2031-2200) for one local zone: the ALLOC_FAIR test of ZONE_FAIR_DEPLETED
  /// (then reset_alloc_batches and the rescan), and
  /// zone_watermark_ok(WMARK_LOW) reading watermark[], lowmem_reserve[] and
  /// vm_stat[NR_FREE_PAGES].
  void PreAllocReads(ZoneState& zs, PerThread& me) {
    Z& z = *zs.zone;
    if (TestZoneFlag(z, kZoneFairDepleted)) {
      // reset_alloc_batches (page_alloc.c@v4.0:2014-2024).
      const long cur = z.vm_stat[kNrAllocBatch].load(std::memory_order_relaxed);
      z.vm_stat[kNrAllocBatch].fetch_add(
          static_cast<long>(z.watermark[kWmarkHigh] - z.watermark[kWmarkLow]) -
              cur,
          std::memory_order_relaxed);
      std::atomic_ref<unsigned long>(z.flags).fetch_and(
          ~(1UL << kZoneFairDepleted), std::memory_order_relaxed);
      ++me.c.fair_resets;
    }
    const long free = z.vm_stat[kNrFreePages].load(std::memory_order_relaxed);
    const auto mark = static_cast<long>(
        *static_cast<const volatile unsigned long*>(&z.watermark[kWmarkLow]));
    const long reserve =
        *static_cast<const volatile long*>(&z.lowmem_reserve[kClassZoneIdx]);
    if (free <= mark + reserve) ++me.c.watermark_failures;
  }

  /// buffered_rmqueue's tail (page_alloc.c@v4.0:1701-1704):
  /// __mod_zone_page_state(NR_ALLOC_BATCH, -1), then a lock-free read of the
  /// zone's NR_ALLOC_BATCH and, when it is used up, set_bit on flags.
  void PostAllocAccounting(ZoneState& zs, PerThread& me) {
    Z& z = *zs.zone;
    ModState(zs, me, &me.batch_diff, kNrAllocBatch, -1);
    if (z.vm_stat[kNrAllocBatch].load(std::memory_order_relaxed) <= 0 &&
        !TestZoneFlag(z, kZoneFairDepleted)) {
      std::atomic_ref<unsigned long>(z.flags).fetch_or(
          1UL << kZoneFairDepleted, std::memory_order_relaxed);
      ++me.c.fair_depletions;
    }
  }

  /// __mod_zone_page_state(zone, item, delta) (mm/vmstat.c@v4.0): per-thread
  /// diff, folded into the zone's atomic counter once it exceeds the
  /// threshold.
  void ModState(ZoneState& zs, PerThread& me, long* diff, int item,
                long delta) {
    long x = *diff + delta;
    if (x > zs.stat_threshold || x < -zs.stat_threshold) {
      zs.zone->vm_stat[item].fetch_add(x, std::memory_order_relaxed);
      ++me.c.stat_folds;
      x = 0;
    }
    *diff = x;
  }

  /// refresh_cpu_vm_stats for one thread.
  void FoldStats(ZoneState& zs, PerThread& me) {
    for (auto [diff, item] : {std::pair{&me.stat_diff, kNrFreePages},
                              {&me.batch_diff, kNrAllocBatch}}) {
      if (*diff != 0)
        zs.zone->vm_stat[item].fetch_add(*diff, std::memory_order_relaxed);
      *diff = 0;
    }
  }

  /// this_cpu_ptr(zone->pageset): the read-mostly line's pageset pointer,
  /// read on every pcp access.
  static void ReadPageset(Z& z) {
    benchmark::DoNotOptimize(*static_cast<void* const volatile*>(&z.pageset));
  }

  /// Lock-free reads, then buffered_rmqueue: from the buddy allocator under
  /// the lock (pcp_batch:0), or from the pcp list, refilled by rmqueue_bulk
  /// (page_alloc.c@v4.0:1274-1305) when empty.
  Page* AllocPage(ZoneState& zs, PerThread& me) {
    PreAllocReads(zs, me);
    Z& z = *zs.zone;
    Page* page = nullptr;
    if (batch_ == 0) {
      unsigned splits = 0;
      page = Held(zs, me, me.c.refill_hold, me.c.allocs, [&] {
        Page* p = zs.buddy->RmqueueSmallest(0, kMigratetype, &splits);
        if (p != nullptr) ModState(zs, me, &me.stat_diff, kNrFreePages, -1);
        return p;
      });
      me.c.splits += splits;
      if (page == nullptr) return nullptr;
    } else {
      ReadPageset(z);
      if (me.pcp_count == 0) {
        unsigned splits = 0;
        const int got = Held(zs, me, me.c.refill_hold, me.c.refills++, [&] {
          int n = 0;
          ListHead* list = &me.pcp_list;
          for (; n < batch_; ++n) {
            Page* p = zs.buddy->RmqueueSmallest(0, kMigratetype, &splits);
            if (p == nullptr) break;
            // list_add(&page->lru, list); list = &page->lru: physical
            // order.
            ListAdd(&p->lru, list);
            list = &p->lru;
            // is_migrate_cma(get_freepage_migratetype(page)).
            benchmark::DoNotOptimize(p->index);
          }
          ModState(zs, me, &me.stat_diff, kNrFreePages, -n);
          return n;
        });
        me.c.splits += splits;
        me.pcp_count += got;
        if (got == 0) return nullptr;
      }
      page = PageFromLru(me.pcp_list.next);  // the hot end
      ListDel(&page->lru);
      --me.pcp_count;
    }
    PostAllocAccounting(zs, me);
    return page;
  }

  /// free_one_page (pcp_batch:0) or free_hot_cold_page
  /// (page_alloc.c@v4.0:1485-1530): onto the pcp list's hot end, draining a
  /// batch under one acquisition once count >= high.
  void FreePage(ZoneState& zs, PerThread& me, Page* page) {
    Z& z = *zs.zone;
    page->index = static_cast<unsigned long>(kMigratetype);  // set_freepage_mt
    if (batch_ == 0) {
      me.c.merges += Held(zs, me, me.c.drain_hold, me.c.ops, [&] {
        ReadPagesScanned(z);
        const unsigned merges = zs.buddy->FreeOne(page, 0, kMigratetype);
        ModState(zs, me, &me.stat_diff, kNrFreePages, +1);
        return merges;
      });
      return;
    }
    ReadPageset(z);
    ListAdd(&page->lru, &me.pcp_list);
    if (++me.pcp_count >= high_) {
      me.c.merges += Held(zs, me, me.c.drain_hold, me.c.drains++,
                          [&] { return FreePcpBulk(zs, me, batch_); });
    }
  }

  /// zone_page_state(zone, NR_PAGES_SCANNED), read under the lock by every
  /// free_one_page / free_pcppages_bulk (the statistics line).
  static void ReadPagesScanned(Z& z) {
    benchmark::DoNotOptimize(
        z.vm_stat[kNrPagesScanned].load(std::memory_order_relaxed));
  }

  /// free_pcppages_bulk (page_alloc.c@v4.0:694-745; caller holds the lock):
  /// `count` pages from the pcp list's cold end through __free_one_page.
  /// Returns the buddy merges done.
  unsigned FreePcpBulk(ZoneState& zs, PerThread& me, int count) {
    Z& z = *zs.zone;
    ReadPagesScanned(z);
    unsigned merges = 0;
    for (int i = 0; i < count; ++i) {
      Page* page = PageFromLru(me.pcp_list.prev);
      ListDel(&page->lru);
      int mt = static_cast<int>(page->index);  // get_freepage_migratetype
      // has_isolate_pageblock(zone): the read-mostly nr_isolate_pageblock.
      if (*static_cast<const volatile unsigned long*>(
              &z.nr_isolate_pageblock) != 0) {
        mt = kMigratetype;
      }
      merges += zs.buddy->FreeOne(page, 0, mt);
    }
    me.pcp_count -= count;
    ModState(zs, me, &me.stat_diff, kNrFreePages, count);
    return merges;
  }

  const int batch_;
  const int high_;
  const int burst_;
  const uint64_t work_ns_;
  const WorkSplit work_split_;  ///< the work's share per alloc / free step
  const bool stats_;
  const Options options_;
  std::vector<std::unique_ptr<ZoneState>> zones_;
  PaddedSlots<PerThread> per_thread_;
};

/// Calls f.template operator()<kTable[i]>() for every entry of kTable, in
/// order.
template <const auto& kTable, class F, std::size_t... I>
void ForEachOfImpl(F& f, std::index_sequence<I...>) {
  (f.template operator()<kTable[I]>(), ...);
}
template <const auto& kTable, class F>
void ForEachOf(F&& f) {
  ForEachOfImpl<kTable>(f, std::make_index_sequence<std::size(kTable)>{});
}

/// ZoneLockWorkload<L, P, line, config>(env, batch, zones) for lock `lock` (a
/// kName of the lock table) and line size `line` (64 or 128 bytes): the one
/// run-time dispatch to the compile-time layouts. Instantiated once per
/// placement in bench/zone_lock/<placement>.cpp (hence the extern templates
/// below). Throws std::invalid_argument for a lock, line or config not in the
/// table, and what ZoneLockWorkload's constructor throws.
template <ZoneLockPlacement P>
std::unique_ptr<Workload> MakeZoneLockWorkload(
    std::string_view lock, std::size_t line, ZoneConfig config,
    const PointEnv& env, int batch, int zones, const Options& options = {}) {
  std::unique_ptr<Workload> w;
  WithLock(lock, [&]<class L>() {
    ForEachOf<kLines>([&]<std::size_t kLine>() {
      if (line != kLine) return;
      ForEachOf<kAllZoneConfigs>([&]<ZoneConfig C>() {
        if (config != C) return;
        w = std::make_unique<ZoneLockWorkload<L, P, kLine, C>>(env, batch,
                                                               zones, options);
      });
    });
  });
  if (!w) {
    throw std::invalid_argument(
        "zone_lock: no layout for lock " + std::string(lock) + ", line " +
        std::to_string(line) + ", config " + ZoneConfigName(config) +
        " (locks: the lock table; lines: 64, 128; configs: cma, no_cma)");
  }
  return w;
}

#define LOCKLINE_ZONE_LOCK_FACTORY(P)                                   \
  std::unique_ptr<Workload> MakeZoneLockWorkload<ZoneLockPlacement::P>( \
      std::string_view lock, std::size_t line, ZoneConfig config,       \
      const PointEnv& env, int batch, int zones, const Options& options)
extern template LOCKLINE_ZONE_LOCK_FACTORY(kLockBeforeFreeArea);
extern template LOCKLINE_ZONE_LOCK_FACTORY(kLockAfterFreeArea);
extern template LOCKLINE_ZONE_LOCK_FACTORY(kLockOwnLine);
extern template LOCKLINE_ZONE_LOCK_FACTORY(kLockInReadmostlyLine);

}  // namespace lockline::zone_lock
