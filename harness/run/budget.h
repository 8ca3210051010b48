// The run's time budget (--budget): the window fitted so the planned
// repetitions end near the budget, at plan time and after every repetition.
// Pure functions (no clock): tests/budget_test.cpp checks them untimed.
//
// Model. One repetition of a point costs `extra` plus its windows:
//   timed windows:       windows x w  (w: the fitted window)
//   oversubscribed:      windows x max(10 w, 2 s), an upper bound: a FIFO lock
//                        may hand over only when its preempted successor runs
//                        again, so a window may run to its wall-clock bound
//   fixed-work windows:  nothing (the work is in `extra`)
// and then a rewrite of lockline.json, growing with its rows (RecordingCost).
// `extra` is the mean the point measured once it ran; before, its declared
// cost times its family's measured / declared scale so far (1 while the
// family has none: cheap lock points say little about 1 GiB of faults).
//
// A point's window is fixed at its first repetition (BudgetPoint::window_s):
// its repetitions are compared, so they run alike. Comparisons between points
// are per operation or second, which the window's length changes only by its
// edges (microseconds of >= kMinFitWindowS); warm-up transients weigh more in
// short windows, so refits stay within kMaxWindowGrowth.
#pragma once

#include <string>
#include <vector>

namespace lockline {

/// The fitted window's range, seconds: below 5 ms its edges (barrier release,
/// the stop flag reaching every thread) are no longer small; above 1 s the
/// statistics gain nothing.
inline constexpr double kMinFitWindowS = 0.005;
inline constexpr double kMaxFitWindowS = 1.0;
/// A refit's window is at most this many times the plan's: an overestimated
/// plan's slack would stretch the last points' windows; the run ends early.
inline constexpr double kMaxWindowGrowth = 4;

/// Declared seconds the harness spends per repetition of a point besides its
/// windows' length (threads, probes, the row, each window's stop edge), from
/// the rows' `timing` on a quiet machine. A window ends later when `threads`
/// fill every usable PU (`usable_pus`; 0: taken as filled): stopping it waits
/// for a worker's preemption.
double HarnessRepetitionCostS(int threads, int windows, int usable_pus = 0);

/// What the fit knows about one point.
struct BudgetPoint {
  std::string family;
  int windows = 1;           ///< windows per repetition
  int repetitions_left = 0;  ///< repetitions not yet run
  double declared_s = 0;    ///< declared seconds per repetition besides windows
  bool fixed_work = false;  ///< windows are fixed work: ignore w
  bool oversubscribed = false;  ///< windows counted at their bound
  double window_s = 0;          ///< > 0 once started: its repetitions' window
  int measured = 0;             ///< repetitions measured so far
  /// Their summed cost besides windows x window_s, without the file rewrite.
  double measured_s = 0;
  int repetitions_floor = 0;  ///< FitRepetitions' lowest cut (0: none)
  bool comparison = false;    ///< a seed comparison's point: cut last
};

/// The rewrite of lockline.json after each repetition: about `per_row_s`
/// seconds per row it holds; each repetition adds `rows_per_repetition` rows.
struct RecordingCost {
  double per_row_s = 3e-5;           ///< a prior; refitted by RecordingPerRowS
  double rows = 0;                   ///< rows in the file now
  double rows_per_repetition = 1.8;  ///< 1 + 4 aggregates / 5 repetitions
};

/// The fit's answer.
struct BudgetFit {
  double window_s = 0;    ///< window for the points not started yet
  double estimate_s = 0;  ///< predicted seconds for all repetitions left
  double floor_s = 0;     ///< predicted at the minimum window: no cutting it
  bool met = true;        ///< false: over the budget even at the minimum window
};

/// PredictSeconds' terms: each point's, without the file rewrites.
std::vector<double> PredictPointSeconds(const std::vector<BudgetPoint>& points,
                                        double window_s);

/// Predicted seconds for every repetition left and the file rewrites after
/// them, when the points not started run windows of `window_s`.
double PredictSeconds(const std::vector<BudgetPoint>& points,
                      const RecordingCost& recording, double window_s);

/// The longest window in [min_window_s, max_window_s] whose PredictSeconds
/// stays within `budget_left_s` (the minimum, `met` false, when none does).
/// With `fixed_window_s` > 0 (--window) only the estimate is computed.
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

/// When PredictSeconds at `window_s` goes over `figures_budget_s`, cuts the
/// repetitions_left of points with a repetitions_floor, never below it. The
/// figures first: the longest cap on a point's seconds (repetitions and their
/// rewrites) that fits, so the costliest go first (1 GiB of faults before
/// cheap rows). With every figure at its floor the comparisons take the time
/// left for open ones: as planned if that fits `budget_s`, else by the largest
/// common share that does. Over even at every floor: left there.
RepetitionCut FitRepetitions(std::vector<BudgetPoint>& points,
                             const RecordingCost& recording,
                             double figures_budget_s, double budget_s,
                             double window_s);

/// "budget 2m00s cannot be met: fixed work and per-point overheads alone are
/// about 4m10s at the minimum window (5.0 ms)" ("" when `fit` is met;
/// `spent_s`: seconds spent before it).
std::string BudgetWarning(double budget_s, double spent_s,
                          const BudgetFit& fit);

/// Seconds per row per rewrite from the rewrites so far (`gap_s` and the rows
/// the file held, each summed), shrunk towards `prior_per_row_s` as if 500
/// rows had been seen at it.
double RecordingPerRowS(double gap_s, double rows, double prior_per_row_s);

}  // namespace lockline
