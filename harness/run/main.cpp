// lockline: plan, pin, measure, record. See README.md and `lockline --help`.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "harness/machine/cgroup.h"
#include "harness/machine/cpu.h"
#include "harness/machine/helpers.h"
#include "harness/machine/memory.h"
#include "harness/machine/padded_slots.h"
#include "harness/machine/restore.h"
#include "harness/machine/topology.h"
#include "harness/measure/counters.h"
#include "harness/measure/team.h"
#include "harness/record/provenance.h"
#include "harness/record/results.h"
#include "harness/run/build_duet.h"
#include "harness/run/options.h"
#include "harness/run/runner.h"
#include "harness/run/runs.h"
#include "harness/run/until_resolved.h"
#include "layouts/report.h"

namespace lockline {
namespace {

using nlohmann::json;

// The signals that end a run like SIGTERM, with their printed names.
constexpr std::pair<int, const char*> kEndSignals[] = {
    {SIGINT, "SIGINT"},   {SIGTERM, "SIGTERM"}, {SIGHUP, "SIGHUP"},
    {SIGQUIT, "SIGQUIT"}, {SIGUSR1, "SIGUSR1"}, {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}};

// Async-signal-safe output helpers for the handler.
void WriteStr(const char* text) {
  [[maybe_unused]] ssize_t n = write(2, text, std::strlen(text));
}

void WriteLong(long v) {
  char buf[24];
  char* p = buf + sizeof buf;
  *--p = '\0';
  v = std::max(v, 0L);
  do {
    *--p = static_cast<char>('0' + v % 10);
  } while ((v /= 10) > 0);
  WriteStr(p);
}

// kEndSignals: restore settings, drop a temporary file, say once what the
// result file keeps, exit 128 + signal.
void OnInterrupt(int sig) {
  static volatile sig_atomic_t handling = 0;
  if (handling) return;
  handling = 1;
  KillVerdictsChild();
  RestoreAll();
  UnmountWhatLocklineMounted();
  RemovePendingTemp();
  const char* name = "a signal";
  for (const auto& [s, n] : kEndSignals)
    if (s == sig) name = n;
  WriteStr("\nlockline: interrupted by ");
  WriteStr(name);
  WriteStr("; ");
  const char* path = KeptResultPath();
  if (path[0] == '\0') {
    WriteStr("no result file was written yet\n");
  } else {
    WriteStr(path);
    WriteStr(" keeps ");
    WriteLong(KeptRows());
    WriteStr(" measured rows (every point finished so far)\n");
  }
  _exit(128 + sig);
}

void InstallInterruptHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  // One handler at a time: printed once.
  for (const auto& [sig, name] : kEndSignals) sigaddset(&sa.sa_mask, sig);
  for (const auto& [sig, name] : kEndSignals) {
    // A signal ignored when lockline started (nohup's SIGHUP) stays ignored.
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN &&
        sig != SIGINT && sig != SIGTERM)
      continue;
    sigaction(sig, &sa, nullptr);
  }
}

// --out as given (taken: exit 2), or the default name with "-2", "-3" ...
std::unique_ptr<ResultFile> ClaimRunDirectory(const std::string& out) {
  if (!out.empty()) return std::make_unique<ResultFile>(out);
  const std::string base = DefaultRunDir();
  for (int i = 1;; ++i) {
    try {
      return std::make_unique<ResultFile>(
          i == 1 ? base : base + "-" + std::to_string(i));
    } catch (const RunDirTaken&) {
      if (i >= 1000) throw;
    }
  }
}

// --mem=node:N names a NUMA node of the topology (hwloc logical index).
void CheckMemNode(const std::string& mem, const Topology& topo) {
  if (mem.rfind("node:", 0) != 0) return;
  const int n = std::stoi(mem.substr(5));
  const int nodes = topo.summary().numa_nodes;
  if (n >= nodes)
    throw std::invalid_argument(
        "--mem=" + mem + ": topology " + topo.summary().source + " has " +
        std::to_string(nodes) + " NUMA node" + (nodes == 1 ? "" : "s") +
        "; accepted: node:0" +
        (nodes > 1 ? " to node:" + std::to_string(nodes - 1) : ""));
}

const char* SuiteName(Suite s) {
  return s == Suite::kQuick ? "quick" : s == Suite::kFull ? "full" : "default";
}

// --plan's cgroup CPU quota line and the thread counts over it.
std::string QuotaLine(const std::vector<int>& counts) {
  const CgroupCpu& cg = ProcessCgroupCpu();
  if (cg.quota_cpus <= 0)
    return "cgroup CPU quota: none (cgroup v" + std::to_string(cg.version) +
           (cg.version == 0 ? ": no cpu controller found)" : ")");
  char q[32];
  std::snprintf(q, sizeof q, "%.2f", cg.quota_cpus);
  std::string over;
  for (int n : counts)
    if (n > cg.quota_cpus)
      over += (over.empty() ? "" : ",") + std::to_string(n);
  return std::string("cgroup CPU quota: ") + q + " CPUs (" + cg.limited_by +
         "); " +
         (over.empty()
              ? "no thread count exceeds it"
              : "thread counts above it (they measure throttling): " + over);
}

// --padding as the run records it (context.padding) and --plan shows it.
json PaddingJson(const Options& o) {
  return {{"per_thread_slot_bytes", o.padding},
          {"source", o.padding_given ? "--padding" : "default"},
          {"applies_to", kSlotPaddingAppliesTo}};
}

std::string PaddingLine(const Options& o) {
  return "padding between per-thread slots: " + std::to_string(o.padding) +
         " bytes (" +
         (o.padding_given ? std::string("--padding")
                          : "default; --padding=BYTES sets it") +
         "; the kernel-structure layouts keep their own)";
}

json PlansJson(const RunState& run) {
  json plans = json::object();
  for (int n : run.counts) {
    const ThreadPlan p = PlanThreads(run.order, n, run.opts.oversubscribe);
    json& plan = plans[std::to_string(n)] = ThreadPlanJson(p);
    plan["helpers"] = HelperPlanJson(*run.topo, p, run.opts.oversubscribe);
  }
  return plans;
}

// --plan=json: PlansJson plus the placement order (plots/predict.py plans so).
json PlanOrderJson(const RunState& run) {
  const TopologySummary& s = run.topo->summary();
  json order = json::array();
  for (const auto& p : run.order)
    order.push_back({{"pu", p.os_index},
                     {"core", p.core},
                     {"smt", p.smt_rank},
                     {"l2", p.l2},
                     {"l3", p.l3},
                     {"numa", p.numa},
                     {"package", p.package},
                     {"cpukind", p.cpukind}});
  return {{"source", s.source},         {"packages", s.packages},
          {"numa_nodes", s.numa_nodes}, {"l3s", s.l3s},
          {"cores", s.cores},           {"pus", s.pus},
          {"usable_pus", s.usable_pus}, {"pin", run.pin.text},
          {"threads_list", run.counts}, {"padding", PaddingJson(run.opts)},
          {"plans", PlansJson(run)},    {"order", order}};
}

// `lockline predict ARGS`: execs PlotsDir()/predict.py; returns if exec fails.
int ExecPredict(int argc, char** argv) {
  const std::string script = PlotsDir() + "/predict.py";
  std::vector<std::string> args = {kVerdictsPython, script};
  for (int i = 2; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  // predict.py plans the target with this binary (--plan=json).
  if (const std::string self = SelfPath(); !self.empty())
    setenv("LOCKLINE_BIN", self.c_str(), 1);
  execv(kVerdictsPython, cargs.data());
  return FailWithError("predict: cannot run " + std::string(kVerdictsPython) +
                       " " + script + ": " + std::strerror(errno) +
                       " (set LOCKLINE_PLOTS_DIR to the plots/ directory)");
}

// --layouts[=text|json]: the structure layouts, pahole style or as JSON.
int PrintLayouts(const std::string& format) {
  if (format == "json") {
    json all = json::array();
    for (const auto& l : AllLayouts()) all.push_back(LayoutToJson(l));
    std::cout << all.dump(1) << "\n";
  } else {
    std::cout << FormatAllLayouts();
  }
  return 0;
}

// --mem checked, the topology loaded, --pin and --threads parsed.
void LoadMachine(RunState& run) {
  const Options& o = run.opts;
  CheckMemPolicy(o.mem);
  run.topo = LoadTopologyWithin(o.topology, SetupTimeoutNs());
  CheckMemNode(o.mem, *run.topo);
  run.pin = ParsePinSpec(o.pin);
  run.order = PlacementOrder(*run.topo, run.pin);
  // --calibrate-only: its rows are 1-thread rows and the c2c pairs' own PUs.
  run.counts = o.calibrate_only
                   ? std::vector<int>{1}
                   : ParseThreadCounts(o.threads, run.order, o.oversubscribe,
                                       o.oversubscribe_force);
}

// --plan: every thread count's placement (padding line before the table:
// readers take every line after its header as a row).
int PrintPlan(const RunState& run) {
  std::string plans =
      FormatPlans(*run.topo, run.pin, run.counts, run.opts.oversubscribe);
  const std::size_t first_line = plans.find('\n');
  plans.insert(first_line == std::string::npos ? plans.size() : first_line + 1,
               PaddingLine(run.opts) + "\n");
  std::cout << plans;
  if (run.topo->is_host()) std::cout << QuotaLine(run.counts) << "\n";
  return 0;
}

// --list: the point keys with their descriptions, then the points skipped.
int PrintList(const RunState& run) {
  for (const auto& p : run.points)
    std::printf("%s\t%s\n", p.key.c_str(), p.variant->description.c_str());
  for (const auto& s : run.skipped) std::printf("# skipped %s\n", s.c_str());
  return 0;
}

// "" when the points can be measured here, else why not.
std::string WhyNotRunnable(const RunState& run) {
  const Options& o = run.opts;
  if (!run.topo->is_host()) {
    const char* fsroot = std::getenv("HWLOC_FSROOT");
    if (o.topology == "host" && fsroot != nullptr && *fsroot != '\0')
      return std::string("HWLOC_FSROOT=") + fsroot +
             " makes the host topology a /sys dump (" +
             run.topo->summary().source +
             "): benchmarks only run on this machine's own topology; "
             "unset HWLOC_FSROOT, or use it with --plan or --list";
    return "--topology=" + o.topology + " (" + run.topo->summary().source +
           "): benchmarks only run on the host topology; use it with "
           "--plan or --list";
  }
  if (run.points.empty())
    return "no point of the " + std::string(SuiteName(o.suite)) +
           " suite matches --benchmark_filter=" + o.benchmark_filter +
           " (lockline --list shows the keys)";
  return CheckUntilResolved(o);
}

// The run's context: provenance, plan, padding, build duet, recovery warnings.
void WriteRunContext(RunState& run, const std::string& aslr,
                     const std::vector<std::string>& recovered) {
  const Options& o = run.opts;
  json& ctx = run.results->lockline_context();
  ctx.update(CollectProvenance(o, *run.topo));
  ctx["suite"] = SuiteName(o.suite);
  ctx["pin"] = run.pin.text;
  ctx["mem"] = o.mem;
  ctx["threads_list"] = run.counts;
  ctx["repetitions"] = o.repetitions;
  ctx["plans"] = PlansJson(run);
  ctx["counters"] = run.counters->AvailabilityJson();
  ctx["skipped_points"] = run.skipped;
  ctx["oversubscribe"] = o.oversubscribe;
  // --padding, its source and scope, with kDestructiveLine and line sizes.
  ctx["padding"] = PaddingJson(o);
  ctx["padding"]["shared_field_bytes"] = kDestructiveLine;
  ctx["padding"]["cache_line_bytes"] = kCacheLine;
  ctx["padding"]["topology_cache_line_bytes"] =
      run.topo->summary().cache_line_known
          ? json(run.topo->summary().cache_line_bytes)
          : json("unknown");
  // An emulated run (QEMU TCG, or --emulated): rows are marked too
  // (RecordRepetition), so no comparison mixes it with real runs.
  ctx["emulated"] = o.emulated || RunningUnderTcg();
  if (o.calibrate_only) ctx["calibrate_only"] = true;
  ctx["layouts"] = json::object();
  // --duet-with: every row pairs this build's windows with the old build's.
  if (!o.duet_with.empty())
    ctx["build_duet"] = {
        {"old_binary", o.duet_with},
        {"protocol", kWindowServerProtocol},
        {"aslr", aslr},
        {"layout", run.sample_layout ? "shared" : "page_start"}};
  for (const std::string& w : recovered) ctx["warnings"].push_back(w);
}

// The run's first lines: commit, suite, points, directory, counters, warnings.
void PrintRunHeader(const RunState& run) {
  const json& ctx = run.results->lockline_context();
  std::printf("lockline %s: %s suite%s, %zu points, run directory %s\n",
              ctx["git_commit"].get<std::string>().c_str(),
              SuiteName(run.opts.suite),
              run.opts.calibrate_only ? " (--calibrate-only)" : "",
              run.points.size(), run.results->dir().c_str());
  std::printf("%s\n", run.counters->SummaryLine().c_str());
  for (const auto& w : ctx["warnings"])
    std::printf("warning: %s\n", w.get<std::string>().c_str());
  for (const auto& s : run.skipped) std::printf("skipped: %s\n", s.c_str());
  std::fflush(stdout);
}

// The plan's time per question (paired rows, then the figures' rows).
void PlanPerQuestionTime(RunState& run) {
  json per_q = json::array();
  std::string line = "plan per question:";
  for (const QuestionPlan& q : PlanPerQuestion(run)) {
    line += "\n  " + q.title + ": " + std::to_string(q.points) +
            (q.question.empty() ? " points, " : " paired points, ") +
            FormatDuration(q.estimated_s);
    if (q.pairs > 0) {
      char buf[96];
      std::snprintf(buf, sizeof buf,
                    " (%d window pairs; expected +-%.1f %% at the widest)",
                    q.pairs, q.expected_half_width * 100);
      line += buf;
    }
    per_q.push_back({{"question", q.question},
                     {"title", q.title},
                     {"points", q.points},
                     {"pairs", q.pairs},
                     {"expected_half_width", q.expected_half_width},
                     {"estimated_s", q.estimated_s},
                     {"actual_s", nullptr}});
  }
  std::printf("%s\n", line.c_str());
  json& ctx = run.results->lockline_context();
  ctx["run_time"]["per_question"] = per_q;
  ctx["precision"] = run.opts.precision;
}

// The plan's points, repetitions, window and estimate against the budget.
void PrintPlanLine(const RunState& run, double estimate) {
  const Options& o = run.opts;
  // The default run then gives what its budget leaves to the comparisons
  // still open (until_resolved.h).
  const std::string open = o.until_resolved_auto && estimate < o.budget_s
                               ? ", then up to " +
                                     FormatDuration(o.budget_s - estimate) +
                                     " for the comparisons still open"
                               : "";
  std::printf(
      "plan: %zu points x %d repetitions, window %.1f ms; estimated %s%s "
      "(budget %s)\n",
      run.points.size(), o.repetitions, run.window_s * 1e3,
      FormatDuration(estimate).c_str(), open.c_str(),
      FormatDuration(o.budget_s).c_str());
  if (const std::string cut = RepetitionCutLine(run); !cut.empty())
    std::printf("%s\n", cut.c_str());
}

// Fits the window to the budget and records the plan; returns the estimate.
double PlanRunTime(RunState& run) {
  const Options& o = run.opts;
  json& ctx = run.results->lockline_context();
  const double estimate = FitWindow(run);
  run.plan_estimate_s = estimate;
  run.window_cap_s = std::min(kMaxFitWindowS, kMaxWindowGrowth * run.window_s);
  ctx["window_s"] = run.window_s;
  ctx["run_time"] = {{"budget_s", o.budget_s},
                     {"estimated_s", estimate},
                     {"window_s", run.window_s},
                     {"elapsed_s", 0.0},
                     {"left_s", run.fit.estimate_s},
                     {"fault_in_s_per_mib", run.fault_s_per_mib},
                     {"actual_s", nullptr}};
  PrintPlanLine(run, estimate);
  PlanPerQuestionTime(run);
  // Fixed work and overheads alone over the budget: say so now, not by
  // overrunning. (With --window the plan line's estimate says it.)
  if (o.window_s <= 0 && !run.fit.met) {
    const std::string why =
        BudgetWarning(o.budget_s, estimate - run.fit.estimate_s, run.fit);
    std::printf("%s\n", why.c_str());
    ctx["warnings"].push_back(why);
  }
  std::fflush(stdout);
  run.results->Flush();
  return estimate;
}

// Google Benchmark's flags: lockline's defaults, then the user's (later wins).
// False when Google Benchmark refuses them.
bool InitializeGoogleBenchmark(const RunState& run, char* argv0) {
  // Google Benchmark keeps pointers into them for the process's lifetime.
  static std::vector<std::string> gb_args;
  static std::vector<char*> gb_argv;
  gb_args = {argv0, "--benchmark_repetitions=5",
             "--benchmark_enable_random_interleaving=true"};
  for (const auto& a : run.opts.benchmark_args) gb_args.push_back(a);
  for (auto& a : gb_args) gb_argv.push_back(a.data());
  int gb_argc = static_cast<int>(gb_argv.size());
  gb_argv.push_back(nullptr);
  benchmark::Initialize(&gb_argc, gb_argv.data());
  return !benchmark::ReportUnrecognizedArguments(gb_argc, gb_argv.data());
}

// The run's actual time, overall and per question, against the estimate.
void ReportRunTime(RunState& run, double estimate) {
  json& ctx = run.results->lockline_context();
  const double ran_s = SecondsBetween(run.run_start_ns, NowNs());
  ctx["run_time"]["actual_s"] = ran_s;
  ctx["run_time"]["elapsed_s"] = ran_s;
  std::string per_q_line;
  for (json& q : ctx["run_time"]["per_question"]) {
    const std::string question = q["question"].get<std::string>();
    const auto it = run.question_actual_s.find(question);
    const double actual = it != run.question_actual_s.end() ? it->second : 0.0;
    q["actual_s"] = actual;
    per_q_line += (per_q_line.empty() ? "" : ", ") +
                  (question.empty() ? std::string("figures") : question) + " " +
                  FormatDuration(actual) + " of " +
                  FormatDuration(q["estimated_s"].get<double>());
  }
  run.results->Flush();
  std::printf("ran %s (estimated %s, budget %s); per question: %s\n",
              FormatDuration(ran_s).c_str(), FormatDuration(estimate).c_str(),
              FormatDuration(run.opts.budget_s).c_str(), per_q_line.c_str());
  std::fflush(stdout);
}

// The last line; returns the number of rows with errors.
int PrintSummary(const RunState& run) {
  int errors = 0, overruns = 0;
  for (const auto& row : run.results->doc()["benchmarks"]) {
    if (row.value("error_occurred", false)) ++errors;
    if (row.value("overrun", false)) ++overruns;
  }
  std::printf(
      "lockline: wrote %s (%d rows, %d with errors, %d with overrun "
      "windows%s)\n",
      run.results->path().c_str(),
      static_cast<int>(run.results->doc()["benchmarks"].size()), errors,
      overruns,
      overruns ? ": a window ran past its wall-clock bound, so those "
                 "rows time the overrun too"
               : "");
  return errors;
}

// The measured run, from the build duet's start to the summary.
int MeasurePoints(RunState& run, char** argv) {
  const Options& o = run.opts;
  std::string aslr;
  if (!o.duet_with.empty()) {
    // Both builds without address-space randomization (re-executes once).
    aslr = DisableAslrForDuet(argv);
    // The old build is started and checked before anything is created.
    try {
      PrepareBuildDuet(run);
    } catch (const std::exception& e) {
      return FailWithError(e.what());
    }
  }
  // Settings a run killed outright (SIGKILL, the OOM killer) left changed.
  std::vector<std::string> recovered = RecoverPreviousRun();
  for (std::string& w : RecoverTracefsMount())
    recovered.push_back(std::move(w));
  WatchTracefsMount();
  try {
    // Counters first: a bad --events list leaves no empty run directory.
    run.counters = CounterSession::Create(o.events);
    InstallInterruptHandlers();
    run.results = ClaimRunDirectory(o.out);
  } catch (const std::exception& e) {
    return FailWithError(e.what());
  }
  WriteRunContext(run, aslr, recovered);
  PrintRunHeader(run);
  // On disk before the baseline probes (minutes on many PU pairs).
  run.results->Flush();
  run.run_start_ns = NowNs();
  try {
    MeasureCoherenceBaselines(run);
  } catch (const std::exception& e) {
    // e.g. "cannot create thread 1 of 2: EAGAIN" at pid_max: one line, no
    // abort; the run directory keeps its (empty) lockline.json.
    std::fprintf(stderr, "lockline: error: coherence baseline: %s\n", e.what());
    RestoreAll();
    UnmountWhatLocklineMounted();
    return 1;
  }
  const double estimate = PlanRunTime(run);
  if (!InitializeGoogleBenchmark(run, argv[0])) return 2;
  for (const Point& p : run.points) RegisterPoint(run, p, p.repetitions);
  LocklineReporter reporter(run);
  run.finish_on_finalize = o.until_resolved_s <= 0;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  ReportRunTime(run, estimate);
  const bool resolved_ok =
      o.until_resolved_s <= 0 || RunUntilResolved(run, reporter);
  benchmark::Shutdown();
  RestoreAll();
  if (UnmountWhatLocklineMounted())
    std::printf(
        "lockline: unmounted tracefs at /sys/kernel/tracing (this "
        "run mounted it)\n");
  const bool failed = PrintSummary(run) > 0 || !resolved_ok;
  if (o.calibrate_only)
    std::printf(
        "lockline: a calibration run: no plots or report are drawn for it; to "
        "predict a run from another machine on this one: lockline predict "
        "RUN_DIR --topology=THIS_MACHINE.xml --target=%s\n",
        run.results->dir().c_str());
  return failed ? 1 : 0;
}

// Bad input first, before anything is created; then --help, --layouts,
// --plan, --list, the window server, --runs, or a measured run.
int Main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "predict") == 0)
    return ExecPredict(argc, argv);
  RunState run;
  try {
    run.opts = ParseOptions(argc, argv);
  } catch (const std::exception& e) {
    return FailWithError(e.what());
  }
  const Options& o = run.opts;
  // Before any point, team or workload exists: every PaddedSlots takes it.
  SetSlotPadding(o.padding);
  if (o.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  // argv[0] goes into the result file: invalid UTF-8 is bad input too.
  for (const std::string& path : {std::string(argv[0]), SelfPath()})
    if (!IsValidUtf8(path))
      return FailWithError(
          "the program's own path " + path +
          " is not valid UTF-8 (it is recorded in the result file); accepted: "
          "a path in UTF-8 (move the binary to one)");
  if (!o.layouts.empty()) return PrintLayouts(o.layouts);
  try {
    LoadMachine(run);
    if (o.plan_json) {
      json plan = PlanOrderJson(run);
      plan.update(CpuKindsJson(run.topo->summary()));
      std::cout << plan.dump(1) << "\n";
      return 0;
    }
    BuildPoints(run);
    // --plan: the run's estimate against its budget, then the placement.
    if (o.plan) {
      PrintPlanLine(run, FitWindow(run));
      return PrintPlan(run);
    }
  } catch (const std::exception& e) {
    return FailWithError(e.what());
  }
  if (o.list) return PrintList(run);
  if (const std::string why = WhyNotRunnable(run); !why.empty())
    return FailWithError(why);
  // Test builds' wraps (the planted slowdown); none in lockline itself.
  ApplyWorkloadWraps(run);
  if (o.window_server) return ServeWindows(run);
  // --runs=N: N whole runs as child processes (runs.h).
  if (o.runs > 1) return RunIndependentProcesses(argc, argv, o);
  return MeasurePoints(run, argv);
}

}  // namespace
}  // namespace lockline

int main(int argc, char** argv) { return lockline::Main(argc, argv); }
