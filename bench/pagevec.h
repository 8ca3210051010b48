// pagevec's model (bench/pagevec.cpp's top comment says what it follows, by
// kernel version and function): the modelled LRU, the pagevec layouts and the
// PagevecWorkload of every lock x layout. A header so that the 5 locks x 6
// layouts compile in bench/pagevec/*.cpp in parallel on a small CI runner's
// cores, and tests/pagevec_test.cpp links the same objects (issue 28).
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "harness/family.h"
#include "harness/locks/all_locks.h"
#include "harness/locks/lock_stat.h"
#include "harness/machine/cpu.h"
#include "harness/machine/helpers.h"
#include "harness/machine/memory.h"
#include "harness/machine/padded_slots.h"
#include "harness/machine/topology.h"
#include "harness/measure/page_work.h"
#include "layouts/cacheline.h"
#include "layouts/page.h"
#include "layouts/pagevec.h"
#include "layouts/report.h"

namespace lockline {
namespace pagevec_bench {

/// Largest slot count: the 5.x header's nr is an unsigned char.
inline constexpr int kMaxSlots = 255;
/// Pages of each thread that stay on the LRU between their add and their
/// release (a FIFO): the released page was added kResidentPages operations
/// earlier, so its struct page line has usually left L1 (768 x 64 B = 48 KB) as
/// it would in a real workload. Fixed for every slot count (it must hold 3
/// batches of the largest pagevec) so points differ only in the batch.
inline constexpr int kResidentPages = 3 * kMaxSlots + 3;

// ---- sizing policies (LKML, September 2004)
// ----------------------------------------------------

/// PAGEVEC_SIZE = 4 * lg(NR_CPUS), 4 on UP, with wli's lg the integer
/// ceil(log2(n)) of the compile-time NR_CPUS: 4 at n = 1 and 2, 8 at 3 and 4,
/// 12 at 5..8, 16 at 16, 40 at 1024; clamped to 1..255. n < 1 counts as 1.
inline int FourLgSlots(int n) {
  if (n <= 2) return 4;
  const int lg = static_cast<int>(
      std::bit_width(static_cast<unsigned>(n) - 1));  // ceil(log2 n)
  return std::clamp(4 * lg, 1, kMaxSlots);
}

/// The possible CPUs of this machine (/sys/devices/system/cpu/possible, what
/// a boot-time sizing would see), or `fallback` when it cannot be read.
inline int PossibleCpus(int fallback) {
  std::FILE* f = std::fopen("/sys/devices/system/cpu/possible", "r");
  if (f == nullptr) return fallback;
  int n = 0, lo = 0, hi = 0;
  char sep = 0;
  while (std::fscanf(f, "%d", &lo) == 1) {
    hi = lo;
    if (std::fscanf(f, "%c", &sep) == 1 && sep == '-') {
      if (std::fscanf(f, "%d", &hi) != 1) break;
      if (std::fscanf(f, "%c", &sep) != 1) sep = 0;
    }
    n += hi - lo + 1;
    if (sep != ',') break;
  }
  std::fclose(f);
  return n > 0 ? n : fallback;
}

/// The gentler proposal 2^(2.5 * sqrt(lg n) - 1), rounded to the nearest
/// integer (std::lround, halves away from zero): n = 1 -> 1 (2^-1 rounds up), 2
/// -> 3 (2.83), 4 -> 6 (5.66), 16 -> 16, 1024 -> 120 (119.6), clamped
/// to 1..255. n < 1 counts as 1.
inline int SqrtLgSlots(int n) {
  const double lg = std::log2(static_cast<double>(std::max(n, 1)));
  const long v = std::lround(std::exp2(2.5 * std::sqrt(lg) - 1.0));
  return static_cast<int>(std::clamp<long>(v, 1, kMaxSlots));
}

/// Slot count for `policy` ("fixed": `fixed_slots`; "4lg", "sqrtlg": the
/// formulas above with n = `threads`). Throws std::invalid_argument naming a
/// bad policy or a fixed count outside 1..255.
inline int ResolveSlots(const std::string& policy, int fixed_slots,
                        int threads) {
  if (policy == "fixed") {
    if (fixed_slots < 1 || fixed_slots > kMaxSlots) {
      throw std::invalid_argument("pagevec: slots " +
                                  std::to_string(fixed_slots) +
                                  " out of range: accepted 1..255");
    }
    return fixed_slots;
  }
  if (policy == "4lg") return FourLgSlots(threads);
  if (policy == "sqrtlg") return SqrtLgSlots(threads);
  throw std::invalid_argument("pagevec: unknown policy '" + policy +
                              "': accepted are fixed, 4lg, sqrtlg");
}

// ---- pagevec kinds: one small interface over the layout models
// ---------------------------------
//
// A kind has Handle (what the code holds), Bytes(slots), Place(at, slots)
// (construct an empty pagevec at `at`), Add(h, page) -> space left (0 = full),
// Count(h), At(h, i), Reinit(h) and Name(slots) (the layout name stem
// FindLayout knows).

/// The Linux 5.x header with a run-time slot count (layouts/pagevec.h
/// PagevecView: same bytes as Pagevec5x<slots>).
struct GenericPv {
  using Handle = PagevecView;
  static constexpr bool kNamed = false;
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

/// A named kernel struct (PagevecV269, PagevecProposal2004, Pagevec5x<N>) at
/// its native size.
template <StaticPagevec PV>
struct NamedPv {
  using Handle = PV*;
  static constexpr bool kNamed = true;
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

// ---- the LRU and the per-thread state
// --------------------------------------------------------

/// Which kernel's per-page work runs under lru_lock.
enum class Kernel { k269, k58 };
/// "2.6.9" | "5.8".
inline const char* KernelName(Kernel k) {
  return k == Kernel::k269 ? "2.6.9" : "5.8";
}
/// Each era's x86 spinlock, the default-suite lock of its rows: 2.6.9's byte
/// lock (`lock; decb`, spin on `cmpb`: test-and-test-and-set) and 5.8's
/// qspinlock.
inline const char* EraLock(Kernel k) {
  return k == Kernel::k269 ? "ttas" : "qspinlock";
}
/// Where released pages come from (see the file header).
enum class Release { kUnmap, kTruncate, kNone };
/// "unmap" | "truncate" | "none".
inline const char* ReleaseName(Release r) {
  return r == Release::kUnmap ? "unmap"
                              : (r == Release::kTruncate ? "truncate" : "none");
}
/// SWAP_CLUSTER_MAX: the reclaim scanner's batch and 5.8 release_pages' lock
/// batch (mm/swap.c@v5.8.1:844).
inline constexpr int kSwapClusterMax = 32;
/// 2.6.9 FREE_PTE_NR on SMP (include/asm-generic/tlb.h@v2.6.9:26): the
/// mmu_gather's page array.
inline constexpr int kFreePteNr269 = 506;
/// 2.6.9 free_pages_and_swap_cache's chunk (mm/swap_state.c@v2.6.9:290).
inline constexpr int kSwapCacheChunk269 = 16;
/// 5.8 MAX_GATHER_BATCH = (PAGE_SIZE - sizeof(struct mmu_gather_batch)) /
/// sizeof(void *) = (4096 - 16) / 8 (include/asm-generic/tlb.h@v5.8.1:232).
inline constexpr int kMaxGatherBatch58 = 510;

/// Pages gathered before one release flush: the mmu_gather (unmap), the
/// S-page pagevec (truncate), none (release:none).
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
/// The kernel's lru_lock acquisitions for one flush of `n` pages when every
/// page's last reference is dropped there: sum over its release_pages calls
/// of ceil(call pages / hold pages).
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
/// The kernel's lru_lock acquisitions per page in steady state without a
/// scanner: 1 / S for the add drain plus a full flush's holds per gathered
/// page. 2.6.9 unmap: 0.1257 (16), 0.1912 (15); 5.8 unmap: 0.0980 (15),
/// 0.0636 (31).
inline double KernelAcquisitionsPerPage(Kernel k, Release r, int slots) {
  const double add = 1.0 / slots;
  const int g = GatherPages(k, r, slots);
  if (g == 0) return add;
  return add + static_cast<double>(ReleaseFlushLocks(k, r, slots, g)) / g;
}
/// The 5.8 per-CPU counter fold threshold lockline uses for node, zone and
/// memcg LRU sizes (MEMCG_CHARGE_BATCH is 32; the vmstat threshold depends on
/// CPUs and memory and is of the same order).
inline constexpr long kStatFold58 = 32;
/// enum lru_list index of LRU_ACTIVE_ANON, where 5.8's new anonymous pages go
/// (lru_cache_add_active_or_unevictable SetPageActive's them).
inline constexpr int kLruActiveAnon = 1;
/// LRU_INACTIVE_ANON: where 5.8 reclaim's shrink_active_list deactivates anon
/// pages to, and shrink_inactive_list reclaims them from.
inline constexpr int kLruInactiveAnon = 0;
/// Lists of a 5.8 lruvec (LRU_INACTIVE_ANON .. LRU_UNEVICTABLE).
inline constexpr int kNrLru58 = 5;
/// ZONE_NORMAL's index in lru_zone_size[zid][lru].
inline constexpr int kZoneNormal = 2;

/// smp_mb__after_atomic(): empty on x86 (atomics are full barriers there,
/// arch/x86/include/asm/barrier.h@v5.8.1:83), so only a compiler barrier; a
/// real fence on weakly ordered CPUs.
inline void SmpMbAfterAtomic() {
#if defined(__x86_64__) || defined(__i386__)
  std::atomic_signal_fence(std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

/// The lock and the lists one lru_lock protects.
///   2.6.9: zone->lru_lock, zone->active_list and zone->nr_active, on one
///          line (the lock line is the list line), as in 2.6.9's struct zone.
///   5.8:   pgdat->lru_lock (the same `lru_lock` member, ZONE_PADDING'd in
///          pglist_data) and the lists of the memcg lruvec the pages are
///          charged to (mem_cgroup_per_node: lruvec lists, then
///          lru_zone_size[][] a few lines on), plus the node / zone / memcg
///          LRU counters the per-CPU diffs fold into.
/// One per lock, in its own shared allocation.
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
  /// Pages the workers added to this LRU (the scanner's pace), own line;
  /// written only when a scanner runs.
  alignas(kDestructiveLine) std::atomic<uint64_t> added{0};
  /// release:none: workers waiting for reclaimed pages (kswapd's wakeup on
  /// low memory); written only on that slow path.
  std::atomic<int> reclaim_wanted{0};
  /// The `added` count the scanner's cycles have covered (its scanned_mark),
  /// published after each cycle: a worker ends its window only once reclaim
  /// has caught up with the pages it added (within one cycle).
  std::atomic<uint64_t> covered{0};
  LruZone() {
    ListInit(&lru);
    for (ListHead& h : lists58) ListInit(&h);
  }
  /// The list new pages go to under `k`, and its length counter.
  ListHead* List(Kernel k) {
    return k == Kernel::k269 ? &lru : &lists58[kLruActiveAnon];
  }
  const ListHead* List(Kernel k) const {
    return k == Kernel::k269 ? &lru : &lists58[kLruActiveAnon];
  }
  unsigned long& Count(Kernel k) {
    return k == Kernel::k269 ? nr_lru
                             : lru_zone_size[kZoneNormal][kLruActiveAnon];
  }
  unsigned long Count(Kernel k) const {
    return k == Kernel::k269 ? nr_lru
                             : lru_zone_size[kZoneNormal][kLruActiveAnon];
  }
  /// 5.8's LRU_INACTIVE_ANON list and its memcg size (the reclaim scanner's).
  ListHead* Inactive58() { return &lists58[kLruInactiveAnon]; }
  const ListHead* Inactive58() const { return &lists58[kLruInactiveAnon]; }
  unsigned long InactiveCount58() const {
    return lru_zone_size[kZoneNormal][kLruInactiveAnon];
  }
};

/// Fixed-capacity FIFO of page pointers (thread-private bookkeeping, not a
/// kernel structure).
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

/// One point's configuration, resolved (slots from the policy, zones from the
/// topology).
struct Config {
  bool rapid =
      false;       ///< mode:rapid (on-stack) instead of mode:deferred (per-CPU)
  int slots = 15;  ///< resolved slot count
  std::size_t offset =
      0;  ///< bytes past a line boundary where each pagevec starts
  std::size_t line = 64;  ///< line size the offset and lines_spanned refer to
  uint64_t work_ns = 0;   ///< work per page outside the lock (0: none)
  bool work_calibrated = false;  ///< work_ns came from WorkCalibration
  WorkCalibration calibration;   ///< when work_calibrated: its inputs
  int zones = 1;  ///< zones (lru_locks); threads use zone numa % zones
  std::string policy = "fixed";
  Kernel kernel = Kernel::k269;       ///< per-page work under the lock
  Release release = Release::kUnmap;  ///< where released pages come from
  bool scanner = false;               ///< one reclaim scanner thread per lock
  bool stats = true;  ///< lock_stat on lru_lock (false: plain lock/unlock)
  /// With work: the caches the work's ring is sized from and its pages per
  /// thread (harness/measure/page_work.h WorkRingPages), set by the workload.
  WorkCaches work_caches;
  std::size_t work_ring_pages = 0;
};

/// Storage for one pagevec at `offset` past a `line` boundary, with its own
/// lines.
inline std::size_t PvStride(std::size_t bytes, std::size_t offset,
                            std::size_t line) {
  return (offset + bytes + line - 1) / line * line;
}

/// Thread-private state, constructed (so first touched) by its pinned thread
/// in its slot of a PaddedSlots array (--padding apart).
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

  LockStatThread
      stat;  ///< window acquisitions only (setup uses the plain lock)
  std::unique_ptr<Page[]> pool;  ///< this thread's struct pages
  int pool_size = 0;
  PageRing free_pages;  ///< off the LRU, refcount 0
  PageRing on_lru;      ///< on the LRU, oldest first, refcount 1 (the owner's)
  std::size_t pv_line;
  unsigned char* pv_storage;      ///< deferred mode: the two per-CPU pagevecs
  typename Pv::Handle add_pv{};   ///< deferred: lru_add_pvec
  typename Pv::Handle free_pv{};  ///< 2.6.9 release_pages' pages_to_free
  /// The release side's gather (mmu_gather pages / the truncate pagevec):
  /// pages still on the LRU waiting for their release flush.
  std::vector<Page*> gather;
  int gather_nr = 0;
  /// work_ns: the ring of pages the work zeroes.
  PageWorkRing work;
  int zone = 0;
  int index = 0;
  uint64_t ops = 0;         ///< pages added (= released) in windows
  uint64_t add_drains = 0;  ///< window add drains (one lru_lock hold each)
  /// The kernel's holds for the window's flushes (ReleaseFlushLocks).
  uint64_t expected_release_locks = 0;
  uint64_t setup_acquisitions = 0;
  uint64_t anomalies =
      0;  ///< PG_lru already set on add / clear on release, bad refcount
  uint64_t handed_to_scanner =
      0;  ///< releases whose last put was the scanner's
  uint64_t release_lock_skips = 0;  ///< expected acquisitions not taken
  /// 5.8 per-CPU diffs of the node, zone and memcg LRU counters.
  long node_diff = 0, zone_diff = 0, memcg_diff = 0;
  /// Pages the scanner freed for this thread (it dropped their last
  /// reference): returned to free_pages by the owner. Guarded by returned_mu.
  std::mutex returned_mu;
  std::vector<Page*> returned;
  std::atomic<int> n_returned{0};
};

/// Extra pages each thread's pool has beyond its resident and pagevec pages:
/// the scanner may hold up to SWAP_CLUSTER_MAX of them isolated.
inline constexpr int kPoolSlack = 2 * kSwapClusterMax;

/// lru_lock holds of one reclaim scanner cycle of SWAP_CLUSTER_MAX pages.
/// 5.8: 4. New anonymous pages are on LRU_ACTIVE_ANON, so reclaiming them
/// takes shrink_active_list (isolate_lru_pages under the lock; page_referenced
/// and deactivation outside it; move_pages_to_lru of l_active and l_inactive
/// under one more hold) and then shrink_inactive_list (isolate_lru_pages under
/// the lock; shrink_page_list outside it; move_pages_to_lru under one more
/// hold): mm/vmscan.c@v5.8.1 shrink_inactive_list ~1947-1990 and
/// shrink_active_list ~2020-2087 (issue 40 item 2). 2.6.9: 2 (an isolate and
/// a putback per cycle, a simplification of refill_inactive_zone +
/// shrink_cache, labelled on the row).
inline int ScannerHoldsPerCycle(Kernel k) { return k == Kernel::k58 ? 4 : 2; }
/// The scanner's designed lru_lock acquisitions per page added: one cycle per
/// SWAP_CLUSTER_MAX pages the workers add. A row off it by more than 10 %
/// (ScannerRowProblem) measures a scanner running at another rate.
inline double ScannerDesignAcquisitionsPerPage(Kernel k) {
  return static_cast<double>(ScannerHoldsPerCycle(k)) / kSwapClusterMax;
}
/// The rate check of a scanner row (issue 40 item 1): "" when the scanner ran
/// at its design (acquisitions per page within `tolerance` of
/// ScannerDesignAcquisitionsPerPage) on a PU of its own, else why not.
inline std::string ScannerRowProblem(double acquisitions_per_page,
                                     double design, bool shares_measured_pu,
                                     double tolerance = 0.10) {
  if (shares_measured_pu) return "the scanner shares a measured PU";
  if (design <= 0 || std::abs(acquisitions_per_page / design - 1) > tolerance)
    return "scanner lru_lock acquisitions per page " +
           std::to_string(acquisitions_per_page) + ", design " +
           std::to_string(design) + " (more than 10 % off)";
  return "";
}

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
    std::vector<const LockStatThread*> stats;
    uint64_t acquisitions = 0, setup = 0, handed = 0;
    for (std::size_t i = 0; i < per_thread_.size(); ++i) {
      const PerThread<Pv>* t = per_thread_.get(i);
      stats.push_back(t ? &t->stat : nullptr);
      acquisitions += t ? t->stat.acquisitions : 0;
      setup += t ? t->setup_acquisitions : 0;
      handed += t ? t->handed_to_scanner : 0;
    }
    const double thread_seconds =
        window_seconds * static_cast<double>(per_thread_.size());
    AddLockStatMetrics(out, SummarizeLockStats(stats, thread_seconds, ops));
    const double pages = static_cast<double>(ops);
    const std::size_t bytes = Pv::Bytes(cfg_.slots);
    out.Metric("pages_per_s", window_seconds > 0 ? pages / window_seconds : 0);
    out.Metric("acquisitions_per_page",
               ops ? static_cast<double>(acquisitions) / pages : 0);
    out.Metric("pagevec_bytes", static_cast<double>(bytes));
    out.Metric("lines_spanned", LinesSpanned(cfg_.offset, bytes, cfg_.line));
    out.Metric("slots_resolved", cfg_.slots);
    const std::string layout =
        PagevecLayoutName(Pv::Name(cfg_.slots), cfg_.offset, cfg_.line);
    if (FindLayout(layout) != nullptr) out.layouts.push_back(layout);
    const int possible = PossibleCpus(
        env_.topology != nullptr ? env_.topology->summary().pus : env_.threads);
    out.details["pagevec"] = {
        {"mode", cfg_.rapid ? "rapid" : "deferred"},
        {"layout", layout},
        {"slots", cfg_.slots},
        {"policy", cfg_.policy},
        {"offset", cfg_.offset},
        {"line", cfg_.line},
        {"bytes", bytes},
        {"lines_spanned", LinesSpanned(cfg_.offset, bytes, cfg_.line)},
        {"zones", cfg_.zones},
        {"work_ns", cfg_.work_ns},
        {"resident_pages_per_thread", kResidentPages},
        {"lock", L::kName},
        {"lock_is_era_lock", std::string(L::kName) == EraLock(cfg_.kernel)},
        {"lock_stat", cfg_.stats},
        {"lock_stat_clock_reads", LockStatClockReads(cfg_.stats)},
        {"window_acquisitions", acquisitions},
        {"setup_acquisitions", setup},
        {"op", cfg_.release == Release::kNone
                   ? "one page added to the LRU (lru_cache_add); reclaim (the "
                     "scanner) frees it; pages_per_s = ops_per_s"
                   : "one page added to the LRU (lru_cache_add) and one "
                     "released (release_pages); pages_per_s = ops_per_s"},
    };
    const nlohmann::json work = WorkDetails(
        cfg_.work_ns, cfg_.work_calibrated, cfg_.calibration, "lru_lock",
        "kernel " + std::string(KernelName(cfg_.kernel)) +
            ", 15 slots, release:" + ReleaseName(cfg_.release) +
            ", min of 3 x 10 ms",
        cfg_.work_ring_pages, cfg_.work_caches);
    out.details["work"] = work;
    out.Metric("work_ns", static_cast<double>(cfg_.work_ns));
    out.details["formulas"] = {
        {"four_lg_threads", FourLgSlots(env_.threads)},
        {"four_lg_possible_cpus", FourLgSlots(possible)},
        {"possible_cpus", possible},
        {"sqrt_lg_threads", SqrtLgSlots(env_.threads)},
        {"sqrt_lg_possible_cpus", SqrtLgSlots(possible)},
        {"note",
         "4*lg is wli's 4 * ceil(log2 NR_CPUS) of the compile-time config; "
         "here evaluated for the point's threads and for the machine's "
         "possible CPUs (what a boot-time sizing would use); policy:4lg rows "
         "run the threads value"},
    };
    const char* release_path =
        cfg_.release == Release::kNone
            ? "none: reclaim (the scanner) frees the pages (pmbench, 2020)"
            : (cfg_.release == Release::kTruncate
                   ? "truncate: release_pages of an S-page pagevec"
                   : (cfg_.kernel == Kernel::k269
                          ? "unmap: mmu_gather of 506 pages, "
                            "free_pages_and_swap_cache hands release_pages "
                            "chunks of 16, the lock dropped when the S-slot "
                            "pages_to_free pagevec fills"
                          : "unmap: tlb_batch_pages_flush hands "
                            "release_pages batches of 510, the lock dropped "
                            "every 32 pages"));
    out.details["kernel"] = {
        {"version", KernelName(cfg_.kernel)},
        {"era_lock", EraLock(cfg_.kernel)},
        {"per_page_work",
         cfg_.kernel == Kernel::k269
             ? "2.6.9 lru_cache_add_active -> __pagevec_lru_add_active: "
               "TestSetPageLRU, TestSetPageActive, add_page_to_active_list, "
               "nr_active++; release_pages: TestClearPageLRU, "
               "del_page_from_lru (list_del, ClearPageActive, nr_active--)"
             : "5.8 lru_cache_add_active_or_unevictable (SetPageActive "
               "outside the lock) -> __pagevec_lru_add_fn: "
               "TestClearPageUnevictable, SetPageLRU, smp_mb__after_atomic "
               "(compiler barrier on x86), page_evictable, update_lru_size "
               "(node/zone/memcg per-CPU diffs, memcg lru_zone_size), "
               "list_add to LRU_ACTIVE_ANON; release_pages: __ClearPageLRU, "
               "page_off_lru (__ClearPageActive), del_page_from_lru_list"},
        {"release", ReleaseName(cfg_.release)},
        {"release_path", release_path},
        {"release_gather_pages",
         GatherPages(cfg_.kernel, cfg_.release, cfg_.slots)},
        {"release_call_pages",
         ReleaseCallPages(cfg_.kernel, cfg_.release, cfg_.slots)},
        {"release_hold_pages", ReleaseHoldPages(cfg_.kernel, cfg_.slots)},
        {"kernel_acquisitions_per_page",
         KernelAcquisitionsPerPage(cfg_.kernel, cfg_.release, cfg_.slots)},
        {"lru_lock_scope", cfg_.kernel == Kernel::k269
                               ? "zone->lru_lock (per zone)"
                               : "pgdat->lru_lock (per NUMA node)"},
        {"simplified",
         "no active/inactive aging, no irq-off cost, no icache misses, "
         "free_pages_and_swap_cache's lru_add_drain not modelled, freed "
         "pages return to a private pool (no pcp/buddy cost); the scanner "
         "frees without swap-out work"},
    };
    nlohmann::json sj = {{"on", cfg_.scanner}};
    if (cfg_.scanner) {
      uint64_t cycles = 0, isolated = 0, freed = 0, acq = 0, on_demand = 0;
      nlohmann::json pus = nlohmann::json::array();
      for (const auto& sc : scanners_) {
        on_demand += sc->on_demand_cycles;
        cycles += sc->cycles;
        isolated += sc->isolated;
        freed += sc->freed;
        acq += sc->stat.acquisitions;
        pus.push_back(sc->pu);
      }
      sj["cycles"] = cycles;
      sj["on_demand_cycles"] = on_demand;
      sj["pages_isolated"] = isolated;
      sj["design_acquisitions_per_page"] =
          ScannerDesignAcquisitionsPerPage(cfg_.kernel);
      sj["holds_per_cycle"] = ScannerHoldsPerCycle(cfg_.kernel);
      {
        const HelperColumns cols = HelperColumnsOf(scanner_places_);
        bool smt = false;
        for (const HelperPlace& hp : scanner_places_)
          smt = smt || hp.smt_sibling_of_measured;
        sj["helper_pu"] = cols.pu;
        sj["helper_core"] = cols.core;
        sj["helper_numa"] = cols.numa;
        sj["smt_sibling_of_measured"] = smt;
      }
      sj["pages_freed_by_scanner"] = freed;
      sj["acquisitions"] = acq;
      sj["releases_handed_to_scanner"] = handed;
      sj["pus"] = pus;
      sj["shares_measured_pu"] = scanner_shares_pu_;
      sj["workers_spin_yield"] =
          scanner_shares_pu_ ? "after_1024_pauses (the scanner shares a "
                               "measured PU: oversubscribed)"
                             : "as placement.spin_yield";
      sj["placement"] =
          scanner_shares_pu_
              ? "no spare PU: each scanner shares a measured thread's PU "
                "(it sleeps between cycles; its CPU time is taken from that "
                "thread)"
              : "each scanner on a spare PU outside the point's plan (or "
                "unbound where the topology is not the host's)";
      sj["model"] =
          cfg_.kernel == Kernel::k58
              ? "one cycle per 32 pages the workers add to its LRU, 4 "
                "lru_lock holds (mm/vmscan.c@v5.8.1): shrink_active_list "
                "isolates 32 pages from the LRU_ACTIVE_ANON tail (hold 1), "
                "deactivates them outside the lock and puts them on "
                "LRU_INACTIVE_ANON (hold 2); shrink_inactive_list isolates 32 "
                "from the inactive tail (hold 3), reclaims outside the lock "
                "(release:none: page_ref_freeze(2)) and puts back the rest "
                "(hold 4); a page whose last reference a putback dropped is "
                "freed"
              : "one cycle per 32 pages the workers add to its LRU: isolate "
                "32 pages from the tail (PageLRU, get_page_unless_zero, "
                "ClearPageLRU, list_move, size -32) under lru_lock, unlock, "
                "relock and put them back (SetPageLRU, list_add, size +32, "
                "put_page; a page whose last reference that was is taken off "
                "the LRU and freed); 2 holds per cycle, a simplification of "
                "2.6.9's refill_inactive_zone + shrink_cache";
      sj["on_demand_note"] =
          "a worker short of free pages asks for one cycle before 32 pages "
          "were added (kswapd's wakeup); the scanner consumes the request, "
          "so it never cycles for a worker that is not waiting";
      out.Metric("scanner_acquisitions_per_page",
                 ops ? static_cast<double>(acq) / pages : 0);
      out.Metric("scanner_design_acquisitions_per_page",
                 ScannerDesignAcquisitionsPerPage(cfg_.kernel));
    }
    out.details["scanner"] = sj;
  }

  /// LRU integrity, page conservation and exact acquisitions. Stops the
  /// scanner threads first (call it after the last window).
  std::string Verify() override {
    StopScanners();
    const Kernel k = cfg_.kernel;
    uint64_t total_pages = 0;
    for (std::size_t i = 0; i < per_thread_.size(); ++i)
      total_pages += per_thread_.get(i) ? per_thread_.get(i)->pool_size : 0;
    // Owner lookup: pools sorted by address.
    std::vector<std::pair<const Page*, int>> pools;
    for (int i = 0; i < static_cast<int>(per_thread_.size()); ++i)
      if (per_thread_.get(i))
        pools.emplace_back(per_thread_.get(i)->pool.get(), i);
    std::sort(pools.begin(), pools.end());
    std::vector<std::vector<char>> on_list(per_thread_.size());
    for (const auto& [base, i] : pools)
      on_list[i].assign(per_thread_[i].pool_size, 0);

    // 5.8: LRU_ACTIVE_ANON, then LRU_INACTIVE_ANON (the scanner's deactivated
    // pages); 2.6.9: the one list.
    const int lists = k == Kernel::k58 ? 2 : 1;
    for (int z = 0; z < cfg_.zones * lists; ++z) {
      const bool inactive = z >= cfg_.zones;
      const LruZone<L>& zone = *zones_[z % cfg_.zones];
      const ListHead* head = inactive ? zone.Inactive58() : zone.List(k);
      const unsigned long count =
          inactive ? zone.InactiveCount58() : zone.Count(k);
      uint64_t walked = 0;
      const ListHead* prev = head;
      for (const ListHead* node = head->next; node != head; node = node->next) {
        if (node->prev != prev) return Where(z, walked) + "broken prev link";
        if (++walked > total_pages)
          return Where(z, walked) + "longer than all pages (a cycle)";
        const Page* page = PageFromLru(node);
        auto it = std::upper_bound(
            pools.begin(), pools.end(),
            std::make_pair(page, static_cast<int>(per_thread_.size())));
        if (it == pools.begin())
          return Where(z, walked) + "node is not a pool page";
        --it;
        const int owner = it->second;
        const std::ptrdiff_t idx = page - it->first;
        if (idx < 0 || idx >= per_thread_[owner].pool_size)
          return Where(z, walked) + "node is not a pool page";
        if (per_thread_[owner].zone != z % cfg_.zones)
          return Where(z, walked) + "page of another zone";
        if (PageActive(*page) == inactive)
          return Where(z, walked) + "PG_active does not match the list";
        if (on_list[owner][idx]) return Where(z, walked) + "page listed twice";
        on_list[owner][idx] = 1;
        if (!PageLru(*page))
          return Where(z, walked) + "page on the LRU without PG_lru";
        prev = node;
      }
      if (head->prev != prev)
        return Where(z, walked) + "head's prev is not the last node";
      if (walked != count) {
        return Where(z, walked) + "LRU size " + std::to_string(count) +
               " but " + std::to_string(walked) + " pages linked";
      }
    }

    uint64_t ops = 0;
    for (int i = 0; i < static_cast<int>(per_thread_.size()); ++i) {
      PerThread<Pv>* t = per_thread_.get(i);
      if (t == nullptr) continue;
      const std::string who = "thread " + std::to_string(i) + ": ";
      if (t->anomalies != 0)
        return who + std::to_string(t->anomalies) + " flag/refcount anomalies";
      // Every page in exactly one place: free (or returned by the scanner),
      // on the LRU (FIFO or release pagevec), add pagevec.
      std::vector<char> seen(t->pool_size, 0);
      auto place = [&](const Page* p, bool on_lru, int ref) -> std::string {
        const std::ptrdiff_t idx = p - t->pool.get();
        if (idx < 0 || idx >= t->pool_size)
          return who + "foreign page in its structures";
        if (seen[idx]++) return who + "page held twice";
        if (static_cast<bool>(on_list[i][idx]) != on_lru)
          return who + (on_lru ? "page should be on the LRU but is not linked"
                               : "page linked on the LRU but held off it");
        if (PageLru(*p) != on_lru)
          return who + "PG_lru does not match LRU membership";
        if (page_count(*p) != ref)
          return who + "refcount " + std::to_string(page_count(*p));
        return "";
      };
      std::string err;
      for (std::size_t k2 = 0; k2 < t->free_pages.size() && err.empty(); ++k2)
        err = place(t->free_pages.at(k2), false, 0);
      for (std::size_t k2 = 0; k2 < t->returned.size() && err.empty(); ++k2)
        err = place(t->returned[k2], false, 0);
      for (std::size_t k2 = 0; k2 < t->on_lru.size() && err.empty(); ++k2)
        err = place(t->on_lru.at(k2), true, 1);
      std::size_t held =
          t->free_pages.size() + t->returned.size() + t->on_lru.size();
      for (int k2 = 0; k2 < t->gather_nr && err.empty(); ++k2)
        err = place(t->gather[k2], true, 1);
      held += static_cast<std::size_t>(t->gather_nr);
      if (!cfg_.rapid) {
        for (int k2 = 0; k2 < Pv::Count(t->add_pv) && err.empty(); ++k2)
          err = place(Pv::At(t->add_pv, k2), false, 2);
        held += Pv::Count(t->add_pv);
      }
      if (cfg_.release == Release::kNone) {
        // The LRU's pages (the mapping's reference) are nobody's to hold.
        for (int idx = 0; idx < t->pool_size && err.empty(); ++idx) {
          if (!on_list[i][idx] || seen[idx]) continue;
          err = place(&t->pool[idx], true, 1);
          ++held;
        }
      }
      if (!err.empty()) return err;
      if (held != static_cast<std::size_t>(t->pool_size)) {
        return who + std::to_string(held) + " pages accounted of " +
               std::to_string(t->pool_size);
      }
      // Windows end on batch boundaries: exactly one add drain per S pages,
      // and the release flushes took the kernel's holds
      // (ReleaseFlushLocks).
      if (t->ops % cfg_.slots != 0)
        return who + std::to_string(t->ops) +
               " pages is not a whole number of batches";
      const uint64_t batches = t->ops / cfg_.slots;
      if (t->add_drains != batches) {
        return who + std::to_string(t->add_drains) + " add drains for " +
               std::to_string(batches) + " batches";
      }
      const uint64_t expected = batches + t->expected_release_locks;
      if (t->stat.acquisitions + t->release_lock_skips != expected) {
        return who + std::to_string(t->stat.acquisitions) +
               " lru_lock acquisitions (+ " +
               std::to_string(t->release_lock_skips) + " skipped) for " +
               std::to_string(t->ops) + " pages at " +
               std::to_string(cfg_.slots) + " slots (expected " +
               std::to_string(batches) + " add drains + " +
               std::to_string(t->expected_release_locks) +
               " release holds = " + std::to_string(expected) + ")";
      }
      if (!cfg_.scanner &&
          (t->release_lock_skips != 0 || t->handed_to_scanner != 0)) {
        return who + "releases skipped the lock without a scanner";
      }
      ops += t->ops;
    }
    if (ops != harness_ops_) {
      return "threads counted " + std::to_string(ops) + " pages, harness " +
             std::to_string(harness_ops_);
    }
    // Every release whose last put was the scanner's was freed by it.
    uint64_t handed = 0, freed = 0;
    for (std::size_t i = 0; i < per_thread_.size(); ++i)
      handed += per_thread_.get(i) ? per_thread_.get(i)->handed_to_scanner : 0;
    for (const auto& sc : scanners_) freed += sc->freed;
    if (cfg_.release != Release::kNone && handed != freed) {
      return std::to_string(handed) +
             " releases left the last reference to the scanner, which freed " +
             std::to_string(freed) + " pages";
    }
    return "";
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
    uint64_t scanned_mark = 0;      ///< zone.added value covered by past cycles
    int pu = -1;
    int zone = 0;
    std::atomic<int> in_cycle{0};
  };

  static std::string Where(int z, uint64_t n) {
    return "zone " + std::to_string(z) + " LRU, node " + std::to_string(n) +
           ": ";
  }

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
    // The window holds the reclaim of the pages it added (issue 40 item 1):
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
      // worker descheduled while it waits no longer keeps the scanner
      // cycling on an emptied LRU (issue 40 item 1: 30-1400 holds per page).
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
        std::vector<HelperPlace> places =
            PlaceHelpers(env_.topology->usable_pus(), *env_.plan,
                         static_cast<int>(scanners_.size()), smt);
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
      s->thread = std::thread([this, s] { ScannerMain(*s); });
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
        // Sleep, as kswapd does, rather than PAUSE-poll (issue 23 item 6).
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
  /// move_pages_to_lru puts them on LRU_INACTIVE_ANON under hold 2, freeing a
  /// page whose last reference that was.
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
        ListDel(&p->lru);
        UpdateLruSize58(zone, &node_diff, &zone_diff, &memcg_diff, -1,
                        kLruInactiveAnon);
        ReturnToOwner(p);
        ++s.freed;
      }
    }
    Release(zone.lru_lock, s.stat);
    zone.node_lru.fetch_add(node_diff, std::memory_order_relaxed);
    zone.zone_lru.fetch_add(zone_diff, std::memory_order_relaxed);
    zone.memcg_lru.fetch_add(memcg_diff, std::memory_order_relaxed);
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
        ReturnToOwner(p);
        ++s.freed;
      }
      while (!ListEmpty(&busy)) ListMove(busy.next, &isolated);
    }
    // move_pages_to_lru retakes the lock even when reclaim left nothing to
    // put back (mm/vmscan.c@v5.8.1:1967).
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
        ListDel(&p->lru);
        if (k == Kernel::k269) {
          --zone.nr_lru;
        } else {
          UpdateLruSize58(zone, &node_diff, &zone_diff, &memcg_diff, -1, lru);
        }
        ReturnToOwner(p);
        ++s.freed;
      }
    }
    Release(zone.lru_lock, s.stat);
    // refresh_cpu_vm_stats for the scanner's CPU.
    zone.node_lru.fetch_add(node_diff, std::memory_order_relaxed);
    zone.zone_lru.fetch_add(zone_diff, std::memory_order_relaxed);
    zone.memcg_lru.fetch_add(memcg_diff, std::memory_order_relaxed);
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

// ---- the grid
// ---------------------------------------------------------------------------------

/// Named layouts: param value and native slot count.
struct NamedLayout {
  const char* name;
  int slots;
};
inline constexpr NamedLayout kNamedLayouts[] = {
    {PagevecV269::kName, PagevecV269::kSlots},
    {PagevecV2610::kName, PagevecV2610::kSlots},
    {PagevecProposal2004::kName, PagevecProposal2004::kSlots},
    {"pagevec_5x15", 15},
    {"pagevec_5x31", 31},
};

/// Creates the workload for lock L x `layout` ("" = the generic 5.x header).
/// Throws std::invalid_argument for an unknown layout. Explicitly instantiated
/// once per lock in bench/pagevec/*.cpp, so the 30 lock x layout workloads
/// compile in three units in parallel (issue 28) instead of one.
template <LockAlgorithm L>
std::unique_ptr<Workload> MakePagevecWorkloadFor(const PointEnv& env,
                                                 const std::string& layout,
                                                 Config cfg) {
  if (layout.empty()) {
    return std::make_unique<PagevecWorkload<L, GenericPv>>(env, cfg);
  } else if (layout == PagevecV269::kName) {
    return std::make_unique<PagevecWorkload<L, NamedPv<PagevecV269>>>(env, cfg);
  } else if (layout == PagevecV2610::kName) {
    return std::make_unique<PagevecWorkload<L, NamedPv<PagevecV2610>>>(env,
                                                                       cfg);
  } else if (layout == PagevecProposal2004::kName) {
    return std::make_unique<PagevecWorkload<L, NamedPv<PagevecProposal2004>>>(
        env, cfg);
  } else if (layout == "pagevec_5x15") {
    return std::make_unique<PagevecWorkload<L, NamedPv<Pagevec5x15>>>(env, cfg);
  } else if (layout == "pagevec_5x31") {
    return std::make_unique<PagevecWorkload<L, NamedPv<Pagevec5x31>>>(env, cfg);
  }
  throw std::invalid_argument(
      "pagevec: unknown layout '" + layout +
      "': accepted are pagevec_v2_6_9, pagevec_v2_6_10, "
      "pagevec_2004_proposal, pagevec_5x15, pagevec_5x31");
}

/// pagevec's lock axis: the eras' locks (ttas for 2.6.9, qspinlock for 5.8),
/// ticket, mcs and pthread_mutex; kLocks in bench/pagevec.cpp names the same
/// five (static_assert there). tas and pthread_spin are not on it, so their 12
/// workloads are not compiled (issue 28: the first build).
using PagevecLocks =
    LockList<TtasLock, TicketLock, QspinLock, McsLock, PthreadMutexLock>;

#define LOCKLINE_PAGEVEC_FACTORY(L)                    \
  std::unique_ptr<Workload> MakePagevecWorkloadFor<L>( \
      const PointEnv& env, const std::string& layout, Config cfg)
extern template LOCKLINE_PAGEVEC_FACTORY(TtasLock);
extern template LOCKLINE_PAGEVEC_FACTORY(TicketLock);
extern template LOCKLINE_PAGEVEC_FACTORY(McsLock);
extern template LOCKLINE_PAGEVEC_FACTORY(QspinLock);
extern template LOCKLINE_PAGEVEC_FACTORY(PthreadMutexLock);

/// Creates the workload for `lock` x `layout` ("" = generic 5.x header).
/// Throws std::invalid_argument for an unknown lock or layout.
inline std::unique_ptr<Workload> MakePagevecWorkload(const PointEnv& env,
                                                     const std::string& lock,
                                                     const std::string& layout,
                                                     Config cfg) {
  std::unique_ptr<Workload> w;
  auto make = [&]<class L>() {
    w = MakePagevecWorkloadFor<L>(env, layout, cfg);
  };
  if (!WithLockIn<PagevecLocks>(lock, make)) {
    std::string accepted;
    for (const std::string& name : LockNamesOf(PagevecLocks{}))
      accepted += (accepted.empty() ? "" : ", ") + name;
    throw std::invalid_argument(
        "pagevec: lock '" + lock +
        "' is not on pagevec's lock axis; accepted: " + accepted);
  }
  return w;
}

}  // namespace pagevec_bench
}  // namespace lockline
