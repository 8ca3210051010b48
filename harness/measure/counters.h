// Per-thread perf counters around measurement windows: events named as libpfm4
// / perf list spell them, encoded with libpfm4's perf_event OS layer, opened
// per thread with perf_event_open, enabled only inside windows, read with
// time_enabled / time_running. Honest about what could not be counted: every
// event is `measured`, `scaled` (multiplexed) or `unavailable` with a reason; a
// missing counter is never reported as 0.
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
  /// Why unavailable (no PMU, unknown event for PMU X, EACCES ...); for an
  /// available event, a caveat such as "user mode only: kernel counting
  /// refused (EACCES): perf_event_paranoid=2 ...".
  std::string reason;
  /// libpfm4 PMU that encoded it ("perf" for generic and software events,
  /// "amd64_fam19h_zen4" for raw ones); not proof that the kernel has it.
  std::string pmu;
  bool exclude_kernel = false;
  bool exclude_user = false;
  /// libpfm4's fully qualified encoding of what is counted, e.g.
  /// "perf::PERF_COUNT_SW_PAGE_FAULTS:u=1:k=1:..." (empty if not encoded).
  std::string encoding;
  /// How a name libpfm4 could not encode as typed was resolved (empty when
  /// libpfm4 knew it): "portable name: ..." (see PortableEventCandidates).
  std::string via;
};

/// One event's reading for one thread over the windows since the last Reset().
struct CounterReading {
  std::string name;
  std::string status;  ///< "measured", "scaled" (multiplexed) or "unavailable"
  double value = 0;  ///< scaled value (raw * enabled / running); meaningless if
                     ///< unavailable
  uint64_t raw = 0;
  uint64_t time_enabled_ns = 0, time_running_ns = 0;
  std::string
      reason;  ///< for unavailable (incl. "time_running 0: not counted")
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
  /// Parses --events=LIST|default|none (comma-separated names, optional :u /
  /// :k) and probes availability once. Throws CounterSpecError for a malformed
  /// list or modifier. Unknown events, a missing PMU, or refused permissions do
  /// not throw: the event is marked unavailable and the run goes on.
  ///
  /// Modifier policy: a modifier libpfm4 rejects for an event it knows
  /// (`cycles:x`, a unit mask the event lacks) throws CounterSpecError listing
  /// the event's accepted modifiers, so a typo fails fast instead of silently
  /// dropping a counter; an event name libpfm4 does not know (e.g. Intel's
  /// MEM_LOAD_L3_HIT_RETIRED:XSNP_HITM on AMD) is only marked unavailable, so
  /// one list can be used on several machines. Without :u / :k the kernel is
  /// counted too; if that is refused (EACCES, perf_event_paranoid >= 2
  /// unprivileged) the event falls back to user only (exclude_kernel) and says
  /// so; context-switches and cpu-migrations are then unavailable, because they
  /// happen in the kernel and always read 0 user-only. Probing opens each event
  /// once on the calling thread (pid 0, cpu -1).
  ///
  /// Software clocks (task-clock, cpu-clock) count the thread's whole CPU time
  /// whatever exclude_user / exclude_kernel say (the kernel ignores both for
  /// them), so `task-clock:u` or `:k` throws CounterSpecError instead of
  /// reporting the whole as a half (`:u:k` is accepted); when kernel counting
  /// is refused, a clock is opened with exclude_kernel only to pass the
  /// permission check and its reason says it still counts user + kernel time.
  ///
  /// Names libpfm4 cannot find as typed get a second chance through
  /// PortableEventCandidates (perf's generic names when libpfm4's perf PMU is
  /// not active, e.g. under LIBPFM_FORCE_PMU, and lockline's `hitm`).
  static std::unique_ptr<CounterSession> Create(const std::string& spec);
  virtual ~CounterSession() = default;
  virtual const std::vector<EventAvailability>& availability() const = 0;
  /// Opens this thread's counters (call on the thread to be measured, after
  /// pinning). Counters count this thread only (no inherit), are opened
  /// disabled and keep working if the session object is destroyed first. A
  /// per-thread open failure marks that event unavailable in this thread's
  /// readings and is reported once per run (stderr and AvailabilityJson
  /// "problems").
  virtual std::unique_ptr<ThreadCounters> OpenForThisThread() = 0;
  /// OpenForThisThread without the page-fault software events (page-faults,
  /// minor-faults, major-faults and their :u / :k forms): they are not
  /// opened, and their readings are "unavailable" with reason `why`. For a
  /// point whose every operation is a page fault and which counts its faults
  /// itself (getrusage): the software event runs a hook on every fault
  /// (perf_sw_event), which slows such a point's timed cycle measurably.
  virtual std::unique_ptr<ThreadCounters> OpenForThisThreadWithoutPageFaults(
      const std::string& why) = 0;
  /// One console line: "counters: task-clock page-faults measured; cycles
  /// unavailable (no PMU)".
  virtual std::string SummaryLine() const = 0;
  /// Availability table for the results' lockline context.
  virtual nlohmann::json AvailabilityJson() const = 0;
};

/// Splits --events=LIST|default|none into event names, without consulting
/// libpfm4 or the kernel. "none" gives {}; "default" (also usable as one list
/// item, e.g. "default,MEM_LOAD_L3_HIT_RETIRED") expands to kDefaultEvents.
/// Names are libpfm4 / `perf list` spellings with optional ':'-separated
/// modifiers; perf's combined privilege modifiers `:uk` / `:ku` are rewritten
/// to libpfm4's `:u:k`. Modifier semantics (libpfm4's): `:u` counts user only,
/// `:k` kernel only, `:u:k` both (same as no modifier when permitted). Throws
/// CounterSpecError for an empty list or item, an empty modifier
/// ("cycles::u" is allowed only as libpfm4's PMU prefix "pmu::event"),
/// characters outside [A-Za-z0-9_.:=-], "none" mixed with other names, or a
/// name listed twice.
std::vector<std::string> ParseEventList(const std::string& spec);

/// The default set, in this order.
inline constexpr const char* kDefaultEvents[] = {
    "cycles",           "instructions",   "cache-misses", "task-clock",
    "context-switches", "cpu-migrations", "page-faults"};

/// libpfm4 event strings to try, in order, for a portable name on the core PMU
/// `pmu` (a libpfm4 PMU name such as "spr", "icl", "skx",
/// "amd64_fam19h_zen4"); {} if `base` (an event name without modifiers,
/// case-insensitive) is not portable or the PMU family is unknown.
///
/// Portable names are perf's generic hardware names -- cycles, instructions,
/// cache-references, cache-misses, branches / branch-instructions,
/// branch-misses, LLC-load-misses -- mapped as the kernel maps them for that
/// PMU (Intel: linux arch/x86/events/intel/core.c intel_perfmon_event_map,
/// cache-misses = LONGEST_LAT_CACHE.MISS 0x412e; AMD Zen:
/// arch/x86/events/amd/core.c amd_zen2_perfmon_event_map, cache-misses =
/// 0x0964 L2 misses), used only when libpfm4's own `perf` PMU is not active
/// (LIBPFM_FORCE_PMU activates the forced model only), and lockline's `hitm`:
/// loads served by a modified line in another core's cache -- Intel
/// MEM_LOAD_L3_HIT_RETIRED.XSNP_HITM (skx, icl; named XSNP_FWD from spr on),
/// AMD Zen 2/3/4 demand data-cache fills from another CCX's cache
/// (DEMAND_DATA_CACHE_FILLS_FROM_SYSTEM near/far cache: cache-to-cache
/// transfers, clean or modified: Zen has no HITM event in its core PMU).
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

/// A row's counter fields from every thread's readings (outer index = thread,
/// as SumReadings takes them) over `ops` operations. `counters` is the row's
/// "counters" object: {"per_op": {event: value / ops}, "status": {event:
/// measured|scaled|unavailable, "event:reason": why}, "scaling": {event:
/// time_enabled / time_running} for scaled events, "derived": {metric:
/// {"status", "value" (null if unavailable), "reason"}} for IPC,
/// cache-misses/op and hitm/op, "per_thread": [{event: value or null}]}.
/// `metrics` gets "<event>/op" for every counted event plus the derived
/// metrics that could be computed (IPC = instructions / cycles over the same
/// windows; cache-misses/op; hitm/op from the `hitm` event or an event whose
/// name has HITM / XSNP_FWD). An unavailable count is never turned into 0.
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

/// The kernel's answer to "is there a hardware PMU": true if
/// /sys/bus/event_source/devices has a core PMU (`cpu`, hybrid `cpu_core` /
/// `cpu_atom`, arm `armv8_*` / `armv7_*`, s390 `cpum_cf`). libpfm4 cannot say:
/// it names the CPU's PMU model from CPUID even in a VM without a vPMU. Under
/// the test shim (FakePmuDescription() non-empty) the shim's answer.
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
