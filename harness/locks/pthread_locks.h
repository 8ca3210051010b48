// glibc's pthread mutex and spinlock behind the LockAlgorithm interface.
#pragma once

#include <pthread.h>

namespace lockline {

/// pthread_mutex_t, default attributes: a futex word (glibc __lock: 0 free, 1
/// locked, 2 with waiters; acquire CAS, release exchange + FUTEX_WAKE, nptl
/// lowlevellock.h) that sleeps when contended, so a hand-off costs a wake-up,
/// not a line transfer. Not fair. 40 bytes on x86-64 glibc.
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

/// pthread_spinlock_t (glibc): a 4-byte TTAS lock (exchange, read-only spin
/// with the relax hint, release store); never yields (as glibc). Not fair.
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
