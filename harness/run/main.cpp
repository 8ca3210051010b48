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

namespace {

using lockline::RunState;
using nlohmann::json;

int Fail(const std::string& msg) {
  // Control characters and invalid UTF-8 of echoed values are escaped: one
  // line, nothing a terminal interprets (issue 27 item 15).
  std::fprintf(stderr, "lockline: error: %s\n",
               lockline::EscapeForMessage(msg).c_str());
  return 2;
}

// The signals that end a run like SIGTERM does (issue 27 item 2): each one
// restores the settings, and the name printed for it.
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
  int i = sizeof buf;
  buf[--i] = '\0';
  if (v <= 0) buf[--i] = '0';
  while (v > 0 && i > 0) {
    buf[--i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  WriteStr(buf + i);
}

// SIGINT / SIGTERM and the other kEndSignals: put back what families
// changed, drop a half-written temporary file, say once what the result file
// keeps, exit 128 + signal.
void OnInterrupt(int sig) {
  static volatile sig_atomic_t handling = 0;
  if (handling) return;
  handling = 1;
  lockline::KillVerdictsChild();
  lockline::RestoreAll();
  lockline::UnmountWhatLocklineMounted();
  lockline::RemovePendingTemp();
  const char* name = "a signal";
  for (const auto& [s, n] : kEndSignals)
    if (s == sig) name = n;
  WriteStr("\nlockline: interrupted by ");
  WriteStr(name);
  WriteStr("; ");
  const char* path = lockline::KeptResultPath();
  if (path[0] == '\0') {
    WriteStr("no result file was written yet\n");
  } else {
    WriteStr(path);
    WriteStr(" keeps ");
    WriteLong(lockline::KeptRows());
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

// Claims the run directory: --out as given (taken: exit 2), or the default
// name with "-2", "-3" ... appended when another run started in the same
// second holds it.
std::unique_ptr<lockline::ResultFile> ClaimRunDirectory(
    const std::string& out) {
  if (!out.empty()) return std::make_unique<lockline::ResultFile>(out);
  const std::string base = lockline::DefaultRunDir();
  for (int i = 1;; ++i) {
    try {
      return std::make_unique<lockline::ResultFile>(
          i == 1 ? base : base + "-" + std::to_string(i));
    } catch (const lockline::RunDirTaken&) {
      if (i >= 1000) throw;
    }
  }
}

// --mem=node:N names a NUMA node of the topology (hwloc logical index).
void CheckMemNode(const std::string& mem, const lockline::Topology& topo) {
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

const char* SuiteName(lockline::Suite s) {
  return s == lockline::Suite::kQuick  ? "quick"
         : s == lockline::Suite::kFull ? "full"
                                       : "default";
}

// --plan's line on the cgroup CPU quota of this process: the quota and the
// thread counts that exceed it (issue 27).
std::string QuotaLine(const std::vector<int>& counts) {
  const lockline::CgroupCpu& cg = lockline::ProcessCgroupCpu();
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
json PaddingJson(const lockline::Options& o) {
  return {{"per_thread_slot_bytes", o.padding},
          {"source", o.padding_given ? "--padding" : "default"},
          {"applies_to", lockline::kSlotPaddingAppliesTo}};
}

std::string PaddingLine(const lockline::Options& o) {
  return "padding between per-thread slots: " + std::to_string(o.padding) +
         " bytes (" +
         (o.padding_given ? std::string("--padding")
                          : "default; --padding=BYTES sets it") +
         "; the kernel-structure layouts keep their own)";
}

json PlansJson(const RunState& run) {
  json plans = json::object();
  for (int n : run.counts) {
    const lockline::ThreadPlan p =
        lockline::PlanThreads(run.order, n, run.opts.oversubscribe);
    json pus = json::array();
    for (const auto& pu : p.pus) pus.push_back(pu.os_index);
    plans[std::to_string(n)] = {{"pus", pus},
                                {"cores", p.cores},
                                {"l3s", p.l3s},
                                {"numa_nodes", p.numa_nodes},
                                {"packages", p.packages},
                                {"smt_siblings", p.smt_siblings},
                                {"oversubscribed", p.oversubscribed}};
    plans[std::to_string(n)]["helpers"] =
        lockline::HelperPlanJson(*run.topo, p, run.opts.oversubscribe);
  }
  return plans;
}

// --plan=json: the plans of PlansJson plus the placement order itself, each PU
// with the objects containing it, so plots/predict.py uses this planner.
json PlanOrderJson(const RunState& run) {
  const lockline::TopologySummary& s = run.topo->summary();
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

// `lockline predict ARGS`: runs PlotsDir()/predict.py ARGS (the model is
// Python: plots/queueing.py); returns only when exec fails.
int ExecPredict(int argc, char** argv) {
  const std::string script = lockline::PlotsDir() + "/predict.py";
  std::vector<std::string> args = {lockline::kVerdictsPython, script};
  for (int i = 2; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  // predict.py plans the target with this binary (--plan=json).
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = '\0';
    setenv("LOCKLINE_BIN", self, 1);
  }
  execv(lockline::kVerdictsPython, cargs.data());
  return Fail("predict: cannot run " + std::string(lockline::kVerdictsPython) +
              " " + script + ": " + std::strerror(errno) +
              " (set LOCKLINE_PLOTS_DIR to the plots/ directory)");
}

int Main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "predict") == 0)
    return ExecPredict(argc, argv);
  RunState run;
  try {
    run.opts = lockline::ParseOptions(argc, argv);
  } catch (const std::exception& e) {
    return Fail(e.what());
  }
  const lockline::Options& o = run.opts;
  // Before any point, team or workload exists: every PaddedSlots takes it.
  lockline::SetSlotPadding(o.padding);
  if (o.help) {
    std::fputs(lockline::kUsage, stdout);
    return 0;
  }
  // The program's own path goes into the result file (context.executable,
  // provenance): invalid UTF-8 there is bad input like an argument's, said
  // before anything is created (issue 36 R11; it used to end the run with a
  // raw JSON exception after the run directory existed).
  {
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    const std::string exe =
        n > 0 ? std::string(self, static_cast<size_t>(n)) : "";
    for (const std::string& path : {std::string(argv[0]), exe})
      if (!lockline::IsValidUtf8(path))
        return Fail(
            "the program's own path " + path +
            " is not valid UTF-8 (it is recorded in the result "
            "file); accepted: a path in UTF-8 (move the binary to one)");
  }
  if (!o.layouts.empty()) {
    if (o.layouts == "json") {
      json all = json::array();
      for (const auto& l : lockline::AllLayouts())
        all.push_back(lockline::LayoutToJson(l));
      std::cout << all.dump(1) << "\n";
    } else {
      std::cout << lockline::FormatAllLayouts();
    }
    return 0;
  }
  try {
    lockline::CheckMemPolicy(o.mem);
    run.topo =
        lockline::LoadTopologyWithin(o.topology, lockline::SetupTimeoutNs());
    CheckMemNode(o.mem, *run.topo);
    run.pin = lockline::ParsePinSpec(o.pin);
    run.order = lockline::PlacementOrder(*run.topo, run.pin);
    run.counts = lockline::ParseThreadCounts(
        o.threads, run.order, o.oversubscribe, o.oversubscribe_force);
  } catch (const std::exception& e) {
    return Fail(e.what());
  }
  if (o.plan_json) {
    try {
      json plan = PlanOrderJson(run);
      plan.update(lockline::CpuKindsJson(run.topo->summary()));
      std::cout << plan.dump(1) << "\n";
    } catch (const std::exception& e) {
      return Fail(e.what());
    }
    return 0;
  }
  if (o.plan) {
    // The padding line goes under the topology line, before the table
    // (readers take every line after the table header as a row).
    std::string plans =
        lockline::FormatPlans(*run.topo, run.pin, run.counts, o.oversubscribe);
    const std::size_t first_line = plans.find('\n');
    plans.insert(
        first_line == std::string::npos ? plans.size() : first_line + 1,
        PaddingLine(o) + "\n");
    std::cout << plans;
    if (run.topo->is_host()) std::cout << QuotaLine(run.counts) << "\n";
    return 0;
  }
  try {
    lockline::BuildPoints(run);
  } catch (const std::exception& e) {
    return Fail(e.what());
  }
  if (o.list) {
    for (const auto& p : run.points)
      std::printf("%s\t%s\n", p.key.c_str(), p.variant->description.c_str());
    for (const auto& s : run.skipped) std::printf("# skipped %s\n", s.c_str());
    return 0;
  }
  if (!run.topo->is_host()) {
    const char* fsroot = std::getenv("HWLOC_FSROOT");
    if (o.topology == "host" && fsroot != nullptr && *fsroot != '\0')
      return Fail(std::string("HWLOC_FSROOT=") + fsroot +
                  " makes the host topology a /sys dump (" +
                  run.topo->summary().source +
                  "): benchmarks only run on this machine's own topology; "
                  "unset HWLOC_FSROOT, or use it with --plan or --list");
    return Fail("--topology=" + o.topology + " (" + run.topo->summary().source +
                "): benchmarks only run on the host topology; use it with "
                "--plan or --list");
  }
  if (run.points.empty())
    return Fail("no point of the " + std::string(SuiteName(o.suite)) +
                " suite matches --benchmark_filter=" + o.benchmark_filter +
                " (lockline --list shows the keys)");
  if (const std::string why = lockline::CheckUntilResolved(o); !why.empty())
    return Fail(why);
  // Test builds' wraps (the planted slowdown); none in lockline itself.
  lockline::ApplyWorkloadWraps(run);
  if (o.window_server) return lockline::ServeWindows(run);
  // --runs=N: N whole runs as child processes (harness/run/runs.h); each child
  // starts its own
  // --duet-with partner.
  if (o.runs > 1) return lockline::RunIndependentProcesses(argc, argv, o);
  std::string aslr;
  if (!o.duet_with.empty()) {
    // Both builds without address-space randomization (re-executes once).
    aslr = lockline::DisableAslrForDuet(argv);
    // The old build is started and checked before anything is created.
    try {
      lockline::PrepareBuildDuet(run);
    } catch (const std::exception& e) {
      return Fail(e.what());
    }
  }

  // Settings a run killed outright (SIGKILL, the OOM killer) left changed:
  // put back before anything is measured (issue 27 item 2).
  std::vector<std::string> recovered = lockline::RecoverPreviousRun();
  for (std::string& w : lockline::RecoverTracefsMount())
    recovered.push_back(std::move(w));
  lockline::WatchTracefsMount();
  try {
    // Counters first: a bad --events list must not leave an empty run
    // directory behind.
    run.counters = lockline::CounterSession::Create(o.events);
    InstallInterruptHandlers();
    run.results = ClaimRunDirectory(o.out);
  } catch (const std::exception& e) {
    return Fail(e.what());
  }

  json& ctx = run.results->lockline_context();
  const json prov = lockline::CollectProvenance(o, *run.topo);
  for (const auto& [k, v] : prov.items()) ctx[k] = v;
  ctx["suite"] = SuiteName(o.suite);
  ctx["pin"] = run.pin.text;
  ctx["mem"] = o.mem;
  ctx["threads_list"] = run.counts;
  ctx["repetitions"] = o.repetitions;
  ctx["plans"] = PlansJson(run);
  ctx["counters"] = run.counters->AvailabilityJson();
  ctx["skipped_points"] = run.skipped;
  ctx["oversubscribe"] = o.oversubscribe;
  // The distance between per-thread slots (--padding,
  // harness/machine/padded_slots.h: every array indexed by thread), where it
  // came from and what it applies to; the compile-time padding of singleton
  // shared fields (harness/machine/cpu.h kDestructiveLine) and the line sizes
  // beside it (issue 27).
  ctx["padding"] = PaddingJson(o);
  ctx["padding"]["shared_field_bytes"] = lockline::kDestructiveLine;
  ctx["padding"]["cache_line_bytes"] = lockline::kCacheLine;
  ctx["padding"]["topology_cache_line_bytes"] =
      run.topo->summary().cache_line_known
          ? json(run.topo->summary().cache_line_bytes)
          : json("unknown");
  // An emulated run (QEMU TCG, or --emulated): rows are marked too
  // (RecordRepetition), so no comparison mixes it with real runs.
  ctx["emulated"] = o.emulated || lockline::RunningUnderTcg();
  ctx["layouts"] = json::object();
  // --duet-with: every row pairs this build's windows with the old build's.
  if (!o.duet_with.empty())
    ctx["build_duet"] = {
        {"old_binary", o.duet_with},
        {"protocol", lockline::kWindowServerProtocol},
        {"aslr", aslr},
        {"layout", run.sample_layout ? "shared" : "page_start"}};
  for (const std::string& w : recovered) ctx["warnings"].push_back(w);

  std::printf("lockline %s: %s suite, %zu points, run directory %s\n",
              ctx["git_commit"].get<std::string>().c_str(), SuiteName(o.suite),
              run.points.size(), run.results->dir().c_str());
  std::printf("%s\n", run.counters->SummaryLine().c_str());
  for (const auto& w : ctx["warnings"])
    std::printf("warning: %s\n", w.get<std::string>().c_str());
  for (const auto& s : run.skipped) std::printf("skipped: %s\n", s.c_str());
  std::fflush(stdout);

  // The context is on disk before the baseline probes: they take minutes where
  // PU pairs are many and vCPUs overcommitted, and an interrupted run must
  // still say what it was.
  run.results->Flush();
  run.run_start_ns = lockline::NowNs();
  try {
    lockline::MeasureCoherenceBaselines(run);
  } catch (const std::exception& e) {
    // e.g. "cannot create thread 1 of 2: EAGAIN" at pid_max: one line, no
    // abort; the run directory keeps its (empty) lockline.json.
    std::fprintf(stderr, "lockline: error: coherence baseline: %s\n", e.what());
    lockline::RestoreAll();
    lockline::UnmountWhatLocklineMounted();
    return 1;
  }
  const double estimate = lockline::FitWindow(run);
  run.plan_estimate_s = estimate;
  run.window_cap_s = std::min(lockline::kMaxFitWindowS,
                              lockline::kMaxWindowGrowth * run.window_s);
  ctx["window_s"] = run.window_s;
  // The run's time against its budget (results/SCHEMA.md): the estimate made
  // here, the elapsed time after every repetition and the actual at the end.
  ctx["run_time"] = {{"budget_s", o.budget_s},
                     {"estimated_s", estimate},
                     {"window_s", run.window_s},
                     {"elapsed_s", 0.0},
                     {"left_s", run.fit.estimate_s},
                     {"fault_in_s_per_mib", run.fault_s_per_mib},
                     {"actual_s", nullptr}};
  std::printf(
      "plan: %zu points x %d repetitions, window %.1f ms; estimated %s (budget "
      "%s)\n",
      run.points.size(), o.repetitions, run.window_s * 1e3,
      lockline::FormatDuration(estimate).c_str(),
      lockline::FormatDuration(o.budget_s).c_str());
  // The budget per question: the paired verdict rows of each seed question
  // (bench/duet.cpp), then the figures' rows.
  {
    json per_q = json::array();
    std::string line = "plan per question:";
    for (const lockline::QuestionPlan& q : lockline::PlanPerQuestion(run)) {
      line += "\n  " + q.title + ": " + std::to_string(q.points) +
              (q.question.empty() ? " points, " : " paired points, ") +
              lockline::FormatDuration(q.estimated_s);
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
    ctx["run_time"]["per_question"] = per_q;
    ctx["precision"] = o.precision;
  }
  // Fixed work and overheads alone over the budget: say so now, not by
  // overrunning. (With --window the plan line's estimate says it.)
  if (o.window_s <= 0 && !run.fit.met) {
    const std::string why = lockline::BudgetWarning(
        o.budget_s, estimate - run.fit.estimate_s, run.fit);
    std::printf("%s\n", why.c_str());
    ctx["warnings"].push_back(why);
  }
  std::fflush(stdout);
  run.results->Flush();

  // Google Benchmark's flags: lockline's defaults first, the user's after them
  // (later wins).
  std::vector<std::string> gb_args = {
      argv[0], "--benchmark_repetitions=5",
      "--benchmark_enable_random_interleaving=true"};
  // Not --benchmark_filter: lockline matched it against the point keys and
  // registers only the points it selected. Google Benchmark would match it
  // again against "<key>/iterations:N/manual_time", so an anchored filter
  // ("...threads:4$") would run nothing.
  for (const auto& a : o.benchmark_args)
    if (a.rfind("--benchmark_filter=", 0) != 0) gb_args.push_back(a);
  std::vector<char*> gb_argv;
  for (auto& a : gb_args) gb_argv.push_back(a.data());
  int gb_argc = static_cast<int>(gb_argv.size());
  gb_argv.push_back(nullptr);
  benchmark::Initialize(&gb_argc, gb_argv.data());
  if (benchmark::ReportUnrecognizedArguments(gb_argc, gb_argv.data())) return 2;

  lockline::RegisterPoints(run);
  lockline::LocklineReporter reporter(run);
  run.finish_on_finalize = o.until_resolved_s <= 0;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const double ran_s =
      static_cast<double>(lockline::NowNs() - run.run_start_ns) / 1e9;
  ctx["run_time"]["actual_s"] = ran_s;
  ctx["run_time"]["elapsed_s"] = ran_s;
  std::string per_q_line;
  for (json& q : ctx["run_time"]["per_question"]) {
    const auto it =
        run.question_actual_s.find(q["question"].get<std::string>());
    const double actual = it != run.question_actual_s.end() ? it->second : 0.0;
    q["actual_s"] = actual;
    per_q_line += (per_q_line.empty() ? "" : ", ") +
                  (q["question"].get<std::string>().empty()
                       ? std::string("figures")
                       : q["question"].get<std::string>()) +
                  " " + lockline::FormatDuration(actual) + " of " +
                  lockline::FormatDuration(q["estimated_s"].get<double>());
  }
  run.results->Flush();
  std::printf("ran %s (estimated %s, budget %s); per question: %s\n",
              lockline::FormatDuration(ran_s).c_str(),
              lockline::FormatDuration(estimate).c_str(),
              lockline::FormatDuration(o.budget_s).c_str(), per_q_line.c_str());
  std::fflush(stdout);
  const bool resolved_ok =
      o.until_resolved_s <= 0 || lockline::RunUntilResolved(run, reporter);
  benchmark::Shutdown();

  lockline::RestoreAll();
  if (lockline::UnmountWhatLocklineMounted())
    std::printf(
        "lockline: unmounted tracefs at /sys/kernel/tracing (this "
        "run mounted it)\n");
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
  return errors || !resolved_ok ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
