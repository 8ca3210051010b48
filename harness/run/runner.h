// The run: points from the registered families, registration with Google
// Benchmark, a point's path in named stages (RunPoint: plan the window,
// prepare the team, run the windows, verify, record) and lockline's reporter
// (rows into lockline.json after every point, progress on the console).
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/family.h"
#include "harness/machine/topology.h"
#include "harness/measure/coherence.h"
#include "harness/measure/counters.h"
#include "harness/measure/duet.h"
#include "harness/record/results.h"
#include "harness/run/budget.h"
#include "harness/run/options.h"

namespace lockline {

class ThreadTeam;

/// One point: a family's variant at one thread count, planned.
struct Point {
  std::string key;  ///< family/k:v/.../threads:N (the benchmark's name)
  std::string family;
  Params params;
  int threads = 1;
  const Variant* variant = nullptr;
  ThreadPlan plan;
  int windows = 3;
  int repetitions = 0;  ///< 0: the run's (--benchmark_repetitions)
  size_t index = 0;     ///< its position in RunState::points (and ::budget)
  /// Paired points outside --quick: the pairs planned from --precision.
  std::optional<PairPlan> pairs;
};

/// Everything shared by the points of one run.
struct RunState {
  Options opts;
  std::unique_ptr<Topology> topo;
  PinSpec pin;
  std::vector<PuInfo> order;
  std::vector<int> counts;
  std::unique_ptr<CounterSession> counters;
  std::unique_ptr<ResultFile> results;
  /// (family, variant) of the selected suite; points point into it.
  std::vector<std::pair<std::string, Variant>> variants_storage;
  std::vector<Point> points;
  std::vector<std::string> skipped;  ///< points not run, with the reason
  /// The window a point gets when its first repetition starts (FitWindow).
  double window_s = 0.05;
  std::vector<BudgetPoint> budget;  ///< per point (same index as `points`)
  RecordingCost recording;
  double recording_gap_s = 0;  ///< summed timing.gap_s of the repetitions
  double recording_rows = 0;   ///< summed rows the file held at each gap
  RegimeCache regimes;         ///< RelabelCoherence's, across repetitions
  BudgetFit fit;               ///< the last FitWindow
  RepetitionCut cut;           ///< the plan's (FitRepetitions)
  double plan_estimate_s = 0;  ///< FitWindow's estimate at plan time
  /// Seconds the repetitions took per Variant::question (wall_s + gap_s).
  std::map<std::string, double> question_actual_s;
  double window_cap_s = kMaxFitWindowS;  ///< a refit's longest window
  double fault_s_per_mib = 0;  ///< MeasureFaultInSecondsPerMiB's, for cost_mib
  std::map<std::pair<int, int>, double> baseline_ns;  ///< PU pair -> one-way
  std::map<std::string, int> repetitions_done;  ///< key -> repetitions recorded
  std::map<std::string, std::vector<size_t>> row_index;  ///< key -> its rows
  std::map<std::string, size_t> rows_reported;  ///< key -> rows GB reported
  int progress_done = 0, progress_total = 0;
  uint64_t progress_start_ns = 0;
  uint64_t last_repetition_end_ns = 0;  ///< NowNs(); timing.gap_s from it
  uint64_t run_start_ns = 0;  ///< NowNs(), before the coherence baselines
  std::map<std::string, const Point*> by_key;
  int resolve_round = 0;  ///< --until-resolved's extra round (0: planned)
  /// Google Benchmark runs of each key in round gb_round (FailRepetition).
  int gb_round = -1;
  std::map<std::string, int> gb_runs;
  bool finish_on_finalize = true;  ///< false while extra rounds follow
  bool sample_layout = true;       ///< false: a duet's old build cannot sample
  std::string progress_note;  ///< appended to progress lines, e.g. "3 open"
  /// Per point, the plan's seconds for one repetition, and their sum over the
  /// repetitions recorded: a starved run re-plans its rest (ReplanIfStarved).
  std::vector<double> plan_rep_s;
  double plan_done_s = 0;
  std::map<std::string, int> keep;  ///< key -> repetitions kept by a re-plan
};

/// Repetitions `p` runs: its own, else the run's (--benchmark_repetitions).
inline int PointRepetitions(const RunState& run, const Point& p) {
  return p.repetitions > 0 ? p.repetitions : run.opts.repetitions;
}

/// The points of the selected suite matching --benchmark_filter (extended
/// regex, a leading '-' negates); those whose fixed thread count or spare PUs
/// cannot be met go to run.skipped with the reason.
void BuildPoints(RunState& run);

/// The coherence baseline: every probed PU pair's one-way latency, up front.
void MeasureCoherenceBaselines(RunState& run);

/// Fits run.window_s, the window of the points not started yet, to the budget
/// left since run.run_start_ns (budget.h; --window kept when given), into
/// run.fit; returns the run's estimated seconds, spent plus predicted. Called
/// at plan time, where the default run (FitsRepetitions) first cuts its
/// points' repetitions (run.cut, Point::repetitions, their pairs' expected
/// half-width), and after every planned repetition.
double FitWindow(RunState& run);

/// The plan's line for run.cut ("" when nothing was cut).
std::string RepetitionCutLine(const RunState& run);

/// The plan per Variant::question ("" = the figures' other rows, last): its
/// points and their share of run.plan_estimate_s. Call after FitWindow.
struct QuestionPlan {
  std::string question;  ///< "000".."004", "aa", or "" (figures)
  std::string title;     ///< "000 pagevec size and alignment (2004)"
  int points = 0;
  double estimated_s = 0;
  int pairs = 0;  ///< planned window pairs of its paired points, all reps
  double expected_half_width = 0;  ///< the widest of them (PairPlan)
};
std::vector<QuestionPlan> PlanPerQuestion(const RunState& run);

/// A thread plan as the run records it (context.plans, a row's placement):
/// its PUs (OS indices) and what they span.
nlohmann::json ThreadPlanJson(const ThreadPlan& plan);

/// Registers `p` with Google Benchmark: manual time, iterations = windows,
/// `repetitions` (0: --benchmark_repetitions).
void RegisterPoint(RunState& run, const Point& p, int repetitions);

/// The per-point benchmark body: one Google Benchmark repetition of `point`.
void RunPoint(benchmark::State& state, const Point& point, RunState& run);

/// Google Benchmark reporter: adds Google Benchmark's indices to the rows
/// RunPoint wrote, and lockline's aggregate rows (harness/record/rows.h) once
/// an instance's repetitions are done. Finalize relabels the coherence regimes
/// over the whole run (harness/measure/coherence.h).
class LocklineReporter : public benchmark::BenchmarkReporter {
 public:
  explicit LocklineReporter(RunState& run);
  bool ReportContext(const Context& context) override;
  void ReportRuns(
      const std::vector<benchmark::BenchmarkReporter::Run>& runs) override;
  void Finalize() override;

 private:
  // ReportRuns' changes to the rows; returns the indices changed in place.
  std::vector<size_t> AddIndicesAndAggregates(
      nlohmann::json& doc,
      const std::vector<benchmark::BenchmarkReporter::Run>& runs);

  RunState& run_;
};

/// The address-layout seed of repetition `repetition` of `key` (memory.h
/// LayoutSampling; the row's address_layout.seed), drawn anew per process:
/// every repetition of every run places its structures anew.
uint64_t RepetitionLayoutSeed(const std::string& key, int repetition);

/// What `point`'s workload is made with (Variant::make) for windows of
/// `window_ns`, also by the build duet's server: its topology, plan, threads,
/// windows and the options that reach the families.
PointEnv MakePointEnv(const Point& point, const RunState& run,
                      uint64_t window_ns);

/// `point`'s thread contexts (into `ctx`) on `pus` (OS indices, -1:
/// unpinned), its thread team counting `counters`' events, and `wl`'s Prepare
/// and every thread's SetupThread (bounded by SetupTimeoutNs). Shared with the
/// build duet's server, so both sides of a duet start their threads alike.
std::unique_ptr<ThreadTeam> StartThreads(
    const RunState& run, const Point& point, const std::vector<int>& pus,
    uint64_t window_ns, bool oversubscribed, CounterSession* counters,
    Workload& wl, std::vector<ThreadCtx>* ctx);

/// Flags the window pairs of a paired row's details.duet (duet.h) that hold
/// an overrun window: `windows` (`overrun` each) follow duet["sides"], and
/// pair k is the k-th two `a`/`b` windows. Sets pairs[k]["overrun"] and
/// duet["overrun_pairs"], the count returned (0, untouched: malformed). Only
/// those pairs leave the comparison (plots/stats.py), not the repetition.
int MarkOverrunPairs(nlohmann::json& duet, const nlohmann::json& windows);

/// Formats seconds as "1m05s" / "42s" / "1h02m".
std::string FormatDuration(double seconds);

}  // namespace lockline
