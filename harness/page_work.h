// The work a kernel path does per page outside its lock (issue 23 item 3),
// shared by the families with a work_ns:cal|0 axis (pagevec: lru_lock;
// zone_lock: zone->lock): the machine's anonymous fault path per page, measured
// once per process, minus what the family's model already spends per page,
// clamped at 0. The work zeroes one 4 KiB page of a per-thread ring (as
// clear_page touches a page's lines) and spins in registers for the rest
// (ThinkNs). Rows record it alike (WorkDetails: details.work, the same fields
// in every family).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "harness/cpu.h"
#include "harness/family.h"
#include "harness/memory.h"
#include "harness/shared_calibration.h"

namespace lockline {

/// Pages of the per-thread ring the work zeroes (64 x 4 KiB = 256 KiB: the
/// page a fault clears is rarely in L1).
inline constexpr int kWorkPages = 64;
inline constexpr std::size_t kPageBytes = 4096;

/// Work per page outside the lock (work_ns:cal), calibrated once per process:
/// what a page costs the machine's real fault path, minus what the model
/// already spends per page.
struct WorkCalibration {
  double fault_ns_per_page = 0;  ///< mmap + first write + munmap, per 4 KiB
  double model_ns_per_page = 0;  ///< the model at work_ns:0, 1 thread
  double zero_ns_per_page = 0;   ///< memset of one 4 KiB page of the ring
  uint64_t work_ns = 0;          ///< max(0, fault - model): the calibrated work
};

/// The machine's anonymous fault path per 4 KiB page: a private anonymous
/// mapping of 1024 pages (no THP) written once per page and unmapped, the
/// minimum of 3 attempts (fault, clear_page, page tables, LRU add, the page
/// allocation and the unmap's release and free per page). 0 when mmap fails.
inline double MeasureFaultNsPerPage() {
  constexpr std::size_t kPages = 1024;
  return TimeAnonymousFaultInNs(kPages * kPageBytes, 3, /*with_unmap=*/true) /
         kPages;
}

/// memset of one 4 KiB page of a kWorkPages ring, ns (min of 3 passes).
inline double MeasureZeroNsPerPage() {
  std::unique_ptr<unsigned char[]> ring(
      new unsigned char[kWorkPages * kPageBytes]);
  std::memset(ring.get(), 1, kWorkPages * kPageBytes);
  double best = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const uint64_t t0 = NowNs();
    for (int rep = 0; rep < 8; ++rep) {
      for (int i = 0; i < kWorkPages; ++i) {
        unsigned char* page = ring.get() + i * kPageBytes;
        std::memset(page, 0, kPageBytes);
        asm volatile("" : : "r"(page) : "memory");
      }
    }
    const double ns = static_cast<double>(NowNs() - t0) / (8 * kWorkPages);
    if (attempt == 0 || ns < best) best = ns;
  }
  return best;
}

/// The calibration for a model whose own cost per page (work_ns:0, one
/// thread) is `model_ns_per_page`: measures the fault path and the zeroing,
/// work_ns = max(0, fault - model).
/// In a build duet (harness/shared_calibration.h) both processes use one
/// value of each: the fault and zeroing costs always, the model's own cost
/// when the caller names it with `model_key` (e.g. "pagevec:2.6.9").
inline WorkCalibration CalibrateWork(double model_ns_per_page,
                                     const std::string& model_key = "") {
  WorkCalibration c;
  c.fault_ns_per_page =
      SharedCalibration("fault_ns_per_page", MeasureFaultNsPerPage);
  c.model_ns_per_page =
      model_key.empty() ? model_ns_per_page
                        : SharedCalibration("model_ns_per_page:" + model_key,
                                            [&] { return model_ns_per_page; });
  c.zero_ns_per_page =
      SharedCalibration("zero_ns_per_page", MeasureZeroNsPerPage);
  c.work_ns =
      c.fault_ns_per_page > c.model_ns_per_page
          ? static_cast<uint64_t>(c.fault_ns_per_page - c.model_ns_per_page)
          : 0;
  return c;
}

/// One thread's ring of pages the work zeroes, and the work itself.
/// Allocate() on the thread that runs the work (first touch).
struct PageWorkRing {
  std::unique_ptr<unsigned char[]> pages;
  int next = 0;

  void Allocate() {
    pages.reset(new unsigned char[kWorkPages * kPageBytes]);
    std::memset(pages.get(), 1, kWorkPages * kPageBytes);
  }
  /// One page's work: zero the ring's next page, then spin `spin_ns`.
  void Page(uint64_t spin_ns) {
    unsigned char* page =
        pages.get() + static_cast<std::size_t>(next) * kPageBytes;
    next = (next + 1) % kWorkPages;
    std::memset(page, 0, kPageBytes);
    asm volatile("" : : "r"(page) : "memory");
    ThinkNs(spin_ns);
  }
};

/// The register spin after the zeroing, for `work_ns` per page: work_ns less
/// the calibrated zeroing time (0 when not calibrated), at least 0.
inline uint64_t WorkSpinNs(uint64_t work_ns, bool calibrated,
                           const WorkCalibration& c) {
  const uint64_t zero_ns =
      calibrated ? static_cast<uint64_t>(c.zero_ns_per_page) : 0;
  return work_ns > zero_ns ? work_ns - zero_ns : 0;
}

/// details.work of a row (the same fields in every family): work_ns,
/// calibrated, what; when calibrated fault_ns_per_page, model_ns_per_page,
/// zero_ns_per_page and method (`model_text`: which model configuration was
/// timed at work_ns:0). `lock` names the lock the saturated case saturates.
inline nlohmann::json WorkDetails(uint64_t work_ns, bool calibrated,
                                  const WorkCalibration& c,
                                  const std::string& lock,
                                  const std::string& model_text) {
  nlohmann::json work = {
      {"work_ns", work_ns},
      {"calibrated", calibrated},
      {"what",
       work_ns == 0
           ? "none: the labelled saturated case (threads do nothing "
             "between " +
                 lock + " holds)"
           : std::string(
                 "per page outside the lock: memset of one 4 KiB page of a "
                 "256 KiB per-thread ring (as clear_page touches a page's "
                 "lines), then a register spin for the rest of work_ns")},
  };
  if (calibrated) {
    work["fault_ns_per_page"] = c.fault_ns_per_page;
    work["model_ns_per_page"] = c.model_ns_per_page;
    work["zero_ns_per_page"] = c.zero_ns_per_page;
    work["method"] =
        "once per process: an anonymous mapping of 1024 pages written "
        "once per page and unmapped (the machine's fault + zeroing + "
        "release per page, min of 3), minus this model's own cost per page "
        "at work_ns:0 on one thread (" +
        model_text + ")";
  }
  return work;
}

/// details.*.lock_stat_clock_reads of a pagevec or zone_lock row: where the
/// row reads the clock around its lock (issue 40 item 3). `stats`: the row
/// takes the lock through lock_stat (harness/locks/lock_stat.h; the
/// instrumented rows, evidence of the wait share), else plainly (the stats:off
/// twins, which answer the seed questions).
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
