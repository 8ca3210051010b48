// prezero's model: what the 2004 background pre-zeroing proposal
// (BACKGROUND.md section 5) puts around the 2.6.9-era page
// allocator, in user space. Free pages sit in pools under one zone->lock
// (PoolLock, a 2.6.9 x86 spin_lock); a freed page is dirty; a zeroer cleans
// dirty pages outside the allocation path and puts them back pre-zeroed:
//   PagePool, the steady-state modes' pool: a dirty and a zeroed stack;
//   BurstPool, the burst protocol's free memory: order-4 blocks (the buddy
//     order the Altix block-transfer engine was limited to), split blocks'
//     pages and a capped pre-zeroed pool;
//   NodeZeroerPlaces, the idle-CPU zeroers' places (scrubd's shape: one
//     kernel thread per NUMA node), and the zeroers' loops (RunPoolZeroer,
//     RunBurstZeroer).
// The experiment (allocating threads, the grid, report and checks) is
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

#include "harness/family.h"
#include "harness/locks/tas_lock.h"
#include "harness/machine/cpu.h"
#include "harness/machine/helpers.h"
#include "harness/measure/zeroing.h"

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
/// Pages per order-4 block (the engine zeroes only whole blocks).
inline constexpr std::size_t kBlockPages = 16;

/// The pool lock of both protocols: zone->lock, a spinlock. 2.6.9 / 2.6.10 on
/// x86 (the kernels of the 2004 thread) took it with spin_lock, a
/// test-and-test-and-set byte lock: TtasLock (harness/locks/tas_lock.h, row
/// name `ttas`). Held only to pop / push a few pointers, as the kernel holds
/// zone->lock only to unlink / link pages.
///
/// One difference the model needs: the kernel's holder cannot be preempted
/// (spin_lock disables preemption), a user-space one can. An allocating thread
/// sharing its PU with a SCHED_IDLE zeroer (SetSharesPuWithZeroer) would spin
/// forever on a lock that zeroer holds while it waits for that very PU, so such
/// a thread, after kSpinsBeforeSleep failed tries, sleeps 1 us per retry; the
/// zeroer runs, finishes its few-pointer critical section and releases. Every
/// other thread spins as the harness set it (harness/locks/spin_wait.h).
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
    while (!lock_.try_lock()) {
      if (++tries < kSpinsBeforeSleep) {
        CpuRelax();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(1));
      }
    }
  }
  bool try_lock() { return lock_.try_lock(); }
  void unlock() { lock_.unlock(); }

  /// Marks the calling thread as sharing its PU with a SCHED_IDLE zeroer
  /// (see the class comment); returns the previous value.
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

/// The memory of a pool: `pages` 4 KiB pages, mapped and filled with
/// kDirtyByte. Throws std::bad_alloc when mmap fails.
class PoolPages {
 public:
  explicit PoolPages(std::size_t pages) : pages_(pages) {
    void* p = mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<char*>(p);
    std::memset(base_, kDirtyByte, pages * kPage);
  }
  ~PoolPages() { munmap(base_, pages_ * kPage); }
  PoolPages(const PoolPages&) = delete;
  PoolPages& operator=(const PoolPages&) = delete;

  std::size_t pages() const { return pages_; }
  char* page(std::size_t i) const { return base_ + i * kPage; }
  /// True when `p` is one of the pool's page addresses.
  bool Owns(const char* p) const {
    return p >= base_ && p < base_ + pages_ * kPage && (p - base_) % kPage == 0;
  }

 private:
  char* base_ = nullptr;
  std::size_t pages_;
};

/// The page pool: a dirty stack (freed pages) and a zeroed stack (pages the
/// zeroer cleaned), both LIFO so recently used pages are reused first, under
/// one PoolLock (zone->lock, a spinlock) held only to pop or push. Invariant
/// (when no thread holds a page): dirty + zeroed == pages.
class PagePool {
 public:
  /// Maps `pages` dirty pages (PoolPages), all on the dirty stack.
  explicit PagePool(std::size_t pages) : mem_(pages) {
    dirty_.reserve(pages);
    zeroed_.reserve(pages);  // reserved: pushes never allocate under the lock
    for (std::size_t i = 0; i < pages; ++i) dirty_.push_back(mem_.page(i));
    dirty_hint_.store(pages);
  }

  /// A page for an allocation: a zeroed one when available (*prezeroed = true),
  /// else a dirty one the caller must zero; nullptr when both stacks are empty
  /// (every page is held).
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
  /// The zeroer's side: up to `max` dirty pages to clean into out[], returns
  /// how many. Batched (one lock round trip per batch, like the kernel's
  /// per-cpu list refills) and preceded by a lock-free peek, so an idle zeroer
  /// does not take the allocators' lock.
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
  std::atomic<std::size_t> dirty_hint_{
      0};  // dirty_.size() as of the last change (a hint)
  PoolPages mem_;
};

/// Free memory of the burst protocol: intact dirty order-4 blocks, dirty
/// pages of split blocks, and the pre-zeroed pool (at most `cap` pages), under
/// one PoolLock (zone->lock, a ttas spinlock as 2.6.9's spin_lock). Invariant:
/// 16 x blocks + partial + zeroed + pages held by allocators + pages being
/// zeroed == pages().
class BurstPool {
 public:
  /// Maps `pages` (rounded up to whole blocks) dirty pages; the pre-zeroed
  /// pool holds at most `cap` pages. Throws std::bad_alloc when mmap fails.
  BurstPool(std::size_t pages, std::size_t cap)
      : mem_((pages + kBlockPages - 1) / kBlockPages * kBlockPages), cap_(cap) {
    blocks_.reserve(mem_.pages() / kBlockPages);
    partial_.reserve(mem_.pages());
    zeroed_.reserve(mem_.pages());
    Reset();
  }

  /// An allocation: a pre-zeroed page when there is one (*prezeroed = true),
  /// else a dirty one (splitting a block when no split block has pages left);
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
  /// A zeroer's share: up to kBlockPages dirty pages into out[] while the pool
  /// (with pages being zeroed) is below its cap. `whole_blocks`: only an intact
  /// order-4 block (the engine). Returns how many.
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
  /// Free pages (dirty blocks, dirty split pages, pre-zeroed) and pages being
  /// zeroed.
  std::size_t free_pages() {
    std::lock_guard<PoolLock> g(mu_);
    return blocks_.size() * kBlockPages + partial_.size() + zeroed_.size() +
           zeroing_;
  }
  std::size_t zeroed_count() {
    std::lock_guard<PoolLock> g(mu_);
    return zeroed_.size();
  }
  /// Between bursts (no page held, no zeroer working) and at construction:
  /// every page free and dirty, in intact order-4 blocks; each page's first
  /// and last words (what the hand-out check reads) are dirtied.
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

/// The zeroer:idle_cpus places: one zeroer per NUMA node of the measured
/// threads (in plan order), the shape of the 2004 scrubd patch (one kernel
/// thread per node, run on the node's most idle CPU). Within each node, the
/// helper rule (harness/machine/helpers.h PlaceHelpersNear on that node's PUs):
/// a spare PU on a core of its own; with none (every PU of the node measured),
/// the node's least-loaded measured PU (fewest measured threads; the last in
/// plan order among equals), shared at SCHED_IDLE (reason says so). Measured
/// PUs of unknown node (-1) count as one node. Never throws.
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
    // The row's helper_l3 / helper_kind say where it ran.
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

/// Puts the calling zeroer thread on its place: bound to `pu` of `topo`
/// (not without a topology or a PU), at SCHED_IDLE when `idle`. False when
/// the binding failed (the thread then runs unbound).
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

/// The steady-state modes' zeroer, until `quit`: batches of kZeroerBatch
/// dirty pages of `pool` zeroed by `method` and put back pre-zeroed,
/// counted in `zeroed`. Frozen while no allocating thread is `active`.
inline void RunPoolZeroer(PagePool& pool, ZeroMethod method,
                          const std::atomic<int>& active,
                          const std::atomic<bool>& quit,
                          std::atomic<uint64_t>& zeroed) {
  char* batch[kZeroerBatch];
  while (!quit.load(std::memory_order_acquire)) {
    if (active.load(std::memory_order_acquire) == 0) {
      // Between windows: frozen, so the first allocations of a window do
      // not find a pool pre-zeroed in time the workload never gave.
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

/// A burst protocol zeroer, until `quit`, while `run`: up to kBlockPages
/// dirty pages of `pool` at a time (the `engine`: only whole order-4
/// blocks, zeroed as one with non-temporal stores; else rep stosb per
/// page), put back pre-zeroed and counted in `zeroed`. `busy` counts the
/// zeroers working.
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
    // busy around the work, re-checking run after the increment: a pause
    // (run = false, then waiting for busy == 0) never returns while a batch
    // is being zeroed.
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
