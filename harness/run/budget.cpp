#include "harness/run/budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "harness/run/runner.h"

namespace lockline {
namespace {

struct Scale {
  double measured = 0, declared = 0;
  double Ratio() const { return declared > 0 ? measured / declared : 1.0; }
};

// Seconds one oversubscribed window may take: its wall-clock bound (RunPoint).
double BoundS(double window_s) { return std::max(10 * window_s, 2.0); }

// The largest x in [lo, hi] with fits(x), bisected (fits non-decreasing
// towards lo); lo when none.
template <typename Fits>
double Largest(double lo, double hi, Fits fits) {
  for (int i = 0; i < 60 && hi - lo > 1e-9 * std::max(1.0, hi); ++i) {
    const double mid = (lo + hi) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

double HarnessRepetitionCostS(int threads, int windows, int usable_pus) {
  const double probes = threads > 1 ? 0.002 : 0.0;
  const bool filled = usable_pus > 0 ? threads >= usable_pus : threads > 1;
  const double edge = filled ? 0.003 : 0.0001;
  return 0.001 + 0.0005 * threads + probes + windows * edge;
}

std::vector<double> PredictPointSeconds(const std::vector<BudgetPoint>& points,
                                        double window_s) {
  std::map<std::string, Scale> family;
  for (const BudgetPoint& p : points) {
    if (p.measured <= 0) continue;
    Scale& f = family[p.family];
    f.measured += p.measured_s;
    f.declared += p.measured * p.declared_s;
  }
  std::vector<double> out(points.size(), 0.0);
  for (std::size_t i = 0; i < points.size(); ++i) {
    const BudgetPoint& p = points[i];
    if (p.repetitions_left <= 0) continue;
    // Measured, or declared at the family's scale so far.
    const double extra = p.measured > 0
                             ? p.measured_s / p.measured
                             : p.declared_s * family[p.family].Ratio();
    const double w = p.window_s > 0 ? p.window_s : window_s;
    const double window_each =
        p.oversubscribed && p.measured == 0 ? BoundS(w) : w;
    const double windows_s = p.fixed_work ? 0.0 : p.windows * window_each;
    out[i] = p.repetitions_left * (extra + windows_s);
  }
  return out;
}

double PredictSeconds(const std::vector<BudgetPoint>& points,
                      const RecordingCost& recording, double window_s) {
  double seconds = 0, repetitions = 0;
  const std::vector<double> each = PredictPointSeconds(points, window_s);
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (points[i].repetitions_left <= 0) continue;
    seconds += each[i];
    repetitions += points[i].repetitions_left;
  }
  // Rewrites after each of the R repetitions left, the file growing by
  // rows_per_repetition each time: per_row_s x sum of (rows + j x growth).
  seconds +=
      recording.per_row_s * (repetitions * recording.rows +
                             recording.rows_per_repetition * repetitions *
                                 std::max(0.0, repetitions - 1) / 2);
  return seconds;
}

BudgetFit FitBudget(const std::vector<BudgetPoint>& points,
                    const RecordingCost& recording, double budget_left_s,
                    double fixed_window_s, double min_window_s,
                    double max_window_s) {
  BudgetFit fit;
  fit.floor_s = PredictSeconds(points, recording, min_window_s);
  // PredictSeconds is non-decreasing in the window (piecewise linear with
  // the oversubscribed bound): bisect for the longest window that fits.
  const auto fits = [&](double w) {
    return PredictSeconds(points, recording, w) <= budget_left_s;
  };
  if (fixed_window_s > 0)
    fit.window_s = fixed_window_s;
  else if (fit.floor_s > budget_left_s)
    fit.window_s = min_window_s;
  else
    fit.window_s = fits(max_window_s)
                       ? max_window_s
                       : Largest(min_window_s, max_window_s, fits);
  fit.estimate_s = PredictSeconds(points, recording, fit.window_s);
  fit.met = fit.estimate_s <= budget_left_s;
  return fit;
}

RepetitionCut FitRepetitions(std::vector<BudgetPoint>& points,
                             const RecordingCost& recording,
                             double figures_budget_s, double budget_s,
                             double window_s) {
  RepetitionCut cut;
  const std::vector<BudgetPoint> full = points;
  const std::vector<double> each = PredictPointSeconds(full, window_s);
  double reps = 0, most = 0;
  for (const BudgetPoint& p : full) reps += p.repetitions_left;
  // A repetition's file rewrite, at the file's mean size over the plan.
  const double rewrite_s =
      recording.per_row_s *
      (recording.rows + recording.rows_per_repetition * reps / 2);
  for (std::size_t i = 0; i < full.size(); ++i)
    most = std::max(most, each[i] + rewrite_s * full[i].repetitions_left);
  // Sets the points of one kind to reps_of(i) within [floor, plan]; true
  // when the run then fits.
  const auto fits = [&](bool comparison, auto reps_of) {
    for (std::size_t i = 0; i < full.size(); ++i)
      if (full[i].comparison == comparison && full[i].repetitions_floor > 0)
        points[i].repetitions_left = std::clamp(
            reps_of(i),
            std::min(full[i].repetitions_floor, full[i].repetitions_left),
            full[i].repetitions_left);
    return PredictSeconds(points, recording, window_s) <=
           (comparison ? budget_s : figures_budget_s);
  };
  const auto capped = [&](double cap) {
    return fits(false, [&](std::size_t i) {
      const double rep = each[i] / std::max(1, full[i].repetitions_left);
      return static_cast<int>(cap / (rep + rewrite_s));
    });
  };
  const auto shared = [&](double share) {
    return fits(true, [&](std::size_t i) {
      return static_cast<int>(std::ceil(share * full[i].repetitions_left));
    });
  };
  if (fits(false, [&](std::size_t i) { return full[i].repetitions_left; }))
    return cut;
  cut.whole_budget = !capped(0);
  cut.figure_cap_s = cut.whole_budget ? 0 : Largest(0, most, capped);
  capped(cut.figure_cap_s);
  if (cut.whole_budget && !shared(1)) {
    cut.comparison_share = Largest(0, 1, shared);
    shared(cut.comparison_share);
  }
  for (std::size_t i = 0; i < full.size(); ++i)
    cut.figure_points_cut +=
        !full[i].comparison &&
        points[i].repetitions_left < full[i].repetitions_left;
  return cut;
}

std::string BudgetWarning(double budget_s, double spent_s,
                          const BudgetFit& fit) {
  if (fit.met) return "";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "budget %s cannot be met: fixed work and per-point overheads "
                "alone are about %s at the minimum window (%.1f ms)",
                FormatDuration(budget_s).c_str(),
                FormatDuration(spent_s + fit.floor_s).c_str(),
                fit.window_s * 1e3);
  return buf;
}

double RecordingPerRowS(double gap_s, double rows, double prior_per_row_s) {
  constexpr double kPriorRows = 500;
  return (gap_s + prior_per_row_s * kPriorRows) / (rows + kPriorRows);
}

}  // namespace lockline
