// The one small interface every lock algorithm implements (see all_locks.h for
// the table).
#pragma once

#include <concepts>

namespace lockline {

/// A lock algorithm: BasicLockable plus try_lock, a short name used in row keys
/// ("ticket") and a human description. The object itself is only the lock
/// word(s) (its sizeof is what the layouts place); queue locks keep per-thread
/// queue nodes outside the lock (thread-local, as Linux keeps per-CPU qnodes),
/// so lock()/unlock() need no extra argument. Default-constructible in the
/// unlocked state; not copyable.
template <class L>
concept LockAlgorithm = std::default_initializable<L> && requires(L& l) {
  {l.lock()};
  {l.unlock()};
  { l.try_lock() } -> std::same_as<bool>;
  { L::kName } -> std::convertible_to<const char*>;
  { L::kDescription } -> std::convertible_to<const char*>;
};

}  // namespace lockline
