#include "harness/run/runner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <tuple>
#include <typeinfo>

#include "harness/locks/spin_wait.h"
#include "harness/machine/cgroup.h"
#include "harness/machine/cpu.h"
#include "harness/machine/helpers.h"
#include "harness/machine/memory.h"
#include "harness/measure/coherence.h"
#include "harness/measure/team.h"
#include "harness/record/rows.h"
#include "layouts/report.h"

namespace lockline {
namespace {

using nlohmann::json;

constexpr double kProbeSeconds = 0.001;          // a point's, before and after
constexpr double kBaselineProbeSeconds = 0.002;  // each of a pair's 3
// The families' first touch of hundreds of MiB costs about a MiB of
// MeasureFaultInSecondsPerMiB's probe each, and both follow the machine's load.
constexpr double kWorkloadOverProbe = 1.1;

// Google Benchmark's filter semantics (1.7.1): extended regex searched in the
// name; a leading '-' selects the names that do NOT match.
bool MatchesFilter(const std::string& filter, const std::string& name) {
  if (filter.empty() || filter == "all" || filter == ".") return true;
  const bool negate = filter[0] == '-';
  const std::regex re(negate ? filter.substr(1) : filter, std::regex::extended);
  return std::regex_search(name, re) != negate;
}

// The coherence probe's threads: thread 0 and the last one on another PU.
std::pair<int, int> ProbeThreads(const Point& p) {
  const auto& pus = p.plan.pus;
  for (int j = static_cast<int>(pus.size()) - 1; j > 0; --j)
    if (pus[j].os_index != pus[0].os_index) return {0, j};
  return {-1, -1};
}

// --calibrate-only: what `lockline predict --target=` rescales by: 1-thread
// rows of the families it fits (plots/predict_fit.py LOCK_FAMILIES; not the
// largest-count-only twins) and the c2c ping-pong pairs.
bool InCalibration(const Point& p) {
  static const std::set<std::string> kFitted = {"locks", "zone_lock",
                                                "page_free", "pagevec"};
  if (p.family == "calibration") return p.params.at(0).first == "c2c";
  return p.threads == 1 && kFitted.count(p.family) > 0 &&
         !p.variant->largest_thread_count_only;
}

json PlacementJson(const Point& p, const RunState& run) {
  json placement = ThreadPlanJson(p.plan);
  placement["pin"] = run.pin.text;
  placement["spin_yield"] =
      p.plan.oversubscribed ? "after_1024_pauses" : "never";
  placement["mem"] = run.opts.mem;
  return placement;
}

// placement.bound_pus (each thread's affinity, read back) and observed_pus
// (the PUs each thread ended a window on).
void AddObservedPlacement(ThreadTeam& team,
                          const std::vector<std::set<int>>& seen_pus,
                          json& placement) {
  json bound = json::array(), observed = json::array();
  for (const auto& pus : team.BoundPus()) bound.push_back(pus);
  for (const auto& pus : seen_pus)
    observed.push_back(std::vector<int>(pus.begin(), pus.end()));
  placement["bound_pus"] = bound;
  placement["observed_pus"] = observed;
}

// "" when every pinned thread (pus[i] >= 0) was bound to and seen only on its
// planned PU; else "placement mismatch: ..." naming the first that was not.
std::string PlacementMismatch(const std::vector<int>& pus, const json& bound,
                              const std::vector<std::set<int>>& seen) {
  for (size_t i = 0; i < pus.size(); ++i) {
    if (pus[i] < 0) continue;
    const std::string head = "placement mismatch: thread " + std::to_string(i) +
                             " was planned on PU " + std::to_string(pus[i]) +
                             " but ";
    if (i < bound.size() && bound[i].is_array() && !bound[i].empty() &&
        bound[i] != json::array({pus[i]}))
      return head + "its affinity read back is PUs " + bound[i].dump() +
             " (something changed its binding during the point)";
    if (i < seen.size())
      for (int pu : seen[i])
        if (pu != pus[i])
          return head + "it ran on PU " + std::to_string(pu) +
                 " (placement.observed_pus)";
  }
  return "";
}

json ParamsJson(const Point& p) {
  json o = json::object();
  for (const auto& [k, v] : p.params) o[k] = v;
  o["threads"] = p.threads;
  return o;
}

// The default run's plan-time cut (budget.h FitRepetitions) at the minimum
// window: figures down to kMinFigureRepetitions, then comparisons down to the
// run's repetitions (PlanPairs' minimum), written into the points.
void CutRepetitions(RunState& run, double budget_left_s) {
  for (const Point& p : run.points) {
    BudgetPoint& b = run.budget[p.index];
    b.comparison = !p.variant->question.empty();
    b.repetitions_floor =
        b.comparison ? run.opts.repetitions * p.variant->repetition_factor
                     : kMinFigureRepetitions;
  }
  run.cut = FitRepetitions(
      run.budget, run.recording, budget_left_s,
      budget_left_s + run.opts.budget_s - PlannedBudgetS(run.opts),
      kMinFitWindowS);
  for (Point& p : run.points) {
    const int reps = run.budget[p.index].repetitions_left;
    if (reps == PointRepetitions(run, p)) continue;
    p.repetitions = reps;
    if (!p.pairs) continue;
    p.pairs->repetitions = reps;
    p.pairs->expected_half_width = PairedHalfWidth(
        static_cast<int>(p.pairs->prior.regime_share * reps + 1e-9),
        p.pairs->pairs_per_repetition, p.pairs->prior);
  }
  if (run.results && run.cut.figure_cap_s >= 0)
    run.results->lockline_context()["repetitions_cut"] = {
        {"figure_cap_s", run.cut.figure_cap_s},
        {"figure_points_cut", run.cut.figure_points_cut},
        {"comparison_share", run.cut.comparison_share},
        {"whole_budget", run.cut.whole_budget}};
}

// Words for a question id ("" the figures; an unknown id itself).
std::string QuestionTitle(const std::string& question) {
  static const std::map<std::string, std::string> titles = {
      {"000", "000 pagevec size and alignment (LKML 2004)"},
      {"001", "001 zone->lock placement (linux-mm 2015)"},
      {"002", "002 put_page fast path (linux-mm 2006)"},
      {"003", "003 a larger pagevec (LKML 2020)"},
      {"004", "004 pre-zeroing (linux-mm 2004)"},
      {"aa", "A/A rows (false-effect rate)"},
      {"instr", "lock_stat's own cost (instrumented vs /stats:off twin)"},
      {"", "the figures' other rows"}};
  const auto it = titles.find(question);
  return it != titles.end() ? it->second : question;
}

// PUs of their own a point's helper threads need besides its threads: one,
// or one per NUMA node (PlannedHelperCount: as many as pagevec's scanners).
int HelperPus(const Variant& v, const Topology& topo) {
  if (!v.needs_spare_pu) return 0;
  return v.helper_per_node ? PlannedHelperCount(topo) : 1;
}

// Each point's share of the seconds the plan predicts (all 0 if none).
std::vector<double> PlanShares(const RunState& run) {
  std::vector<double> each = PredictPointSeconds(run.budget, run.window_s);
  double sum = 0;
  for (double s : each) sum += s;
  for (double& s : each) s = sum > 0 ? s / sum : 0.0;
  return each;
}

// A repetition's cost besides its windows (its row's `timing`), for FitWindow.
void AccountRepetition(RunState& run, const Point& point, const json& timing) {
  if (point.index >= run.budget.size()) return;
  BudgetPoint& b = run.budget[point.index];
  b.repetitions_left = std::max(0, b.repetitions_left - 1);
  if (timing.contains("fixed_work")) b.fixed_work = timing["fixed_work"];
  const double wall = timing.value("wall_s", 0.0);
  const double windows = b.fixed_work ? 0.0 : b.windows * b.window_s;
  ++b.measured;
  b.measured_s += std::max(0.0, wall - windows);
  run.question_actual_s[point.variant->question] +=
      wall + timing.value("gap_s", 0.0);
  run.recording_gap_s += timing.value("gap_s", 0.0);
  run.recording_rows +=
      static_cast<double>(run.results->doc()["benchmarks"].size());
}

// One repetition on its way through RunPoint's stages. Members are destroyed
// in reverse order: the team, the workload, its environment, layout sampling.
struct PointRun {
  PointRun(benchmark::State& s, const Point& p, RunState& r)
      : state(s), point(p), run(r) {}
  benchmark::State& state;
  const Point& point;
  RunState& run;
  json rec;     // the row's lockline fields (RecordRepetition adds the rest)
  json timing;  // the row's `timing`
  // Where the repetition's wall time goes (row `timing`).
  uint64_t t_start = 0, t_setup = 0, t_loop0 = 0, t_loop1 = 0;
  double probes_s = 0;
  uint64_t window_ns = 0;
  bool first_of_instance = false;  // Google Benchmark's first run of the key
  bool loop_done = false;          // the window loop ran to its end
  PointEnv env;                    // outlives the workload made from it
  std::optional<LayoutSampling> layout;
  std::unique_ptr<Workload> wl;
  std::vector<int> pus;  // each thread's PU; -1: not bound (--pin=none)
  std::vector<ThreadCtx> ctx;
  std::unique_ptr<ThreadTeam> team;
  int probe_a = -1, probe_b = -1;  // the coherence probe's threads
  bool shares = false, probing = false;
  // A one-PU point's helper PU (HelperProbePu): probed with the thread's PU
  // before the workload starts its helper and after it stopped; -1: none.
  int helper_pu = -1;
  double before_ns = 0, after_ns = 0;
  double seconds = 0, cpu_seconds = 0;
  uint64_t ops = 0;
  std::vector<uint64_t> per_thread;     // operations of each thread
  std::vector<std::set<int>> seen_pus;  // PUs each thread ended a window on
  bool overrun = false;
  json windows = json::array();
  std::string quota_warning;
  std::vector<std::vector<CounterReading>> readings;
  PointReport report;
  json mem_nodes;
  std::string broken;   // Workload::Verify's complaint
  std::string failure;  // why the repetition failed; "": it did not
};

// Stage 1, the window: starts the clock and the row; a point keeps the fit of
// its first repetition in all (they are compared with each other: budget.h).
void PlanWindow(PointRun& pr) {
  const Point& point = pr.point;
  RunState& run = pr.run;
  pr.rec = {{"lockline_key", point.key},
            {"family", point.family},
            {"params", ParamsJson(point)},
            {"description", point.variant->description},
            {"placement", PlacementJson(point, run)}};
  pr.t_start = pr.t_setup = pr.t_loop0 = pr.t_loop1 = NowNs();
  if (run.budget.size() != run.points.size()) FitWindow(run);
  BudgetPoint& budget = run.budget[point.index];
  if (budget.window_s <= 0) budget.window_s = run.window_s;
  pr.window_ns = SecondsToNs(budget.window_s);
  pr.timing = {
      {"window_s", budget.window_s},
      {"gap_s", run.last_repetition_end_ns
                    ? SecondsBetween(run.last_repetition_end_ns, pr.t_start)
                    : 0.0}};
  if (run.gb_round != run.resolve_round) {
    run.gb_round = run.resolve_round;
    run.gb_runs.clear();
  }
  pr.first_of_instance = run.gb_runs[point.key]++ == 0;
}

// The PU of a one-PU point's helper (prezero's zeroer, pagevec's scanner)
// when it has one of its own: the pair whose line transfers the point pays
// (the zeroer's pages, on this VM near: ~0 %, far: -5 % for pre-zeroing), so
// the point gets that pair's coherence regime. -1: more than one PU (the
// threads' own pair is probed), no helper, unpinned, or a shared PU.
int HelperProbePu(const Point& point, const RunState& run) {
  if (!(point.variant->needs_spare_pu || point.variant->helper_on_idle_pu) ||
      point.plan.pus.empty() || ProbeThreads(point).first >= 0 ||
      run.pin.policy == PinPolicy::kNone || !run.topo->is_host())
    return -1;
  const std::vector<HelperPlace> places =
      PlanHelperPlaces(*run.topo, point.plan, run.opts.oversubscribe);
  if (places.empty() || places[0].pu < 0 || places[0].shares_measured_pu ||
      places[0].pu == point.plan.pus[0].os_index)
    return -1;
  return places[0].pu;
}

// One-way ns between the point's PU and its helper's, no helper running.
double ProbeHelperPair(PointRun& pr) {
  const uint64_t t0 = NowNs();
  ThreadTeam pair(pr.run.topo.get(),
                  {pr.point.plan.pus[0].os_index, pr.helper_pu}, nullptr);
  const double ns = pair.PingPong(0, 1, SecondsToNs(kProbeSeconds)).first;
  pr.probes_s += SecondsBetween(t0, NowNs());
  return ns;
}

// Stage 2: layout sampling, the workload, threads pinned and set up.
void Prepare(PointRun& pr) {
  const Point& point = pr.point;
  RunState& run = pr.run;
  pr.helper_pu = HelperProbePu(point, run);
  if (pr.helper_pu >= 0) pr.before_ns = ProbeHelperPair(pr);
  pr.layout.emplace(
      RepetitionLayoutSeed(point.key, run.repetitions_done[point.key]),
      run.sample_layout);
  pr.env = MakePointEnv(point, run, pr.window_ns);
  pr.wl = point.variant->make(pr.env);
  pr.timing["fixed_work"] = pr.wl->fixed_work();
  // Explicit PUs (a latency pair) are bound even under --pin=none.
  const bool pinned =
      run.pin.policy != PinPolicy::kNone || !point.variant->pus.empty();
  for (int i = 0; i < point.threads; ++i)
    pr.pus.push_back(pinned ? point.plan.pus[i].os_index : -1);
  pr.team =
      StartThreads(run, point, pr.pus, pr.window_ns, point.plan.oversubscribed,
                   run.counters.get(), *pr.wl, &pr.ctx);
}

// The cgroup's CFS throttling during the windows. A point with more threads
// than the quota measures the controller: the row says so even unthrottled.
void NoteThrottling(PointRun& pr, const CpuThrottle& before) {
  const CpuThrottle after = ReadCpuThrottle(ProcessCgroupCpu());
  if (before.ok && after.ok)
    pr.rec["cgroup"] = {
        {"nr_throttled", after.nr_throttled - before.nr_throttled},
        {"throttled_usec", after.throttled_usec - before.throttled_usec}};
  const CgroupCpu& cg = ProcessCgroupCpu();
  if (cg.quota_cpus <= 0 || pr.point.threads <= cg.quota_cpus) return;
  char q[32];
  std::snprintf(q, sizeof q, "%.2f", cg.quota_cpus);
  pr.rec["cgroup"]["quota_cpus"] = cg.quota_cpus;
  pr.rec["cgroup"]["over_quota"] = true;
  pr.quota_warning =
      std::to_string(pr.point.threads) +
      (pr.point.threads == 1 ? " thread exceeds" : " threads exceed") +
      " the cgroup CPU quota of " + q + " CPUs (" + cg.limited_by +
      "): the point measures throttling";
}

// Stage 3, the windows (one Google Benchmark iteration each) between two
// coherence probes (none without a shared line). A window past its bound (a
// preempted FIFO waiter, big fixed work) is flagged; past the hard limit the
// run exits.
void RunWindows(PointRun& pr) {
  const int threads = pr.point.threads;
  ThreadTeam& team = *pr.team;
  std::tie(pr.probe_a, pr.probe_b) = ProbeThreads(pr.point);
  const uint64_t probe_ns = SecondsToNs(kProbeSeconds);
  pr.shares = pr.wl->shares_lines();
  pr.probing = pr.shares && pr.probe_a >= 0 && pr.pus[pr.probe_a] >= 0 &&
               pr.pus[pr.probe_b] >= 0;
  pr.t_setup = NowNs();
  if (pr.probing)
    pr.before_ns = team.PingPong(pr.probe_a, pr.probe_b, probe_ns).first;
  team.ResetCounters();
  const uint64_t bound_ns = OverrunBoundNs(pr.window_ns, pr.wl->fixed_work());
  const uint64_t hard_ns = bound_ns + 120'000'000'000ull;
  pr.per_thread.assign(threads, 0);
  pr.seen_pus.resize(threads);
  const CpuThrottle throttle0 = ReadCpuThrottle(ProcessCgroupCpu());
  pr.probes_s += SecondsBetween(pr.t_setup, NowNs());
  pr.t_loop0 = NowNs();
  for (auto _ : pr.state) {
    const WindowResult r =
        team.RunWindow(*pr.wl, pr.ctx, pr.window_ns, bound_ns, hard_ns);
    pr.state.SetIterationTime(std::max(r.seconds, 1e-9));
    pr.seconds += r.seconds;
    pr.cpu_seconds += r.cpu_seconds;
    pr.ops += r.total_ops;
    pr.overrun |= r.overrun;
    for (int i = 0; i < threads; ++i) {
      pr.per_thread[i] += r.ops[i];
      if (r.last_cpus[i] >= 0) pr.seen_pus[i].insert(r.last_cpus[i]);
    }
    pr.windows.push_back(
        {{"seconds", r.seconds}, {"ops", r.total_ops}, {"overrun", r.overrun}});
  }
  pr.t_loop1 = NowNs();
  pr.loop_done = true;
  NoteThrottling(pr, throttle0);
  if (pr.probing)
    pr.after_ns = team.PingPong(pr.probe_a, pr.probe_b, probe_ns).first;
  pr.probes_s += SecondsBetween(pr.t_loop1, NowNs());
}

// Stage 4, verification: counters, placement, teardown, the report.
// pr.failure: a refused setup, a broken invariant, or a thread off its planned
// PU (the row is kept as an error, out of every comparison and plot).
void Verify(PointRun& pr) {
  pr.readings = pr.team->ReadCounters();
  json& placement = pr.rec["placement"];
  AddObservedPlacement(*pr.team, pr.seen_pus, placement);
  const std::string mismatch =
      PlacementMismatch(pr.pus, placement["bound_pus"], pr.seen_pus);
  pr.mem_nodes = SharedRegionsJson(pr.run.topo.get());
  pr.team->RunOnAll([&](int i) { pr.wl->TeardownThread(pr.ctx[i]); });
  pr.wl->Report(pr.report, pr.seconds, pr.ops);
  const std::string not_run = pr.wl->SetupError();
  pr.broken = not_run.empty() ? pr.wl->Verify() : "";
  pr.failure = !not_run.empty() ? "not measured: " + not_run
               : !pr.broken.empty()
                   ? "invariant broken after the run: " + pr.broken
                   : mismatch;
}

// The row's flat metrics, also Google Benchmark's counters: throughput, per-op
// time, CPU use, CountersForRow's, then the family's own (none may shadow a
// row key of results/SCHEMA.md); and the row's `counters`.
void AddMetrics(PointRun& pr) {
  static const std::set<std::string> kReserved = {
      "name",         "run_name",         "run_type",      "threads",
      "iterations",   "real_time",        "cpu_time",      "time_unit",
      "repetitions",  "repetition_index", "family",        "params",
      "placement",    "coherence",        "fairness",      "windows",
      "counters",     "details",          "layouts",       "verify",
      "lockline_key", "error_occurred",   "error_message", "ops_per_s",
      "ns_per_op",    "cpu_util",         "resolve_round", "timing"};
  const double seconds = pr.seconds, threads = pr.point.threads;
  const double ops = static_cast<double>(pr.ops);
  std::vector<std::pair<std::string, double>> metrics = {
      {"ops_per_s", seconds > 0 ? ops / seconds : 0},
      {"ns_per_op", pr.ops ? seconds * threads * 1e9 / ops : 0},
      {"cpu_util", seconds > 0 ? pr.cpu_seconds / (seconds * threads) : 0}};
  CounterRow counters = CountersForRow(pr.readings, pr.ops);
  for (auto& m : counters.metrics) metrics.push_back(std::move(m));
  for (const auto& m : pr.report.metrics) {
    if (kReserved.count(m.first))
      throw std::logic_error("family metric '" + m.first +
                             "' shadows a result-file key");
    metrics.push_back(m);
  }
  for (const auto& [name, value] : metrics) {
    const double v = std::isfinite(value) ? value : 0;
    pr.state.counters[name] = benchmark::Counter(v);
    pr.rec[name] = v;
  }
  pr.rec["counters"] = std::move(counters.counters);
}

// Per-thread operation counts: an unfair lock can look fast while starving.
json FairnessJson(const std::vector<uint64_t>& per_thread, uint64_t ops) {
  const double n = static_cast<double>(per_thread.size());
  double mean = static_cast<double>(ops) / n, var = 0;
  for (uint64_t c : per_thread) var += (c - mean) * (c - mean);
  var /= n;
  return {{"per_thread_ops", per_thread},
          {"min", *std::min_element(per_thread.begin(), per_thread.end())},
          {"max", *std::max_element(per_thread.begin(), per_thread.end())},
          {"cv", mean > 0 ? std::sqrt(var) / mean : 0}};
}

// The row's coherence object; RecordRepetition relabels it (coherence.h).
json CoherenceJson(const PointRun& pr) {
  double base = 0;
  json pair = nullptr;
  if (pr.probing || pr.helper_pu >= 0) {
    const std::pair<int, int> pus =
        pr.probing ? std::pair{pr.point.plan.pus[pr.probe_a].os_index,
                               pr.point.plan.pus[pr.probe_b].os_index}
                   : std::pair{pr.point.plan.pus[0].os_index, pr.helper_pu};
    pair = {pus.first, pus.second};
    if (const auto it = pr.run.baseline_ns.find(pus);
        it != pr.run.baseline_ns.end())
      base = it->second;
  }
  json c = {{"label", pr.shares ? "unknown" : "none"},
            {"regime", nullptr},
            {"regime_ns", nullptr},
            {"shares_lines", pr.shares},
            {"pair", pair},
            {"baseline_ns", base},
            {"before_ns", pr.before_ns},
            {"after_ns", pr.after_ns}};
  // RecordRow adds after_ns once the helper has stopped.
  if (pr.helper_pu >= 0) c["probed"] = "thread's PU and its helper's, idle";
  return c;
}

// The pahole-style report of a row's layouts, once (context.lockline.layouts).
void AddLayoutReports(RunState& run, const std::vector<std::string>& names) {
  json& layouts = run.results->lockline_context()["layouts"];
  if (!layouts.is_object()) layouts = json::object();
  for (const std::string& name : names) {
    if (layouts.contains(name)) continue;
    if (const LayoutInfo* info = FindLayout(name)) {
      json j = LayoutToJson(*info);
      j["pahole"] = FormatPahole(*info);
      layouts[name] = j;
    }
  }
}

// Stage 5, the row's fields.
void FillRow(PointRun& pr) {
  json& rec = pr.rec;
  AddMetrics(pr);
  rec["fairness"] = FairnessJson(pr.per_thread, pr.ops);
  rec["coherence"] = CoherenceJson(pr);
  rec["windows"] = pr.windows;
  rec["overrun"] = pr.overrun;
  rec["address_layout"] = pr.layout->Json();
  json& details = rec["details"] = pr.report.details;
  if (details.is_null()) details = json::object();
  if (details.is_object()) details["mem_nodes"] = pr.mem_nodes;
  // A paired row keeps its other pairs when one window overran: the pair
  // holding it is flagged and left out (plots/stats.py), not the repetition.
  if (details.is_object() && details.contains("duet"))
    MarkOverrunPairs(details["duet"], pr.windows);
  rec["layouts"] = pr.report.layouts;
  rec["verify"] = pr.broken.empty() ? "ok" : pr.broken;
  AddLayoutReports(pr.run, pr.report.layouts);
}

void FinishTiming(PointRun& pr) {
  const double wall = SecondsBetween(pr.t_start, NowNs());
  const double setup = SecondsBetween(pr.t_start, pr.t_setup);
  const double windows = SecondsBetween(pr.t_loop0, pr.t_loop1);
  json& timing = pr.timing;
  timing["wall_s"] = wall;
  timing["setup_s"] = setup;
  timing["windows_s"] = windows;
  timing["probes_s"] = pr.probes_s;
  if (pr.point.index < pr.run.budget.size())  // the plan's price of it
    timing["declared_s"] = pr.run.budget[pr.point.index].declared_s;
  timing["teardown_s"] = std::max(0.0, wall - setup - windows - pr.probes_s);
  pr.rec["timing"] = timing;
}

// Google Benchmark names the run "<key>/iterations:W/manual_time"; the rows
// leave W (the suite's windows) out, so Google's tools/compare.py pairs a
// point's rows across suites. Its time fields are per operation (rows.h).
json RowOf(PointRun& pr) {
  RunState& run = pr.run;
  const std::string name = pr.point.key + "/manual_time";
  json row = {{"name", name},
              {"run_name", name},
              {"run_type", "iteration"},
              {"repetitions", PointRepetitions(run, pr.point)},
              {"repetition_index", run.repetitions_done[pr.point.key]++},
              {"threads", pr.point.threads}};
  SetPerOpTimes(row, pr.seconds, pr.cpu_seconds, pr.ops);
  if (run.resolve_round > 0) row["resolve_round"] = run.resolve_round;
  for (auto& [k, v] : pr.rec.items()) row[k] = v;
  const json& context = run.results->lockline_context();
  if (context.value("emulated", false)) row["emulated"] = true;
  // Counters from the test shim are not this CPU's: every row says so.
  const json counters = context.value("counters", json::object());
  if (counters.is_object() && counters.contains("fake_pmu"))
    row["fake_pmu"] = true;
  const bool error = row.contains("error_message");
  row["error_occurred"] = error;
  if (!error) row["error_message"] = "";
  return row;
}

// The console line of a recorded repetition; `left` < 0: estimated from the
// mean repetition so far.
void PrintProgress(RunState& run, const Point& point, const json& row,
                   const std::string& label, double left) {
  ++run.progress_done;
  const double elapsed = SecondsBetween(run.progress_start_ns, NowNs());
  if (left < 0)
    left =
        elapsed / run.progress_done * (run.progress_total - run.progress_done);
  std::string what;
  if (row["error_occurred"].get<bool>()) {
    what = "ERROR: " + row["error_message"].get<std::string>();
  } else {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%11.4g ops/s %9.1f ns/op  %s",
                  row.value("ops_per_s", 0.0), row.value("ns_per_op", 0.0),
                  label.c_str());
    what = buf;
  }
  if (row.value("overrun", false))
    what += "  OVERRUN (a window ran past its bound)";
  // The run's estimated total (from its start) against its budget.
  const double total = SecondsBetween(run.run_start_ns, NowNs()) + left;
  std::printf("[%d/%d] %s  %s  (%s elapsed, ~%s left: ~%s of budget %s%s)\n",
              run.progress_done, run.progress_total, point.key.c_str(),
              what.c_str(), FormatDuration(elapsed).c_str(),
              FormatDuration(left).c_str(), FormatDuration(total).c_str(),
              FormatDuration(run.opts.budget_s).c_str(),
              run.progress_note.c_str());
  std::fflush(stdout);
}

// run.plan_rep_s: a repetition's share of the plan's estimate, per point.
void PricePlan(RunState& run) {
  const std::vector<double> share = PlanShares(run);
  const double planned = std::max(
      0.0, run.plan_estimate_s -
               SecondsBetween(run.run_start_ns, run.progress_start_ns));
  for (size_t i = 0; i < share.size(); ++i)
    run.plan_rep_s.push_back(share[i] * planned /
                             std::max(1, run.budget[i].repetitions_left));
}

// Starved: repetitions taking kStarvedStretch x the plan's price, after
// kStarvedAfterS and a tenth of the plan (issue 49: a loaded run took 6x).
constexpr double kStarvedStretch = 1.5;
constexpr double kStarvedAfterS = 20;

// A starved run whose rest at that pace would end past max(budget, estimate):
// the figures' points keep the share of their remaining repetitions that fits
// (one at least), the seed points all. Once a run; context.lockline.replanned.
void ReplanIfStarved(RunState& run) {
  if (run.plan_rep_s.size() != run.points.size() || !run.keep.empty()) return;
  const double ran = SecondsBetween(run.progress_start_ns, NowNs());
  // Judged on a tenth of the plan at least: the randomly interleaved
  // repetitions so far then sample every family's cost.
  if (ran < kStarvedAfterS || run.plan_done_s < 0.1 * run.plan_estimate_s ||
      ran < kStarvedStretch * run.plan_done_s)
    return;
  const double stretch = ran / run.plan_done_s;
  double paired = 0, others = 0;
  for (const Point& p : run.points) {
    const double s = stretch * run.plan_rep_s[p.index] *
                     run.budget[p.index].repetitions_left;
    (p.variant->question.empty() ? others : paired) += s;
  }
  const double elapsed = SecondsBetween(run.run_start_ns, NowNs());
  const double cap = std::max(PlannedBudgetS(run.opts), run.plan_estimate_s);
  if (others <= 0 || elapsed + paired + others <= cap * 1.05) return;
  const double f = std::clamp((cap - elapsed - paired) / others, 0.0, 1.0);
  json dropped = json::array();
  int cut = 0;
  for (const Point& p : run.points) {
    BudgetPoint& b = run.budget[p.index];
    const int done = run.repetitions_done[p.key];
    const int left = std::max(std::min(1 - done, b.repetitions_left),
                              static_cast<int>(f * b.repetitions_left));
    if (!p.variant->question.empty() || left >= b.repetitions_left) continue;
    cut += b.repetitions_left - left;
    b.repetitions_left = left;
    run.keep[p.key] = done + left;
    dropped.push_back(p.key);
  }
  if (dropped.empty()) return;
  run.progress_total -= cut;
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf(
      "lockline: starved: the repetitions took %s where the plan priced them "
      "at %s (%.1fx, load %.1f); %d repetitions of %zu figure points dropped "
      "to end near %s (context.lockline.replanned)\n",
      FormatDuration(ran).c_str(), FormatDuration(run.plan_done_s).c_str(),
      stretch, load[0], cut, dropped.size(), FormatDuration(cap).c_str());
  run.results->lockline_context()["replanned"] = {
      {"at_s", elapsed},     {"estimate_s", run.plan_estimate_s},
      {"elapsed_s", ran},    {"planned_s", run.plan_done_s},
      {"stretch", stretch},  {"cap_s", cap},
      {"load_avg", load[0]}, {"repetitions_dropped", cut},
      {"dropped", dropped}};
}

// Appends the row to lockline.json at once (Google Benchmark 1.7.1 reports an
// instance after its last repetition, which random interleaving may put at the
// end), relabels coherence, refits the budget, flushes and prints progress.
void RecordRepetition(PointRun& pr) {
  FinishTiming(pr);
  RunState& run = pr.run;
  const std::string& key = pr.point.key;
  // The next repetition's timing.gap_s starts here (recording this one).
  run.last_repetition_end_ns = NowNs();
  if (run.resolve_round == 0 && run.plan_rep_s.empty()) PricePlan(run);
  if (pr.point.index < run.plan_rep_s.size())
    run.plan_done_s += run.plan_rep_s[pr.point.index];
  AccountRepetition(run, pr.point, pr.timing);
  const json row = RowOf(pr);
  run.row_index[key].push_back(run.results->doc()["benchmarks"].size());
  run.results->AddRow(row);
  run.results->EditRows(
      [&](json& doc) { return RelabelCoherence(doc, &run.regimes); });
  // In an --until-resolved round the aggregates follow every repetition, so
  // an interrupted run's agree with its rows.
  if (run.resolve_round > 0)
    run.results->EditRows(
        [&](json& doc) { return UpdateAggregates(doc, key); });
  // Planned repetitions refit the window of the points not started.
  double left = -1;
  if (run.resolve_round == 0) {
    ReplanIfStarved(run);
    FitWindow(run);
    left = run.fit.estimate_s;
  }
  json& run_time = run.results->lockline_context()["run_time"];
  if (run_time.is_object() && run.run_start_ns) {
    run_time["elapsed_s"] = SecondsBetween(run.run_start_ns, NowNs());
    if (left >= 0) run_time["left_s"] = left;
  }
  const std::string label = run.results->doc()["benchmarks"]
                                .back()
                                .value("coherence", json::object())
                                .value("label", "unknown");
  run.results->Flush();  // never throws: a failed write stops the run
  PrintProgress(run, pr.point, row, label, left);
}

// A failed repetition. Google Benchmark 1.7.1 aggregates (ComputeStats) only
// if every repetition ends at the planned iteration count (else Check
// `run_iterations == run.iterations` aborts, exit 134) and the instance's first
// is not an error (SIGSEGV when later ones succeed). So the loop always ends at
// the planned count, and the first failure is reported as a run labelled with
// the error (lockline's row says error_occurred; every aggregate leaves it
// out); later ones are SkipWithError.
void FailRepetition(PointRun& pr, const std::string& why) {
  if (!pr.first_of_instance)
    pr.state.SkipWithError(why.c_str());
  else
    pr.state.SetLabel("lockline error (row error_occurred): " + why);
  // After SkipWithError KeepRunning runs nothing; else the rest count 1 ns.
  if (!pr.loop_done)
    while (pr.state.KeepRunning()) pr.state.SetIterationTime(1e-9);
  pr.rec["error_message"] = why;
  RecordRepetition(pr);
}

// Stage 6, the record. The threads, tasks and descriptors go first (their
// teardown is the repetition's cost; a tight fd limit fails the point, not the
// write), then the row.
void RecordRow(PointRun& pr) {
  pr.team.reset();
  pr.wl.reset();
  if (!pr.failure.empty()) return FailRepetition(pr, pr.failure);
  if (pr.helper_pu >= 0)
    pr.rec["coherence"]["after_ns"] = pr.after_ns = ProbeHelperPair(pr);
  std::string warning =
      pr.overrun ? "a window ran past its wall-clock bound" : "";
  if (!pr.quota_warning.empty())
    warning += (warning.empty() ? "" : "; ") + pr.quota_warning;
  if (!warning.empty()) pr.rec["warning"] = warning;
  RecordRepetition(pr);
}

}  // namespace

json ThreadPlanJson(const ThreadPlan& plan) {
  json pus = json::array();
  for (const PuInfo& pu : plan.pus) pus.push_back(pu.os_index);
  return {{"pus", pus},
          {"cores", plan.cores},
          {"l3s", plan.l3s},
          {"numa_nodes", plan.numa_nodes},
          {"packages", plan.packages},
          {"smt_siblings", plan.smt_siblings},
          {"oversubscribed", plan.oversubscribed}};
}

void BuildPoints(RunState& run) {
  const Suite suite = run.opts.suite;
  const int usable = static_cast<int>(run.order.size());
  for (const Family& fam : Families())
    for (Variant& v : fam.planned_variants ? fam.planned_variants(run.order)
                                           : fam.variants())
      if (static_cast<int>(v.suite) <= static_cast<int>(suite) &&
          (!v.quick_only || suite == Suite::kQuick))
        run.variants_storage.push_back({fam.name, std::move(v)});
  // variants_storage no longer grows: points may point into it from here on.
  // One plan per thread count, copied into its points (planning each point
  // again is slow on thousands of PUs); --list needs no plans at all.
  std::map<int, ThreadPlan> plans;
  for (const auto& [family, v] : run.variants_storage) {
    const int helpers = HelperPus(v, *run.topo);
    std::vector<int> counts = v.threads.empty() ? run.counts : v.threads;
    if (v.largest_thread_count_only && !counts.empty()) {
      // The largest count that leaves the helpers their spare PUs, else the
      // largest (refused below with the reason).
      int best = -1;
      for (int n : counts)
        if ((run.opts.oversubscribe || n + helpers <= usable) && n > best)
          best = n;
      counts = {best >= 0 ? best
                          : *std::max_element(counts.begin(), counts.end())};
    }
    for (int n : counts) {
      Point p;
      p.family = family;
      p.params = v.params;
      p.threads = n;
      p.variant = &v;
      p.key = RowKey(family, v.params, n);
      if (v.repetition_factor > 1)
        p.repetitions = v.repetition_factor * run.opts.repetitions;
      if (!MatchesFilter(run.opts.benchmark_filter, p.key) ||
          (run.opts.calibrate_only && !InCalibration(p)))
        continue;
      if (!v.unavailable.empty()) {
        run.skipped.push_back(p.key + ": " + v.unavailable);
        continue;
      }
      const int need = n + helpers;
      if (need > usable && !run.opts.oversubscribe) {
        run.skipped.push_back(
            p.key + ": needs " + std::to_string(need) + " PUs (" +
            (helpers == 0   ? "threads"
             : helpers == 1 ? "threads + a spare PU for its helper thread"
                            : "threads + a spare PU for each of its " +
                                  std::to_string(helpers) +
                                  " helper threads, one per NUMA node") +
            "), " + std::to_string(usable) +
            " usable; pass --oversubscribe to run it anyway");
        continue;
      }
      if (!v.pus.empty()) {
        // Explicit PUs: plan on exactly those, in the given order.
        std::vector<PuInfo> chosen;
        for (int os : v.pus)
          if (const PuInfo* pu = run.topo->FindPu(os)) chosen.push_back(*pu);
        if (static_cast<int>(chosen.size()) != n) {
          run.skipped.push_back(p.key + ": its PUs are not all usable here");
          continue;
        }
        p.plan = PlanThreads(chosen, n, false);
      } else if (!run.opts.list) {
        if (!plans.count(n))
          plans[n] = PlanThreads(run.order, n, run.opts.oversubscribe);
        p.plan = plans[n];
      }
      p.windows = v.windows > 0 ? v.windows
                                : (suite == Suite::kQuick  ? 2
                                   : suite == Suite::kFull ? 5
                                                           : 3);
      if (v.paired && suite != Suite::kQuick) {
        // Work between holds (work_ns other than 0) contends at the era's
        // rate and spreads less than a saturated lock (PriorPairSpread).
        const std::string work = ParamOf(v.params, "work_ns");
        p.pairs = PlanPairs(run.opts.precision, n, PointRepetitions(run, p),
                            !work.empty() && work != "0");
        p.windows = 2 * (kDuetWarmupPairs + p.pairs->pairs_per_repetition);
        p.repetitions = p.pairs->repetitions;
      }
      p.index = run.points.size();
      run.points.push_back(std::move(p));
    }
  }
  for (const Point& p : run.points) run.by_key[p.key] = &p;
}

void MeasureCoherenceBaselines(RunState& run) {
  if (!run.topo->is_host()) return;
  std::set<std::pair<int, int>> pairs;
  for (const Point& p : run.points) {
    if (run.pin.policy == PinPolicy::kNone && p.variant->pus.empty())
      continue;  // unpinned
    const auto [a, b] = ProbeThreads(p);
    if (a >= 0) pairs.insert({p.plan.pus[a].os_index, p.plan.pus[b].os_index});
  }
  json out = json::array();
  const uint64_t probe_ns = SecondsToNs(kBaselineProbeSeconds);
  for (const auto& pr : pairs) {
    ThreadTeam team(run.topo.get(), {pr.first, pr.second}, nullptr);
    std::vector<double> medians;
    for (int i = 0; i < 3; ++i)
      medians.push_back(team.PingPong(0, 1, probe_ns).first);
    std::vector<double> sorted = medians;
    std::sort(sorted.begin(), sorted.end());
    run.baseline_ns[pr] = sorted[1];
    out.push_back({{"pus", {pr.first, pr.second}},
                   {"ns", run.baseline_ns[pr]},
                   {"probes_ns", medians}});
  }
  run.results->lockline_context()["coherence_baseline"] = out;
}

std::string RepetitionCutLine(const RunState& run) {
  const RepetitionCut& c = run.cut;
  if (c.figure_cap_s < 0) return "";
  const std::string share =
      c.comparison_share >= 1 ? "keep their planned repetitions"
      : c.comparison_share <= 0
          ? "run the run's " + std::to_string(run.opts.repetitions) +
                " repetitions (their minimum)"
          : "keep " + std::to_string(std::lround(c.comparison_share * 100)) +
                " % of their planned repetitions (at least " +
                std::to_string(run.opts.repetitions) + ")";
  const std::string floor = std::to_string(kMinFigureRepetitions);
  return "plan within the budget: " +
         (c.whole_budget
              ? "every figure point at " + floor + " repetitions"
              : std::to_string(c.figure_points_cut) + " figure points cut to " +
                    floor + "+ repetitions, the costliest first (at most " +
                    FormatDuration(c.figure_cap_s) + " a point)") +
         "; the comparisons " + share +
         (c.whole_budget ? ", in the time --until-resolved would have had"
                         : "");
}

double FitWindow(RunState& run) {
  const bool plan_time = run.budget.size() != run.points.size();
  if (plan_time) {
    run.budget.clear();
    bool faults = false;
    for (const Point& p : run.points) faults |= p.variant->cost_mib > 0;
    // A probe of ~0.1 s; without it (mapping failed) the loaded VM's rate.
    if (faults) run.fault_s_per_mib = MeasureFaultInSecondsPerMiB();
    if (run.fault_s_per_mib <= 0) run.fault_s_per_mib = 0.004;
    for (const Point& p : run.points) {
      BudgetPoint b;
      b.family = p.family;
      b.windows = p.windows;
      b.repetitions_left = PointRepetitions(run, p);
      b.declared_s =
          HarnessRepetitionCostS(p.threads,
                                 p.variant->fixed_work ? 0 : p.windows,
                                 static_cast<int>(run.order.size())) +
          (p.variant->cost_s +
           p.variant->cost_mib * run.fault_s_per_mib * kWorkloadOverProbe) *
              (run.opts.suite == Suite::kQuick ? p.variant->quick_cost_fraction
                                               : 1.0);
      b.fixed_work = p.variant->fixed_work;
      b.oversubscribed = p.plan.oversubscribed;
      run.budget.push_back(b);
    }
    // Each repetition adds its row, and a point's last its 4 aggregates.
    const int reps = run.opts.repetitions;
    run.recording.rows_per_repetition = 1.0 + (reps >= 2 ? 4.0 / reps : 0.0);
  }
  // The coherence baselines, probed before the plan, count as spent too.
  const double spent =
      run.run_start_ns ? SecondsBetween(run.run_start_ns, NowNs()) : 0.0;
  run.recording.rows = static_cast<double>(
      run.results ? run.results->doc()["benchmarks"].size() : 0);
  run.recording.per_row_s = RecordingPerRowS(
      run.recording_gap_s, run.recording_rows, RecordingCost{}.per_row_s);
  // The default run keeps the rest for open comparisons (until_resolved.h).
  double left = PlannedBudgetS(run.opts) - spent;
  if (plan_time && FitsRepetitions(run.opts)) CutRepetitions(run, left);
  // Comparisons that took --until-resolved's time plan in the whole budget,
  // at the minimum window the cut assumed: a longer one would give the time
  // still left to the figures' windows, not to the comparisons still open (a
  // default run here planned 15 ms windows for all 4 minutes, none left).
  double max_window_s = run.window_cap_s;
  if (run.cut.whole_budget) {
    left = run.opts.budget_s - spent;
    max_window_s = std::min(max_window_s, kMinFitWindowS);
  }
  run.fit = FitBudget(run.budget, run.recording, left, run.opts.window_s,
                      kMinFitWindowS, max_window_s);
  run.window_s = run.fit.window_s;
  return spent + run.fit.estimate_s;
}

std::vector<QuestionPlan> PlanPerQuestion(const RunState& run) {
  std::map<std::string, QuestionPlan> by;
  const std::vector<double> share = PlanShares(run);
  for (std::size_t i = 0; i < run.points.size() && i < share.size(); ++i) {
    const std::string& q = run.points[i].variant->question;
    QuestionPlan& qp = by[q];
    qp.question = q;
    ++qp.points;
    if (const auto& pp = run.points[i].pairs) {
      qp.pairs +=
          pp->pairs_per_repetition * PointRepetitions(run, run.points[i]);
      qp.expected_half_width =
          std::max(qp.expected_half_width, pp->expected_half_width);
    }
    qp.estimated_s += share[i] * run.plan_estimate_s;
  }
  std::vector<QuestionPlan> out;
  for (auto& [q, qp] : by) {
    qp.title = QuestionTitle(q);
    if (!q.empty()) out.push_back(qp);
  }
  if (by.count("")) out.push_back(by[""]);  // the figures last
  return out;
}

void RegisterPoint(RunState& run, const Point& p, int repetitions) {
  benchmark::internal::Benchmark* b =
      benchmark::RegisterBenchmark(
          p.key.c_str(),
          [&run, &p](benchmark::State& st) { RunPoint(st, p, run); })
          ->UseManualTime()
          ->Iterations(p.windows)
          ->Unit(benchmark::kMillisecond);
  if (repetitions > 0) b->Repetitions(repetitions);
}

uint64_t RepetitionLayoutSeed(const std::string& key, int repetition) {
  static const uint64_t process_nonce = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ NowNs();
  }();
  // splitmix64 of the three, so nearby inputs give unrelated seeds.
  uint64_t z = process_nonce ^ std::hash<std::string>{}(key) ^
               (static_cast<uint64_t>(repetition) * 0x9E3779B97F4A7C15ull);
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int MarkOverrunPairs(json& duet, const json& windows) {
  if (!duet.is_object() || !duet.contains("pairs") || !duet["pairs"].is_array())
    return 0;
  const json sides = duet.value("sides", json::array());
  // The measured windows, in order: pair k is measured windows 2k and 2k+1.
  std::vector<bool> measured_overrun;
  const size_t n = std::min(sides.size(), windows.size());
  for (size_t w = 0; w < n; ++w)
    if (sides[w] == "a" || sides[w] == "b")
      measured_overrun.push_back(windows[w].value("overrun", false));
  int flagged = 0;
  json& pairs = duet["pairs"];
  for (size_t k = 0; k < pairs.size(); ++k) {
    const bool over =
        (2 * k < measured_overrun.size() && measured_overrun[2 * k]) ||
        (2 * k + 1 < measured_overrun.size() && measured_overrun[2 * k + 1]);
    if (pairs[k].is_object()) pairs[k]["overrun"] = over;
    flagged += over ? 1 : 0;
  }
  duet["overrun_pairs"] = flagged;
  return flagged;
}

std::unique_ptr<ThreadTeam> StartThreads(
    const RunState& run, const Point& point, const std::vector<int>& pus,
    uint64_t window_ns, bool oversubscribed, CounterSession* counters,
    Workload& wl, std::vector<ThreadCtx>* ctx) {
  ctx->clear();
  for (int i = 0; i < point.threads; ++i)
    ctx->push_back({.index = i,
                    .threads = point.threads,
                    .pu = pus[i],
                    .numa = point.plan.pus.size() > static_cast<size_t>(i)
                                ? point.plan.pus[i].numa
                                : -1,
                    .window_ns = window_ns,
                    .oversubscribed = oversubscribed});
  auto team = std::make_unique<ThreadTeam>(run.topo.get(), pus, counters,
                                           wl.page_fault_counters_left_out());
  wl.Prepare(point.threads);
  team->RunOnAllWithin(
      [&](int i) {
        // Kernel spinlock waiters never yield; an oversubscribed point's do.
        SetSpinYield((*ctx)[i].oversubscribed ? SpinYield::kAfterSpins
                                              : SpinYield::kNever);
        wl.SetupThread((*ctx)[i]);
      },
      SetupTimeoutNs(), point.key + ": the family's SetupThread");
  return team;
}

PointEnv MakePointEnv(const Point& point, const RunState& run,
                      uint64_t window_ns) {
  return {
      .topology = run.topo.get(),
      .plan = &point.plan,
      .threads = point.threads,
      .window_ns = window_ns,
      .windows = point.windows,
      .mem_policy = run.opts.mem,
      .quick = run.opts.suite == Suite::kQuick,
      .fault_sample_period_ns =
          run.opts.evidence_windows == 0
              ? 0
              : static_cast<uint64_t>(run.opts.fault_sampling_s * 1e9 + 0.5),
      .evidence_windows = run.opts.evidence_windows,
      .oversubscribe = run.opts.oversubscribe};
}

// A stage that throws fails the repetition with its message, once the team,
// workload and layout sampling are gone (in that order, as unwinding would).
void RunPoint(benchmark::State& state, const Point& point, RunState& run) {
  // Dropped by a re-plan (ReplanIfStarved: never a point's first): no row.
  if (const auto it = run.keep.find(point.key);
      run.resolve_round == 0 && it != run.keep.end() &&
      run.repetitions_done[point.key] >= it->second) {
    state.SkipWithError("dropped: the run was starved and re-planned");
    while (state.KeepRunning()) state.SetIterationTime(1e-9);
    return;
  }
  PointRun pr(state, point, run);
  PlanWindow(pr);
  try {
    Prepare(pr);
    RunWindows(pr);
    Verify(pr);
    FillRow(pr);
    RecordRow(pr);
  } catch (const std::exception& e) {
    pr.team.reset();
    pr.wl.reset();
    pr.layout.reset();
    // A bare std::bad_alloc (new, a container) names neither size nor limit.
    FailRepetition(pr, typeid(e) == typeid(std::bad_alloc)
                           ? "memory allocation failed (std::bad_alloc); " +
                                 AddressSpaceLimit()
                           : std::string(e.what()));
  }
}

LocklineReporter::LocklineReporter(RunState& run) : run_(run) {
  run.progress_total = 0;
  for (const Point& p : run.points)
    run.progress_total += PointRepetitions(run, p);
  run.progress_start_ns = NowNs();
}

bool LocklineReporter::ReportContext(const Context& context) {
  json& c = run_.results->context();
  // Reported again every --until-resolved round: the first one stands.
  if (c.contains("host_name")) return true;
  char date[64];
  const time_t now = time(nullptr);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S+00:00", gmtime(&now));
  c["date"] = date;
  c["host_name"] = context.sys_info.name;
  c["executable"] = Context::executable_name ? Context::executable_name : "";
  c["num_cpus"] = context.cpu_info.num_cpus;
  c["mhz_per_cpu"] = static_cast<int>(context.cpu_info.cycles_per_second / 1e6);
  c["cpu_scaling_enabled"] =
      context.cpu_info.scaling == benchmark::CPUInfo::ENABLED;
  json caches = json::array();
  for (const auto& ci : context.cpu_info.caches)
    caches.push_back({{"type", ci.type},
                      {"level", ci.level},
                      {"size", ci.size},
                      {"num_sharing", ci.num_sharing}});
  c["caches"] = caches;
  c["load_avg"] = context.cpu_info.load_avg;
  c["library_build_type"] = "release";
  run_.results->Flush();
  return true;
}

void LocklineReporter::ReportRuns(
    const std::vector<benchmark::BenchmarkReporter::Run>& runs) {
  run_.results->EditRows(
      [&](json& doc) { return AddIndicesAndAggregates(doc, runs); });
  run_.results->Flush();
}

std::vector<size_t> LocklineReporter::AddIndicesAndAggregates(
    json& doc, const std::vector<benchmark::BenchmarkReporter::Run>& runs) {
  std::vector<size_t> changed;
  json& rows = doc["benchmarks"];
  std::set<std::string> aggregated;
  for (const auto& r : runs) {
    const std::string key = r.run_name.function_name;
    const bool aggregate =
        r.run_type == benchmark::BenchmarkReporter::Run::RT_Aggregate;
    if (!aggregate) {
      // Written by RecordRepetition: add Google Benchmark's indices (the
      // first row's, so an extra round's renumbering does not split a key).
      auto& indices = run_.row_index[key];
      size_t& next = run_.rows_reported[key];
      if (next < indices.size()) {
        const size_t i = indices[next++];
        changed.push_back(i);
        const json& first = rows[indices.front()];
        const bool own =
            i == indices.front() || !first.contains("family_index");
        rows[i]["family_index"] =
            own ? json(r.family_index) : first["family_index"];
        rows[i]["per_family_instance_index"] =
            own ? json(r.per_family_instance_index)
                : first["per_family_instance_index"];
      }
      continue;
    }
    // Google Benchmark's aggregates use the main thread's CPU time and cv in
    // percent: lockline computes its own from the rows (rows.h).
    if (run_.resolve_round == 0 && run_.by_key.count(key))
      aggregated.insert(key);
  }
  for (const std::string& key : aggregated)
    for (size_t i : UpdateAggregates(doc, key)) changed.push_back(i);
  return changed;
}

void LocklineReporter::Finalize() {
  // Again at the end: problems first seen during the run are recorded too.
  run_.results->lockline_context()["counters"] =
      run_.counters->AvailabilityJson();
  run_.results->EditRows([](json& doc) { return RelabelCoherence(doc); });
  // The load beside the start's (context.load_avg): a starved run shows it.
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) == 3)
    run_.results->context()["load_avg_end"] = {load[0], load[1], load[2]};
  if (run_.finish_on_finalize)
    run_.results->lockline_context()["finished"] = true;
  run_.results->Flush();
}

std::string FormatDuration(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60,
                  static_cast<int>(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600,
                  static_cast<int>(s) % 3600 / 60);
  return buf;
}

}  // namespace lockline
