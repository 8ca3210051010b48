// pagevec: pages/s, lru_lock acquisitions per page and lock wait share against
// the pagevec's batching factor, line offset and sizing formula (BACKGROUND.md
// sections 1 and 4; issues 7 and 16). Threads push their own pages through
// lru_cache_add and release_pages on a shared LRU; with work_ns:0 and 2+
// threads per lock lru_lock is saturated (the 2020 large-system regime). The
// per-page work under the lock follows the kernel the row names:
//   kernel:2.6.9  __pagevec_lru_add (mm/swap.c@v2.6.9:289): TestSetPageLRU,
//                 list_add, nr_inactive++; release_pages (swap.c@v2.6.9:207):
//                 TestClearPageLRU, list_del, nr_inactive--, the lock dropped
//                 every 16 freed pages (its pages_to_free pagevec fills);
//   kernel:5.8    __pagevec_lru_add_fn (mm/swap.c@v5.8.1:969):
//                 TestClearPageUnevictable, SetPageLRU, smp_mb__after_atomic,
//                 page_evictable, update_lru_size (node, zone and memcg
//                 per-CPU counters, memcg lru_zone_size), list_add on the
//                 memcg lruvec; release_pages (swap.c@v5.8.1:827):
//                 __ClearPageLRU, page_off_lru, del_page_from_lru_list, the
//                 lock dropped every SWAP_CLUSTER_MAX = 32 pages.
// scanner:on adds one reclaim scanner thread per lock that isolates and puts
// back SWAP_CLUSTER_MAX = 32 pages from the LRU tail under the same lock, one
// cycle per 32 pages the workers add (isolate_lru_pages / move_pages_to_lru
// of mm/vmscan.c@v5.8.1, for both kernels). Not measured: shrink_page_list
// (nothing is reclaimed), active/inactive aging, irq-off cost, icache misses.
//
// Row keys (every component key:value; parse by splitting on '/' then on the
// first ':'):
//   pagevec/mode:M/slots:S/offset:O/policy:fixed/lock:L/work_ns:W/zones:Z/kernel:K/scanner:C/threads:N
//       generic Linux 5.x header (Pagevec5x layout, run-time slot count S
//       = 1..255);
//   pagevec/mode:M/slots:auto/offset:O/policy:4lg|sqrtlg/lock:L/work_ns:W/zones:Z/kernel:K/scanner:C/threads:N
//       the 2004 sizing formulas resolved for N = the point's thread count
//       (metric slots_resolved and details.slots give the count used;
//       details.formulas the 4lg value for the machine's possible CPUs too);
//   pagevec/mode:M/layout:K/offset:O/lock:L/work_ns:W/zones:Z/kernel:K/scanner:C/threads:N
//       a named struct at its native slot count: K = pagevec_v2_6_9 (16),
//       pagevec_2004_proposal (15), pagevec_5x15, pagevec_5x31 (no slots param,
//       so sweeps over slots do not mix them in).
//   M: deferred (per-CPU pagevec, pages trickle in) | rapid (on-stack pagevec
//   filled and drained at once); O: bytes past a cache-line boundary; Z: 1 (one
//   lock for all threads) | per_numa (one lru_lock per NUMA node, threads on
//   their local one: the default on multi-node machines); K: 2.6.9 | 5.8;
//   C: off | on.
//
// Operation: one page added to the LRU (lru_cache_add) plus one page released
// from it (release_pages); pages_per_s = ops_per_s. A thread checks the stop
// flag only after every S pages (a whole batch period), so in both modes each
// window holds exactly one add-drain and one release-drain per S pages:
// without the scanner, acquisitions == pages / S * (1 + ceil(S / R)) exactly,
// R = 16 (2.6.9) or 32 (5.8) (Verify checks it).
#include "layouts/pagevec.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "harness/cpu.h"
#include "harness/family.h"
#include "harness/locks/all_locks.h"
#include "harness/locks/lock_stat.h"
#include "harness/memory.h"
#include "harness/topology.h"
#include "layouts/cacheline.h"
#include "layouts/page.h"
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
/// SWAP_CLUSTER_MAX: the reclaim scanner's batch and 5.8 release_pages' lock
/// batch.
inline constexpr int kSwapClusterMax = 32;
/// 2.6.9 release_pages drops the lock whenever its pages_to_free pagevec
/// (PAGEVEC_SIZE 16) fills.
inline constexpr int kReleaseBatch269 = 16;
/// The 5.8 per-CPU counter fold threshold lockline uses for node, zone and
/// memcg LRU sizes (MEMCG_CHARGE_BATCH is 32; the vmstat threshold depends on
/// CPUs and memory and is of the same order).
inline constexpr long kStatFold58 = 32;
/// enum lru_list index of LRU_INACTIVE_ANON, where new anonymous pages go.
inline constexpr int kLruInactiveAnon = 0;
/// Lists of a 5.8 lruvec (LRU_INACTIVE_ANON .. LRU_UNEVICTABLE).
inline constexpr int kNrLru58 = 5;
/// ZONE_NORMAL's index in lru_zone_size[zid][lru].
inline constexpr int kZoneNormal = 2;

/// The lock and the lists one lru_lock protects.
///   2.6.9: zone->lru_lock, zone->inactive_list and zone->nr_inactive, on one
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
  ListHead lru;  ///< 2.6.9: the inactive list; pages linked through page->lru
  unsigned long nr_lru = 0;  ///< 2.6.9: zone->nr_inactive, under lru_lock
  alignas(kDestructiveLine) ListHead lists58[kNrLru58];  ///< 5.8 memcg lruvec
  alignas(kDestructiveLine) unsigned long lru_zone_size[4][kNrLru58] = {};
  alignas(kDestructiveLine) std::atomic<long> node_lru{0};  ///< NR_LRU_BASE+lru
  std::atomic<long> zone_lru{0};   ///< NR_ZONE_LRU_BASE + lru (zone vmstat)
  std::atomic<long> memcg_lru{0};  ///< memcg lruvec_stat[NR_LRU_BASE + lru]
  /// Pages the workers added to this LRU (the scanner's pace), own line.
  alignas(kDestructiveLine) std::atomic<uint64_t> added{0};
  LruZone() {
    ListInit(&lru);
    for (ListHead& h : lists58) ListInit(&h);
  }
  /// The list new pages go to under `k`, and its length counter.
  ListHead* List(Kernel k) {
    return k == Kernel::k269 ? &lru : &lists58[kLruInactiveAnon];
  }
  const ListHead* List(Kernel k) const {
    return k == Kernel::k269 ? &lru : &lists58[kLruInactiveAnon];
  }
  unsigned long& Count(Kernel k) {
    return k == Kernel::k269 ? nr_lru
                             : lru_zone_size[kZoneNormal][kLruInactiveAnon];
  }
  unsigned long Count(Kernel k) const {
    return k == Kernel::k269 ? nr_lru
                             : lru_zone_size[kZoneNormal][kLruInactiveAnon];
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
  uint64_t work_ns = 0;   ///< think time per page outside the lock
  int zones = 1;          ///< zones (lru_locks); threads use zone numa % zones
  std::string policy = "fixed";
  Kernel kernel = Kernel::k269;  ///< per-page work under the lock
  bool scanner = false;          ///< one reclaim scanner thread per lock
};

/// Storage for one pagevec at `offset` past a `line` boundary, with its own
/// lines.
inline std::size_t PvStride(std::size_t bytes, std::size_t offset,
                            std::size_t line) {
  return (offset + bytes + line - 1) / line * line;
}

/// Thread-private state, allocated and first touched by its pinned thread.
template <class Pv>
struct alignas(kDestructiveLine) PerThread {
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
  unsigned char* pv_storage;     ///< deferred mode: the two per-CPU pagevecs
  typename Pv::Handle add_pv{};  ///< deferred: lru_add_pvec
  typename Pv::Handle rel_pv{};  ///< deferred: pages waiting for release_pages
                                 ///< (still on the LRU)
  int zone = 0;
  int index = 0;
  uint64_t ops = 0;  ///< pages added (= released) in windows
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

/// The workload: `L` the lru_lock algorithm, `Pv` the pagevec kind.
template <LockAlgorithm L, class Pv>
class PagevecWorkload : public Workload {
 public:
  PagevecWorkload(const PointEnv& env, Config cfg)
      : cfg_(cfg), env_(env), per_thread_(env.threads) {
    const bool bind = cfg_.zones > 1 && env.topology != nullptr &&
                      env.topology->summary().numa_nodes >= cfg_.zones;
    for (int z = 0; z < cfg_.zones; ++z) {
      PointEnv zone_env = env;
      // A per-NUMA LRU lives on its node, as the kernel's pgdat does.
      if (bind) zone_env.mem_policy = "node:" + std::to_string(z);
      zones_.push_back(MakeShared<LruZone<L>>(zone_env));
      sides_.push_back(MakeShared<LockStatSide>(zone_env));
    }
    if (cfg_.scanner) StartScanners();
  }
  ~PagevecWorkload() override { StopScanners(); }

  void SetupThread(const ThreadCtx& ctx) override {
    const int s = cfg_.slots;
    const std::size_t stride = PvStride(Pv::Bytes(s), cfg_.offset, cfg_.line);
    auto me = std::make_unique<PerThread<Pv>>(
        kResidentPages + 2 * s + 1 + kPoolSlack, stride, cfg_.line);
    me->zone = ctx.numa >= 0 ? ctx.numa % cfg_.zones : 0;
    me->index = ctx.index;
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
    // not in the stats.
    LruZone<L>& zone = *zones_[me->zone];
    zone.lru_lock.lock();
    for (int i = 0; i < kResidentPages; ++i) {
      Page* p = me->free_pages.Pop();
      set_page_count(*p, 1);
      SetPageFlag(*p, kPgSwapBacked);
      SetPageLru(*p);
      ListAdd(&p->lru, zone.List(cfg_.kernel));
      ++zone.Count(cfg_.kernel);
      me->on_lru.Push(p);
    }
    zone.lru_lock.unlock();
    ++me->setup_acquisitions;
    if (!cfg_.rapid) {
      me->add_pv = Pv::Place(me->pv_storage + cfg_.offset, s);
      me->rel_pv = Pv::Place(me->pv_storage + stride + cfg_.offset, s);
      // Stagger the release pagevec by half a batch so add and release drains
      // interleave.
      for (int i = 0; i < s / 2; ++i) Pv::Add(me->rel_pv, me->on_lru.Pop());
    }
    per_thread_[ctx.index] = std::move(me);
  }

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    PerThread<Pv>& me = *per_thread_[ctx.index];
    LruZone<L>& zone = *zones_[me.zone];
    LockStatSide& side = *sides_[me.zone];
    const int s = cfg_.slots;
    uint64_t n = 0;
    running_.fetch_add(1, std::memory_order_relaxed);
    if (!cfg_.rapid) {
      while (!stop.load(std::memory_order_relaxed)) {
        TakeReturned(me, s);
        for (int i = 0; i < s; ++i) {
          ThinkNs(cfg_.work_ns);
          Page* p = me.free_pages.Pop();
          Allocated(*p);
          // lru_cache_add: take a reference for the pagevec, drain when full.
          get_page(*p);
          if (Pv::Add(me.add_pv, p) == 0)
            LruAddDrain(me, zone, side, me.add_pv, ctx.index);
          // The page added kResidentPages pages ago is released (put_page via a
          // pagevec).
          if (Pv::Add(me.rel_pv, me.on_lru.Pop()) == 0)
            ReleasePages(me, zone, side, me.rel_pv, ctx.index);
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
      while (!stop.load(std::memory_order_relaxed)) {
        TakeReturned(me, s);
        // The caller's work for the batch, then a gang of S pages rapid-fire.
        ThinkNs(cfg_.work_ns * static_cast<uint64_t>(s));
        for (int i = 0; i < s; ++i) {
          Page* p = me.free_pages.Pop();
          Allocated(*p);
          get_page(*p);
          Pv::Add(pv, p);
        }
        LruAddDrain(me, zone, side, pv, ctx.index);
        for (int i = 0; i < s; ++i) Pv::Add(pv, me.on_lru.Pop());
        ReleasePages(me, zone, side, pv, ctx.index);
        n += s;
      }
    }
    running_.fetch_sub(1, std::memory_order_relaxed);
    me.ops += n;
    return n;
  }

  void Report(PointReport& out, double window_seconds, uint64_t ops) override {
    StopScanners();  // after the last window: their counters are final
    harness_ops_ = ops;
    std::vector<const LockStatThread*> stats;
    uint64_t acquisitions = 0, setup = 0, handed = 0;
    for (const auto& t : per_thread_) {
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
        {"window_acquisitions", acquisitions},
        {"setup_acquisitions", setup},
        {"op",
         "one page added to the LRU (lru_cache_add) and one released "
         "(release_pages); "
         "pages_per_s = ops_per_s"},
    };
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
    out.details["kernel"] = {
        {"version", KernelName(cfg_.kernel)},
        {"per_page_work",
         cfg_.kernel == Kernel::k269
             ? "2.6.9 __pagevec_lru_add: TestSetPageLRU, list_add, "
               "nr_inactive++; release_pages: TestClearPageLRU, list_del, "
               "nr_inactive--, lock dropped every 16 freed pages"
             : "5.8 __pagevec_lru_add_fn: TestClearPageUnevictable, "
               "SetPageLRU, smp_mb__after_atomic, page_evictable, "
               "update_lru_size (node/zone/memcg per-CPU diffs, memcg "
               "lru_zone_size), list_add; release_pages: __ClearPageLRU, "
               "page_off_lru, del_page_from_lru_list, lock dropped every 32 "
               "pages"},
        {"lru_lock_scope", cfg_.kernel == Kernel::k269
                               ? "zone->lru_lock (per zone)"
                               : "pgdat->lru_lock (per NUMA node)"},
        {"release_lock_batch", ReleaseBatch()},
    };
    nlohmann::json sj = {{"on", cfg_.scanner}};
    if (cfg_.scanner) {
      uint64_t cycles = 0, isolated = 0, freed = 0, acq = 0;
      nlohmann::json pus = nlohmann::json::array();
      for (const auto& sc : scanners_) {
        cycles += sc->cycles;
        isolated += sc->isolated;
        freed += sc->freed;
        acq += sc->stat.acquisitions;
        pus.push_back(sc->pu);
      }
      sj["cycles"] = cycles;
      sj["pages_isolated"] = isolated;
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
          "one cycle per 32 pages the workers add to its LRU: isolate 32 "
          "pages from the tail (PageLRU, get_page_unless_zero, ClearPageLRU, "
          "list_move, size -32) under lru_lock, unlock, relock and put them "
          "back (SetPageLRU, list_add, size +32, put_page; a page whose last "
          "reference that was is taken off the LRU and freed); "
          "shrink_page_list is not run";
      out.Metric("scanner_acquisitions_per_page",
                 ops ? static_cast<double>(acq) / pages : 0);
    }
    out.details["scanner"] = sj;
  }

  /// LRU integrity, page conservation and exact acquisitions. Stops the
  /// scanner threads first (call it after the last window).
  std::string Verify() override {
    StopScanners();
    const Kernel k = cfg_.kernel;
    uint64_t total_pages = 0;
    for (const auto& t : per_thread_) total_pages += t ? t->pool_size : 0;
    // Owner lookup: pools sorted by address.
    std::vector<std::pair<const Page*, int>> pools;
    for (int i = 0; i < static_cast<int>(per_thread_.size()); ++i)
      if (per_thread_[i]) pools.emplace_back(per_thread_[i]->pool.get(), i);
    std::sort(pools.begin(), pools.end());
    std::vector<std::vector<char>> on_list(per_thread_.size());
    for (const auto& [base, i] : pools)
      on_list[i].assign(per_thread_[i]->pool_size, 0);

    for (int z = 0; z < cfg_.zones; ++z) {
      const LruZone<L>& zone = *zones_[z];
      const ListHead* head = zone.List(k);
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
        if (idx < 0 || idx >= per_thread_[owner]->pool_size)
          return Where(z, walked) + "node is not a pool page";
        if (per_thread_[owner]->zone != z)
          return Where(z, walked) + "page of another zone";
        if (on_list[owner][idx]) return Where(z, walked) + "page listed twice";
        on_list[owner][idx] = 1;
        if (!PageLru(*page))
          return Where(z, walked) + "page on the LRU without PG_lru";
        prev = node;
      }
      if (head->prev != prev)
        return Where(z, walked) + "head's prev is not the last node";
      if (walked != zone.Count(k)) {
        return Where(z, walked) + "LRU size " + std::to_string(zone.Count(k)) +
               " but " + std::to_string(walked) + " pages linked";
      }
    }

    uint64_t ops = 0;
    for (int i = 0; i < static_cast<int>(per_thread_.size()); ++i) {
      PerThread<Pv>* t = per_thread_[i].get();
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
      if (!cfg_.rapid) {
        for (int k2 = 0; k2 < Pv::Count(t->rel_pv) && err.empty(); ++k2)
          err = place(Pv::At(t->rel_pv, k2), true, 1);
        for (int k2 = 0; k2 < Pv::Count(t->add_pv) && err.empty(); ++k2)
          err = place(Pv::At(t->add_pv, k2), false, 2);
        held += Pv::Count(t->rel_pv) + Pv::Count(t->add_pv);
      }
      if (!err.empty()) return err;
      if (held != static_cast<std::size_t>(t->pool_size)) {
        return who + std::to_string(held) + " pages accounted of " +
               std::to_string(t->pool_size);
      }
      // Windows end on batch boundaries: exactly one add- and one
      // release-drain per S pages; the release takes the lock once per
      // R-page run of freed pages.
      if (t->ops % cfg_.slots != 0)
        return who + std::to_string(t->ops) +
               " pages is not a whole number of batches";
      const uint64_t batches = t->ops / cfg_.slots;
      const uint64_t per_release =
          (static_cast<uint64_t>(cfg_.slots) + ReleaseBatch() - 1) /
          ReleaseBatch();
      const uint64_t expected = batches * (1 + per_release);
      if (t->stat.acquisitions + t->release_lock_skips != expected) {
        return who + std::to_string(t->stat.acquisitions) +
               " lru_lock acquisitions (+ " +
               std::to_string(t->release_lock_skips) + " skipped) for " +
               std::to_string(t->ops) + " pages at " +
               std::to_string(cfg_.slots) +
               " slots (expected pages / slots * (1 + ceil(slots / " +
               std::to_string(ReleaseBatch()) +
               ")) = " + std::to_string(expected) + ")";
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
    for (const auto& t : per_thread_) handed += t ? t->handed_to_scanner : 0;
    for (const auto& sc : scanners_) freed += sc->freed;
    if (handed != freed) {
      return std::to_string(handed) +
             " releases left the last reference to the scanner, which freed " +
             std::to_string(freed) + " pages";
    }
    return "";
  }

  /// For tests: a thread's state and a zone.
  PerThread<Pv>* thread_state(int i) { return per_thread_[i].get(); }
  LruZone<L>* zone(int z) { return zones_[z].get(); }

 private:
  /// The scanner's thread index in lock_stat's hand-off bookkeeping (beyond
  /// any worker's).
  static constexpr int kScannerIndex = 1 << 20;
  /// One reclaim scanner: its thread, its statistics (not part of the
  /// measured threads' lock_stat) and its PU.
  struct Scanner {
    std::thread thread;
    LockStatThread stat;
    LockStatSide* side = nullptr;
    uint64_t cycles = 0, isolated = 0, freed = 0;
    uint64_t scanned_mark = 0;  ///< zone.added value covered by past cycles
    int pu = -1;
    int zone = 0;
    std::atomic<int> in_cycle{0};
  };

  static std::string Where(int z, uint64_t n) {
    return "zone " + std::to_string(z) + " LRU, node " + std::to_string(n) +
           ": ";
  }

  /// Pages per lru_lock hold in release_pages.
  uint64_t ReleaseBatch() const {
    return cfg_.kernel == Kernel::k269 ? kReleaseBatch269 : kSwapClusterMax;
  }

  /// The allocation's page state: an anonymous page (5.8 do_anonymous_page
  /// sets PG_swapbacked), the owner's reference.
  void Allocated(Page& p) const {
    set_page_count(p, 1);
    if (cfg_.kernel == Kernel::k58) SetPageFlag(p, kPgSwapBacked);
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
      CpuRelax();
    }
  }

  /// update_lru_size (include/linux/mm_inline.h@v5.8.1) for `nr` pages of
  /// LRU_INACTIVE_ANON: node, zone and memcg per-CPU diffs folded at
  /// kStatFold58, and the memcg lru_zone_size written in place (caller holds
  /// lru_lock).
  static void UpdateLruSize58(LruZone<L>& zone, long* node_diff,
                              long* zone_diff, long* memcg_diff, long nr) {
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
    zone.lru_zone_size[kZoneNormal][kLruInactiveAnon] +=
        static_cast<unsigned long>(nr);
  }

  /// The lru_add drain, one lru_lock acquisition for the batch:
  /// 2.6.9 __pagevec_lru_add (swap.c@v2.6.9:289) or 5.8 pagevec_lru_move_fn
  /// with __pagevec_lru_add_fn (swap.c@v5.8.1:206, 969); then release_pages
  /// drops the references lru_cache_add took (never the last one here, so no
  /// lock).
  void LruAddDrain(PerThread<Pv>& me, LruZone<L>& zone, LockStatSide& side,
                   typename Pv::Handle& pv, int index) {
    const int n = Pv::Count(pv);
    LockWithStats(zone.lru_lock, side, me.stat, index);
    if (cfg_.kernel == Kernel::k269) {
      for (int i = 0; i < n; ++i) {
        Page* p = Pv::At(pv, i);
        if (TestSetPageFlag(*p, kPgLru)) ++me.anomalies;  // BUG() in 2.6.9
        ListAdd(&p->lru, &zone.lru);  // add_page_to_inactive_list
      }
      zone.nr_lru += n;
    } else {
      for (int i = 0; i < n; ++i) {
        Page* p = Pv::At(pv, i);
        const bool was_unevictable = TestClearPageFlag(*p, kPgUnevictable);
        if (PageLru(*p)) ++me.anomalies;  // VM_BUG_ON_PAGE(PageLRU)
        SetPageLru(*p);
        std::atomic_thread_fence(std::memory_order_seq_cst);  // smp_mb__after
        // page_evictable: !mapping_unevictable(page_mapping(page)) &&
        // !PageMlocked(page); anonymous pages have no mapping flags to read.
        const bool evictable = benchmark_volatile_read(p->mapping) == nullptr &&
                               !TestPageFlag(*p, kPgMlocked);
        // page_lru: PageUnevictable, page_is_file_lru (PG_swapbacked),
        // PageActive: LRU_INACTIVE_ANON for these pages.
        if (!evictable || TestPageFlag(*p, kPgUnevictable) ||
            !TestPageFlag(*p, kPgSwapBacked) || PageActive(*p) ||
            was_unevictable) {
          ++me.anomalies;
        }
        UpdateLruSize58(zone, &me.node_diff, &me.zone_diff, &me.memcg_diff, 1);
        ListAdd(&p->lru, &zone.lists58[kLruInactiveAnon]);
      }
    }
    UnlockWithStats(zone.lru_lock, me.stat);
    zone.added.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
    for (int i = 0; i < n; ++i) {
      Page* p = Pv::At(pv, i);
      if (put_page_testzero(*p)) ++me.anomalies;
      me.on_lru.Push(p);
    }
    Pv::Reinit(pv);
  }

  /// A volatile read of a pointer field (the compiler cannot drop or hoist
  /// it across the lock).
  static const void* benchmark_volatile_read(void* const& field) {
    return *static_cast<void* const volatile*>(&field);
  }

  /// release_pages (swap.c@v2.6.9:207, swap.c@v5.8.1:827): drop each page's
  /// reference; a page whose count reaches zero is taken off the LRU under
  /// lru_lock, taken at the first such page and dropped every R pages (2.6.9:
  /// the 16-page pages_to_free pagevec fills; 5.8: SWAP_CLUSTER_MAX). A page
  /// whose count does not reach zero is the scanner's to free (it holds a
  /// reference). Freed pages go back to the thread's pool.
  void ReleasePages(PerThread<Pv>& me, LruZone<L>& zone, LockStatSide& side,
                    typename Pv::Handle& pv, int index) {
    const int n = Pv::Count(pv);
    const uint64_t r = ReleaseBatch();
    const uint64_t expected_locks = (static_cast<uint64_t>(n) + r - 1) / r;
    uint64_t locks = 0;
    bool locked = false;
    uint64_t in_batch = 0;  // 5.8 lock_batch: iterations under this hold
    uint64_t to_free = 0;   // 2.6.9 pages_to_free.nr
    int kept = 0;
    Page* freed[kMaxSlots];
    for (int i = 0; i < n; ++i) {
      Page* p = Pv::At(pv, i);
      if (cfg_.kernel == Kernel::k58 && locked && ++in_batch == r) {
        UnlockWithStats(zone.lru_lock, me.stat);
        locked = false;
      }
      if (!put_page_testzero(*p)) {
        ++me.handed_to_scanner;  // the scanner's put will free it
        continue;
      }
      if (!locked) {
        LockWithStats(zone.lru_lock, side, me.stat, index);
        locked = true;
        in_batch = 0;
        ++locks;
      }
      if (cfg_.kernel == Kernel::k269) {
        if (TestClearPageLru(*p)) {
          ListDel(&p->lru);  // del_page_from_lru
          if (PageActive(*p)) ClearPageActive(*p);
          --zone.nr_lru;
        } else {
          ++me.anomalies;
        }
      } else {
        if (PageLru(*p)) {
          ClearPageFlagNonAtomic(*p, kPgLru);  // __ClearPageLRU
          // page_off_lru: PageUnevictable, page_lru_base_type, PageActive.
          if (TestPageFlag(*p, kPgUnevictable) || PageActive(*p) ||
              !TestPageFlag(*p, kPgSwapBacked)) {
            ++me.anomalies;
          }
          ListDel(&p->lru);  // del_page_from_lru_list
          UpdateLruSize58(zone, &me.node_diff, &me.zone_diff, &me.memcg_diff,
                          -1);
        } else {
          ++me.anomalies;
        }
      }
      freed[kept++] = p;
      if (cfg_.kernel == Kernel::k269 && ++to_free == r) {
        // pages_to_free is full: unlock, __pagevec_free, relock on demand.
        UnlockWithStats(zone.lru_lock, me.stat);
        locked = false;
        to_free = 0;
      }
    }
    if (locked) UnlockWithStats(zone.lru_lock, me.stat);
    // The kernel skips the lock for pages whose last reference is the
    // scanner's; count the batches so Verify's exact formula still holds.
    me.release_lock_skips += expected_locks - std::min(expected_locks, locks);
    for (int i = 0; i < kept; ++i) me.free_pages.Push(freed[i]);
    Pv::Reinit(pv);
  }

  // ---- the reclaim scanner ----------------------------------------------

  /// Spare PUs (usable, outside the point's plan) for the scanners; when
  /// there are fewer than zones, each scanner shares the plan's last PU(s).
  /// -1 (unbound) without a host topology (tests).
  void PickScannerPus() {
    for (auto& sc : scanners_) sc->pu = -1;
    if (env_.topology == nullptr || !env_.topology->is_host()) return;
    std::vector<int> used;
    if (env_.plan != nullptr) {
      for (const auto& pu : env_.plan->pus) used.push_back(pu.os_index);
    }
    std::vector<int> spare;
    for (const auto& pu : env_.topology->usable_pus()) {
      if (std::find(used.begin(), used.end(), pu.os_index) == used.end())
        spare.push_back(pu.os_index);
    }
    if (spare.size() >= scanners_.size()) {
      for (std::size_t i = 0; i < scanners_.size(); ++i)
        scanners_[i]->pu = spare[i];
      return;
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
    while (!quit_.load(std::memory_order_relaxed)) {
      const uint64_t added = zone.added.load(std::memory_order_relaxed);
      if (running_.load(std::memory_order_relaxed) == 0 ||
          added - s.scanned_mark < static_cast<uint64_t>(kSwapClusterMax)) {
        if (scanner_shares_pu_) {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        } else {
          CpuRelax();
        }
        continue;
      }
      s.scanned_mark += kSwapClusterMax;
      ScanCycle(s, zone);
    }
  }

  /// isolate_lru_pages + move_pages_to_lru (mm/vmscan.c@v5.8.1) for up to
  /// SWAP_CLUSTER_MAX pages from the tail of the inactive list.
  void ScanCycle(Scanner& s, LruZone<L>& zone) {
    const Kernel k = cfg_.kernel;
    ListHead* list = zone.List(k);
    ListHead isolated;
    ListInit(&isolated);
    long nr = 0;
    long node_diff = 0, zone_diff = 0, memcg_diff = 0;  // the scanner's CPU
    LockWithStats(zone.lru_lock, *s.side, s.stat, kScannerIndex);
    for (int scan = 0; scan < kSwapClusterMax && !ListEmpty(list); ++scan) {
      Page* p = PageFromLru(list->prev);
      // __isolate_lru_page: PageLRU, then a reference unless the page is
      // being freed (its owner dropped the last one: leave it, rotated).
      if (!PageLru(*p) || !get_page_unless_zero(*p)) {
        ListMove(&p->lru, list);
        continue;
      }
      ClearPageLru(*p);
      ListMove(&p->lru, &isolated);
      ++nr;
    }
    if (k == Kernel::k269) {
      zone.nr_lru -= static_cast<unsigned long>(nr);
    } else {
      UpdateLruSize58(zone, &node_diff, &zone_diff, &memcg_diff, -nr);
    }
    UnlockWithStats(zone.lru_lock, s.stat);
    s.isolated += static_cast<uint64_t>(nr);
    // (shrink_page_list would run here: nothing is reclaimed.)
    LockWithStats(zone.lru_lock, *s.side, s.stat, kScannerIndex);
    while (!ListEmpty(&isolated)) {
      Page* p = PageFromLru(isolated.next);
      SetPageLru(*p);
      ListMove(&p->lru, list);
      if (k == Kernel::k269) {
        ++zone.nr_lru;
      } else {
        UpdateLruSize58(zone, &node_diff, &zone_diff, &memcg_diff, 1);
      }
      if (put_page_testzero(*p)) {
        // The owner released it meanwhile: the scanner frees it.
        ClearPageLru(*p);
        ListDel(&p->lru);
        if (k == Kernel::k269) {
          --zone.nr_lru;
        } else {
          UpdateLruSize58(zone, &node_diff, &zone_diff, &memcg_diff, -1);
        }
        PerThread<Pv>& owner = *per_thread_[p->private_];
        std::lock_guard<std::mutex> g(owner.returned_mu);
        owner.returned.push_back(p);
        owner.n_returned.store(static_cast<int>(owner.returned.size()),
                               std::memory_order_release);
        ++s.freed;
      }
    }
    UnlockWithStats(zone.lru_lock, s.stat);
    // refresh_cpu_vm_stats for the scanner's CPU.
    zone.node_lru.fetch_add(node_diff, std::memory_order_relaxed);
    zone.zone_lru.fetch_add(zone_diff, std::memory_order_relaxed);
    zone.memcg_lru.fetch_add(memcg_diff, std::memory_order_relaxed);
    ++s.cycles;
  }

  Config cfg_;
  PointEnv env_;
  std::vector<std::shared_ptr<LruZone<L>>> zones_;
  std::vector<std::shared_ptr<LockStatSide>> sides_;
  std::vector<std::unique_ptr<PerThread<Pv>>> per_thread_;
  std::vector<std::unique_ptr<Scanner>> scanners_;
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
    {PagevecProposal2004::kName, PagevecProposal2004::kSlots},
    {"pagevec_5x15", 15},
    {"pagevec_5x31", 31},
};

/// Creates the workload for `lock` x `layout` ("" = generic 5.x header). Throws
/// std::invalid_argument for an unknown lock or layout.
inline std::unique_ptr<Workload> MakePagevecWorkload(const PointEnv& env,
                                                     const std::string& lock,
                                                     const std::string& layout,
                                                     Config cfg) {
  std::unique_ptr<Workload> w;
  auto make = [&]<class L>() {
    if (layout.empty()) {
      w = std::make_unique<PagevecWorkload<L, GenericPv>>(env, cfg);
    } else if (layout == PagevecV269::kName) {
      w = std::make_unique<PagevecWorkload<L, NamedPv<PagevecV269>>>(env, cfg);
    } else if (layout == PagevecProposal2004::kName) {
      w = std::make_unique<PagevecWorkload<L, NamedPv<PagevecProposal2004>>>(
          env, cfg);
    } else if (layout == "pagevec_5x15") {
      w = std::make_unique<PagevecWorkload<L, NamedPv<Pagevec5x15>>>(env, cfg);
    } else if (layout == "pagevec_5x31") {
      w = std::make_unique<PagevecWorkload<L, NamedPv<Pagevec5x31>>>(env, cfg);
    } else {
      throw std::invalid_argument(
          "pagevec: unknown layout '" + layout +
          "': accepted are pagevec_v2_6_9, pagevec_2004_proposal, "
          "pagevec_5x15, pagevec_5x31");
    }
  };
  if (!WithLock(lock, make))
    throw std::invalid_argument("pagevec: unknown lock '" + lock + "'");
  return w;
}

/// One point of the grid before thread counts.
struct GridPoint {
  std::string mode;    ///< deferred | rapid
  std::string layout;  ///< "" for the generic header
  int slots = 0;  ///< fixed slot count (generic, policy fixed) or the layout's
  std::size_t offset = 0;
  std::string policy;  ///< fixed | 4lg | sqrtlg (generic only)
  std::string lock;
  uint64_t work_ns = 0;
  std::string zones;   ///< 1 | per_numa
  std::string kernel;  ///< 2.6.9 | 5.8
  bool scanner = false;
};

// The one table the grid is generated from. The full suite is every
// combination of the axes with restrictions that keep it near 900 variants:
// offsets other than 0 only for the alignment question's sizes (15, 16, 31 and
// the named layouts) with lock:ticket, work_ns:0, zones:1; zones:per_numa only
// with lock:ticket; kernel:5.8 and scanner:on only at offset 0 for the 2020
// question's sizes (15, 16, 31, 32, the named 5.x layouts) and the formulas.
inline constexpr const char* kModes[] = {"deferred", "rapid"};
inline constexpr int kSlots[] = {1, 2, 4, 8, 15, 16, 31, 32, 63, 64, 128, 255};
inline constexpr std::size_t kOffsets[] = {0, 8, 16, 24, 32, 40, 48, 56};
inline constexpr const char* kPolicies[] = {"4lg", "sqrtlg"};
inline constexpr const char* kLocks[] = {"ticket", "qspinlock", "mcs",
                                         "pthread_mutex"};
inline constexpr uint64_t kWorkNs[] = {0, 200};
inline constexpr const char* kZones[] = {"1", "per_numa"};
/// The default suite's generic sizes under 2.6.9 (quick: 4).
inline constexpr int kDefaultSlots[] = {1, 4, 8, 15, 16, 31, 32, 64, 128};

/// The 2020 question's sizes: where kernel:5.8 and the scanner are swept.
inline bool Is2020Size(const GridPoint& p) {
  if (!p.layout.empty()) return p.layout.rfind("pagevec_5x", 0) == 0;
  if (p.policy != "fixed") return true;
  return p.slots == 15 || p.slots == 16 || p.slots == 31 || p.slots == 32;
}

/// Which suite a grid point belongs to (see the table above for the full
/// suite's restrictions). `multi_node`: the machine has more than one NUMA
/// node, so zones:per_numa (one lru_lock per node, as in the kernel) is the
/// default and zones:1 the labelled single-lock case. The 2004 question runs
/// under kernel:2.6.9 without a scanner; the 2020 question (15 vs 31 slots)
/// under kernel:5.8 with the scanner on.
inline Suite SuiteOf(const GridPoint& p, bool multi_node = false) {
  const std::string main_zones = multi_node ? "per_numa" : "1";
  const bool base = p.mode == "deferred" && p.lock == "ticket" &&
                    p.work_ns == 0 && p.zones == main_zones;
  const bool k269_off = p.kernel == "2.6.9" && !p.scanner;
  const bool k58_on = p.kernel == "5.8" && p.scanner;
  const bool generic_fixed = p.layout.empty() && p.policy == "fixed";
  if (multi_node && p.zones == "1" && p.mode == "deferred" &&
      p.lock == "ticket" && p.work_ns == 0 && p.offset == 0 && k58_on &&
      generic_fixed && (p.slots == 15 || p.slots == 31)) {
    return Suite::kDefault;  // the single-lock worst case, labelled
  }
  if (!base) return Suite::kFull;
  if (k58_on) {
    if (generic_fixed && p.offset == 0 && (p.slots == 15 || p.slots == 31))
      return Suite::kQuick;
    return Suite::kFull;
  }
  if (!k269_off) return Suite::kFull;
  if (!p.layout.empty()) {
    if (p.layout.rfind("pagevec_5x", 0) == 0) return Suite::kFull;
    return p.offset == 0 ? Suite::kDefault : Suite::kFull;
  }
  if (p.policy != "fixed")
    return p.offset == 0 ? Suite::kDefault : Suite::kFull;
  const bool in_default =
      std::find(std::begin(kDefaultSlots), std::end(kDefaultSlots), p.slots) !=
      std::end(kDefaultSlots);
  if (p.offset == 0 && p.slots == 4) return Suite::kQuick;
  if (p.offset == 0 && in_default) return Suite::kDefault;
  if (p.offset == 8 && (p.slots == 15 || p.slots == 16)) return Suite::kDefault;
  return Suite::kFull;
}

/// Every grid point of the full suite, in a stable order (default-suite points
/// first within each mode x lock x work_ns x zones block).
inline std::vector<GridPoint> GridPoints() {
  std::vector<GridPoint> out;
  const auto push = [&](GridPoint p) {
    p.kernel = "2.6.9";
    p.scanner = false;
    out.push_back(p);
    if (p.offset != 0 || !Is2020Size(p)) return;
    for (const char* k : {"2.6.9", "5.8"}) {
      for (const bool sc : {false, true}) {
        if (std::string(k) == "2.6.9" && !sc) continue;
        p.kernel = k;
        p.scanner = sc;
        out.push_back(p);
      }
    }
  };
  for (const char* mode : kModes) {
    for (const char* lock : kLocks) {
      for (const uint64_t work : kWorkNs) {
        for (const char* zones : kZones) {
          const bool ticket = std::string(lock) == "ticket";
          if (std::string(zones) != "1" && !ticket) continue;
          const bool sweep_offsets =
              ticket && work == 0 && std::string(zones) == "1";
          for (const std::size_t off : kOffsets) {
            if (off != 0 && !sweep_offsets) continue;
            for (const int s : kSlots) {
              if (off != 0 && s != 15 && s != 16 && s != 31) continue;
              push({mode, "", s, off, "fixed", lock, work, zones, "", false});
            }
            for (const NamedLayout& l : kNamedLayouts)
              push({mode, l.name, l.slots, off, "", lock, work, zones, "",
                    false});
            if (off == 0)
              for (const char* pol : kPolicies)
                push({mode, "", 0, off, pol, lock, work, zones, "", false});
          }
        }
      }
    }
  }
  return out;
}

/// Row-key parameters of a grid point (see the file header for the three key
/// shapes).
inline Params ParamsOf(const GridPoint& p) {
  Params params = {{"mode", p.mode}};
  if (!p.layout.empty()) {
    params.emplace_back("layout", p.layout);
    params.emplace_back("offset", std::to_string(p.offset));
  } else {
    params.emplace_back("slots",
                        p.policy == "fixed" ? std::to_string(p.slots) : "auto");
    params.emplace_back("offset", std::to_string(p.offset));
    params.emplace_back("policy", p.policy);
  }
  params.emplace_back("lock", p.lock);
  params.emplace_back("work_ns", std::to_string(p.work_ns));
  params.emplace_back("zones", p.zones);
  params.emplace_back("kernel", p.kernel);
  params.emplace_back("scanner", p.scanner ? "on" : "off");
  return params;
}

/// Line size for offsets and lines_spanned: the topology's if it is 32..256
/// bytes, else 64.
inline std::size_t LineOf(const PointEnv& env) {
  if (env.topology == nullptr) return kCacheLine64;
  const int line = env.topology->summary().cache_line_bytes;
  return (line == 32 || line == 64 || line == 128 || line == 256)
             ? static_cast<std::size_t>(line)
             : kCacheLine64;
}

/// The grid for a machine whose usable PUs are `order` (its NUMA node count
/// decides the default zones).
inline std::vector<Variant> PagevecVariants(const std::vector<PuInfo>& order) {
  const bool multi_node = CountNumaNodes(order) > 1;
  std::vector<Variant> out;
  for (const GridPoint& p : GridPoints()) {
    Variant v;
    v.params = ParamsOf(p);
    v.suite = SuiteOf(p, multi_node);
    v.description =
        p.mode + " pagevec (" +
        (p.layout.empty()
             ? "5.x header, " + (p.policy == "fixed"
                                     ? std::to_string(p.slots) + " slots"
                                     : "policy " + p.policy)
             : p.layout) +
        ") at offset " + std::to_string(p.offset) + ", lru_lock " + p.lock +
        ", " + std::to_string(p.work_ns) + " ns think time per page, " +
        (p.zones == "1" ? "one lru_lock for all threads"
                        : "one lru_lock per NUMA node") +
        ", Linux " + p.kernel + " per-page work" +
        (p.scanner ? ", a reclaim scanner per lock" : "");
    v.make = [p](const PointEnv& env) -> std::unique_ptr<Workload> {
      Config cfg;
      cfg.rapid = p.mode == "rapid";
      cfg.policy = p.layout.empty() ? p.policy : "fixed";
      cfg.slots = ResolveSlots(cfg.policy, p.slots, env.threads);
      cfg.line = LineOf(env);
      cfg.offset = p.offset % cfg.line;
      cfg.work_ns = p.work_ns;
      cfg.kernel = p.kernel == "5.8" ? Kernel::k58 : Kernel::k269;
      cfg.scanner = p.scanner;
      // zones:per_numa: one lru_lock per NUMA node the machine has (1 on a
      // one-node machine, where the rows equal zones:1 and are kept only in
      // the full suite).
      cfg.zones = p.zones == "per_numa" && env.topology != nullptr
                      ? std::max(1, env.topology->summary().numa_nodes)
                      : 1;
      return MakePagevecWorkload(env, p.lock, p.layout, cfg);
    };
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace pagevec_bench

LOCKLINE_REGISTER_FAMILY(Family{
    .name = "pagevec",
    .description = "pagevec batching factor, alignment and sizing formulas "
                   "against lru_lock with the per-page work of Linux 2.6.9 or "
                   "5.8 and an optional reclaim scanner: pages/s, lock "
                   "acquisitions per page, wait share, pagevec bytes",
    .variants = nullptr,
    .planned_variants = pagevec_bench::PagevecVariants,
});

}  // namespace lockline
