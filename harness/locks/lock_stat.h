// lock_stat-like per-lock, per-thread statistics (after Linux CONFIG_LOCK_STAT,
// Documentation/locking/lockstat.rst): acquisitions, contentions, wait and hold
// time, hand-offs and a log2 histogram of wait times.
//
// Measurement model (nothing of ours under the lock).
// LockWithStats tries the lock first (Linux LOCK_CONTENDED: trylock, then the
// real lock only if it failed). A failed first try counts as contended: the
// clock is read before lock() (t0, outside the critical section) and again
// after unlock() (t2, outside it), so a contended acquisition's span is
// t2 - t0 = wait + hold and no clock read or shared-line write of ours lands
// inside its hold. Hold time is sampled: every kHoldSampleEvery-th acquisition
// (contended or not) reads the clock right after acquiring and right before
// releasing (the only clock reads inside a hold: 1 hold in 64, ~40 ns, i.e.
// < 1 ns per hold on average). A contended acquisition's wait is its span
// minus the thread's mean sampled hold so far (exact, t1 - t0, on sampled
// ones); the histogram, max and sum use that estimate. Hand-offs are counted
// without shared state: a contended acquisition follows another thread's hold,
// so it is a hand-off; an uncontended acquisition after another thread's hold
// is not seen (handoffs is a lower bound; equal to the true count once the lock
// is saturated). Nothing is written to a shared line: LockStatSide is kept
// for the callers' signatures and holds no per-acquisition state. The rows of
// bench/locks.cpp (stats:on vs stats:off) and each family's instrumented /
// uninstrumented row pair measure what remains.
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "harness/family.h"
#include "harness/locks/lock.h"
#include "harness/machine/cpu.h"

namespace lockline {

/// log2 wait-time buckets: bucket b counts waits w (ns) with 2^(b-1) <= w < 2^b
/// (bucket 0: w == 0). 40 buckets reach 2^39 ns (~9 minutes); longer waits land
/// in the last one.
inline constexpr int kWaitBuckets = 40;
/// Hold time is timed on every 64th acquisition: the mean is within a few
/// percent after a few thousand, and the other 63 pay no clock read.
inline constexpr uint64_t kHoldSampleEvery = 64;

/// One thread's statistics for one lock, in its thread's PaddedSlots slot.
/// Written only by its thread; read by the main thread after the windows (the
/// join or the harness's end barrier orders the reads).
struct alignas(kCacheLine) LockStatThread {
  uint64_t acquisitions = 0;  ///< successful lock() calls
  uint64_t contended = 0;     ///< acquisitions whose first try_lock failed
  uint64_t wait_ns = 0;       ///< summed wait of contended acquisitions, ns
  uint64_t max_wait_ns = 0;   ///< longest single wait, ns
  uint64_t hold_ns = 0;       ///< summed hold of the sampled acquisitions, ns
  uint64_t hold_samples = 0;  ///< acquisitions whose hold time was measured
  uint64_t handoffs = 0;      ///< after another thread's hold (a lower bound)
  uint64_t wait_hist[kWaitBuckets] = {};  ///< log2 histogram of waits
  uint64_t hold_start_ns = 0;             ///< a sampled hold's start, 0 = none
  uint64_t wait_start_ns = 0;  ///< a contended unsampled span's t0, 0 = none

  void Reset() { *this = LockStatThread{}; }
};

/// Per-lock side data, on its own line. Empty (no statistic writes a shared
/// line); kept for the families' signatures.
struct alignas(kDestructiveLine) LockStatSide {};

/// Bucket of a wait of `ns` nanoseconds in LockStatThread::wait_hist.
inline int WaitBucket(uint64_t ns) {
  const int b = static_cast<int>(std::bit_width(ns));
  return b < kWaitBuckets ? b : kWaitBuckets - 1;
}

/// Records a contended acquisition's wait of `wait` ns in `st`.
inline void RecordWait(LockStatThread& st, uint64_t wait) {
  st.wait_ns += wait;
  if (wait > st.max_wait_ns) st.max_wait_ns = wait;
  ++st.wait_hist[WaitBucket(wait)];
}

/// Acquires `lock`, recording the acquisition in `st` (see the measurement
/// model above). `side` and `thread_index` are unused (kept for the callers).
template <LockAlgorithm L>
void LockWithStats(L& lock, LockStatSide& /*side*/, LockStatThread& st,
                   int /*thread_index*/) {
  ++st.acquisitions;
  const bool sample = st.acquisitions % kHoldSampleEvery == 0;
  if (lock.try_lock()) [[likely]] {
    if (sample) [[unlikely]]
      st.hold_start_ns = NowNs();
    return;
  }
  const uint64_t t0 = NowNs();
  lock.lock();
  ++st.contended;
  ++st.handoffs;  // another thread held it when we tried
  if (sample) [[unlikely]] {
    const uint64_t t1 = NowNs();
    RecordWait(st, t1 - t0);
    st.hold_start_ns = t1;
  } else {
    st.wait_start_ns = t0;  // closed after unlock
  }
}

/// Releases `lock`, closing a sampled hold (clock read before the release) or
/// a contended span (clock read after it).
template <LockAlgorithm L>
void UnlockWithStats(L& lock, LockStatThread& st) {
  if (st.hold_start_ns != 0) [[unlikely]] {
    st.hold_ns += NowNs() - st.hold_start_ns;
    ++st.hold_samples;
    st.hold_start_ns = 0;
  }
  lock.unlock();
  if (st.wait_start_ns != 0) [[unlikely]] {
    const uint64_t span = NowNs() - st.wait_start_ns;
    st.wait_start_ns = 0;
    const uint64_t hold =
        st.hold_samples != 0 ? st.hold_ns / st.hold_samples : 0;
    RecordWait(st, span > hold ? span - hold : 0);
  }
}

/// Merges per-thread statistics of one lock into a JSON summary: the totals;
/// contended_share and handoff_share (per acquisition); wait_share = wait_ns /
/// (thread_seconds x 1e9) (thread_seconds = window seconds x threads: lock
/// contention as a share of CPU time); wait_mean_ns, wait_p50_ns / wait_p99_ns
/// (upper edge of the quantile's log2 bucket, capped at the max: within 2x),
/// wait_max_ns; hold_ns (mean sampled hold); acquisitions_per_op;
/// jain_fairness (Jain's index of per-thread acquisitions, 1 = equal);
/// wait_histogram [{"le_ns", "count"}] of non-empty buckets; per_thread.
/// Null entries in `threads` are skipped; zero denominators give 0.
nlohmann::json SummarizeLockStats(
    const std::vector<const LockStatThread*>& threads, double thread_seconds,
    uint64_t ops);

/// Adds the summary's flat metrics to a row and the whole summary as
/// out.details["lock_stat"].
void AddLockStatMetrics(PointReport& out, const nlohmann::json& summary);

}  // namespace lockline
