// page_free: what freeing a page costs with and without the atomic decrement
// (`page_free`), and whether the 2006 fast path is safe against the 2.6.16 and
// 2.6.18 reclaim scanners (`page_free_race`); linux-mm, March 2006,
// BACKGROUND.md section 3. Policies and scanner orders with their kernel
// sources: bench/page_free/model.h; the two measurement models:
// docs/experiments.md. Not measured: the buddy allocator, interrupts, memcg,
// compound pages, the active / inactive split.
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "bench/common.h"
#include "bench/page_free/model.h"
#include "harness/family.h"
#include "harness/locks/all_locks.h"
#include "harness/locks/lock_stat.h"
#include "harness/machine/cpu.h"
#include "harness/machine/memory.h"
#include "harness/machine/padded_slots.h"
#include "harness/measure/kernel_probe.h"
#include "layouts/page.h"

namespace lockline {
namespace page_free {

// ---- cost family: one op = one page's life (hot list, maybe the LRU,
// get/put, the variant's final put here or on thread i + 1) -----------------

/// Pages per LRU-add round, one lru_lock hold for all variants: PAGEVEC_SIZE
/// 14 (2.6.10 to 4.x, include/linux/pagevec.h@v2.6.11:9).
inline constexpr int kBatch = 14;
/// Pages per thread: 256 x 64 B of struct page, a large 2.6 zone's pcp high
/// (6 x 31 = 186) rounded up; L1/L2-resident.
inline constexpr int kPagesPerThread = 256;
/// Slots of each free_cpu:remote SPSC ring; when full the allocator does the
/// final put itself (ring_overflows), so no thread blocks on another.
inline constexpr uint64_t kRingSlots = 64;

/// zone->lru_lock and its LRU in one line group, as in 2.6.16's struct zone.
template <class Lock>
struct alignas(kDestructiveLine) LruZone {
  Lock lru_lock;
  ListHead lru;
  long nr_lru = 0;  ///< pages on `lru` (under lru_lock)
  LruZone() { ListInit(&lru); }
};

/// SPSC ring of page pointers (after rigtorp's SPSCQueue): tail's release
/// store publishes the page's state to the consumer's acquire load.
struct alignas(kDestructiveLine) PageRing {
  alignas(kDestructiveLine) std::atomic<uint64_t> head{0};  ///< consumer's
  alignas(kDestructiveLine) std::atomic<uint64_t> tail{0};  ///< producer's
  alignas(kDestructiveLine) std::array<Page*, kRingSlots> slots{};

  bool Push(Page* page) {
    const uint64_t t = tail.load(std::memory_order_relaxed);
    if (t - head.load(std::memory_order_acquire) == kRingSlots) return false;
    slots[t % kRingSlots] = page;
    tail.store(t + 1, std::memory_order_release);
    return true;
  }
  Page* Pop() {
    const uint64_t h = head.load(std::memory_order_relaxed);
    if (h == tail.load(std::memory_order_acquire)) return nullptr;
    Page* page = slots[h % kRingSlots];
    head.store(h + 1, std::memory_order_release);
    return page;
  }
  uint64_t Size() const {
    return tail.load(std::memory_order_acquire) -
           head.load(std::memory_order_acquire);
  }
};
static_assert(sizeof(PageRing) % kDestructiveLine == 0,
              "rings never share a line");

/// One thread's pages, hot list and counters (PaddedSlots, first-touched).
struct alignas(kCacheLine) CostThread {
  Page* pages = nullptr;  ///< kPagesPerThread, at a sampled offset (Prepare)
  ListHead hot;           ///< free pages (LIFO, the hot end at hot.next)
  int nr_hot = 0;
  int lru_acc = 0;  ///< on_lru_pct accumulator (Bresenham: exact share, no RNG)
  uint64_t frees = 0, fast_frees = 0, locked_frees = 0;
  uint64_t lru_adds = 0, remote_frees = 0, ring_overflows = 0, underflows = 0;
  uint64_t bad_pages = 0;  ///< free_pages_check failures (never expected)
  LockStatThread lock_stat;
};

/// PAGE_FLAGS_CHECK_AT_FREE's bits the model's pages can carry (bad_page).
inline constexpr unsigned long kFlagsCheckAtFree =
    (1UL << kPgLru) | (1UL << kPgLocked) | (1UL << kPgActive) |
    (1UL << kPgSlab) | (1UL << kPgPrivate) | (1UL << kPgWriteback) |
    (1UL << kPgReserved);

/// The cost family's policy context (one per thread, on its stack).
template <class Lock>
struct CostCtx {
  LruZone<Lock>& zone;
  CostThread& t;
  bool stats = true;  ///< false: plain lock (the uninstrumented twin row)

  void LockLru() { LockCounted(zone.lru_lock, t.lock_stat, stats); }
  void UnlockLru() { UnlockCounted(zone.lru_lock, t.lock_stat, stats); }
  void LruDel(Page& page) {
    ListDel(&page.lru);
    --zone.nr_lru;
  }
  /// free_hot_page -> free_hot_cold_page (mm/page_alloc.c@v2.6.16, 2.6.18
  /// alike), every variant's common base: mapping = NULL, free_pages_check,
  /// local_irq_save, list_add on the hot list, local_irq_restore (the pcp
  /// drain is never reached).
  void FreeHot(Page& page) {
    if (page.mapping != nullptr) page.mapping = nullptr;
    const bool bad =
        (page._mapcount.load(std::memory_order_relaxed) + 1) != 0 ||
        page.mapping != nullptr || page_count(page) != 0 ||
        (page.flags.load(std::memory_order_relaxed) & kFlagsCheckAtFree) != 0;
    if (bad) [[unlikely]]
      ++t.bad_pages;
    const unsigned long flags = LocalIrqSave();
    ListAdd(&page.lru, &t.hot);
    ++t.nr_hot;
    LocalIrqRestore(flags);
  }
  void RaceWindow() {}
  void RefUnderflow(Page&) { ++t.underflows; }
};

struct CostParams {
  int on_lru_pct = 0;   ///< share of pages on the LRU when freed, 0..100
  bool remote = false;  ///< final put on thread (i + 1) % threads
  bool stats = true;    ///< false: the stats:off twin
};

/// The cost workload for one put_page policy V and one lru_lock kind L.
template <class V, LockAlgorithm L>
class CostWorkload : public Workload {
 public:
  CostWorkload(const PointEnv& env, CostParams params)
      : zone_(MakeShared<LruZone<L>>(env)), env_(env), params_(params) {}

  void Prepare(int threads) override {
    threads_ = PaddedSlots<CostThread>(static_cast<std::size_t>(threads),
                                       kDeferConstruction);
    // Mapped in thread order (a duet's builds draw the same offsets:
    // LayoutSampling), first touched in SetupThread.
    page_mem_.Reset();
    for (int i = 0; i < threads; ++i)
      page_mem_.mem.push_back(AllocSampledObject(sizeof(Page) * kPagesPerThread,
                                                 alignof(Page),
                                                 "struct pages of a thread"));
    rings_.clear();
    if (params_.remote) {
      for (int i = 0; i < threads; ++i)
        rings_.push_back(MakeShared<PageRing>(env_));
    }
  }

  void SetupThread(const ThreadCtx& ctx) override {
    CostThread* t = &threads_.Emplace(ctx.index);
    t->pages =
        static_cast<Page*>(page_mem_.mem[static_cast<size_t>(ctx.index)]);
    for (int i = 0; i < kPagesPerThread; ++i)
      new (&t->pages[i]) Page();  // first touch by this thread
    ListInit(&t->hot);
    for (int i = 0; i < kPagesPerThread; ++i)
      ListAddTail(&t->pages[i].lru, &t->hot);
    t->nr_hot = kPagesPerThread;
  }

  // One round = kBatch page lives; at least one round per call (tests).
  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    CostThread& t = threads_[ctx.index];  // once, outside the timed loop
    CostCtx<L> c{*zone_, t, params_.stats};
    PageRing* in = params_.remote ? rings_[ctx.index].get() : nullptr;
    PageRing* out =
        params_.remote ? rings_[(ctx.index + 1) % ctx.threads].get() : nullptr;
    std::array<Page*, kBatch> batch;
    std::array<bool, kBatch> to_lru;
    uint64_t ops = 0;
    do {
      if (in) DrainRing(*in, c);  // final puts handed over to this thread
      if (t.nr_hot == 0) {        // all our pages in flight elsewhere
        CpuRelax();
        continue;
      }
      // buffered_rmqueue from the hot list; prep_new_page: count 1.
      int n = 0;
      bool any_lru = false;
      while (n < kBatch && t.nr_hot > 0) {
        ListHead* node = t.hot.next;
        ListDel(node);
        --t.nr_hot;
        Page* page = PageFromLru(node);
        set_page_count(*page, 1);
        t.lru_acc += params_.on_lru_pct;
        to_lru[n] = t.lru_acc >= 100;
        if (to_lru[n]) {
          t.lru_acc -= 100;
          any_lru = true;
        }
        batch[n++] = page;
      }
      // lru_cache_add of the chosen pages: one hold per round.
      if (any_lru) {
        c.LockLru();
        for (int i = 0; i < n; ++i) {
          if (to_lru[i]) {
            SetPageLru(*batch[i]);
            ListAdd(&batch[i]->lru, &zone_->lru);
            ++zone_->nr_lru;
            ++t.lru_adds;
          }
        }
        c.UnlockLru();
      }
      // get/put (1 -> 2 -> 1), then the final put here or on the next CPU.
      for (int i = 0; i < n; ++i) {
        Page& page = *batch[i];
        get_page(page);
        V::PutPage(page, c);
        if (out) {
          if (out->Push(&page)) continue;
          ++t.ring_overflows;
        }
        Count(t, V::PutPage(page, c));
      }
      ops += static_cast<uint64_t>(n);
    } while (!stop.load(std::memory_order_relaxed));
    return ops;
  }

  void Report(PointReport& out, double window_seconds, uint64_t ops) override {
    using T = CostThread;
    T sum;
    std::vector<const LockStatThread*> stats;
    for (std::size_t i = 0; i < threads_.size(); ++i) {
      const CostThread* t = threads_.get(i);
      if (!t) continue;
      kernel::AddFields(sum, *t, &T::frees, &T::fast_frees, &T::locked_frees,
                        &T::lru_adds, &T::remote_frees, &T::ring_overflows);
      stats.push_back(&t->lock_stat);
    }
    out.Metric("fastpath_share", Ratio(sum.fast_frees, sum.frees));
    out.Metric("lru_lock_per_free", Ratio(sum.locked_frees, sum.frees));
    if (params_.remote)
      out.Metric("remote_free_share", Ratio(sum.remote_frees, sum.frees));
    const double thread_seconds =
        window_seconds * static_cast<double>(threads_.size());
    AddLockStatMetrics(out, SummarizeLockStats(stats, thread_seconds, ops));
    out.details["variant"] = V::kName;
    out.details["variant_description"] = V::kDescription;
    out.details["lock_description"] = L::kDescription;
    out.details["lock_stat"] = params_.stats;
    out.details["irq_save"] =
        "locked puts pay pushf/pop before lru_lock and push/popf after it "
        "(spin_lock_irqsave's flag save/restore); cli/sti are not available "
        "in user mode and are not modelled";
    out.details["common_base"] =
        "every variant's free ends in free_hot_cold_page "
        "(mm/page_alloc.c@v2.6.16): PageAnon mapping = NULL, "
        "free_pages_check (mapcount, mapping, count, flags), "
        "local_irq_save/restore around the hot-list add: the base both sides "
        "of a comparison pay, so ns/op differences are ns saved per free";
    out.details["batch"] = kBatch;
    out.details["pages_per_thread"] = kPagesPerThread;
    out.details["frees"] = sum.frees;
    out.details["fast_frees"] = sum.fast_frees;
    out.details["frees_taking_lru_lock"] = sum.locked_frees;
    out.details["lru_adds"] = sum.lru_adds;
    if (params_.remote) {
      out.details["remote_frees"] = sum.remote_frees;
      out.details["ring_overflows"] = sum.ring_overflows;
    }
    out.details["end_state"] = EndState();
    out.details["scanner"] =
        "none: the cost family runs no scanner (the scanner:2.6.16|2.6.18 axis "
        "is on page_free_race rows)";
  }

  // Every page on one hot list (count 0, no flags) or in a ring (count 1,
  // on the LRU iff PG_lru); the LRU a consistent ring.
  std::string Verify() override {
    const int threads = static_cast<int>(threads_.size());
    uint64_t underflows = 0;
    long seen = 0;
    for (int i = 0; i < threads; ++i) {
      const CostThread* t = threads_.get(i);
      if (!t) return "thread " + std::to_string(i) + " was never set up";
      underflows += t->underflows;
      if (t->bad_pages != 0)
        return std::to_string(t->bad_pages) +
               " pages failed free_pages_check on thread " + std::to_string(i);
      long n = 0;
      for (const ListHead* p = t->hot.next; p != &t->hot; p = p->next) {
        if (p->next->prev != p)
          return "hot list of thread " + std::to_string(i) + " corrupt";
        const Page* page = PageFromLru(const_cast<ListHead*>(p));
        if (page_count(*page) != 0 || page->flags.load() != 0)
          return "free page with count " + std::to_string(page_count(*page)) +
                 " or flags set";
        if (++n > kPagesPerThread * threads) return "hot list loops";
      }
      if (n != t->nr_hot) return "hot list length disagrees with its count";
      seen += n;
    }
    long on_lru = 0;
    for (const auto& ring : rings_) {
      for (uint64_t s = ring->head.load(); s != ring->tail.load(); ++s) {
        const Page* page = ring->slots[s % kRingSlots];
        if (page_count(*page) != 1) return "in-flight page with count != 1";
        if (PageLru(*page)) ++on_lru;
        ++seen;
      }
    }
    if (seen != static_cast<long>(kPagesPerThread) * threads)
      return "page conservation: " + std::to_string(seen) + " of " +
             std::to_string(kPagesPerThread * threads) + " pages accounted for";
    long n = 0;
    for (const ListHead* p = zone_->lru.next; p != &zone_->lru; p = p->next)
      if (p->next->prev != p || ++n > seen) return "LRU list corrupt";
    if (n != zone_->nr_lru || n != on_lru)
      return "LRU holds " + std::to_string(n) + " pages, nr_lru " +
             std::to_string(zone_->nr_lru) + ", in-flight PG_lru pages " +
             std::to_string(on_lru);
    if (underflows) return std::to_string(underflows) + " refcount underflows";
    return "";
  }

 private:
  static void Count(CostThread& t, PutResult r) {
    // kKeptByRecheck needs a scanner resurrecting the page: never here.
    if (r == PutResult::kLive || r == PutResult::kKeptByRecheck) return;
    ++t.frees;
    if (r == PutResult::kFreedFast) ++t.fast_frees;
    if (r == PutResult::kFreedLocked) ++t.locked_frees;
  }
  static void DrainRing(PageRing& ring, CostCtx<L>& c) {
    while (Page* page = ring.Pop()) {
      Count(c.t, V::PutPage(*page, c));
      ++c.t.remote_frees;
    }
  }
  // The final state any correct variant reaches: counts per place and an
  // FNV-1a hash of the hot lists.
  nlohmann::json EndState() const {
    uint64_t hash = 1469598103934665603ull;
    const auto mix = [&hash](uint64_t v) {
      hash ^= v;
      hash *= 1099511628211ull;
    };
    long hot = 0;
    for (size_t i = 0; i < threads_.size(); ++i) {
      const CostThread* t = threads_.get(i);
      if (!t) continue;
      for (const ListHead* p = t->hot.next; p != &t->hot; p = p->next) {
        const Page* page = PageFromLru(const_cast<ListHead*>(p));
        mix(i);
        mix(static_cast<uint64_t>(page - t->pages));
        mix(static_cast<uint64_t>(page_count(*page)));
        mix(page->flags.load());
        if (++hot > kPagesPerThread * static_cast<long>(threads_.size())) break;
      }
    }
    uint64_t in_flight = 0;
    for (const auto& ring : rings_) in_flight += ring->Size();
    return {{"hot_pages", hot},
            {"lru_pages", zone_->nr_lru},
            {"in_flight", in_flight},
            {"hash", hash}};
  }

  /// Per thread: its Page[kPagesPerThread]; first member, destroyed last.
  struct PageMemory {
    std::vector<void*> mem;
    void Reset() {
      for (void* m : mem) FreeSampledObject(m);
      mem.clear();
    }
    ~PageMemory() { Reset(); }
  } page_mem_;
  std::shared_ptr<LruZone<L>> zone_;
  PointEnv env_;
  CostParams params_;
  PaddedSlots<CostThread> threads_;
  std::vector<std::shared_ptr<PageRing>> rings_;
};
static_assert(std::is_trivially_destructible_v<Page>,
              "CostWorkload frees its struct pages without destroying them");

/// The default suite's lru_lock: 2.6.16's x86 `lock; decb` byte lock, a ttas
/// (include/asm-i386/spinlock.h@v2.6.9:46-55); other locks are what-if rows.
inline constexpr const char* kDefaultLock = "ttas";

/// Whether a default-lock, same-CPU point gets a stats:off twin: atomic and
/// fastpath at 0 % (question 002, docs/experiments.md), atomic at 100 %.
inline bool IsTwinned(const std::string& variant, int on_lru_pct) {
  if (on_lru_pct == 0) return variant == "atomic" || variant == "fastpath";
  return on_lru_pct == 100 && variant == "atomic";
}

/// The cost row of policy V on lock L (a stats:off twin with !cp.stats).
template <class V, LockAlgorithm L>
Variant CostVariant(const CostParams& cp) {
  const int pct = cp.on_lru_pct;
  const bool base = std::string(L::kName) == kDefaultLock && !cp.remote;
  Variant v;
  v.params = {{"variant", V::kName},
              {"on_lru_pct", std::to_string(pct)},
              {"free_cpu", cp.remote ? "remote" : "same"},
              {"lock", L::kName}};
  v.suite = base && pct == 0     ? Suite::kQuick
            : base && pct == 100 ? Suite::kDefault
                                 : Suite::kFull;
  v.description = std::string(V::kDescription) + "; " + std::to_string(pct) +
                  "% of pages on the LRU when freed; final put on " +
                  (cp.remote ? "the next thread" : "the allocating thread");
  if (!cp.stats) {
    v.params.emplace_back("stats", "off");
    v.description += "; lock_stat off (uninstrumented twin)";
  }
  v.make = [cp](const PointEnv& env) -> std::unique_ptr<Workload> {
    return std::make_unique<CostWorkload<V, L>>(env, cp);
  };
  return v;
}

std::vector<Variant> CostVariants() {
  std::vector<Variant> out;
  ForEachVariant([&]<class V>() {
    ForEachLock([&]<class L>() {
      for (int pct : {0, 50, 100}) {
        for (bool remote : {false, true}) {
          out.push_back(CostVariant<V, L>({pct, remote}));
          const bool base = std::string(L::kName) == kDefaultLock && !remote;
          if (base && IsTwinned(V::kName, pct))
            out.push_back(CostVariant<V, L>({pct, remote, false}));
        }
      }
    });
  });
  return out;
}

// ---- race family: thread 0 frees, thread 1 scans (order S); each detected
// lost reference is one incident, then both quiesce and every page is rebuilt
// (docs/experiments.md) ------------------------------------------------------

/// Shared pages: few, so the scanner keeps meeting the page being freed.
inline constexpr int kRacePages = 8;
/// Pages the freer holds; it frees the oldest, at the LRU tail.
inline constexpr int kLiveDepth = 3;
/// The scanner's hold of an isolated page (shrink_page_list's microseconds):
/// longer than the largest race window.
inline constexpr uint64_t kScanHoldNs = 5000;

/// Checker state per page, outside struct page (its layout stays the model's).
struct PageMeta {
  /// (free generation << 1) | free bit: any free between two reads changes it.
  std::atomic<uint64_t> state{1};
  bool on_list = false;  ///< linked on the LRU (under lru_lock): list guard
  bool on_free = false;  ///< on the free list (under free_lock)
};

/// Everything the two threads share, placed by MakeShared.
struct RaceShared {
  alignas(kDestructiveLine) TicketLock lru_lock;
  ListHead lru;
  alignas(kDestructiveLine) std::mutex free_lock;  ///< zone->lock stand-in
  std::deque<int> free_list;
  alignas(kDestructiveLine) std::array<Page, kRacePages> pages;
  std::array<PageMeta, kRacePages> meta;
  /// Recovery: rebuild_req set, the scanner parks, the freer rebuilds and
  /// bumps rebuild_epoch.
  alignas(kDestructiveLine) std::atomic<bool> rebuild_req{false};
  std::atomic<int> scanner_parked{0};
  std::atomic<uint64_t> rebuild_epoch{0};
  std::atomic<uint64_t> window_epoch{0};  ///< the freer's window rebuilds
};

enum class Kind { kFreedReferenced, kFreedOnLru };

/// Symptoms by kind (details) and incidents by their first symptom's kind.
struct alignas(kDestructiveLine) RaceCounters {
  uint64_t frees = 0, fast_frees = 0, recheck_kept = 0;
  uint64_t freed_under_ref = 0;   ///< scanner: freed while it held a ref
  uint64_t underflow = 0;         ///< a decrement found the count <= 0
  uint64_t double_free = 0;       ///< free routine: page already free
  uint64_t freed_on_lru = 0;      ///< free routine: PG_lru set at the free
  uint64_t free_page_on_lru = 0;  ///< scanner: a free page on the LRU list
  uint64_t bad_list_op = 0;       ///< add of a linked / unlink of an unlinked
  uint64_t incidents = 0;         ///< races detected (one rebuild each)
  uint64_t incidents_referenced = 0, incidents_on_lru = 0;
  uint64_t isolations = 0, being_freed = 0;  ///< scanner: taken / count was 0
};

/// Poisson upper 95 % bound per free: 3 / frees with none seen (rule of
/// three), else Wilson-Hilferty's (k+1)(1 - 1/(9(k+1)) + 1.645/(3
/// sqrt(k+1)))^3.
inline double ViolationRateUpper95(uint64_t violations, uint64_t frees) {
  if (frees == 0) return 1.0;
  if (violations == 0) return 3.0 / static_cast<double>(frees);
  const double k1 = static_cast<double>(violations) + 1;
  const double c = 1 - 1 / (9 * k1) + 1.6449 / (3 * std::sqrt(k1));
  return k1 * c * c * c / static_cast<double>(frees);
}

/// The race workload: policy V frees on both threads, S isolates.
template <class V, class S>
class RaceWorkload : public Workload {
 public:
  RaceWorkload(const PointEnv& env, uint64_t window_ns)
      : shared_(MakeShared<RaceShared>(env)), window_ns_(window_ns) {
    Rebuild();
  }

  struct Ctx {
    RaceWorkload& w;
    RaceCounters& n;
    uint64_t window_ns;
    void LockLru() { w.shared_->lru_lock.lock(); }
    void UnlockLru() { w.shared_->lru_lock.unlock(); }
    void LruDel(Page& page) {
      PageMeta& m = w.Meta(page);
      if (!m.on_list) {
        w.Symptom(n, n.bad_list_op, Kind::kFreedOnLru);
        return;
      }
      ListDel(&page.lru);
      m.on_list = false;
    }
    void FreeHot(Page& page) { w.Free(page, n); }
    void RaceWindow() { ThinkNs(window_ns); }
    void ScanGap() { ThinkNs(window_ns); }
    void RefUnderflow(Page&) {
      w.Symptom(n, n.underflow, Kind::kFreedReferenced);
    }
  };

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    return ctx.index == 0 ? RunFreer(stop) : RunScanner(stop);
  }

  void Report(PointReport& out, double /*window_seconds*/,
              uint64_t /*ops*/) override {
    const RaceCounters sum = Sum();
    const double upper = ViolationRateUpper95(sum.incidents, sum.frees);
    out.Metric("violations", static_cast<double>(sum.incidents));
    out.Metric("violations_freed_referenced",
               static_cast<double>(sum.incidents_referenced));
    out.Metric("violations_freed_on_lru",
               static_cast<double>(sum.incidents_on_lru));
    out.Metric("frees", static_cast<double>(sum.frees));
    out.Metric("violations_per_million", Ratio(1e6 * sum.incidents, sum.frees));
    out.Metric("violation_rate_upper_95", upper);
    constexpr MemoryModel mm = ThisMemoryModel();
    auto& d = out.details;
    d["verdict_status"] = sum.incidents ? "unsafe" : "none_seen";
    d["verdict"] = Verdict(sum, upper, mm);
    d["variant"] = V::kName;
    d["variant_description"] = V::kDescription;
    d["scanner"] = S::kName;
    d["scanner_description"] = S::kDescription;
    d["race_window_ns"] = window_ns_;
    d["race_window_note"] =
        "the same delay is inserted in the freer's racy gap (between its two "
        "unsynchronised steps) and in the scanner's (between its two steps)";
    d["scan_hold_ns"] = kScanHoldNs;
    d["pages"] = kRacePages;
    d["fast_frees"] = sum.fast_frees;
    d["recheck_kept"] = sum.recheck_kept;
    d["isolations"] = sum.isolations;
    d["isolations_refused_count_zero"] = sum.being_freed;
    d["rebuilds"] = rebuilds_;
    d["arch"] = mm.arch;
    d["memory_model"] = mm.model;
    d["load_reordering_possible"] = mm.loads_may_reorder;
    d["memory_model_note"] =
        mm.loads_may_reorder
            ? "the fast path's two relaxed loads may be reordered here, as "
              "Nick Piggin objected; violations include that case"
            : "x86-TSO never reorders the fast path's two loads, so the "
              "reordering Nick Piggin objected to cannot show here; only the "
              "interleaving race is measured (the policies also build for "
              "aarch64: tests/page_free_aarch64_check.cpp)";
    d["symptoms"] = {{"freed_under_scanner_ref", sum.freed_under_ref},
                     {"refcount_underflow", sum.underflow},
                     {"double_free", sum.double_free},
                     {"freed_on_lru", sum.freed_on_lru},
                     {"free_page_on_lru", sum.free_page_on_lru},
                     {"bad_lru_list_op", sum.bad_list_op}};
  }

  // Violations are the measurement; this checks the guards kept the lists
  // intact and the incidents of the two kinds add up.
  std::string Verify() override {
    RaceShared& s = *shared_;
    int n = 0;
    for (const ListHead* p = s.lru.next; p != &s.lru; p = p->next) {
      if (p->next->prev != p || ++n > kRacePages)
        return "race LRU list corrupt";
      const Page* page = PageFromLru(const_cast<ListHead*>(p));
      if (page < s.pages.data() || page >= s.pages.data() + kRacePages)
        return "race LRU list links a foreign node";
    }
    std::array<bool, kRacePages> seen{};
    for (int i : s.free_list) {
      if (i < 0 || i >= kRacePages || seen[i]) return "race free list corrupt";
      seen[i] = true;
    }
    const RaceCounters sum = Sum();
    if (sum.incidents_referenced + sum.incidents_on_lru != sum.incidents)
      return "violation kinds do not add up to the violations";
    return "";
  }

  /// Test hook: incidents and frees so far (valid between windows).
  std::pair<uint64_t, uint64_t> Tally() const {
    return {freer_.incidents + scanner_.incidents,
            freer_.frees + scanner_.frees};
  }

 private:
  PageMeta& Meta(Page& page) {
    return shared_->meta[&page - shared_->pages.data()];
  }

  RaceCounters Sum() const {
    RaceCounters sum;
    using R = RaceCounters;
    for (const RaceCounters* c : {&freer_, &scanner_})
      kernel::AddFields(sum, *c, &R::frees, &R::fast_frees, &R::recheck_kept,
                        &R::freed_under_ref, &R::underflow, &R::double_free,
                        &R::freed_on_lru, &R::free_page_on_lru, &R::bad_list_op,
                        &R::incidents, &R::incidents_referenced,
                        &R::incidents_on_lru, &R::isolations, &R::being_freed);
    return sum;
  }

  std::string Verdict(const RaceCounters& sum, double upper,
                      const MemoryModel& mm) const {
    using std::to_string;
    const std::string window = to_string(window_ns_);
    if (sum.incidents)
      return "unsafe: " + to_string(sum.incidents) + " violations (" +
             to_string(sum.incidents_referenced) + " freed while referenced, " +
             to_string(sum.incidents_on_lru) + " freed while on the LRU) in " +
             to_string(sum.frees) + " frees, race window " + window +
             " ns, scanner " + S::kName + ", " + mm.arch;
    char rate[32];
    std::snprintf(rate, sizeof(rate), "%.3g", upper * 1e6);
    return "no violation in " + to_string(sum.frees) +
           " frees at race window " + window + " ns, scanner " + S::kName +
           ": rate < " + rate + " per million frees (95 %, rule of three); " +
           mm.arch +
           (mm.loads_may_reorder ? "" : " (TSO: load reordering not tested)");
  }

  // One symptom; the first of an incident counts it and asks for a rebuild.
  void Symptom(RaceCounters& n, uint64_t& counter, Kind kind) {
    ++counter;
    if (!shared_->rebuild_req.exchange(true, std::memory_order_acq_rel)) {
      ++n.incidents;
      ++(kind == Kind::kFreedReferenced ? n.incidents_referenced
                                        : n.incidents_on_lru);
    }
  }

  // free_hot_page plus the checker: poison, then PG_lru (seq_cst: a Dekker
  // pair with the scanner's PG_lru then poison), then the free list.
  void Free(Page& page, RaceCounters& n) {
    PageMeta& m = Meta(page);
    const uint64_t old = m.state.fetch_or(1, std::memory_order_seq_cst);
    if (old & 1) {
      Symptom(n, n.double_free, Kind::kFreedReferenced);
      return;
    }
    if (page.flags.load(std::memory_order_seq_cst) & PageFlagMask(kPgLru))
      Symptom(n, n.freed_on_lru, Kind::kFreedOnLru);
    m.state.fetch_add(2, std::memory_order_seq_cst);  // next generation
    ++n.frees;
    std::lock_guard<std::mutex> g(shared_->free_lock);
    if (!m.on_free) {
      m.on_free = true;
      shared_->free_list.push_back(
          static_cast<int>(&page - shared_->pages.data()));
    }
  }

  Page* Alloc() {
    std::lock_guard<std::mutex> g(shared_->free_lock);
    if (shared_->free_list.empty()) return nullptr;
    const int i = shared_->free_list.front();
    shared_->free_list.pop_front();
    shared_->meta[i].on_free = false;
    return &shared_->pages[i];
  }

  // Every page free, count 0, no flags, lists rebuilt; scanner parked.
  void Rebuild() {
    RaceShared& s = *shared_;
    ListInit(&s.lru);
    s.free_list.clear();
    for (int i = 0; i < kRacePages; ++i) {
      Page& page = s.pages[i];
      page.flags.store(0, std::memory_order_relaxed);
      set_page_count(page, 0);
      ListInit(&page.lru);
      s.meta[i].state.fetch_or(1);
      s.meta[i].on_list = false;
      s.meta[i].on_free = true;
      s.free_list.push_back(i);
    }
    live_.clear();
    s.scanner_parked.store(0, std::memory_order_relaxed);
    s.rebuild_req.store(false, std::memory_order_relaxed);
  }

  static void CountPut(RaceCounters& n, PutResult r) {
    if (r == PutResult::kFreedFast) ++n.fast_frees;
    if (r == PutResult::kKeptByRecheck) ++n.recheck_kept;
  }

  // Thread 0: allocate, add to the LRU, free the oldest of kLiveDepth with
  // V's put_page. ops = its put_page calls.
  uint64_t RunFreer(const std::atomic<bool>& stop) {
    RaceShared& s = *shared_;
    Rebuild();
    ++rebuilds_;
    s.window_epoch.fetch_add(1, std::memory_order_release);
    Ctx c{*this, freer_, window_ns_};
    uint64_t ops = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      if (s.rebuild_req.load(std::memory_order_acquire)) {
        while (s.scanner_parked.load(std::memory_order_acquire) == 0) {
          if (stop.load(std::memory_order_relaxed)) return ops;
          CpuRelax();
        }
        Rebuild();
        ++rebuilds_;
        s.rebuild_epoch.fetch_add(1, std::memory_order_release);
        continue;
      }
      Page* page = Alloc();
      if (!page) {
        CpuRelax();
        continue;
      }
      PageMeta& m = Meta(*page);
      set_page_count(*page, 1);
      m.state.fetch_and(~uint64_t{1}, std::memory_order_seq_cst);  // allocated
      s.lru_lock.lock();
      if (m.on_list) {
        Symptom(freer_, freer_.bad_list_op, Kind::kFreedOnLru);
      } else {
        SetPageLru(*page);
        ListAdd(&page->lru, &s.lru);
        m.on_list = true;
      }
      s.lru_lock.unlock();
      live_.push_back(page);
      if (static_cast<int>(live_.size()) > kLiveDepth) {
        Page* victim = live_.front();
        live_.pop_front();
        CountPut(freer_, V::PutPage(*victim, c));
        ++ops;
      }
    }
    return ops;
  }

  // Thread 1: isolate the tail in order S, hold it kScanHoldNs, check it was
  // not freed, put it back and drop the reference with V's put_page.
  uint64_t RunScanner(const std::atomic<bool>& stop) {
    RaceShared& s = *shared_;
    ++scanner_windows_;
    while (s.window_epoch.load(std::memory_order_acquire) < scanner_windows_) {
      if (stop.load(std::memory_order_relaxed)) return 0;
      CpuRelax();
    }
    Ctx c{*this, scanner_, window_ns_};
    Ctx put_ctx{*this, scanner_, 0};  // the scanner's own put_page: no delay
    uint64_t ops = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      if (s.rebuild_req.load(std::memory_order_acquire)) {
        const uint64_t epoch = s.rebuild_epoch.load(std::memory_order_acquire);
        s.scanner_parked.store(1, std::memory_order_release);
        while (s.rebuild_epoch.load(std::memory_order_acquire) == epoch) {
          if (stop.load(std::memory_order_relaxed)) return ops;
          CpuRelax();
        }
        continue;
      }
      Page* page = nullptr;
      uint64_t s0 = 0;
      s.lru_lock.lock();
      if (!ListEmpty(&s.lru)) {
        Page* tail = PageFromLru(s.lru.prev);
        PageMeta& m = Meta(*tail);
        // The generation before the first step (a free moves it).
        s0 = m.state.load(std::memory_order_seq_cst);
        if (s0 & 1) {
          Symptom(scanner_, scanner_.free_page_on_lru, Kind::kFreedOnLru);
        } else {
          switch (S::Isolate(*tail, c)) {
            case Isolation::kTaken:
              ListDel(&tail->lru);
              m.on_list = false;
              page = tail;
              break;
            case Isolation::kBeingFreed:
              ++scanner_.being_freed;
              // Left on the LRU: must not be free (Dekker pair with Free).
              std::atomic_thread_fence(std::memory_order_seq_cst);
              if (m.state.load(std::memory_order_seq_cst) & 1)
                Symptom(scanner_, scanner_.free_page_on_lru, Kind::kFreedOnLru);
              break;
            case Isolation::kNotOnLru:
              break;
          }
        }
      }
      s.lru_lock.unlock();
      if (!page) {
        CpuRelax();
        continue;
      }
      ++scanner_.isolations;
      ++ops;
      PageMeta& m = Meta(*page);
      ThinkNs(kScanHoldNs);
      // putback_lru_page; a page freed meanwhile lost our reference.
      bool lost = false;
      s.lru_lock.lock();
      if (m.state.load(std::memory_order_seq_cst) != s0) {
        lost = true;
      } else if (m.on_list) {
        s.lru_lock.unlock();
        Symptom(scanner_, scanner_.bad_list_op, Kind::kFreedOnLru);
        continue;
      } else {
        SetPageLru(*page);
        ListAdd(&page->lru, &s.lru);
        m.on_list = true;
      }
      s.lru_lock.unlock();
      if (lost) {
        Symptom(scanner_, scanner_.freed_under_ref, Kind::kFreedReferenced);
        continue;
      }
      CountPut(scanner_, V::PutPage(*page, put_ctx));
    }
    return ops;
  }

  std::shared_ptr<RaceShared> shared_;
  uint64_t window_ns_;
  std::deque<Page*> live_;        ///< freer only
  uint64_t rebuilds_ = 0;         ///< freer only
  uint64_t scanner_windows_ = 0;  ///< scanner only
  RaceCounters freer_, scanner_;
};

/// ns added to each party's racy gap; 0 = natural.
inline constexpr uint64_t kRaceWindows[] = {0, 200, 2000};

std::vector<Variant> RaceVariants() {
  std::vector<Variant> out;
  ForEachVariant([&]<class V>() {
    ForEachScanner([&]<class S>() {
      const bool s2616 = std::string(S::kName) == "2.6.16";
      for (uint64_t w : kRaceWindows) {
        Variant v;
        v.params = {{"variant", V::kName},
                    {"scanner", S::kName},
                    {"race_window_ns", std::to_string(w)}};
        v.suite = w == 200             ? Suite::kFull
                  : w == 2000 && s2616 ? Suite::kQuick
                                       : Suite::kDefault;
        v.description = std::string("race verdict: ") + V::kDescription +
                        "; thread 0 frees, thread 1 isolates like " +
                        S::kDescription + "; " + std::to_string(w) +
                        " ns added to each racy gap";
        v.threads = {2};
        v.windows = 1;
        v.make = [w](const PointEnv& env) -> std::unique_ptr<Workload> {
          return std::make_unique<RaceWorkload<V, S>>(env, w);
        };
        out.push_back(std::move(v));
      }
    });
  });
  return out;
}

}  // namespace page_free

LOCKLINE_REGISTER_FAMILY(Family{
    "page_free",
    "put_page cost: 2.6.16's atomic decrement vs the 2006 plain-store fast "
    "path vs Ken Chen's lock-only-if-PageLRU, by share of pages on the LRU "
    "and freeing CPU (linux-mm, March 2006)",
    page_free::CostVariants,
    {}});
LOCKLINE_REGISTER_FAMILY(Family{
    "page_free_race",
    "put_page safety: pages freed while referenced / while on the LRU when a "
    "2.6.16- or 2.6.18-order reclaim scanner races the freeing thread "
    "(violations per million frees; linux-mm, March 2006)",
    page_free::RaceVariants,
    {}});

}  // namespace lockline
