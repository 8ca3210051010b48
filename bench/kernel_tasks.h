// Shared machinery of the kernel_* families (issue 18): will-it-scale-style
// tasks run by lockline's own pinned team threads (`tasks:threads`, one mm) or
// by one child process per team thread (`tasks:processes`, the fork-child
// protocol of bench/child_task.h, shared with the fault family: forked in
// SetupThread so fork is not timed; the child inherits the thread's PU
// binding). Each task runs its family's op loop for one window and reports an
// exact op count plus its own getrusage (RUSAGE_THREAD for threads,
// RUSAGE_SELF of the child). Kernel lock evidence (harness/kernel_probe.h) is
// enabled only around the task's own work: a thread's counters are opened on
// itself, a child's by its team thread (which owns the fds and the sample
// ring), so no inherited counters and no decoding in the child.
//
// Children run only async-signal-safe code (the op loops make syscalls and
// touch memory prepared before fork), since the harness is multithreaded.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <new>
#include <string>
#include <vector>

#include "bench/child_task.h"
#include "harness/family.h"
#include "harness/kernel_probe.h"

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
    ops += o.ops;
    pages += o.pages;
    minflt += o.minflt;
    bytes_sent += o.bytes_sent;
    bytes_received += o.bytes_received;
    checked += o.checked;
    user_s += o.user_s;
    sys_s += o.sys_s;
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

using child_task::TvSeconds;

/// Faults in `pages` 4 KiB pages of a fresh private anonymous mapping (THP
/// off: MADV_NOHUGEPAGE) one store per page, then munmaps it: the
/// page_fault1 loop of will-it-scale (tests/page_fault1.c), one op per page.
/// Checks `stop` every 64 pages; a stopped batch is still unmapped (its
/// pages freed) before returning. Returns the pages touched, or sets `err`.
/// Async-signal-safe.
inline uint64_t AnonFaultBatch(std::size_t pages, const std::atomic<bool>& stop,
                               char* err, std::size_t errlen) {
  const std::size_t bytes = pages * kPage;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    std::snprintf(err, errlen, "mmap of %zu bytes failed: %s", bytes,
                  std::strerror(errno));
    return 0;
  }
  madvise(m, bytes, MADV_NOHUGEPAGE);
  char* p = static_cast<char*>(m);
  std::size_t i = 0;
  for (; i < pages; ++i) {
    *reinterpret_cast<volatile char*>(p + i * kPage) = 1;
    if ((i & 63) == 63 && stop.load(std::memory_order_relaxed)) {
      ++i;
      break;
    }
  }
  munmap(m, bytes);
  return i;
}

/// A workload whose tasks run a family's op loop (RunOps) as threads or
/// child processes, with kernel evidence around each task's work.
class KernelTaskWorkload : public Workload {
 public:
  KernelTaskWorkload(Tasks tasks, int threads)
      : tasks_(tasks),
        threads_(threads),
        evidence_(threads, kSamplePeriod, kSpinPeriodNs),
        state_(static_cast<std::size_t>(threads)) {}
  ~KernelTaskWorkload() override {
    for (auto& t : state_) t.child.Stop();
    if (shared_) munmap(shared_, SharedBytes());
  }

  bool shares_lines() const { return false; }

  /// The op loop of task `index` for one window: runs until `stop`, returns
  /// what it did. In tasks:processes it runs in the child (async-signal-safe
  /// code only).
  virtual TaskWindow RunOps(int index, const std::atomic<bool>& stop) = 0;

  /// Family set-up before the team's tasks start (memfds, sockets, buffers:
  /// everything a child must inherit). Called from Prepare.
  virtual void PrepareTasks(int /*threads*/) {}

  void Prepare(int threads) override {
    threads_ = threads;
    shared_ = static_cast<std::atomic<bool>*>(
        mmap(nullptr, SharedBytes(), PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (shared_ == MAP_FAILED) {
      shared_ = nullptr;
      setup_error_ = std::string("mmap of shared stop flags failed: ") +
                     std::strerror(errno);
      return;
    }
    for (int i = 0; i < threads; ++i)
      new (&shared_[i]) std::atomic<bool>(false);
    PrepareTasks(threads);
  }

  void SetupThread(const ThreadCtx& ctx) override {
    if (!setup_error_.empty()) return;
    TaskState& t = state_[ctx.index];
    if (tasks_ == Tasks::kProcesses) {
      StartChild(ctx.index, t);
      if (t.child.started()) evidence_.OpenTask(ctx.index, t.child.pid());
    } else {
      evidence_.OpenTask(ctx.index, 0);
    }
  }

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    if (!setup_error_.empty()) return 0;
    TaskState& t = state_[ctx.index];
    if (ctx.index == 0) evidence_.VmstatBegin();
    TaskWindow r;
    evidence_.Begin(ctx.index);
    if (tasks_ == Tasks::kProcesses) {
      r = RunInChild(ctx.index, t, stop);
    } else {
      r = MeasuredOps(ctx.index, RUSAGE_THREAD, stop);
    }
    evidence_.End(ctx.index);
    if (ctx.index == 0) evidence_.VmstatEnd();
    t.total.Add(r);
    ++t.windows;
    return r.ops;
  }

  void TeardownThread(const ThreadCtx& ctx) override {
    evidence_.CloseTask(ctx.index);
    state_[ctx.index].child.Stop();
  }

  /// Sum of all tasks' windows so far.
  TaskWindow Total() const {
    TaskWindow s;
    for (const auto& t : state_) s.Add(t.total);
    return s;
  }
  const TaskWindow& TaskTotal(int i) const { return state_[i].total; }
  int TaskWindows(int i) const { return state_[i].windows; }
  const kernel::KernelEvidence& evidence() const { return evidence_; }

  /// Common report: ops and rusage totals, per-task counts, kernel evidence.
  void ReportCommon(PointReport& out, double window_seconds, uint64_t ops) {
    const TaskWindow s = Total();
    out.Metric("user_s", s.user_s);
    out.Metric("system_s", s.sys_s);
    out.Metric("minor_faults", static_cast<double>(s.minflt));
    // Ops per CPU-second of the tasks themselves (getrusage user + system):
    // what the kernel path costs, less sensitive than ops_per_s to how much
    // of the PUs a loaded machine leaves the tasks.
    const double cpu = s.user_s + s.sys_s;
    out.Metric("ops_per_cpu_s", cpu > 0 ? static_cast<double>(ops) / cpu : 0);
    out.Metric("task_cpu_share", window_seconds > 0 && threads_ > 0
                                     ? cpu / (window_seconds * threads_)
                                     : 0);
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
    evidence_.Report(d, out.metrics, ops);
  }

  /// "" or the first task error / setup error.
  std::string CommonErrors() const {
    if (!setup_error_.empty()) return setup_error_;
    const TaskWindow s = Total();
    if (s.error[0] != 0) return s.error;
    return "";
  }

 protected:
  Tasks tasks_;
  int threads_;
  std::string setup_error_;

 private:
  struct TaskState {
    TaskWindow total;
    int windows = 0;
    child_task::ChildTask<TaskWindow> child;  ///< tasks:processes
  };

  std::size_t SharedBytes() const {
    return (static_cast<std::size_t>(threads_) * sizeof(std::atomic<bool>) +
            kPage - 1) /
           kPage * kPage;
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

  // Forks the task's child (bench/child_task.h): each run is RunOps against
  // the task's shared stop flag.
  void StartChild(int index, TaskState& t) {
    const std::string e = t.child.Start([this, index] {
      return MeasuredOps(index, RUSAGE_SELF, shared_[index]);
    });
    if (!e.empty())
      std::snprintf(t.total.error, sizeof(t.total.error), "%s", e.c_str());
  }

  // The team thread's side of a child's window: start it, sleep until the
  // harness's stop flag (200 us polls: the child owns the PU), stop it, read
  // its result.
  TaskWindow RunInChild(int index, TaskState& t,
                        const std::atomic<bool>& stop) {
    TaskWindow r;
    if (!t.child.started()) {
      std::snprintf(r.error, sizeof(r.error), "task %d has no child process",
                    index);
      return r;
    }
    shared_[index].store(false, std::memory_order_relaxed);
    if (!t.child.Request()) {
      std::snprintf(r.error, sizeof(r.error), "child %d: write failed",
                    static_cast<int>(t.child.pid()));
      return r;
    }
    const timespec nap{0, 200'000};
    while (!stop.load(std::memory_order_relaxed)) nanosleep(&nap, nullptr);
    shared_[index].store(true, std::memory_order_relaxed);
    if (!t.child.Await(&r)) {
      r = TaskWindow{};
      std::snprintf(r.error, sizeof(r.error), "child task %d did not report",
                    static_cast<int>(t.child.pid()));
    }
    return r;
  }

  kernel::KernelEvidence evidence_;
  std::vector<TaskState> state_;
  std::atomic<bool>* shared_ = nullptr;
};

/// Thread counts of a default kernel point: 1 and all usable PUs.
inline std::vector<int> OneAndAll(const std::vector<PuInfo>& order) {
  const int n = static_cast<int>(order.size());
  if (n <= 1) return {1};
  return {1, n};
}

}  // namespace lockline::kernel_tasks

// ===========================================================================
// What a kernel_* row reports and checks (kernel_lru, kernel_zone,
// kernel_put_page): one Report / Verify skeleton, so each family writes only
// its own metrics, details and checks. Kept apart from the task machinery
// above, which it only uses through KernelTaskWorkload's public and protected
// members.
// ===========================================================================
namespace lockline::kernel_tasks {

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
    out.Metric("pages_per_s",
               window_seconds > 0
                   ? static_cast<double>(total.pages) / window_seconds
                   : 0);
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
