// The busy-wait policy shared by every spinning lock: spin with CpuRelax the
// way kernel spinlock waiters do, and yield the CPU only where the point is
// oversubscribed.
#pragma once

#include <cstdint>
#include <thread>

#include "harness/machine/cpu.h"

namespace lockline {

/// Whether the spinning waiters of the calling thread may give up the CPU.
enum class SpinYield : uint8_t {
  /// Spin with CpuRelax forever, as kernel spinlock waiters do (interrupts
  /// off, they never schedule): the line traffic the experiments measure.
  kNever,
  /// Spin kSpinsBeforeYield relaxes, then sched_yield() on every further
  /// relax: for oversubscribed points, where a preempted holder would make a
  /// pure spinner burn its time slice. The default of threads the harness did
  /// not start (unit tests).
  kAfterSpins,
};

namespace spin_wait_detail {
/// The calling thread's policy (see SetSpinYield).
inline thread_local SpinYield tls_policy = SpinYield::kAfterSpins;
/// sched_yield() calls made by SpinWait on the calling thread (a test hook:
/// a non-oversubscribed waiter must leave it unchanged).
inline thread_local uint64_t tls_yields = 0;
}  // namespace spin_wait_detail

/// Sets the calling thread's spin policy (the runner: kAfterSpins iff the
/// point is oversubscribed, before SetupThread).
inline void SetSpinYield(SpinYield policy) {
  spin_wait_detail::tls_policy = policy;
}
/// The calling thread's spin policy.
inline SpinYield CurrentSpinYield() { return spin_wait_detail::tls_policy; }
/// sched_yield() calls SpinWait made on the calling thread so far (test hook).
inline uint64_t SpinYieldsOnThisThread() {
  return spin_wait_detail::tls_yields;
}

/// Relaxes in a busy-wait loop: one CpuRelax per call, or under kAfterSpins
/// sched_yield() after the first kSpinsBeforeYield calls. The policy is read
/// once, at construction (one thread-local load per wait).
class SpinWait {
 public:
  /// 1024 relaxes: ~10-60 us depending on the PAUSE latency of the core (Zen 4
  /// ~65 cycles per PAUSE, Skylake-SP ~140), far longer than any critical
  /// section lockline models, so in an oversubscribed point the yield only
  /// fires when the holder or the next owner is not running.
  static constexpr uint32_t kSpinsBeforeYield = 1024;

  SpinWait() : may_yield_(CurrentSpinYield() == SpinYield::kAfterSpins) {}

  void Relax() {
    if (!may_yield_ || spins_ < kSpinsBeforeYield) {
      ++spins_;  // wraps after 2^32 relaxes: harmless, only compared when
                 // may_yield_
      CpuRelax();
    } else {
      ++spin_wait_detail::tls_yields;
      std::this_thread::yield();
    }
  }

 private:
  bool may_yield_;
  uint32_t spins_ = 0;
};

}  // namespace lockline
