// CPU-specific primitives behind small portable functions: the spin-wait relax,
// a monotonic nanosecond clock, and the cache-line size constants. x86-64
// first; aarch64 and a plain fallback compile so the rest of lockline never
// needs an #ifdef.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
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
/// this constant but the run's --padding (harness/machine/padded_slots.h).
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

/// The calling thread's CPU time in ns (CLOCK_THREAD_CPUTIME_ID, vDSO), for
/// ops per CPU-second; never on a timed fast path.
inline uint64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

/// ThreadRunDelayNs' answer where the kernel keeps no run delay.
inline constexpr uint64_t kNoRunDelay = UINT64_MAX;

/// The calling thread's run delay in ns: the time it has spent runnable on a
/// run queue without running (the second field of /proc/thread-self/schedstat;
/// Documentation/scheduler/sched-stats.rst, kernel/sched/stats.h
/// sched_info_arrive). That is preemption and wake-up latency, not a voluntary
/// sleep: a pthread_mutex waiter asleep in futex_wait adds nothing until it is
/// woken. kNoRunDelay where the kernel has no schedstat (CONFIG_SCHED_INFO off)
/// or /proc is not mounted. A pread(2) of a descriptor the thread keeps open
/// for its lifetime: a syscall, read around windows, never inside one.
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
