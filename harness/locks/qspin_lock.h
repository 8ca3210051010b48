// qspinlock-like queued spinlock: the x86 Linux spinlock since 4.2 (Waiman
// Long, Peter Zijlstra).
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "harness/locks/spin_wait.h"
#include "harness/machine/cpu.h"

namespace lockline {

/// A waiter's queue node (Linux `struct mcs_spinlock` in `struct qnode`).
struct alignas(kDestructiveLine) QspinNode {
  std::atomic<QspinNode*> next{nullptr};  ///< successor, set by the successor
  std::atomic<uint32_t> locked{0};        ///< set to 1 by the predecessor: head
};

/// Queue nodes per thread, Linux's MAX_NODES = 4; deeper nesting spins on
/// try_lock, as Linux does.
inline constexpr int kQspinMaxNodes = 4;
/// Threads the tail's 14-bit cpu field (id + 1) encodes, as Linux's NR_CPUS <
/// 16K; ids recycle at thread exit, more live slow-path threads abort.
inline constexpr uint32_t kQspinMaxThreads = (1u << 14) - 1;

/// Per-thread queue nodes (Linux: per-CPU `qnodes`).
struct QspinThreadNodes {
  QspinNode nodes[kQspinMaxNodes];
  int count = 0;    ///< nodes in use (one is free once its lock is held)
  uint32_t id = 0;  ///< 1-based tail id; 0 until the first slow path
};
inline thread_local QspinThreadNodes tls_qspin_nodes;

namespace qspin_detail {

/// Tail id -> thread's nodes (Linux: per_cpu_ptr(&qnodes, cpu)).
struct Registry {
  std::atomic<QspinThreadNodes*> slots[kQspinMaxThreads + 1] = {};
  std::mutex mu;
  std::vector<uint32_t> free_ids;
  uint32_t next_id = 1;
};
inline Registry& GetRegistry() {
  static Registry* registry =
      new Registry;  // leaked: threads may exit after static dtors
  return *registry;
}

/// Returns the id to the registry when its thread exits.
struct IdReleaser {
  uint32_t id = 0;
  ~IdReleaser() {
    if (id == 0) return;
    Registry& r = GetRegistry();
    r.slots[id].store(nullptr, std::memory_order_relaxed);
    std::lock_guard<std::mutex> guard(r.mu);
    r.free_ids.push_back(id);
  }
};

/// This thread's tail id, registering its nodes on first (slow-path) use.
inline uint32_t ThreadId() {
  QspinThreadNodes& t = tls_qspin_nodes;
  if (t.id != 0) return t.id;
  thread_local IdReleaser releaser;
  Registry& r = GetRegistry();
  uint32_t id;
  {
    std::lock_guard<std::mutex> guard(r.mu);
    if (!r.free_ids.empty()) {
      id = r.free_ids.back();
      r.free_ids.pop_back();
    } else if (r.next_id <= kQspinMaxThreads) {
      id = r.next_id++;
    } else {
      std::fprintf(stderr,
                   "lockline: QspinLock used by more than %u live threads\n",
                   kQspinMaxThreads);
      std::abort();
    }
  }
  // Release: a waiter that decodes this id from the tail must see the slot.
  r.slots[id].store(&t, std::memory_order_release);
  t.id = id;
  releaser.id = id;
  return id;
}

}  // namespace qspin_detail

/// Queued spinlock after Linux kernel/locking/qspinlock.c (4.2+, 4.16+ form
/// with atomic_fetch_or for pending). Uncontended: one CAS, one byte store.
/// The first contender sets pending and spins on the word; later ones queue
/// MCS-style on thread-local nodes and only the head spins on the word, so a
/// hand-off moves the word between at most two threads plus one node line.
/// Lock word (4 bytes, _Q_PENDING_BITS == 8, little-endian): bits 0-7 locked,
/// 8-15 pending, 16-17 tail node index, 18-31 tail thread id + 1 (0: empty).
/// Byte and half-word accesses are mixed-size atomics (as GCC and Clang do
/// on x86-64 / aarch64, which the kernel relies on). The fast path's CAS
/// cannot forward from the last unlock's byte store, so uncontended it costs
/// a little more than TAS, as in Linux. Not modelled: paravirt hooks, CNA.
class QspinLock {
 public:
  static constexpr const char* kName = "qspinlock";
  static constexpr const char* kDescription =
      "queued spinlock as Linux 4.2+: 4-byte word (locked byte, pending, "
      "tail), MCS queue";

  QspinLock() = default;
  QspinLock(const QspinLock&) = delete;
  QspinLock& operator=(const QspinLock&) = delete;

  void lock() {
    uint32_t val = 0;
    // Fast path. Acquire: pairs with the last unlock's release store.
    if (__atomic_compare_exchange_n(&val_, &val, kLocked, false,
                                    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
      return;
    }
    SlowPath(val);
  }

  bool try_lock() {
    // queued_spin_trylock: read first, CAS 0 -> locked only if all clear.
    uint32_t val = __atomic_load_n(&val_, __ATOMIC_RELAXED);
    return val == 0 &&
           __atomic_compare_exchange_n(&val_, &val, kLocked, false,
                                       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
  }

  // Release: the byte store of 0 publishes the critical section to whoever
  // next sees locked == 0 with acquire (fast path, pending waiter, head).
  void unlock() {
    __atomic_store_n(LockedByte(), uint8_t{0}, __ATOMIC_RELEASE);
  }

 private:
  static_assert(std::endian::native == std::endian::little,
                "byte offsets assume little-endian");
  using ByteAlias [[gnu::may_alias]] = uint8_t;
  using HalfAlias [[gnu::may_alias]] = uint16_t;

  static constexpr uint32_t kLocked = 1u;
  static constexpr uint32_t kLockedMask = 0xffu;
  static constexpr uint32_t kPending = 1u << 8;
  static constexpr uint32_t kPendingMask = 0xff00u;
  static constexpr uint32_t kLockedPendingMask = 0xffffu;
  static constexpr uint32_t kTailMask = 0xffff0000u;
  static constexpr int kTailIdxShift = 16;
  static constexpr int kTailIdShift = 18;
  /// How long a would-be pending waiter waits for a pending -> locked
  /// transition in progress before queueing: x86's _Q_PENDING_LOOPS (1 << 9).
  static constexpr int kPendingLoops = 1 << 9;

  ByteAlias* LockedByte() { return reinterpret_cast<ByteAlias*>(&val_); }
  ByteAlias* PendingByte() { return reinterpret_cast<ByteAlias*>(&val_) + 1; }
  HalfAlias* LockedPendingHalf() { return reinterpret_cast<HalfAlias*>(&val_); }
  HalfAlias* TailHalf() { return reinterpret_cast<HalfAlias*>(&val_) + 1; }
  uint32_t Load(int order) { return __atomic_load_n(&val_, order); }

  static QspinNode* DecodeTail(uint32_t tail) {
    const uint32_t id = tail >> kTailIdShift;
    const uint32_t idx = (tail >> kTailIdxShift) & 3u;
    QspinThreadNodes* t =
        qspin_detail::GetRegistry().slots[id].load(std::memory_order_acquire);
    return &t->nodes[idx];
  }

  void SlowPath(uint32_t val) {
    // A pending -> locked hand-over in progress: wait a bounded time.
    if (val == kPending) {
      int loops = kPendingLoops;
      while ((val = Load(__ATOMIC_RELAXED)) == kPending && loops-- > 0)
        CpuRelax();
    }
    if ((val & ~kLockedMask) == 0) {
      // Try to become the pending waiter. Acquire: if the lock was free (val ==
      // 0) this RMW is the acquisition and pairs with the last unlock.
      val = __atomic_fetch_or(&val_, kPending, __ATOMIC_ACQUIRE);
      if ((val & ~kLockedMask) == 0) {
        if (val & kLockedMask) {
          // Pending owner: spin on the word (acquire: the holder's unlock).
          SpinWait wait;
          while (Load(__ATOMIC_ACQUIRE) & kLockedMask) wait.Relax();
        }
        // clear_pending_set_locked: one 16-bit store (0, 1). Relaxed: we own
        // the lock; nobody else writes locked or pending while pending is ours.
        __atomic_store_n(LockedPendingHalf(), static_cast<uint16_t>(kLocked),
                         __ATOMIC_RELAXED);
        return;
      }
      // Someone else is pending or queued: undo our pending bit if we set it.
      if ((val & kPendingMask) == 0)
        __atomic_store_n(PendingByte(), uint8_t{0}, __ATOMIC_RELAXED);
    }
    Queue();
  }

  void Queue() {
    QspinThreadNodes& t = tls_qspin_nodes;
    const int idx = t.count++;
    if (idx >= kQspinMaxNodes) {
      // Nested deeper than the node array (Linux: "can only happen with NMIs"):
      // spin on trylock.
      SpinWait wait;
      while (!try_lock()) wait.Relax();
      --t.count;
      return;
    }
    const uint32_t tail = (qspin_detail::ThreadId() << kTailIdShift) |
                          (static_cast<uint32_t>(idx) << kTailIdxShift);
    QspinNode* node = &t.nodes[idx];
    node->locked.store(0, std::memory_order_relaxed);
    node->next.store(nullptr, std::memory_order_relaxed);
    // The owner and pending waiter may have gone meanwhile: try once more.
    if (try_lock()) {
      --t.count;
      return;
    }
    // xchg_tail: a 16-bit exchange of the tail half. acq_rel: release publishes
    // our node's initialisation to the waiter that queues behind us (it reads
    // our tail from this RMW chain); acquire makes the previous tail's node
    // registration visible to us.
    const uint32_t old =
        static_cast<uint32_t>(__atomic_exchange_n(
            TailHalf(), static_cast<uint16_t>(tail >> 16), __ATOMIC_ACQ_REL))
        << 16;
    QspinNode* next = nullptr;
    if (old & kTailMask) {
      QspinNode* prev = DecodeTail(old);
      // Release: our node's init happens-before the predecessor's locked write.
      prev->next.store(node, std::memory_order_release);
      SpinWait wait;
      // Acquire: pairs with the predecessor's release store of locked = 1.
      while (node->locked.load(std::memory_order_acquire) == 0) wait.Relax();
      next = node->next.load(std::memory_order_acquire);
    }
    // Queue head: wait for the owner and the pending waiter to go (acquire:
    // pairs with the unlock).
    uint32_t val;
    {
      SpinWait wait;
      while ((val = Load(__ATOMIC_ACQUIRE)) & kLockedPendingMask) wait.Relax();
    }
    // Last in the queue: take the lock and clear the tail in one CAS (relaxed:
    // the acquire above already ordered us after the last holder).
    if ((val & kTailMask) == tail &&
        __atomic_compare_exchange_n(&val_, &val, kLocked, false,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      --t.count;
      return;
    }
    // Others queued behind us: set the locked byte (relaxed, as above; nobody
    // else may while the tail is non-zero), then make our successor the head.
    __atomic_store_n(LockedByte(), static_cast<uint8_t>(kLocked),
                     __ATOMIC_RELAXED);
    if (next == nullptr) {
      SpinWait wait;
      // Acquire: pairs with the successor's release store of our `next`.
      while ((next = node->next.load(std::memory_order_acquire)) == nullptr)
        wait.Relax();
    }
    // Release: the new head's node accesses follow ours.
    next->locked.store(1, std::memory_order_release);
    --t.count;
  }

  alignas(4) uint32_t val_ = 0;
};
static_assert(sizeof(QspinLock) == 4,
              "qspinlock is one 4-byte word, like Linux");

}  // namespace lockline
