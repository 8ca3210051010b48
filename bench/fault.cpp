// fault: real anonymous page faults on this kernel, after the 2004 linux-mm
// pre-zeroing thread (BACKGROUND.md section 5): a mapping of
// `mb` MiB split across `threads` tasks, each touching one byte per 4 KiB page
// of its share, in as many passes as make a point big enough to time (a THP
// pass of 256 MiB is only 128 faults). A write fault allocates and zeroes a
// page; mode:read reads untouched anonymous memory instead, which maps the
// shared zero page: no allocation, no zeroing. Tasks as threads share one mm
// (the mmap lock, per-VMA lock and page-table locks); as processes
// (bench/child_task.h) only the zone / buddy allocator; no task writes a line
// another reads. faults_per_wall_s (the 2004 table's) and pages_per_wall_s
// time the populate + touch phases; pages_per_s_as_page_fault1 also times
// emptying the share (MADV_DONTNEED / munmap), as will-it-scale's page_fault1
// does. Not measured: file faults, major faults. Rows carry the seed table's
// columns, cost per fault and per KiB zeroed, and zeroing's share of the fault
// time at this machine's clear rate (modelled: zeroing_share) beside the
// kernel's own (sampled: ClearPageJson, in an evidence pass after the
// unsampled timed window). Fault counts come from getrusage minor faults,
// checked against what each mode must produce. The model (the modes, one
// task's passes, the fault counts) is bench/fault/model.h; this file holds the
// tasks, the sampled clear_page share, the grid and the rows.
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/child_task.h"
#include "bench/common.h"
#include "bench/fault/model.h"
#include "harness/family.h"
#include "harness/machine/cpu.h"
#include "harness/machine/memory.h"
#include "harness/measure/kernel_probe.h"
#include "harness/measure/zeroing.h"

namespace lockline::fault_bench {

/// A first touch of memory the host has not reclaimed is "warm" when the
/// discarded pass over the same size ended less than this before the window:
/// this KVM host hands memory left free for ~0.5-1 s back to the hypervisor,
/// after which first touches are 2-25x slower.
inline constexpr uint64_t kWarmGapNs = 250'000'000;
/// Idle time before an `after_idle` point: long enough for the host to reclaim
/// freed memory.
inline constexpr uint64_t kAfterIdleNs = 1'500'000'000;
enum class Tasks { kThreads, kProcesses };
enum class Start { kWarm, kAfterIdle };

/// One point's configuration (from the variant's params).
struct Config {
  Mode mode = Mode::kPlain;
  Tasks tasks = Tasks::kThreads;
  Start start = Start::kWarm;
  std::size_t bytes = 256u << 20;  ///< whole mapping, all tasks together
  int passes = 1;                  ///< passes per window (PassesFor)
  /// Task-clock sampling period of the sampled clear_page share, ns (0:
  /// off; --fault-sampling): by default 2 ms of the task's CPU time. Each
  /// sample is a timer interrupt plus a kernel stack walk of up to
  /// kClearPageMaxStack frames, not cheap in a KVM guest: 2 ms keeps the
  /// sampling's cost within run-to-run noise.
  uint64_t sample_period_ns = 2'000'000;
};
static_assert(Config{}.sample_period_ns == PointEnv{}.fault_sample_period_ns);

/// This machine's clear_page-like rate, bytes/s: `rep stosb` zeroing of a
/// 64 MiB buffer (twice a Zen 4 CCD's L3, the zeroing family's buffer size),
/// best of 3 passes after a first touch; measured once per process, on the
/// first thread that asks. 0 when the buffer cannot be mapped.
inline double ClearRateBytesPerS() {
  static const double rate = [] {
    constexpr std::size_t kBytes = 64u << 20;
    void* p = MapAnon(kBytes);
    if (p == nullptr) return 0.0;
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

/// Kernel frames kept per sample: the innermost (the share) and the callers
/// of clear_page (which path zeroed: the page allocator's __GFP_ZERO or
/// folio_zero_user).
inline constexpr uint16_t kClearPageMaxStack = 8;
/// Ring per task: room for kRingTaskSeconds of samples at the period (at most
/// 104 bytes each with 8 frames), 16 to 512 data pages. Threads drain it
/// between passes (one pass of the largest point takes ~4 s of task time
/// here), a child's team thread every kDrainPollMs while the child works.
inline constexpr uint64_t kRingTaskSeconds = 8;
inline constexpr int kDrainPollMs = 50;
inline std::size_t RingPagesFor(uint64_t period_ns) {
  const uint64_t bytes = kRingTaskSeconds * 1'000'000'000 /
                         std::max<uint64_t>(period_ns, 1) *
                         (8 * (kClearPageMaxStack + 5u));
  std::size_t pages = 16;
  while (pages < 512 && pages * kPage < bytes) pages *= 2;
  return pages;
}

/// How one task-clock sample of a timed phase counts for the sampled
/// clear_page share.
struct SampleClass {
  bool kernel = false;      ///< taken in the kernel
  bool clear_page = false;  ///< innermost kernel function a clear_page variant
  std::string function;     ///< innermost kernel function ("" in user mode)
  /// For clear_page samples: the first frame outside the clear_page
  /// variants (the function that asked for the zeroing), or "?".
  std::string caller;
};

/// Classifies a sample (kernel::RingSample: innermost function from
/// PERF_SAMPLE_IP, kernel callchain innermost first) by its innermost kernel
/// function (kernel::IsClearPageSymbol).
inline SampleClass ClassifySample(const kernel::RingSample& s) {
  SampleClass c;
  c.kernel = s.in_kernel;
  if (!s.in_kernel) return c;
  c.function = s.innermost.empty() ? "?" : s.innermost;
  c.clear_page = kernel::IsClearPageSymbol(c.function);
  if (c.clear_page) {
    const auto it = std::find_if_not(s.frames.begin(), s.frames.end(),
                                     kernel::IsClearPageSymbol);
    c.caller = it == s.frames.end() ? "?" : *it;
  }
  return c;
}

/// The sampled clear_page evidence of one task (or summed over tasks):
/// samples inside its timed phases, and which of them were zeroing.
struct ClearPageTally {
  uint64_t samples = 0;     ///< task-clock samples inside the timed phases
  uint64_t kernel = 0;      ///< of those, taken in the kernel
  uint64_t clear_page = 0;  ///< of those, in a clear_page variant
  uint64_t untimed = 0;     ///< samples outside the timed phases (dropped)
  uint64_t lost = 0;        ///< samples a full ring dropped
  std::map<std::string, uint64_t> symbols;    ///< clear_page variant -> n
  std::map<std::string, uint64_t> callers;    ///< clear_page caller -> n
  std::map<std::string, uint64_t> functions;  ///< innermost kernel fn -> n

  void Count(const SampleClass& c) {
    ++samples;
    if (!c.kernel) return;
    ++kernel;
    ++functions[c.function];
    if (!c.clear_page) return;
    ++clear_page;
    ++symbols[c.function];
    ++callers[c.caller];
  }
  void Add(const ClearPageTally& o) {
    kernel::AddFields(*this, o, &ClearPageTally::samples,
                      &ClearPageTally::kernel, &ClearPageTally::clear_page,
                      &ClearPageTally::untimed, &ClearPageTally::lost);
    for (const auto& [k, v] : o.symbols) symbols[k] += v;
    for (const auto& [k, v] : o.callers) callers[k] += v;
    for (const auto& [k, v] : o.functions) functions[k] += v;
  }
};

/// One task's task-clock sampler (kernel::TaskClockSampler with
/// PERF_SAMPLE_IP | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN): samples are
/// drained into a buffer while the window runs and counted once the window's
/// timed phases are known (a child reports them only at its end), so only
/// the populate + touch phases count, not the unmapping between passes.
class PhaseSampler {
 public:
  /// Opens on `pid` (0: the calling thread), disabled, sampling every
  /// `period_ns` of task-clock (0: off); "" or why not.
  std::string Open(pid_t pid, uint64_t period_ns) {
    if (period_ns == 0)
      return "sampling off (--fault-sampling=off or --evidence=off)";
    kernel::TaskClockSampler::Config c;
    c.period_ns = period_ns;
    c.ring_pages = RingPagesFor(period_ns);
    c.max_stack = kClearPageMaxStack;
    c.ip_and_time = true;
    return sampler_.Open(pid, c);
  }
  std::size_t ring_pages() const { return sampler_.ring_pages(); }
  void Begin() {
    pending_.clear();
    sampler_.Enable();
  }
  /// Moves the ring's samples to the buffer (any time during the window).
  void Drain() {
    sampler_.Drain(&lost_, [&](const kernel::RingSample& s) {
      pending_.push_back({s.time_ns, ClassifySample(s)});
    });
  }
  /// Stops sampling, drains, and counts the window's samples into *tally by
  /// `phases`.
  void End(const Phases& phases, ClearPageTally* tally) {
    sampler_.Disable();
    Drain();
    for (const Pending& p : pending_) {
      if (phases.Contains(p.time_ns))
        tally->Count(p.c);
      else
        ++tally->untimed;
    }
    tally->lost += lost_;
    lost_ = 0;
    pending_.clear();
  }
  void Close() { sampler_.Close(); }

 private:
  struct Pending {
    uint64_t time_ns;
    SampleClass c;
  };
  kernel::TaskClockSampler sampler_;
  std::vector<Pending> pending_;
  uint64_t lost_ = 0;
};

/// details.clear_page_sampled of a fault row: "measured" with the counts,
/// the share of clear_page samples among all samples of the timed phases and
/// its Wilson 95 % interval, or "unavailable" with `reason` (sampling could
/// not be opened) or because no sample fell in a timed phase.
inline nlohmann::json ClearPageJson(const std::string& reason,
                                    const ClearPageTally& total,
                                    const std::vector<ClearPageTally>& per_task,
                                    uint64_t period_ns,
                                    std::size_t ring_pages) {
  nlohmann::json j;
  if (!reason.empty() || total.samples == 0) {
    j["status"] = "unavailable";
    j["reason"] = !reason.empty()
                      ? reason
                      : "no task-clock sample fell in a timed phase (the "
                        "phases were shorter than the " +
                            std::to_string(period_ns / 1000) +
                            " us sampling period)";
    return j;
  }
  auto top = [](const std::map<std::string, uint64_t>& m, std::size_t n) {
    std::vector<std::pair<uint64_t, std::string>> v;
    for (const auto& [name, c] : m) v.emplace_back(c, name);
    std::sort(v.rbegin(), v.rend());
    nlohmann::json out = nlohmann::json::object();
    for (std::size_t i = 0; i < v.size() && i < n; ++i)
      out[v[i].second] = v[i].first;
    return out;
  };
  const auto ci = kernel::Wilson95(total.clear_page, total.samples);
  const kernel::KernelSymbols& syms = kernel::KernelSymbols::Get();
  nlohmann::json present = nlohmann::json::array();
  for (const std::string& n : kernel::ClearPageSymbolNames())
    if (syms.Contains(n)) present.push_back(n);
  nlohmann::json tasks = nlohmann::json::array();
  for (const ClearPageTally& t : per_task)
    tasks.push_back({{"samples", t.samples},
                     {"kernel_samples", t.kernel},
                     {"clear_page_samples", t.clear_page},
                     {"untimed_samples", t.untimed},
                     {"lost_samples", t.lost}});
  j["status"] = "measured";
  j["period_ns"] = period_ns;
  j["samples"] = total.samples;
  j["kernel_samples"] = total.kernel;
  j["clear_page_samples"] = total.clear_page;
  j["share"] = Ratio(total.clear_page, total.samples);
  j["share_ci95"] = {ci.lo, ci.hi};
  j["share_of_kernel"] = Ratio(total.clear_page, total.kernel);
  j["untimed_samples"] = total.untimed;
  j["lost_samples"] = total.lost;
  j["symbols"] = top(total.symbols, 16);
  j["symbols_in_kernel"] = present;
  j["clear_page_callers"] = top(total.callers, 8);
  j["top_kernel_functions"] = top(total.functions, 10);
  j["per_task"] = tasks;
  j["method"] =
      "each task's task-clock sampled every period_ns with PERF_SAMPLE_IP | "
      "PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN (kernel frames, at most " +
      std::to_string(kClearPageMaxStack) + "; a " +
      std::to_string(ring_pages * 4) +
      " KiB ring per task); a sample counts when its CLOCK_MONOTONIC time "
      "lies in one of the task's timed phases (populate + touch; unmapping "
      "between passes is untimed_samples); share = samples whose innermost "
      "kernel function (/proc/kallsyms) is a clear_page variant / all samples "
      "(user and kernel) of the timed phases: the sampled counterpart of "
      "zeroing_share (a model: pages x 4 KiB at the measured rep stosb rate "
      "over user + system time)";
  j["share_ci95_method"] =
      "Wilson score interval, samples taken as independent Bernoulli trials";
  return j;
}

/// The point's workload (see the file comment). tasks:threads touches one
/// shared mapping (task i its i-th share, 2 MiB-aligned), emptying its share
/// with MADV_DONTNEED after each pass; tasks:processes runs each task in a
/// child forked in SetupThread (untimed) that maps and unmaps its share per
/// pass. The evidence pass after the timed window (TeardownThread) samples
/// each task's task-clock (PhaseSampler; a child by its team thread).
class FaultWorkload : public Workload {
 public:
  FaultWorkload(Config cfg, int threads) : cfg_(cfg), threads_(threads) {}
  ~FaultWorkload() override {
    for (auto& t : tasks_) t.child.Stop();
    if (region_ != nullptr) munmap(region_, cfg_.bytes);
  }

  bool fixed_work() const override { return true; }
  bool shares_lines() const override { return false; }

  void Prepare(int threads) override {
    threads_ = threads;
    evidence_barrier_.Reset(threads);
    std::vector<TaskState> fresh(static_cast<std::size_t>(threads));
    tasks_.swap(fresh);  // TaskState owns a child and a sampler: not copied
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
    if (ModeZeroes(cfg_.mode)) ClearRateBytesPerS();  // before any timing
    if (cfg_.tasks == Tasks::kThreads && cfg_.mode != Mode::kMapPopulate) {
      region_ = MapAligned(cfg_.bytes);
      if (region_ == nullptr) {
        setup_error_ = MapFailure(cfg_.bytes, errno);
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
      warm_pass_s_ = static_cast<double>(NowNs() - t0) / 1e9;
    } else if (cfg_.start == Start::kAfterIdle) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(kAfterIdleNs));
    }
    prepare_end_ns_ = NowNs();
  }

  void SetupThread(const ThreadCtx& ctx) override {
    TaskState& t = tasks_[ctx.index];
    if (cfg_.tasks == Tasks::kProcesses) {
      const Mode mode = cfg_.mode;
      const std::size_t bytes = t.share_bytes;
      const int passes = cfg_.passes;
      const std::string e = t.child.Start([=] {
        return RunPasses(mode, nullptr, bytes, RUSAGE_SELF, passes, [] {});
      });
      if (!e.empty()) {
        std::snprintf(t.total.error, sizeof(t.total.error), "%s", e.c_str());
        t.sample_reason = "task has no child process: " + e;
        return;
      }
    }
    const pid_t pid = cfg_.tasks == Tasks::kProcesses ? t.child.pid() : 0;
    t.sample_reason = t.sampler.Open(pid, cfg_.sample_period_ns);
    t.ring_pages = t.sampler.ring_pages();
  }

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& /*stop*/) override {
    TaskState& t = tasks_[ctx.index];
    if (ctx.index == 0 && t.windows == 0)
      gap_ns_ = static_cast<int64_t>(NowNs() - prepare_end_ns_);
    if (!setup_error_.empty()) return 0;
    WindowWork w;  // unsampled: see TeardownThread
    const std::string died = RunPass(t, false, &w);
    ++t.windows;
    t.total.Add(w.r);
    if (!died.empty()) throw std::runtime_error(died);
    return w.r.pages;
  }

  void TeardownThread(const ThreadCtx& ctx) override {
    TaskState& t = tasks_[ctx.index];
    std::string died;
    // The evidence pass: the same passes on the same tasks with the
    // task-clock sampler on, after the timed window (all tasks at once:
    // TeardownThread runs on every team thread together).
    if (Sampling()) {
      evidence_barrier_.Wait();
      WindowWork w;
      died = RunPass(t, true, &w);
      t.evid.Add(w.r);
      evidence_barrier_.Wait();
    }
    t.sampler.Close();
    t.child.Stop();
    if (!died.empty()) throw std::runtime_error(died);
  }
  void Report(PointReport& out, double window_seconds,
              uint64_t /*ops*/) override {
    const Sums s = Summed();
    ReportMetrics(out, s);
    const nlohmann::json sampled = SampledClearPage();
    if (sampled["status"] == "measured")
      out.Metric("clear_page_sampled_share", sampled["share"].get<double>());
    const double huge_units =
        static_cast<double>(s.total.pages) / kPagesPerHuge;
    out.Metric("faults_per_2mib", Ratio(s.faults, huge_units));
    auto& d = out.details;
    ReportSetup(d, window_seconds, s.expected);
    ReportSeedColumns(d, s);
    ReportZeroing(d, s);
    d["clear_page_sampled"] = sampled;
    d["evidence"] = EvidencePass(out, s);
    nlohmann::json per_task = nlohmann::json::array();
    for (const auto& t : tasks_) {
      per_task.push_back({{"user_s", t.total.user_s},
                          {"system_s", t.total.sys_s},
                          {"wall_s", t.total.wall_s},
                          {"loop_s", t.total.loop_s},
                          {"passes", t.total.passes},
                          {"pages", t.total.pages},
                          {"populate_faults", t.total.populate_faults},
                          {"touch_faults", t.total.touch_faults}});
    }
    d["per_task"] = per_task;
  }

  /// The setup or a task failed (the point was not measured as planned).
  std::string SetupError() override {
    if (!setup_error_.empty()) return setup_error_;
    const TaskResult total = Total();
    return total.error[0] != 0 ? std::string(total.error) : "";
  }

  std::string Verify() override {
    std::string e = SetupError();
    if (!e.empty()) return e;
    e = CheckFaults(cfg_.mode, Total(), threads_, ThpUsable());
    if (!e.empty() || !Sampling()) return e;
    TaskResult evid;
    for (const auto& t : tasks_) evid.Add(t.evid);
    if (evid.error[0] != 0) return evid.error;
    e = CheckFaults(cfg_.mode, evid, threads_, ThpUsable());
    return e.empty() ? "" : "evidence pass: " + e;
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
    TaskResult total;                         ///< timed (unsampled) windows
    TaskResult evid;                          ///< the sampled evidence pass
    child_task::ChildTask<WindowWork> child;  ///< tasks:processes
    PhaseSampler sampler;
    std::string sample_reason;   ///< why sampler is not open ("" when open)
    std::size_t ring_pages = 0;  ///< the sampler's, as opened
    ClearPageTally clear;
  };

  /// True when the point has an evidence pass (sampling on and set up).
  bool Sampling() const {
    return cfg_.sample_period_ns > 0 && setup_error_.empty();
  }

  // One window's passes of task `t` into *w, sampled or not; "" or how its
  // child died ("task 0 (pid 12) of tasks:processes: task died: signal 9
  // (Killed)"): the point then fails with that message.
  std::string RunPass(TaskState& t, bool sampled, WindowWork* w) {
    *w = WindowWork{};
    if (sampled) t.sampler.Begin();
    std::string died;
    if (cfg_.tasks == Tasks::kProcesses) {
      const pid_t pid = t.child.pid();
      std::string e = t.child.Request();
      if (e.empty())
        e = sampled ? t.child.AwaitFor(w, -1, kDrainPollMs,
                                       [&] { t.sampler.Drain(); })
                    : t.child.AwaitFor(w, -1);
      if (!e.empty()) {
        *w = WindowWork{};
        died = "task " + std::to_string(&t - tasks_.data()) + " (pid " +
               std::to_string(pid) + ") of tasks:processes: " + e;
        std::snprintf(w->r.error, sizeof(w->r.error), "%s", died.c_str());
      }
    } else {
      char* share = region_ != nullptr ? region_ + t.share_off : nullptr;
      *w = RunPasses(cfg_.mode, share, t.share_bytes, RUSAGE_THREAD,
                     cfg_.passes, [&] {
                       if (sampled) t.sampler.Drain();
                     });
    }
    if (sampled) t.sampler.End(w->phases, &t.clear);
    return died;
  }

  /// What Report reads from the tasks' timed windows.
  struct Sums {
    TaskResult total;
    bool thp = false;  ///< ThpUsable() as Report read it
    Expected expected;
    double faults = 0, cpu = 0;
    /// Wall time of the timed phases: tasks run concurrently, so the
    /// point's is the longest task's.
    double wall = 0;
    /// Sum over tasks of pages / loop_s (page_fault1 sums its tasks' counts).
    double pf1_rate = 0;
    int passes = 0;
    /// What the faults zeroed: nothing for reads where they map the zero
    /// page, else every page made present; at the machine's clear rate.
    bool zeroes = false;
    double kib_zeroed = 0, clear_rate = 0, zero_s = 0;
  };
  Sums Summed() const {
    Sums s;
    s.total = Total();
    s.thp = ThpUsable();
    s.expected = ExpectedFaults(cfg_.mode, s.total.pages, s.thp);
    s.faults =
        static_cast<double>(s.total.populate_faults + s.total.touch_faults);
    s.cpu = s.total.user_s + s.total.sys_s;
    for (const auto& t : tasks_) {
      s.wall = std::max(s.wall, t.total.wall_s);
      s.pf1_rate += Ratio(t.total.pages, t.total.loop_s);
    }
    s.passes = tasks_.empty() ? 0 : tasks_[0].total.passes;
    s.zeroes = ModeZeroes(cfg_.mode);
    s.kib_zeroed = s.zeroes ? static_cast<double>(s.total.pages) * 4.0 : 0;
    s.clear_rate = s.zeroes ? ClearRateBytesPerS() : 0;
    s.zero_s = s.clear_rate > 0 ? s.kib_zeroed * 1024.0 / s.clear_rate : 0;
    return s;
  }

  void ReportMetrics(PointReport& out, const Sums& s) const {
    const TaskResult& total = s.total;
    out.Metric("gb", static_cast<double>(cfg_.bytes) / double(1u << 30));
    out.Metric("passes", s.passes);  // the seed table's "repetitions" column
    out.Metric("tasks", threads_);
    out.Metric("user_s", total.user_s);
    out.Metric("sys_s", total.sys_s);
    out.Metric("wall_s", s.wall);
    out.Metric("faults", s.faults);
    out.Metric("touch_faults", static_cast<double>(total.touch_faults));
    out.Metric("populate_faults", static_cast<double>(total.populate_faults));
    out.Metric("expected_faults",
               static_cast<double>(s.expected.populate + s.expected.touch));
    out.Metric("faults_per_cpu_s", Ratio(s.faults, s.cpu));
    out.Metric("faults_per_wall_s", Ratio(s.faults, s.wall));
    out.Metric("pages_per_wall_s", Ratio(total.pages, s.wall));
    out.Metric("pages_per_s_as_page_fault1", s.pf1_rate);
    out.Metric("cpu_ns_per_fault", Ratio(s.cpu * 1e9, s.faults));
    if (s.kib_zeroed > 0) {
      out.Metric("cpu_ns_per_kib_zeroed", Ratio(s.cpu * 1e9, s.kib_zeroed));
      out.Metric("kib_zeroed_per_wall_s", Ratio(s.kib_zeroed, s.wall));
    }
    out.Metric("zeroing_share", Ratio(s.zero_s, s.cpu));
  }

  // details.clear_page_sampled: the sampled counterpart of zeroing_share,
  // when the kernel could be sampled.
  nlohmann::json SampledClearPage() const {
    std::string sample_reason;
    ClearPageTally clear;
    std::vector<ClearPageTally> clear_per_task;
    std::size_t ring_pages = 0;
    for (const auto& t : tasks_) {
      if (sample_reason.empty() && !t.sample_reason.empty())
        sample_reason = t.sample_reason;
      clear.Add(t.clear);
      clear_per_task.push_back(t.clear);
      ring_pages = std::max(ring_pages, t.ring_pages);
    }
    return ClearPageJson(sample_reason, clear, clear_per_task,
                         cfg_.sample_period_ns, ring_pages);
  }

  // The point's setup: mode, size, start and what the faults are counted by.
  void ReportSetup(nlohmann::json& d, double window_seconds,
                   const Expected& e) const {
    d["mode"] = ModeName(cfg_.mode);
    d["tasks"] = cfg_.tasks == Tasks::kThreads ? "threads" : "processes";
    d["bytes"] = cfg_.bytes;
    d["passes_per_window"] = cfg_.passes;
    d["window_s"] = window_seconds;  // the harness's: also holds the unmapping
    d["size_note"] = size_note_;
    d["thp_enabled"] = ThpEnabled();
    d["start"] = cfg_.start == Start::kWarm ? "warm" : "after_idle";
    d["gap_before_first_window_ms"] = static_cast<double>(gap_ns_) / 1e6;
    d["warm"] = cfg_.start == Start::kWarm && gap_ns_ >= 0 &&
                static_cast<uint64_t>(gap_ns_) < kWarmGapNs;
    if (cfg_.start == Start::kWarm) d["warm_pass_s"] = warm_pass_s_;
    d["expected_faults"] = {{"populate", e.populate}, {"touch", e.touch}};
    d["fault_source"] =
        "getrusage minor faults (includes the kernel's own populate faults, "
        "which perf's page-faults event does not see)";
    d["timed_phases"] =
        "wall_s, user_s and sys_s cover mapping/populating and touching only; "
        "emptying the share after each pass (MADV_DONTNEED / munmap) is "
        "outside them (in per_task loop_s); wall_s is the longest task's";
    d["vs_page_fault1"] =
        "pages_per_s_as_page_fault1 is the rate to set beside will-it-scale "
        "page_fault1's pages/s: per task, pages over its passes' whole wall "
        "time (processes: mmap; touch; emptying the share: munmap, threads "
        "MADV_DONTNEED of the shared mapping), summed over tasks as "
        "page_fault1 sums its tasks' counts. page_fault1 also times the "
        "threads' mmap (here once, untimed) and munmap's VMA and page-table "
        "freeing (MADV_DONTNEED keeps them: about one page-table page per 512 "
        "faults), and maps 128 MiB per task, not mb split across tasks. "
        "faults_per_wall_s and pages_per_wall_s leave the emptying out: a "
        "tenth or more of the loop (issue 50: they read 1.07-1.19x "
        "page_fault1 where the same rows' ops_per_s read 0.92-1.03x). "
        "ops_per_s divides all tasks' pages by the window, first task's "
        "start to last task's end: the emptying, and with several tasks their "
        "start skew and the idle tail of a task done first";
  }

  // details.seed_columns: the 2004 thread's table.
  void ReportSeedColumns(nlohmann::json& d, const Sums& s) const {
    d["seed_columns"] = {
        {"GB", static_cast<double>(cfg_.bytes) / double(1u << 30)},
        {"repetitions", s.passes},
        {"threads", threads_},
        {"user_s", s.total.user_s},
        {"system_s", s.total.sys_s},
        {"wall_s", s.wall},
        {"faults_per_cpu_s", Ratio(s.faults, s.cpu)},
        {"faults_per_wall_s", Ratio(s.faults, s.wall)},
        {"page_kib", cfg_.mode == Mode::kThp && s.thp ? 2048 : 4},
        {"note",
         "the 2004 table ran on ia64 with 16 KiB pages: 65,536 faults per GB; "
         "its own wall column is inconsistent with its faults/wall-s column by "
         "10x. Here faults_per_wall_s = faults / wall_s on every row, and "
         "x86-64 faults 4 KiB pages (262,144 per GiB): compare per KiB zeroed, "
         "not per fault"}};
  }

  // details.zeroing (and zero_page_for_reads of mode:read).
  void ReportZeroing(nlohmann::json& d, const Sums& s) const {
    if (cfg_.mode == Mode::kRead) {
      const ZeroPageProbe& z = ReadFaultZeroPage();
      d["zero_page_for_reads"] = {
          {"mapped", z.mapped}, {"probed", z.known}, {"evidence", z.evidence}};
    }
    if (!s.zeroes) {
      d["zeroing"] =
          "none: a read fault of untouched anonymous memory maps the shared "
          "zero page (no allocation, no zeroing); zeroing_share is 0";
    } else {
      d["zeroing"] = {
          {"clear_rate_gb_per_s", s.clear_rate / 1e9},
          {"clear_rate_source",
           "rep stosb over 64 MiB (the zeroing family's method and buffer), "
           "best of 3, measured once per process"},
          {"zeroing_s_at_clear_rate", s.zero_s},
          {"bytes_per_fault", Ratio(s.kib_zeroed * 1024.0, s.faults)},
          {"share_definition",
           "time to zero the pages made present at the measured clear rate "
           "over the faults' CPU time (user + system)"}};
      if (cfg_.mode == Mode::kRead)
        d["zeroing"]["note"] =
            "this kernel maps no zero page for read faults (see "
            "zero_page_for_reads; e.g. pvm_no_zero_page=1): each read fault "
            "allocates and zeroes a page like a write";
    }
  }

  // details.evidence: the evidence pass's throughput beside the timed
  // window's, what the sampling cost.
  nlohmann::json EvidencePass(PointReport& out, const Sums& s) const {
    TaskResult evid;
    double evid_wall = 0;
    for (const auto& t : tasks_) {
      evid.Add(t.evid);
      evid_wall = std::max(evid_wall, t.evid.wall_s);
    }
    nlohmann::json e;
    e["mode"] = Sampling() ? "separate pass" : "off";
    e["note"] =
        "the timed window runs unsampled; clear_page_sampled comes from an "
        "evidence pass of the same size on the same tasks after it";
    if (Sampling() && evid_wall > 0 && s.wall > 0) {
      const double clean_rate = static_cast<double>(s.total.pages) / s.wall;
      const double evid_rate = static_cast<double>(evid.pages) / evid_wall;
      e["pages_per_wall_s"] = evid_rate;
      e["wall_s"] = evid_wall;
      e["ratio"] = clean_rate > 0 ? evid_rate / clean_rate : 0.0;
      e["ci95"] = nullptr;
      e["interval_note"] =
          "one timed and one evidence pass per repetition: the spread over "
          "repetitions is the interval";
      out.Metric("evidence_throughput_ratio", e["ratio"].get<double>());
    }
    return e;
  }

  Config cfg_;
  int threads_;
  std::vector<TaskState> tasks_;
  child_task::TaskBarrier evidence_barrier_;
  char* region_ = nullptr;
  std::string setup_error_, size_note_;
  uint64_t prepare_end_ns_ = 0;
  int64_t gap_ns_ = -1;
  double warm_pass_s_ = 0;
};

/// Mapping size for a point: `mb` MiB (the row key's), capped at a quarter of
/// MemAvailable (room for a window's pages plus the warm pass), rounded down
/// to whole 2 MiB. Sets *note when capped.
inline std::size_t PointBytes(std::size_t mb, std::string* note) {
  std::size_t bytes = mb << 20;
  const uint64_t avail = child_task::MemAvailableBytes();
  if (avail > 0 && bytes > avail / 4) {
    bytes = avail / 4;
    *note = "short memory: " + std::to_string(bytes >> 20) +
            " MiB (a quarter of MemAvailable)";
  }
  return std::max(bytes / kHugePage * kHugePage, kHugePage);
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
  // For the budget: MiB first touched per repetition in 4 KiB write faults'
  // worth, per mode (fitted from rows' timing.wall_s against
  // timing.declared_s), for the timed pass and a warm start's discarded pass
  // (read faults have none); an after-idle start adds 1.5 s, processes their
  // forks.
  static const double kMibPerPass[] = {1.15, 0.8, 0.8, 0.6, 1.6};
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
      "no zeroing (where the kernel maps it: details.zero_page_for_reads)"};
  v.description = std::string(kModeText[static_cast<int>(mode)]) +
                  "; tasks as " + v.params[1].second +
                  (start == Start::kWarm
                       ? "; after a discarded warm-up pass"
                       : "; first touch after 1.5 s idle (host reclaim)") +
                  "; unmapping outside faults_per_wall_s (page_fault1 times "
                  "it, as pages_per_s_as_page_fault1 does)";
  v.make = [=](const PointEnv& env) {
    Config cfg{mode, tasks, start, 0, 1, env.fault_sample_period_ns};
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
/// default rows never pair). Default, every row at 128 MiB (will-it-scale
/// page_fault1's MEMSIZE, ci/page_fault1.c): write and read faults at 1/2/4/8
/// threads; processes, MADV_POPULATE_WRITE and THP at 1 and 2 tasks; the
/// labelled first-touch-after-idle point. Full adds every mode x tasks at
/// 1 GiB over the run's threads.
std::vector<Variant> Variants() {
  std::vector<Variant> v;
  v.push_back(MakeVariant(Mode::kPlain, Tasks::kThreads, Start::kWarm, 32,
                          Suite::kQuick, {1, 2}));
  v.back().quick_only = true;
  for (Mode m : {Mode::kPlain, Mode::kRead})
    v.push_back(MakeVariant(m, Tasks::kThreads, Start::kWarm, 128,
                            Suite::kDefault, {1, 2, 4, 8}));
  v.push_back(MakeVariant(Mode::kPlain, Tasks::kProcesses, Start::kWarm, 128,
                          Suite::kDefault, {1, 2}));
  for (Mode m : {Mode::kPopulateWrite, Mode::kThp})
    v.push_back(MakeVariant(m, Tasks::kThreads, Start::kWarm, 128,
                            Suite::kDefault, {1, 2}));
  v.push_back(MakeVariant(Mode::kPlain, Tasks::kThreads, Start::kAfterIdle, 128,
                          Suite::kDefault, {1}));
  for (Mode m : {Mode::kMapPopulate, Mode::kPopulateWrite, Mode::kThp,
                 Mode::kRead, Mode::kPlain})
    for (Tasks t : {Tasks::kThreads, Tasks::kProcesses})
      v.push_back(MakeVariant(m, t, Start::kWarm, 1024, Suite::kFull, {}));
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
