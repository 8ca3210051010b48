// Shared machinery of the kernel_* families: will-it-scale-style tasks run by
// lockline's own pinned team threads (`tasks:threads`, one mm) or by one child
// process per team thread (`tasks:processes`, bench/child_task.h, forked in
// SetupThread so fork is not timed; the child inherits the thread's PU
// binding). Each task reports an exact op count per window plus its own
// getrusage (RUSAGE_THREAD for threads, RUSAGE_SELF of the child). Kernel lock
// evidence (harness/measure/kernel_probe.h) is enabled only around the task's
// own work; a child's counters are opened by its team thread (which owns the
// fds and the sample ring), so no inherited counters and no decoding in the
// child. Children run only async-signal-safe code (the harness is
// multithreaded): syscalls and memory prepared before fork.
#pragma once

#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/child_task.h"
#include "bench/common.h"
#include "harness/family.h"
#include "harness/machine/cpu.h"
#include "harness/machine/helpers.h"
#include "harness/measure/kernel_probe.h"

namespace lockline::kernel_tasks {

inline constexpr std::size_t kPage = 4096;

/// Every how many contention_begin events one callchain sample is taken: 1
/// samples every event (exact attribution, but a kernel stack walk per
/// contended lock acquisition perturbs what is measured); 4 keeps the
/// perturbation small while contended points still give hundreds of samples.
inline constexpr uint64_t kSamplePeriod = 4;
/// Task-clock sampling period of the spin profile: 100 us (10 000 samples
/// per task-second; a 256 KiB ring holds ~2000 samples per window).
inline constexpr uint64_t kSpinPeriodNs = 100'000;

enum class Tasks { kThreads, kProcesses };
inline const char* TasksName(Tasks t) {
  return t == Tasks::kThreads ? "threads" : "processes";
}

/// What one task did in one window. A plain struct: children send it through
/// a pipe.
struct TaskWindow {
  uint64_t ops = 0;     ///< the family's operations
  uint64_t pages = 0;   ///< 4 KiB pages allocated and freed (lru, zone)
  uint64_t minflt = 0;  ///< getrusage minor faults over the op loop
  uint64_t bytes_sent = 0, bytes_received = 0;  ///< put_page
  uint64_t checked = 0;  ///< messages whose sequence header was checked
  double user_s = 0, sys_s = 0;
  char error[160] = {};

  void Add(const TaskWindow& o) {
    kernel::AddFields(*this, o, &TaskWindow::ops, &TaskWindow::pages,
                      &TaskWindow::minflt, &TaskWindow::bytes_sent,
                      &TaskWindow::bytes_received, &TaskWindow::checked,
                      &TaskWindow::user_s, &TaskWindow::sys_s);
    child_task::KeepFirstError(error, o.error);
  }
  /// Sets minflt, user_s and sys_s from getrusage readings around the op
  /// loop.
  void SetUsage(const rusage& a, const rusage& b) {
    const child_task::Usage u = child_task::UsageBetween(a, b);
    minflt = u.minflt;
    user_s = u.user_s;
    sys_s = u.sys_s;
  }
};

/// A fresh private anonymous mapping of `pages` 4 KiB pages, THP off
/// (MADV_NOHUGEPAGE), nothing faulted in yet: what each page_fault1 batch maps.
/// Null with `err` set when mmap fails. Async-signal-safe.
inline char* MapAnonBatch(std::size_t pages, char* err, std::size_t errlen) {
  const std::size_t bytes = pages * kPage;
  void* m = MapAnon(bytes, MAP_PRIVATE | MAP_NORESERVE);
  if (m == nullptr) {
    std::snprintf(err, errlen, "mmap of %zu bytes failed: %s", bytes,
                  std::strerror(errno));
    return nullptr;
  }
  madvise(m, bytes, MADV_NOHUGEPAGE);
  return static_cast<char*>(m);
}

/// Faults in `pages` pages of a MapAnonBatch one store per page, then munmaps
/// it: will-it-scale's page_fault1 loop (tests/page_fault1.c), one op per page.
/// Checks `stop` every 64 pages; a stopped batch is still unmapped. Returns the
/// pages touched, or sets `err`. Async-signal-safe.
inline uint64_t AnonFaultBatch(std::size_t pages, const std::atomic<bool>& stop,
                               char* err, std::size_t errlen) {
  const std::size_t bytes = pages * kPage;
  char* const p = MapAnonBatch(pages, err, errlen);
  if (p == nullptr) return 0;
  std::size_t i = 0;
  for (; i < pages; ++i) {
    *reinterpret_cast<volatile char*>(p + i * kPage) = 1;
    if ((i & 63) == 63 && stop.load(std::memory_order_relaxed)) {
      ++i;
      break;
    }
  }
  munmap(p, bytes);
  return i;
}

/// A page_fault1 task's batch kept mapped between windows, half-touched, so
/// the task can run out of phase with its siblings (PhasedAnonFaultCycle).
struct PhasedBatch {
  char* map = nullptr;      ///< the open batch, or null
  std::size_t touched = 0;  ///< its pages [0, touched) are faulted in
};

/// Maps a fresh batch into `b` (MapAnonBatch), none of it faulted in. False
/// with `err` set when mmap fails. Async-signal-safe.
inline bool OpenPhasedBatch(PhasedBatch& b, std::size_t pages, char* err,
                            std::size_t errlen) {
  b.map = MapAnonBatch(pages, err, errlen);
  b.touched = 0;
  return b.map != nullptr;
}

/// Faults in `b`'s pages [touched, to), one store per page; returns how many.
inline uint64_t FaultInTo(PhasedBatch& b, std::size_t to) {
  for (std::size_t i = b.touched; i < to; ++i)
    *reinterpret_cast<volatile char*>(b.map + i * kPage) = 1;
  const uint64_t n = to - b.touched;
  b.touched = to;
  return n;
}

/// Unmaps `b`'s open batch, if any.
inline void ReleasePhasedBatch(PhasedBatch& b, std::size_t pages) {
  if (b.map != nullptr) munmap(b.map, pages * kPage);
  b.map = nullptr;
  b.touched = 0;
}

/// One whole alloc/free cycle of a page_fault1 task `offset` pages into its
/// cycle (0 <= offset < pages): faults in the rest of the open batch `b`
/// (mapping one first when none is open), munmaps it, then maps the next
/// batch and faults in its first `offset` pages, leaving it open. After
/// PrimePhasedBatch every call faults in and frees `pages` pages, as
/// AnonFaultBatch does (exactly so at offset 0), but its munmap falls `offset`
/// pages before the window's end: tasks with spread offsets unmap at different
/// moments, as drifted will-it-scale page_fault1 tasks do. Returns the pages
/// faulted in; when an mmap fails, `err` says so and the count is short (0
/// when no batch could be mapped). Async-signal-safe.
inline uint64_t PhasedAnonFaultCycle(PhasedBatch& b, std::size_t pages,
                                     std::size_t offset, char* err,
                                     std::size_t errlen) {
  if (b.map == nullptr && !OpenPhasedBatch(b, pages, err, errlen)) return 0;
  uint64_t n = FaultInTo(b, pages);
  ReleasePhasedBatch(b, pages);
  if (offset > 0) {
    if (!OpenPhasedBatch(b, pages, err, errlen)) return n;
    n += FaultInTo(b, std::min(offset, pages));
  }
  return n;
}

/// Opens `b` `offset` pages into its cycle before the first window (untimed):
/// maps a batch and faults in its first `offset` pages (nothing at offset 0
/// or when a batch is open). Returns false with `err` set when mmap fails.
/// Async-signal-safe.
inline bool PrimePhasedBatch(PhasedBatch& b, std::size_t pages,
                             std::size_t offset, char* err,
                             std::size_t errlen) {
  if (offset == 0 || b.map != nullptr) return true;
  if (!OpenPhasedBatch(b, pages, err, errlen)) return false;
  FaultInTo(b, std::min(offset, pages));
  return true;
}

/// Default length of an evidence window when the point's window is unknown
/// (ctx.window_ns 0: a test driving SetupThread directly), ns.
inline constexpr uint64_t kDefaultEvidenceWindowNs = 50'000'000;
/// How often the evidence window's timer thread drains the zone->lock rings,
/// ns: they hold a whole window (ZoneRingPages) unless capped, when these
/// drains are what keeps them from dropping events.
inline constexpr uint64_t kLiveDrainNs = 2'000'000;

/// Two-sided 95 % Student t quantile for `df` degrees of freedom (table to
/// 30, then 1.96 + 2.4 / df as an approximation within 0.5 %).
inline double T975(double df) {
  static const double kT[] = {
      12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
      2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
      2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) return kT[0];
  if (df <= 30) return kT[static_cast<int>(df) - 1];
  return 1.96 + 2.4 / df;
}

/// Throughput cost of the evidence collection from per-window rates (ops/s):
/// ratio = mean(evidence) / mean(clean); the interval is Welch's on the
/// difference of mean log rates (Satterthwaite df), exponentiated, and is
/// null ("not resolved") with fewer than 2 windows a side.
inline nlohmann::json EvidenceOverhead(const std::vector<double>& clean,
                                       const std::vector<double>& evidence) {
  nlohmann::json j;
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  };
  const double mc = mean(clean), me = mean(evidence);
  j["clean_windows"] = clean.size();
  j["evidence_windows"] = evidence.size();
  j["clean_ops_per_s"] = mc;
  j["evidence_ops_per_s"] = me;
  j["ratio"] = mc > 0 ? me / mc : 0.0;
  j["ci95"] = nullptr;
  j["method"] =
      "ratio of mean per-window throughput, evidence windows over clean "
      "windows of the same repetition; 95 % interval: Welch t on the mean "
      "log rates, exponentiated";
  bool positive = true;
  for (double x : clean) positive &= x > 0;
  for (double x : evidence) positive &= x > 0;
  if (clean.size() < 2 || evidence.size() < 2 || !positive) {
    j["resolved"] = false;
    j["note"] = "not resolved: an interval needs 2 windows a side";
    return j;
  }
  auto logs = [](std::vector<double> v) {
    for (double& x : v) x = std::log(x);
    return v;
  };
  auto var = [&](const std::vector<double>& v, double m) {
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return s / static_cast<double>(v.size() - 1);
  };
  const auto lc = logs(clean), le = logs(evidence);
  const double mlc = mean(lc), mle = mean(le);
  const double a = var(lc, mlc) / static_cast<double>(lc.size());
  const double b = var(le, mle) / static_cast<double>(le.size());
  const double se = std::sqrt(a + b);
  const double df = se > 0 ? (a + b) * (a + b) /
                                 (a * a / static_cast<double>(lc.size() - 1) +
                                  b * b / static_cast<double>(le.size() - 1))
                           : 1e9;
  const double d = mle - mlc, h = T975(df) * se;
  j["ci95"] = {std::exp(d - h), std::exp(d + h)};
  j["resolved"] = std::exp(d + h) < 1 || std::exp(d - h) > 1;
  return j;
}

/// A workload whose tasks run a family's op loop (RunOps) as threads or
/// child processes. Timed windows (RunWindow) are clean: no tracepoint, no
/// sampling, no /proc read. The kernel evidence (lock contention tracepoints
/// and callchain samples, the spin profile, vmstat deltas, zone->lock holds
/// where the family asks) comes from evidence windows of the same point: the
/// same op loop, tasks and window length, half before the first timed window
/// (SetupThread) and half after the last (TeardownThread), bracketing drift;
/// rows report their throughput beside the clean one (EvidenceOverhead).
/// `evidence_windows` 0 (--evidence=off): no evidence window, no perf event.
class KernelTaskWorkload : public Workload {
 public:
  KernelTaskWorkload(Tasks tasks, int threads)
      : tasks_(tasks),
        threads_(threads),
        evidence_(threads, kSamplePeriod, kSpinPeriodNs),
        state_(static_cast<std::size_t>(threads)) {}
  ~KernelTaskWorkload() override {
    if (timer_.joinable()) timer_.join();
    for (auto& t : state_) t.child.Stop();
    if (shared_) munmap(shared_, SharedBytes());
  }

  bool shares_lines() const { return false; }

  /// Evidence windows per repetition (0: --evidence=off). Call before
  /// Prepare.
  void SetEvidenceWindows(int n) { evidence_windows_ = std::max(n, 0); }
  /// SetEvidenceWindows(env.evidence_windows), and the evidence timer's PU by
  /// the helper rule (harness/machine/helpers.h), never a measured thread's.
  /// With no free PU the timer would perturb the evidence it drains: the
  /// point has no evidence windows and the row says why (evidence.off); its
  /// timed windows are measured as usual. With --oversubscribe the timer
  /// shares the least loaded measured PU (evidence_timer_note). Unbound off
  /// the host topology.
  void SetEvidenceWindows(const PointEnv& env) {
    SetEvidenceWindows(env.evidence_windows);
    if (evidence_windows_ == 0 || env.topology == nullptr ||
        env.plan == nullptr)
      return;
    const auto places =
        PlaceHelpersNear(env.topology->usable_pus(), *env.plan, 1,
                         {.allow_shared_pu = true, .topo = env.topology});
    if (places.empty()) return;
    if (places.front().shares_measured_pu && !env.oversubscribe) {
      evidence_windows_ = 0;
      evidence_off_reason_ =
          "no evidence windows at " + std::to_string(env.threads) +
          " threads: the evidence timer has no PU of its own (every usable PU "
          "runs a measured task) and would share measured PU " +
          std::to_string(places.front().pu) +
          "; the evidence comes from the points with fewer threads "
          "(--oversubscribe lets it share, flagged)";
      return;
    }
    timer_place_ = places.front();
    if (env.topology->is_host()) timer_topo_ = env.topology;
  }
  int evidence_windows() const { return evidence_windows_; }

  /// The op loop of task `index` for one window: runs until `stop`, returns
  /// what it did. In tasks:processes it runs in the child (async-signal-safe
  /// code only).
  virtual TaskWindow RunOps(int index, const std::atomic<bool>& stop) = 0;

  /// Family set-up before the team's tasks start (memfds, sockets, buffers:
  /// everything a child must inherit). Called from Prepare.
  virtual void PrepareTasks(int /*threads*/) {}

  /// Sets up state a task keeps between windows (kernel_zone's batch open out
  /// of phase), untimed, from SetupThread: on the task's team thread or in
  /// its child. Errors go to `err`.
  virtual void PrimeTask(int /*index*/, char* /*err*/, std::size_t /*errlen*/) {
  }
  /// Whether PrimeTask does anything (no child round trip otherwise).
  virtual bool primes_tasks() const { return false; }
  /// Evidence windows before the timed ones: half, rounded up, or rounded
  /// down where the evidence must start from the state a timed window leaves
  /// (evidence_after_timed: kernel_zone).
  virtual bool evidence_after_timed() const { return false; }
  int EvidenceBefore() const {
    return (evidence_windows_ + (evidence_after_timed() ? 0 : 1)) / 2;
  }
  /// Undoes PrimeTask's state on a tasks:threads team thread (TeardownThread);
  /// a child's state ends with the child.
  virtual void ReleaseTask(int /*index*/) {}

  /// Fixed-work families (kernel_zone): how long a tasks:processes child may
  /// take for one window's work before it counts as hung, ns (0: only
  /// ChildLimitMs's default).
  virtual uint64_t FixedWorkLimitNs() const { return 0; }
  /// Pages a task moves through the allocator in one window, when the family
  /// knows (fixed work): its zone->lock rings hold them all (ZoneRingPages).
  virtual uint64_t PagesPerWindow() const { return 0; }

  void Prepare(int threads) override {
    threads_ = threads;
    barrier_.Reset(threads);
    if (evidence_windows_ == 0)
      evidence_.SetOff(evidence_off_reason_.empty()
                           ? "--evidence=off: no evidence windows"
                           : evidence_off_reason_);
    shared_ =
        static_cast<std::atomic<bool>*>(MapAnon(SharedBytes(), MAP_SHARED));
    if (shared_ == nullptr) {
      setup_error_ = std::string("mmap of shared stop flags failed: ") +
                     std::strerror(errno);
      return;
    }
    for (int i = 0; i < 2 * threads; ++i)
      new (&shared_[i]) std::atomic<bool>(false);
    PrepareTasks(threads);
  }

  void SetupThread(const ThreadCtx& ctx) override {
    if (!setup_error_.empty()) return;
    TaskState& t = state_[ctx.index];
    if (tasks_ == Tasks::kProcesses) StartChild(ctx.index, t);
    if (primes_tasks()) Prime(ctx.index, t);
    const int before = EvidenceBefore();
    if (before > 0) {
      OpenEvidence(ctx.index, t);
      EvidenceWindows(ctx, before);
      // The timed windows run with none of the evidence's perf events open
      // (not merely disabled): left open, a task's tracepoint and sampling
      // events slow the timed cycle measurably (docs/validation.md).
      evidence_.CloseTask(ctx.index);
    }
  }

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    if (!setup_error_.empty()) return 0;
    std::string died;
    const TaskWindow r =
        RunTask(ctx.index, stop, ctx.window_ns, /*evidence=*/false, &died);
    state_[ctx.index].total.Add(r);
    // A dead child fails the point with its own message (an error row, the
    // run goes on), not as a broken invariant.
    if (!died.empty()) throw std::runtime_error(died);
    return r.ops;
  }

  void TeardownThread(const ThreadCtx& ctx) override {
    const int after = evidence_windows_ - EvidenceBefore();
    if (setup_error_.empty() && after > 0) {
      OpenEvidence(ctx.index, state_[ctx.index]);
      EvidenceWindows(ctx, after);
    }
    evidence_.CloseTask(ctx.index);
    state_[ctx.index].child.Stop();
    if (tasks_ == Tasks::kThreads) ReleaseTask(ctx.index);
  }

  /// Sum of all tasks' clean (timed) windows so far.
  TaskWindow Total() const {
    TaskWindow s;
    for (const auto& t : state_) s.Add(t.total);
    return s;
  }
  /// Task `i`'s clean and evidence windows together (for exact accounting).
  const TaskWindow& TaskTotal(int i) const { return state_[i].all; }
  /// Windows task `i` ran, clean and evidence.
  int TaskWindows(int i) const { return state_[i].windows; }
  /// Task `i`'s child pid (tasks:processes), -1 without one.
  pid_t ChildPid(int i) const { return state_[i].child.pid(); }
  const kernel::KernelEvidence& evidence() const { return evidence_; }

  /// Common report: ops and rusage totals of the clean windows, per-task
  /// counts, the evidence windows' throughput and overhead, kernel evidence.
  void ReportCommon(PointReport& out, double window_seconds, uint64_t ops) {
    const TaskWindow s = Total();
    out.Metric("user_s", s.user_s);
    out.Metric("system_s", s.sys_s);
    out.Metric("minor_faults", static_cast<double>(s.minflt));
    // Ops per CPU-second of the tasks themselves (getrusage user + system):
    // what the kernel path costs, less sensitive than ops_per_s to how much
    // of the PUs a loaded machine leaves the tasks.
    const double cpu = s.user_s + s.sys_s;
    out.Metric("ops_per_cpu_s", Ratio(ops, cpu));
    out.Metric("task_cpu_share", Ratio(cpu, window_seconds * threads_));
    auto& d = out.details;
    d["tasks"] = TasksName(tasks_);
    nlohmann::json per = nlohmann::json::array();
    for (const auto& t : state_)
      per.push_back({{"ops", t.total.ops},
                     {"pages", t.total.pages},
                     {"minor_faults", t.total.minflt},
                     {"user_s", t.total.user_s},
                     {"system_s", t.total.sys_s}});
    d["per_task"] = per;
    if (tasks_ == Tasks::kProcesses)
      d["counters_note"] =
          "the row's perf counters (task-clock, page-faults ...) and cpu_util "
          "are the team threads', which sleep while their child processes "
          "work; the children's time is user_s / system_s";
    const std::vector<double> clean = Rates(&TaskState::clean);
    const std::vector<double> evid = Rates(&TaskState::evid);
    uint64_t evid_ops = 0;
    double evid_s = 0;
    nlohmann::json evid_window_s = nlohmann::json::array();
    for (const auto& [o, sec] : Windows(&TaskState::evid)) {
      evid_ops += o;
      evid_s += sec;
      evid_window_s.push_back(sec);
    }
    nlohmann::json e;
    e["mode"] = evidence_windows_ > 0 ? "separate windows" : "off";
    e["note"] =
        "ops_per_s and every throughput metric come from the timed windows, "
        "which run with no tracepoint, no sampling and no /proc read; the "
        "kernel evidence (details.kernel) comes from evidence windows of the "
        "same point and tasks, windows_before_timed of them before the timed "
        "windows and the rest after";
    if (evidence_windows_ > 0) {
      e["windows_per_repetition"] = evidence_windows_;
      e["windows_before_timed"] = EvidenceBefore();
      e["window_s"] = evid_window_s;
      e["ops"] = evid_ops;
      e["overhead"] = EvidenceOverhead(clean, evid);
      out.Metric("evidence_ops_per_s", Ratio(evid_ops, evid_s));
      out.Metric("evidence_throughput_ratio",
                 e["overhead"]["ratio"].get<double>());
    }
    const HelperColumns timer = HelperColumnsOf({timer_place_});
    d["evidence_timer_pu"] = timer.pu[0];
    d["evidence_timer_l3"] = timer.l3[0];
    d["evidence_timer_kind"] = timer.kind[0];
    if (!timer_place_.reason.empty())
      d["evidence_timer_note"] = timer_place_.reason;
    d["evidence"] = e;
    evidence_.Report(d, out.metrics, evid_ops);
  }

  /// "" or the first task error / setup error.
  std::string CommonErrors() const {
    if (!setup_error_.empty()) return setup_error_;
    TaskWindow s;
    for (const auto& t : state_) s.Add(t.all);
    if (s.error[0] != 0) return s.error;
    return "";
  }

 protected:
  Tasks tasks_;
  int threads_;
  std::string setup_error_;
  /// The family counts zone->lock holds in its evidence windows (call from
  /// the constructor).
  void CountZoneLock() { evidence_.CountZoneLock(); }

 private:
  struct Span {
    uint64_t start_ns = 0, end_ns = 0, ops = 0;
  };
  struct TaskState {
    TaskWindow total;  ///< clean windows
    TaskWindow all;    ///< clean and evidence windows
    int windows = 0;   ///< clean and evidence windows
    std::vector<Span> clean, evid;
    child_task::ChildTask<TaskWindow> child;  ///< tasks:processes
  };

  // Per window k (over tasks): ops summed, seconds from the first task's
  // start to the last task's end (as harness/measure/team.cpp times a window).
  std::vector<std::pair<uint64_t, double>> Windows(
      std::vector<Span> TaskState::*which) const {
    std::vector<std::pair<uint64_t, double>> out;
    std::size_t n = SIZE_MAX;
    for (const auto& t : state_) n = std::min(n, (t.*which).size());
    if (state_.empty()) n = 0;
    for (std::size_t k = 0; k < n; ++k) {
      uint64_t ops = 0, first = UINT64_MAX, last = 0;
      for (const auto& t : state_) {
        const Span& s = (t.*which)[k];
        ops += s.ops;
        first = std::min(first, s.start_ns);
        last = std::max(last, s.end_ns);
      }
      out.emplace_back(ops, last > first ? (last - first) / 1e9 : 0.0);
    }
    return out;
  }
  std::vector<double> Rates(std::vector<Span> TaskState::*which) const {
    std::vector<double> r;
    for (const auto& [ops, sec] : Windows(which))
      if (sec > 0) r.push_back(static_cast<double>(ops) / sec);
    return r;
  }

  // `count` evidence windows on every task (each team thread calls it from
  // SetupThread / TeardownThread): the tasks leave a barrier together, task 0
  // starts a timer thread that ends the window and drains the zone->lock
  // rings meanwhile. A dead child is thrown after the last barrier, so no
  // task is left waiting.
  void EvidenceWindows(const ThreadCtx& ctx, int count) {
    if (evidence_windows_ == 0) return;
    const int i = ctx.index;
    const uint64_t w =
        ctx.window_ns > 0 ? ctx.window_ns : kDefaultEvidenceWindowNs;
    std::string died;
    for (int k = 0; k < count; ++k) {
      barrier_.Wait();
      if (i == 0) {
        estop_.store(false, std::memory_order_relaxed);
        evidence_.VmstatBegin();
        tasks_done_.store(0, std::memory_order_relaxed);
        timer_ = std::thread([this, w] { TimeEvidenceWindow(w); });
      }
      barrier_.Wait();
      RunTask(i, estop_, w, /*evidence=*/true, &died);
      tasks_done_.fetch_add(1, std::memory_order_release);
      barrier_.Wait();
      if (i == 0) {
        timer_.join();
        evidence_.VmstatEnd();
      }
    }
    barrier_.Wait();  // task 0's join and vmstat before anyone moves on
    if (!died.empty()) throw std::runtime_error(died);
  }

  // One window of task `index` until `stop` (tasks:processes: in its child,
  // planned to end `window_ns` after the start), the evidence events enabled
  // around it when `evidence`; logged in the task's spans and totals. A dead
  // child sets *died unless it is set already.
  TaskWindow RunTask(int index, const std::atomic<bool>& stop,
                     uint64_t window_ns, bool evidence, std::string* died) {
    TaskState& t = state_[index];
    if (evidence) evidence_.Begin(index);
    Span s;
    s.start_ns = NowNs();
    std::string d;
    const TaskWindow r = tasks_ == Tasks::kProcesses
                             ? RunInChild(index, t, stop, window_ns, &d)
                             : MeasuredOps(index, RUSAGE_THREAD, stop);
    s.end_ns = NowNs();
    s.ops = r.ops;
    if (evidence) evidence_.End(index);
    (evidence ? t.evid : t.clean).push_back(s);
    t.all.Add(r);
    ++t.windows;
    if (died->empty()) *died = d;
    return r;
  }

  // The evidence window's timer thread: sleeps `w` ns in kLiveDrainNs slices
  // draining the zone->lock rings, sets the stop flag, drains until every
  // task has ended its window, and drains once more.
  void TimeEvidenceWindow(uint64_t w) {
    if (timer_topo_ != nullptr && timer_place_.pu >= 0) {
      try {
        BindThisThread(*timer_topo_, timer_place_.pu);
      } catch (const std::exception&) {
        timer_place_.reason += " (binding failed: inherited task 0's mask)";
      }
    }
    const uint64_t end = NowNs() + w;
    for (uint64_t now = NowNs(); now < end; now = NowNs()) {
      std::this_thread::sleep_for(
          std::chrono::nanoseconds(std::min(end - now, kLiveDrainNs)));
      evidence_.DrainLive();
    }
    estop_.store(true, std::memory_order_release);
    while (tasks_done_.load(std::memory_order_acquire) < threads_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      evidence_.DrainLive();
    }
    evidence_.DrainLive();
  }

  // The shared page(s): a stop flag per task, then a prime flag per task.
  std::size_t SharedBytes() const {
    return RoundUpToPage(2 * static_cast<std::size_t>(threads_) *
                         sizeof(std::atomic<bool>));
  }

  // RunOps bracketed by getrusage(who): RUSAGE_THREAD on a team thread,
  // RUSAGE_SELF in a child.
  TaskWindow MeasuredOps(int index, int who, const std::atomic<bool>& stop) {
    rusage a{}, b{};
    getrusage(who, &a);
    TaskWindow r = RunOps(index, stop);
    getrusage(who, &b);
    r.SetUsage(a, b);
    return r;
  }

  // Opens task `index`'s evidence events (on this team thread, or on its
  // child), for the evidence windows only.
  void OpenEvidence(int index, const TaskState& t) {
    if (evidence_windows_ == 0) return;
    if (tasks_ == Tasks::kProcesses) {
      if (t.child.started())
        evidence_.OpenTask(index, t.child.pid(), PagesPerWindow());
    } else {
      evidence_.OpenTask(index, 0, PagesPerWindow());
    }
  }

  // How long a tasks:processes parent waits for a child's result once a
  // window of `window_ns` is over before it kills the child and fails the
  // point: 10 x the window, at least 2 s (a child stops within one batch of
  // its op loop), or the family's fixed-work limit when longer.
  int64_t ChildLimitMs(uint64_t window_ns) const {
    return std::max({int64_t{2000},
                     static_cast<int64_t>(window_ns / 1'000'000) * 10,
                     static_cast<int64_t>(FixedWorkLimitNs() / 1'000'000)});
  }

  // PrimeTask for task `index`: directly on this team thread, or as one
  // priming run of its child (the prime flag set). Its error is the task's.
  void Prime(int index, TaskState& t) {
    if (tasks_ == Tasks::kThreads) {
      PrimeTask(index, t.all.error, sizeof t.all.error);
      return;
    }
    if (!t.child.started()) return;  // the first window reports it
    shared_[threads_ + index].store(true, std::memory_order_relaxed);
    TaskWindow p;
    std::string e = t.child.Request();
    if (e.empty())
      e = t.child.AwaitFor(&p, ChildLimitMs(kDefaultEvidenceWindowNs));
    shared_[threads_ + index].store(false, std::memory_order_relaxed);
    if (!e.empty()) std::snprintf(p.error, sizeof p.error, "%s", e.c_str());
    child_task::KeepFirstError(t.all.error, p.error);
  }

  // Forks the task's child (bench/child_task.h): each run is RunOps against
  // the task's shared stop flag.
  void StartChild(int index, TaskState& t) {
    const std::string e = t.child.Start([this, index] {
      if (shared_[threads_ + index].load(std::memory_order_relaxed)) {
        TaskWindow p;  // a priming run: no ops, only an error if any
        PrimeTask(index, p.error, sizeof p.error);
        return p;
      }
      return MeasuredOps(index, RUSAGE_SELF, shared_[index]);
    });
    if (!e.empty())
      std::snprintf(t.all.error, sizeof(t.all.error), "%s", e.c_str());
  }

  // The team thread's side of a child's window: start it, then block (ppoll
  // on the child's socket) until the window's planned end `window_ns` after
  // the start or a readable socket (the child died); past the planned end the
  // stop flag is polled every 1 ms. Then the child is stopped and its result
  // read within ChildLimitMs. A child that died or hung sets *died ("task 0
  // (pid 123) of tasks:processes: task died: signal 9 (Killed)").
  TaskWindow RunInChild(int index, TaskState& t, const std::atomic<bool>& stop,
                        uint64_t window_ns, std::string* died) {
    TaskWindow r;
    const pid_t pid = t.child.pid();
    const auto fail = [&](const std::string& why) {
      *died = "task " + std::to_string(index) + " (pid " + std::to_string(pid) +
              ") of tasks:processes: " + why;
      std::snprintf(r.error, sizeof(r.error), "%s", died->c_str());
    };
    if (!t.child.started()) {
      fail(t.child.died().empty() ? "task has no child process"
                                  : t.child.died());
      return r;
    }
    const uint64_t t0 = NowNs();
    shared_[index].store(false, std::memory_order_relaxed);
    std::string e = t.child.Request();
    if (!e.empty()) {
      fail(e);
      return r;
    }
    while (!stop.load(std::memory_order_relaxed)) {
      const uint64_t now = NowNs(), end = t0 + window_ns;
      const uint64_t wait = now < end ? end - now : 1'000'000;
      const timespec ts{static_cast<time_t>(wait / 1'000'000'000),
                        static_cast<long>(wait % 1'000'000'000)};
      pollfd p{t.child.fd(), POLLIN, 0};
      if (ppoll(&p, 1, &ts, nullptr) > 0) break;  // dead child: EOF
    }
    shared_[index].store(true, std::memory_order_relaxed);
    e = t.child.AwaitFor(&r, ChildLimitMs(window_ns));
    if (!e.empty()) {
      r = TaskWindow{};
      fail(e);
    }
    return r;
  }

  kernel::KernelEvidence evidence_;
  std::vector<TaskState> state_;
  std::atomic<bool>* shared_ = nullptr;
  int evidence_windows_ = PointEnv{}.evidence_windows;  // --evidence=on
  child_task::TaskBarrier barrier_;
  std::thread timer_;
  HelperPlace timer_place_;  // the evidence timer's PU (-1: none)
  std::string
      evidence_off_reason_;  // why SetEvidenceWindows(env) turned them off
  const Topology* timer_topo_ = nullptr;  // set on the host: bind the timer
  std::atomic<bool> estop_{false};
  std::atomic<int> tasks_done_{0};
};

/// Thread counts of a default kernel point: 1 and all usable PUs.
inline std::vector<int> OneAndAll(const std::vector<PuInfo>& order) {
  if (order.size() <= 1) return {1};
  return {1, static_cast<int>(order.size())};
}

/// A kernel_* row: ~0.1 s of task setup and teardown for the budget, and a
/// maker that builds `make(threads)`'s workload with the run's evidence
/// windows, at most `max_evidence` of them.
template <class Make>
Variant KernelVariant(Params params, Suite suite, std::vector<int> threads,
                      std::string description, Make make,
                      int max_evidence = INT_MAX) {
  Variant v;
  v.params = std::move(params);
  v.suite = suite;
  v.threads = std::move(threads);
  v.cost_s = 0.1;
  v.description = std::move(description);
  v.make = [=](const PointEnv& env) -> std::unique_ptr<Workload> {
    auto wl = make(env.threads);
    wl->SetEvidenceWindows(env);
    wl->SetEvidenceWindows(std::min(wl->evidence_windows(), max_evidence));
    return wl;
  };
  return v;
}

// What a kernel_* row reports and checks: one Report / Verify skeleton, so
// each family writes only its own metrics, details and checks.

/// Minor-fault slack per task and window beyond one fault per page touched
/// (the stack, a libc page): the anonymous-fault check is otherwise exact.
inline constexpr uint64_t kFaultSlackPerWindow = 8;

/// A KernelTaskWorkload whose Report and Verify have the shape every kernel_*
/// family shares. Report: the family's metrics and details (ReportFamily),
/// then ReportCommon. Verify: CommonErrors, then VerifyTask for each task in
/// index order, then VerifyPoint; the first non-empty message is the result.
class KernelFamilyWorkload : public KernelTaskWorkload {
 public:
  using KernelTaskWorkload::KernelTaskWorkload;

  void Report(PointReport& out, double window_seconds, uint64_t ops) final {
    ReportFamily(out, Total(), window_seconds);
    ReportCommon(out, window_seconds, ops);
  }

  /// The setup or a task failed (the point was not measured as planned).
  std::string SetupError() final { return CommonErrors(); }

  std::string Verify() final {
    std::string e = CommonErrors();
    for (int i = 0; e.empty() && i < threads_; ++i)
      e = VerifyTask(i, TaskTotal(i));
    return e.empty() ? VerifyPoint() : e;
  }

 protected:
  /// The family's own metrics and details. `total` is the sum of all tasks'
  /// windows, `window_seconds` the summed wall time of the point's windows.
  virtual void ReportFamily(PointReport& out, const TaskWindow& total,
                            double window_seconds) = 0;
  /// "" or what is wrong with task `index`, whose totals over all windows are
  /// `task`. Only called while every earlier check passed.
  virtual std::string VerifyTask(int /*index*/, const TaskWindow& /*task*/) {
    return "";
  }
  /// "" or what is wrong with the point as a whole; called after every task
  /// passed.
  virtual std::string VerifyPoint() { return ""; }

  /// Metric pages_per_s: 4 KiB pages (TaskWindow::pages) of all tasks per
  /// second of window; 0 when no window time was measured.
  static void ReportPagesPerSecond(PointReport& out, const TaskWindow& total,
                                   double window_seconds) {
    out.Metric("pages_per_s", Ratio(total.pages, window_seconds));
  }

  /// Exact op accounting of an anonymous-fault loop (AnonFaultBatch): "" when
  /// task `index` took at least one minor fault (getrusage) per page touched
  /// and at most kFaultSlackPerWindow more per window it ran, else both
  /// counts.
  std::string CheckFaultsPerPage(int index, const TaskWindow& task) const {
    const uint64_t slack =
        kFaultSlackPerWindow * static_cast<uint64_t>(TaskWindows(index));
    if (task.minflt < task.pages || task.minflt > task.pages + slack)
      return "task " + std::to_string(index) + ": " +
             std::to_string(task.minflt) + " minor faults for " +
             std::to_string(task.pages) + " pages touched";
    return "";
  }
};

}  // namespace lockline::kernel_tasks
