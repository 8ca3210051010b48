// Per-thread perf counters, enabled only inside windows (libpfm4 encodes,
// perf_event_open counts). Every event is `measured`, `scaled` (multiplexed)
// or `unavailable` with a reason: a missing counter is never 0.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

struct perf_event_attr;  // <linux/perf_event.h>

namespace lockline {

/// Bad --events input; what() names the value and what is accepted.
class CounterSpecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One requested event, decided once at start-up.
struct EventAvailability {
  std::string name;    ///< as requested, e.g. "cycles:u"
  std::string status;  ///< "available" or "unavailable"
  /// Why unavailable; for an available event a caveat ("user mode only: ...").
  std::string reason;
  std::string pmu;  ///< libpfm4's PMU that encoded it
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
  /// Around a window (one ioctl per group); values add up until Reset().
  virtual void Start() = 0;
  virtual void Stop() = 0;
  virtual void Reset() = 0;
  virtual std::vector<CounterReading> Read() = 0;
};

/// The run's counter configuration (one per process).
class CounterSession {
 public:
  /// Parses --events and probes each event once on this thread. Throws
  /// CounterSpecError for a malformed list, a modifier libpfm4 rejects, and
  /// `task-clock:u` / `:k`; anything else only marks the event unavailable.
  /// Refused kernel counting (paranoid >= 2) falls back to user only.
  static std::unique_ptr<CounterSession> Create(const std::string& spec);
  virtual ~CounterSession() = default;
  virtual const std::vector<EventAvailability>& availability() const = 0;
  /// Opens this thread's counters, disabled (after pinning; they outlive the
  /// session); a failed open marks the event unavailable, reported once.
  virtual std::unique_ptr<ThreadCounters> OpenForThisThread() = 0;
  /// The same without the page-fault software events (unavailable, `why`):
  /// perf_sw_event's hook on every fault slows a fault-per-op point.
  virtual std::unique_ptr<ThreadCounters> OpenForThisThreadWithoutPageFaults(
      const std::string& why) = 0;
  /// One console line: "counters: ... measured; cycles unavailable (no PMU)".
  virtual std::string SummaryLine() const = 0;
  /// Availability table for the results' lockline context.
  virtual nlohmann::json AvailabilityJson() const = 0;
};

/// Splits --events=LIST|default|none into names with optional :u / :k
/// modifiers, without libpfm4; "default" (also an item) is kDefaultEvents.
/// Throws CounterSpecError for an empty list, item or modifier, characters
/// outside [A-Za-z0-9_.:=-], "none" with other names, or a repeated name.
std::vector<std::string> ParseEventList(const std::string& spec);

/// The default set, in this order.
inline constexpr const char* kDefaultEvents[] = {
    "cycles",           "instructions",   "cache-misses", "task-clock",
    "context-switches", "cpu-migrations", "page-faults"};

/// libpfm4 event strings to try, in order, for portable name `base` (perf's
/// hardware names as the kernel maps them; `hitm`: loads served by another
/// core's modified line) on core PMU `pmu`; {} if unknown.
std::vector<std::string> PortableEventCandidates(const std::string& base,
                                                 const std::string& pmu);

/// PERF_COUNT_SW_* of perf's software event `base` (task-clock, cs, ...), -1.
int GenericSoftwareEvent(const std::string& base);

/// The test shim's (tests/fake_pmu, LD_PRELOAD) description; "" normally.
std::string FakePmuDescription();

/// A row's "counters" object (results/SCHEMA.md) and "<event>/op" and derived
/// metrics from every thread's readings (outer index) over `ops` operations.
struct CounterRow {
  nlohmann::json counters;
  std::vector<std::pair<std::string, double>> metrics;
};
CounterRow CountersForRow(
    const std::vector<std::vector<CounterReading>>& per_thread, uint64_t ops);

/// One event's deltas since Reset() as a reading (times in ns): running ==
/// enabled > 0 "measured"; 0 < running < enabled "scaled", value = raw *
/// enabled / running; running == 0 "unavailable", as is a 0 count that ran
/// when `zero_is_error` (a half-emulated vPMU).
CounterReading ClassifyReading(const std::string& name, uint64_t raw,
                               uint64_t time_enabled_ns,
                               uint64_t time_running_ns,
                               bool zero_is_error = false);

/// Sums per-thread readings per event, with the worst status and its reason;
/// {} for no threads; std::invalid_argument if threads' event lists differ.
std::vector<CounterReading> SumReadings(
    const std::vector<std::vector<CounterReading>>& per_thread);

/// Lower-case name without "pmu::" and modifiers ("cpu_core::Cycles:u" ->
/// "cycles").
std::string EventBaseName(const std::string& name);
/// The modifiers of an event name ("" or ":u" ...).
std::string EventModifiers(const std::string& name);

/// True if /sys/bus/event_source/devices has a core PMU (libpfm4 names one
/// from CPUID even without a vPMU); under the test shim, its answer.
bool KernelHasHardwarePmu();

inline constexpr int kParanoidUnreadable = -1000;
/// /proc/sys/kernel/perf_event_paranoid (3 on Debian), or kParanoidUnreadable.
int PerfEventParanoid();

/// perf_event_open(2) of `attr` for `pid` (0: this thread) on any CPU in
/// `group_fd`'s group (-1: none), close-on-exec: the fd, or -1 with errno.
int PerfEventOpen(perf_event_attr* attr, pid_t pid, int group_fd);

/// Human reason for a failed perf_event_open (errno `err`) of one event.
std::string ExplainPerfOpenError(int err, bool hardware, bool kernel_counting,
                                 bool kernel_has_hw_pmu, int paranoid);

}  // namespace lockline
