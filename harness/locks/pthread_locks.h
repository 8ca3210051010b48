// glibc's pthread mutex and spinlock behind the LockAlgorithm interface.
#pragma once

#include <pthread.h>

namespace lockline {

/// pthread_mutex_t with default attributes (PTHREAD_MUTEX_NORMAL on glibc): a
/// futex word with lock acquire by CAS, sleeping in the kernel under contention
/// (FUTEX_WAIT), unlock by atomic exchange plus FUTEX_WAKE when there were
/// waiters. The user-space baseline for "sleep, do not spin"; its hand-off
/// costs a wake-up (microseconds), not a line transfer.
///
/// Lock word: glibc's struct __pthread_mutex_s (int __lock; unsigned __count;
/// int __owner; unsigned __nusers; int __kind; ...); only __lock (0 free, 1
/// locked, 2 locked with waiters) moves on the fast path. Memory ordering is
/// glibc's: acquire CAS in lock, release exchange in unlock (nptl
/// lowlevellock.h). Invariant: __lock != 0 exactly while held. Not fair
/// (barging allowed). Who should use it: application code; the default choice.
/// Size: 40 bytes on x86-64 glibc, 48 on aarch64 glibc.
class PthreadMutexLock {
 public:
  static constexpr const char* kName = "pthread_mutex";
  static constexpr const char* kDescription =
      "glibc pthread_mutex_t, default attributes (futex-based, sleeps when "
      "contended)";

  PthreadMutexLock() = default;
  PthreadMutexLock(const PthreadMutexLock&) = delete;
  PthreadMutexLock& operator=(const PthreadMutexLock&) = delete;
  ~PthreadMutexLock() { pthread_mutex_destroy(&m_); }

  void lock() { pthread_mutex_lock(&m_); }
  bool try_lock() { return pthread_mutex_trylock(&m_) == 0; }
  void unlock() { pthread_mutex_unlock(&m_); }

 private:
  pthread_mutex_t m_ = PTHREAD_MUTEX_INITIALIZER;
};
static_assert(sizeof(PthreadMutexLock) == sizeof(pthread_mutex_t),
              "only the mutex");
#if defined(__x86_64__) && defined(__GLIBC__)
static_assert(sizeof(PthreadMutexLock) == 40,
              "glibc x86-64 pthread_mutex_t is 40 bytes");
#endif

/// pthread_spinlock_t (glibc): a 4-byte int; lock is an atomic exchange (x86:
/// `lock xchg`, generic: CAS) followed by a read-only spin with the CPU relax
/// hint, i.e. a TTAS lock. It never yields, so in oversubscribed runs a waiter
/// can burn its time slice while the holder is preempted: kept as glibc ships
/// it, since that behaviour is what users of it get.
///
/// Lock word (4 bytes): 0 = free, non-zero = locked. Ordering is glibc's:
/// acquire on the successful exchange / CAS, release store in unlock.
/// Invariant: word != 0 exactly while held. Not fair.
/// Who should use it: almost nobody in user space (see Linus Torvalds on
/// user-space spinlocks, 2020); here as the library's own spinlock baseline.
/// Size: 4 bytes.
class PthreadSpinLock {
 public:
  static constexpr const char* kName = "pthread_spin";
  static constexpr const char* kDescription =
      "glibc pthread_spinlock_t (4-byte TTAS spinlock, never yields)";

  PthreadSpinLock() { pthread_spin_init(&s_, PTHREAD_PROCESS_PRIVATE); }
  PthreadSpinLock(const PthreadSpinLock&) = delete;
  PthreadSpinLock& operator=(const PthreadSpinLock&) = delete;
  ~PthreadSpinLock() { pthread_spin_destroy(&s_); }

  void lock() { pthread_spin_lock(&s_); }
  bool try_lock() { return pthread_spin_trylock(&s_) == 0; }
  void unlock() { pthread_spin_unlock(&s_); }

 private:
  pthread_spinlock_t s_;
};
static_assert(sizeof(PthreadSpinLock) == 4,
              "pthread_spinlock_t is a 4-byte int");

}  // namespace lockline
