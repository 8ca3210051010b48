// The work a kernel path does per page outside its lock (work_ns:cal|0 of
// pagevec and zone_lock): the anonymous fault path per page, measured once per
// process, less the model's own cost. It touches what a fault on a fresh page
// does: clear_page's 64 lines of a cold page (a per-thread ring larger than
// its cache share, 4 KiB, no THP) and an 8-byte PTE store (set_pte_at); the
// rest is a register spin (ThinkNs). Rows record it in details.work.
#pragma once

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "harness/family.h"
#include "harness/machine/cpu.h"
#include "harness/machine/memory.h"
#include "harness/machine/topology.h"
#include "harness/measure/shared_calibration.h"

namespace lockline {

inline constexpr std::size_t kPageBytes = 4096;
/// Cache lines of a page clear_page writes (64-byte lines).
inline constexpr std::size_t kPageLines = kPageBytes / 64;
/// 8-byte page-table entries per 64-byte line.
inline constexpr std::size_t kPtesPerLine = 8;
/// Smallest ring, pages (256 KiB).
inline constexpr std::size_t kMinWorkPages = 64;
/// Largest ring per thread, pages (256 MiB).
inline constexpr std::size_t kMaxWorkPages = std::size_t{256} << 20 >> 12;

/// Cache sizes (bytes) the ring is sized from, and their source.
struct WorkCaches {
  std::size_t l2_bytes = 0;
  std::size_t l3_bytes = 0;
  int l3_pus = 1;  ///< PUs under that L3 (threads that can share it)
  std::string source;
};

/// The first L2 / L3 of `topology` (hwloc), else sysconf's, else 1 / 32 MiB.
inline WorkCaches ReadWorkCaches(const Topology* topology) {
  WorkCaches c;
  if (topology != nullptr && topology->raw() != nullptr) {
    hwloc_topology_t t = topology->raw();
    hwloc_obj_t l2 = hwloc_get_obj_by_type(t, HWLOC_OBJ_L2CACHE, 0);
    hwloc_obj_t l3 = hwloc_get_obj_by_type(t, HWLOC_OBJ_L3CACHE, 0);
    if (l2 != nullptr && l2->attr != nullptr) c.l2_bytes = l2->attr->cache.size;
    if (l3 != nullptr && l3->attr != nullptr) {
      c.l3_bytes = l3->attr->cache.size;
      if (l3->cpuset != nullptr)
        c.l3_pus = std::max(1, hwloc_bitmap_weight(l3->cpuset));
    }
    if (c.l2_bytes != 0 || c.l3_bytes != 0) c.source = "hwloc";
  }
  if (c.source.empty()) {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l2 > 0) c.l2_bytes = static_cast<std::size_t>(l2);
    if (l3 > 0) c.l3_bytes = static_cast<std::size_t>(l3);
    if (l2 > 0 || l3 > 0) c.source = "sysconf";
  }
  if (c.source.empty()) {
    c.l2_bytes = std::size_t{1} << 20;
    c.l3_bytes = std::size_t{32} << 20;
    c.source = "assumed (no cache sizes from hwloc or sysconf)";
  }
  return c;
}

/// Pages of one thread's ring so each op's page is cold: max(2 x L2, 2 x L3 /
/// threads sharing it), clamped to [kMinWorkPages, kMaxWorkPages].
inline std::size_t WorkRingPages(const WorkCaches& c, int threads) {
  const std::size_t sharing = static_cast<std::size_t>(
      std::max(1, std::min(std::max(threads, 1), c.l3_pus)));
  const std::size_t bytes = std::max(2 * c.l2_bytes, 2 * c.l3_bytes / sharing);
  return std::clamp(bytes / kPageBytes, kMinWorkPages, kMaxWorkPages);
}

/// Rings' memory reused within the process (touching tens of MiB per
/// repetition would dominate setup), per NUMA node of the asking CPU.
class PageRingPool {
 public:
  struct Block {
    unsigned char* pages = nullptr;
    std::size_t capacity = 0;  ///< pages mapped
    int node = -1;             ///< NUMA node of the CPU that first touched it
  };
  /// The smallest free block of >= `pages` on this node, else a new mapping
  /// (no THP, every byte 1; `fresh`). Throws std::bad_alloc.
  static Block Take(std::size_t pages, bool* fresh) {
    const int node = CurrentNode();
    {
      std::lock_guard<std::mutex> g(mu_);
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->node == node && it->capacity >= pages &&
            (best == free_.end() || it->capacity < best->capacity))
          best = it;
      if (best != free_.end()) {
        const Block b = *best;
        free_.erase(best);
        *fresh = false;
        return b;
      }
    }
    const std::size_t bytes = pages * kPageBytes;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, bytes, MADV_NOHUGEPAGE);
    std::memset(p, 1, bytes);
    *fresh = true;
    return Block{static_cast<unsigned char*>(p), pages, node};
  }
  static void Give(const Block& b) {
    if (b.pages == nullptr) return;
    std::lock_guard<std::mutex> g(mu_);
    free_.push_back(b);
  }

 private:
  static int CurrentNode() {
    unsigned cpu = 0, node = 0;
    return getcpu(&cpu, &node) == 0 ? static_cast<int>(node) : -1;
  }
  static inline std::mutex mu_;
  static inline std::vector<Block>& free_ = *new std::vector<Block>();
};

/// One thread's ring and page-table-like array; Allocate() on the thread that
/// runs it. The memory goes back to PageRingPool.
struct PageWorkRing {
  unsigned char* pages = nullptr;  ///< `count` pages, 4 KiB aligned
  uint64_t* ptes = nullptr;        ///< `count` 8-byte entries
  std::size_t count = 0;           ///< pages in the ring
  std::size_t next = 0;            ///< the next op's page
  bool fresh = false;  ///< the pages were mapped for this ring (every byte 1)

  PageWorkRing() = default;
  PageWorkRing(const PageWorkRing&) = delete;
  PageWorkRing& operator=(const PageWorkRing&) = delete;
  ~PageWorkRing() { Free(); }

  /// Throws std::bad_alloc when mmap fails.
  void Allocate(std::size_t ring_pages) {
    Free();
    count = std::max<std::size_t>(ring_pages, 1);
    block_ = PageRingPool::Take(count, &fresh);
    pages = block_.pages;
    ptes = new uint64_t[count]();
    next = 0;
  }
  void Free() {
    PageRingPool::Give(block_);
    block_ = {};
    delete[] ptes;
    pages = nullptr;
    ptes = nullptr;
    count = 0;
    next = 0;
  }
  /// One page's work: Touch, then spin `spin_ns`.
  void Page(uint64_t spin_ns) {
    Touch();
    ThinkNs(spin_ns);
  }
  /// Zero the next (cold) page and store its entry (address | present).
  void Touch() {
    unsigned char* page = pages + next * kPageBytes;
    std::memset(page, 0, kPageBytes);
    ptes[next] = reinterpret_cast<uintptr_t>(page) | 1;
    asm volatile("" : : "r"(page), "r"(ptes) : "memory");
    next = next + 1 == count ? 0 : next + 1;
  }

 private:
  PageRingPool::Block block_;
};

/// Work per page outside the lock (work_ns:cal), calibrated once per process.
struct WorkCalibration {
  double fault_ns_per_page = 0;  ///< mmap + first write + munmap, per 4 KiB
  double model_ns_per_page = 0;  ///< the model at work_ns:0, 1 thread
  double zero_ns_per_page = 0;   ///< PageWorkRing::Touch, ns
  uint64_t work_ns = 0;          ///< max(0, fault - model): the calibrated work
  /// munmap / fault cost per page; 0: not measured (zone_lock only).
  double unmap_fault_ratio = 0;
};

/// The anonymous fault path per 4 KiB page, ns: 1024 pages (no THP) written
/// once and unmapped, min of 3; 0 when mmap fails.
inline double MeasureFaultNsPerPage() {
  constexpr std::size_t kPages = 1024;
  return TimeAnonymousFaultInNs(kPages * kPageBytes, 3, /*with_unmap=*/true) /
         kPages;
}

/// munmap / fault cost per page (page_fault1's phases), timed apart, min of 3.
inline double MeasureUnmapFaultRatio() {
  constexpr std::size_t kBytes = 1024 * kPageBytes;
  double fault = 0, unmap = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 0;
    madvise(p, kBytes, MADV_NOHUGEPAGE);
    const uint64_t t0 = NowNs();
    for (std::size_t off = 0; off < kBytes; off += kPageBytes)
      static_cast<volatile char*>(p)[off] = 1;
    const uint64_t t1 = NowNs();
    munmap(p, kBytes);
    const uint64_t t2 = NowNs();
    if (attempt == 0 || t1 - t0 < fault) fault = static_cast<double>(t1 - t0);
    if (attempt == 0 || t2 - t1 < unmap) unmap = static_cast<double>(t2 - t1);
  }
  return fault > 0 ? unmap / fault : 0;
}

/// PageWorkRing::Touch per page, ns: min of three passes of up to 1024 pages
/// from a one-thread ring's start (evicted by the fill of the rest).
inline double MeasureZeroNsPerPage() {
  PageWorkRing ring;
  ring.Allocate(WorkRingPages(ReadWorkCaches(nullptr), 1));
  const std::size_t pass = std::min<std::size_t>(1024, ring.count / 4);
  double best = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const uint64_t t0 = NowNs();
    for (std::size_t i = 0; i < pass; ++i) ring.Touch();
    const double ns = static_cast<double>(NowNs() - t0) / pass;
    if (attempt == 0 || ns < best) best = ns;
  }
  return best;
}

/// work_ns = max(0, fault - `model_ns_per_page`), each value shared by a build
/// duet's processes (the model's when named by `model_key`).
inline WorkCalibration CalibrateWork(double model_ns_per_page,
                                     const std::string& model_key = "") {
  WorkCalibration c;
  c.fault_ns_per_page =
      SharedCalibration("fault_ns_per_page", MeasureFaultNsPerPage);
  c.model_ns_per_page =
      model_key.empty() ? model_ns_per_page
                        : SharedCalibration("model_ns_per_page:" + model_key,
                                            [&] { return model_ns_per_page; });
  // Not an older build's key (it timed a warm page, no entry).
  c.zero_ns_per_page =
      SharedCalibration("touch_ns_per_page:cold_ring", MeasureZeroNsPerPage);
  c.work_ns =
      c.fault_ns_per_page > c.model_ns_per_page
          ? static_cast<uint64_t>(c.fault_ns_per_page - c.model_ns_per_page)
          : 0;
  return c;
}

/// work_ns less the calibrated zeroing time, at least 0.
inline uint64_t WorkSpinNs(uint64_t work_ns, bool calibrated,
                           const WorkCalibration& c) {
  const uint64_t zero_ns =
      calibrated ? static_cast<uint64_t>(c.zero_ns_per_page) : 0;
  return work_ns > zero_ns ? work_ns - zero_ns : 0;
}

/// A row's details.work; `model_text`: what was timed at work_ns:0, `lock`:
/// what the saturated case saturates.
inline nlohmann::json WorkDetails(uint64_t work_ns, bool calibrated,
                                  const WorkCalibration& c,
                                  const std::string& lock,
                                  const std::string& model_text,
                                  std::size_t ring_pages = 0,
                                  const WorkCaches& caches = {}) {
  nlohmann::json work = {
      {"work_ns", work_ns},
      {"calibrated", calibrated},
      {"what",
       work_ns == 0
           ? "none: the labelled saturated case (threads do nothing "
             "between " +
                 lock + " holds)"
           : std::string(
                 "per page outside the lock, what a fault on a fresh page "
                 "touches: memset of the next 4 KiB page (64 lines) of a "
                 "per-thread ring larger than the thread's share of the "
                 "caches, cycled in order so the page is cold (clear_page), "
                 "and an 8-byte page-table entry for it (set_pte_at; 8 "
                 "entries a line, a new line every 8 pages), then a register "
                 "spin for the rest of work_ns (the calibrated total stays "
                 "the measured fault path less the model's own cost)")},
  };
  if (work_ns != 0 && ring_pages != 0) {
    work["ring"] = {
        {"pages_per_thread", ring_pages},
        {"bytes_per_thread", ring_pages * kPageBytes},
        {"lines_per_op", kPageLines},
        {"pte_lines_per_op", 1.0 / kPtesPerLine},
        {"l2_bytes", caches.l2_bytes},
        {"l3_bytes", caches.l3_bytes},
        {"l3_pus", caches.l3_pus},
        {"caches_from", caches.source},
        {"sizing",
         "max(2 x L2, 2 x L3 / threads sharing it), 64 pages to 256 MiB; "
         "4 KiB pages (MADV_NOHUGEPAGE)"}};
  }
  if (calibrated) {
    work["fault_ns_per_page"] = c.fault_ns_per_page;
    work["model_ns_per_page"] = c.model_ns_per_page;
    work["zero_ns_per_page"] = c.zero_ns_per_page;
    work["method"] =
        "once per process: an anonymous mapping of 1024 pages written "
        "once per page and unmapped (the machine's fault + zeroing + "
        "release per page, min of 3), minus this model's own cost per page "
        "at work_ns:0 on one thread (" +
        model_text +
        "); zero_ns_per_page: the ring's touch per page (a cold page zeroed "
        "and its entry written, min of 3 passes of 1024 pages), the spin is "
        "the rest";
  }
  return work;
}

/// details.*.lock_stat_clock_reads: where a row reads the clock by its lock.
inline std::string LockStatClockReads(bool stats) {
  if (!stats)
    return "none: the lock is taken with plain lock()/unlock() (no trylock "
           "first, no clock read, no hold sample); this row answers the seed "
           "comparison";
  return "lock_stat (evidence row; the seed comparison is answered from its "
         "stats:off twin): trylock first; a contended acquisition reads the "
         "clock before lock() and after unlock(), outside the hold; every "
         "64th acquisition (kHoldSampleEvery) reads it right after acquiring "
         "and right before releasing, inside that hold (~20-40 ns, under 1 ns "
         "per hold on average), and zone_lock times 1 refill or drain in 64 "
         "the same way (hold_ns_per_refill / _drain). The in-hold sample is "
         "inherent to lock_stat's model: the wait of a contended unsampled "
         "acquisition is its span less the mean sampled hold, and Linux's "
         "CONFIG_LOCK_STAT reads the clock inside every hold "
         "(kernel/locking/lockdep.c: __lock_acquired sets holdtime_stamp, "
         "lock_release_holdtime reads lockstat_clock() before the release)";
}

}  // namespace lockline
