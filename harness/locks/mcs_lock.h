// MCS queue lock (Mellor-Crummey and Scott, ACM TOCS 1991).
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "harness/locks/spin_wait.h"
#include "harness/machine/cpu.h"

namespace lockline {

/// One waiter's queue node: each waiter spins on its own, so a hand-off moves
/// one line. 128-byte aligned (adjacent-line prefetch included).
struct alignas(kDestructiveLine) McsNode {
  std::atomic<McsNode*> next{nullptr};  ///< successor, set by the successor
  std::atomic<uint32_t> locked{0};      ///< 1: wait; predecessor clears
};

/// MCS locks one thread may hold or wait for at once, like Linux's MAX_NODES
/// = 4 (task, softirq, hardirq, NMI); more aborts.
inline constexpr int kMcsMaxNesting = 4;

/// McsLock's per-thread node pool: node i serves `owner[i]` (nullptr free);
/// unlock finds the node by the lock's address, so holds need not nest.
struct McsThreadNodes {
  McsNode nodes[kMcsMaxNesting];
  const void* owner[kMcsMaxNesting] = {};

  McsNode* Grab(const void* lock) {
    for (int i = 0; i < kMcsMaxNesting; ++i) {
      if (owner[i] == nullptr) {
        owner[i] = lock;
        return &nodes[i];
      }
    }
    std::fprintf(
        stderr,
        "lockline: McsLock nested deeper than kMcsMaxNesting=%d per thread\n",
        kMcsMaxNesting);
    std::abort();
  }
  McsNode* Find(const void* lock) {
    for (int i = 0; i < kMcsMaxNesting; ++i)
      if (owner[i] == lock) return &nodes[i];
    std::fprintf(
        stderr,
        "lockline: McsLock::unlock() by a thread that does not hold it\n");
    std::abort();
  }
  void Release(McsNode* node) { owner[node - nodes] = nullptr; }
};

/// Thread-local, constant-initialized (no TLS guard on the fast path).
inline thread_local McsThreadNodes tls_mcs_nodes;

/// MCS queue spinlock: the lock word (8 bytes) is the queue's tail pointer,
/// nullptr = free, else the last thread's node (holder or waiter). Waiters
/// append with one exchange and spin locally; FIFO; one line per hand-off,
/// an extra node write and unlock CAS uncontended.
class McsLock {
 public:
  static constexpr const char* kName = "mcs";
  static constexpr const char* kDescription =
      "MCS queue lock: 8-byte tail pointer, each waiter spins on its own "
      "thread-local node";

  McsLock() = default;
  McsLock(const McsLock&) = delete;
  McsLock& operator=(const McsLock&) = delete;

  void lock() {
    McsNode* node = tls_mcs_nodes.Grab(this);
    // `next` must be clear before the exchange makes the node reachable by a
    // successor; `locked` is set only when we must wait (below), which saves a
    // store uncontended.
    node->next.store(nullptr, std::memory_order_relaxed);
    // acq_rel: acquire pairs with the previous holder's release CAS of tail_ to
    // nullptr (when the queue was empty); release publishes this node's
    // initialisation to a successor that finds it through tail_.
    McsNode* prev = tail_.exchange(node, std::memory_order_acq_rel);
    if (prev == nullptr) return;
    // The predecessor learns of us only through prev->next, so locked = 1
    // written before that link is ordered before its hand-off store of 0.
    node->locked.store(1, std::memory_order_relaxed);
    // Release: the predecessor reads `next` (acquire) before locked = 0.
    prev->next.store(node, std::memory_order_release);
    SpinWait wait;
    // Acquire: pairs with the predecessor's hand-off (release, locked = 0).
    while (node->locked.load(std::memory_order_acquire) != 0) wait.Relax();
  }

  bool try_lock() {
    if (tail_.load(std::memory_order_relaxed) != nullptr) return false;
    McsNode* node = tls_mcs_nodes.Grab(this);
    node->next.store(nullptr, std::memory_order_relaxed);
    McsNode* expected = nullptr;
    // acq_rel as in lock(): the CAS is the exchange on an empty queue.
    if (tail_.compare_exchange_strong(expected, node, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
      return true;
    }
    tls_mcs_nodes.Release(node);
    return false;
  }

  void unlock() {
    McsNode* node = tls_mcs_nodes.Find(this);
    // Acquire: pairs with the successor's release store of our `next`.
    McsNode* next = node->next.load(std::memory_order_acquire);
    if (next == nullptr) {
      McsNode* expected = node;
      // Release: publishes the critical section to whoever finds tail_ empty.
      if (tail_.compare_exchange_strong(expected, nullptr,
                                        std::memory_order_release,
                                        std::memory_order_relaxed)) {
        tls_mcs_nodes.Release(node);
        return;
      }
      // A successor swapped tail_ but has not linked itself yet: wait.
      SpinWait wait;
      while ((next = node->next.load(std::memory_order_acquire)) == nullptr)
        wait.Relax();
    }
    // Release: hands the lock and the critical section to the successor.
    next->locked.store(0, std::memory_order_release);
    tls_mcs_nodes.Release(node);
  }

 private:
  std::atomic<McsNode*> tail_{nullptr};
};
static_assert(sizeof(McsLock) == sizeof(void*), "MCS lock is one tail pointer");

}  // namespace lockline
