#include "harness/run/runner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <regex>
#include <set>

#include "harness/locks/spin_wait.h"
#include "harness/machine/cgroup.h"
#include "harness/machine/cpu.h"
#include "harness/machine/memory.h"
#include "harness/measure/coherence.h"
#include "harness/measure/team.h"
#include "harness/record/rows.h"
#include "layouts/report.h"

namespace lockline {
namespace {

using nlohmann::json;

constexpr double kProbeSeconds =
    0.001;  // per-point ping-pong probe (before and after)
constexpr double kBaselineProbeSeconds =
    0.002;  // each of the 3 baseline probes of a pair
// The families' first touch of hundreds of MiB (fault, prezero, zeroing)
// cost 0.9-1.4x a MiB of MeasureFaultInSecondsPerMiB's 16 MiB in two default
// suites on the 2-vCPU VM (the probe: 4.1-4.3 ms a MiB both times, while the
// machine's load, and the families' cost, changed by 1.6x between them).
constexpr double kWorkloadOverProbe = 1.1;

// Google Benchmark's filter semantics (1.7.1): extended regex searched in the
// name; a leading
// '-' selects the names that do NOT match.
bool MatchesFilter(const std::string& filter, const std::string& name) {
  if (filter.empty() || filter == "all" || filter == ".") return true;
  const bool negate = filter[0] == '-';
  const std::regex re(negate ? filter.substr(1) : filter, std::regex::extended);
  return std::regex_search(name, re) != negate;
}

// The PU pair a point's coherence probe uses: thread 0 and the last thread on a
// different PU.
std::pair<int, int> ProbeThreads(const Point& p) {
  const auto& pus = p.plan.pus;
  for (int j = static_cast<int>(pus.size()) - 1; j > 0; --j)
    if (pus[j].os_index != pus[0].os_index) return {0, j};
  return {-1, -1};
}

json PlacementJson(const Point& p, const RunState& run) {
  json pus = json::array();
  for (const PuInfo& pu : p.plan.pus) pus.push_back(pu.os_index);
  return {{"pin", run.pin.text},
          {"pus", pus},
          {"cores", p.plan.cores},
          {"l3s", p.plan.l3s},
          {"numa_nodes", p.plan.numa_nodes},
          {"packages", p.plan.packages},
          {"smt_siblings", p.plan.smt_siblings},
          {"oversubscribed", p.plan.oversubscribed},
          {"spin_yield", p.plan.oversubscribed ? "after_1024_pauses" : "never"},
          {"mem", run.opts.mem}};
}

// What the kernel says about the point's placement, for checking the plan:
// placement.bound_pus (each thread's affinity, read back) and
// placement.observed_pus (the PUs each thread was on at the end of its
// windows, from sched_getcpu).
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

// "" when every pinned thread (pus[i] >= 0) was bound to exactly its planned
// PU and seen only there; else "placement mismatch: ..." naming the first
// thread that was not.
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

// Per-op counter metrics, derived metrics (IPC, cache-misses/op, hitm/op) and
// the counters object of a row (see CountersForRow in
// harness/measure/counters.h).
void AddCounters(const std::vector<std::vector<CounterReading>>& per_thread,
                 uint64_t ops,
                 std::vector<std::pair<std::string, double>>& metrics,
                 json& out) {
  CounterRow row = CountersForRow(per_thread, ops);
  for (auto& m : row.metrics) metrics.push_back(std::move(m));
  out = std::move(row.counters);
}

}  // namespace

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
  // One plan per thread count, copied into its points (issue 27 item 13: on
  // 8192 PUs the full suite's 25000 points planned each count again);
  // --list needs no plans at all.
  std::map<int, ThreadPlan> plans;
  for (const auto& [family, v] : run.variants_storage) {
    std::vector<int> counts = v.threads.empty() ? run.counts : v.threads;
    if (v.largest_thread_count_only && !counts.empty()) {
      // The largest count that leaves the variant's helper its spare PU
      // (issue 40: a question with a helper thread is asked at usable PUs
      // minus its helpers), else the largest (refused below with the reason).
      int best = -1;
      for (int n : counts)
        if ((run.opts.oversubscribe ||
             n + (v.needs_spare_pu ? 1 : 0) <= usable) &&
            n > best)
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
      if (!MatchesFilter(run.opts.benchmark_filter, p.key)) continue;
      const int need = n + (v.needs_spare_pu ? 1 : 0);
      if (need > usable && !run.opts.oversubscribe) {
        run.skipped.push_back(
            p.key + ": needs " + std::to_string(need) + " PUs (" +
            (v.needs_spare_pu ? "threads + a spare PU for its helper thread"
                              : "threads") +
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
        auto it = plans.find(n);
        if (it == plans.end())
          it =
              plans
                  .emplace(n, PlanThreads(run.order, n, run.opts.oversubscribe))
                  .first;
        p.plan = it->second;
      }
      p.windows = v.windows > 0 ? v.windows
                                : (suite == Suite::kQuick  ? 2
                                   : suite == Suite::kFull ? 5
                                                           : 3);
      if (v.paired && suite != Suite::kQuick) {
        p.pairs = PlanPairs(run.opts.precision, n, run.opts.repetitions);
        p.windows = 2 * (kDuetWarmupPairs + p.pairs->pairs_per_repetition);
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
  for (const auto& pr : pairs) {
    ThreadTeam team(run.topo.get(), {pr.first, pr.second}, nullptr);
    std::vector<double> medians;
    for (int i = 0; i < 3; ++i)
      medians.push_back(
          team.PingPong(0, 1,
                        static_cast<uint64_t>(kBaselineProbeSeconds * 1e9))
              .first);
    std::vector<double> sorted = medians;
    std::sort(sorted.begin(), sorted.end());
    run.baseline_ns[pr] = sorted[1];
    out.push_back({{"pus", {pr.first, pr.second}},
                   {"ns", run.baseline_ns[pr]},
                   {"probes_ns", medians}});
  }
  run.results->lockline_context()["coherence_baseline"] = out;
}

double FitWindow(RunState& run) {
  if (run.budget.size() != run.points.size()) {
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
  // Not only the points' own work: each one's coherence pair was probed
  // before the fit (MeasureCoherenceBaselines), which counts as spent.
  const double spent =
      run.run_start_ns ? static_cast<double>(NowNs() - run.run_start_ns) / 1e9
                       : 0.0;
  run.recording.rows = static_cast<double>(
      run.results ? run.results->doc()["benchmarks"].size() : 0);
  run.recording.per_row_s = RecordingPerRowS(
      run.recording_gap_s, run.recording_rows, RecordingCost{}.per_row_s);
  run.fit = FitBudget(run.budget, run.recording, run.opts.budget_s - spent,
                      run.opts.window_s, kMinFitWindowS, run.window_cap_s);
  run.window_s = run.fit.window_s;
  return spent + run.fit.estimate_s;
}

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

std::vector<QuestionPlan> PlanPerQuestion(const RunState& run) {
  std::map<std::string, QuestionPlan> by;
  const std::vector<double> each =
      PredictPointSeconds(run.budget, run.window_s);
  double total = 0;
  for (double s : each) total += s;
  for (std::size_t i = 0; i < run.points.size() && i < each.size(); ++i) {
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
    qp.estimated_s += total > 0 ? each[i] / total * run.plan_estimate_s : 0.0;
  }
  std::vector<QuestionPlan> out;
  for (auto& [q, qp] : by) {
    if (q.empty()) continue;
    qp.title = QuestionTitle(q);
    out.push_back(qp);
  }
  if (by.count("")) {  // the figures last
    QuestionPlan qp = by[""];
    qp.title = QuestionTitle("");
    out.push_back(qp);
  }
  return out;
}

void RegisterPoints(RunState& run) {
  for (const Point& p : run.points) {
    benchmark::internal::Benchmark* b =
        benchmark::RegisterBenchmark(
            p.key.c_str(),
            [&run, &p](benchmark::State& st) { RunPoint(st, p, run); })
            ->UseManualTime()
            ->Iterations(p.windows)
            ->Unit(benchmark::kMillisecond);
    if (p.repetitions > 0) b->Repetitions(p.repetitions);
  }
}

// What a repetition of `point` cost (its row's `timing`), for FitWindow:
// its cost besides the windows' planned length, whether its windows were
// fixed work, and the rewrite of the file (with the previous repetition) it
// waited for.
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
  for (size_t w = 0; w < n; ++w) {
    const std::string side =
        sides[w].is_string() ? sides[w].get<std::string>() : std::string();
    if (side != "a" && side != "b") continue;
    measured_overrun.push_back(windows[w].value("overrun", false));
  }
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

// Appends one repetition of `point` to lockline.json at once (Google
// Benchmark 1.7.1 reports an instance only after its last repetition, which
// random interleaving may put at the end of the run), flushes the file and
// prints progress. `rec` holds lockline's fields and flat metrics.
// Google Benchmark's time fields are per operation (iterations = operations:
// harness/record/rows.h), so its tools compare throughput; relabels the
// coherence regimes of every row over the run so far
// (harness/measure/coherence.h).
void RecordRepetition(RunState& run, const Point& point, json rec,
                      double seconds, double cpu_seconds, uint64_t ops) {
  // The next repetition's timing.gap_s starts here: it covers recording this
  // one (the file rewrite below) and Google Benchmark's bookkeeping.
  run.last_repetition_end_ns = NowNs();
  // Google Benchmark's own name for the run is "<key>/iterations:W/manual_time"
  // (W = windows: 2 in --quick, 3 by default, 5 in --full); the rows leave W
  // out, so the same point has the same name in every suite and Google's
  // tools/compare.py, which pairs rows by name, pairs a --quick run with a
  // default one (issue 28). len(windows) keeps W.
  const std::string name = point.key + "/manual_time";
  AccountRepetition(run, point, rec.value("timing", json::object()));
  json row = {{"name", name},
              {"run_name", name},
              {"run_type", "iteration"},
              {"repetitions", PointRepetitions(run, point)},
              {"repetition_index", run.repetitions_done[point.key]++},
              {"threads", point.threads}};
  SetPerOpTimes(row, seconds, cpu_seconds, ops);
  if (run.resolve_round > 0) row["resolve_round"] = run.resolve_round;
  for (auto& [k, v] : rec.items()) row[k] = std::move(v);
  if (run.results->lockline_context().value("emulated", false))
    row["emulated"] = true;
  // Counters from the test shim (tests/fake_pmu) are not this CPU's: every
  // row says so, not only the context (results/SCHEMA.md).
  {
    const json& counters =
        run.results->lockline_context().value("counters", json::object());
    if (counters.is_object() && counters.contains("fake_pmu"))
      row["fake_pmu"] = true;
  }
  const bool error = row.contains("error_message");
  row["error_occurred"] = error;
  if (!error) row["error_message"] = "";
  run.row_index[point.key].push_back(run.results->doc()["benchmarks"].size());
  run.results->AddRow(row);
  run.results->EditRows(RelabelCoherence);
  // An extra round of --until-resolved: the key's aggregates follow every new
  // repetition, so a run interrupted mid-round has aggregates that agree with
  // its iteration rows (issue 27 item 7: 12 vs 13 repetitions).
  if (run.resolve_round > 0)
    run.results->EditRows(
        [&](json& doc) { return UpdateAggregates(doc, point.key); });
  // The planned repetitions: refit the window of the points not started from
  // what this one cost; the fit's prediction is what is left. (Extra rounds
  // of --until-resolved have their own time: harness/run/until_resolved.h.)
  double left = -1;
  if (run.resolve_round == 0) {
    FitWindow(run);
    left = run.fit.estimate_s;
  }
  json& run_time = run.results->lockline_context()["run_time"];
  if (run_time.is_object() && run.run_start_ns) {
    run_time["elapsed_s"] =
        static_cast<double>(NowNs() - run.run_start_ns) / 1e9;
    if (left >= 0) run_time["left_s"] = left;
  }
  const json& coherence = run.results->doc()["benchmarks"].back().value(
      "coherence", json::object());
  run.results->Flush();  // never throws: a failed write stops the run

  ++run.progress_done;
  const double elapsed =
      static_cast<double>(NowNs() - run.progress_start_ns) / 1e9;
  if (left < 0)
    left =
        elapsed / run.progress_done * (run.progress_total - run.progress_done);
  std::string what;
  if (error) {
    what = "ERROR: " + row["error_message"].get<std::string>();
  } else {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%11.4g ops/s %9.1f ns/op  %s",
                  row.value("ops_per_s", 0.0), row.value("ns_per_op", 0.0),
                  coherence.value("label", "unknown").c_str());
    what = buf;
  }
  if (row.value("overrun", false))
    what += "  OVERRUN (a window ran past its bound)";
  std::printf("[%d/%d] %s  %s  (%s elapsed, ~%s left%s)\n", run.progress_done,
              run.progress_total, point.key.c_str(), what.c_str(),
              FormatDuration(elapsed).c_str(), FormatDuration(left).c_str(),
              run.progress_note.c_str());
  std::fflush(stdout);
}

void RunPoint(benchmark::State& state, const Point& point, RunState& run) {
  json rec = {{"lockline_key", point.key},
              {"family", point.family},
              {"params", ParamsJson(point)},
              {"description", point.variant->description},
              {"placement", PlacementJson(point, run)}};
  double seconds = 0, cpu_seconds = 0;
  uint64_t ops = 0;
  // Where the repetition's wall time goes (row `timing`, results/SCHEMA.md):
  // the budget's estimate is only as good as its model of these.
  const uint64_t t_start = NowNs();
  uint64_t t_setup = t_start, t_loop0 = t_start, t_loop1 = t_start;
  double probes_s = 0;
  // The point's window: the run's fit when its first repetition starts, then
  // the same for every later one (its repetitions are compared with each
  // other; harness/run/budget.h on windows differing between points).
  if (run.budget.size() != run.points.size()) FitWindow(run);
  BudgetPoint& budget = run.budget[point.index];
  if (budget.window_s <= 0) budget.window_s = run.window_s;
  const double window_s = budget.window_s;
  json timing = {
      {"window_s", window_s},
      {"gap_s",
       run.last_repetition_end_ns
           ? static_cast<double>(t_start - run.last_repetition_end_ns) / 1e9
           : 0.0}};
  const auto finish_timing = [&] {
    const uint64_t t_end = NowNs();
    const auto s = [](uint64_t a, uint64_t b) {
      return b > a ? static_cast<double>(b - a) / 1e9 : 0.0;
    };
    timing["wall_s"] = s(t_start, t_end);
    timing["setup_s"] = s(t_start, t_setup);
    timing["windows_s"] = s(t_loop0, t_loop1);
    timing["probes_s"] = probes_s;
    if (point.index < run.budget.size())  // the plan's price of it
      timing["declared_s"] = run.budget[point.index].declared_s;
    timing["teardown_s"] =
        std::max(0.0, s(t_start, t_end) - s(t_start, t_setup) -
                          s(t_loop0, t_loop1) - probes_s);
    rec["timing"] = timing;
  };
  // Google Benchmark 1.7.1 aggregates a point's repetitions (ComputeStats)
  // only if every one ends with the planned iteration count (a repetition
  // failing before its loop had 0: Check `run_iterations == run.iterations`,
  // abort, exit 134) and the first one of the instance is not an error (its
  // report has no statistics: SIGSEGV when later ones succeed). Either
  // killed the run and every later point (issue 36 R1). So a failed
  // repetition always ends its loop at the planned count, and the instance's
  // first one is reported to Google Benchmark as a run labelled with the
  // error (lockline's row says error_occurred; its aggregates, and
  // lockline's, leave it out); later ones are SkipWithError.
  if (run.gb_round != run.resolve_round) {
    run.gb_round = run.resolve_round;
    run.gb_runs.clear();
  }
  const bool first_of_instance = run.gb_runs[point.key]++ == 0;
  bool loop_done = false;  // the window loop ran to its end
  const auto fail = [&](const std::string& why) {
    if (!first_of_instance)
      state.SkipWithError(why.c_str());
    else
      state.SetLabel("lockline error (row error_occurred): " + why);
    // Started or not, the loop ends here with the planned count: after
    // SkipWithError KeepRunning runs nothing more; without it the rest of
    // the windows are counted at 1 ns each.
    if (!loop_done)
      while (state.KeepRunning()) state.SetIterationTime(1e-9);
    rec["error_message"] = why;
    finish_timing();
    RecordRepetition(run, point, rec, seconds, cpu_seconds, ops);
  };
  try {
    const uint64_t window_ns = static_cast<uint64_t>(window_s * 1e9);
    PointEnv env;
    env.topology = run.topo.get();
    env.plan = &point.plan;
    env.threads = point.threads;
    env.window_ns = window_ns;
    env.windows = point.windows;
    env.mem_policy = run.opts.mem;
    env.quick = run.opts.suite == Suite::kQuick;
    env.fault_sample_period_ns =
        run.opts.evidence_windows == 0
            ? 0
            : static_cast<uint64_t>(run.opts.fault_sampling_s * 1e9 + 0.5);
    env.evidence_windows = run.opts.evidence_windows;
    env.oversubscribe = run.opts.oversubscribe;
    // Each repetition places the structures under test at fresh offsets
    // (harness/machine/memory.h LayoutSampling): its seed mixes a per-process
    // random number, the key and the repetition, so repetitions and runs
    // differ.
    LayoutSampling layout(
        RepetitionLayoutSeed(point.key, run.repetitions_done[point.key]),
        run.sample_layout);
    std::unique_ptr<Workload> wl = point.variant->make(env);
    timing["fixed_work"] = wl->fixed_work();
    std::vector<int> pus;
    std::vector<ThreadCtx> ctx;
    for (int i = 0; i < point.threads; ++i) {
      const PuInfo& pu = point.plan.pus[i];
      // Explicit PUs (a latency pair) are always bound; otherwise --pin=none
      // leaves threads free.
      const bool pinned =
          run.pin.policy != PinPolicy::kNone || !point.variant->pus.empty();
      pus.push_back(pinned ? pu.os_index : -1);
      ThreadCtx c;
      c.index = i;
      c.threads = point.threads;
      c.pu = pinned ? pu.os_index : -1;
      c.numa = pu.numa;
      c.window_ns = window_ns;
      c.oversubscribed = point.plan.oversubscribed;
      ctx.push_back(c);
    }
    auto team_ptr =
        std::make_unique<ThreadTeam>(run.topo.get(), pus, run.counters.get(),
                                     wl->page_fault_counters_left_out());
    ThreadTeam& team = *team_ptr;
    wl->Prepare(point.threads);
    team.RunOnAllWithin(
        [&](int i) {
          // Kernel spinlock waiters never yield; only an oversubscribed
          // point's do.
          SetSpinYield(ctx[i].oversubscribed ? SpinYield::kAfterSpins
                                             : SpinYield::kNever);
          wl->SetupThread(ctx[i]);
        },
        SetupTimeoutNs(), point.key + ": the family's SetupThread");

    const auto [pa, pb] = ProbeThreads(point);
    const uint64_t probe_ns = static_cast<uint64_t>(kProbeSeconds * 1e9);
    // No probe for a workload without a shared line: its label is "none".
    const bool shares = wl->shares_lines();
    const bool probing = shares && pa >= 0 && pus[pa] >= 0 && pus[pb] >= 0;
    t_setup = NowNs();
    const double before = probing ? team.PingPong(pa, pb, probe_ns).first : 0;
    team.ResetCounters();

    // A window may run long when a preempted waiter holds up a FIFO lock
    // (oversubscribed) or a fixed-work window is big: flag past the bound, give
    // up (exit) past the hard limit.
    const uint64_t bound_ns = OverrunBoundNs(window_ns, wl->fixed_work());
    const uint64_t hard_ns = bound_ns + 120'000'000'000ull;
    std::vector<uint64_t> per_thread(point.threads, 0);
    std::vector<std::set<int>> seen_pus(point.threads);
    bool overrun = false;
    json windows = json::array();
    const CpuThrottle throttle0 = ReadCpuThrottle(ProcessCgroupCpu());
    probes_s += static_cast<double>(NowNs() - t_setup) / 1e9;
    t_loop0 = NowNs();
    for (auto _ : state) {
      const WindowResult r =
          team.RunWindow(*wl, ctx, window_ns, bound_ns, hard_ns);
      state.SetIterationTime(std::max(r.seconds, 1e-9));
      seconds += r.seconds;
      cpu_seconds += r.cpu_seconds;
      ops += r.total_ops;
      overrun |= r.overrun;
      for (int i = 0; i < point.threads; ++i) {
        per_thread[i] += r.ops[i];
        if (r.last_cpus[i] >= 0) seen_pus[i].insert(r.last_cpus[i]);
      }
      windows.push_back({{"seconds", r.seconds},
                         {"ops", r.total_ops},
                         {"overrun", r.overrun}});
    }
    t_loop1 = NowNs();
    loop_done = true;
    // CFS bandwidth throttling of lockline's cgroup during the windows.
    const CpuThrottle throttle1 = ReadCpuThrottle(ProcessCgroupCpu());
    if (throttle0.ok && throttle1.ok)
      rec["cgroup"] = {
          {"nr_throttled", throttle1.nr_throttled - throttle0.nr_throttled},
          {"throttled_usec",
           throttle1.throttled_usec - throttle0.throttled_usec}};
    // A point with more threads than the quota measures the CFS bandwidth
    // controller: said on the row (issue 27), also when nothing was throttled
    // in this repetition.
    std::string quota_warning;
    if (const CgroupCpu& cg = ProcessCgroupCpu();
        cg.quota_cpus > 0 && point.threads > cg.quota_cpus) {
      char q[32];
      std::snprintf(q, sizeof q, "%.2f", cg.quota_cpus);
      rec["cgroup"]["quota_cpus"] = cg.quota_cpus;
      rec["cgroup"]["over_quota"] = true;
      quota_warning = std::to_string(point.threads) +
                      " threads exceed the cgroup CPU quota of " + q +
                      " CPUs (" + cg.limited_by +
                      "): the point measures throttling";
    }
    const double after = probing ? team.PingPong(pa, pb, probe_ns).first : 0;
    probes_s += static_cast<double>(NowNs() - t_loop1) / 1e9;
    const auto readings = team.ReadCounters();
    AddObservedPlacement(team, seen_pus, rec["placement"]);
    // A pinned thread found on, or bound to, another PU than planned measured
    // another placement: the row is kept, marked as an error, and so left out
    // of every comparison and plot (issue 27).
    const std::string mismatch =
        PlacementMismatch(pus, rec["placement"]["bound_pus"], seen_pus);
    const json mem_nodes = SharedRegionsJson(run.topo.get());
    team.RunOnAll([&](int i) { wl->TeardownThread(ctx[i]); });

    PointReport rep;
    wl->Report(rep, seconds, ops);
    // What stopped the point (a refused setup, a task that could not run) is
    // said as such; only what remains is an invariant check (issue 36 R10).
    const std::string not_run = wl->SetupError();
    const std::string broken = not_run.empty() ? wl->Verify() : "";

    std::vector<std::pair<std::string, double>> metrics;
    const double ops_per_s =
        seconds > 0 ? static_cast<double>(ops) / seconds : 0;
    metrics.emplace_back("ops_per_s", ops_per_s);
    metrics.emplace_back(
        "ns_per_op",
        ops ? seconds * point.threads * 1e9 / static_cast<double>(ops) : 0);
    metrics.emplace_back(
        "cpu_util", seconds > 0 ? cpu_seconds / (seconds * point.threads) : 0);
    json counters;
    AddCounters(readings, ops, metrics, counters);
    // A family metric must not shadow a row key of the schema
    // (results/SCHEMA.md).
    static const std::set<std::string> kReserved = {
        "name",         "run_name",         "run_type",      "threads",
        "iterations",   "real_time",        "cpu_time",      "time_unit",
        "repetitions",  "repetition_index", "family",        "params",
        "placement",    "coherence",        "fairness",      "windows",
        "counters",     "details",          "layouts",       "verify",
        "lockline_key", "error_occurred",   "error_message", "ops_per_s",
        "ns_per_op",    "cpu_util",         "resolve_round", "timing"};
    for (const auto& m : rep.metrics) {
      if (kReserved.count(m.first))
        throw std::logic_error("family metric '" + m.first +
                               "' shadows a result-file key");
      metrics.push_back(m);
    }
    for (const auto& [name, value] : metrics) {
      const double v = std::isfinite(value) ? value : 0;
      state.counters[name] = benchmark::Counter(v);
      rec[name] = v;
    }

    // Fairness: per-thread operation counts (an unfair lock can look fast while
    // starving).
    double mean = static_cast<double>(ops) / point.threads, var = 0;
    for (uint64_t c : per_thread) var += (c - mean) * (c - mean);
    var /= point.threads;
    rec["fairness"] = {
        {"per_thread_ops", per_thread},
        {"min", *std::min_element(per_thread.begin(), per_thread.end())},
        {"max", *std::max_element(per_thread.begin(), per_thread.end())},
        {"cv", mean > 0 ? std::sqrt(var) / mean : 0}};
    double base = 0;
    json pair = nullptr;
    if (probing) {
      const std::pair<int, int> pr{point.plan.pus[pa].os_index,
                                   point.plan.pus[pb].os_index};
      pair = {pr.first, pr.second};
      if (run.baseline_ns.count(pr)) base = run.baseline_ns[pr];
    }
    // The label is provisional here: RecordRepetition relabels every row from
    // the regimes of all probes so far (harness/measure/coherence.h).
    rec["coherence"] = {{"label", shares ? "unknown" : "none"},
                        {"regime", nullptr},
                        {"regime_ns", nullptr},
                        {"shares_lines", shares},
                        {"pair", pair},
                        {"baseline_ns", base},
                        {"before_ns", before},
                        {"after_ns", after}};
    rec["windows"] = windows;
    rec["overrun"] = overrun;
    rec["address_layout"] = layout.Json();
    rec["counters"] = counters;
    rec["details"] = rep.details;
    if (rec["details"].is_null()) rec["details"] = json::object();
    if (rec["details"].is_object()) rec["details"]["mem_nodes"] = mem_nodes;
    // A paired row keeps its other pairs when one window overran: the pair
    // holding it is flagged and left out (plots/stats.py), not the repetition.
    if (rec["details"].is_object() && rec["details"].contains("duet"))
      MarkOverrunPairs(rec["details"]["duet"], windows);
    rec["layouts"] = rep.layouts;
    rec["verify"] = broken.empty() ? "ok" : broken;
    json& layouts = run.results->lockline_context()["layouts"];
    if (!layouts.is_object()) layouts = json::object();
    for (const std::string& name : rep.layouts) {
      if (layouts.contains(name)) continue;
      if (const LayoutInfo* info = FindLayout(name)) {
        json j = LayoutToJson(*info);
        j["pahole"] = FormatPahole(*info);
        layouts[name] = j;
      }
    }
    if (!not_run.empty() || !broken.empty() || !mismatch.empty()) {
      // The point's threads, tasks and descriptors go first: the result file
      // is written after them, so a tight fd limit fails the point, not the
      // write (issue 27 item 14).
      team_ptr.reset();
      wl.reset();
      fail(!not_run.empty()  ? "not measured: " + not_run
           : !broken.empty() ? "invariant broken after the run: " + broken
                             : mismatch);
      return;
    }
    std::string warning =
        overrun ? "a window ran past its wall-clock bound" : "";
    if (!quota_warning.empty())
      warning += (warning.empty() ? "" : "; ") + quota_warning;
    if (!warning.empty()) rec["warning"] = warning;
    // Joining the threads and freeing the workload (unmapping, reaping forked
    // tasks) is part of the repetition's cost: done before it is timed.
    team_ptr.reset();
    wl.reset();
    finish_timing();
    RecordRepetition(run, point, rec, seconds, cpu_seconds, ops);
  } catch (const std::exception& e) {
    fail(e.what());
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
  // Google Benchmark reports the context again for every extra round of
  // --until-resolved: the run's context is the first one.
  if (c.contains("host_name")) return true;
  c["date"] = [] {
    char buf[64];
    const time_t now = time(nullptr);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S+00:00", gmtime(&now));
    return std::string(buf);
  }();
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
      // RecordRepetition wrote this repetition already: add Google Benchmark's
      // indices (an extra round's registration numbers families anew: keep
      // the planned repetitions' indices so every row of a key agrees).
      auto& indices = run_.row_index[key];
      size_t& next = run_.rows_reported[key];
      if (next < indices.size()) {
        changed.push_back(indices[next]);
        json& row = rows[indices[next++]];
        const json& first = rows[indices.front()];
        const bool first_has = indices.front() != indices[next - 1] &&
                               first.contains("family_index");
        row["family_index"] =
            first_has ? first["family_index"] : json(r.family_index);
        row["per_family_instance_index"] =
            first_has ? first["per_family_instance_index"]
                      : json(r.per_family_instance_index);
      }
      continue;
    }
    // Google Benchmark's own aggregates are over its window-based times and
    // the main thread's CPU time, and write cv as a percentage of the adjusted
    // time: lockline computes them from its repetition rows instead
    // (harness/record/rows.h), after an extra round for all repetitions at
    // once.
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
  run_.results->EditRows(RelabelCoherence);
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
