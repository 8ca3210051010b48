// One cache line bounced between two threads: the core-to-core latency
// measurement used by the coherence probes (ThreadTeam::PingPong) and the
// calibration family's c2c points. Source: the classic c2c ping-pong (e.g.
// nviennot/core-to-core-latency).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "harness/locks/spin_wait.h"
#include "harness/machine/cpu.h"

namespace lockline {

/// The ping-pong line and its protocol. The initiator writes odd values 1, 3,
/// 5, ... and waits for each even reply; the responder answers each odd value
/// with the next even one. One round trip = two line transfers. Both sides spin
/// then yield (SpinWait), so two threads sharing a CPU still make progress.
/// Reusable: after each exchange the responder resets the line.
class PingPongLine {
 public:
  /// Round trips per timed sample: amortizes the clock read (~20 ns).
  static constexpr int kBatch = 64;

  /// Initiator side: runs batches of kBatch round trips while keep_going()
  /// (checked between batches) returns true, appending each batch's one-way
  /// latency (round trip / 2, ns) to `samples`, then releases the responder.
  /// Returns the round trips made.
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

  /// Responder side: answers until the initiator is done, then resets the line
  /// and the flag for the next exchange (the initiator no longer touches them).
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
