// pagevec: pages/s, lru_lock acquisitions per page and lock wait share against
// the pagevec's batching factor, line offset and sizing formula (BACKGROUND.md
// sections 1 and 4; issue 7). Threads push their own pages through
// lru_cache_add and release_pages on a shared zone LRU; with work_ns:0 and 2+
// threads per zone lru_lock is saturated (the 2020 large-system regime). Not
// measured: vmscan, active/inactive aging, memcg, irq-off cost, icache misses.
//
// Row keys (every component key:value; parse by splitting on '/' then on the
// first ':'):
//   pagevec/mode:M/slots:S/offset:O/policy:fixed/lock:L/work_ns:W/zones:Z/threads:N
//       generic Linux 5.x header (Pagevec5x layout, run-time slot count S
//       = 1..255);
//   pagevec/mode:M/slots:auto/offset:O/policy:4lg|sqrtlg/lock:L/work_ns:W/zones:Z/threads:N
//       the 2004 sizing formulas resolved for N = the point's thread count
//       (metric slots_resolved and details.slots give the count used);
//   pagevec/mode:M/layout:K/offset:O/lock:L/work_ns:W/zones:Z/threads:N
//       a named struct at its native slot count: K = pagevec_v2_6_9 (16),
//       pagevec_2004_proposal (15), pagevec_5x15, pagevec_5x31 (no slots param,
//       so sweeps over slots do not mix them in).
//   M: deferred (per-CPU pagevec, pages trickle in) | rapid (on-stack pagevec
//   filled and drained at once); O: bytes past a cache-line boundary; Z: 1 (one
//   global zone) | per_numa (one zone per NUMA node, threads on their local
//   zone).
//
// Operation: one page added to the LRU (lru_cache_add) plus one page released
// from it (release_pages); pages_per_s = ops_per_s. A thread checks the stop
// flag only after every S pages (a whole batch period), so in both modes each
// window holds exactly one add-drain and one release-drain per S pages:
// acquisitions == 2 * pages / S exactly (Verify checks it).
#include "layouts/pagevec.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness/cpu.h"
#include "harness/family.h"
#include "harness/locks/all_locks.h"
#include "harness/locks/lock_stat.h"
#include "harness/memory.h"
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

/// PAGEVEC_SIZE = 4 * lg(NR_CPUS), 4 on UP: 4 * log2(n) rounded to the nearest
/// integer (4 at n = 1 and 2, 8 at 4, 16 at 16, 40 at 1024), clamped to 1..255.
/// n < 1 counts as 1.
inline int FourLgSlots(int n) {
  if (n <= 1) return 4;
  const long v = std::lround(4.0 * std::log2(static_cast<double>(n)));
  return static_cast<int>(std::clamp<long>(v, 1, kMaxSlots));
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

// ---- the zone and the per-thread state
// --------------------------------------------------------

/// The part of `struct zone` this family exercises: lru_lock next to the LRU
/// list head and its counter, on one line as in 2.6.9 (the lock line is the
/// list line). One per zone, in its own shared allocation.
template <LockAlgorithm L>
struct alignas(kDestructiveLine) LruZone {
  L lru_lock;
  ListHead lru;  ///< the (inactive) LRU list; pages linked through page->lru
  unsigned long nr_lru =
      0;  ///< zone->nr_inactive: pages on `lru`, updated under lru_lock
  LruZone() { ListInit(&lru); }
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
  uint64_t ops = 0;  ///< pages added (= released) in windows
  uint64_t setup_acquisitions = 0;
  uint64_t anomalies =
      0;  ///< PG_lru already set on add / clear on release, bad refcount
};

/// The workload: `L` the lru_lock algorithm, `Pv` the pagevec kind.
template <LockAlgorithm L, class Pv>
class PagevecWorkload : public Workload {
 public:
  PagevecWorkload(const PointEnv& env, Config cfg)
      : cfg_(cfg), per_thread_(env.threads) {
    const bool bind = cfg_.zones > 1 && env.topology != nullptr &&
                      env.topology->summary().numa_nodes >= cfg_.zones;
    for (int z = 0; z < cfg_.zones; ++z) {
      PointEnv zone_env = env;
      // A per-NUMA zone lives on its node, as the kernel's pgdat does.
      if (bind) zone_env.mem_policy = "node:" + std::to_string(z);
      zones_.push_back(MakeShared<LruZone<L>>(zone_env));
      sides_.push_back(MakeShared<LockStatSide>(zone_env));
    }
  }

  void SetupThread(const ThreadCtx& ctx) override {
    const int s = cfg_.slots;
    const std::size_t stride = PvStride(Pv::Bytes(s), cfg_.offset, cfg_.line);
    auto me = std::make_unique<PerThread<Pv>>(kResidentPages + 2 * s + 1,
                                              stride, cfg_.line);
    me->zone = ctx.numa >= 0 ? ctx.numa % cfg_.zones : 0;
    for (int i = 0; i < me->pool_size; ++i) me->free_pages.Push(&me->pool[i]);
    // Fill the LRU with this thread's resident pages: one plain acquisition,
    // not in the stats.
    LruZone<L>& zone = *zones_[me->zone];
    zone.lru_lock.lock();
    for (int i = 0; i < kResidentPages; ++i) {
      Page* p = me->free_pages.Pop();
      set_page_count(*p, 1);
      SetPageLru(*p);
      ListAdd(&p->lru, &zone.lru);
      ++zone.nr_lru;
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
    if (!cfg_.rapid) {
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < s; ++i) {
          ThinkNs(cfg_.work_ns);
          Page* p = me.free_pages.Pop();
          set_page_count(*p, 1);  // allocated: the owner's reference
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
        // The caller's work for the batch, then a gang of S pages rapid-fire.
        ThinkNs(cfg_.work_ns * static_cast<uint64_t>(s));
        for (int i = 0; i < s; ++i) {
          Page* p = me.free_pages.Pop();
          set_page_count(*p, 1);
          get_page(*p);
          Pv::Add(pv, p);
        }
        LruAddDrain(me, zone, side, pv, ctx.index);
        for (int i = 0; i < s; ++i) Pv::Add(pv, me.on_lru.Pop());
        ReleasePages(me, zone, side, pv, ctx.index);
        n += s;
      }
    }
    me.ops += n;
    return n;
  }

  void Report(PointReport& out, double window_seconds, uint64_t ops) override {
    harness_ops_ = ops;
    std::vector<const LockStatThread*> stats;
    uint64_t acquisitions = 0, setup = 0;
    for (const auto& t : per_thread_) {
      stats.push_back(t ? &t->stat : nullptr);
      acquisitions += t ? t->stat.acquisitions : 0;
      setup += t ? t->setup_acquisitions : 0;
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
  }

  std::string Verify() override {
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
      uint64_t walked = 0;
      const ListHead* prev = &zone.lru;
      for (const ListHead* node = zone.lru.next; node != &zone.lru;
           node = node->next) {
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
      if (zone.lru.prev != prev)
        return Where(z, walked) + "head's prev is not the last node";
      if (walked != zone.nr_lru) {
        return Where(z, walked) + "nr_lru " + std::to_string(zone.nr_lru) +
               " but " + std::to_string(walked) + " pages linked";
      }
    }

    uint64_t ops = 0;
    for (int i = 0; i < static_cast<int>(per_thread_.size()); ++i) {
      const PerThread<Pv>* t = per_thread_[i].get();
      if (t == nullptr) continue;
      const std::string who = "thread " + std::to_string(i) + ": ";
      if (t->anomalies != 0)
        return who + std::to_string(t->anomalies) + " flag/refcount anomalies";
      // Every page in exactly one place: free, on the LRU (FIFO or release
      // pagevec), add pagevec.
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
      for (std::size_t k = 0; k < t->free_pages.size() && err.empty(); ++k)
        err = place(t->free_pages.at(k), false, 0);
      for (std::size_t k = 0; k < t->on_lru.size() && err.empty(); ++k)
        err = place(t->on_lru.at(k), true, 1);
      std::size_t held = t->free_pages.size() + t->on_lru.size();
      if (!cfg_.rapid) {
        for (int k = 0; k < Pv::Count(t->rel_pv) && err.empty(); ++k)
          err = place(Pv::At(t->rel_pv, k), true, 1);
        for (int k = 0; k < Pv::Count(t->add_pv) && err.empty(); ++k)
          err = place(Pv::At(t->add_pv, k), false, 2);
        held += Pv::Count(t->rel_pv) + Pv::Count(t->add_pv);
      }
      if (!err.empty()) return err;
      if (held != static_cast<std::size_t>(t->pool_size)) {
        return who + std::to_string(held) + " pages accounted of " +
               std::to_string(t->pool_size);
      }
      // Windows end on batch boundaries: exactly one add- and one release-drain
      // per S pages.
      if (t->ops % cfg_.slots != 0)
        return who + std::to_string(t->ops) +
               " pages is not a whole number of batches";
      if (t->stat.acquisitions != 2 * t->ops / cfg_.slots) {
        return who + std::to_string(t->stat.acquisitions) +
               " lru_lock acquisitions for " + std::to_string(t->ops) +
               " pages at " + std::to_string(cfg_.slots) +
               " slots (expected 2 * pages / slots)";
      }
      ops += t->ops;
    }
    if (ops != harness_ops_) {
      return "threads counted " + std::to_string(ops) + " pages, harness " +
             std::to_string(harness_ops_);
    }
    return "";
  }

  /// For tests: a thread's state and a zone.
  PerThread<Pv>* thread_state(int i) { return per_thread_[i].get(); }
  LruZone<L>* zone(int z) { return zones_[z].get(); }

 private:
  static std::string Where(int z, uint64_t n) {
    return "zone " + std::to_string(z) + " LRU, node " + std::to_string(n) +
           ": ";
  }

  /// __pagevec_lru_add (2.6.9 mm/swap.c): one lru_lock acquisition for the
  /// batch; each page gets PG_lru and goes to the list head; then release_pages
  /// drops the references lru_cache_add took (never the last one here, so no
  /// lock).
  void LruAddDrain(PerThread<Pv>& me, LruZone<L>& zone, LockStatSide& side,
                   typename Pv::Handle& pv, int index) {
    const int n = Pv::Count(pv);
    LockWithStats(zone.lru_lock, side, me.stat, index);
    for (int i = 0; i < n; ++i) {
      Page* p = Pv::At(pv, i);
      if (TestSetPageFlag(*p, kPgLru)) ++me.anomalies;  // BUG() in the kernel
      ListAdd(&p->lru, &zone.lru);
    }
    zone.nr_lru += n;
    UnlockWithStats(zone.lru_lock, me.stat);
    for (int i = 0; i < n; ++i) {
      Page* p = Pv::At(pv, i);
      if (put_page_testzero(*p)) ++me.anomalies;
      me.on_lru.Push(p);
    }
    Pv::Reinit(pv);
  }

  /// release_pages (2.6.9 mm/swap.c): drop each page's reference; the first
  /// page whose count reaches zero takes lru_lock, which is held for the rest
  /// of the batch (one acquisition per batch: every page here is the owner's
  /// last reference and on the LRU). Freed pages go back to the thread's pool.
  void ReleasePages(PerThread<Pv>& me, LruZone<L>& zone, LockStatSide& side,
                    typename Pv::Handle& pv, int index) {
    const int n = Pv::Count(pv);
    bool locked = false;
    for (int i = 0; i < n; ++i) {
      Page* p = Pv::At(pv, i);
      if (!put_page_testzero(*p)) {
        ++me.anomalies;
        continue;
      }
      if (!locked) {
        LockWithStats(zone.lru_lock, side, me.stat, index);
        locked = true;
      }
      if (TestClearPageLru(*p)) {
        ListDel(&p->lru);
        --zone.nr_lru;
      } else {
        ++me.anomalies;
      }
    }
    if (locked) UnlockWithStats(zone.lru_lock, me.stat);
    for (int i = 0; i < n; ++i) me.free_pages.Push(Pv::At(pv, i));
    Pv::Reinit(pv);
  }

  Config cfg_;
  std::vector<std::shared_ptr<LruZone<L>>> zones_;
  std::vector<std::shared_ptr<LockStatSide>> sides_;
  std::vector<std::unique_ptr<PerThread<Pv>>> per_thread_;
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
  std::string zones;  ///< 1 | per_numa
};

// The one table the grid is generated from. The full suite is every combination
// of the axes with two restrictions that keep it near 460 variants: offsets
// other than 0 only for the alignment question's sizes (15, 16, 31 and the
// named layouts) with lock:ticket, work_ns:0, zones:1; and zones:per_numa only
// with lock:ticket.
inline constexpr const char* kModes[] = {"deferred", "rapid"};
inline constexpr int kSlots[] = {1, 2, 4, 8, 15, 16, 31, 32, 63, 64, 128, 255};
inline constexpr std::size_t kOffsets[] = {0, 8, 16, 24, 32, 40, 48, 56};
inline constexpr const char* kPolicies[] = {"4lg", "sqrtlg"};
inline constexpr const char* kLocks[] = {"ticket", "qspinlock", "mcs",
                                         "pthread_mutex"};
inline constexpr uint64_t kWorkNs[] = {0, 200};
inline constexpr const char* kZones[] = {"1", "per_numa"};
/// The default suite's generic sizes (quick: 4, 15, 31).
inline constexpr int kDefaultSlots[] = {1, 4, 8, 15, 16, 31, 32, 64, 128};

/// Which suite a grid point belongs to (see the table above for the full
/// suite's restrictions).
inline Suite SuiteOf(const GridPoint& p) {
  const bool base = p.mode == "deferred" && p.lock == "ticket" &&
                    p.work_ns == 0 && p.zones == "1";
  if (!base) return Suite::kFull;
  if (!p.layout.empty()) return p.offset == 0 ? Suite::kDefault : Suite::kFull;
  if (p.policy != "fixed")
    return p.offset == 0 ? Suite::kDefault : Suite::kFull;
  const bool in_default =
      std::find(std::begin(kDefaultSlots), std::end(kDefaultSlots), p.slots) !=
      std::end(kDefaultSlots);
  if (p.offset == 0 && (p.slots == 4 || p.slots == 15 || p.slots == 31))
    return Suite::kQuick;
  if (p.offset == 0 && in_default) return Suite::kDefault;
  if (p.offset == 8 && (p.slots == 15 || p.slots == 16)) return Suite::kDefault;
  return Suite::kFull;
}

/// Every grid point of the full suite, in a stable order (default-suite points
/// first within each mode x lock x work_ns x zones block).
inline std::vector<GridPoint> GridPoints() {
  std::vector<GridPoint> out;
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
              out.push_back({mode, "", s, off, "fixed", lock, work, zones});
            }
            for (const NamedLayout& l : kNamedLayouts)
              out.push_back(
                  {mode, l.name, l.slots, off, "", lock, work, zones});
            if (off == 0)
              for (const char* pol : kPolicies)
                out.push_back({mode, "", 0, off, pol, lock, work, zones});
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

inline std::vector<Variant> PagevecVariants() {
  std::vector<Variant> out;
  for (const GridPoint& p : GridPoints()) {
    Variant v;
    v.params = ParamsOf(p);
    v.suite = SuiteOf(p);
    v.description =
        p.mode + " pagevec (" +
        (p.layout.empty()
             ? "5.x header, " + (p.policy == "fixed"
                                     ? std::to_string(p.slots) + " slots"
                                     : "policy " + p.policy)
             : p.layout) +
        ") at offset " + std::to_string(p.offset) + ", lru_lock " + p.lock +
        ", " + std::to_string(p.work_ns) + " ns think time per page, zones " +
        p.zones;
    v.make = [p](const PointEnv& env) -> std::unique_ptr<Workload> {
      Config cfg;
      cfg.rapid = p.mode == "rapid";
      cfg.policy = p.layout.empty() ? p.policy : "fixed";
      cfg.slots = ResolveSlots(cfg.policy, p.slots, env.threads);
      cfg.line = LineOf(env);
      cfg.offset = p.offset % cfg.line;
      cfg.work_ns = p.work_ns;
      // zones:per_numa: one zone per NUMA node the machine has (1 on a one-node
      // machine, where the rows equal zones:1 and are kept only in the full
      // suite).
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
                   "against one zone "
                   "lru_lock: pages/s, lock acquisitions per page, wait share, "
                   "pagevec bytes",
    .variants = pagevec_bench::PagevecVariants,
    .planned_variants = nullptr,
});

}  // namespace lockline
