// fault: real anonymous page faults on this kernel, after the 2004 linux-mm
// pre-zeroing thread (BACKGROUND.md section 5, issues 15 and 17): a mapping of
// `mb` MiB split across `threads` tasks, each touching one byte per 4 KiB page
// of its share, in as many passes as make a point big enough to time (a THP
// pass of 256 MiB is only 128 faults). A write fault allocates and zeroes a
// page; mode:read reads untouched anonymous memory instead, which maps the
// shared zero page: no allocation, no zeroing. Contention regime: tasks as
// threads share one mm (the mmap lock, per-VMA lock and page-table locks of
// one address space); as processes they share only the zone / buddy
// allocator; no task writes a line another reads (shares_lines() is false).
// Not measured: unmapping (MADV_DONTNEED / munmap between passes, outside the
// timed part), file faults, major faults. Rows carry the seed table's columns
// (GB, repetitions, threads, user s, system s, wall s, faults/cpu/s,
// faults/wall-s) in details.seed_columns, cost per fault and per KiB zeroed,
// and zeroing's share of the fault time at this machine's measured clear
// rate. Fault counts come from getrusage minor faults and are checked against
// what each mode must produce.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/cpu.h"
#include "harness/family.h"
#include "harness/zeroing.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14 uapi value, for older libc headers
#endif

namespace lockline::fault_bench {

inline constexpr std::size_t kPage = 4096;
inline constexpr std::size_t kHugePage =
    2u << 20;  // PMD-sized THP on x86-64 and 4K-page arm64
inline constexpr std::size_t kPagesPerHuge = kHugePage / kPage;

/// A first touch of memory the host has not reclaimed is "warm" when the
/// discarded pass over the same size ended less than this before the window:
/// this KVM host hands memory left free for ~0.5-1 s back to the hypervisor,
/// after which first touches are 2-25x slower.
inline constexpr uint64_t kWarmGapNs = 250'000'000;
/// Idle time before an `after_idle` point: long enough for the host to reclaim
/// freed memory.
inline constexpr uint64_t kAfterIdleNs = 1'500'000'000;
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
enum class Tasks { kThreads, kProcesses };
enum class Start { kWarm, kAfterIdle };

inline const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kPlain:
      return "plain";
    case Mode::kMapPopulate:
      return "map_populate";
    case Mode::kPopulateWrite:
      return "populate_write";
    case Mode::kThp:
      return "thp";
    case Mode::kRead:
      return "read";
  }
  return "?";
}

/// One point's configuration (from the variant's params).
struct Config {
  Mode mode = Mode::kPlain;
  Tasks tasks = Tasks::kThreads;
  Start start = Start::kWarm;
  std::size_t bytes = 256u << 20;  ///< whole mapping, all tasks together
  int passes = 1;                  ///< passes per window (PassesFor)
};

/// What one task measured in one or more windows (user / system seconds and
/// minor faults from getrusage: RUSAGE_THREAD for threads, the child's
/// RUSAGE_SELF for processes). Sent through a pipe by child processes, so it is
/// a plain struct.
struct TaskResult {
  double user_s = 0, sys_s = 0;
  double wall_s = 0;  ///< summed wall time of the timed phases
  int passes = 0;
  uint64_t pages = 0;            ///< 4 KiB pages made present
  uint64_t populate_faults = 0;  ///< minor faults while mapping / populating
  uint64_t touch_faults = 0;     ///< minor faults while touching
  char error[160] = {};          ///< failing call, or empty

  void Add(const TaskResult& o) {
    user_s += o.user_s;
    sys_s += o.sys_s;
    wall_s += o.wall_s;
    passes += o.passes;
    pages += o.pages;
    populate_faults += o.populate_faults;
    touch_faults += o.touch_faults;
    if (error[0] == 0 && o.error[0] != 0)
      std::memcpy(error, o.error, sizeof(error));
  }
};

/// /sys/kernel/mm/transparent_hugepage/enabled's selected word ("always",
/// "madvise", "never"), or "unavailable" when the file is missing (kernel
/// without THP).
inline std::string ThpEnabled() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(f, line)) return "unavailable";
  auto a = line.find('['), b = line.find(']');
  if (a == std::string::npos || b == std::string::npos || b < a)
    return "unavailable";
  return line.substr(a + 1, b - a - 1);
}

/// True when MADV_HUGEPAGE can give huge pages here (THP compiled in and not
/// "never").
inline bool ThpUsable() {
  std::string s = ThpEnabled();
  return s == "always" || s == "madvise";
}

/// MemAvailable from /proc/meminfo, bytes (0 when unreadable).
inline uint64_t MemAvailableBytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
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

/// The advice a mode gives before touching (THP off for all but kThp, so every
/// other mode zeroes 4 KiB pages whatever the system-wide THP setting).
inline int AdviceFor(Mode m) {
  return m == Mode::kThp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE;
}

inline double Seconds(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) +
         static_cast<double>(tv.tv_usec) * 1e-6;
}

/// Writes one byte per 4 KiB page of [p, p+bytes) (a store: a read would map
/// the zero page).
inline void TouchPages(char* p, std::size_t bytes) {
  for (std::size_t off = 0; off < bytes; off += kPage) {
    *reinterpret_cast<volatile char*>(p + off) = 1;
  }
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

/// One task's work on its share: make `bytes` present by `mode` and touch them,
/// measuring rusage
/// (`who`: RUSAGE_THREAD or RUSAGE_SELF) around the populate and touch phases.
/// `share` is the task's part of a shared mapping already advised, or nullptr
/// to map it here (map_populate, processes). Only async-signal-safe calls
/// (mmap, madvise, getrusage), so a child forked from the multithreaded harness
/// may run it. Mappings made here are returned in *mapped (to unmap after the
/// window; a child keeps them until it exits).
inline TaskResult RunTask(Mode mode, char* share, std::size_t bytes, int who,
                          char** mapped) {
  TaskResult r;
  rusage r0{}, r1{}, r2{};
  timespec w0{}, w1{};
  clock_gettime(CLOCK_MONOTONIC, &w0);
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
  clock_gettime(CLOCK_MONOTONIC, &w1);
  r.wall_s = static_cast<double>(w1.tv_sec - w0.tv_sec) +
             static_cast<double>(w1.tv_nsec - w0.tv_nsec) * 1e-9;
  r.passes = 1;
  r.user_s = Seconds(r2.ru_utime) - Seconds(r0.ru_utime);
  r.sys_s = Seconds(r2.ru_stime) - Seconds(r0.ru_stime);
  r.populate_faults = static_cast<uint64_t>(r1.ru_minflt - r0.ru_minflt);
  r.touch_faults = static_cast<uint64_t>(r2.ru_minflt - r1.ru_minflt);
  r.pages = bytes / kPage;
  return r;
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
  std::ostringstream why;
  switch (m) {
    case Mode::kPlain:
    case Mode::kRead:
      if (touch < pages || touch > pages + pages / 100 + slack) {
        why << ModeName(m) << ": " << touch << " touch faults for " << pages
            << " pages (expected " << pages << " .. "
            << pages + pages / 100 + slack << ")";
      }
      break;
    case Mode::kMapPopulate:
    case Mode::kPopulateWrite:
      if (touch > slack) {
        why << ModeName(m) << ": " << touch
            << " faults while touching populated pages "
            << "(expected <= " << slack << ")";
      }
      break;
    case Mode::kThp:
      if (touch < e.touch || touch > pages + pages / 100 + slack) {
        why << "thp: " << touch << " touch faults for " << pages
            << " pages (expected " << e.touch << " .. "
            << pages + pages / 100 + slack << ")";
      }
      break;
  }
  return why.str();
}

/// Commands from a team thread to its child process (tasks:processes).
enum : int { kCmdExit = 0, kCmdRun = 1 };

/// This machine's clear_page-like rate, bytes/s: `rep stosb` zeroing of a
/// 64 MiB buffer (twice a Zen 4 CCD's L3, the zeroing family's buffer size),
/// best of 3 passes after a first touch; measured once per process, on the
/// first thread that asks. 0 when the buffer cannot be mapped.
inline double ClearRateBytesPerS() {
  static const double rate = [] {
    constexpr std::size_t kBytes = 64u << 20;
    void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 0.0;
    madvise(p, kBytes, MADV_NOHUGEPAGE);
    std::memset(p, 0x5a, kBytes);
    double best = 0;
    for (int i = 0; i < 3; ++i) {
      const uint64_t t0 = NowNs();
      ZeroWith(ZeroMethod::kRepStosb, p, kBytes);
      const uint64_t dt = NowNs() - t0;
      if (dt > 0) best = std::max(best, kBytes * 1e9 / static_cast<double>(dt));
    }
    munmap(p, kBytes);
    return best;
  }();
  return rate;
}

/// Why the sampled clear_page* share of fault rows is unavailable here.
inline std::string ClearPageSamplingReason() {
  std::ifstream f("/proc/sys/kernel/perf_event_paranoid");
  std::string paranoid = "unreadable";
  std::getline(f, paranoid);
  return "kernel IP sampling of the fault window is not implemented in this "
         "version (perf_event_paranoid=" +
         paranoid + "; no hardware PMU in this VM)";
}

/// The point's workload: see the file comment. tasks:threads touches one
/// shared mapping (task i its i-th share, 2 MiB-aligned), emptying its share
/// with MADV_DONTNEED after each pass; tasks:processes runs each task in a
/// child forked by its team thread in SetupThread (so fork is not timed),
/// which maps its share per pass, unmaps it after, and reports its rusage
/// through a pipe. Only the populate + touch phases are timed (wall_s, user_s,
/// sys_s); the window itself also holds the unmapping.
class FaultWorkload : public Workload {
 public:
  FaultWorkload(Config cfg, int threads) : cfg_(cfg), threads_(threads) {}
  ~FaultWorkload() override {
    for (auto& t : tasks_) StopChild(t);
    if (region_ != nullptr) munmap(region_, cfg_.bytes);
  }

  bool fixed_work() const override { return true; }
  bool shares_lines() const override { return false; }

  void Prepare(int threads) override {
    threads_ = threads;
    tasks_.assign(threads, TaskState{});
    // Shares in 2 MiB units so THP can map each share with PMD pages; the last
    // task takes the rest. Sizes are rounded down to whole 2 MiB units (or
    // whole pages for tiny mappings).
    const std::size_t unit =
        cfg_.bytes >= kHugePage * threads ? kHugePage : kPage;
    const std::size_t units = cfg_.bytes / unit;
    for (int i = 0; i < threads; ++i) {
      tasks_[i].share_off = units * i / threads * unit;
      tasks_[i].share_bytes =
          (units * (i + 1) / threads - units * i / threads) * unit;
    }
    if (cfg_.mode != Mode::kRead) ClearRateBytesPerS();  // before any timing
    if (cfg_.tasks == Tasks::kThreads && cfg_.mode != Mode::kMapPopulate) {
      region_ = MapAligned(cfg_.bytes);
      if (region_ == nullptr) {
        setup_error_ = "mmap of " + std::to_string(cfg_.bytes) +
                       " bytes failed: " + std::strerror(errno);
        return;
      }
      madvise(region_, cfg_.bytes, AdviceFor(cfg_.mode));
    }
    if (cfg_.start == Start::kWarm && cfg_.mode != Mode::kRead) {
      // The discarded pass: same size and page size (huge pages for thp: 2 MiB
      // blocks the host has backed recently are not the same memory as
      // scattered 4 KiB pages), one thread, unmapped right away so its pages go
      // back to the guest's free lists and are what the point then faults in.
      // Read faults allocate nothing, so they have no warm pass.
      const uint64_t t0 = NowNs();
      if (char* p = MapAligned(cfg_.bytes)) {
        madvise(p, cfg_.bytes, AdviceFor(cfg_.mode));
        TouchPages(p, cfg_.bytes);
        munmap(p, cfg_.bytes);
      }
      prepare_end_ns_ = NowNs();
      warm_pass_s_ = static_cast<double>(prepare_end_ns_ - t0) / 1e9;
    } else if (cfg_.start == Start::kAfterIdle) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(kAfterIdleNs));
      prepare_end_ns_ = NowNs();
    } else {
      prepare_end_ns_ = NowNs();
    }
  }

  void SetupThread(const ThreadCtx& ctx) override {
    if (cfg_.tasks == Tasks::kProcesses) StartChild(tasks_[ctx.index]);
  }

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& /*stop*/) override {
    TaskState& t = tasks_[ctx.index];
    if (ctx.index == 0 && t.windows == 0) {
      gap_ns_ = static_cast<int64_t>(NowNs() - prepare_end_ns_);
    }
    TaskResult r;
    if (!setup_error_.empty()) {
      return 0;
    } else if (cfg_.tasks == Tasks::kProcesses) {
      r = RunInChild(t);
    } else {
      char* share = region_ != nullptr ? region_ + t.share_off : nullptr;
      for (int pass = 0; pass < cfg_.passes; ++pass) {
        char* mapped = nullptr;
        r.Add(RunTask(cfg_.mode, share, t.share_bytes, RUSAGE_THREAD, &mapped));
        // Untimed: empty the share for the next pass (or the next window).
        if (mapped != nullptr) munmap(mapped, t.share_bytes);
        if (share != nullptr) madvise(share, t.share_bytes, MADV_DONTNEED);
      }
    }
    ++t.windows;
    t.total.Add(r);
    return r.pages;
  }

  void TeardownThread(const ThreadCtx& ctx) override {
    StopChild(tasks_[ctx.index]);
  }

  void Report(PointReport& out, double window_seconds,
              uint64_t /*ops*/) override {
    const TaskResult total = Total();
    const bool thp = ThpUsable();
    const Expected e = ExpectedFaults(cfg_.mode, total.pages, thp);
    const double faults =
        static_cast<double>(total.populate_faults + total.touch_faults);
    const double cpu = total.user_s + total.sys_s;
    // Wall time of the timed phases: tasks run concurrently, so the point's
    // is the longest task's.
    double wall = 0;
    for (const auto& t : tasks_) wall = std::max(wall, t.total.wall_s);
    const int passes = tasks_.empty() || tasks_[0].total.passes == 0
                           ? 0
                           : tasks_[0].total.passes;
    const double gb = static_cast<double>(cfg_.bytes) / double(1u << 30);
    const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    // What the faults zeroed: nothing for reads (the zero page), else every
    // page made present.
    const double kib_zeroed =
        cfg_.mode == Mode::kRead ? 0 : static_cast<double>(total.pages) * 4.0;
    const double clear_rate =
        cfg_.mode == Mode::kRead ? 0 : ClearRateBytesPerS();
    const double zero_s = clear_rate > 0 ? kib_zeroed * 1024.0 / clear_rate : 0;
    out.Metric("gb", gb);
    out.Metric("passes", passes);  // the seed table's "repetitions" column
    out.Metric("tasks", threads_);
    out.Metric("user_s", total.user_s);
    out.Metric("sys_s", total.sys_s);
    out.Metric("wall_s", wall);
    out.Metric("faults", faults);
    out.Metric("touch_faults", static_cast<double>(total.touch_faults));
    out.Metric("populate_faults", static_cast<double>(total.populate_faults));
    out.Metric("expected_faults", static_cast<double>(e.populate + e.touch));
    out.Metric("faults_per_cpu_s", ratio(faults, cpu));
    out.Metric("faults_per_wall_s", ratio(faults, wall));
    out.Metric("pages_per_wall_s",
               ratio(static_cast<double>(total.pages), wall));
    out.Metric("cpu_ns_per_fault", ratio(cpu * 1e9, faults));
    if (kib_zeroed > 0) {
      out.Metric("cpu_ns_per_kib_zeroed", ratio(cpu * 1e9, kib_zeroed));
      out.Metric("kib_zeroed_per_wall_s", ratio(kib_zeroed, wall));
    }
    out.Metric("zeroing_share", ratio(zero_s, cpu));
    const double huge_units = static_cast<double>(total.pages) / kPagesPerHuge;
    out.Metric("faults_per_2mib", ratio(faults, huge_units));
    auto& d = out.details;
    d["mode"] = ModeName(cfg_.mode);
    d["tasks"] = cfg_.tasks == Tasks::kThreads ? "threads" : "processes";
    d["bytes"] = cfg_.bytes;
    d["passes_per_window"] = cfg_.passes;
    d["window_s"] = window_seconds;  // the harness's: also holds the unmapping
    d["size_note"] = size_note_;
    d["thp_enabled"] = ThpEnabled();
    d["start"] = cfg_.start == Start::kWarm ? "warm" : "after_idle";
    d["gap_before_first_window_ms"] = static_cast<double>(gap_ns_) / 1e6;
    // `warm`: the discarded pass ended under kWarmGapNs before the first
    // window.
    d["warm"] = cfg_.start == Start::kWarm && gap_ns_ >= 0 &&
                static_cast<uint64_t>(gap_ns_) < kWarmGapNs;
    if (cfg_.start == Start::kWarm) d["warm_pass_s"] = warm_pass_s_;
    d["expected_faults"] = {{"populate", e.populate}, {"touch", e.touch}};
    d["fault_source"] =
        "getrusage minor faults (includes the kernel's own populate faults, "
        "which perf's page-faults event does not see)";
    d["timed_phases"] =
        "wall_s, user_s and sys_s cover mapping/populating and touching only; "
        "emptying the share between passes (MADV_DONTNEED / munmap) is "
        "outside them; wall_s is the longest task's";
    d["seed_columns"] = {
        {"GB", gb},
        {"repetitions", passes},
        {"threads", threads_},
        {"user_s", total.user_s},
        {"system_s", total.sys_s},
        {"wall_s", wall},
        {"faults_per_cpu_s", ratio(faults, cpu)},
        {"faults_per_wall_s", ratio(faults, wall)},
        {"page_kib", cfg_.mode == Mode::kThp && thp ? 2048 : 4},
        {"note",
         "the 2004 table ran on ia64 with 16 KiB pages: "
         "65,536 faults per GB; its own wall column is "
         "inconsistent with its faults/wall-s column by "
         "10x. Here faults_per_wall_s = faults / wall_s on "
         "every row, and x86-64 faults 4 KiB pages (262,144 "
         "per GiB): compare per KiB zeroed, not per fault"}};
    if (cfg_.mode == Mode::kRead) {
      d["zeroing"] =
          "none: a read fault of untouched anonymous memory maps the shared "
          "zero page (no allocation, no zeroing); zeroing_share is 0";
    } else {
      d["zeroing"] = {
          {"clear_rate_gb_per_s", clear_rate / 1e9},
          {"clear_rate_source",
           "rep stosb over 64 MiB (the zeroing family's method and buffer), "
           "best of 3, measured once per process"},
          {"zeroing_s_at_clear_rate", zero_s},
          {"bytes_per_fault", ratio(kib_zeroed * 1024.0, faults)},
          {"share_definition",
           "time to zero the pages made present at the measured clear rate "
           "over the faults' CPU time (user + system)"}};
    }
    d["clear_page_sampled"] = {{"status", "unavailable"},
                               {"reason", ClearPageSamplingReason()}};
    nlohmann::json per_task = nlohmann::json::array();
    for (const auto& t : tasks_) {
      per_task.push_back({{"user_s", t.total.user_s},
                          {"system_s", t.total.sys_s},
                          {"wall_s", t.total.wall_s},
                          {"passes", t.total.passes},
                          {"pages", t.total.pages},
                          {"populate_faults", t.total.populate_faults},
                          {"touch_faults", t.total.touch_faults}});
    }
    d["per_task"] = per_task;
  }

  std::string Verify() override {
    if (!setup_error_.empty()) return setup_error_;
    const TaskResult total = Total();
    if (total.error[0] != 0) return total.error;
    return CheckFaults(cfg_.mode, total, threads_, ThpUsable());
  }

  void set_size_note(std::string note) { size_note_ = std::move(note); }
  /// Sum over tasks of everything measured so far.
  TaskResult Total() const {
    TaskResult total;
    for (const auto& t : tasks_) total.Add(t.total);
    return total;
  }

 private:
  struct TaskState {
    std::size_t share_off = 0, share_bytes = 0;
    int windows = 0;
    TaskResult total;
    pid_t child = -1;
    int cmd_fd = -1, result_fd = -1;
  };

  // Forks this team thread's child. The child inherits the thread's CPU
  // binding, dies with the thread (PR_SET_PDEATHSIG) and runs only
  // async-signal-safe code until _exit.
  void StartChild(TaskState& t) {
    int cmd[2], res[2];
    if (pipe(cmd) != 0 || pipe(res) != 0) {
      std::snprintf(t.total.error, sizeof(t.total.error), "pipe failed: %s",
                    std::strerror(errno));
      return;
    }
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      std::snprintf(t.total.error, sizeof(t.total.error), "fork failed: %s",
                    std::strerror(errno));
      close(cmd[0]), close(cmd[1]), close(res[0]), close(res[1]);
      return;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(0);
      close(cmd[1]);
      close(res[0]);
      const Mode mode = cfg_.mode;
      const std::size_t bytes = t.share_bytes;
      const int passes = cfg_.passes;
      for (;;) {
        int c = kCmdExit;
        if (read(cmd[0], &c, sizeof(c)) != static_cast<ssize_t>(sizeof(c)) ||
            c != kCmdRun) {
          _exit(0);
        }
        TaskResult r;
        for (int pass = 0; pass < passes; ++pass) {
          char* mapped = nullptr;
          r.Add(RunTask(mode, nullptr, bytes, RUSAGE_SELF, &mapped));
          if (mapped != nullptr) munmap(mapped, bytes);  // untimed
        }
        if (write(res[1], &r, sizeof(r)) != static_cast<ssize_t>(sizeof(r)))
          _exit(1);
      }
    }
    close(cmd[0]);
    close(res[1]);
    t.child = pid;
    t.cmd_fd = cmd[1];
    t.result_fd = res[0];
  }

  TaskResult RunInChild(TaskState& t) {
    TaskResult r;
    const int c = kCmdRun;
    if (t.child < 0 ||
        write(t.cmd_fd, &c, sizeof(c)) != static_cast<ssize_t>(sizeof(c)) ||
        read(t.result_fd, &r, sizeof(r)) != static_cast<ssize_t>(sizeof(r))) {
      std::snprintf(r.error, sizeof(r.error), "child task %d did not report",
                    static_cast<int>(t.child));
      r.pages = 0;
    }
    return r;
  }

  static void StopChild(TaskState& t) {
    if (t.child < 0) return;
    const int c = kCmdExit;
    if (write(t.cmd_fd, &c, sizeof(c)) != static_cast<ssize_t>(sizeof(c)))
      kill(t.child, SIGKILL);
    int status = 0;
    waitpid(t.child, &status, 0);
    close(t.cmd_fd);
    close(t.result_fd);
    t.child = -1;
  }

  Config cfg_;
  int threads_;
  std::vector<TaskState> tasks_;
  char* region_ = nullptr;
  std::string setup_error_, size_note_;
  uint64_t prepare_end_ns_ = 0;
  int64_t gap_ns_ = -1;
  double warm_pass_s_ = 0;
};

/// Mapping size for a point: `mb` MiB (the row key's), capped at a quarter of
/// MemAvailable (one window's pages plus the warm pass must fit with
/// room to spare; each further window keeps its pages until the point ends).
/// Rounded down to whole 2 MiB. Sets *note when it differs from the requested
/// size.
inline std::size_t PointBytes(std::size_t mb, std::string* note) {
  std::size_t bytes = mb << 20;
  const uint64_t avail = MemAvailableBytes();
  if (avail > 0 && bytes > avail / 4) {
    bytes = avail / 4;
    *note = "short memory: " + std::to_string(bytes >> 20) +
            " MiB (a quarter of MemAvailable)";
  }
  bytes = std::max(bytes / kHugePage * kHugePage, kHugePage);
  return bytes;
}

Variant MakeVariant(Mode mode, Tasks tasks, Start start, std::size_t mb,
                    Suite suite, std::vector<int> threads) {
  Variant v;
  v.params = {{"mode", ModeName(mode)},
              {"tasks", tasks == Tasks::kThreads ? "threads" : "processes"},
              {"start", start == Start::kWarm ? "warm" : "after_idle"},
              {"mb", std::to_string(mb)}};
  v.suite = suite;
  v.threads = std::move(threads);
  v.windows = 1;
  v.fixed_work = true;
  // For the budget: MiB first touched per repetition, in 4 KiB write faults'
  // worth (measured per mode on the 2-vCPU VM): the timed pass, and the
  // discarded warm-up pass of a warm start (read faults have none); THP
  // faults 2 MiB at a time; populating in one call saves the trap per page.
  // A start after idle adds its 1.5 s idle period; processes their forks.
  static const double kMibPerPass[] = {1.0, 0.8, 0.8, 0.35, 1.0};
  const double passes = start == Start::kWarm && mode != Mode::kRead ? 2 : 1;
  v.cost_mib =
      kMibPerPass[static_cast<int>(mode)] * passes * static_cast<double>(mb);
  v.cost_s = (start == Start::kWarm ? 0.0 : 1.5) +
             (tasks == Tasks::kProcesses ? 0.1 : 0.0);
  static const char* const kModeText[] = {
      "THP off, each 4 KiB page zeroed in its fault",
      "mmap(MAP_POPULATE): pages faulted in and zeroed at mapping time",
      "MADV_POPULATE_WRITE: pages faulted in and zeroed by one madvise, then "
      "touched",
      "MADV_HUGEPAGE: one fault (and a 2 MiB zeroing) per huge page",
      "THP off, read one byte per page: the shared zero page, no allocation, "
      "no zeroing"};
  v.description =
      std::string(kModeText[static_cast<int>(mode)]) + "; tasks as " +
      v.params[1].second +
      (start == Start::kWarm ? "; after a discarded warm-up pass"
                             : "; first touch after 1.5 s idle (host reclaim)");
  v.make = [=](const PointEnv& env) {
    Config cfg{mode, tasks, start, 0, 1};
    std::string note;
    cfg.bytes = PointBytes(mb, &note);
    cfg.passes = PassesFor(mode, cfg.bytes);
    auto w = std::make_unique<FaultWorkload>(cfg, env.threads);
    w->set_size_note(note);
    return w;
  };
  return v;
}

/// The variant table. Quick: plain faults at 32 MiB (its own key, so quick and
/// default rows never pair). Default: the seed's table, 1 GiB of write faults
/// and, next to it, 1 GiB of read faults (the zero page) at 1/2/4/8 threads
/// (counts above the usable PUs are skipped by the runner); the other seed
/// comparisons (processes, MADV_POPULATE_WRITE, THP) at 256 MiB and 1 and 2
/// tasks; the labelled first-touch-after-idle point. Full adds every mode x
/// tasks at 1 GiB over the run's threads.
std::vector<Variant> Variants() {
  std::vector<Variant> v;
  v.push_back(MakeVariant(Mode::kPlain, Tasks::kThreads, Start::kWarm, 32,
                          Suite::kQuick, {1, 2}));
  v.back().quick_only = true;
  v.push_back(MakeVariant(Mode::kPlain, Tasks::kThreads, Start::kWarm, 1024,
                          Suite::kDefault, {1, 2, 4, 8}));
  v.push_back(MakeVariant(Mode::kRead, Tasks::kThreads, Start::kWarm, 1024,
                          Suite::kDefault, {1, 2, 4, 8}));
  v.push_back(MakeVariant(Mode::kPlain, Tasks::kProcesses, Start::kWarm, 256,
                          Suite::kDefault, {1, 2}));
  v.push_back(MakeVariant(Mode::kPopulateWrite, Tasks::kThreads, Start::kWarm,
                          256, Suite::kDefault, {1, 2}));
  v.push_back(MakeVariant(Mode::kThp, Tasks::kThreads, Start::kWarm, 256,
                          Suite::kDefault, {1, 2}));
  v.push_back(MakeVariant(Mode::kPlain, Tasks::kThreads, Start::kAfterIdle, 256,
                          Suite::kDefault, {1}));
  for (Mode m : {Mode::kMapPopulate, Mode::kPopulateWrite, Mode::kThp,
                 Mode::kRead, Mode::kPlain}) {
    for (Tasks t : {Tasks::kThreads, Tasks::kProcesses}) {
      if (t == Tasks::kThreads && (m == Mode::kPlain || m == Mode::kRead))
        continue;  // in the default suite already
      v.push_back(MakeVariant(m, t, Start::kWarm, 1024, Suite::kFull, {}));
    }
  }
  for (Tasks t : {Tasks::kThreads, Tasks::kProcesses}) {
    v.push_back(MakeVariant(Mode::kPlain, t, Start::kAfterIdle, 1024,
                            Suite::kFull, {}));
  }
  return v;
}

}  // namespace lockline::fault_bench

LOCKLINE_REGISTER_FAMILY(lockline::Family{
    "fault",
    "Real anonymous page faults (one byte per 4 KiB page of a fresh mapping): "
    "write (plain), read (the zero page), MAP_POPULATE, MADV_POPULATE_WRITE "
    "and THP, tasks as threads or processes; the 2004 pre-zeroing thread's "
    "table columns and zeroing's share of a fault",
    lockline::fault_bench::Variants,
    {}});
