// The busy-wait policy shared by every spinning lock: spin with CpuRelax, then
// yield the CPU.
#pragma once

#include <cstdint>
#include <thread>

#include "harness/cpu.h"

namespace lockline {

/// Relaxes in a busy-wait loop: the first kSpinsBeforeYield calls execute one
/// CpuRelax (PAUSE on x86-64, YIELD on aarch64), later calls sched_yield().
/// Kernel spinlocks never yield because the holder cannot be preempted; a
/// user-space lock's holder can, so with more runnable threads than CPUs
/// (oversubscribed runs) a pure spinner may burn its whole time slice while the
/// holder, or the next ticket / queue owner, waits for a CPU. Yielding bounds
/// that and keeps every run progressing; below oversubscription the yield is
/// rarely reached.
class SpinWait {
 public:
  /// 1024 relaxes: ~10-60 us depending on the PAUSE latency of the core (Zen 4
  /// ~65 cycles per PAUSE, Skylake-SP ~140), far longer than any critical
  /// section lockline models, so the yield only fires when the holder or the
  /// next owner is not running.
  static constexpr uint32_t kSpinsBeforeYield = 1024;

  void Relax() {
    if (spins_ < kSpinsBeforeYield) {
      ++spins_;
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }

 private:
  uint32_t spins_ = 0;
};

}  // namespace lockline
