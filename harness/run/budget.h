// The run's time budget (--budget): the window length fitted so the planned
// repetitions end near the budget, at plan time and again after every
// repetition from what the run measured. Pure functions of their inputs (no
// clock), so tests/budget_test.cpp checks them without timing anything.
//
// Model. One repetition of a point costs its windows plus everything else:
//   timed windows:       extra + windows x w        (w: the fitted window)
//   oversubscribed:      extra + windows x max(10 w, 2 s), an upper bound: a
//                        FIFO lock may hand over only when its preempted
//                        successor runs again, so a window may run to its
//                        wall-clock bound (RunPoint)
//   fixed-work windows:  extra (the work is in it; its length ignores w)
// and each repetition then rewrites lockline.json, whose cost grows with the
// rows already in it (RecordingCost). `extra` is, before a point has run, its
// declared cost (HarnessRepetitionCostS plus the variant's cost) times its
// family's measured scale (measured / declared over the family's repetitions
// so far; 1 while the family has none: one family's scale says little about
// another's, e.g. cheap lock points about 1 GiB of page faults), and once the
// point has run, the mean of what it measured.
//
// A point's window is fixed when its first repetition starts
// (BudgetPoint::window_s): its repetitions are compared, so they run alike.
// Points started later may run another window; comparisons between points are
// per operation or per second, which a window's length changes only by its
// start and stop edges (microseconds of >= kMinFitWindowS). Warm-up transients
// weigh more in short windows, so refits stay within kMaxWindowGrowth.
#pragma once

#include <string>
#include <vector>

namespace lockline {

/// The fitted window's range, seconds: below 5 ms a window's start and stop
/// edges (barrier release, the stop flag reaching every thread) are no longer
/// small against it; above 1 s nothing is gained for the statistics.
inline constexpr double kMinFitWindowS = 0.005;
inline constexpr double kMaxFitWindowS = 1.0;
/// A refit gives the points not started at most this many times the
/// plan-time window: an overestimated plan's slack would otherwise stretch the
/// last points' windows many times; the run ends a little early instead.
inline constexpr double kMaxWindowGrowth = 4;

/// Declared seconds the harness spends per repetition of a point with
/// `threads` threads and `windows` timed windows besides the windows' planned
/// length (threads, probes, the row without the file rewrite, each window's
/// stop edge), from the rows' `timing` on a quiet machine. A window ends later
/// when the threads fill every usable PU (`usable_pus`; 0: taken as filled):
/// the main thread stopping it waits for a worker's preemption. The run
/// rescales these by what each family measures.
double HarnessRepetitionCostS(int threads, int windows, int usable_pus = 0);

/// What the fit knows about one point.
struct BudgetPoint {
  std::string family;
  int windows = 1;           ///< windows per repetition
  int repetitions_left = 0;  ///< repetitions not yet run
  /// Declared seconds per repetition besides its timed windows.
  double declared_s = 0;
  bool fixed_work = false;      ///< windows are fixed work: ignore w
  bool oversubscribed = false;  ///< windows counted at their bound
  /// > 0 once the point has started: the window all its repetitions use.
  double window_s = 0;
  int measured = 0;  ///< repetitions measured so far
  /// Their summed cost besides windows x window_s, without the file rewrite.
  double measured_s = 0;
  /// FitRepetitions may cut repetitions_left down to this (0: never).
  int repetitions_floor = 0;
  bool comparison = false;  ///< a seed comparison's point: cut last
};

/// The rewrite of lockline.json after each repetition (and after a point's
/// last, with its aggregate rows): about `per_row_s` seconds per row the file
/// holds then. Each repetition adds `rows_per_repetition` rows.
struct RecordingCost {
  /// The prior, between a quiet and a loaded machine's cost in the default
  /// suite; refitted by RecordingPerRowS.
  double per_row_s = 3e-5;
  double rows = 0;                   ///< rows in the file now
  double rows_per_repetition = 1.8;  ///< 1 + 4 aggregates / 5 repetitions
};

/// The fit's answer.
struct BudgetFit {
  double window_s = 0;    ///< window for the points not started yet
  double estimate_s = 0;  ///< predicted seconds for all repetitions left
  /// Predicted seconds at the minimum window: fixed work, overheads and
  /// started points, what no window length can cut.
  double floor_s = 0;
  bool met = true;  ///< false: over the budget even at the minimum window
};

/// Predicted seconds of each point's repetitions left, without the file
/// rewrites, at windows of `window_s`: the terms PredictSeconds sums.
std::vector<double> PredictPointSeconds(const std::vector<BudgetPoint>& points,
                                        double window_s);

/// Predicted seconds for every repetition left (`points`' repetitions_left
/// plus the file rewrites after them) when the points not started run
/// windows of `window_s`.
double PredictSeconds(const std::vector<BudgetPoint>& points,
                      const RecordingCost& recording, double window_s);

/// The window in [min_window_s, max_window_s] for the points not started
/// yet that makes PredictSeconds closest to `budget_left_s` without going
/// over (the minimum when even it goes over: `met` false; the maximum when
/// even it stays under). With `fixed_window_s` > 0 (--window) that window is
/// used and only the estimate computed.
BudgetFit FitBudget(const std::vector<BudgetPoint>& points,
                    const RecordingCost& recording, double budget_left_s,
                    double fixed_window_s = 0,
                    double min_window_s = kMinFitWindowS,
                    double max_window_s = kMaxFitWindowS);

/// The figures' minimum repetitions when the plan cuts them (FitRepetitions).
inline constexpr int kMinFigureRepetitions = 3;

/// What FitRepetitions cut.
struct RepetitionCut {
  /// Seconds a figure point's repetitions may take (-1: none cut).
  double figure_cap_s = -1;
  int figure_points_cut = 0;
  /// Share of their planned repetitions the comparisons keep.
  double comparison_share = 1;
  /// The planned pass may use the whole budget: its comparisons took the
  /// time --until-resolved would have had.
  bool whole_budget = false;
};

/// The whole run within the budget (at windows of `window_s`): when
/// PredictSeconds goes over `figures_budget_s`, cuts the repetitions_left of
/// points with a repetitions_floor, never below it. The figures' first
/// (comparison false): the longest cap on a point's seconds (its repetitions
/// and their file rewrites) that fits `figures_budget_s`, so the costliest
/// points go first (1 GiB of faults before cheap rows). With every figure at
/// its floor the comparisons keep priority over the time left for open ones:
/// they run as planned if that fits `budget_s`, else by the largest common
/// share that does. Over even at every floor: left there (FitBudget's `met`).
RepetitionCut FitRepetitions(std::vector<BudgetPoint>& points,
                             const RecordingCost& recording,
                             double figures_budget_s, double budget_s,
                             double window_s);

/// The plan-time line when `fit` cannot meet `budget_s` (seconds left at plan
/// time plus those already spent, `spent_s`): "budget 2m00s cannot be met:
/// fixed work and per-point overheads alone are about 4m10s at the minimum
/// window (5.0 ms)". "" when it can.
std::string BudgetWarning(double budget_s, double spent_s,
                          const BudgetFit& fit);

/// Seconds per row per rewrite, from the file rewrites measured so far
/// (`gap_s` summed over repetitions, `rows` the rows the file held at each,
/// summed), shrunk towards `prior_per_row_s` while few rows were seen (as if
/// 500 rows had been seen at the prior).
double RecordingPerRowS(double gap_s, double rows, double prior_per_row_s);

}  // namespace lockline
