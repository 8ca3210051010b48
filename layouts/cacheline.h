// Cache-line geometry shared by every layout model: the named line-size
// parameter, how many lines an object spans at a given offset, and placing an
// object at a chosen byte offset from a line boundary (so "fits in two lines"
// versus "spans three" is an explicit variant).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace lockline {

/// The cache-line sizes the layouts are instantiated for (bytes). 64 is x86 and
/// most ARM cores; 128 is POWER, some ARM server parts, and effectively Intel
/// with adjacent-line prefetch (which pulls lines in 128-byte pairs). Padding
/// in every model is a template parameter taking one of these, never a hidden
/// default (harness/machine/cpu.h's kCacheLine is the harness's own padding).
inline constexpr std::size_t kCacheLine64 = 64;
inline constexpr std::size_t kCacheLine128 = 128;

/// Number of `line`-byte cache lines touched by an object of `size` bytes that
/// starts `offset` bytes past a line boundary (offset may exceed line; only
/// offset % line matters). 0 for an empty object. Example: 136 bytes at offset
/// 0 span 3 lines of 64, 128 bytes span 2 at offset 0 and 3 at offset 8.
constexpr int LinesSpanned(std::size_t offset, std::size_t size,
                           std::size_t line) {
  if (size == 0 || line == 0) return 0;
  const std::size_t start = offset % line;
  return static_cast<int>((start + size + line - 1) / line);
}

static_assert(LinesSpanned(0, 128, 64) == 2,
              "a 128-byte object at a boundary fills 2 lines");
static_assert(LinesSpanned(8, 128, 64) == 3,
              "shifted by 8 bytes it straddles a third line");
static_assert(LinesSpanned(56, 8, 64) == 1,
              "the last word of a line stays in that line");

/// Returns the first address p inside [buffer, buffer + buffer_size) with
/// p % line == offset such that [p, p + object_size) still fits in the buffer,
/// or nullptr when none does. `line` must be a power of two and offset < line.
/// The caller constructs the object there (placement new) and owns the buffer.
inline void* AlignedWithOffset(void* buffer, std::size_t buffer_size,
                               std::size_t line, std::size_t offset,
                               std::size_t object_size) {
  if (line == 0 || (line & (line - 1)) != 0 || offset >= line) return nullptr;
  const auto base = reinterpret_cast<std::uintptr_t>(buffer);
  const std::uintptr_t boundary =
      (base + line - 1) & ~(std::uintptr_t{line} - 1);
  std::uintptr_t p = boundary + offset;
  if (p >= base + line)
    p -= line;  // an earlier slot inside the buffer may already qualify
  if (p + object_size > base + buffer_size) return nullptr;
  return reinterpret_cast<void*>(p);
}

}  // namespace lockline
