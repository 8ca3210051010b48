// pagevec's model: what the kernel does under lru_lock when threads push
// their pages through lru_cache_add and release them (state: lru.h; the
// experiment: bench/pagevec.cpp; docs/experiments.md#families).
//   kernel:2.6.9  lru_cache_add_active (mm/memory.c@v2.6.9:1450) ->
//     __pagevec_lru_add_active (mm/swap.c@v2.6.9:316); release_pages
//     (swap.c@v2.6.9:207) drops the lock when pages_to_free (S slots) fills.
//   kernel:5.8    SetPageActive outside the lock
//     (lru_cache_add_active_or_unevictable, mm/swap.c@v5.8.1:488);
//     __pagevec_lru_add_fn (swap.c@v5.8.1:969), smp_mb__after_atomic
//     (arch/x86/include/asm/barrier.h@v5.8.1:83), update_lru_size;
//     release_pages (swap.c@v5.8.1:827) drops the lock every
//     SWAP_CLUSTER_MAX = 32 pages (swap.c@v5.8.1:844).
// release:unmap  2.6.9: mmu_gather of FREE_PTE_NR = 506
//     (include/asm-generic/tlb.h@v2.6.9:26) released in chunks of 16
//     (mm/swap_state.c@v2.6.9:288-304); 5.8: tlb_batch_pages_flush
//     (mm/mmu_gather.c@v5.8.1:44), MAX_GATHER_BATCH = 510
//     (include/asm-generic/tlb.h@v5.8.1:232).
// release:truncate  pagevec_release of an S-page pagevec.
// release:none  (pmbench, 2020) the reclaim scanner (scanner:on) frees the
//     pages; move_pages_to_lru retakes the lock (mm/vmscan.c@v5.8.1:1967).
// Acquisitions per page: 1/S plus the release holds (KernelAcquisitionsPerPage)
// plus the scanner's (ScannerHoldsPerCycle). Not modelled: swap-out,
// page_referenced, irq-off cost, lru_add_drain, the buddy/pcp free.
// A header so the lock x layout workloads compile in parallel units
// (bench/pagevec.h); Report's and Verify's bodies are in bench/pagevec.cpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/pagevec/lru.h"
#include "harness/family.h"
#include "harness/locks/lock_stat.h"
#include "harness/machine/cpu.h"
#include "harness/machine/helpers.h"
#include "harness/machine/memory.h"
#include "harness/machine/padded_slots.h"
#include "harness/machine/topology.h"
#include "harness/measure/page_work.h"

namespace lockline {
namespace pagevec_bench {

/// The workload: `L` the lru_lock algorithm, `Pv` the pagevec kind.
template <LockAlgorithm L, class Pv>
class PagevecWorkload : public Workload {
 public:
  PagevecWorkload(const PointEnv& env, Config cfg)
      : cfg_(cfg),
        env_(env),
        per_thread_(static_cast<std::size_t>(env.threads), kDeferConstruction) {
    if (cfg_.work_ns != 0) {
      cfg_.work_caches = ReadWorkCaches(env.topology);
      cfg_.work_ring_pages = WorkRingPages(cfg_.work_caches, env.threads);
    }
    const bool bind = cfg_.zones > 1 && env.topology != nullptr &&
                      env.topology->summary().numa_nodes >= cfg_.zones;
    for (int z = 0; z < cfg_.zones; ++z) {
      PointEnv zone_env = env;
      // A per-NUMA LRU lives on its node, as the kernel's pgdat does.
      if (bind) zone_env.mem_policy = "node:" + std::to_string(z);
      zones_.push_back(MakeShared<LruZone<L>>(zone_env));
    }
    if (cfg_.release == Release::kNone && !cfg_.scanner)
      throw std::invalid_argument(
          "pagevec: release:none needs scanner:on (reclaim frees the pages)");
    if (cfg_.scanner) StartScanners();
  }
  ~PagevecWorkload() override { StopScanners(); }

  void SetupThread(const ThreadCtx& ctx) override {
    const int s = cfg_.slots;
    const int g = GatherPages(cfg_.kernel, cfg_.release, s);
    const std::size_t stride = PvStride(Pv::Bytes(s), cfg_.offset, cfg_.line);
    // Pool: resident pages, two pagevecs, a gather and the scanner's slack;
    // built before any page is on the LRU (the scanner returns pages here).
    PerThread<Pv>* me = &per_thread_.Emplace(
        ctx.index, kResidentPages + 2 * s + 1 + g + kPoolSlack, stride,
        cfg_.line);
    me->zone = ctx.numa >= 0 ? ctx.numa % cfg_.zones : 0;
    me->index = ctx.index;
    me->gather.assign(static_cast<std::size_t>(std::max(g, 1)), nullptr);
    if (cfg_.work_ns != 0) me->work.Allocate(cfg_.work_ring_pages);
    // A scanner on a measured PU: waiters may yield (workers_spin_yield).
    if (cfg_.scanner && scanner_shares_pu_)
      SetSpinYield(SpinYield::kAfterSpins);
    for (int i = 0; i < me->pool_size; ++i) {
      me->pool[i].private_ = static_cast<unsigned long>(ctx.index);  // owner
      me->free_pages.Push(&me->pool[i]);
    }
    // The resident pages onto the LRU: one plain acquisition, not in the
    // stats (release:none: they are the LRU's, not the thread's FIFO).
    LruZone<L>& zone = *zones_[me->zone];
    zone.lru_lock.lock();
    for (int i = 0; i < kResidentPages; ++i) {
      Page* p = me->free_pages.Pop();
      set_page_count(*p, 1);
      SetPageFlag(*p, kPgSwapBacked);
      SetPageActive(*p);
      SetPageLru(*p);
      ListAdd(&p->lru, zone.List(cfg_.kernel));
      ++zone.Count(cfg_.kernel);
      if (cfg_.release != Release::kNone) me->on_lru.Push(p);
    }
    zone.lru_lock.unlock();
    ++me->setup_acquisitions;
    me->free_pv = Pv::Place(me->pv_storage + stride + cfg_.offset, s);
    if (!cfg_.rapid) {
      me->add_pv = Pv::Place(me->pv_storage + cfg_.offset, s);
      // The gather half full, so add drains and release flushes interleave.
      if (cfg_.release != Release::kNone) {
        for (int i = 0; i < g / 2; ++i)
          me->gather[me->gather_nr++] = me->on_lru.Pop();
      }
    }
  }

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    return Run(ctx, [&stop] { return !stop.load(std::memory_order_relaxed); });
  }

  /// For tests: exactly `batches` batches of S pages on the calling thread
  /// (as RunWindow does between stop checks); returns the pages.
  uint64_t RunBatches(const ThreadCtx& ctx, uint64_t batches) {
    return Run(ctx, [&batches] { return batches-- > 0; });
  }

  void Report(PointReport& out, double window_seconds, uint64_t ops) override {
    StopScanners();  // after the last window: their counters are final
    harness_ops_ = ops;
    ReportPagevec(out, window_seconds, ops, Facts(false));
  }

  /// LRU integrity, page conservation and exact acquisitions (VerifyPagevec).
  /// Stops the scanner threads first (call it after the last window).
  std::string Verify() override {
    StopScanners();
    return VerifyPagevec(Facts(true));
  }

  /// What Report and Verify (`held`: with each thread's pages) read.
  PagevecFacts Facts(bool held) {
    PagevecFacts f{.cfg = cfg_,
                   .env = &env_,
                   .lock = L::kName,
                   .pv_bytes = Pv::Bytes(cfg_.slots),
                   .pv_name = Pv::Name(cfg_.slots),
                   .harness_ops = harness_ops_,
                   .scanner_places = scanner_places_,
                   .scanner_shares_pu = scanner_shares_pu_};
    for (std::size_t i = 0; i < per_thread_.size(); ++i)
      f.threads.push_back(FactsOf(per_thread_.get(i), held));
    for (int z = 0; z < cfg_.zones; ++z)
      f.lists.push_back(
          {zones_[z]->List(cfg_.kernel), zones_[z]->Count(cfg_.kernel)});
    // 5.8: then LRU_INACTIVE_ANON (the scanner's deactivated pages).
    for (int z = 0; z < cfg_.zones && cfg_.kernel == Kernel::k58; ++z)
      f.lists.push_back(
          {zones_[z]->Inactive58(), zones_[z]->InactiveCount58()});
    for (const auto& sc : scanners_) {
      f.scanners.push_back({sc->cycles, sc->on_demand_cycles, sc->isolated,
                            sc->freed, sc->stat.acquisitions,
                            sc->skipped_putbacks, sc->pu});
    }
    return f;
  }

  /// For tests: a thread's state and a zone.
  PerThread<Pv>* thread_state(int i) { return per_thread_.get(i); }
  LruZone<L>* zone(int z) { return zones_[z].get(); }

 private:
  /// One reclaim scanner: thread, own lock statistics, PU.
  struct Scanner {
    std::thread thread;
    /// Scanner-written: off the other fields' lines.
    alignas(kDestructiveLine) LockStatThread stat;
    uint64_t cycles = 0, isolated = 0, freed = 0;
    uint64_t on_demand_cycles = 0;  ///< cycles for a waiting worker
    uint64_t skipped_putbacks = 0;  ///< 5.8 cycles that isolated nothing
    uint64_t scanned_mark = 0;      ///< zone.added value covered by past cycles
    int pu = -1;
    int zone = 0;
  };

  /// The operation loop: batches of S pages while more() says so.
  template <class More>
  uint64_t Run(const ThreadCtx& ctx, More&& more) {
    PerThread<Pv>& me = per_thread_[ctx.index];  // once, outside the loop
    LruZone<L>& zone = *zones_[me.zone];
    const int s = cfg_.slots;
    const bool release = cfg_.release != Release::kNone;
    uint64_t n = 0;
    running_.fetch_add(1, std::memory_order_relaxed);
    if (!cfg_.rapid) {
      while (more()) {
        TakeReturned(me, s);
        for (int i = 0; i < s; ++i) {
          Work(me, 1);
          Page* p = me.free_pages.Pop();
          Allocated(*p);
          // lru_cache_add: a reference for the pagevec, drain when full.
          get_page(*p);
          if (Pv::Add(me.add_pv, p) == 0) LruAddDrain(me, zone, me.add_pv);
          // The page added kResidentPages ago is unmapped into the gather.
          if (release) Gather(me, zone, me.on_lru.Pop());
        }
        n += s;
      }
    } else {
      // An on-stack pagevec at the offset in a line-aligned buffer.
      alignas(256) unsigned char stack_buf[Pagevec5xBytes(kMaxSlots) + 256];
      void* at = AlignedWithOffset(stack_buf, sizeof(stack_buf), cfg_.line,
                                   cfg_.offset, Pv::Bytes(s));
      typename Pv::Handle pv = Pv::Place(at, s);
      while (more()) {
        TakeReturned(me, s);
        // The caller's work for the batch, then a gang of S pages rapid-fire.
        Work(me, s);
        for (int i = 0; i < s; ++i) {
          Page* p = me.free_pages.Pop();
          Allocated(*p);
          get_page(*p);
          Pv::Add(pv, p);
        }
        LruAddDrain(me, zone, pv);
        if (release)
          for (int i = 0; i < s; ++i) Gather(me, zone, me.on_lru.Pop());
        n += s;
      }
    }
    // The window holds the reclaim of the pages it added (to one partial
    // cycle; other workers' later adds are not waited for).
    if (cfg_.scanner) {
      const uint64_t target = zone.added.load(std::memory_order_relaxed);
      while (zone.covered.load(std::memory_order_acquire) + kSwapClusterMax <=
                 target &&
             !quit_.load(std::memory_order_relaxed))
        WaitForScanner();
    }
    running_.fetch_sub(1, std::memory_order_relaxed);
    me.ops += n;
    return n;
  }

  /// lru_lock with lock_stat, or plain (stats:off twin; still counted).
  void Acquire(L& lock, LockStatThread& st) {
    LockCounted(lock, st, cfg_.stats);
  }
  void Release(L& lock, LockStatThread& st) {
    UnlockCounted(lock, st, cfg_.stats);
  }

  /// work_ns for `pages` pages outside the lock (page_work.h).
  void Work(PerThread<Pv>& me, int pages) {
    if (cfg_.work_ns == 0) return;
    const uint64_t spin =
        WorkSpinNs(cfg_.work_ns, cfg_.work_calibrated, cfg_.calibration);
    for (int i = 0; i < pages; ++i) me.work.Page(spin);
  }

  /// A new anonymous page, the owner's reference (5.8: PG_swapbacked and
  /// SetPageActive before lru_cache_add, outside the lock).
  void Allocated(Page& p) const {
    set_page_count(p, 1);
    if (cfg_.kernel == Kernel::k58) {
      SetPageFlag(p, kPgSwapBacked);
      SetPageActive(p);
    }
  }

  /// Takes back the pages the scanner freed, waiting while fewer than
  /// `need` are free.
  void TakeReturned(PerThread<Pv>& me, int need) {
    while (true) {
      if (me.n_returned.load(std::memory_order_acquire) > 0) {
        std::lock_guard<std::mutex> g(me.returned_mu);
        for (Page* p : me.returned) me.free_pages.Push(p);
        me.returned.clear();
        me.n_returned.store(0, std::memory_order_relaxed);
      }
      if (me.free_pages.size() >= static_cast<std::size_t>(need)) return;
      // Short of pages: ask for one reclaim cycle (kswapd's wakeup); the
      // scanner consumes the request, one cycle each.
      std::atomic<int>& wanted = zones_[me.zone]->reclaim_wanted;
      if (cfg_.scanner && me.n_returned.load(std::memory_order_acquire) == 0 &&
          wanted.load(std::memory_order_relaxed) == 0) {
        wanted.store(1, std::memory_order_relaxed);
      }
      WaitForScanner();
    }
  }

  /// One wait for the scanner: yield when it shares this PU.
  void WaitForScanner() const {
    if (scanner_shares_pu_) {
      std::this_thread::yield();
    } else {
      CpuRelax();
    }
  }

  /// update_lru_size (include/linux/mm_inline.h@v5.8.1), lru_lock held:
  /// per-CPU diffs folded at kStatFold58, memcg lru_zone_size in place.
  static void UpdateLruSize58(LruZone<L>& zone, long* node_diff,
                              long* zone_diff, long* memcg_diff, long nr,
                              int lru = kLruActiveAnon) {
    const auto mod = [](long* diff, std::atomic<long>& total, long d) {
      long x = *diff + d;
      if (x > kStatFold58 || x < -kStatFold58) {
        total.fetch_add(x, std::memory_order_relaxed);
        x = 0;
      }
      *diff = x;
    };
    mod(node_diff, zone.node_lru, nr);
    mod(zone_diff, zone.zone_lru, nr);
    mod(memcg_diff, zone.memcg_lru, nr);
    zone.lru_zone_size[kZoneNormal][lru] += static_cast<unsigned long>(nr);
  }

  /// The lru_add drain, one hold: __pagevec_lru_add_active
  /// (swap.c@v2.6.9:316) or pagevec_lru_move_fn + __pagevec_lru_add_fn
  /// (swap.c@v5.8.1:206, 969); then the pagevec's references are dropped.
  void LruAddDrain(PerThread<Pv>& me, LruZone<L>& zone,
                   typename Pv::Handle& pv) {
    const int n = Pv::Count(pv);
    ++me.add_drains;
    Acquire(zone.lru_lock, me.stat);
    if (cfg_.kernel == Kernel::k269) {
      for (int i = 0; i < n; ++i) {
        Page* p = Pv::At(pv, i);
        if (TestSetPageFlag(*p, kPgLru)) ++me.anomalies;     // BUG()
        if (TestSetPageFlag(*p, kPgActive)) ++me.anomalies;  // BUG()
        ListAdd(&p->lru, &zone.lru);  // add_page_to_active_list
      }
      zone.nr_lru += n;
    } else {
      for (int i = 0; i < n; ++i) {
        Page* p = Pv::At(pv, i);
        const bool was_unevictable = TestClearPageFlag(*p, kPgUnevictable);
        if (PageLru(*p)) ++me.anomalies;  // VM_BUG_ON_PAGE(PageLRU)
        SetPageLru(*p);
        SmpMbAfterAtomic();
        // page_evictable (anonymous: no mapping flags to read).
        const bool evictable = benchmark_volatile_read(p->mapping) == nullptr &&
                               !TestPageFlag(*p, kPgMlocked);
        // page_lru: LRU_ACTIVE_ANON for these pages.
        if (!evictable || TestPageFlag(*p, kPgUnevictable) ||
            !TestPageFlag(*p, kPgSwapBacked) || !PageActive(*p) ||
            was_unevictable) {
          ++me.anomalies;
        }
        UpdateLruSize58(zone, &me.node_diff, &me.zone_diff, &me.memcg_diff, 1);
        ListAdd(&p->lru, &zone.lists58[kLruActiveAnon]);
      }
    }
    Release(zone.lru_lock, me.stat);
    if (cfg_.scanner)
      zone.added.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
    const bool keep = cfg_.release != Release::kNone;
    for (int i = 0; i < n; ++i) {
      Page* p = Pv::At(pv, i);
      if (put_page_testzero(*p)) ++me.anomalies;
      if (keep) me.on_lru.Push(p);
    }
    Pv::Reinit(pv);
  }

  /// A volatile read (not dropped or hoisted across the lock).
  static const void* benchmark_volatile_read(void* const& field) {
    return *static_cast<void* const volatile*>(&field);
  }

  /// tlb_remove_page / pagevec_add: `p` joins the gather, flushed when full.
  void Gather(PerThread<Pv>& me, LruZone<L>& zone, Page* p) {
    me.gather[me.gather_nr++] = p;
    if (me.gather_nr == GatherPages(cfg_.kernel, cfg_.release, cfg_.slots))
      FlushGather(me, zone);
  }

  /// tlb_flush_mmu -> free_pages_and_swap_cache (2.6.9, chunks of 16),
  /// tlb_batch_pages_flush (5.8), or pagevec_release (truncate).
  void FlushGather(PerThread<Pv>& me, LruZone<L>& zone) {
    const int n = me.gather_nr;
    me.expected_release_locks +=
        ReleaseFlushLocks(cfg_.kernel, cfg_.release, cfg_.slots, n);
    const int call = ReleaseCallPages(cfg_.kernel, cfg_.release, cfg_.slots);
    for (int done = 0; done < n; done += call)
      ReleasePages(me, zone, &me.gather[done], std::min(call, n - done));
    me.gather_nr = 0;
  }

  /// release_pages (swap.c@v2.6.9:207, swap.c@v5.8.1:827): a page whose
  /// count reaches zero leaves the LRU under lru_lock (taken at the first);
  /// 2.6.9 unlocks when pages_to_free fills, 5.8 every SWAP_CLUSTER_MAX.
  /// A page still referenced is the scanner's to free.
  void ReleasePages(PerThread<Pv>& me, LruZone<L>& zone, Page** pages, int n) {
    const int hold = ReleaseHoldPages(cfg_.kernel, cfg_.slots);
    const uint64_t expected_locks =
        static_cast<uint64_t>((n + hold - 1) / hold);
    uint64_t locks = 0;
    bool locked = false;
    int lock_batch = 0;  // 5.8: iterations under this hold
    if (cfg_.kernel == Kernel::k269) {
      typename Pv::Handle& to_free = me.free_pv;  // pages_to_free
      for (int i = 0; i < n; ++i) {
        Page* p = pages[i];
        if (!put_page_testzero(*p)) {
          ++me.handed_to_scanner;  // the scanner's put will free it
          continue;
        }
        if (!locked) {
          Acquire(zone.lru_lock, me.stat);
          locked = true;
          ++locks;
        }
        if (TestClearPageLru(*p)) {
          ListDel(&p->lru);  // del_page_from_lru
          if (PageActive(*p)) {
            ClearPageActive(*p);
            --zone.nr_lru;
          } else {
            ++me.anomalies;  // nr_inactive--: never on this list
          }
        } else {
          ++me.anomalies;
        }
        if (Pv::Add(to_free, p) == 0) {
          // pages_to_free is full: unlock, __pagevec_free, relock on demand.
          Release(zone.lru_lock, me.stat);
          locked = false;
          FreePagevec(me, to_free);
        }
      }
      if (locked) Release(zone.lru_lock, me.stat);
      FreePagevec(me, to_free);
    } else {
      Page* freed[kMaxGatherBatch58];
      int kept = 0;
      for (int i = 0; i < n; ++i) {
        Page* p = pages[i];
        if (locked && ++lock_batch == kSwapClusterMax) {
          Release(zone.lru_lock, me.stat);
          locked = false;
        }
        if (!put_page_testzero(*p)) {
          ++me.handed_to_scanner;  // the scanner's put will free it
          continue;
        }
        if (!locked) {
          Acquire(zone.lru_lock, me.stat);
          locked = true;
          lock_batch = 0;
          ++locks;
        }
        if (PageLru(*p)) {
          ClearPageFlagNonAtomic(*p, kPgLru);  // __ClearPageLRU
          // page_off_lru: PageUnevictable, page_lru_base_type, PageActive
          // (__ClearPageActive, non-atomic).
          // A page the scanner deactivated is on LRU_INACTIVE_ANON.
          if (TestPageFlag(*p, kPgUnevictable) ||
              !TestPageFlag(*p, kPgSwapBacked) ||
              (!PageActive(*p) && !cfg_.scanner)) {
            ++me.anomalies;
          }
          const int lru = PageActive(*p) ? kLruActiveAnon : kLruInactiveAnon;
          ClearPageFlagNonAtomic(*p, kPgActive);
          ListDel(&p->lru);  // del_page_from_lru_list
          UpdateLruSize58(zone, &me.node_diff, &me.zone_diff, &me.memcg_diff,
                          -1, lru);
        } else {
          ++me.anomalies;
        }
        freed[kept++] = p;
      }
      if (locked) Release(zone.lru_lock, me.stat);
      for (int i = 0; i < kept; ++i) me.free_pages.Push(freed[i]);
    }
    // Holds skipped for the scanner's pages, for Verify's exact count.
    me.release_lock_skips += expected_locks - std::min(expected_locks, locks);
  }

  /// __pagevec_free of 2.6.9's pages_to_free: the pages back to the pool.
  void FreePagevec(PerThread<Pv>& me, typename Pv::Handle& pv) {
    for (int i = 0; i < Pv::Count(pv); ++i) me.free_pages.Push(Pv::At(pv, i));
    Pv::Reinit(pv);
  }

  // ---- the reclaim scanner ----------------------------------------------

  /// The scanners' PUs by the helper rule (harness/machine/helpers.h), else
  /// the plan's last PU(s), shared; -1 without a host topology (tests).
  void PickScannerPus() {
    for (auto& sc : scanners_) sc->pu = -1;
    scanner_places_.clear();
    if (env_.topology == nullptr || !env_.topology->is_host()) return;
    if (env_.plan != nullptr) {
      // A core of its own first, else an idle SMT sibling (flagged).
      for (const bool smt : {false, true}) {
        std::vector<HelperPlace> places = PlaceHelpersNear(
            env_.topology->usable_pus(), *env_.plan,
            static_cast<int>(scanners_.size()), {.allow_smt_sibling = smt});
        if (places.size() >= scanners_.size()) {
          for (std::size_t i = 0; i < scanners_.size(); ++i)
            scanners_[i]->pu = places[i].pu;
          scanner_places_ = std::move(places);
          return;
        }
      }
    }
    std::vector<int> used;
    if (env_.plan != nullptr)
      for (const auto& pu : env_.plan->pus) used.push_back(pu.os_index);
    scanner_shares_pu_ = true;
    for (std::size_t i = 0; i < scanners_.size(); ++i) {
      scanners_[i]->pu =
          used.empty() ? -1 : used[used.size() - 1 - i % used.size()];
    }
  }

  void StartScanners() {
    for (int z = 0; z < cfg_.zones; ++z) {
      auto sc = std::make_unique<Scanner>();
      sc->zone = z;
      scanners_.push_back(std::move(sc));
    }
    PickScannerPus();
    if (env_.topology == nullptr) scanner_shares_pu_ = false;
    for (auto& sc : scanners_) {
      Scanner* s = sc.get();
      s->thread = StartThread("scanner", [this, s] { ScannerMain(*s); });
    }
  }

  void StopScanners() {
    quit_.store(true, std::memory_order_seq_cst);
    for (auto& sc : scanners_)
      if (sc->thread.joinable()) sc->thread.join();
  }

  /// One cycle per kSwapClusterMax pages added, while a worker runs.
  void ScannerMain(Scanner& s) {
    if (s.pu >= 0) {
      try {
        BindThisThread(*env_.topology, s.pu);
      } catch (const std::exception&) {
        s.pu = -1;
      }
    }
    // Spins like any lock user; may yield on a shared PU.
    SetSpinYield(scanner_shares_pu_ ? SpinYield::kAfterSpins
                                    : SpinYield::kNever);
    LruZone<L>& zone = *zones_[s.zone];
    s.scanned_mark = zone.added.load(std::memory_order_relaxed);
    zone.covered.store(s.scanned_mark, std::memory_order_release);
    while (!quit_.load(std::memory_order_relaxed)) {
      const uint64_t added = zone.added.load(std::memory_order_relaxed);
      const bool paced =
          added - s.scanned_mark >= static_cast<uint64_t>(kSwapClusterMax);
      const bool wanted =
          zone.reclaim_wanted.load(std::memory_order_relaxed) > 0;
      if (running_.load(std::memory_order_relaxed) == 0 ||
          (!paced && !wanted)) {
        // Sleeps, as kswapd does.
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        continue;
      }
      // Paced: the next kSwapClusterMax pages; on demand (reclaim_wanted):
      // every page added so far.
      s.scanned_mark = paced ? s.scanned_mark + kSwapClusterMax : added;
      ScanCycle(s, zone);
      s.on_demand_cycles += paced ? 0 : 1;
      zone.covered.store(s.scanned_mark, std::memory_order_release);
      if (!paced) zone.reclaim_wanted.store(0, std::memory_order_relaxed);
    }
  }

  /// 5.8: shrink_active_list then shrink_inactive_list (4 holds); 2.6.9:
  /// an isolate and a putback of the one list (2 holds).
  void ScanCycle(Scanner& s, LruZone<L>& zone) {
    if (cfg_.kernel == Kernel::k58) {
      ShrinkActive58(s, zone);
      ScanCycleFrom(s, zone, zone.Inactive58(), kLruInactiveAnon);
    } else {
      ScanCycleFrom(s, zone, zone.List(cfg_.kernel), kLruActiveAnon);
    }
    ++s.cycles;
  }

  /// isolate_lru_pages (mm/vmscan.c@v5.8.1, 2.6.9 alike), lru_lock held:
  /// up to SWAP_CLUSTER_MAX tail pages to `into` with a reference, PG_lru
  /// cleared; a page being freed is rotated to the head. Returns the count.
  long IsolateLruPages(ListHead* list, ListHead* into) {
    long nr = 0;
    for (int scan = 0; scan < kSwapClusterMax && !ListEmpty(list); ++scan) {
      Page* p = PageFromLru(list->prev);
      // __isolate_lru_page: PageLRU, then get_page_unless_zero.
      if (!PageLru(*p) || !get_page_unless_zero(*p)) {
        ListMove(&p->lru, list);
        continue;
      }
      ClearPageLru(*p);
      ListMove(&p->lru, into);
      ++nr;
    }
    return nr;
  }

  /// shrink_active_list (mm/vmscan.c@v5.8.1): isolate from LRU_ACTIVE_ANON
  /// (hold 1), deactivate outside the lock (anon pages are never kept
  /// active), move_pages_to_lru onto LRU_INACTIVE_ANON (hold 2).
  void ShrinkActive58(Scanner& s, LruZone<L>& zone) {
    ListHead l_hold;
    ListInit(&l_hold);
    long node_diff = 0, zone_diff = 0, memcg_diff = 0;  // the scanner's CPU
    Acquire(zone.lru_lock, s.stat);
    const long nr = IsolateLruPages(zone.List(Kernel::k58), &l_hold);
    UpdateLruSize58(zone, &node_diff, &zone_diff, &memcg_diff, -nr,
                    kLruActiveAnon);
    Release(zone.lru_lock, s.stat);
    for (ListHead* n = l_hold.next; n != &l_hold; n = n->next)
      ClearPageActive(*PageFromLru(n));  // outside the lock
    PutBack(s, zone, &l_hold, zone.Inactive58(), false, [&](long d) {
      UpdateLruSize58(zone, &node_diff, &zone_diff, &memcg_diff, d,
                      kLruInactiveAnon);
    });
    FoldScannerDiffs(zone, node_diff, zone_diff, memcg_diff);
  }

  /// shrink_inactive_list (mm/vmscan.c@v5.8.1): isolate from `list` (lru:
  /// its index; 2.6.9: the one list), reclaim, move_pages_to_lru.
  void ScanCycleFrom(Scanner& s, LruZone<L>& zone, ListHead* list, int lru) {
    const Kernel k = cfg_.kernel;
    ListHead isolated;
    ListInit(&isolated);
    long node_diff = 0, zone_diff = 0, memcg_diff = 0;  // the scanner's CPU
    const auto resize = [&](long d) {
      if (k == Kernel::k269) {
        zone.nr_lru += static_cast<unsigned long>(d);
      } else {
        UpdateLruSize58(zone, &node_diff, &zone_diff, &memcg_diff, d, lru);
      }
    };
    Acquire(zone.lru_lock, s.stat);
    const long nr = IsolateLruPages(list, &isolated);
    resize(-nr);
    Release(zone.lru_lock, s.stat);
    s.isolated += static_cast<uint64_t>(nr);
    if (nr == 0 && k == Kernel::k58) {
      // No hold 4 when nothing was isolated (mm/vmscan.c@v5.8.1:1961-1962).
      ++s.skipped_putbacks;
      return;
    }
    if (cfg_.release == Release::kNone) {
      // shrink_page_list: __remove_mapping's page_ref_freeze(page, 2)
      // (mm/vmscan.c@v5.8.1); a page still in a worker's pagevec is busy
      // and goes back to the LRU.
      ListHead busy;
      ListInit(&busy);
      while (!ListEmpty(&isolated)) {
        Page* p = PageFromLru(isolated.next);
        int expected = 2;
        if (!p->_refcount.compare_exchange_strong(expected, 0,
                                                  std::memory_order_seq_cst)) {
          ListMove(&p->lru, &busy);
          continue;
        }
        ListDel(&p->lru);
        ClearPageActive(*p);
        ScannerFrees(s, p);
      }
      while (!ListEmpty(&busy)) ListMove(busy.next, &isolated);
    }
    // move_pages_to_lru retakes the lock even with nothing to put back
    // (mm/vmscan.c@v5.8.1:1967).
    PutBack(s, zone, &isolated, list, true, resize);
    FoldScannerDiffs(zone, node_diff, zone_diff, memcg_diff);
  }

  /// move_pages_to_lru under one hold: `pages` onto `list` (`resize` counts
  /// them); a page whose last reference that was is freed after the hold.
  template <class Resize>
  void PutBack(Scanner& s, LruZone<L>& zone, ListHead* pages, ListHead* list,
               bool clear_active, const Resize& resize) {
    ListHead to_free;
    ListInit(&to_free);
    Acquire(zone.lru_lock, s.stat);
    while (!ListEmpty(pages)) {
      Page* p = PageFromLru(pages->next);
      SetPageLru(*p);
      ListMove(&p->lru, list);
      resize(1);
      if (put_page_testzero(*p)) {  // the owner released it meanwhile
        ClearPageLru(*p);
        if (clear_active) ClearPageActive(*p);
        ListMove(&p->lru, &to_free);
        resize(-1);
      }
    }
    Release(zone.lru_lock, s.stat);
    FreeAfterHold(s, &to_free);
  }

  /// refresh_cpu_vm_stats: the scanner's diffs into the totals.
  static void FoldScannerDiffs(LruZone<L>& zone, long node_diff, long zone_diff,
                               long memcg_diff) {
    zone.node_lru.fetch_add(node_diff, std::memory_order_relaxed);
    zone.zone_lru.fetch_add(zone_diff, std::memory_order_relaxed);
    zone.memcg_lru.fetch_add(memcg_diff, std::memory_order_relaxed);
  }

  /// The scanner dropped `p`'s last reference: back to its owner's pool.
  void ScannerFrees(Scanner& s, Page* p) {
    PerThread<Pv>& owner = per_thread_[p->private_];
    std::lock_guard<std::mutex> g(owner.returned_mu);
    owner.returned.push_back(p);
    owner.n_returned.store(static_cast<int>(owner.returned.size()),
                           std::memory_order_release);
    ++s.freed;
  }

  /// Pages a putback dropped the last reference of, freed after the hold
  /// (mm/vmscan.c@v5.8.1:1875-1896, :1979-1982, :2098-2101).
  void FreeAfterHold(Scanner& s, ListHead* to_free) {
    while (!ListEmpty(to_free)) {
      Page* p = PageFromLru(to_free->next);
      ListDel(&p->lru);
      ScannerFrees(s, p);
    }
  }

  /// A thread's counters and, with `held`, its pages by place and refcount:
  /// free or returned 0, on the LRU (FIFO, gather) 1, add pagevec 2.
  ThreadFacts FactsOf(const PerThread<Pv>* t, bool held) const {
    if (t == nullptr) return {};
    ThreadFacts f{.stat = &t->stat,
                  .pool = t->pool.get(),
                  .pool_size = t->pool_size,
                  .zone = t->zone,
                  .ops = t->ops,
                  .add_drains = t->add_drains,
                  .expected_release_locks = t->expected_release_locks,
                  .setup_acquisitions = t->setup_acquisitions,
                  .anomalies = t->anomalies,
                  .handed_to_scanner = t->handed_to_scanner,
                  .release_lock_skips = t->release_lock_skips};
    if (!held) return f;
    for (std::size_t i = 0; i < t->free_pages.size(); ++i)
      f.held.push_back({t->free_pages.at(i), false, 0});
    for (const Page* p : t->returned) f.held.push_back({p, false, 0});
    for (std::size_t i = 0; i < t->on_lru.size(); ++i)
      f.held.push_back({t->on_lru.at(i), true, 1});
    for (int i = 0; i < t->gather_nr; ++i)
      f.held.push_back({t->gather[i], true, 1});
    for (int i = 0; !cfg_.rapid && i < Pv::Count(t->add_pv); ++i)
      f.held.push_back({Pv::At(t->add_pv, i), false, 2});
    return f;
  }

  Config cfg_;
  PointEnv env_;
  std::vector<std::shared_ptr<LruZone<L>>> zones_;
  PaddedSlots<PerThread<Pv>> per_thread_;
  std::vector<std::unique_ptr<Scanner>> scanners_;
  std::vector<HelperPlace> scanner_places_;  ///< the helper rule's places
  bool scanner_shares_pu_ = false;
  std::atomic<bool> quit_{false};
  std::atomic<int> running_{0};
  uint64_t harness_ops_ = 0;
};

}  // namespace pagevec_bench
}  // namespace lockline
