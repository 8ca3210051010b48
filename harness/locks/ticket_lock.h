// Ticket spinlock as in x86 Linux 2.6.25 to 4.1.
#pragma once

#include <atomic>
#include <cstdint>

#include "harness/locks/spin_wait.h"

namespace lockline {

/// FIFO ticket spinlock (Nick Piggin, x86 Linux 2.6.25 to 4.1, NR_CPUS >= 256
/// flavour): lock takes a ticket by incrementing `tail` and waits until `head`
/// equals it; unlock increments `head`. All waiters spin on one line
/// (O(waiters) transfers per hand-off). Lock word (4 bytes, little-endian):
/// bits 0-15 head (written only by the holder), 16-31 tail; tail - head =
/// holders + waiters. Linux xadds the 32-bit word; here two u16 atomics, the
/// same line traffic (C++ has no mixed-size atomics).
class TicketLock {
 public:
  static constexpr const char* kName = "ticket";
  static constexpr const char* kDescription =
      "FIFO ticket spinlock, x86 Linux 2.6.25-4.1 (u16 head + u16 tail, 4 "
      "bytes)";

  TicketLock() = default;
  TicketLock(const TicketLock&) = delete;
  TicketLock& operator=(const TicketLock&) = delete;

  void lock() {
    // Relaxed: the acquire is the load that sees head == mine.
    const uint16_t mine = tail_.fetch_add(1, std::memory_order_relaxed);
    if (head_.load(std::memory_order_acquire) == mine) return;
    SpinWait wait;
    // Acquire: pairs with the previous holder's release store of head.
    while (head_.load(std::memory_order_acquire) != mine) wait.Relax();
  }

  bool try_lock() {
    // Free iff head == tail; claim ticket `tail` by CAS so a failed try takes
    // no ticket. Acquire on the head load pairs with the last unlock; the CAS
    // needs none (head cannot move while nobody holds the lock).
    uint16_t t = tail_.load(std::memory_order_relaxed);
    if (head_.load(std::memory_order_acquire) != t) return false;
    return tail_.compare_exchange_strong(t, static_cast<uint16_t>(t + 1),
                                         std::memory_order_acquire,
                                         std::memory_order_relaxed);
  }

  void unlock() {
    // Only the holder writes head: load + store (Linux: a non-locked `incw`).
    // Release: publishes the critical section to ticket head + 1.
    const uint16_t h = head_.load(std::memory_order_relaxed);
    head_.store(static_cast<uint16_t>(h + 1), std::memory_order_release);
  }

 private:
  std::atomic<uint16_t> head_{0};
  std::atomic<uint16_t> tail_{0};
};
static_assert(sizeof(TicketLock) == 4,
              "ticket lock is two u16 like x86 arch_spinlock_t");

}  // namespace lockline
