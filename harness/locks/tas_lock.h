// Test-and-set and test-and-test-and-set spinlocks on a 4-byte word.
#pragma once

#include <atomic>
#include <cstdint>

#include "harness/locks/spin_wait.h"

namespace lockline {

/// Test-and-set spinlock: every attempt is an exchange, so each waiter keeps
/// pulling the line exclusive (the worst-case baseline). Lock word: a u32 like
/// the kernel's generic arch_spinlock_t, 1 = locked. Not fair.
class TasLock {
 public:
  static constexpr const char* kName = "tas";
  static constexpr const char* kDescription =
      "test-and-set spinlock: atomic exchange on every spin (4-byte word)";

  TasLock() = default;
  TasLock(const TasLock&) = delete;
  TasLock& operator=(const TasLock&) = delete;

  void lock() {
    SpinWait wait;
    // Acquire: a success orders the critical section after the last unlock();
    // failed exchanges write 1 over 1 and order nothing useful.
    while (word_.exchange(1, std::memory_order_acquire) != 0) wait.Relax();
  }
  bool try_lock() { return word_.exchange(1, std::memory_order_acquire) == 0; }
  // Release: publishes the critical section to the next acquirer's exchange.
  void unlock() { word_.store(0, std::memory_order_release); }

 private:
  std::atomic<uint32_t> word_{0};
};
static_assert(sizeof(TasLock) == 4, "TAS lock word is one u32");

/// Test-and-test-and-set spinlock with PAUSE: waiters spin on loads (line
/// Shared) and exchange when it looks free, so a hand-off still costs
/// O(waiters) transfers: pre-2.6.25 x86 Linux's behaviour. u32, 1 = locked.
class TtasLock {
 public:
  static constexpr const char* kName = "ttas";
  static constexpr const char* kDescription =
      "test-and-test-and-set spinlock: spin on loads with PAUSE, then exchange "
      "(4-byte word)";

  TtasLock() = default;
  TtasLock(const TtasLock&) = delete;
  TtasLock& operator=(const TtasLock&) = delete;

  void lock() {
    // Acquire on the successful exchange; the read-only spin only decides
    // when to retry (relaxed).
    if (word_.exchange(1, std::memory_order_acquire) == 0) return;
    SpinWait wait;
    for (;;) {
      while (word_.load(std::memory_order_relaxed) != 0) wait.Relax();
      if (word_.exchange(1, std::memory_order_acquire) == 0) return;
    }
  }
  bool try_lock() {
    // Test first so a failing try_lock does not steal the line from the holder.
    return word_.load(std::memory_order_relaxed) == 0 &&
           word_.exchange(1, std::memory_order_acquire) == 0;
  }
  // Release: publishes the critical section to the next successful exchange.
  void unlock() { word_.store(0, std::memory_order_release); }

 private:
  std::atomic<uint32_t> word_{0};
};
static_assert(sizeof(TtasLock) == 4, "TTAS lock word is one u32");

}  // namespace lockline
