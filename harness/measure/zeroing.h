// Page-zeroing methods (prezero, zeroing): memset, `rep stosb`, MOVNTDQ +
// SFENCE (bypassing caches), AMD CLZERO (CPUID Fn8000_0008 EBX[0], AMD APM
// vol. 3). Off x86-64 all but clzero fall back to memset; unsupported is a
// skipped row, never a crash.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <emmintrin.h>
#endif

namespace lockline {

/// How a page (or any 64-byte-aligned buffer) is filled.
enum class ZeroMethod { kMemset, kRepStosb, kNonTemporal, kClzero };

/// The CPU features the methods depend on (tests build their own).
struct ZeroingCpu {
  bool x86_64 = false;  ///< rep stosb and nt stores are not memset
  bool clzero = false;  ///< CPUID Fn8000_0008 EBX[0] (AMD Zen and later)
};

/// The running CPU's features (CPUID, cached after the first call).
inline const ZeroingCpu& DetectZeroingCpu() {
  static const ZeroingCpu cpu = [] {
    ZeroingCpu c;
#if defined(__x86_64__)
    c.x86_64 = true;
    unsigned a = 0, b = 0, cx = 0, d = 0;
    // Leaf 0x80000000: the highest extended leaf, which must reach 0x80000008.
    if (__get_cpuid(0x80000000u, &a, &b, &cx, &d) && a >= 0x80000008u &&
        __get_cpuid(0x80000008u, &a, &b, &cx, &d)) {
      c.clzero = (b & 1u) != 0;
    }
#endif
    return c;
  }();
  return cpu;
}

/// Names used in row keys: memset, rep_stosb, nt_store, clzero.
inline const char* ZeroMethodName(ZeroMethod m) {
  static const char* const kNames[] = {"memset", "rep_stosb", "nt_store",
                                       "clzero"};
  const auto i = static_cast<std::size_t>(m);
  return i < std::size(kNames) ? kNames[i] : "?";
}

/// Every method, in report order.
inline std::vector<ZeroMethod> AllZeroMethods() {
  return {ZeroMethod::kMemset, ZeroMethod::kRepStosb, ZeroMethod::kNonTemporal,
          ZeroMethod::kClzero};
}

/// "" when `m` can fill with `value` on `cpu`, else why not (clzero only
/// writes zeros, and only where the CPU has it). The families set it as their
/// variants' `unavailable` (skipped at plan time); a workload built anyway
/// (tests) runs nothing and fails Verify with "skipped: " and the reason.
inline std::string ZeroMethodUnsupportedReason(
    ZeroMethod m, uint8_t value, const ZeroingCpu& cpu = DetectZeroingCpu()) {
  if (m != ZeroMethod::kClzero) return "";
  if (!cpu.clzero)
    return "clzero requested but this CPU lacks it (CPUID Fn8000_0008 EBX[0] "
           "= 0; AMD Zen and later have it)";
  if (value != 0) return "clzero writes only zeros (no pattern fill)";
  return "";
}

/// False when memset stands in for `m`.
inline bool FillMethodIsNative(ZeroMethod m,
                               const ZeroingCpu& cpu = DetectZeroingCpu()) {
  return m == ZeroMethod::kMemset ||
         (m == ZeroMethod::kClzero ? cpu.clzero : cpu.x86_64);
}

namespace zeroing_detail {

#if defined(__x86_64__)
inline void RepStosb(void* dst, std::size_t bytes, uint8_t value) {
  asm volatile("rep stosb" : "+D"(dst), "+c"(bytes) : "a"(value) : "memory");
}

/// `store(p)` on each whole `Align`-byte block of [dst, dst+bytes), memset
/// with `value` for the partial head and tail, then SFENCE: the lock release
/// that publishes the page orders neither non-temporal stores nor CLZERO.
template <std::size_t Align, class Store>
inline void FillAligned(void* dst, std::size_t bytes, uint8_t value,
                        Store store) {
  auto* p = static_cast<unsigned char*>(dst);
  const std::size_t head =
      std::min(bytes, (Align - (reinterpret_cast<uintptr_t>(p) & (Align - 1))) &
                          (Align - 1));
  std::memset(p, value, head);
  p += head;
  bytes -= head;
  const std::size_t n = bytes / Align;
  for (std::size_t i = 0; i < n; ++i) store(p + i * Align);
  std::memset(p + n * Align, value, bytes - n * Align);
  _mm_sfence();
}

/// MOVNTDQ over the aligned part (bypassing the caches).
inline void NonTemporalFill(void* dst, std::size_t bytes, uint8_t value) {
  const __m128i v = _mm_set1_epi8(static_cast<char>(value));
  FillAligned<16>(dst, bytes, value, [&](unsigned char* q) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(q), v);
  });
}

/// CLZERO per whole line (as bytes: old assemblers lack it).
inline void Clzero(void* dst, std::size_t bytes) {
  FillAligned<64>(dst, bytes, 0, [](unsigned char* q) {
    asm volatile(".byte 0x0f, 0x01, 0xfc" ::"a"(q) : "memory");
  });
}
#endif

}  // namespace zeroing_detail

/// Fills [dst, dst+bytes) with `value` by `m` (an unsupported clzero: memset).
inline void FillWith(ZeroMethod m, void* dst, std::size_t bytes,
                     uint8_t value) {
#if defined(__x86_64__)
  switch (m) {
    case ZeroMethod::kMemset:
      break;
    case ZeroMethod::kRepStosb:
      zeroing_detail::RepStosb(dst, bytes, value);
      return;
    case ZeroMethod::kNonTemporal:
      zeroing_detail::NonTemporalFill(dst, bytes, value);
      return;
    case ZeroMethod::kClzero:
      if (value == 0 && DetectZeroingCpu().clzero) {
        zeroing_detail::Clzero(dst, bytes);
        return;
      }
      break;
  }
#endif
  std::memset(dst, value, bytes);
}

inline void ZeroWith(ZeroMethod m, void* dst, std::size_t bytes) {
  FillWith(m, dst, bytes, 0);
}

/// True when every byte of [p, p+bytes) is zero (bytes a multiple of 8).
inline bool AllZero(const void* p, std::size_t bytes) {
  const auto* w = static_cast<const uint64_t*>(p);
  uint64_t acc = 0;
  for (std::size_t i = 0; i < bytes / 8; ++i) acc |= w[i];
  return acc == 0;
}

}  // namespace lockline
