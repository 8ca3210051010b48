// The busy-wait policy of every spinning lock: CpuRelax as kernel spinlock
// waiters do; yield only in an oversubscribed point.
#pragma once

#include <cstdint>
#include <thread>

#include "harness/machine/cpu.h"

namespace lockline {

/// Whether the spinning waiters of the calling thread may give up the CPU.
enum class SpinYield : uint8_t {
  /// Spin forever, as kernel waiters do (interrupts off, never scheduling).
  kNever,
  /// sched_yield() after kSpinsBeforeYield relaxes: oversubscribed points,
  /// and threads the harness did not start (unit tests).
  kAfterSpins,
};

namespace spin_wait_detail {
/// The calling thread's policy (see SetSpinYield).
inline thread_local SpinYield tls_policy = SpinYield::kAfterSpins;
/// SpinWait's sched_yield() calls on the calling thread (a test hook).
inline thread_local uint64_t tls_yields = 0;
}  // namespace spin_wait_detail

/// Sets the calling thread's spin policy (before SetupThread).
inline void SetSpinYield(SpinYield policy) {
  spin_wait_detail::tls_policy = policy;
}
inline SpinYield CurrentSpinYield() { return spin_wait_detail::tls_policy; }
/// sched_yield() calls SpinWait made on the calling thread so far (test hook).
inline uint64_t SpinYieldsOnThisThread() {
  return spin_wait_detail::tls_yields;
}

/// One CpuRelax per Relax(), or under kAfterSpins sched_yield() after
/// kSpinsBeforeYield; the policy is read once, at construction.
class SpinWait {
 public:
  /// ~10-60 us of PAUSE (Zen 4 ~65 cycles, Skylake-SP ~140), far longer than
  /// any modelled critical section: only a preempted holder triggers a yield.
  static constexpr uint32_t kSpinsBeforeYield = 1024;

  SpinWait() : may_yield_(CurrentSpinYield() == SpinYield::kAfterSpins) {}

  void Relax() {
    if (!may_yield_ || spins_ < kSpinsBeforeYield) {
      ++spins_;  // may wrap: compared only when may_yield_
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
