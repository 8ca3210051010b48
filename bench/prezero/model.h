// prezero's model: the 2004 pre-zeroing proposal around the 2.6.9-era
// allocator. Free pages in pools under zone->lock (PoolLock); zeroers clean
// freed (dirty) pages outside the allocation path. PagePool: the steady-state
// pool; BurstPool: order-4 blocks (the Altix engine's order), split pages, a
// capped pre-zeroed pool; the zeroers' places and loops. The experiment:
// bench/prezero.cpp.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "bench/common.h"
#include "harness/family.h"
#include "harness/locks/tas_lock.h"
#include "harness/machine/cpu.h"
#include "harness/machine/helpers.h"
#include "harness/measure/zeroing.h"

namespace lockline::prezero_bench {

inline constexpr std::size_t kPage = 4096;
/// Pool size: 16 MiB, past any L2, so pages are not all cache-resident.
inline constexpr std::size_t kPoolPages = 4096;
/// Pages the zeroer takes per hold: 64 KiB, a few µs, small against the pool.
inline constexpr std::size_t kZeroerBatch = 16;
/// Fill of fresh pool pages, so an unzeroed hand-out is detectable.
inline constexpr uint8_t kDirtyByte = 0x5a;
/// Pages per order-4 block (the engine zeroes only whole blocks).
inline constexpr std::size_t kBlockPages = 16;

/// zone->lock as 2.6.9 / 2.6.10 x86 spin_lock took it (TtasLock), held only
/// to pop / push pointers. A user-space holder can be preempted: a thread
/// sharing its PU with a SCHED_IDLE zeroer sleeps 1 us per retry after
/// kSpinsBeforeSleep tries, so the zeroer can release.
class PoolLock {
 public:
  static constexpr const char* kName = TtasLock::kName;
  static constexpr const char* kStandsFor =
      "zone->lock: 2.6.9/2.6.10 x86 spin_lock, a test-and-test-and-set byte "
      "lock (harness/locks/tas_lock.h TtasLock)";
  static constexpr uint32_t kSpinsBeforeSleep = 1024;

  void lock() {
    if (!shares_pu_with_zeroer()) {
      lock_.lock();
      return;
    }
    uint32_t tries = 0;
    while (!lock_.try_lock()) Backoff(&tries);
  }
  /// One retry of a wait: CpuRelax for the first kSpinsBeforeSleep tries,
  /// then 1 us of sleep each.
  static void Backoff(uint32_t* tries) {
    if (++*tries < kSpinsBeforeSleep)
      CpuRelax();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(1));
  }
  bool try_lock() { return lock_.try_lock(); }
  void unlock() { lock_.unlock(); }

  /// Marks this thread as sharing its PU with a zeroer; returns the old value.
  static bool SetSharesPuWithZeroer(bool shares) {
    const bool old = shares_pu_with_zeroer();
    shares_pu_with_zeroer() = shares;
    return old;
  }

 private:
  static bool& shares_pu_with_zeroer() {
    static thread_local bool shares = false;
    return shares;
  }
  TtasLock lock_;
};

/// A pool's `pages` pages, filled with kDirtyByte; std::bad_alloc on failure.
class PoolPages {
 public:
  explicit PoolPages(std::size_t pages) : pages_(pages) {
    base_ = static_cast<char*>(MapAnon(pages * kPage));
    if (base_ == nullptr) throw std::bad_alloc();
    std::memset(base_, kDirtyByte, pages * kPage);
  }
  ~PoolPages() { munmap(base_, pages_ * kPage); }
  PoolPages(const PoolPages&) = delete;
  PoolPages& operator=(const PoolPages&) = delete;

  std::size_t pages() const { return pages_; }
  char* page(std::size_t i) const { return base_ + i * kPage; }
  bool Owns(const char* p) const {
    return p >= base_ && p < base_ + pages_ * kPage && (p - base_) % kPage == 0;
  }

 private:
  char* base_ = nullptr;
  std::size_t pages_;
};

/// A dirty and a zeroed LIFO stack under one PoolLock. At rest dirty +
/// zeroed == pages.
class PagePool {
 public:
  explicit PagePool(std::size_t pages) : mem_(pages) {
    dirty_.reserve(pages);
    zeroed_.reserve(pages);  // reserved: pushes never allocate under the lock
    for (std::size_t i = 0; i < pages; ++i) dirty_.push_back(mem_.page(i));
    dirty_hint_.store(pages);
  }

  /// A zeroed page (*prezeroed) or a dirty one to zero; nullptr if none.
  char* Take(bool* prezeroed) {
    std::lock_guard<PoolLock> g(mu_);
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
    std::lock_guard<PoolLock> g(mu_);
    dirty_.push_back(page);
    dirty_hint_.store(dirty_.size(), std::memory_order_relaxed);
  }
  /// Up to `max` dirty pages for the zeroer, one hold after a lock-free peek.
  std::size_t TakeDirty(char** out, std::size_t max) {
    if (dirty_hint_.load(std::memory_order_relaxed) == 0) return 0;
    std::lock_guard<PoolLock> g(mu_);
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
    std::lock_guard<PoolLock> g(mu_);
    for (std::size_t i = 0; i < n; ++i) zeroed_.push_back(pages[i]);
  }
  std::size_t dirty_count() {
    std::lock_guard<PoolLock> g(mu_);
    return dirty_.size();
  }
  std::size_t zeroed_count() {
    std::lock_guard<PoolLock> g(mu_);
    return zeroed_.size();
  }
  std::size_t pages() const { return mem_.pages(); }
  bool Owns(const char* p) const { return mem_.Owns(p); }

 private:
  PoolLock mu_;
  std::vector<char*> dirty_, zeroed_;
  std::atomic<std::size_t> dirty_hint_{0};  ///< dirty_.size(), a hint
  PoolPages mem_;
};

/// The burst's free memory under one PoolLock: dirty order-4 blocks, split
/// pages, a pre-zeroed pool of at most `cap`. 16 x blocks + partial + zeroed +
/// held + being zeroed == pages().
class BurstPool {
 public:
  /// `pages` rounded up to whole blocks; std::bad_alloc on failure.
  BurstPool(std::size_t pages, std::size_t cap)
      : mem_((pages + kBlockPages - 1) / kBlockPages * kBlockPages), cap_(cap) {
    blocks_.reserve(mem_.pages() / kBlockPages);
    partial_.reserve(mem_.pages());
    zeroed_.reserve(mem_.pages());
    Reset();
  }

  /// A pre-zeroed page (*prezeroed) or a dirty one (splitting a block);
  /// nullptr when every page is held or being zeroed.
  char* Take(bool* prezeroed) {
    std::lock_guard<PoolLock> g(mu_);
    *prezeroed = !zeroed_.empty();
    if (*prezeroed) return Pop(zeroed_);
    if (partial_.empty()) {
      if (blocks_.empty()) return nullptr;
      char* block = Pop(blocks_);
      for (std::size_t i = kBlockPages; i-- > 1;)
        partial_.push_back(block + i * kPage);
      return block;
    }
    return Pop(partial_);
  }
  /// Up to kBlockPages dirty pages while below the cap (`whole_blocks`: one
  /// intact block, the engine). Returns how many.
  std::size_t TakeDirty(char** out, bool whole_blocks) {
    std::lock_guard<PoolLock> g(mu_);
    const std::size_t have = zeroed_.size() + zeroing_;
    if (have >= cap_) return 0;
    const std::size_t room = std::min(cap_ - have, kBlockPages);
    std::size_t n = 0;
    if (whole_blocks) {
      if (room < kBlockPages || blocks_.empty()) return 0;
      char* block = Pop(blocks_);
      for (; n < kBlockPages; ++n) out[n] = block + n * kPage;
    } else {
      while (n < room) {
        if (partial_.empty()) {  // split a block (order 4 -> 16 x order 0)
          if (blocks_.empty()) break;
          char* block = Pop(blocks_);
          for (std::size_t i = kBlockPages; i-- > 0;)
            partial_.push_back(block + i * kPage);
        }
        out[n++] = Pop(partial_);
      }
    }
    zeroing_ += n;
    return n;
  }
  /// Puts `n` pages a zeroer cleaned into the pre-zeroed pool.
  void PutZeroed(char* const* pages, std::size_t n) {
    std::lock_guard<PoolLock> g(mu_);
    for (std::size_t i = 0; i < n; ++i) zeroed_.push_back(pages[i]);
    zeroing_ -= n;
  }
  /// Returns a used page (dirty).
  void Free(char* page) {
    std::lock_guard<PoolLock> g(mu_);
    partial_.push_back(page);
  }
  /// Free pages, including those being zeroed.
  std::size_t free_pages() {
    std::lock_guard<PoolLock> g(mu_);
    return blocks_.size() * kBlockPages + partial_.size() + zeroed_.size() +
           zeroing_;
  }
  std::size_t zeroed_count() {
    std::lock_guard<PoolLock> g(mu_);
    return zeroed_.size();
  }
  /// At rest: every page free and dirty (first and last words) in blocks.
  void Reset() {
    std::lock_guard<PoolLock> g(mu_);
    blocks_.clear();
    partial_.clear();
    zeroed_.clear();
    zeroing_ = 0;
    for (std::size_t b = mem_.pages() / kBlockPages; b-- > 0;)
      blocks_.push_back(mem_.page(b * kBlockPages));
    for (std::size_t i = 0; i < mem_.pages(); ++i) {
      std::memset(mem_.page(i), kDirtyByte, 8);
      std::memset(mem_.page(i) + kPage - 8, kDirtyByte, 8);
    }
  }
  std::size_t pages() const { return mem_.pages(); }
  std::size_t cap() const { return cap_; }
  bool Owns(const char* p) const { return mem_.Owns(p); }

 private:
  static char* Pop(std::vector<char*>& v) {
    char* p = v.back();
    v.pop_back();
    return p;
  }
  PoolLock mu_;
  std::vector<char*> blocks_, partial_, zeroed_;
  std::size_t zeroing_ = 0;
  PoolPages mem_;
  std::size_t cap_;
};

/// zeroer:idle_cpus: one zeroer per measured NUMA node (scrubd's shape), on
/// a spare PU by the helper rule, else the node's least-loaded measured PU
/// (the last among equals), shared at SCHED_IDLE. Node -1 counts as one node.
inline std::vector<HelperPlace> NodeZeroerPlaces(
    const std::vector<PuInfo>& usable, const ThreadPlan& plan) {
  std::vector<int> nodes;
  for (const PuInfo& pu : plan.pus)
    if (std::find(nodes.begin(), nodes.end(), pu.numa) == nodes.end())
      nodes.push_back(pu.numa);
  std::vector<HelperPlace> out;
  for (int node : nodes) {
    std::vector<PuInfo> mine;
    for (const PuInfo& pu : usable)
      if (pu.numa == node) mine.push_back(pu);
    std::vector<HelperPlace> spare =
        PlaceHelpersNear(mine, plan, 1, {.allow_smt_sibling = false});
    if (!spare.empty() && spare.front().numa == node) {
      out.push_back(spare.front());
      continue;
    }
    const PuInfo* least = nullptr;
    int least_load = 0;
    for (const PuInfo& pu : plan.pus) {
      if (pu.numa != node) continue;
      int load = 0;
      for (const PuInfo& q : plan.pus) load += q.os_index == pu.os_index;
      if (least == nullptr || load <= least_load) {
        least = &pu;
        least_load = load;
      }
    }
    if (least == nullptr) continue;  // not reached: the node is measured
    out.push_back({.pu = least->os_index,
                   .core = least->core,
                   .numa = least->numa,
                   .reason = "SCHED_IDLE on the node's least-loaded measured "
                             "PU (no spare PU on the node)",
                   .l3 = least->l3,
                   .cpukind = least->cpukind,
                   .package = least->package});
  }
  return out;
}

/// Binds this zeroer to `pu` (if any), SCHED_IDLE when `idle`; false when
/// the binding failed.
inline bool EnterZeroerPlace(const Topology* topo, int pu, bool idle) {
  bool bound = true;
  if (topo != nullptr && pu >= 0) {
    try {
      BindThisThread(*topo, pu);
    } catch (const std::exception&) {
      bound = false;
    }
  }
  if (idle) {
    sched_param sp{};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
  }
  return bound;
}

/// The steady-state zeroer until `quit`: batches of kZeroerBatch, counted
/// in `zeroed`; frozen while no allocator is `active`.
inline void RunPoolZeroer(PagePool& pool, ZeroMethod method,
                          const std::atomic<int>& active,
                          const std::atomic<bool>& quit,
                          std::atomic<uint64_t>& zeroed) {
  char* batch[kZeroerBatch];
  while (!quit.load(std::memory_order_acquire)) {
    if (active.load(std::memory_order_acquire) == 0) {
      // Frozen between windows (no pre-zeroing in time never given).
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      continue;
    }
    const std::size_t n = pool.TakeDirty(batch, kZeroerBatch);
    if (n == 0) {
      CpuRelax();
      continue;
    }
    for (std::size_t i = 0; i < n; ++i) ZeroWith(method, batch[i], kPage);
    // The lock release publishes the zeroes (NT: SFENCE first).
    pool.PutZeroed(batch, n);
    zeroed.fetch_add(n, std::memory_order_relaxed);
  }
}

/// A burst zeroer until `quit`, while `run` (the `engine`: whole blocks,
/// non-temporal; else rep stosb per page); `busy` counts those working.
inline void RunBurstZeroer(BurstPool& pool, bool engine,
                           const std::atomic<bool>& run,
                           const std::atomic<bool>& quit,
                           std::atomic<int>& busy,
                           std::atomic<uint64_t>& zeroed) {
  const ZeroMethod m =
      engine ? ZeroMethod::kNonTemporal : ZeroMethod::kRepStosb;
  char* batch[kBlockPages];
  while (!quit.load(std::memory_order_acquire)) {
    if (!run.load(std::memory_order_acquire)) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      continue;
    }
    // run re-checked after busy++: a pause never returns mid-batch.
    busy.fetch_add(1, std::memory_order_seq_cst);
    if (!run.load(std::memory_order_seq_cst)) {
      busy.fetch_sub(1, std::memory_order_seq_cst);
      continue;
    }
    const std::size_t n = pool.TakeDirty(batch, engine);
    if (n == 0) {
      busy.fetch_sub(1, std::memory_order_seq_cst);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      continue;
    }
    if (engine && n == kBlockPages) {
      ZeroWith(m, batch[0], kBlockPages * kPage);  // one contiguous block
    } else {
      for (std::size_t i = 0; i < n; ++i) ZeroWith(m, batch[i], kPage);
    }
    pool.PutZeroed(batch, n);  // the lock release publishes the zeroes
    zeroed.fetch_add(n, std::memory_order_relaxed);
    busy.fetch_sub(1, std::memory_order_seq_cst);
  }
}

}  // namespace lockline::prezero_bench
