// CPU-specific primitives behind small portable functions: the spin-wait relax,
// a monotonic nanosecond clock, and the cache-line size constants. x86-64
// first; aarch64 and a plain fallback compile so the rest of lockline never
// needs an #ifdef.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>

namespace lockline {

/// Cache-line size, bytes, that lockline pads hot per-thread data to. 64 on
/// x86-64 and most aarch64; layouts take their line size as an explicit
/// parameter instead (64, 128, 256 are real).
inline constexpr std::size_t kCacheLine = 64;

/// Padding unit for singleton shared fields that must never share a line with
/// anything else (one lock, one counter, a stop flag): 128 bytes, because
/// Intel's adjacent-line prefetcher moves lines in pairs and POWER / some ARM
/// parts have 128-byte lines. The distance between per-thread slots is not
/// this constant but the run's --padding (harness/padded_slots.h).
inline constexpr std::size_t kDestructiveLine = 128;

/// One spin-wait relax: PAUSE on x86-64 (~10-140 cycles depending on the core),
/// YIELD on aarch64, a compiler barrier elsewhere. Call it in every busy-wait
/// loop.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  asm volatile("" ::: "memory");
#endif
}

/// Monotonic time in ns (CLOCK_MONOTONIC through the vDSO, ~20 ns per call).
/// Used for windows, probes and slow-path lock timestamps; never on an
/// uncontended fast path.
inline uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

/// The calling thread's CPU time in ns (CLOCK_THREAD_CPUTIME_ID): what it ran,
/// not what it waited. For windows' ops per CPU-second (harness/team.h,
/// harness/build_duet.h); a syscall-free vDSO read on Linux, still never on a
/// timed fast path.
inline uint64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace lockline
