// pagevec's modelled kernel state (bench/pagevec/model.h runs on it): release
// arithmetic by version, pagevec kinds, LruZone, PerThread, PagevecFacts.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "harness/family.h"
#include "harness/locks/all_locks.h"
#include "harness/locks/lock_stat.h"
#include "harness/machine/helpers.h"
#include "harness/measure/page_work.h"
#include "layouts/cacheline.h"
#include "layouts/page.h"
#include "layouts/pagevec.h"

namespace lockline {
namespace pagevec_bench {

/// Largest slot count: the 5.x header's nr is an unsigned char.
inline constexpr int kMaxSlots = 255;
/// Pages a thread keeps on the LRU (FIFO) between add and release: 768 x 64 B
/// = 48 KB, so a released struct page has left L1; 3 batches of the largest
/// pagevec, fixed so points differ only in the batch.
inline constexpr int kResidentPages = 3 * kMaxSlots + 3;
// ---- pagevec kinds: Handle, Bytes, Place, Add (space left), Count, At,
// Reinit, Name (the layout name stem FindLayout knows) -----------------------

/// The 5.x header with a run-time slot count (PagevecView).
struct GenericPv {
  using Handle = PagevecView;
  static std::size_t Bytes(int slots) { return Pagevec5xBytes(slots); }
  static Handle Place(void* at, int slots) { return PlacePagevec5x(at, slots); }
  static int Add(Handle& h, Page* page) { return pagevec_add(h, page); }
  static int Count(const Handle& h) { return pagevec_count(h); }
  static Page* At(const Handle& h, int i) { return h.pages[i]; }
  static void Reinit(Handle& h) { pagevec_reinit(h); }
  static std::string Name(int slots) {
    return "pagevec_5x" + std::to_string(slots);
  }
};

/// A named kernel struct at its native size.
template <StaticPagevec PV>
struct NamedPv {
  using Handle = PV*;
  static std::size_t Bytes(int /*slots*/) { return sizeof(PV); }
  static Handle Place(void* at, int /*slots*/) {
    PV* pv = new (at) PV;
    pagevec_init(*pv);
    return pv;
  }
  static int Add(Handle& h, Page* page) { return pagevec_add(*h, page); }
  static int Count(const Handle& h) { return pagevec_count(*h); }
  static Page* At(const Handle& h, int i) { return h->pages[i]; }
  static void Reinit(Handle& h) { pagevec_reinit(*h); }
  static std::string Name(int /*slots*/) { return PV::kName; }
};

// ---- the LRU and the per-thread state ---------------------------------------

/// Which kernel's per-page work runs under lru_lock.
enum class Kernel { k269, k58 };
inline const char* KernelName(Kernel k) {
  return k == Kernel::k269 ? "2.6.9" : "5.8";
}
/// Each era's x86 spinlock: 2.6.9's `lock; decb` byte lock (ttas), 5.8's
/// qspinlock.
inline const char* EraLock(Kernel k) {
  return k == Kernel::k269 ? "ttas" : "qspinlock";
}
/// Where released pages come from (model.h's header).
enum class Release { kUnmap, kTruncate, kNone };
inline const char* ReleaseName(Release r) {
  return r == Release::kUnmap ? "unmap"
                              : (r == Release::kTruncate ? "truncate" : "none");
}
/// SWAP_CLUSTER_MAX: the reclaim scanner's batch and 5.8 release_pages' lock
/// batch (mm/swap.c@v5.8.1:844).
inline constexpr int kSwapClusterMax = 32;
/// 2.6.9 FREE_PTE_NR on SMP (include/asm-generic/tlb.h@v2.6.9:26).
inline constexpr int kFreePteNr269 = 506;
/// 2.6.9 free_pages_and_swap_cache's chunk (mm/swap_state.c@v2.6.9:290).
inline constexpr int kSwapCacheChunk269 = 16;
/// 5.8 MAX_GATHER_BATCH = (PAGE_SIZE - sizeof(struct mmu_gather_batch)) /
/// sizeof(void *) = (4096 - 16) / 8 (include/asm-generic/tlb.h@v5.8.1:232).
inline constexpr int kMaxGatherBatch58 = 510;

/// Pages gathered before one release flush (mmu_gather, or the pagevec).
inline int GatherPages(Kernel k, Release r, int slots) {
  if (r == Release::kNone) return 0;
  if (r == Release::kTruncate) return slots;
  return k == Kernel::k269 ? kFreePteNr269 : kMaxGatherBatch58;
}
/// Pages per release_pages call within a flush (2.6.9 unmap: chunks of 16).
inline int ReleaseCallPages(Kernel k, Release r, int slots) {
  if (k == Kernel::k269 && r == Release::kUnmap) return kSwapCacheChunk269;
  return GatherPages(k, r, slots);
}
/// Freed pages per lru_lock hold inside release_pages: 2.6.9's pages_to_free
/// pagevec (the swept slot count), 5.8's SWAP_CLUSTER_MAX.
inline int ReleaseHoldPages(Kernel k, int slots) {
  return k == Kernel::k269 ? slots : kSwapClusterMax;
}
/// lru_lock holds of one flush of `n` pages each freed there: the sum of
/// ceil(call / hold) over its release_pages calls.
inline uint64_t ReleaseFlushLocks(Kernel k, Release r, int slots, int n) {
  if (r == Release::kNone || n <= 0) return 0;
  const int call = ReleaseCallPages(k, r, slots);
  const int hold = ReleaseHoldPages(k, slots);
  uint64_t locks = 0;
  for (int done = 0; done < n; done += call) {
    const int c = std::min(call, n - done);
    locks += static_cast<uint64_t>((c + hold - 1) / hold);
  }
  return locks;
}
/// lru_lock acquisitions per page without a scanner: 1 / S plus a full
/// flush's holds per page (2.6.9 unmap: 0.1257 at 16, 0.1912 at 15).
inline double KernelAcquisitionsPerPage(Kernel k, Release r, int slots) {
  const double add = 1.0 / slots;
  const int g = GatherPages(k, r, slots);
  if (g == 0) return add;
  return add + static_cast<double>(ReleaseFlushLocks(k, r, slots, g)) / g;
}
/// 5.8 per-CPU LRU counter fold threshold: MEMCG_CHARGE_BATCH (32); the
/// vmstat threshold is of the same order.
inline constexpr long kStatFold58 = 32;
/// enum lru_list: new anon pages go to LRU_ACTIVE_ANON, reclaim deactivates
/// them to LRU_INACTIVE_ANON.
inline constexpr int kLruActiveAnon = 1;
inline constexpr int kLruInactiveAnon = 0;
/// Lists of a 5.8 lruvec (LRU_INACTIVE_ANON .. LRU_UNEVICTABLE).
inline constexpr int kNrLru58 = 5;
/// ZONE_NORMAL's index in lru_zone_size[zid][lru].
inline constexpr int kZoneNormal = 2;

/// smp_mb__after_atomic(): a compiler barrier on x86
/// (arch/x86/include/asm/barrier.h@v5.8.1:83), a fence elsewhere.
inline void SmpMbAfterAtomic() {
#if defined(__x86_64__) || defined(__i386__)
  std::atomic_signal_fence(std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

/// One lru_lock and its lists, in its own allocation. 2.6.9: zone->lru_lock,
/// active_list, nr_active on one line; 5.8: pgdat->lru_lock, the memcg
/// lruvec's lists, lru_zone_size a few lines on, the node/zone/memcg counters.
template <LockAlgorithm L>
struct alignas(kDestructiveLine) LruZone {
  L lru_lock;
  ListHead lru;  ///< 2.6.9: the active list; pages linked through page->lru
  unsigned long nr_lru = 0;  ///< 2.6.9: zone->nr_active, under lru_lock
  alignas(kDestructiveLine) ListHead lists58[kNrLru58];  ///< 5.8 memcg lruvec
  alignas(kDestructiveLine) unsigned long lru_zone_size[4][kNrLru58] = {};
  alignas(kDestructiveLine) std::atomic<long> node_lru{0};  ///< NR_LRU_BASE+lru
  std::atomic<long> zone_lru{0};   ///< NR_ZONE_LRU_BASE + lru (zone vmstat)
  std::atomic<long> memcg_lru{0};  ///< memcg lruvec_stat[NR_LRU_BASE + lru]
  /// Pages added (the scanner's pace; written only with a scanner).
  alignas(kDestructiveLine) std::atomic<uint64_t> added{0};
  std::atomic<int> reclaim_wanted{0};  ///< a worker short of pages (kswapd)
  std::atomic<uint64_t> covered{0};    ///< `added` the scanner has covered
  LruZone() {
    ListInit(&lru);
    for (ListHead& h : lists58) ListInit(&h);
  }
  /// The list new pages go to under `k`, and its counter.
  ListHead* List(Kernel k) {
    return k == Kernel::k269 ? &lru : &lists58[kLruActiveAnon];
  }
  unsigned long& Count(Kernel k) {
    return k == Kernel::k269 ? nr_lru
                             : lru_zone_size[kZoneNormal][kLruActiveAnon];
  }
  /// 5.8's LRU_INACTIVE_ANON and its memcg size.
  ListHead* Inactive58() { return &lists58[kLruInactiveAnon]; }
  unsigned long InactiveCount58() const {
    return lru_zone_size[kZoneNormal][kLruInactiveAnon];
  }
};

/// Fixed-capacity FIFO of page pointers (thread-private, not kernel state).
class PageRing {
 public:
  explicit PageRing(std::size_t capacity) : slots_(capacity) {}
  void Push(Page* p) {
    slots_[(head_ + size_) % slots_.size()] = p;
    ++size_;
  }
  Page* Pop() {
    Page* p = slots_[head_];
    head_ = (head_ + 1) % slots_.size();
    --size_;
    return p;
  }
  std::size_t size() const { return size_; }
  Page* at(std::size_t i) const { return slots_[(head_ + i) % slots_.size()]; }

 private:
  std::vector<Page*> slots_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

/// One point's resolved configuration.
struct Config {
  bool rapid = false;      ///< mode:rapid (on-stack), else deferred (per-CPU)
  int slots = 15;          ///< resolved slot count
  std::size_t offset = 0;  ///< bytes past a line boundary of each pagevec
  std::size_t line = 64;   ///< line size the offset and lines_spanned refer to
  uint64_t work_ns = 0;    ///< work per page outside the lock (0: none)
  bool work_calibrated = false;  ///< work_ns came from WorkCalibration
  WorkCalibration calibration;   ///< when work_calibrated: its inputs
  int zones = 1;  ///< zones (lru_locks); threads use zone numa % zones
  std::string policy = "fixed";
  Kernel kernel = Kernel::k269;       ///< per-page work under the lock
  Release release = Release::kUnmap;  ///< where released pages come from
  bool scanner = false;               ///< one reclaim scanner thread per lock
  bool stats = true;  ///< lock_stat on lru_lock (false: plain lock/unlock)
  /// With work: the ring's sizing (page_work.h WorkRingPages).
  WorkCaches work_caches;
  std::size_t work_ring_pages = 0;
};

/// Bytes for one pagevec at `offset` past a line boundary, whole lines.
inline std::size_t PvStride(std::size_t bytes, std::size_t offset,
                            std::size_t line) {
  return (offset + bytes + line - 1) / line * line;
}

/// Thread-private state, first touched by its thread (PaddedSlots).
template <class Pv>
struct alignas(kCacheLine) PerThread {
  PerThread(int pool_pages, std::size_t pv_bytes, std::size_t line)
      : pool(new Page[pool_pages]),
        pool_size(pool_pages),
        free_pages(pool_pages),
        on_lru(pool_pages),
        pv_line(line),
        pv_storage(static_cast<unsigned char*>(
            ::operator new (2 * pv_bytes, std::align_val_t{line}))) {}
  ~PerThread() { ::operator delete (pv_storage, std::align_val_t{pv_line}); }
  PerThread(const PerThread&) = delete;
  PerThread& operator=(const PerThread&) = delete;

  LockStatThread stat;  ///< window acquisitions (setup takes the plain lock)
  std::unique_ptr<Page[]> pool;  ///< this thread's struct pages
  int pool_size = 0;
  PageRing free_pages;  ///< off the LRU, refcount 0
  PageRing on_lru;      ///< on the LRU, oldest first, refcount 1 (the owner's)
  std::size_t pv_line;
  unsigned char* pv_storage;      ///< deferred mode: the two per-CPU pagevecs
  typename Pv::Handle add_pv{};   ///< deferred: lru_add_pvec
  typename Pv::Handle free_pv{};  ///< 2.6.9 release_pages' pages_to_free
  std::vector<Page*> gather;      ///< mmu_gather / truncate pagevec, on the LRU
  int gather_nr = 0;
  PageWorkRing work;  ///< work_ns's ring
  int zone = 0;
  int index = 0;
  uint64_t ops = 0;         ///< pages added (= released) in windows
  uint64_t add_drains = 0;  ///< window add drains (one lru_lock hold each)
  uint64_t expected_release_locks = 0;  ///< ReleaseFlushLocks of its flushes
  uint64_t setup_acquisitions = 0;
  uint64_t anomalies = 0;  ///< flag or refcount states the kernel BUG()s on
  uint64_t handed_to_scanner = 0;   ///< releases whose last put was scanner's
  uint64_t release_lock_skips = 0;  ///< expected acquisitions not taken
  long node_diff = 0, zone_diff = 0, memcg_diff = 0;  ///< 5.8 per-CPU diffs
  /// Pages the scanner freed for this thread (under returned_mu).
  std::mutex returned_mu;
  std::vector<Page*> returned;
  std::atomic<int> n_returned{0};
};

/// Pool slack: the scanner may hold SWAP_CLUSTER_MAX pages isolated.
inline constexpr int kPoolSlack = 2 * kSwapClusterMax;

/// lru_lock holds per scanner cycle of SWAP_CLUSTER_MAX pages. 5.8: 4, an
/// isolate and a putback each in shrink_active_list (mm/vmscan.c@v5.8.1
/// ~2020-2087) and shrink_inactive_list (~1947-1990; no hold 4 when nothing
/// was isolated, :1961). 2.6.9: 2, a simplification of refill_inactive_zone +
/// shrink_cache.
inline int ScannerHoldsPerCycle(Kernel k) { return k == Kernel::k58 ? 4 : 2; }
/// The scanner's designed acquisitions per page added (one cycle per
/// SWAP_CLUSTER_MAX); ScannerRowProblem flags rows 10 % off.
inline double ScannerDesignAcquisitionsPerPage(Kernel k) {
  return static_cast<double>(ScannerHoldsPerCycle(k)) / kSwapClusterMax;
}

/// A page a thread holds, where it should be and its expected refcount.
struct HeldPage {
  const Page* page;
  bool on_lru;
  int ref;
};
/// One thread's part of PagevecFacts (all zero for a thread not set up).
struct ThreadFacts {
  const LockStatThread* stat = nullptr;  ///< window acquisitions
  const Page* pool = nullptr;            ///< its struct pages
  int pool_size = 0;
  int zone = 0;
  uint64_t ops = 0, add_drains = 0, expected_release_locks = 0;
  uint64_t setup_acquisitions = 0, anomalies = 0, handed_to_scanner = 0;
  uint64_t release_lock_skips = 0;
  std::vector<HeldPage> held{};  ///< Verify only: its pages, by place
};
/// An LRU list and the size counted for it under lru_lock.
struct LruListFacts {
  const ListHead* head;
  unsigned long count;
};
/// One reclaim scanner's counters.
struct ScannerFacts {
  uint64_t cycles, on_demand_cycles, isolated, freed, acquisitions;
  uint64_t skipped_putbacks;  ///< 5.8: nothing isolated, no hold 4
  int pu;
};
/// What Report and Verify read after the last window, so their bodies
/// (bench/pagevec.cpp) compile once, not per lock x layout.
struct PagevecFacts {
  Config cfg;
  const PointEnv* env;
  const char* lock;  ///< lru_lock's algorithm
  std::size_t pv_bytes;
  std::string pv_name;  ///< the layout name stem (FindLayout)
  uint64_t harness_ops;
  std::vector<HelperPlace> scanner_places;  ///< the helper rule's places
  bool scanner_shares_pu;
  std::vector<ThreadFacts> threads{};
  /// Each zone's list of new pages, then (5.8) each zone's LRU_INACTIVE_ANON.
  std::vector<LruListFacts> lists{};
  std::vector<ScannerFacts> scanners{};
};
/// The row's metrics and details (bench/pagevec.cpp).
void ReportPagevec(PointReport& out, double window_seconds, uint64_t ops,
                   const PagevecFacts& f);
/// "" when the LRUs are intact, every page in one place and the lru_lock
/// acquisitions exact; else what is not (bench/pagevec.cpp).
std::string VerifyPagevec(const PagevecFacts& f);

}  // namespace pagevec_bench
}  // namespace lockline
