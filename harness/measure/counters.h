// Per-thread perf counters around measurement windows: libpfm4 / perf list
// names encoded by libpfm4, opened per thread with perf_event_open, enabled
// only inside windows, read with time_enabled / time_running. Every event is
// `measured`, `scaled` (multiplexed) or `unavailable` with a reason: a missing
// counter is never 0.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace lockline {

/// Bad --events input (unparseable list or modifier); what() names the value
/// and what is accepted.
class CounterSpecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Availability of one requested event for this run, decided once at start-up.
struct EventAvailability {
  std::string name;    ///< as requested, e.g. "cycles:u"
  std::string status;  ///< "available" or "unavailable"
  /// Why unavailable; for an available event a caveat ("user mode only: ...").
  std::string reason;
  std::string
      pmu;  ///< libpfm4's PMU that encoded it (not proof the kernel has it)
  bool exclude_kernel = false;
  bool exclude_user = false;
  std::string encoding;  ///< libpfm4's fully qualified encoding, or ""
  std::string via;  ///< how a name libpfm4 did not know was resolved, or ""
};

/// One event's reading for one thread over the windows since the last Reset().
struct CounterReading {
  std::string name;
  std::string status;  ///< "measured", "scaled" (multiplexed) or "unavailable"
  double value = 0;    ///< raw * enabled / running; meaningless if unavailable
  uint64_t raw = 0;
  uint64_t time_enabled_ns = 0, time_running_ns = 0;
  std::string reason;  ///< why unavailable
};

/// The counters of one thread. Created and used on that (pinned) thread only.
class ThreadCounters {
 public:
  virtual ~ThreadCounters() = default;
  /// Enables all counters (start of a window). Cheap: one ioctl per group.
  virtual void Start() = 0;
  /// Disables them (end of a window); values accumulate across windows until
  /// Reset().
  virtual void Stop() = 0;
  virtual void Reset() = 0;
  virtual std::vector<CounterReading> Read() = 0;
};

/// The run's counter configuration (one per process).
class CounterSession {
 public:
  /// Parses --events (ParseEventList) and probes each event once on the
  /// calling thread. Throws CounterSpecError for a malformed list, for a
  /// modifier libpfm4 rejects on an event it knows (naming the accepted ones:
  /// a typo fails fast), and for `task-clock:u` / `:k` (a software clock
  /// counts the whole CPU time whatever the modifier; `:u:k` is accepted).
  /// Unknown events (one list serves several machines), a missing PMU or
  /// refused permissions only mark the event unavailable. Without :u / :k the
  /// kernel is counted too; when that is refused (EACCES, paranoid >= 2) the
  /// event falls back to user only and says so (context-switches and
  /// cpu-migrations, counted in the kernel, are then unavailable; a clock
  /// still counts user + kernel). A name libpfm4 cannot find as typed gets a
  /// second chance through PortableEventCandidates / GenericSoftwareEvent.
  static std::unique_ptr<CounterSession> Create(const std::string& spec);
  virtual ~CounterSession() = default;
  virtual const std::vector<EventAvailability>& availability() const = 0;
  /// Opens this thread's counters (on the measured thread, after pinning):
  /// this thread only, disabled, valid after the session is destroyed. A
  /// per-thread open failure marks the event unavailable in its readings and
  /// is reported once per run (stderr and AvailabilityJson "problems").
  virtual std::unique_ptr<ThreadCounters> OpenForThisThread() = 0;
  /// The same without the page-fault software events (unavailable, reason
  /// `why`): for a point whose every operation is a fault it counts itself,
  /// where perf_sw_event's hook on every fault slows the timed cycle.
  virtual std::unique_ptr<ThreadCounters> OpenForThisThreadWithoutPageFaults(
      const std::string& why) = 0;
  /// One console line: "counters: task-clock page-faults measured; cycles
  /// unavailable (no PMU)".
  virtual std::string SummaryLine() const = 0;
  /// Availability table for the results' lockline context.
  virtual nlohmann::json AvailabilityJson() const = 0;
};

/// Splits --events=LIST|default|none into libpfm4 / `perf list` names with
/// optional ':' modifiers (:u user, :k kernel, :u:k both), without consulting
/// libpfm4 or the kernel. "none" gives {}; "default" (also as one item)
/// expands to kDefaultEvents. Throws CounterSpecError for an empty list, item
/// or modifier ("::" only as libpfm4's "pmu::event"), characters outside
/// [A-Za-z0-9_.:=-], "none" with other names, or a name listed twice.
std::vector<std::string> ParseEventList(const std::string& spec);

/// The default set, in this order.
inline constexpr const char* kDefaultEvents[] = {
    "cycles",           "instructions",   "cache-misses", "task-clock",
    "context-switches", "cpu-migrations", "page-faults"};

/// libpfm4 event strings to try, in order, for a portable name `base`
/// (case-insensitive, no modifiers) on the core PMU `pmu` ("spr", "icl",
/// "amd64_fam19h_zen4", ...); {} if not portable or the PMU is unknown.
/// Portable: perf's generic hardware names (cycles, instructions,
/// cache-references, cache-misses, branches, branch-misses, LLC-load-misses),
/// mapped as the kernel maps them (the tables in counters.cpp), used when
/// libpfm4's own `perf` PMU is not active (LIBPFM_FORCE_PMU); and lockline's
/// `hitm`: loads served by a modified line in another core's cache (on AMD
/// Zen, which has no HITM event: fills from another CCX's cache).
std::vector<std::string> PortableEventCandidates(const std::string& base,
                                                 const std::string& pmu);

/// perf's generic software event `base` (task-clock, cpu-clock, page-faults /
/// faults, minor-faults, major-faults, context-switches / cs, cpu-migrations
/// / migrations, alignment-faults, emulation-faults) as its
/// PERF_COUNT_SW_* config, or -1. lockline encodes these itself when libpfm4's
/// perf PMU is not active.
int GenericSoftwareEvent(const std::string& base);

/// Description of the fake PMU when lockline runs under the test shim
/// (tests/fake_pmu, LD_PRELOAD), found with dlsym(RTLD_DEFAULT,
/// "lockline_fake_pmu_description"); empty in every normal run. A run under
/// it records `counters.fake_pmu` in the context and says so on the console.
std::string FakePmuDescription();

/// A row's counter fields from every thread's readings (outer index = thread)
/// over `ops` operations: `counters` is the row's "counters" object (per_op,
/// status with "event:reason", scaling for scaled events, derived IPC /
/// cache-misses/op / hitm/op with status, value or null, and reason;
/// per_thread: results/SCHEMA.md), `metrics` "<event>/op" for every counted
/// event plus the derived metrics that could be computed (hitm/op from `hitm`
/// or an event named *HITM / XSNP_FWD). An unavailable count is never 0.
struct CounterRow {
  nlohmann::json counters;
  std::vector<std::pair<std::string, double>> metrics;
};
CounterRow CountersForRow(
    const std::vector<std::vector<CounterReading>>& per_thread, uint64_t ops);

/// Turns one event's deltas since Reset() into a reading (perf's own
/// multiplexing model, see perf_event_open(2) "read_format"): running ==
/// enabled > 0 -> "measured" (value = raw); 0 < running < enabled -> "scaled",
/// value = raw * enabled / running (the counter was on the PMU only
/// running/enabled of the time; the ratio is kept in the time fields); running
/// == 0 -> "unavailable" ("not counted (time_running 0)"), never a 0 count.
/// Times in ns. `zero_is_error` (set for cycles / instructions counting user
/// mode): a 0 count with time_running > 0 is "unavailable" (a PMU that does not
/// really count, e.g. a half-emulated vPMU), not a result.
CounterReading ClassifyReading(const std::string& name, uint64_t raw,
                               uint64_t time_enabled_ns,
                               uint64_t time_running_ns,
                               bool zero_is_error = false);

/// Sums per-thread readings (outer index = thread, inner = event, same event
/// order in every thread, as Read() returns them) into one reading per event:
/// raw, value and times add up; the status is the worst seen (unavailable >
/// scaled > measured) with that thread's reason. Divide `value` by the total
/// operation count for per-op counters (cycles/op ...). Returns {} for no
/// threads; throws std::invalid_argument if threads disagree on the event list.
std::vector<CounterReading> SumReadings(
    const std::vector<std::vector<CounterReading>>& per_thread);

/// An event name without its "pmu::" prefix and modifiers, lower case
/// ("cpu_core::Cycles:u" -> "cycles").
std::string EventBaseName(const std::string& name);
/// The modifiers of an event name ("" or ":u" ...), to pair events counted
/// alike.
std::string EventModifiers(const std::string& name);

/// True if /sys/bus/event_source/devices has a core PMU (cpu, cpu_core,
/// armv8_*, cpum_cf, ...): libpfm4 names a PMU from CPUID even in a VM without
/// a vPMU. Under the test shim, the shim's answer.
bool KernelHasHardwarePmu();

/// Value PerfEventParanoid() returns when procfs cannot be read.
inline constexpr int kParanoidUnreadable = -1000;

/// /proc/sys/kernel/perf_event_paranoid (-1..2 upstream, 3 on Debian-patched
/// kernels), or kParanoidUnreadable.
int PerfEventParanoid();

/// Human reason for a failed perf_event_open (errno `err`) of one event:
/// `hardware` = not a software/tracepoint event; `kernel_counting` =
/// exclude_kernel was 0. Maps ENOENT / EOPNOTSUPP / ENODEV without a kernel
/// hardware PMU to "no hardware PMU exposed by the kernel", EACCES to
/// perf_event_paranoid (the value read from procfs), EPERM to seccomp /
/// CAP_PERFMON.
std::string ExplainPerfOpenError(int err, bool hardware, bool kernel_counting,
                                 bool kernel_has_hw_pmu, int paranoid);

}  // namespace lockline
