// The interface every lock algorithm implements (the table: all_locks.h).
#pragma once

#include <concepts>

namespace lockline {

/// A lock algorithm: BasicLockable plus try_lock, kName (row keys) and
/// kDescription. The object is only the lock word(s); queue nodes live in
/// thread-locals, as Linux's per-CPU qnodes. Not copyable.
template <class L>
concept LockAlgorithm = std::default_initializable<L> && requires(L& l) {
  {l.lock()};
  {l.unlock()};
  { l.try_lock() } -> std::same_as<bool>;
  { L::kName } -> std::convertible_to<const char*>;
  { L::kDescription } -> std::convertible_to<const char*>;
};

}  // namespace lockline
