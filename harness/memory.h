// Placement of shared structures (the lock, the zone, the LRU) by --mem policy,
// through hwloc memory binding. Thread-private memory is not allocated here:
// its thread first-touches it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "harness/family.h"

namespace lockline {

/// Frees memory from AllocShared.
struct SharedDeleter {
  std::size_t bytes = 0;
  void operator()(void* p) const;
};
using SharedPtr = std::unique_ptr<void, SharedDeleter>;

/// Validates a --mem value: first-touch | local | node:N | interleave. Throws
/// std::invalid_argument naming the value and the accepted forms.
void CheckMemPolicy(const std::string& policy);

/// Allocates `bytes` zeroed bytes aligned to at least 4096 (page), placed by
/// env.mem_policy: first-touch (plain mmap, zeroed by the calling main thread:
/// lands on its node), local (bound to the NUMA node of the point's first PU),
/// node:N (hwloc logical NUMA node N), interleave (across the NUMA nodes the
/// point spans). Falls back to first-touch, with a warning once per run, where
/// binding is not supported; the point records the policy that took effect.
/// Throws std::bad_alloc when the mapping fails.
SharedPtr AllocShared(std::size_t bytes, const PointEnv& env);

/// Constructs a T in shared memory placed by the policy; destroyed and freed by
/// the returned handle.
template <class T, class... Args>
std::shared_ptr<T> MakeShared(const PointEnv& env, Args&&... args) {
  SharedPtr mem = AllocShared(sizeof(T), env);
  T* obj = new (mem.get()) T(std::forward<Args>(args)...);
  auto holder = std::make_shared<SharedPtr>(std::move(mem));
  return std::shared_ptr<T>(obj, [holder](T* t) { t->~T(); });
}

}  // namespace lockline
