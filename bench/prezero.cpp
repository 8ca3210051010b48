// prezero: a userspace model of the 2004 background page pre-zeroing proposal
// (BACKGROUND.md section 5). A pool of 4 KiB pages under one lock hands out
// pages that must be zero; a freed page is dirty. zero_on_alloc: the allocating
// thread zeroes every page (today's kernel); prezeroed_*: a zeroer thread on
// its own PU zeroes dirty pages outside the lock, and an allocation takes a
// pre-zeroed page when one is ready, else zeroes its own. prezeroed_idle leaves
// `idle_us` of sleep between allocations, prezeroed_busy none (the objection: a
// busy machine gets no pre-zeroed pages). Contention regime: the pool lock,
// held only to pop / push. Not measured: the kernel's buddy allocator and fault
// path (see the `fault` family).
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "harness/cpu.h"
#include "harness/family.h"
#include "harness/zeroing.h"

namespace lockline::prezero_bench {

inline constexpr std::size_t kPage = 4096;
/// Pool size: 16 MiB, past the L2 of any current core and about one L3 slice,
/// so pages are not all cache-resident (a real free list is far larger still).
inline constexpr std::size_t kPoolPages = 4096;
/// Pages the zeroer takes per lock acquisition: 16 (64 KiB, a few µs of
/// zeroing), small against the pool so allocators still find dirty pages to
/// self-zero when it falls behind.
inline constexpr std::size_t kZeroerBatch = 16;
/// Byte freshly mapped pool pages are filled with, so an unzeroed hand-out is
/// detectable.
inline constexpr uint8_t kDirtyByte = 0x5a;

enum class Mode { kZeroOnAlloc, kPrezeroedIdle, kPrezeroedBusy };

inline const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kZeroOnAlloc:
      return "zero_on_alloc";
    case Mode::kPrezeroedIdle:
      return "prezeroed_idle";
    case Mode::kPrezeroedBusy:
      return "prezeroed_busy";
  }
  return "?";
}

/// The page pool: a dirty stack (freed pages) and a zeroed stack (pages the
/// zeroer cleaned), both LIFO so recently used pages are reused first, under
/// one mutex held only to pop or push. Invariant (when no thread holds a page):
/// dirty + zeroed == pages.
class PagePool {
 public:
  /// Maps `pages` pages, fills them with kDirtyByte and puts them all on the
  /// dirty stack. Throws std::bad_alloc when the mapping fails.
  explicit PagePool(std::size_t pages) : pages_(pages) {
    void* p = mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<char*>(p);
    std::memset(base_, kDirtyByte, pages * kPage);
    dirty_.reserve(pages);
    zeroed_.reserve(pages);  // reserved: pushes never allocate under the lock
    for (std::size_t i = 0; i < pages; ++i) dirty_.push_back(base_ + i * kPage);
    dirty_hint_.store(pages);
  }
  ~PagePool() { munmap(base_, pages_ * kPage); }
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  /// A page for an allocation: a zeroed one when available (*prezeroed = true),
  /// else a dirty one the caller must zero; nullptr when both stacks are empty
  /// (every page is held).
  char* Take(bool* prezeroed) {
    std::lock_guard<std::mutex> g(mu_);
    *prezeroed = !zeroed_.empty();
    auto& from = *prezeroed ? zeroed_ : dirty_;
    if (from.empty()) return nullptr;
    char* p = from.back();
    from.pop_back();
    dirty_hint_.store(dirty_.size(), std::memory_order_relaxed);
    return p;
  }
  /// Returns a used (dirty) page.
  void Free(char* page) {
    std::lock_guard<std::mutex> g(mu_);
    dirty_.push_back(page);
    dirty_hint_.store(dirty_.size(), std::memory_order_relaxed);
  }
  /// The zeroer's side: up to `max` dirty pages to clean into out[], returns
  /// how many. Batched (one lock round trip per batch, like the kernel's
  /// per-cpu list refills) and preceded by a lock-free peek, so an idle zeroer
  /// does not take the allocators' lock.
  std::size_t TakeDirty(char** out, std::size_t max) {
    if (dirty_hint_.load(std::memory_order_relaxed) == 0) return 0;
    std::lock_guard<std::mutex> g(mu_);
    std::size_t n = 0;
    while (n < max && !dirty_.empty()) {
      out[n++] = dirty_.back();
      dirty_.pop_back();
    }
    dirty_hint_.store(dirty_.size(), std::memory_order_relaxed);
    return n;
  }
  /// Puts `n` cleaned pages on the zeroed stack.
  void PutZeroed(char* const* pages, std::size_t n) {
    std::lock_guard<std::mutex> g(mu_);
    for (std::size_t i = 0; i < n; ++i) zeroed_.push_back(pages[i]);
  }
  std::size_t dirty_count() {
    std::lock_guard<std::mutex> g(mu_);
    return dirty_.size();
  }
  std::size_t zeroed_count() {
    std::lock_guard<std::mutex> g(mu_);
    return zeroed_.size();
  }
  std::size_t pages() const { return pages_; }
  /// True when `p` is one of the pool's page addresses.
  bool Owns(const char* p) const {
    return p >= base_ && p < base_ + pages_ * kPage && (p - base_) % kPage == 0;
  }

 private:
  std::mutex mu_;
  std::vector<char*> dirty_, zeroed_;
  std::atomic<std::size_t> dirty_hint_{
      0};  // dirty_.size() as of the last change (a hint)
  char* base_ = nullptr;
  std::size_t pages_;
};

/// Uses a page like a workload would: one non-zero store per cache line plus
/// the last word (so both words the cheap check reads are dirtied).
inline void DirtyPage(char* p) {
  for (std::size_t off = 0; off < kPage; off += 64) {
    *reinterpret_cast<uint64_t*>(p + off) = off + 1;
  }
  *reinterpret_cast<uint64_t*>(p + kPage - 8) = 1;
}

/// The point's workload: see the file comment.
class PrezeroWorkload : public Workload {
 public:
  /// `full_check`: verify every byte of every handed-out page (tests) instead
  /// of the first and last words. `cpu`: the features the method is checked
  /// against (tests force "no clzero").
  PrezeroWorkload(Mode mode, ZeroMethod method, uint64_t idle_us,
                  const PointEnv& env, bool full_check = false,
                  const ZeroingCpu& cpu = DetectZeroingCpu())
      : mode_(mode),
        method_(method),
        idle_us_(idle_us),
        env_(env),
        full_check_(full_check),
        unsupported_(ZeroMethodUnsupportedReason(method, 0, cpu)) {}
  ~PrezeroWorkload() override { StopZeroer(); }

  void Prepare(int threads) override {
    counts_.reset(new Count[threads]);
    threads_ = threads;
    if (!unsupported_.empty()) return;
    pool_ = std::make_unique<PagePool>(kPoolPages);
    if (mode_ != Mode::kZeroOnAlloc) StartZeroer();
  }

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    if (!unsupported_.empty()) return 0;
    Count& c = counts_[ctx.index];
    active_.fetch_add(1, std::memory_order_acq_rel);
    uint64_t ops = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const uint64_t t0 = NowNs();
      bool prezeroed = false;
      char* page = pool_->Take(&prezeroed);
      if (page ==
          nullptr) {  // every page held by other threads / the zeroer: retry
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
      ++ops;
      if (idle_us_ > 0 && mode_ != Mode::kPrezeroedBusy) {
        // A real idle gap (the thread sleeps), so a zeroer sharing this PU
        // could use it.
        std::this_thread::sleep_for(std::chrono::microseconds(idle_us_));
      }
    }
    active_.fetch_sub(1, std::memory_order_acq_rel);
    c.allocs += ops;
    return ops;
  }

  void Report(PointReport& out, double window_seconds, uint64_t ops) override {
    StopZeroer();  // quiescent pool for Report and Verify
    const Count t = Totals();
    out.Metric("allocs_per_s", window_seconds > 0
                                   ? static_cast<double>(ops) / window_seconds
                                   : 0);
    out.Metric("prezeroed_share", t.allocs > 0
                                      ? static_cast<double>(t.prezeroed) /
                                            static_cast<double>(t.allocs)
                                      : 0);
    out.Metric("zeroer_pages_per_s",
               window_seconds > 0
                   ? static_cast<double>(zeroer_pages_.load()) / window_seconds
                   : 0);
    out.Metric("alloc_ns", t.allocs > 0 ? static_cast<double>(t.alloc_ns) /
                                              static_cast<double>(t.allocs)
                                        : 0);
    auto& d = out.details;
    d["mode"] = ModeName(mode_);
    d["method"] = ZeroMethodName(method_);
    d["method_native"] = FillMethodIsNative(method_);
    d["idle_us"] = idle_us_;
    d["pool_pages"] = kPoolPages;
    d["allocs"] = t.allocs;
    d["prezeroed"] = t.prezeroed;
    d["self_zeroed"] = t.self_zeroed;
    d["zeroer_pages"] = zeroer_pages_.load();
    d["nonzero_pages"] = t.nonzero;
    d["zeroer_pu"] = zeroer_pu_;
    d["zeroer_shares_pu"] = zeroer_shares_pu_;
    d["zeroer_policy"] =
        zeroer_shares_pu_
            ? "SCHED_IDLE on a shared PU: zeroes only in idle CPU time"
            : "normal priority on a spare PU (the idle CPU)";
    d["zeroer_note"] =
        "batches of 16 pages per lock round trip; frozen between windows";
    d["alloc_ns_note"] =
        "take + (self-)zero per allocation, two clock reads included";
    if (!unsupported_.empty()) d["skipped"] = unsupported_;
  }

  std::string Verify() override {
    if (!unsupported_.empty()) return unsupported_;
    StopZeroer();
    const Count t = Totals();
    if (t.prezeroed + t.self_zeroed != t.allocs) {
      return "prezeroed " + std::to_string(t.prezeroed) + " + self-zeroed " +
             std::to_string(t.self_zeroed) + " != allocations " +
             std::to_string(t.allocs);
    }
    if (t.nonzero != 0) {
      return std::to_string(t.nonzero) + " pages handed out not all zero";
    }
    const std::size_t dirty = pool_->dirty_count(),
                      zeroed = pool_->zeroed_count();
    if (dirty + zeroed != pool_->pages()) {
      return "pool lost pages: dirty " + std::to_string(dirty) + " + zeroed " +
             std::to_string(zeroed) + " != " + std::to_string(pool_->pages());
    }
    // Every page the zeroer cleaned was either handed out pre-zeroed or is
    // still on the stack.
    if (zeroer_pages_.load() != t.prezeroed + zeroed) {
      return "zeroer cleaned " + std::to_string(zeroer_pages_.load()) +
             " pages but " + std::to_string(t.prezeroed) +
             " were handed out pre-zeroed and " + std::to_string(zeroed) +
             " remain";
    }
    return "";
  }

  /// Pool, for tests (nullptr before Prepare or when skipped).
  PagePool* pool() { return pool_.get(); }

 private:
  struct alignas(kDestructiveLine) Count {
    uint64_t allocs = 0, prezeroed = 0, self_zeroed = 0, nonzero = 0,
             alloc_ns = 0;
  };

  Count Totals() const {
    Count t;
    for (int i = 0; i < threads_; ++i) {
      t.allocs += counts_[i].allocs;
      t.prezeroed += counts_[i].prezeroed;
      t.self_zeroed += counts_[i].self_zeroed;
      t.nonzero += counts_[i].nonzero;
      t.alloc_ns += counts_[i].alloc_ns;
    }
    return t;
  }

  // The zeroer's PU: the first usable PU outside the point's plan; with none
  // free (an
  // --oversubscribe run), the plan's last PU, shared (SCHED_IDLE then only
  // takes its idle time). -1 (unbound) without a host topology (tests).
  void PickZeroerPu() {
    if (env_.topology == nullptr || !env_.topology->is_host()) return;
    std::vector<int> used;
    if (env_.plan != nullptr) {
      for (const auto& pu : env_.plan->pus) used.push_back(pu.os_index);
    }
    for (const auto& pu : env_.topology->usable_pus()) {
      if (std::find(used.begin(), used.end(), pu.os_index) == used.end()) {
        zeroer_pu_ = pu.os_index;
        return;
      }
    }
    if (!used.empty()) {
      zeroer_pu_ = used.back();
      zeroer_shares_pu_ = true;
    }
  }

  void StartZeroer() {
    PickZeroerPu();
    zeroer_ = std::thread([this] {
      if (zeroer_pu_ >= 0) {
        try {
          BindThisThread(*env_.topology, zeroer_pu_);
        } catch (const std::exception&) {
          zeroer_pu_ = -1;  // reported as unbound; the model still holds
        }
      }
      if (zeroer_shares_pu_) {
        // Sharing an allocator's PU: zero only in CPU time nothing else wants,
        // as the 2004 proposal's idle-CPU zeroer. On a spare PU it keeps normal
        // priority: that PU is the idle CPU, and SCHED_IDLE there would only
        // let unrelated load preempt it while it holds the pool lock (priority
        // inversion on a shared machine).
        sched_param sp{};
        sp.sched_priority = 0;
        pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
      }
      char* batch[kZeroerBatch];
      while (!quit_.load(std::memory_order_acquire)) {
        if (active_.load(std::memory_order_acquire) == 0) {
          // Between windows: frozen, so the first allocations of a window do
          // not find a pool pre-zeroed in time the workload never gave.
          std::this_thread::sleep_for(std::chrono::microseconds(50));
          continue;
        }
        const std::size_t n = pool_->TakeDirty(batch, kZeroerBatch);
        if (n == 0) {
          CpuRelax();
          continue;
        }
        for (std::size_t i = 0; i < n; ++i) ZeroWith(method_, batch[i], kPage);
        pool_->PutZeroed(
            batch,
            n);  // the lock release publishes the zeroes (NT: SFENCE first)
        zeroer_pages_.fetch_add(n, std::memory_order_relaxed);
      }
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
  int threads_ = 0;
  std::unique_ptr<Count[]> counts_;
  std::unique_ptr<PagePool> pool_;
  std::thread zeroer_;
  int zeroer_pu_ = -1;
  bool zeroer_shares_pu_ = false;
  alignas(kDestructiveLine) std::atomic<int> active_{0};
  alignas(kDestructiveLine) std::atomic<bool> quit_{false};
  alignas(kDestructiveLine) std::atomic<uint64_t> zeroer_pages_{0};
};

/// Idle gap of the idle variants, µs: about a syscall-heavy request's think
/// time; long against one 4 KiB zeroing (~0.1-1 µs) so an unloaded zeroer
/// always keeps up.
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
  if (suite == Suite::kFull) v.threads = {};
  static const char* const kText[] = {
      "every allocation zeroes its page (no background zeroer)",
      "background zeroer (own PU); allocations leave idle gaps",
      "background zeroer (own PU); allocations back to back: the objection"};
  v.description = std::string(kText[static_cast<int>(mode)]) + "; zeroing by " +
                  ZeroMethodName(method) + ", idle " + std::to_string(idle_us) +
                  " us";
  v.make = [=](const PointEnv& env) -> std::unique_ptr<Workload> {
    return std::make_unique<PrezeroWorkload>(mode, method, idle_us, env);
  };
  return v;
}

/// Default: the three modes (and zero_on_alloc with the same idle gap, the fair
/// baseline for prezeroed_idle) with memset at one allocating thread; full:
/// every method, the run's threads.
std::vector<Variant> Variants() {
  std::vector<Variant> v;
  v.push_back(
      MakeVariant(Mode::kZeroOnAlloc, ZeroMethod::kMemset, 0, Suite::kQuick));
  v.push_back(MakeVariant(Mode::kZeroOnAlloc, ZeroMethod::kMemset, kIdleUs,
                          Suite::kDefault));
  v.push_back(MakeVariant(Mode::kPrezeroedIdle, ZeroMethod::kMemset, kIdleUs,
                          Suite::kDefault));
  v.push_back(
      MakeVariant(Mode::kPrezeroedBusy, ZeroMethod::kMemset, 0, Suite::kQuick));
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
    "background "
    "zeroer cleaned, with and without idle time; allocations/s and the "
    "pre-zeroed share",
    lockline::prezero_bench::Variants,
    {}});
