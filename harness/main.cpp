// lockline: plan, pin, measure, record. See README.md and `lockline --help`.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>

#include "harness/counters.h"
#include "harness/memory.h"
#include "harness/options.h"
#include "harness/provenance.h"
#include "harness/restore.h"
#include "harness/runner.h"
#include "harness/topology.h"
#include "layouts/report.h"

namespace {

using lockline::RunState;
using nlohmann::json;

int Fail(const std::string& msg) {
  std::fprintf(stderr, "lockline: error: %s\n", msg.c_str());
  return 2;
}

void OnInterrupt(int) {
  static const char msg[] =
      "\nlockline: interrupted; lockline.json keeps every point finished so "
      "far\n";
  lockline::RestoreAll();  // sysctls a kernel_* point changed (async-safe)
  [[maybe_unused]] ssize_t n = write(2, msg, sizeof msg - 1);
  _exit(130);
}

std::string DefaultOutDir() {
  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  char stamp[32];
  const time_t now = time(nullptr);
  strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", gmtime(&now));
  return std::string("results/") + host + "-" + stamp;
}

const char* SuiteName(lockline::Suite s) {
  return s == lockline::Suite::kQuick  ? "quick"
         : s == lockline::Suite::kFull ? "full"
                                       : "default";
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
  }
  return plans;
}

int Main(int argc, char** argv) {
  RunState run;
  try {
    run.opts = lockline::ParseOptions(argc, argv);
  } catch (const std::exception& e) {
    return Fail(e.what());
  }
  const lockline::Options& o = run.opts;
  if (o.help) {
    std::fputs(lockline::kUsage, stdout);
    return 0;
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
    run.topo = lockline::Topology::Load(o.topology);
    run.pin = lockline::ParsePinSpec(o.pin);
    run.order = lockline::PlacementOrder(*run.topo, run.pin);
    run.counts =
        lockline::ParseThreadCounts(o.threads, run.order, o.oversubscribe);
  } catch (const std::exception& e) {
    return Fail(e.what());
  }
  if (o.plan) {
    std::cout << lockline::FormatPlans(*run.topo, run.pin, run.counts,
                                       o.oversubscribe);
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
  if (!run.topo->is_host())
    return Fail("--topology=" + o.topology +
                ": benchmarks only run on the host topology; use it with "
                "--plan or --list");
  if (run.points.empty())
    return Fail("no point of the " + std::string(SuiteName(o.suite)) +
                " suite matches --benchmark_filter=" + o.benchmark_filter +
                " (lockline --list shows the keys)");

  try {
    run.results = std::make_unique<lockline::ResultFile>(
        o.out.empty() ? DefaultOutDir() : o.out);
    run.counters = lockline::CounterSession::Create(o.events);
  } catch (const std::exception& e) {
    return Fail(e.what());
  }
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);

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
  ctx["layouts"] = json::object();

  std::printf("lockline %s: %s suite, %zu points, run directory %s\n",
              ctx["git_commit"].get<std::string>().c_str(), SuiteName(o.suite),
              run.points.size(), run.results->dir().c_str());
  std::printf("%s\n", run.counters->SummaryLine().c_str());
  for (const auto& w : ctx["warnings"])
    std::printf("warning: %s\n", w.get<std::string>().c_str());
  for (const auto& s : run.skipped) std::printf("skipped: %s\n", s.c_str());
  std::fflush(stdout);

  lockline::MeasureCoherenceBaselines(run);
  const double estimate = lockline::FitWindow(run);
  ctx["window_s"] = run.window_s;
  std::printf(
      "plan: %zu points x %d repetitions, window %.1f ms; estimated %s (budget "
      "%s)\n",
      run.points.size(), o.repetitions, run.window_s * 1e3,
      lockline::FormatDuration(estimate).c_str(),
      lockline::FormatDuration(o.budget_s).c_str());
  std::fflush(stdout);
  run.results->Flush();

  // Google Benchmark's flags: lockline's defaults first, the user's after them
  // (later wins).
  std::vector<std::string> gb_args = {
      argv[0], "--benchmark_repetitions=3",
      "--benchmark_enable_random_interleaving=true"};
  for (const auto& a : o.benchmark_args) gb_args.push_back(a);
  std::vector<char*> gb_argv;
  for (auto& a : gb_args) gb_argv.push_back(a.data());
  int gb_argc = static_cast<int>(gb_argv.size());
  gb_argv.push_back(nullptr);
  benchmark::Initialize(&gb_argc, gb_argv.data());
  if (benchmark::ReportUnrecognizedArguments(gb_argc, gb_argv.data())) return 2;

  lockline::RegisterPoints(run);
  lockline::LocklineReporter reporter(run);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  int errors = 0;
  for (const auto& row : run.results->doc()["benchmarks"])
    if (row.value("error_occurred", false)) ++errors;
  std::printf("lockline: wrote %s (%d rows, %d with errors)\n",
              run.results->path().c_str(),
              static_cast<int>(run.results->doc()["benchmarks"].size()),
              errors);
  return errors ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
