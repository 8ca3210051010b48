// lock_stat-like per-lock, per-thread statistics (after Linux CONFIG_LOCK_STAT,
// Documentation/locking/lockstat.rst): acquisitions, contentions, wait and hold
// time, hand-offs and a log2 wait histogram. Measurement model: nothing of
// ours under the lock and no shared-line write.
// LockWithStats tries first (Linux LOCK_CONTENDED); a failed try is contended,
// timed from before lock() to after unlock() (span = wait + hold). Every
// kHoldSampleEvery-th acquisition times its hold inside the lock (the only
// clock reads there). A contended wait is its span minus the thread's mean
// sampled hold (exact on sampled ones). A contended acquisition follows
// another thread's hold, so it is a hand-off (handoffs is a lower bound).
#pragma once

#include <bit>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "harness/family.h"
#include "harness/locks/lock.h"
#include "harness/machine/cpu.h"

namespace lockline {

/// log2 wait buckets: b counts waits (ns) in [2^(b-1), 2^b), 0 counts 0; the
/// last (2^39 ns, ~9 min) takes longer ones too.
inline constexpr int kWaitBuckets = 40;
/// Hold time is timed on every 64th acquisition: the mean is within a few
/// percent after a few thousand, and the other 63 pay no clock read.
inline constexpr uint64_t kHoldSampleEvery = 64;

/// One thread's statistics for one lock (its PaddedSlots slot), read after the
/// windows end.
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

/// The wait_hist bucket of a wait of `ns`.
inline int WaitBucket(uint64_t ns) {
  const int b = static_cast<int>(std::bit_width(ns));
  return b < kWaitBuckets ? b : kWaitBuckets - 1;
}

inline void RecordWait(LockStatThread& st, uint64_t wait) {
  st.wait_ns += wait;
  if (wait > st.max_wait_ns) st.max_wait_ns = wait;
  ++st.wait_hist[WaitBucket(wait)];
}

/// Acquires `lock`, recording it in `st` (model above).
template <LockAlgorithm L>
void LockWithStats(L& lock, LockStatThread& st) {
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
/// a contended span (after it).
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

/// LockWithStats when `stats`, else a plain lock() that still counts the
/// acquisition (a stats:off twin row, without lock_stat's clock reads).
template <LockAlgorithm L>
void LockCounted(L& lock, LockStatThread& st, bool stats) {
  if (stats) return LockWithStats(lock, st);
  ++st.acquisitions;
  lock.lock();
}

/// UnlockWithStats when `stats`, else a plain unlock().
template <LockAlgorithm L>
void UnlockCounted(L& lock, LockStatThread& st, bool stats) {
  if (stats) return UnlockWithStats(lock, st);
  lock.unlock();
}

/// One lock's summary (results/SCHEMA.md lock_stat): totals, shares, wait
/// quantiles (the log2 bucket's upper edge, capped at the max), Jain fairness,
/// histogram, per_thread. Null threads skipped; zero denominators give 0.
nlohmann::json SummarizeLockStats(
    const std::vector<const LockStatThread*>& threads, double thread_seconds,
    uint64_t ops);

/// Adds the summary's flat metrics and out.details["lock_stat"].
void AddLockStatMetrics(PointReport& out, const nlohmann::json& summary);

}  // namespace lockline
