// fault's model: how this kernel makes anonymous memory present, one task's
// work on its share of a point's mapping, and the fault counts each way must
// produce (getrusage minor faults; mm_account_fault in mm/memory.c, Linux
// 5.x-6.x). Modes: plain 4 KiB write faults (do_anonymous_page: allocate,
// clear_page, map), MAP_POPULATE and MADV_POPULATE_WRITE (the kernel faults
// the pages in itself, GUP), THP (one 2 MiB fault and zeroing per huge page)
// and read faults (the shared zero page where the kernel maps it). Only
// async-signal-safe calls in RunTask / RunPasses: a forked child runs them
// (bench/child_task.h). The experiment is bench/fault.cpp.
#pragma once

#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "bench/child_task.h"
#include "bench/common.h"
#include "harness/machine/restore.h"
#include "harness/measure/kernel_probe.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14 uapi value, for older libc headers
#endif

namespace lockline::fault_bench {

inline constexpr std::size_t kPage = 4096;
inline constexpr std::size_t kHugePage =
    2u << 20;  // PMD-sized THP on x86-64 and 4K-page arm64
inline constexpr std::size_t kPagesPerHuge = kHugePage / kPage;

/// Fault-count tolerance per task, beyond the variant's expectation: faults on
/// the stack, on libc data and (processes) copy-on-write of the parent's pages
/// the child writes.
inline constexpr uint64_t kSlackFaultsPerTask = 256;
/// Passes per window: enough for kTargetFaults faults (THP: one per 2 MiB),
/// at most kMaxPasses. A pass faults the whole share in; MADV_DONTNEED (or
/// munmap) empties it again before the next, outside the timed part.
inline constexpr uint64_t kTargetFaults = 16384;
inline constexpr int kMaxPasses = 16;

/// How pages become present.
enum class Mode {
  kPlain,  ///< MADV_NOHUGEPAGE, then touch: one fault per 4 KiB page, zeroed in
           ///< the fault
  kMapPopulate,    ///< mmap(MAP_POPULATE): the kernel faults the share in at
                   ///< mapping time
  kPopulateWrite,  ///< MADV_POPULATE_WRITE (5.14+) on a 4 KiB-page mapping,
                   ///< then touch
  kThp,   ///< MADV_HUGEPAGE: one fault per 2 MiB when the kernel grants huge
          ///< pages
  kRead,  ///< MADV_NOHUGEPAGE, then read one byte per page: the shared zero
          ///< page is mapped, nothing allocated or zeroed
};

inline const char* ModeName(Mode m) {
  static const char* const kNames[] = {"plain", "map_populate",
                                       "populate_write", "thp", "read"};
  return kNames[static_cast<int>(m)];
}

/// What one task measured in one or more windows (getrusage: RUSAGE_THREAD
/// for threads, the child's RUSAGE_SELF). A plain struct: children send it.
struct TaskResult {
  double user_s = 0, sys_s = 0;
  double wall_s = 0;  ///< summed wall time of the timed phases
  /// Summed wall time of whole passes, emptying the share included: the
  /// loop page_fault1 times (mmap, touch, munmap).
  double loop_s = 0;
  int passes = 0;
  uint64_t pages = 0;            ///< 4 KiB pages made present
  uint64_t populate_faults = 0;  ///< minor faults while mapping / populating
  uint64_t touch_faults = 0;     ///< minor faults while touching
  char error[160] = {};          ///< failing call, or empty

  void Add(const TaskResult& o) {
    kernel::AddFields(*this, o, &TaskResult::user_s, &TaskResult::sys_s,
                      &TaskResult::wall_s, &TaskResult::loop_s,
                      &TaskResult::passes, &TaskResult::pages,
                      &TaskResult::populate_faults, &TaskResult::touch_faults);
    child_task::KeepFirstError(error, o.error);
  }
};

/// CLOCK_MONOTONIC bounds of the timed phases of one window, one per pass
/// (passes beyond kMaxPasses extend the last one). A plain struct: children
/// send it through a pipe.
struct Phases {
  int n = 0;
  uint64_t begin_ns[kMaxPasses] = {}, end_ns[kMaxPasses] = {};
  void Push(uint64_t begin, uint64_t end) {
    if (n == kMaxPasses) {
      end_ns[n - 1] = end;
      return;
    }
    begin_ns[n] = begin;
    end_ns[n] = end;
    ++n;
  }
  /// True when `t_ns` lies in one of the phases.
  bool Contains(uint64_t t_ns) const {
    for (int i = 0; i < n; ++i)
      if (t_ns >= begin_ns[i] && t_ns <= end_ns[i]) return true;
    return false;
  }
};

/// One task's window: what it measured and when its timed phases ran.
struct WindowWork {
  TaskResult r;
  Phases phases;
};

/// /sys/kernel/mm/transparent_hugepage/enabled's selected word ("always",
/// "madvise", "never"), or "unavailable" when the file is missing (kernel
/// without THP).
inline std::string ThpEnabled() {
  const std::string s =
      ReadSmallFile("/sys/kernel/mm/transparent_hugepage/enabled");
  const auto a = s.find('['), b = s.find(']');
  if (a == std::string::npos || b == std::string::npos || b < a)
    return "unavailable";
  return s.substr(a + 1, b - a - 1);
}

/// True when MADV_HUGEPAGE can give huge pages here (THP compiled in and not
/// "never").
inline bool ThpUsable() {
  std::string s = ThpEnabled();
  return s == "always" || s == "madvise";
}

/// Anonymous private mapping of `bytes` aligned to 2 MiB (so MADV_HUGEPAGE can
/// use PMD pages and task shares start on huge-page boundaries). Returns
/// nullptr on failure (errno set).
inline char* MapAligned(std::size_t bytes, int extra_flags = 0) {
  // Reserve bytes + 2 MiB of address space without memory, then map the aligned
  // part over it (MAP_FIXED), so MAP_POPULATE faults in exactly `bytes` and
  // nothing that is trimmed later.
  const std::size_t len = bytes + kHugePage;
  void* r = mmap(nullptr, len, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return nullptr;
  auto base = reinterpret_cast<uintptr_t>(r);
  uintptr_t aligned = (base + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
  void* p = mmap(
      reinterpret_cast<void*>(aligned), bytes, PROT_READ | PROT_WRITE,
      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED | extra_flags, -1,
      0);
  if (p == MAP_FAILED) {
    const int err = errno;
    munmap(r, len);
    errno = err;
    return nullptr;
  }
  if (aligned > base) munmap(r, aligned - base);
  uintptr_t end = base + len, want_end = aligned + bytes;
  if (end > want_end) munmap(reinterpret_cast<void*>(want_end), end - want_end);
  return reinterpret_cast<char*>(aligned);
}

/// Writes one byte per 4 KiB page of [p, p+bytes) (a store: a read would map
/// the zero page).
inline void TouchPages(char* p, std::size_t bytes) {
  for (std::size_t off = 0; off < bytes; off += kPage)
    *reinterpret_cast<volatile char*>(p + off) = 1;
}

/// Reads one byte per 4 KiB page of [p, p+bytes): on untouched anonymous
/// memory each read faults in the shared zero page. Returns the bytes' sum
/// (0), so the reads cannot be dropped.
inline unsigned ReadPages(const char* p, std::size_t bytes) {
  unsigned sum = 0;
  for (std::size_t off = 0; off < bytes; off += kPage) {
    sum += static_cast<unsigned char>(
        *reinterpret_cast<const volatile char*>(p + off));
  }
  return sum;
}

/// Whether a read fault of untouched private anonymous memory maps the shared
/// zero page on this kernel (do_anonymous_page in mm/memory.c: "Use the
/// zero-page for reads" unless mm_forbids_zeropage()). Guest kernels may
/// forbid it: this project's PVM guest boots with pvm_no_zero_page=1, and a
/// read fault then allocates and zeroes a page like a write.
struct ZeroPageProbe {
  bool known = false;    ///< the probe could map and read its smaps
  bool mapped = true;    ///< reads mapped the zero page (no page allocated)
  std::string evidence;  ///< what was read, for the row
};

/// Reads one byte of each 4 KiB page of a fresh 1 MiB THP-off mapping and
/// takes the mapping's "Anonymous:" from /proc/self/smaps (0 kB: the zero
/// page). Measured once per process; a failed probe is `known` false and
/// assumes the zero page.
inline const ZeroPageProbe& ReadFaultZeroPage() {
  static const ZeroPageProbe probe = [] {
    ZeroPageProbe z;
    constexpr std::size_t kBytes = 1u << 20;
    void* m = MapAnon(kBytes);
    if (m == nullptr) {
      z.evidence = std::string("probe mmap failed: ") + std::strerror(errno);
      return z;
    }
    madvise(m, kBytes, MADV_NOHUGEPAGE);
    const unsigned sum = ReadPages(static_cast<const char*>(m), kBytes);
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool in_vma = false;
    long anon_kb = -1;
    while (std::getline(smaps, line)) {
      unsigned long lo = 0, hi = 0;
      char dash = 0;
      std::istringstream ls(line);
      if (ls >> std::hex >> lo >> dash >> hi && dash == '-') {
        in_vma = lo == reinterpret_cast<uintptr_t>(m);
        continue;
      }
      if (in_vma && line.rfind("Anonymous:", 0) == 0) {
        anon_kb = std::strtol(line.c_str() + 10, nullptr, 10);
        break;
      }
    }
    munmap(m, kBytes);
    if (anon_kb < 0 || sum != 0) {
      z.evidence = "probe could not read its mapping in /proc/self/smaps";
      return z;
    }
    z.known = true;
    z.mapped = anon_kb == 0;
    z.evidence = "reading 1024 KiB of untouched anonymous memory left " +
                 std::to_string(anon_kb) + " KiB Anonymous in /proc/self/smaps";
    return z;
  }();
  return probe;
}

/// True when faults of mode `m` allocate and zero pages: every mode but
/// read, and read too where the kernel maps no zero page.
inline bool ModeZeroes(Mode m) {
  return m != Mode::kRead || !ReadFaultZeroPage().mapped;
}

/// The advice a mode gives before touching (THP off for all but kThp, so every
/// other mode zeroes 4 KiB pages whatever the system-wide THP setting).
inline int AdviceFor(Mode m) {
  return m == Mode::kThp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE;
}

/// Faults per pass of `bytes` in mode `m` (THP: one per 2 MiB when usable).
inline uint64_t FaultsPerPass(Mode m, std::size_t bytes) {
  const uint64_t pages = bytes / kPage;
  return m == Mode::kThp && ThpUsable()
             ? std::max<uint64_t>(1, pages / kPagesPerHuge)
             : pages;
}

/// Passes per window for a point: ceil(kTargetFaults / FaultsPerPass),
/// clamped to [1, kMaxPasses].
inline int PassesFor(Mode m, std::size_t bytes) {
  const uint64_t per = FaultsPerPass(m, bytes);
  const uint64_t n = (kTargetFaults + per - 1) / per;
  return static_cast<int>(
      std::clamp<uint64_t>(n, 1, static_cast<uint64_t>(kMaxPasses)));
}

/// CLOCK_MONOTONIC in ns (async-signal-safe).
inline uint64_t MonotonicNs() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000u +
         static_cast<uint64_t>(t.tv_nsec);
}

/// One task's work on its share: make `bytes` present by `mode` and touch
/// them, measuring rusage (`who`) around the populate and touch phases.
/// `share` is the task's part of a shared mapping already advised, or nullptr
/// to map it here (returned in *mapped). Async-signal-safe. The timed phase's
/// CLOCK_MONOTONIC bounds are pushed to *phases.
inline TaskResult RunTask(Mode mode, char* share, std::size_t bytes, int who,
                          char** mapped, Phases* phases) {
  TaskResult r;
  rusage r0{}, r1{}, r2{};
  const uint64_t w0 = MonotonicNs();
  getrusage(who, &r0);
  char* p = share;
  if (p == nullptr) {
    p = MapAligned(bytes, mode == Mode::kMapPopulate ? MAP_POPULATE : 0);
    if (p == nullptr) {
      std::snprintf(r.error, sizeof(r.error), "mmap of %zu bytes failed: %s",
                    bytes, std::strerror(errno));
      return r;
    }
    *mapped = p;
    // map_populate has already faulted its pages in; advising afterwards only
    // labels the VMA.
    if (madvise(p, bytes, AdviceFor(mode)) != 0 && mode == Mode::kThp) {
      std::snprintf(r.error, sizeof(r.error),
                    "madvise(MADV_HUGEPAGE) failed: %s", std::strerror(errno));
      return r;
    }
  }
  if (mode == Mode::kPopulateWrite &&
      madvise(p, bytes, MADV_POPULATE_WRITE) != 0) {
    std::snprintf(r.error, sizeof(r.error),
                  "madvise(MADV_POPULATE_WRITE) failed: %s (needs Linux 5.14+)",
                  std::strerror(errno));
    return r;
  }
  getrusage(who, &r1);
  if (mode == Mode::kRead) {
    if (ReadPages(p, bytes) != 0) {
      std::snprintf(r.error, sizeof(r.error),
                    "read of untouched anonymous memory returned non-zero");
    }
  } else {
    TouchPages(p, bytes);
  }
  getrusage(who, &r2);
  const uint64_t w1 = MonotonicNs();
  r.wall_s = static_cast<double>(w1 - w0) * 1e-9;
  phases->Push(w0, w1);
  r.passes = 1;
  const child_task::Usage populate = child_task::UsageBetween(r0, r1);
  const child_task::Usage touch = child_task::UsageBetween(r1, r2);
  r.user_s = populate.user_s + touch.user_s;
  r.sys_s = populate.sys_s + touch.sys_s;
  r.populate_faults = populate.minflt;
  r.touch_faults = touch.minflt;
  r.pages = bytes / kPage;
  return r;
}

/// One task's window: `passes` x RunTask on its share, each followed by
/// emptying the share again (munmap of what RunTask mapped, or MADV_DONTNEED
/// of the shared mapping's share: outside wall_s, inside loop_s) and
/// `between_passes()` (outside both). Async-signal-safe when `between_passes`
/// is, so a child may run it.
template <typename F>
WindowWork RunPasses(Mode mode, char* share, std::size_t bytes, int who,
                     int passes, F between_passes) {
  WindowWork w;
  for (int pass = 0; pass < passes; ++pass) {
    char* mapped = nullptr;
    const uint64_t t0 = MonotonicNs();
    w.r.Add(RunTask(mode, share, bytes, who, &mapped, &w.phases));
    if (mapped != nullptr) munmap(mapped, bytes);
    if (share != nullptr) madvise(share, bytes, MADV_DONTNEED);
    w.r.loop_s += static_cast<double>(MonotonicNs() - t0) * 1e-9;
    between_passes();
  }
  return w;
}

/// The fault count a mode must produce for `pages` 4 KiB pages: {populate
/// phase, touch phase}. getrusage counts the kernel's own faults-in (GUP, regs
/// == NULL in mm_account_fault, Linux 5.x-6.x) as minor faults of the calling
/// task, so populate modes expect one per page while populating and none while
/// touching; perf's page-faults event skips those (no regs).
struct Expected {
  uint64_t populate = 0, touch = 0;
};
inline Expected ExpectedFaults(Mode m, uint64_t pages, bool thp_usable) {
  switch (m) {
    case Mode::kPlain:
    case Mode::kRead:
      return {0, pages};
    case Mode::kMapPopulate:
    case Mode::kPopulateWrite:
      return {pages, 0};
    case Mode::kThp:
      return {0,
              thp_usable ? (pages + kPagesPerHuge - 1) / kPagesPerHuge : pages};
  }
  return {};
}

/// "" when the measured counts fit the mode (see Expected), else what differs.
/// Tolerance: plain touch faults in [pages, pages + 1% + slack]; populate
/// modes: touch faults <= slack; THP: in [pages/512, pages + 1% + slack] (the
/// kernel may decline huge pages under fragmentation; the measured faults per 2
/// MiB are reported, not failed).
inline std::string CheckFaults(Mode m, const TaskResult& total, int tasks,
                               bool thp_usable) {
  const uint64_t pages = total.pages;
  const uint64_t slack = kSlackFaultsPerTask * static_cast<uint64_t>(tasks);
  const Expected e = ExpectedFaults(m, pages, thp_usable);
  const uint64_t touch = total.touch_faults;
  const uint64_t most = pages + pages / 100 + slack;
  std::ostringstream why;
  if (m == Mode::kMapPopulate || m == Mode::kPopulateWrite) {
    if (touch > slack)
      why << ModeName(m) << ": " << touch
          << " faults while touching populated pages "
          << "(expected <= " << slack << ")";
  } else if (touch < e.touch || touch > most) {  // plain, read, thp
    why << ModeName(m) << ": " << touch << " touch faults for " << pages
        << " pages (expected " << e.touch << " .. " << most << ")";
  }
  return why.str();
}

}  // namespace lockline::fault_bench
