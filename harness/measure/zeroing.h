// Page-zeroing methods (prezero, zeroing): memset, `rep stosb`, MOVNTDQ +
// SFENCE (bypassing caches), AMD CLZERO (CPUID Fn8000_0008 EBX[0], AMD APM
// vol. 3). Off x86-64 all but clzero fall back to memset; unsupported is a
// skipped row, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
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
  bool x86_64 = false;  ///< rep stosb and non-temporal stores are real
                        ///< instructions, not memset
  bool clzero = false;  ///< CPUID Fn8000_0008 EBX[0] (AMD Zen and later)
};

/// The running CPU's features (CPUID, cached after the first call).
inline const ZeroingCpu& DetectZeroingCpu() {
  static const ZeroingCpu cpu = [] {
    ZeroingCpu c;
#if defined(__x86_64__)
    c.x86_64 = true;
    unsigned a = 0, b = 0, cx = 0, d = 0;
    // Leaf 0x80000000 gives the highest extended leaf; 0x80000008 must exist
    // before it is read.
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
  switch (m) {
    case ZeroMethod::kMemset:
      return "memset";
    case ZeroMethod::kRepStosb:
      return "rep_stosb";
    case ZeroMethod::kNonTemporal:
      return "nt_store";
    case ZeroMethod::kClzero:
      return "clzero";
  }
  return "?";
}

/// Every method, in report order.
inline std::vector<ZeroMethod> AllZeroMethods() {
  return {ZeroMethod::kMemset, ZeroMethod::kRepStosb, ZeroMethod::kNonTemporal,
          ZeroMethod::kClzero};
}

/// "" when `m` can fill with `value` on `cpu`, else why not (clzero only
/// writes zeros, and only where the CPU has it).
inline std::string ZeroMethodUnsupportedReason(
    ZeroMethod m, uint8_t value, const ZeroingCpu& cpu = DetectZeroingCpu()) {
  if (m != ZeroMethod::kClzero) return "";
  if (!cpu.clzero) {
    return "skipped: clzero requested but this CPU lacks it (CPUID Fn8000_0008 "
           "EBX[0] = 0; "
           "AMD Zen and later have it)";
  }
  if (value != 0) return "skipped: clzero writes only zeros (no pattern fill)";
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

/// MOVNTDQ over the aligned part, memset for head/tail, then SFENCE: the lock
/// release that publishes the page does not order non-temporal stores.
inline void NonTemporalFill(void* dst, std::size_t bytes, uint8_t value) {
  auto* p = static_cast<unsigned char*>(dst);
  std::size_t head = (16 - (reinterpret_cast<uintptr_t>(p) & 15)) & 15;
  if (head > bytes) head = bytes;
  std::memset(p, value, head);
  p += head;
  bytes -= head;
  const __m128i v = _mm_set1_epi8(static_cast<char>(value));
  std::size_t n = bytes / 16;
  auto* q = reinterpret_cast<__m128i*>(p);
  for (std::size_t i = 0; i < n; ++i) _mm_stream_si128(q + i, v);
  std::memset(p + n * 16, value, bytes - n * 16);
  _mm_sfence();
}

/// CLZERO per whole line (as bytes: old assemblers lack it), memset for
/// partial lines, SFENCE (CLZERO is weakly ordered).
inline void Clzero(void* dst, std::size_t bytes) {
  auto* p = static_cast<unsigned char*>(dst);
  std::size_t head = (64 - (reinterpret_cast<uintptr_t>(p) & 63)) & 63;
  if (head > bytes) head = bytes;
  std::memset(p, 0, head);
  p += head;
  bytes -= head;
  std::size_t n = bytes / 64;
  for (std::size_t i = 0; i < n; ++i) {
    asm volatile(".byte 0x0f, 0x01, 0xfc" ::"a"(p + i * 64) : "memory");
  }
  std::memset(p + n * 64, 0, bytes - n * 64);
  _mm_sfence();
}
#endif

}  // namespace zeroing_detail

/// Fills [dst, dst+bytes) with `value` by `m` (checked with
/// ZeroMethodUnsupportedReason; an unsupported clzero falls back to memset).
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

/// Zeroes [dst, dst+bytes) with `m` (FillWith with value 0).
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
