// Helpers the bench/ families share: Ratio for rate and share metrics, MapAnon
// for anonymous mappings.
#pragma once

#include <sys/mman.h>

#include <cstddef>

namespace lockline {

/// a / b, or 0 when b is not positive (e.g. a rate over an empty window).
inline double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

/// A read-write anonymous mapping of `bytes` (MAP_ANONYMOUS | `flags`), or
/// nullptr with errno set (async-signal-safe).
inline void* MapAnon(std::size_t bytes, int flags = MAP_PRIVATE) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | flags,
                 -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace lockline
