// Cache-line geometry of the layout models: line sizes, lines spanned at an
// offset, and placing an object at a byte offset from a line boundary.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockline {

/// Line sizes the layouts are instantiated for: 64 (x86, most Arm), 128
/// (POWER, some Arm servers, Intel's adjacent-line prefetch pairs); always
/// an explicit template parameter.
inline constexpr std::size_t kCacheLine64 = 64;
inline constexpr std::size_t kCacheLine128 = 128;

/// Lines touched by `size` bytes at `offset` (mod line) past a boundary.
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

/// The first p in the buffer with p % line == offset and room for the
/// object, or nullptr (`line` a power of two, offset < line).
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
