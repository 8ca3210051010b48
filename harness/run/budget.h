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
// A point's window is fixed when its first repetition starts and never
// changes after (BudgetPoint::window_s): the statistics compare repetitions of
// one point, so they all run the same window. Points started later may run
// another window than points started earlier; comparisons between points
// (ops/s, ns/op, the family metrics) are per operation or per second, which a
// window's length does not change beyond its start and stop edges, and those
// are a few microseconds of a window of at least kMinFitWindowS. Warm-up
// transients (a cold cache, a pool refilled between windows) weigh more in a
// short window than in a long one, so refits keep the windows within
// kMaxWindowGrowth of the plan's.
#pragma once

#include <string>
#include <vector>

namespace lockline {

/// The fitted window's range, seconds: below 5 ms a window's start and stop
/// edges (barrier release, the stop flag reaching every thread) are no longer
/// small against it; above 1 s nothing is gained for the statistics.
inline constexpr double kMinFitWindowS = 0.005;
inline constexpr double kMaxFitWindowS = 1.0;
/// A refit during the run gives the points not started at most this many
/// times the plan-time window. When the plan overestimated, the slack would
/// otherwise go to the last few points to start (the window-dependent part
/// of a run is small against its fixed work, so a few seconds of slack would
/// stretch the last points' windows many times); the run then ends a little
/// early instead.
inline constexpr double kMaxWindowGrowth = 4;

/// Declared seconds the harness itself spends per repetition of a point with
/// `threads` threads and `windows` timed windows outside the windows' planned
/// length, before any measurement: creating, pinning and joining the
/// threads, the two coherence probes (multi-threaded points), recording the
/// row (without the file rewrite: RecordingCost), and each window's stop
/// edge, from the rows' `timing` (timing.declared_s beside wall_s) on a quiet
/// machine. A window ends later when the threads fill every usable PU
/// (`usable_pus`; 0: unknown, taken as filled), since the main thread that
/// stops the window must wait for the scheduler to preempt a worker. On a
/// loaded machine these grow; the run rescales them by what each family
/// measures (FitWindow after every repetition).
double HarnessRepetitionCostS(int threads, int windows, int usable_pus = 0);

/// What the fit knows about one point.
struct BudgetPoint {
  std::string family;
  int windows = 1;           ///< windows per repetition
  int repetitions_left = 0;  ///< repetitions not yet run
  /// Declared seconds per repetition besides its timed windows:
  /// HarnessRepetitionCostS + the variant's cost_s (for a fixed-work variant
  /// its work included).
  double declared_s = 0;
  bool fixed_work = false;      ///< windows are fixed work: ignore w
  bool oversubscribed = false;  ///< windows counted at their bound
  /// > 0 once the point has started: the window all its repetitions use.
  double window_s = 0;
  int measured = 0;  ///< repetitions measured so far
  /// Their summed cost besides windows x window_s (for fixed work: their
  /// whole cost), seconds, without the file rewrite.
  double measured_s = 0;
};

/// The rewrite of lockline.json after each repetition (and after a point's
/// last, with its aggregate rows): about `per_row_s` seconds per row the file
/// holds then. Each repetition adds `rows_per_repetition` rows.
struct RecordingCost {
  /// Before any measurement: between a quiet and a loaded machine's cost in
  /// the default suite (only new and changed rows are serialized; the write
  /// and fsync of the whole file stay). The run refits it from the gaps it
  /// measures (RecordingPerRowS).
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

/// Predicted seconds of each point's repetitions left (same order as
/// `points`), without the file rewrites, when the points not started run
/// windows of `window_s`: the per-point terms PredictSeconds sums (the plan's
/// time per question, harness/run/main.cpp).
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
