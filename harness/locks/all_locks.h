// The table of lock algorithms: every family and test iterates it, so a new
// lock is one type (its own header) plus one row here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "harness/locks/lock.h"
#include "harness/locks/mcs_lock.h"
#include "harness/locks/pthread_locks.h"
#include "harness/locks/qspin_lock.h"
#include "harness/locks/tas_lock.h"
#include "harness/locks/ticket_lock.h"

namespace lockline {

/// The lock table, in the order rows and tests list them.
template <class... Ls>
struct LockList {};
using AllLocks = LockList<TasLock, TtasLock, TicketLock, McsLock, QspinLock,
                          PthreadMutexLock, PthreadSpinLock>;

namespace lock_table_detail {
template <class F, LockAlgorithm... Ls>
void ForEach(F& f, LockList<Ls...>) {
  (f.template operator()<Ls>(), ...);
}
template <class F, LockAlgorithm... Ls>
bool With(std::string_view name, F& f, LockList<Ls...>) {
  return ((name == Ls::kName ? (f.template operator()<Ls>(), true) : false) ||
          ...);
}
}  // namespace lock_table_detail

/// Calls `f.template operator()<L>()` for every lock L, in table order.
template <class F>
void ForEachLock(F&& f) {
  lock_table_detail::ForEach(f, AllLocks{});
}

/// The kName of every lock, in table order.
inline std::vector<std::string> LockNames() {
  std::vector<std::string> names;
  ForEachLock([&]<class L>() { names.emplace_back(L::kName); });
  return names;
}

/// Calls `f.template operator()<L>()` for the lock named `name`; false if none.
template <class F>
bool WithLock(std::string_view name, F&& f) {
  return lock_table_detail::With(name, f, AllLocks{});
}

/// As WithLock over a LockList subset (only its locks are compiled).
template <class List, class F>
bool WithLockIn(std::string_view name, F&& f) {
  return lock_table_detail::With(name, f, List{});
}

/// The kName of every lock of `List` (a LockList), in its order.
template <LockAlgorithm... Ls>
std::vector<std::string> LockNamesOf(LockList<Ls...>) {
  return {std::string(Ls::kName)...};
}

}  // namespace lockline
