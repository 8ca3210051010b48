// pagevec's model: what the kernel does at each version when threads push
// their own pages through lru_cache_add and release them on a shared LRU (the
// state it works on is bench/pagevec/lru.h; bench/pagevec.cpp is the
// experiment run on it: the grid, the report and the checks). The per-page
// work under the lock follows the kernel the row names (checked in the trees
// named):
//   kernel:2.6.9  anonymous pages go through lru_cache_add_active
//                 (mm/memory.c@v2.6.9:1450) -> __pagevec_lru_add_active
//                 (mm/swap.c@v2.6.9:316): TestSetPageLRU, TestSetPageActive,
//                 add_page_to_active_list, nr_active++; release_pages
//                 (swap.c@v2.6.9:207): TestClearPageLRU, del_page_from_lru
//                 (list_del, ClearPageActive, nr_active--), the lock dropped
//                 when its own pages_to_free pagevec (PAGEVEC_SIZE = the
//                 swept slot count) fills;
//   kernel:5.8    anonymous pages are SetPageActive'd by
//                 lru_cache_add_active_or_unevictable (mm/swap.c@v5.8.1:488)
//                 outside the lock; __pagevec_lru_add_fn (swap.c@v5.8.1:969):
//                 TestClearPageUnevictable, SetPageLRU, smp_mb__after_atomic
//                 (empty on x86, arch/x86/include/asm/barrier.h@v5.8.1:83: a
//                 compiler barrier here, a real fence on weakly ordered CPUs),
//                 page_evictable, update_lru_size (node, zone and memcg
//                 per-CPU counters, memcg lru_zone_size), list_add on the
//                 memcg lruvec's LRU_ACTIVE_ANON; release_pages
//                 (swap.c@v5.8.1:827): __ClearPageLRU, page_off_lru
//                 (__ClearPageActive), del_page_from_lru_list, the lock dropped
//                 every SWAP_CLUSTER_MAX = 32 pages (swap.c@v5.8.1:844).
// release:R says where released pages come from:
//   unmap     exit/munmap. 2.6.9: the mmu_gather collects FREE_PTE_NR = 506
//             pages (include/asm-generic/tlb.h@v2.6.9:26), then
//             free_pages_and_swap_cache hands release_pages chunks of 16
//             (mm/swap_state.c@v2.6.9:288-304): ceil(16 / S) holds per 16
//             pages. 5.8: tlb_batch_pages_flush (mm/mmu_gather.c@v5.8.1:44)
//             hands release_pages a whole batch of MAX_GATHER_BATCH = 510
//             pages (include/asm-generic/tlb.h@v5.8.1:232), one hold per 32.
//             Both are independent of the add side's S except 2.6.9's
//             pages_to_free;
//   truncate  pagevec_release of an S-page pagevec (truncate_inode_pages'
//             shape): one release_pages call per S pages;
//   none      the 2020 pmbench case: nothing is released per operation; the
//             reclaim scanner (scanner:on required) isolates pages from the
//             LRU tail and frees them (shrink_page_list reclaims every page;
//             move_pages_to_lru still retakes the lock, mm/vmscan.c@v5.8.1:
//             1967).
// lru_lock acquisitions per page without the scanner are exactly 1/S plus the
// release side's holds (KernelAcquisitionsPerPage). scanner:on adds a reclaim
// scanner per lock, under the same lock (ScannerHoldsPerCycle: 4 holds per 32
// pages added for 5.8, 2 for 2.6.9). Simplified: shrink_page_list frees
// without swap-out work, page_referenced is not run (every anonymous page is
// deactivated), no irq-off cost, no icache misses, free_pages_and_swap_cache's
// lru_add_drain is not modelled, the freed pages go back to a private pool (no
// buddy/pcp cost).
//
// A header so that the 5 locks x 6 layouts compile in bench/pagevec/*.cpp in
// parallel on a small CI runner's cores (bench/pagevec.h), and
// tests/pagevec_test.cpp links the same objects. What is not timed
// (Report's and Verify's bodies) is compiled once, in bench/pagevec.cpp.
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
      sides_.push_back(MakeShared<LockStatSide>(zone_env));
    }
    if (cfg_.release == Release::kNone && !cfg_.scanner) {
      throw std::invalid_argument(
          "pagevec: release:none needs scanner:on (reclaim frees the pages)");
    }
    if (cfg_.scanner) StartScanners();
  }
  ~PagevecWorkload() override { StopScanners(); }

  void SetupThread(const ThreadCtx& ctx) override {
    const int s = cfg_.slots;
    const int g = GatherPages(cfg_.kernel, cfg_.release, s);
    const std::size_t stride = PvStride(Pv::Bytes(s), cfg_.offset, cfg_.line);
    // Pool: the resident pages, two pagevecs' worth, a gather's worth (freed
    // only when it flushes) and the scanner's slack.
    // Built in its slot before any of its pages is on the LRU: the scanner
    // returns pages to their owner's slot (ReturnToOwner).
    PerThread<Pv>* me = &per_thread_.Emplace(
        ctx.index, kResidentPages + 2 * s + 1 + g + kPoolSlack, stride,
        cfg_.line);
    me->zone = ctx.numa >= 0 ? ctx.numa % cfg_.zones : 0;
    me->index = ctx.index;
    me->gather.assign(static_cast<std::size_t>(std::max(g, 1)), nullptr);
    if (cfg_.work_ns != 0) me->work.Allocate(cfg_.work_ring_pages);
    // A scanner sharing a measured PU makes the point oversubscribed: a
    // waiter spinning on lru_lock while the scanner holding it is preempted
    // would burn its whole time slice, so these waiters may yield (the row
    // says so in details.scanner.workers_spin_yield).
    if (cfg_.scanner && scanner_shares_pu_)
      SetSpinYield(SpinYield::kAfterSpins);
    for (int i = 0; i < me->pool_size; ++i) {
      me->pool[i].private_ = static_cast<unsigned long>(ctx.index);  // owner
      me->free_pages.Push(&me->pool[i]);
    }
    // Fill the LRU with this thread's resident pages: one plain acquisition,
    // not in the stats. With release:none they belong to the LRU (reclaim
    // frees them), not to the thread's FIFO.
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
      // Stagger the release gather by half so add drains and release flushes
      // interleave.
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

  /// What Report (`held` false) and Verify (`held` true: with the pages each
  /// thread holds) read of the point.
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
  /// The scanner's thread index in lock_stat's hand-off bookkeeping (beyond
  /// any worker's).
  static constexpr int kScannerIndex = 1 << 20;
  /// One reclaim scanner: its thread, its statistics (not part of the
  /// measured threads' lock_stat) and its PU.
  struct Scanner {
    std::thread thread;
    /// Written by the scanner only: kept off the lines of the other fields
    /// (LockStatThread itself aligns to one line only).
    alignas(kDestructiveLine) LockStatThread stat;
    LockStatSide* side = nullptr;
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
    LockStatSide& side = *sides_[me.zone];
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
          // lru_cache_add: take a reference for the pagevec, drain when full.
          get_page(*p);
          if (Pv::Add(me.add_pv, p) == 0)
            LruAddDrain(me, zone, side, me.add_pv, ctx.index);
          // The page added kResidentPages pages ago is unmapped: into the
          // release gather, flushed when full.
          if (release) Gather(me, zone, side, me.on_lru.Pop(), ctx.index);
        }
        n += s;
      }
    } else {
      // An on-stack pagevec, placed at the offset inside a line-aligned stack
      // buffer.
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
        LruAddDrain(me, zone, side, pv, ctx.index);
        if (release) {
          for (int i = 0; i < s; ++i)
            Gather(me, zone, side, me.on_lru.Pop(), ctx.index);
        }
        n += s;
      }
    }
    // The window holds the reclaim of the pages it added:
    // wait until the scanner's cycles cover them, less one partial cycle, so
    // a short window does not end with reclaim owed for its pages.
    if (cfg_.scanner) {
      // The adds up to now (other workers' later adds are not waited for).
      const uint64_t target = zone.added.load(std::memory_order_relaxed);
      while (zone.covered.load(std::memory_order_acquire) + kSwapClusterMax <=
                 target &&
             !quit_.load(std::memory_order_relaxed)) {
        if (scanner_shares_pu_) {
          std::this_thread::yield();
        } else {
          CpuRelax();
        }
      }
    }
    running_.fetch_sub(1, std::memory_order_relaxed);
    me.ops += n;
    return n;
  }

  /// lru_lock with lock_stat (cfg_.stats) or plain (the uninstrumented twin
  /// row; the acquisition count is a private counter either way).
  void Acquire(L& lock, LockStatSide& side, LockStatThread& st, int index) {
    if (cfg_.stats) {
      LockWithStats(lock, side, st, index);
    } else {
      ++st.acquisitions;
      lock.lock();
    }
  }
  void Release(L& lock, LockStatThread& st) {
    if (cfg_.stats) {
      UnlockWithStats(lock, st);
    } else {
      lock.unlock();
    }
  }

  /// The kernel path's work for `pages` pages outside the lock: zero one page
  /// of the ring each, then spin for the rest of work_ns.
  void Work(PerThread<Pv>& me, int pages) {
    if (cfg_.work_ns == 0) return;
    const uint64_t spin =
        WorkSpinNs(cfg_.work_ns, cfg_.work_calibrated, cfg_.calibration);
    for (int i = 0; i < pages; ++i) me.work.Page(spin);
  }

  /// The allocation's page state: an anonymous page (5.8 do_anonymous_page
  /// sets PG_swapbacked; lru_cache_add_active_or_unevictable SetPageActive's
  /// it before lru_cache_add, outside the lock), the owner's reference.
  void Allocated(Page& p) const {
    set_page_count(p, 1);
    if (cfg_.kernel == Kernel::k58) {
      SetPageFlag(p, kPgSwapBacked);
      SetPageActive(p);
    }
  }

  /// Moves the pages the scanner freed for this thread back to its free
  /// ring, waiting for them while fewer than `need` pages are free (they
  /// come back before the scanner releases the lock).
  void TakeReturned(PerThread<Pv>& me, int need) {
    while (true) {
      if (me.n_returned.load(std::memory_order_acquire) > 0) {
        std::lock_guard<std::mutex> g(me.returned_mu);
        for (Page* p : me.returned) me.free_pages.Push(p);
        me.returned.clear();
        me.n_returned.store(0, std::memory_order_relaxed);
      }
      if (me.free_pages.size() >= static_cast<std::size_t>(need)) return;
      // Too few free pages, and no request pending: ask reclaim for one cycle
      // even if fewer than 32 pages were added since its last (the window's
      // end would otherwise leave this thread waiting for pages nobody adds).
      // The scanner consumes the request (one cycle per request), so a
      // worker descheduled while it waits does not keep the scanner
      // cycling on an emptied LRU.
      std::atomic<int>& wanted = zones_[me.zone]->reclaim_wanted;
      if (cfg_.scanner && me.n_returned.load(std::memory_order_acquire) == 0 &&
          wanted.load(std::memory_order_relaxed) == 0) {
        wanted.store(1, std::memory_order_relaxed);
      }
      if (scanner_shares_pu_) {
        std::this_thread::yield();  // let the scanner reclaim
      } else {
        CpuRelax();
      }
    }
  }

  /// update_lru_size (include/linux/mm_inline.h@v5.8.1) for `nr` pages of
  /// list `lru` (LRU_ACTIVE_ANON unless said): node, zone and memcg per-CPU
  /// diffs folded at kStatFold58, and the memcg lru_zone_size written in
  /// place (caller holds lru_lock).
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

  /// The lru_add drain, one lru_lock acquisition for the batch:
  /// 2.6.9 __pagevec_lru_add_active (swap.c@v2.6.9:316) or 5.8
  /// pagevec_lru_move_fn with __pagevec_lru_add_fn (swap.c@v5.8.1:206, 969);
  /// then release_pages drops the references lru_cache_add took (never the
  /// last one here, so no lock).
  void LruAddDrain(PerThread<Pv>& me, LruZone<L>& zone, LockStatSide& side,
                   typename Pv::Handle& pv, int index) {
    const int n = Pv::Count(pv);
    ++me.add_drains;
    Acquire(zone.lru_lock, side, me.stat, index);
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
        // page_evictable: !mapping_unevictable(page_mapping(page)) &&
        // !PageMlocked(page); anonymous pages have no mapping flags to read.
        const bool evictable = benchmark_volatile_read(p->mapping) == nullptr &&
                               !TestPageFlag(*p, kPgMlocked);
        // page_lru: PageUnevictable, page_is_file_lru (PG_swapbacked),
        // PageActive: LRU_ACTIVE_ANON for these pages.
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

  /// A volatile read of a pointer field (the compiler cannot drop or hoist
  /// it across the lock).
  static const void* benchmark_volatile_read(void* const& field) {
    return *static_cast<void* const volatile*>(&field);
  }

  /// tlb_remove_page (or pagevec_add on the truncate pagevec): `p` joins the
  /// release gather, flushed when full.
  void Gather(PerThread<Pv>& me, LruZone<L>& zone, LockStatSide& side, Page* p,
              int index) {
    me.gather[me.gather_nr++] = p;
    if (me.gather_nr == GatherPages(cfg_.kernel, cfg_.release, cfg_.slots)) {
      FlushGather(me, zone, side, index);
    }
  }

  /// The gather's flush: 2.6.9 tlb_flush_mmu -> free_pages_and_swap_cache
  /// (release_pages in chunks of 16), 5.8 tlb_batch_pages_flush (one
  /// release_pages call per batch), truncate: pagevec_release.
  void FlushGather(PerThread<Pv>& me, LruZone<L>& zone, LockStatSide& side,
                   int index) {
    const int n = me.gather_nr;
    me.expected_release_locks +=
        ReleaseFlushLocks(cfg_.kernel, cfg_.release, cfg_.slots, n);
    const int call = ReleaseCallPages(cfg_.kernel, cfg_.release, cfg_.slots);
    for (int done = 0; done < n; done += call) {
      ReleasePages(me, zone, side, &me.gather[done], std::min(call, n - done),
                   index);
    }
    me.gather_nr = 0;
  }

  /// release_pages (swap.c@v2.6.9:207, swap.c@v5.8.1:827) of `n` pages: drop
  /// each page's reference; a page whose count reaches zero is taken off the
  /// LRU under lru_lock, taken at the first such page. 2.6.9 drops the lock
  /// when its pages_to_free pagevec (S slots, at the row's offset) fills and
  /// frees the pagevec; 5.8 drops it every SWAP_CLUSTER_MAX iterations and
  /// frees its list at the end. A page whose count does not reach zero is the
  /// scanner's to free (it holds a reference). Freed pages go back to the
  /// thread's pool.
  void ReleasePages(PerThread<Pv>& me, LruZone<L>& zone, LockStatSide& side,
                    Page** pages, int n, int index) {
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
          Acquire(zone.lru_lock, side, me.stat, index);
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
          Acquire(zone.lru_lock, side, me.stat, index);
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
    // The kernel skips the lock for pages whose last reference is the
    // scanner's; count the holds so Verify's exact formula still holds.
    me.release_lock_skips += expected_locks - std::min(expected_locks, locks);
  }

  /// __pagevec_free of 2.6.9's pages_to_free: the pages back to the pool.
  void FreePagevec(PerThread<Pv>& me, typename Pv::Handle& pv) {
    for (int i = 0; i < Pv::Count(pv); ++i) me.free_pages.Push(Pv::At(pv, i));
    Pv::Reinit(pv);
  }

  // ---- the reclaim scanner ----------------------------------------------

  /// The scanners' PUs by the helper rule (harness/machine/helpers.h: a core of
  /// its own on the measured threads' NUMA node); when the rule places fewer
  /// than zones, each scanner shares the plan's last PU(s). -1 (unbound)
  /// without a host topology (tests).
  void PickScannerPus() {
    for (auto& sc : scanners_) sc->pu = -1;
    scanner_places_.clear();
    if (env_.topology == nullptr || !env_.topology->is_host()) return;
    if (env_.plan != nullptr) {
      // A core of its own first; else a spare PU on a measured thread's core
      // (an SMT sibling, flagged), which still shares no measured PU.
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
    if (env_.plan != nullptr) {
      for (const auto& pu : env_.plan->pus) used.push_back(pu.os_index);
    }
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
      sc->side = sides_[z].get();
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
    for (auto& sc : scanners_) {
      if (sc->thread.joinable()) sc->thread.join();
    }
  }

  /// The scanner thread: one isolate + putback cycle per kSwapClusterMax
  /// pages added to its LRU, while any worker is in a window.
  void ScannerMain(Scanner& s) {
    if (s.pu >= 0) {
      try {
        BindThisThread(*env_.topology, s.pu);
      } catch (const std::exception&) {
        s.pu = -1;
      }
    }
    // Kernel reclaim spins like any lock user; sharing a measured PU it is
    // oversubscribed and may yield.
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
        // Sleep, as kswapd does, rather than PAUSE-poll.
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        continue;
      }
      if (paced) {
        s.scanned_mark += kSwapClusterMax;
        ScanCycle(s, zone);
        zone.covered.store(s.scanned_mark, std::memory_order_release);
      } else {
        s.scanned_mark = added;  // an on-demand cycle (reclaim_wanted)
        ScanCycle(s, zone);
        ++s.on_demand_cycles;
        zone.covered.store(s.scanned_mark, std::memory_order_release);
        // The request is served: its pages are back with their owners.
        zone.reclaim_wanted.store(0, std::memory_order_relaxed);
      }
    }
  }

  /// 5.8's reclaim of SWAP_CLUSTER_MAX pages (ScannerHoldsPerCycle: 4 holds):
  /// shrink_active_list moves them from LRU_ACTIVE_ANON to LRU_INACTIVE_ANON
  /// (ShrinkActive58), then shrink_inactive_list reclaims from the inactive
  /// tail (ScanCycleFrom on the inactive list).
  void ScanCycle(Scanner& s, LruZone<L>& zone) {
    if (cfg_.kernel == Kernel::k58) {
      ShrinkActive58(s, zone);
      ScanCycleFrom(s, zone, zone.Inactive58(), kLruInactiveAnon);
    } else {
      ScanCycleFrom(s, zone, zone.List(cfg_.kernel), kLruActiveAnon);
    }
    ++s.cycles;
  }

  /// isolate_lru_pages (mm/vmscan.c@v5.8.1, and 2.6.9's isolate_lru_pages):
  /// up to SWAP_CLUSTER_MAX pages from the tail of `list` move to `into`,
  /// PG_lru cleared, each with a reference taken; a page without PG_lru, or
  /// whose owner dropped the last reference (being freed), is rotated to the
  /// head and left. Returns the pages isolated. Called under lru_lock; writes
  /// only the lines the kernel does (the pages' flags, refcounts and links).
  long IsolateLruPages(ListHead* list, ListHead* into) {
    long nr = 0;
    for (int scan = 0; scan < kSwapClusterMax && !ListEmpty(list); ++scan) {
      Page* p = PageFromLru(list->prev);
      // __isolate_lru_page: PageLRU, then a reference unless the page is
      // being freed (its owner dropped the last one: leave it, rotated).
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

  /// shrink_active_list (mm/vmscan.c@v5.8.1) for up to SWAP_CLUSTER_MAX pages:
  /// isolate_lru_pages from the LRU_ACTIVE_ANON tail under lru_lock (hold 1);
  /// outside it every anonymous page is deactivated (page_referenced keeps
  /// only VM_EXEC file pages active: ClearPageActive, list_add to l_inactive);
  /// move_pages_to_lru puts them on LRU_INACTIVE_ANON under hold 2; a page
  /// whose last reference that was is freed after it (FreeAfterHold).
  void ShrinkActive58(Scanner& s, LruZone<L>& zone) {
    ListHead* active = zone.List(Kernel::k58);
    ListHead l_hold;
    ListInit(&l_hold);
    long node_diff = 0, zone_diff = 0, memcg_diff = 0;  // the scanner's CPU
    Acquire(zone.lru_lock, *s.side, s.stat, kScannerIndex);
    const long nr = IsolateLruPages(active, &l_hold);
    UpdateLruSize58(zone, &node_diff, &zone_diff, &memcg_diff, -nr,
                    kLruActiveAnon);
    Release(zone.lru_lock, s.stat);
    // Deactivation, outside the lock.
    for (ListHead* n = l_hold.next; n != &l_hold; n = n->next)
      ClearPageActive(*PageFromLru(n));
    ListHead to_free;
    ListInit(&to_free);
    Acquire(zone.lru_lock, *s.side, s.stat, kScannerIndex);
    while (!ListEmpty(&l_hold)) {
      Page* p = PageFromLru(l_hold.next);
      SetPageLru(*p);
      ListMove(&p->lru, zone.Inactive58());
      UpdateLruSize58(zone, &node_diff, &zone_diff, &memcg_diff, 1,
                      kLruInactiveAnon);
      if (put_page_testzero(*p)) {
        // The owner released it meanwhile: the scanner frees it.
        ClearPageLru(*p);
        ListMove(&p->lru, &to_free);
        UpdateLruSize58(zone, &node_diff, &zone_diff, &memcg_diff, -1,
                        kLruInactiveAnon);
      }
    }
    Release(zone.lru_lock, s.stat);
    FreeAfterHold(s, &to_free);
    FoldScannerDiffs(zone, node_diff, zone_diff, memcg_diff);
  }

  /// isolate_lru_pages + move_pages_to_lru (mm/vmscan.c@v5.8.1
  /// shrink_inactive_list) for up to SWAP_CLUSTER_MAX pages from the tail of
  /// `list` (5.8: LRU_INACTIVE_ANON, `lru` its index; 2.6.9: the one list).
  void ScanCycleFrom(Scanner& s, LruZone<L>& zone, ListHead* list, int lru) {
    const Kernel k = cfg_.kernel;
    ListHead isolated;
    ListInit(&isolated);
    long node_diff = 0, zone_diff = 0, memcg_diff = 0;  // the scanner's CPU
    Acquire(zone.lru_lock, *s.side, s.stat, kScannerIndex);
    const long nr = IsolateLruPages(list, &isolated);
    if (k == Kernel::k269) {
      zone.nr_lru -= static_cast<unsigned long>(nr);
    } else {
      UpdateLruSize58(zone, &node_diff, &zone_diff, &memcg_diff, -nr, lru);
    }
    Release(zone.lru_lock, s.stat);
    s.isolated += static_cast<uint64_t>(nr);
    if (nr == 0 && k == Kernel::k58) {
      // shrink_inactive_list returns before hold 4 when it isolated nothing
      // (mm/vmscan.c@v5.8.1:1961-1962).
      ++s.skipped_putbacks;
      return;
    }
    if (cfg_.release == Release::kNone) {
      // shrink_page_list reclaims a page only when it holds nothing but the
      // mapping's reference and the isolation's: __remove_mapping's
      // page_ref_freeze(page, 2) (mm/vmscan.c@v5.8.1). A page whose
      // lru_cache_add reference a worker has not dropped yet (the release
      // after __pagevec_lru_add runs outside the lock) is busy: it goes back
      // to the LRU below, as shrink_page_list keeps such pages.
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
    // move_pages_to_lru retakes the lock even when reclaim left nothing to
    // put back (mm/vmscan.c@v5.8.1:1967).
    ListHead to_free;
    ListInit(&to_free);
    Acquire(zone.lru_lock, *s.side, s.stat, kScannerIndex);
    while (!ListEmpty(&isolated)) {
      Page* p = PageFromLru(isolated.next);
      SetPageLru(*p);
      ListMove(&p->lru, list);
      if (k == Kernel::k269) {
        ++zone.nr_lru;
      } else {
        UpdateLruSize58(zone, &node_diff, &zone_diff, &memcg_diff, 1, lru);
      }
      if (put_page_testzero(*p)) {
        // The owner released it meanwhile: the scanner frees it.
        ClearPageLru(*p);
        ClearPageActive(*p);
        ListMove(&p->lru, &to_free);
        if (k == Kernel::k269) {
          --zone.nr_lru;
        } else {
          UpdateLruSize58(zone, &node_diff, &zone_diff, &memcg_diff, -1, lru);
        }
      }
    }
    Release(zone.lru_lock, s.stat);
    FreeAfterHold(s, &to_free);
    FoldScannerDiffs(zone, node_diff, zone_diff, memcg_diff);
  }

  /// refresh_cpu_vm_stats for the scanner's CPU: its LRU counter diffs of a
  /// cycle folded into the node, zone and memcg totals.
  static void FoldScannerDiffs(LruZone<L>& zone, long node_diff, long zone_diff,
                               long memcg_diff) {
    zone.node_lru.fetch_add(node_diff, std::memory_order_relaxed);
    zone.zone_lru.fetch_add(zone_diff, std::memory_order_relaxed);
    zone.memcg_lru.fetch_add(memcg_diff, std::memory_order_relaxed);
  }

  /// The scanner dropped `p`'s last reference: the page goes back to its
  /// owner's pool.
  void ScannerFrees(Scanner& s, Page* p) {
    ReturnToOwner(p);
    ++s.freed;
  }

  /// The pages a putback hold dropped the last reference of, freed after
  /// the lock is released: move_pages_to_lru list_adds them to pages_to_free
  /// under lru_lock and its callers free them after spin_unlock_irq
  /// (mm/vmscan.c@v5.8.1:1875-1896, :1979-1982, :2098-2101).
  void FreeAfterHold(Scanner& s, ListHead* to_free) {
    while (!ListEmpty(to_free)) {
      Page* p = PageFromLru(to_free->next);
      ListDel(&p->lru);
      ScannerFrees(s, p);
    }
  }

  /// A thread's counters and, with `held`, its pages by place: free or
  /// returned by the scanner (off the LRU, refcount 0), on the LRU (its FIFO
  /// and the release gather: 1), in the add pagevec (off the LRU: 2).
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

  /// A page the scanner freed goes back to its owner's pool.
  void ReturnToOwner(Page* p) {
    PerThread<Pv>& owner = per_thread_[p->private_];
    std::lock_guard<std::mutex> g(owner.returned_mu);
    owner.returned.push_back(p);
    owner.n_returned.store(static_cast<int>(owner.returned.size()),
                           std::memory_order_release);
  }

  Config cfg_;
  PointEnv env_;
  std::vector<std::shared_ptr<LruZone<L>>> zones_;
  std::vector<std::shared_ptr<LockStatSide>> sides_;
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
