// Kernel-side lock evidence for the kernel_* families, never required: every
// source is "measured" or "unavailable" with a reason.
// - tracepoints: lock:contention_begin / _end (Linux 5.19+, every slow path in
//   kernel/locking/*), opened per task (a team thread's tid or a child's pid)
//   and enabled only in its windows; contention_begin is also sampled with
//   kernel callchains, attributed (/proc/kallsyms) to zone->lock, LRU or other.
// - vmstat: /proc/vmstat deltas over the windows (system-wide).
// - pcp: batch / high (high_min / high_max, 6.7+) per zone, /proc/zoneinfo.
// - lock_stat: /proc/lock_stat, present only with CONFIG_LOCK_STAT.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lockline::kernel {

/// True when `s` starts with one of `prefixes`.
template <std::size_t N>
bool StartsWithAny(const std::string& s, const char* const (&prefixes)[N]) {
  return std::any_of(std::begin(prefixes), std::end(prefixes),
                     [&](const char* p) { return s.rfind(p, 0) == 0; });
}

/// Where lock:contention_begin / _end live on this kernel.
struct TracepointInfo {
  int begin_id = -1, end_id = -1;  ///< tracefs event ids, -1 unavailable
  std::string tracefs;             ///< mount point used ("" none)
  bool mounted_here = false;       ///< lockline mounted tracefs itself
  std::string reason;              ///< why unavailable ("" when available)
  bool available() const { return begin_id >= 0 && end_id >= 0; }
};

/// Finds the lock contention tracepoints in tracefs (/sys/kernel/tracing or
/// /sys/kernel/debug/tracing; as root, mounts it at the first). Unavailable:
/// not root, ids unreadable, kernel before 5.19. Thread-safe, computed once.
const TracepointInfo& ContentionTracepoints();

enum class LockClass { kZone, kLru, kOther };  ///< a contention sample's lock

/// Attributes a contention_begin callchain (innermost first) to a lock: lock
/// primitives' and perf / tracing frames skipped, the first function taking
/// zone->lock (mm/page_alloc.c) or an LRU lock (mm/swap.c, mm/memcontrol.c,
/// mm/vmscan.c; 6.x) decides. `*caller`: the first unskipped frame, or "".
LockClass ClassifyChain(const std::vector<std::string>& innermost_first,
                        std::string* caller);

/// Kernel text symbols from /proc/kallsyms; usable() is false, with a reason,
/// when addresses read 0 (kptr_restrict).
class KernelSymbols {
 public:
  static const KernelSymbols& Get();
  /// Parses kallsyms text ("addr type name [module]" per line).
  explicit KernelSymbols(const std::string& kallsyms_text);
  KernelSymbols() = default;
  bool usable() const { return !addrs_.empty(); }
  const std::string& reason() const { return reason_; }
  /// The function containing `addr` (the highest symbol <= addr), or "?".
  const std::string& Lookup(uint64_t addr) const;
  /// True when a text symbol of that exact name exists (linear scan).
  bool Contains(const std::string& name) const;

 private:
  std::vector<uint64_t> addrs_;
  std::vector<std::string> names_;
  std::string reason_;
};

/// Adds the listed fields of `from` to those of `to` (a tally's Add).
template <typename T, typename... M>
void AddFields(T& to, const T& from, M T::*... fields) {
  ((to.*fields += from.*fields), ...);
}

/// Contention evidence summed over tasks and windows.
struct ContentionTally {
  uint64_t begin = 0, end = 0;  ///< tracepoint counts
  uint64_t samples = 0;         ///< contention_begin callchain samples read
  uint64_t lost = 0;            ///< samples the rings dropped (both rings)
  uint64_t zone = 0, lru = 0, other = 0;    ///< samples per lock class
  std::map<std::string, uint64_t> callers;  ///< first non-lock frame -> n
  uint64_t clock_samples = 0;  ///< spin profile: all task-clock samples
  uint64_t clock_kernel = 0;   ///< samples in the kernel
  uint64_t spin_zone = 0, spin_lru = 0, spin_other = 0;  ///< in a spin loop
  std::map<std::string, uint64_t> spin_callers;  ///< who asked for the lock
  void Add(const ContentionTally& o);
};

/// True when a callchain (innermost first) was sampled in a spinlock slow path
/// (*queued_spin_lock_slowpath, virt_spin_lock of x86 guests without paravirt
/// spinlocks, queued_{read,write}_lock_slowpath); _raw_spin_lock is no spin.
bool IsSpinChain(const std::vector<std::string>& innermost_first);

/// One perf event with an mmap'ed sample ring and its PERF_SAMPLE_* mask.
struct SampleRing {
  int fd = -1;
  void* map = nullptr;
  std::size_t bytes = 0;
  uint64_t sample_type = 0;
};

/// One sample read from a SampleRing.
struct RingSample {
  bool in_kernel = false;  ///< record misc cpumode PERF_RECORD_MISC_KERNEL
  uint64_t ip = 0;         ///< PERF_SAMPLE_IP, else 0
  uint64_t time_ns = 0;    ///< PERF_SAMPLE_TIME in the event's clock, else 0
  /// PERF_SAMPLE_READ: the group members' counts summed (not the leader's).
  uint64_t group_marks = 0;
  /// Kernel callchain as function names, innermost first (user frames and
  /// context markers dropped; empty for user-mode samples).
  std::vector<std::string> frames;
  /// The symbol of `ip`, else frames[0], in the kernel; "" in user mode.
  std::string innermost;
};

/// Task-clock sampling (PERF_COUNT_SW_TASK_CLOCK) of one task with kernel
/// callchains, a sample every `period_ns` of its CPU time into an mmap ring.
/// Needs kallsyms addresses (root or kptr_restrict 0) and kernel sampling
/// rights (CAP_PERFMON or paranoid <= 1). Not thread-safe; one owner.
class TaskClockSampler {
 public:
  struct Config {
    uint64_t period_ns = 100'000;  ///< task-clock ns between samples
    /// Data pages of the ring (a power of two); halved down to 8 while
    /// mmap is refused with EPERM (perf_event_mlock_kb for non-root).
    std::size_t ring_pages = 64;
    uint16_t max_stack = 32;  ///< kernel frames kept per sample
    /// Also PERF_SAMPLE_IP | PERF_SAMPLE_TIME (CLOCK_MONOTONIC).
    bool ip_and_time = false;
  };
  TaskClockSampler() = default;
  TaskClockSampler(const TaskClockSampler&) = delete;
  TaskClockSampler& operator=(const TaskClockSampler&) = delete;
  ~TaskClockSampler();
  /// Opens the event, disabled, on `pid` (a tid, a pid, 0: this thread); ""
  /// or why not (no kallsyms, the open or mmap error).
  std::string Open(pid_t pid, const Config& config);
  bool open() const { return ring_.fd >= 0; }
  /// Data pages mapped (after any EPERM halving).
  std::size_t ring_pages() const { return ring_pages_; }
  /// Starts / stops sampling (ioctl; cheap).
  void Enable();
  void Disable();
  /// Hands every sample in the ring to `on_sample` and frees its space; adds
  /// the samples dropped on a full ring to *lost. May run while enabled.
  void Drain(uint64_t* lost,
             const std::function<void(const RingSample&)>& on_sample);
  void Close();

 private:
  SampleRing ring_;
  std::size_t ring_pages_ = 0;
};

/// True when `fn` is a page-clearing primitive, by exact name
/// (ClearPageSymbolNames): x86-64 clear_page_{erms,rep,orig}
/// (arch/x86/lib/clear_page_64.S, 4.x to 6.18, clear_page()'s
/// alternative_call_2), clear_pages_* (2025 multi-page series),
/// clear_page_c{,_e} (before 4.x), clear_page (arm64 and most others); not
/// clear_page_dirty_for_io, clear_user or rep_stos_alternative.
bool IsClearPageSymbol(const std::string& fn);
const std::vector<std::string>& ClearPageSymbolNames();

/// 95 % Wilson score interval of k successes in n trials; {0, 0} for n 0.
struct Proportion95 {
  double lo = 0, hi = 0;
};
Proportion95 Wilson95(uint64_t k, uint64_t n);

/// The contention counters of one task (a tid, 0 = the calling thread, or a
/// child's pid); one owner. (1) contention_begin / end counted, begin sampled
/// with callchains; (2) a spin profile: task-clock samples in a spinlock slow
/// path, attributed alike. (2) because qspinlock (kernel/locking/qspinlock.c,
/// 5.19+) fires contention_begin only when a waiter queues: a lone pending
/// waiter, and every waiter of a guest without paravirt spinlocks
/// (virt_spin_lock), are never traced.
class TaskContention {
 public:
  TaskContention() = default;
  TaskContention(const TaskContention&) = delete;
  TaskContention& operator=(const TaskContention&) = delete;
  ~TaskContention();
  /// Opens the sources, disabled (a period of 0: off): "" when tracepoints are
  /// counted, else why not; sampling_reason() / spin_reason() for the others.
  std::string Open(pid_t pid, uint64_t sample_period, uint64_t spin_period_ns);
  bool counting() const { return begin_fd_ >= 0; }
  bool sampling() const { return sample_.fd >= 0; }
  bool spin_profiling() const { return clock_.open(); }
  const std::string& sampling_reason() const { return sampling_reason_; }
  const std::string& spin_reason() const { return spin_reason_; }
  /// Starts / stops every source (ioctl on each fd; cheap).
  void Enable();
  void Disable();
  /// Adds the counts since the previous Collect and the drained samples.
  void Collect(ContentionTally& tally);
  void Close();

 private:
  int begin_fd_ = -1, end_fd_ = -1;
  uint64_t last_begin_ = 0, last_end_ = 0;
  SampleRing sample_;
  TaskClockSampler clock_;
  std::string sampling_reason_, spin_reason_;
};

// ---- kernel_state.cpp: what the kernel reports about its memory and build

/// The bracketed choice of a sysfs "a [b] c" file ("b"), else the text.
std::string SelectedChoice(const std::string& text);

/// /proc/vmstat as name -> value ({} when unreadable).
std::map<std::string, uint64_t> ReadVmstat();

/// b - a for the event counters kernel families report (pgalloc_*, pgfree,
/// pgfault, ...; no nr_* gauges); keys missing on a side, 0 deltas left out.
nlohmann::json VmstatDelta(const std::map<std::string, uint64_t>& a,
                           const std::map<std::string, uint64_t>& b);

/// pcp lists of one populated zone (CPU 0's pageset, the largest high over
/// CPUs), from /proc/zoneinfo.
struct ZonePcp {
  int node = 0;
  std::string zone;                      ///< DMA, DMA32, Normal, ...
  uint64_t managed = 0, free = 0;        ///< pages
  uint64_t high = 0, batch = 0;          ///< CPU 0's pcp high / batch
  uint64_t high_max_cpu = 0;             ///< largest `high` over CPUs
  int64_t high_min = -1, high_max = -1;  ///< 6.7+ auto-tuning bounds, -1 absent
};

/// Parses /proc/zoneinfo text; zones without managed pages are left out.
std::vector<ZonePcp> ParseZonePcp(const std::string& zoneinfo);
std::vector<ZonePcp> ReadZonePcp();
/// The zone order-0 anonymous allocations come from first: the most managed
/// pages (Normal on x86-64 with > 4 GiB); nullptr when there is none.
const ZonePcp* MainZone(const std::vector<ZonePcp>& zones);
/// {"Normal": {"node":0,"managed":...,"high":...,"batch":...}, ...}.
nlohmann::json ZonePcpJson(const std::vector<ZonePcp>& zones);

/// "measured" when /proc/lock_stat is readable, else "unavailable", *reason.
std::string LockStatStatus(std::string* reason);

/// context.lockline.kernel_config (results/SCHEMA.md) from /boot/config-
/// RELEASE, else /proc/config.gz; unreadable: "source" null and "reason".
nlohmann::json KernelConfig();
/// The kernel's folio_batch / pagevec size (31 in mainline since 6.9):
/// {"value", "source"} from /sys/kernel/btf/vmlinux, else mainline's for
/// `release` (uname -r), said so.
nlohmann::json FolioBatchSize(const std::string& release);
/// The element count of array member `member` of struct `strct` in raw BTF
/// data (the kernel's BTF format, include/uapi/linux/btf.h), or -1.
int64_t BtfArrayMember(const std::string& btf, const std::string& strct,
                       const std::string& member);
/// The same from a config file's text (testable).
nlohmann::json KernelConfigFromText(const std::string& text);

/// zone->lock acquisitions of one task, from two tracepoints sampled on every
/// event: kmem:mm_page_alloc_zone_locked, one per page __rmqueue_smallest()
/// takes off the buddy lists under zone->lock (rmqueue_bulk()'s pcp refill,
/// rmqueue_buddy(); mm/page_alloc.c 6.x), and kmem:mm_page_pcpu_drain, one
/// per page free_pcppages_bulk() returns under it. A hold moves its pages back
/// to back with interrupts off, so each sample also reads the task's count of
/// events that lie between two holds, never inside one (PERF_SAMPLE_READ of a
/// group): kmem:mm_page_alloc (__alloc_pages' end) for refills,
/// kmem:mm_page_free_batched + kmem:mm_page_free (before each
/// free_unref_page_commit()) for drains; a moved count starts a hold
/// (ZoneHoldStarts; ftrace on 6.18: docs/validation.md). free_one_page() and
/// other CPUs' drains (decay_pcp_high(), vmstat worker) are not counted.
struct ZoneLockTally {
  uint64_t alloc_pages = 0, drain_pages = 0;
  uint64_t refills = 0, drains = 0;  ///< holds of each kind
  uint64_t lost = 0;                 ///< events the rings dropped
  void Add(const ZoneLockTally& o);
};

/// Whether an event starts a hold: the first since Open (`*seen` false), or
/// its marker count differs from the previous event's (`*last`; both
/// updated). Markers count only while enabled, but a refill's allocation
/// follows it and a drain's free precedes it in one window, so the next
/// window's first hold still sees a moved count.
inline bool ZoneHoldStarts(uint64_t marker, uint64_t* last, bool* seen) {
  const bool starts = !*seen || marker != *last;
  *last = marker;
  *seen = true;
  return starts;
}

/// details.kernel.zone_lock over `ops` ops: acquisitions, pages per refill /
/// drain; "not observed" (a string) when no event was seen, never 0.
nlohmann::json ZoneLockJson(const ZoneLockTally& z, uint64_t ops);

/// Bytes of one zone->lock event in its ring at most: perf_event_header and
/// PERF_SAMPLE_READ of a group of three (nr, three counts).
inline constexpr std::size_t kZoneRecordBytes = 40;
/// The largest zone->lock ring, data pages: 64 MiB, 1.6 M events.
inline constexpr std::size_t kMaxZoneRingPages = 16384;
/// Data pages (a power of two, 64 to kMaxZoneRingPages) of a ring that holds
/// every event of a window moving `pages` pages through the allocator (2
/// records a page, with room for the pcp list and page tables): a full ring
/// drops records (events_lost) when a loaded drainer lags. 0 (unknown): 64.
std::size_t ZoneRingPages(uint64_t pages);

/// The zone->lock tracepoints of one task (ZoneLockTally), opened disabled on
/// `pid` (0: the calling thread). Drain may run on another thread than
/// Enable / Disable (one drainer at a time).
class ZoneLockCounter {
 public:
  ZoneLockCounter() = default;
  ZoneLockCounter(const ZoneLockCounter&) = delete;
  ZoneLockCounter& operator=(const ZoneLockCounter&) = delete;
  ~ZoneLockCounter();
  /// "" or why not (no tracefs / not root, tracepoints missing, perf error).
  std::string Open(pid_t pid, std::size_t ring_pages = 64);
  bool open() const { return alloc_.ring.fd >= 0 && drain_.ring.fd >= 0; }
  void Enable();
  void Disable();
  /// Moves the events in both rings into `t`.
  void Drain(ZoneLockTally& t);
  void Close();

 private:
  /// One kind of event: its sampled tracepoint's ring and counted markers.
  struct Kind {
    SampleRing ring;
    int marks[2] = {-1, -1};
    uint64_t last = 0;  ///< marker count at the previous event
    bool seen = false;  ///< an event was seen since Open
  };
  Kind alloc_, drain_;
};

/// Per-point evidence: one TaskContention per task plus vmstat snapshots
/// around each window. Tasks (or the team thread owning a child) call Begin /
/// End; the first task also brackets vmstat.
class KernelEvidence {
 public:
  /// `sample_period`: sample every n-th contention_begin; `spin_period_ns`:
  /// the spin profile's task-clock period (0: off, each).
  KernelEvidence(int tasks, uint64_t sample_period, uint64_t spin_period_ns);
  /// Opens task `index`'s counters for `pid` (0: calling thread); call from
  /// the thread that will Begin / End it. `zone_pages`: pages the task moves
  /// through the allocator in one window (ZoneRingPages; 0 unknown).
  void OpenTask(int index, pid_t pid, uint64_t zone_pages = 0);
  void Begin(int index);
  void End(int index);
  /// vmstat snapshots before and after each window's work (task 0).
  void VmstatBegin();
  void VmstatEnd();
  void CloseTask(int index);
  bool TaskOpen(int index) const;  ///< any of its perf events open
  /// Before OpenTask: also count zone->lock holds (ZoneLockCounter) per task.
  void CountZoneLock() { zone_lock_ = true; }
  /// Drains the zone->lock rings while the tasks run (one drainer thread).
  void DrainLive();
  /// Marks the evidence as not collected (--evidence=off): Report says so.
  void SetOff(const std::string& why) { off_reason_ = why; }
  /// Adds kernel_contention_per_op (begin events / ops) when measured, and
  /// details["kernel"] as in results/SCHEMA.md.
  using Metrics = std::vector<std::pair<std::string, double>>;
  void Report(nlohmann::json& details, Metrics& metrics, uint64_t ops) const;

 private:
  // Which sources a task (OpenedSources: every task) opened, and why not.
  struct Sources {
    bool counted = false, sampled = false, spun = false, zone = false;
    std::string tp_reason, sample_reason, spin_reason, zone_reason;
  };
  Sources OpenedSources() const;
  struct Task {
    TaskContention tc;
    ContentionTally tally;
    ZoneLockCounter zl;
    ZoneLockTally ztally;
    Sources opened;
  };
  bool zone_lock_ = false;
  std::string off_reason_;
  std::vector<Task> tasks_;
  uint64_t sample_period_, spin_period_ns_;
  std::map<std::string, uint64_t> vm_before_;
  std::map<std::string, uint64_t> vm_sum_;  // summed deltas
  bool vm_ok_ = true;
  std::vector<ZonePcp> pcp_;
};

}  // namespace lockline::kernel
