// Per-thread perf counters around measurement windows: events named as libpfm4 / perf list spell
// them, encoded with libpfm4's perf_event OS layer, opened per thread with perf_event_open,
// enabled only inside windows, read with time_enabled / time_running. Honest about what could
// not be counted: every event is `measured`, `scaled` (multiplexed) or `unavailable` with a
// reason; a missing counter is never reported as 0.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace lockline {

/// Bad --events input (unparseable list or modifier); what() names the value and what is accepted.
class CounterSpecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Availability of one requested event for this run, decided once at start-up.
struct EventAvailability {
  std::string name;          ///< as requested, e.g. "cycles:u"
  std::string status;        ///< "available" or "unavailable"
  std::string reason;        ///< why unavailable (no PMU, unknown event for PMU X, EACCES ...)
  std::string pmu;           ///< libpfm4 PMU that encoded it (e.g. "perf", "amd64_fam19h_zen4")
  bool exclude_kernel = false;
  bool exclude_user = false;
};

/// One event's reading for one thread over the windows since the last Reset().
struct CounterReading {
  std::string name;
  std::string status;   ///< "measured", "scaled" (multiplexed) or "unavailable"
  double value = 0;     ///< scaled value (raw * enabled / running); meaningless if unavailable
  uint64_t raw = 0;
  uint64_t time_enabled_ns = 0, time_running_ns = 0;
  std::string reason;   ///< for unavailable (incl. "time_running 0: not counted")
};

/// The counters of one thread. Created and used on that (pinned) thread only.
class ThreadCounters {
 public:
  virtual ~ThreadCounters() = default;
  /// Enables all counters (start of a window). Cheap: one ioctl per group.
  virtual void Start() = 0;
  /// Disables them (end of a window); values accumulate across windows until Reset().
  virtual void Stop() = 0;
  virtual void Reset() = 0;
  virtual std::vector<CounterReading> Read() = 0;
};

/// The run's counter configuration (one per process).
class CounterSession {
 public:
  /// Parses --events=LIST|default|none (comma-separated names, optional :u / :k) and probes
  /// availability once. Throws CounterSpecError for a malformed list or modifier. Unknown events,
  /// a missing PMU, or refused permissions do not throw: the event is marked unavailable and
  /// the run goes on.
  static std::unique_ptr<CounterSession> Create(const std::string& spec);
  virtual ~CounterSession() = default;
  virtual const std::vector<EventAvailability>& availability() const = 0;
  /// Opens this thread's counters (call on the thread to be measured, after pinning).
  virtual std::unique_ptr<ThreadCounters> OpenForThisThread() = 0;
  /// One console line: "counters: task-clock page-faults measured; cycles unavailable (no PMU)".
  virtual std::string SummaryLine() const = 0;
  /// Availability table for the results' lockline context.
  virtual nlohmann::json AvailabilityJson() const = 0;
};

}  // namespace lockline
