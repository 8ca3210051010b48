// CPU-specific primitives: spin-wait relax, a ns clock, cache-line constants.
// x86-64 first; aarch64 and a plain fallback compile without #ifdefs elsewhere.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <ctime>

namespace lockline {

/// Cache-line size, bytes, hot per-thread data is padded to (layouts take
/// theirs as a parameter: 64, 128, 256 are real).
inline constexpr std::size_t kCacheLine = 64;

/// Padding of singleton shared fields (a lock, a stop flag): 128 bytes, as
/// Intel's adjacent-line prefetcher moves lines in pairs. Per-thread slots
/// use --padding (padded_slots.h).
inline constexpr std::size_t kDestructiveLine = 128;

/// `bytes` rounded up to whole 4 KiB pages (what an anonymous mmap takes).
inline constexpr std::size_t RoundUpToPage(std::size_t bytes) {
  return (bytes + 4095) / 4096 * 4096;
}

/// PAUSE on x86-64 (~10-140 cycles), YIELD on aarch64, else a compiler barrier.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  asm volatile("" ::: "memory");
#endif
}

/// CLOCK_MONOTONIC in ns (vDSO, ~20 ns); never on an uncontended fast path.
inline uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

/// `ns` nanoseconds in seconds.
inline double NsToSeconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

/// `s` seconds in whole ns (truncated).
inline uint64_t SecondsToNs(double s) { return static_cast<uint64_t>(s * 1e9); }

/// Seconds from `from_ns` to `to_ns` (NowNs() clock; 0 if `to_ns` is earlier).
inline double SecondsBetween(uint64_t from_ns, uint64_t to_ns) {
  return to_ns > from_ns ? NsToSeconds(to_ns - from_ns) : 0.0;
}

/// The thread's CPU time in ns (CLOCK_THREAD_CPUTIME_ID); never on a fast path.
inline uint64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

/// ThreadRunDelayNs' answer where the kernel keeps no run delay.
inline constexpr uint64_t kNoRunDelay = UINT64_MAX;

/// Run delay, ns: runnable but not running, a sleep adds nothing (field 2 of
/// /proc/thread-self/schedstat, kernel/sched/stats.h sched_info_arrive), else
/// kNoRunDelay. A pread(2): read around windows, never inside one.
inline uint64_t ThreadRunDelayNs() {
  struct Fd {
    int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    ~Fd() {
      if (fd >= 0) close(fd);
    }
  };
  thread_local Fd f;
  if (f.fd < 0) return kNoRunDelay;
  char buf[96];
  const ssize_t n = pread(f.fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return kNoRunDelay;
  buf[n] = '\0';
  char* end = nullptr;
  std::strtoull(buf, &end, 10);  // field 1: time on the CPU, ns
  if (end == buf) return kNoRunDelay;
  char* end2 = nullptr;
  const unsigned long long delay = std::strtoull(end, &end2, 10);
  if (end2 == end) return kNoRunDelay;
  return static_cast<uint64_t>(delay);
}

/// after - before of two ThreadRunDelayNs readings; kNoRunDelay if either is.
inline uint64_t RunDelayBetween(uint64_t before, uint64_t after) {
  return before == kNoRunDelay || after == kNoRunDelay ? kNoRunDelay
                                                       : after - before;
}

}  // namespace lockline
