// zone_lock: the 2015 `zone->lock` placement regression (3484b2de9499 and its
// v4.1 fix). Threads allocate and free order-0 pages from one modelled Linux
// 4.0 `struct zone` (layouts/zone.h): a lock-free watermark check, then the
// buddy free list of MIGRATE_MOVABLE under zone->lock, optionally through
// per-thread pcp lists refilled/drained in batches. With pcp_batch:0 every
// allocation and free takes the lock (maximum pressure on the lock's line).
// Not measured: buddy merging/splitting (all pages are order-0, and the list
// work per page is one list_del or list_add), zone fallback, reclaim,
// NR_ALLOC_BATCH's fair-zone policy, interrupts.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness/family.h"
#include "harness/locks/all_locks.h"
#include "harness/locks/lock_stat.h"
#include "harness/memory.h"
#include "layouts/page.h"
#include "layouts/report.h"
#include "layouts/zone.h"

namespace lockline::zone_lock {

/// The per-cpu page batches of the table: 0 = no pcp lists (every alloc and
/// free takes zone->lock); 31 = Linux 4.0's zone_batchsize() for any zone over
/// ~128 MB (rounddown_pow_of_two(32 + 16) - 1); 63 = twice that (a tuned
/// percpu_pagelist_fraction).
constexpr int kPcpBatches[] = {0, 31, 63};
/// The cache-line sizes the zone is instantiated for (ZONE_PADDING, alignment).
constexpr std::size_t kLines[] = {kCacheLine64, kCacheLine128};

/// Pages every zone has regardless of threads: enough that the free list never
/// runs dry while each thread holds its burst (see PoolPages).
constexpr int kPoolBasePages = 4096;
/// pcp->high = 6 * pcp->batch (Linux 4.0 pageset_set_batch).
constexpr int kPcpHighBatches = 6;
/// With pcp lists, a thread allocates a burst of kBurstBatches * batch pages,
/// then frees them all (a task faulting in a working set, then exiting). A
/// burst longer than pcp->high is what makes pcp lists refill and drain at all:
/// a balanced alloc/free pair would be served by the pcp list forever. With 16
/// batches a burst cycle takes about 1.4 / batch lock acquisitions per page
/// (2 / batch as the burst grows without bound).
constexpr int kBurstBatches = 16;
/// Upper bound of the per-cpu vm_stat threshold (calculate_normal_threshold).
constexpr int kMaxStatThreshold = 125;
/// The one migrate type used: user pages (aim7's anonymous and page-cache
/// memory) are MIGRATE_MOVABLE, whose list head sits at allocator-line offset
/// 40..56 -- in the lock's line under 3484b2de9499 with 64-byte lines and a
/// lock of at most 24 bytes (ticket, qspinlock). A 40-byte pthread_mutex_t
/// pushes it to the next line (only the UNMOVABLE and RECLAIMABLE heads share
/// the lock's line then); each row's details say which
/// (movable_list_shares_lock_line).
constexpr int kMigratetype = kMigrateMovable;
/// classzone_idx of a ZONE_NORMAL allocation (DMA, DMA32, NORMAL, MOVABLE).
constexpr int kClassZoneIdx = 2;
/// WMARK_LOW: the first get_page_from_freelist pass checks it.
constexpr int kWmarkLow = 1;
/// page->_mapcount of a page on a buddy free list (PAGE_BUDDY_MAPCOUNT_VALUE,
/// 4.0's PageBuddy marker); -1 is an allocated (or pcp) page.
constexpr int kPageBuddyMapcount = -128;
/// Steps (one alloc or one free) between two loads of the stop flag; even, so
/// with pcp_batch:0 a window ends between alloc/free pairs.
constexpr int kStepsPerStopCheck = 16;
static_assert(kStepsPerStopCheck % 2 == 0, "pcp:0 windows end on whole pairs");

/// Zone pages for a point: the base plus, per thread, the most it can keep
/// away from the free lists (its burst, a full pcp list, one refill).
inline int PoolPages(int threads, int batch) {
  const int per_thread =
      batch == 0 ? 1 : kBurstBatches * batch + kPcpHighBatches * batch + batch;
  return kPoolBasePages + threads * per_thread;
}

/// The per-cpu vm_stat threshold of Linux 4.0 calculate_normal_threshold():
/// 2 * fls(cpus) * (1 + fls(zone MB / 128)), at most 125; threads stand for
/// CPUs, 4 KiB per page.
inline int StatThreshold(int threads, int pages) {
  const auto fls = [](unsigned long x) {
    return static_cast<int>(std::bit_width(x));
  };
  const unsigned long mem_128mb = static_cast<unsigned long>(pages) / 32768;
  return std::min(
      kMaxStatThreshold,
      2 * fls(static_cast<unsigned long>(threads)) * (1 + fls(mem_128mb)));
}

/// Per-thread event counts (windows only; teardown's drain is not counted).
struct Counters {
  uint64_t ops = 0;             ///< alloc+free pairs completed (= frees)
  uint64_t allocs = 0;          ///< pages allocated
  uint64_t refills = 0;         ///< rmqueue_bulk calls (pcp lists only)
  uint64_t drains = 0;          ///< free_pcppages_bulk calls (pcp lists only)
  uint64_t alloc_failures = 0;  ///< empty free list (and empty pcp)
  uint64_t watermark_failures = 0;  ///< WMARK_LOW check failed (allocation
                                    ///< still proceeds: no reclaim modelled)
  uint64_t stat_folds = 0;  ///< per-thread NR_FREE_PAGES diff folded into
                            ///< zone->vm_stat
};

/// One thread's private state, on lines of its own (first touched by its
/// thread in SetupThread): lock statistics, the per_cpu_pages list of
/// MIGRATE_MOVABLE, the vm_stat_diff of NR_FREE_PAGES, the pages it holds.
struct alignas(kDestructiveLine) PerThread {
  LockStatThread stat;
  ListHead pcp_list;  ///< per_cpu_pages.lists[MIGRATE_MOVABLE]; hot end first
  int pcp_count = 0;
  long stat_diff = 0;       ///< per_cpu_pageset.vm_stat_diff[NR_FREE_PAGES]
  std::vector<Page*> held;  ///< allocated, not yet freed (a stack)
  bool freeing = false;     ///< burst phase: false = allocating
  uint64_t touch = 0;       ///< value written into each allocated page
  Counters c;
};

/// The workload of one variant: zone layout Zone<Lock, P, kLine>, pcp batch.
template <LockAlgorithm Lock, ZoneLockPlacement P, std::size_t kLine>
class ZoneLockWorkload final : public Workload {
 public:
  using Z = Zone<Lock, P, kLine>;
  static_assert(CheckZoneLayout<Z>());

  /// `batch` 0 (no pcp lists) or the pcp batch in pages. Throws
  /// std::invalid_argument for a negative batch, std::bad_alloc when shared
  /// memory cannot be mapped.
  ZoneLockWorkload(const PointEnv& env, int batch, uint64_t work_ns = 0)
      : batch_(batch),
        high_(kPcpHighBatches * batch),
        hold_(batch == 0 ? 1 : kBurstBatches * batch),
        pool_(PoolPages(env.threads, std::max(batch, 0))),
        stat_threshold_(StatThreshold(env.threads, pool_)),
        work_ns_(work_ns),
        zone_(MakeShared<Z>(env)),
        side_(MakeShared<LockStatSide>(env)),
        pages_mem_(
            AllocShared(static_cast<std::size_t>(pool_) * sizeof(Page), env)),
        per_thread_(env.threads) {
    if (batch < 0) {
      throw std::invalid_argument("zone_lock: pcp_batch " +
                                  std::to_string(batch) +
                                  " must be 0 (no pcp lists) or positive");
    }
    pages_ = static_cast<Page*>(pages_mem_.get());
    for (int i = 0; i < pool_; ++i) new (&pages_[i]) Page();
    Z& z = *zone_;
    ZoneInit(z);
    // Watermarks well below the base pool (min = 1/16 of it, low/high = min
    // + 1/4, + 1/2 as __setup_per_zone_wmarks), so only a vm_stat lagging by
    // many threads' diffs can fail the check.
    const unsigned long min = kPoolBasePages / 16;
    z.watermark[0] = min;
    z.watermark[kWmarkLow] = min + min / 4;
    z.watermark[2] = min + min / 2;
    for (long& r : z.lowmem_reserve) r = 0;
    z.managed_pages = z.present_pages = z.spanned_pages = pool_;
    z.name = "Normal";
    // Boot: every page free, order 0, on the MIGRATE_MOVABLE list.
    ListHead& head = z.free_area[0].free_list[kMigratetype];
    for (int i = 0; i < pool_; ++i) {
      pages_[i]._mapcount.store(kPageBuddyMapcount, std::memory_order_relaxed);
      ListAddTail(&pages_[i].lru, &head);
    }
    z.free_area[0].nr_free = pool_;
    z.vm_stat[kNrFreePages].store(pool_, std::memory_order_relaxed);
  }

  void SetupThread(const ThreadCtx& ctx) override {
    auto me = std::make_unique<PerThread>();  // first touch by its thread
    ListInit(&me->pcp_list);
    me->held.reserve(hold_);
    me->touch = static_cast<uint64_t>(ctx.index) << 48;
    per_thread_[ctx.index] = std::move(me);
  }

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    PerThread& me = *per_thread_[ctx.index];
    const uint64_t ops0 = me.c.ops;
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < kStepsPerStopCheck; ++i) Step(me, ctx.index);
    }
    return me.c.ops - ops0;
  }

  /// Gives every page back to the zone (held pages freed, the pcp list drained
  /// whole, the stat diff folded), so that after the point every page is on
  /// the free list again. Lock statistics and counters cover the windows only.
  void TeardownThread(const ThreadCtx& ctx) override {
    PerThread& me = *per_thread_[ctx.index];
    const LockStatThread stat = me.stat;
    const Counters counters = me.c;
    while (!me.held.empty()) {
      Page* page = me.held.back();
      me.held.pop_back();
      FreePage(me, ctx.index, page);
    }
    if (me.pcp_count > 0) {
      LockWithStats(zone_->lock, *side_, me.stat, ctx.index);
      FreePcpBulk(me, me.pcp_count);
      UnlockWithStats(zone_->lock, me.stat);
    }
    if (me.stat_diff != 0) {  // refresh_cpu_vm_stats
      zone_->vm_stat[kNrFreePages].fetch_add(me.stat_diff,
                                             std::memory_order_relaxed);
      me.stat_diff = 0;
    }
    me.stat = stat;
    me.c = counters;
  }

  void Report(PointReport& out, double window_seconds, uint64_t ops) override {
    const std::string name = ZoneLayoutName<Lock, P, kLine>();
    out.layouts.push_back(name);
    Counters sum;
    std::vector<const LockStatThread*> stats;
    for (const auto& t : per_thread_) {
      stats.push_back(t ? &t->stat : nullptr);
      if (!t) continue;
      sum.ops += t->c.ops;
      sum.allocs += t->c.allocs;
      sum.refills += t->c.refills;
      sum.drains += t->c.drains;
      sum.alloc_failures += t->c.alloc_failures;
      sum.watermark_failures += t->c.watermark_failures;
      sum.stat_folds += t->c.stat_folds;
    }
    const double thread_seconds =
        window_seconds * static_cast<double>(per_thread_.size());
    AddLockStatMetrics(out, SummarizeLockStats(stats, thread_seconds, ops));
    out.Metric("pages_per_s",
               window_seconds > 0
                   ? static_cast<double>(sum.allocs) / window_seconds
                   : 0.0);
    nlohmann::json& d = out.details;
    d["op"] =
        "one op = one order-0 page allocated and later freed: ops_per_s counts "
        "alloc+free pairs; pages_per_s counts pages allocated";
    d["layout"] = name;
    d["placement"] = PlacementName(P);
    d["placement_description"] = PlacementDescription(P);
    d["line"] = kLine;
    d["zone_size_bytes"] = sizeof(Z);
    d["lock"] = {{"name", Lock::kName},
                 {"size_bytes", sizeof(Lock)},
                 {"offset", offsetof(Z, lock)},
                 {"description", Lock::kDescription}};
    if (const LayoutInfo* info = FindLayout(name)) {
      d["lock_shares_line_with"] = FieldsSharingLine(*info, "lock");
      d["movable_list_shares_lock_line"] =
          SharesLine(*info, "lock",
                     std::string("free_area[0].free_list[") +
                         kMigrateTypeNames[kMigratetype] + "]");
      d["order0_nr_free_shares_lock_line"] =
          SharesLine(*info, "lock", "free_area[0].nr_free");
      d["watermark_shares_lock_line"] = SharesLine(*info, "lock", "watermark");
    } else {
      d["layout_error"] = "FindLayout does not know " + name;
    }
    d["pcp"] = {{"batch", batch_}, {"high", high_}};
    d["burst_pages"] = hold_;
    d["pool_pages"] = pool_;
    // After TeardownThread (the runner's order) every page is back: = pool.
    d["nr_free_at_end"] = zone_->free_area[0].nr_free;
    d["migratetype"] = kMigrateTypeNames[kMigratetype];
    d["stat_threshold"] = stat_threshold_;
    d["work_ns"] = work_ns_;
    d["events"] = {{"ops", sum.ops},
                   {"allocs", sum.allocs},
                   {"refills", sum.refills},
                   {"drains", sum.drains},
                   {"alloc_failures", sum.alloc_failures},
                   {"watermark_failures", sum.watermark_failures},
                   {"stat_folds", sum.stat_folds}};
  }

  /// Page conservation and list integrity: every page of the pool is on
  /// exactly one list (a zone free list, a thread's pcp list) or held by a
  /// thread; each free list is a well-formed circle of pool pages marked
  /// PageBuddy whose length is nr_free; each pcp list's length is its count;
  /// vm_stat[NR_FREE_PAGES] plus the threads' unfolded diffs is the free
  /// lists' total. Call with the threads quiescent.
  std::string Verify() override {
    std::vector<uint8_t> seen(pool_, 0);
    std::string err;
    // Walks one list, marking its pages; returns its length or -1 (err set).
    const auto walk = [&](const ListHead* head, const std::string& where,
                          int mapcount) -> long {
      long n = 0;
      const ListHead* prev = head;
      for (const ListHead* node = head->next; node != head; node = node->next) {
        if (node->prev != prev) {
          err = where + ": entry " + std::to_string(n) +
                "'s prev does not point back to its predecessor";
          return -1;
        }
        const long idx = PageIndex(PageFromLru(node));
        if (idx < 0) {
          err = where + ": entry " + std::to_string(n) +
                " is not a page of the zone";
          return -1;
        }
        if (seen[idx]) {
          err = where + ": page " + std::to_string(idx) +
                " is on two lists (or a list has a cycle)";
          return -1;
        }
        seen[idx] = 1;
        const int mc = pages_[idx]._mapcount.load(std::memory_order_relaxed);
        if (mc != mapcount) {
          err = where + ": page " + std::to_string(idx) + " has _mapcount " +
                std::to_string(mc) + ", expected " + std::to_string(mapcount);
          return -1;
        }
        ++n;
        prev = node;
      }
      if (head->prev != prev) {
        err = where + ": head's prev is not the last entry";
        return -1;
      }
      return n;
    };
    const Z& z = *zone_;
    long free_total = 0;
    for (int order = 0; order < kMaxOrder; ++order) {
      long area = 0;
      for (int mt = 0; mt < kMigrateTypes; ++mt) {
        const long n = walk(&z.free_area[order].free_list[mt],
                            "free_area[" + std::to_string(order) +
                                "].free_list[" + kMigrateTypeNames[mt] + "]",
                            kPageBuddyMapcount);
        if (n < 0) return err;
        area += n;
      }
      if (static_cast<unsigned long>(area) != z.free_area[order].nr_free) {
        return "free_area[" + std::to_string(order) + "].nr_free is " +
               std::to_string(z.free_area[order].nr_free) +
               " but its lists hold " + std::to_string(area) + " pages";
      }
      free_total += area << order;
    }
    long diffs = 0;
    for (std::size_t t = 0; t < per_thread_.size(); ++t) {
      const PerThread* me = per_thread_[t].get();
      if (!me) continue;
      const long n =
          walk(&me->pcp_list, "thread " + std::to_string(t) + " pcp list", -1);
      if (n < 0) return err;
      if (n != me->pcp_count) {
        return "thread " + std::to_string(t) + " pcp count is " +
               std::to_string(me->pcp_count) + " but its list holds " +
               std::to_string(n);
      }
      for (const Page* page : me->held) {
        const long idx = PageIndex(page);
        if (idx < 0 || seen[idx]) {
          return "thread " + std::to_string(t) +
                 " holds a page that is foreign or also on a list";
        }
        seen[idx] = 1;
      }
      diffs += me->stat_diff;
    }
    const long missing = std::count(seen.begin(), seen.end(), uint8_t{0});
    if (missing != 0) {
      return std::to_string(missing) + " of " + std::to_string(pool_) +
             " pages are on no list and held by no thread (lost)";
    }
    const long stat = z.vm_stat[kNrFreePages].load(std::memory_order_relaxed);
    if (stat + diffs != free_total) {
      return "vm_stat[NR_FREE_PAGES] " + std::to_string(stat) +
             " + per-thread diffs " + std::to_string(diffs) +
             " != pages on the free lists " + std::to_string(free_total);
    }
    return "";
  }

  /// For tests: the modelled zone and the page pool's size.
  Z& zone() { return *zone_; }
  int pool_pages() const { return pool_; }

 private:
  /// Index of `page` in the pool, or -1 for a pointer outside it.
  long PageIndex(const Page* page) const {
    const auto p = reinterpret_cast<std::uintptr_t>(page);
    const auto base = reinterpret_cast<std::uintptr_t>(pages_);
    if (p < base || (p - base) % sizeof(Page) != 0) return -1;
    const std::uintptr_t idx = (p - base) / sizeof(Page);
    return idx < static_cast<std::uintptr_t>(pool_) ? static_cast<long>(idx)
                                                    : -1;
  }

  /// One step of the burst cycle: allocate until `hold_` pages are held, then
  /// free them all (with pcp_batch:0, hold_ = 1: alloc, then free).
  void Step(PerThread& me, int tid) {
    if (!me.freeing) {
      Page* page = AllocPage(me, tid);
      if (page != nullptr) {
        // prep_new_page: the new owner writes the page (refcount, private),
        // then its thread-private work.
        set_page_count(*page, 1);
        page->private_ = 0;
        page->index = ++me.touch;
        if (work_ns_ != 0) ThinkNs(work_ns_);
        me.held.push_back(page);
        ++me.c.allocs;
      } else {
        ++me.c.alloc_failures;
      }
      if (me.held.size() >= static_cast<std::size_t>(hold_) ||
          (page == nullptr && !me.held.empty())) {
        me.freeing = true;
      }
    } else {
      Page* page = me.held.back();
      me.held.pop_back();
      // free_pages_prepare: the last reference goes, the page is checked.
      set_page_count(*page, 0);
      benchmark::DoNotOptimize(page->index);
      FreePage(me, tid, page);
      ++me.c.ops;
      if (me.held.empty()) me.freeing = false;
    }
  }

  /// __zone_watermark_ok(z, 0, low_wmark_pages(z), classzone_idx, ...,
  /// zone_page_state(z, NR_FREE_PAGES)) for order 0, lock-free as in 4.0: the
  /// watermark and lowmem_reserve are plain reads of the read-mostly line
  /// (volatile: re-read every call, as the kernel's out-of-line call does),
  /// vm_stat a relaxed atomic read of the statistics line.
  bool WatermarkOk() const {
    const Z& z = *zone_;
    const long free = z.vm_stat[kNrFreePages].load(std::memory_order_relaxed);
    const auto mark = static_cast<long>(
        *static_cast<const volatile unsigned long*>(&z.watermark[kWmarkLow]));
    const long reserve =
        *static_cast<const volatile long*>(&z.lowmem_reserve[kClassZoneIdx]);
    return free > mark + reserve;
  }

  /// __mod_zone_page_state(zone, NR_FREE_PAGES, delta): per-thread diff,
  /// folded into the zone's atomic counter once it exceeds the threshold.
  void ModFreePages(PerThread& me, long delta) {
    long x = me.stat_diff + delta;
    if (x > stat_threshold_ || x < -stat_threshold_) {
      zone_->vm_stat[kNrFreePages].fetch_add(x, std::memory_order_relaxed);
      ++me.c.stat_folds;
      x = 0;
    }
    me.stat_diff = x;
  }

  /// __rmqueue_smallest at order 0 (caller holds zone->lock): the first page
  /// of the movable list, nullptr when it is empty.
  Page* RmqueueLocked() {
    FreeArea& area = zone_->free_area[0];
    ListHead& head = area.free_list[kMigratetype];
    if (ListEmpty(&head)) return nullptr;
    Page* page = PageFromLru(head.next);
    ListDel(&page->lru);
    page->_mapcount.store(-1, std::memory_order_relaxed);  // rmv_page_order
    page->private_ = 0;
    --area.nr_free;
    return page;
  }

  /// __free_one_page at order 0 with no free buddy (caller holds the lock).
  void FreeOneLocked(Page* page) {
    FreeArea& area = zone_->free_area[0];
    page->private_ = 0;  // set_page_order(page, 0)
    page->_mapcount.store(kPageBuddyMapcount, std::memory_order_relaxed);
    ListAdd(&page->lru, &area.free_list[kMigratetype]);
    ++area.nr_free;
  }

  /// Watermark check, then buffered_rmqueue: from the zone under the lock
  /// (pcp_batch:0), or from the pcp list, refilled by rmqueue_bulk when empty.
  Page* AllocPage(PerThread& me, int tid) {
    if (!WatermarkOk()) ++me.c.watermark_failures;
    Lock& lock = zone_->lock;
    if (batch_ == 0) {
      LockWithStats(lock, *side_, me.stat, tid);
      Page* page = RmqueueLocked();
      if (page != nullptr) ModFreePages(me, -1);
      UnlockWithStats(lock, me.stat);
      return page;
    }
    if (me.pcp_count == 0) {
      // rmqueue_bulk: `batch` pages under one acquisition, in list order.
      ++me.c.refills;
      LockWithStats(lock, *side_, me.stat, tid);
      int got = 0;
      for (; got < batch_; ++got) {
        Page* page = RmqueueLocked();
        if (page == nullptr) break;
        ListAddTail(&page->lru, &me.pcp_list);
      }
      ModFreePages(me, -got);
      UnlockWithStats(lock, me.stat);
      me.pcp_count += got;
      if (got == 0) return nullptr;
    }
    Page* page = PageFromLru(me.pcp_list.next);  // the hot end
    ListDel(&page->lru);
    --me.pcp_count;
    return page;
  }

  /// free_one_page (pcp_batch:0) or free_hot_cold_page: onto the pcp list's
  /// hot end, draining a batch under one acquisition once count >= high.
  void FreePage(PerThread& me, int tid, Page* page) {
    Lock& lock = zone_->lock;
    if (batch_ == 0) {
      LockWithStats(lock, *side_, me.stat, tid);
      FreeOneLocked(page);
      ModFreePages(me, +1);
      UnlockWithStats(lock, me.stat);
      return;
    }
    ListAdd(&page->lru, &me.pcp_list);
    if (++me.pcp_count >= high_) {
      ++me.c.drains;
      LockWithStats(lock, *side_, me.stat, tid);
      FreePcpBulk(me, batch_);
      UnlockWithStats(lock, me.stat);
    }
  }

  /// free_pcppages_bulk (caller holds the lock): `count` pages from the pcp
  /// list's cold end back to the zone.
  void FreePcpBulk(PerThread& me, int count) {
    for (int i = 0; i < count; ++i) {
      Page* page = PageFromLru(me.pcp_list.prev);
      ListDel(&page->lru);
      FreeOneLocked(page);
    }
    me.pcp_count -= count;
    ModFreePages(me, count);
  }

  const int batch_;
  const int high_;
  const int hold_;
  const int pool_;
  const int stat_threshold_;
  const uint64_t work_ns_;
  std::shared_ptr<Z> zone_;
  std::shared_ptr<LockStatSide> side_;  ///< outside the zone: layout exact
  SharedPtr pages_mem_;
  Page* pages_ = nullptr;
  std::vector<std::unique_ptr<PerThread>> per_thread_;
};

/// Calls f.template operator()<P>() for every placement of
/// kAllZoneLockPlacements, in table order.
template <class F, std::size_t... I>
void ForEachPlacementImpl(F& f, std::index_sequence<I...>) {
  (f.template operator()<kAllZoneLockPlacements[I]>(), ...);
}
template <class F>
void ForEachPlacement(F&& f) {
  ForEachPlacementImpl(
      f, std::make_index_sequence<std::size(kAllZoneLockPlacements)>{});
}
/// Calls f.template operator()<kLine>() for every line size of kLines.
template <class F, std::size_t... I>
void ForEachLineImpl(F& f, std::index_sequence<I...>) {
  (f.template operator()<kLines[I]>(), ...);
}
template <class F>
void ForEachLine(F&& f) {
  ForEachLineImpl(f, std::make_index_sequence<std::size(kLines)>{});
}

/// Which suite a point of the table belongs to. Quick: ticket, the two
/// placements of the 2015 thread. Default adds the other two placements and
/// the queued and sleeping locks (12 variants). Full: every lock, pcp batches
/// 31/63, 128-byte lines.
Suite SuiteOf(const std::string& lock, ZoneLockPlacement p, int batch,
              std::size_t line) {
  if (batch != 0 || line != kCacheLine64) return Suite::kFull;
  if (lock == "ticket" && (p == ZoneLockPlacement::kLockBeforeFreeArea ||
                           p == ZoneLockPlacement::kLockAfterFreeArea)) {
    return Suite::kQuick;
  }
  if (lock == "ticket" || lock == "qspinlock" || lock == "pthread_mutex") {
    return Suite::kDefault;
  }
  return Suite::kFull;
}

/// The table: lock x placement x line x pcp_batch, one Zone instantiation per
/// lock x placement x line (pcp_batch is a run-time value).
std::vector<Variant> ZoneLockVariants() {
  std::vector<Variant> out;
  ForEachLock([&]<class L>() {
    ForEachPlacement([&]<ZoneLockPlacement P>() {
      ForEachLine([&]<std::size_t kLine>() {
        for (const int batch : kPcpBatches) {
          Variant v;
          v.params = {{"layout", PlacementName(P)},
                      {"lock", L::kName},
                      {"pcp_batch", std::to_string(batch)},
                      {"line", std::to_string(kLine)}};
          v.suite = SuiteOf(L::kName, P, batch, kLine);
          v.description =
              std::string(PlacementDescription(P)) + "; " + L::kDescription +
              "; " +
              (batch == 0
                   ? std::string("no pcp lists (every alloc and free "
                                 "takes zone->lock)")
                   : "pcp lists, batch " + std::to_string(batch) + ", high " +
                         std::to_string(kPcpHighBatches * batch)) +
              "; " + std::to_string(kLine) +
              "-byte lines; ops_per_s counts alloc+free pairs of one order-0 "
              "page";
          v.make = [batch](const PointEnv& env) -> std::unique_ptr<Workload> {
            return std::make_unique<ZoneLockWorkload<L, P, kLine>>(env, batch);
          };
          out.push_back(std::move(v));
        }
      });
    });
  });
  return out;
}

LOCKLINE_REGISTER_FAMILY(Family{
    .name = "zone_lock",
    .description =
        "order-0 page alloc/free under zone->lock (Linux 4.0 struct zone) for "
        "four lock placements x lock kind x pcp batch x line size: the 2015 "
        "3484b2de9499 regression and its fix; ops_per_s counts alloc+free "
        "pairs",
    .variants = ZoneLockVariants,
    .planned_variants = nullptr,
});

}  // namespace lockline::zone_lock
