// Compile-only check that the lock headers build for aarch64 (Debian's
// g++-aarch64-linux-gnu, run by ctest as `aarch64-linux-gnu-g++
// -fsyntax-only`): the portable path (YIELD relax, glibc aarch64 pthread sizes,
// mixed-size atomics in the qspinlock) is compiled, not assumed. Not linked or
// run. lock_stat.h is left out: it pulls hwloc and nlohmann headers that have
// no cross-compiled copies here; its lock path is templates over the same lock
// calls.
#include "harness/locks/all_locks.h"

#if !defined(__aarch64__)
#error "this file is compiled with the aarch64 cross compiler only"
#endif

namespace lockline {

// Instantiates lock, try_lock and unlock of every lock in the table.
int CheckAllLocks() {
  int acquired = 0;
  ForEachLock([&]<class L>() {
    static_assert(LockAlgorithm<L>);
    L lock;
    lock.lock();
    lock.unlock();
    if (lock.try_lock()) {
      ++acquired;
      lock.unlock();
    }
  });
  return acquired + static_cast<int>(LockNames().size()) +
         (WithLock("mcs", []<class L>() {}) ? 1 : 0);
}

}  // namespace lockline
