// One cache line bounced between two threads: core-to-core latency for the
// coherence probes and the c2c calibration (as nviennot/core-to-core-latency).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "harness/locks/spin_wait.h"
#include "harness/machine/cpu.h"

namespace lockline {

/// The initiator writes odd values, the responder answers the next even one:
/// a round trip is two line transfers. Both sides SpinWait; reusable.
class PingPongLine {
 public:
  /// Round trips per timed sample: amortizes the clock read (~20 ns).
  static constexpr int kBatch = 64;

  /// Initiator: batches of kBatch round trips while keep_going(), appending
  /// each batch's one-way ns to `samples`; returns the round trips.
  template <class KeepGoing>
  uint64_t Initiate(KeepGoing keep_going, std::vector<double>& samples) {
    uint64_t v = 0;
    while (keep_going()) {
      const uint64_t t0 = NowNs();
      for (int k = 0; k < kBatch; ++k) {
        word_.store(v + 1, std::memory_order_release);
        for (SpinWait sw; word_.load(std::memory_order_acquire) != v + 2;)
          sw.Relax();
        v += 2;
      }
      samples.push_back(static_cast<double>(NowNs() - t0) / (2.0 * kBatch));
    }
    done_.store(true, std::memory_order_release);
    return v / 2;
  }

  /// Responder: answers until the initiator is done, then resets the line.
  void Respond() {
    uint64_t expect = 1;
    SpinWait idle;
    while (!done_.load(std::memory_order_acquire)) {
      if (word_.load(std::memory_order_acquire) == expect) {
        word_.store(expect + 1, std::memory_order_release);
        expect += 2;
        idle = SpinWait();
      } else {
        idle.Relax();
      }
    }
    word_.store(0, std::memory_order_relaxed);
    done_.store(false, std::memory_order_relaxed);
  }

 private:
  alignas(kDestructiveLine) std::atomic<uint64_t> word_{0};
  alignas(kDestructiveLine) std::atomic<bool> done_{
      false};  // off the measured line
};

}  // namespace lockline
