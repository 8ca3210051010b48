// The budget fit (harness/run/budget.h): given points with declared and
// measured costs, the fitted window makes the predicted run hit the budget; the
// window clamps; fixed work that alone exceeds the budget is said at plan time;
// and a simulated run that refits after every repetition ends near its budget.
// No clocks: every cost is a number the test makes up.
#include "harness/run/budget.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace lockline {
namespace {

BudgetPoint Timed(const std::string& family, double declared_s, int windows = 3,
                  int reps = 5) {
  BudgetPoint p;
  p.family = family;
  p.windows = windows;
  p.repetitions_left = reps;
  p.declared_s = declared_s;
  return p;
}

BudgetPoint FixedWork(const std::string& family, double declared_s,
                      int reps = 5) {
  BudgetPoint p = Timed(family, declared_s, 1, reps);
  p.fixed_work = true;
  return p;
}

RecordingCost NoRecording() {
  RecordingCost r;
  r.per_row_s = 0;
  return r;
}

TEST(RunnerBudget, PlanTimeFitHitsTheBudget) {
  std::vector<BudgetPoint> points;
  for (int i = 0; i < 40; ++i) points.push_back(Timed("locks", 0.05));
  for (int i = 0; i < 5; ++i) points.push_back(FixedWork("fault", 1.0));
  RecordingCost rec;  // the default per-row cost
  const BudgetFit fit = FitBudget(points, rec, 120);
  EXPECT_TRUE(fit.met);
  EXPECT_GT(fit.window_s, kMinFitWindowS);
  EXPECT_LT(fit.window_s, kMaxFitWindowS);
  EXPECT_NEAR(fit.estimate_s, 120, 0.01);
  EXPECT_NEAR(PredictSeconds(points, rec, fit.window_s), 120, 0.01);
  // By hand: 200 timed reps x (0.05 + 3 w) + 25 x 1.0 + the rewrites.
  const double reps = 225, growth = rec.rows_per_repetition;
  const double rewrites = rec.per_row_s * growth * reps * (reps - 1) / 2;
  EXPECT_NEAR(200 * (0.05 + 3 * fit.window_s) + 25 + rewrites, 120, 0.01);
}

TEST(RunnerBudget, WindowEdgesCostOnlyWhenTheThreadsFillEveryPu) {
  // A spare PU lets the main thread stop a window at once; threads on every
  // usable PU make it wait for a preemption (~3 ms, measured).
  const double spare = HarnessRepetitionCostS(2, 10, 4);
  const double filled = HarnessRepetitionCostS(2, 10, 2);
  EXPECT_NEAR(filled - spare, 10 * (0.003 - 0.0001), 1e-12);
  EXPECT_LT(HarnessRepetitionCostS(1, 3, 2), 0.003);
  EXPECT_GT(HarnessRepetitionCostS(2, 3), HarnessRepetitionCostS(1, 3));
}

TEST(RunnerBudget, PerPointSecondsSumToTheEstimateWithoutRewrites) {
  std::vector<BudgetPoint> points;
  for (int i = 0; i < 4; ++i) points.push_back(Timed("locks", 0.05));
  points.push_back(FixedWork("fault", 1.0));
  const std::vector<double> each = PredictPointSeconds(points, 0.01);
  ASSERT_EQ(each.size(), points.size());
  double sum = 0;
  for (double s : each) sum += s;
  EXPECT_NEAR(sum, PredictSeconds(points, NoRecording(), 0.01), 1e-9);
  // By hand: 5 reps x (0.05 + 3 windows x 0.01) each; fixed work 5 x 1.0.
  EXPECT_NEAR(each[0], 5 * (0.05 + 3 * 0.01), 1e-9);
  EXPECT_NEAR(each[4], 5.0, 1e-9);
}

TEST(RunnerBudget, MeasuredOverheadRescalesItsFamilyAndShortensTheWindow) {
  std::vector<BudgetPoint> points;
  for (int i = 0; i < 20; ++i) points.push_back(Timed("kernel_zone", 0.1));
  for (int i = 0; i < 20; ++i) points.push_back(Timed("locks", 0.05));
  const RecordingCost rec = NoRecording();
  const BudgetFit before = FitBudget(points, rec, 100);
  // One kernel_zone point ran one repetition and cost 3x its declared 0.1 s
  // besides its windows: the other 19 are now expected at 0.3 s. The locks
  // points keep their declared 0.05 s: their family measured nothing yet,
  // and kernel_zone's scale says nothing about them.
  points[0].window_s = before.window_s;
  points[0].repetitions_left = 4;
  points[0].measured = 1;
  points[0].measured_s = 0.3;
  const double w = 0.01;
  const double expected = 4 * (0.3 + 3 * before.window_s) +
                          19 * 5 * (0.3 + 3 * w) + 20 * 5 * (0.05 + 3 * w);
  EXPECT_NEAR(PredictSeconds(points, rec, w), expected, 1e-9);
  const BudgetFit after = FitBudget(points, rec, 100 - 0.3);
  EXPECT_LT(after.window_s, before.window_s);
  EXPECT_NEAR(after.estimate_s, 100 - 0.3, 0.01);

  // Once locks measured, its own scale applies (0.5x here).
  points[20].window_s = before.window_s;
  points[20].repetitions_left = 4;
  points[20].measured = 1;
  points[20].measured_s = 0.025;
  const double expected2 =
      4 * (0.3 + 3 * before.window_s) + 19 * 5 * (0.3 + 3 * w) +
      4 * (0.025 + 3 * before.window_s) + 19 * 5 * (0.025 + 3 * w);
  EXPECT_NEAR(PredictSeconds(points, rec, w), expected2, 1e-9);
}

TEST(RunnerBudget, StartedPointsAndFixedWorkIgnoreTheWindow) {
  std::vector<BudgetPoint> points = {Timed("locks", 0.05),
                                     FixedWork("fault", 2.0)};
  points[0].window_s = 0.02;  // started: its window is fixed
  const RecordingCost rec = NoRecording();
  const double a = PredictSeconds(points, rec, 0.005);
  const double b = PredictSeconds(points, rec, 0.5);
  EXPECT_DOUBLE_EQ(a, b);
  EXPECT_NEAR(a, 5 * (0.05 + 3 * 0.02) + 5 * 2.0, 1e-9);
}

TEST(RunnerBudget, MinimumClampAndCannotBeMetMessage) {
  // 10 points of 5 x 3 s fixed work: 150 s before any window, budget 120 s.
  std::vector<BudgetPoint> points;
  for (int i = 0; i < 10; ++i) points.push_back(FixedWork("fault", 3.0));
  for (int i = 0; i < 10; ++i) points.push_back(Timed("locks", 0.05));
  const RecordingCost rec = NoRecording();
  const BudgetFit fit = FitBudget(points, rec, 120);
  EXPECT_FALSE(fit.met);
  EXPECT_DOUBLE_EQ(fit.window_s, kMinFitWindowS);
  EXPECT_DOUBLE_EQ(fit.estimate_s, fit.floor_s);
  EXPECT_NEAR(fit.floor_s, 150 + 50 * (0.05 + 3 * kMinFitWindowS), 1e-9);
  const std::string line = BudgetWarning(120, 3, fit);
  EXPECT_EQ(line.rfind("budget 2m00s cannot be met: ", 0), 0u) << line;
  // 3 s spent before the fit (coherence baselines) + 153.25 s predicted.
  EXPECT_NE(line.find("about 2m36s"), std::string::npos) << line;
  EXPECT_NE(line.find("5.0 ms"), std::string::npos) << line;
  EXPECT_EQ(BudgetWarning(120, 0, FitBudget(points, rec, 200)), "");
}

TEST(RunnerBudget, MaximumClampLeavesTheRestOfTheBudget) {
  const std::vector<BudgetPoint> points = {Timed("locks", 0.05, 3, 2)};
  const BudgetFit fit = FitBudget(points, NoRecording(), 3600);
  EXPECT_TRUE(fit.met);
  EXPECT_DOUBLE_EQ(fit.window_s, kMaxFitWindowS);
  EXPECT_NEAR(fit.estimate_s, 2 * (0.05 + 3 * 1.0), 1e-9);
  // A refit's cap (kMaxWindowGrowth x the plan's window) works the same way.
  const BudgetFit capped =
      FitBudget(points, NoRecording(), 3600, 0, kMinFitWindowS, 0.02);
  EXPECT_DOUBLE_EQ(capped.window_s, 0.02);
  EXPECT_TRUE(capped.met);
}

TEST(RunnerBudget, FixedWindowIsKeptAndOnlyEstimated) {
  const std::vector<BudgetPoint> points = {Timed("locks", 0.05)};
  const BudgetFit fit = FitBudget(points, NoRecording(), 1, 0.2);
  EXPECT_DOUBLE_EQ(fit.window_s, 0.2);
  EXPECT_NEAR(fit.estimate_s, 5 * (0.05 + 0.6), 1e-9);
  EXPECT_FALSE(fit.met);  // over the budget, but the user chose the window
}

TEST(RunnerBudget, OversubscribedWindowsCountAtTheirBoundUntilMeasured) {
  BudgetPoint p = Timed("locks", 0.05, 2, 1);
  p.oversubscribed = true;
  std::vector<BudgetPoint> points = {p};
  // max(10 x 5 ms, 2 s) a window.
  EXPECT_NEAR(PredictSeconds(points, NoRecording(), 0.005), 0.05 + 2 * 2.0,
              1e-9);
  EXPECT_NEAR(PredictSeconds(points, NoRecording(), 0.5), 0.05 + 2 * 5.0, 1e-9);
  // Measured: what it really took (its overrun is in measured_s).
  points[0].measured = 1;
  points[0].measured_s = 0.5;
  EXPECT_NEAR(PredictSeconds(points, NoRecording(), 0.005), 0.5 + 2 * 0.005,
              1e-9);
}

TEST(RunnerBudget, RecordingCostGrowsWithTheFile) {
  const std::vector<BudgetPoint> points = {FixedWork("fault", 0, 10)};
  RecordingCost rec;
  rec.per_row_s = 0.001;
  rec.rows = 100;
  rec.rows_per_repetition = 2;
  // Rewrites at 100, 102, ..., 118 rows.
  double sum = 0;
  for (int j = 0; j < 10; ++j) sum += 0.001 * (100 + 2 * j);
  EXPECT_NEAR(PredictSeconds(points, rec, 0.01), sum, 1e-12);
  // Per-row cost from measurements, shrunk towards the prior while few rows.
  EXPECT_DOUBLE_EQ(RecordingPerRowS(0, 0, 1e-4), 1e-4);
  // 500 rows' worth of prior: 4 s over a million rows is 4e-6 s a row.
  EXPECT_DOUBLE_EQ(RecordingPerRowS(4.0, 1e6, 1e-4), (4.0 + 0.05) / 1.0005e6);
}

// A run simulated on a made-up clock: repetitions in a shuffled order (as
// Google Benchmark's random interleaving runs them), each point's window
// fixed at its first repetition, the fit redone after every repetition with
// what the repetition "measured". True costs differ from the declared ones by
// family (1.5x for the kernel family, 0.5x for locks, fixed work 1.8x) and the
// file rewrite costs a fifth of the prior: the run still ends within 5 % of
// its budget.
TEST(RunnerBudget, RefittingAfterEveryRepetitionEndsNearTheBudget) {
  struct Truth {
    double extra_s;
  };
  std::vector<BudgetPoint> points;
  std::vector<Truth> truth;
  const int reps = 5;
  for (int i = 0; i < 120; ++i) {
    points.push_back(Timed("locks", 0.05, 3, reps));
    truth.push_back({0.025});
  }
  for (int i = 0; i < 20; ++i) {
    points.push_back(Timed("kernel_zone", 0.2, 3, reps));
    truth.push_back({0.3});
  }
  for (int i = 0; i < 6; ++i) {
    points.push_back(FixedWork("fault", 0.8, reps));
    truth.push_back({1.44});
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < points.size(); ++i)
    for (int r = 0; r < reps; ++r) order.push_back(i);
  std::mt19937 rng(7);
  std::shuffle(order.begin(), order.end(), rng);

  const double budget = 180;
  const double true_per_row = RecordingCost{}.per_row_s / 5;
  RecordingCost rec;
  rec.rows_per_repetition = 1.0 + 4.0 / reps;
  double clock = 0, gaps = 0, gap_rows = 0, rows = 0;
  BudgetFit fit = FitBudget(points, rec, budget);
  const double planned = fit.estimate_s;
  EXPECT_NEAR(planned, budget, 0.01);
  std::vector<int> done(points.size(), 0);
  double min_w = 1, max_w = 0;
  for (size_t i : order) {
    BudgetPoint& p = points[i];
    if (p.window_s <= 0) p.window_s = fit.window_s;
    min_w = std::min(min_w, p.window_s);
    max_w = std::max(max_w, p.window_s);
    const double windows = p.fixed_work ? 0 : p.windows * p.window_s;
    const double cost = truth[i].extra_s + windows;
    const double gap = true_per_row * rows;  // rewrite after the previous one
    clock += cost + gap;
    gaps += gap;
    gap_rows += rows;
    rows += 1 + (++done[i] == reps ? 4 : 0);
    --p.repetitions_left;
    ++p.measured;
    p.measured_s += cost - windows;
    rec.rows = rows;
    rec.per_row_s = RecordingPerRowS(gaps, gap_rows, RecordingCost{}.per_row_s);
    fit = FitBudget(points, rec, budget - clock);
  }
  EXPECT_NEAR(clock, budget, 0.05 * budget)
      << "windows " << min_w << " .. " << max_w;
  EXPECT_GE(min_w, kMinFitWindowS);
}

// The plan within the budget (FitRepetitions): the costliest figure points
// lose repetitions first, never below their floor; comparisons keep theirs
// while the figures can give, then share the whole budget.
TEST(RunnerBudget, FitRepetitionsCutsCostlyFiguresFirstThenComparisons) {
  std::vector<BudgetPoint> pts = {FixedWork("fault", 10), Timed("locks", 0.1),
                                  Timed("duet", 1, 26, 20)};
  pts[0].repetitions_floor = pts[1].repetitions_floor = kMinFigureRepetitions;
  pts[2].repetitions_floor = 5;
  pts[2].comparison = true;
  const RecordingCost none = NoRecording();
  // 50 + 0.5 + 20 x 1.13 = 73.1 s; 30 s of fault go at 3 repetitions.
  std::vector<BudgetPoint> a = pts;
  RepetitionCut cut = FitRepetitions(a, none, 60, 75, 0.005);
  EXPECT_EQ(a[0].repetitions_left, 3);
  EXPECT_EQ(a[1].repetitions_left, 5);
  EXPECT_EQ(a[2].repetitions_left, 20);
  EXPECT_EQ(cut.figure_points_cut, 1);
  EXPECT_FALSE(cut.whole_budget);
  EXPECT_LE(PredictSeconds(a, none, 0.005), 60);
  // Figures at their floor still over 40 s: the comparisons take the whole
  // budget, at a share of their 20 repetitions, never below 5.
  a = pts;
  cut = FitRepetitions(a, none, 40, 45, 0.005);
  EXPECT_TRUE(cut.whole_budget);
  EXPECT_EQ(a[0].repetitions_left, 3);
  EXPECT_EQ(a[1].repetitions_left, 3);
  EXPECT_LT(a[2].repetitions_left, 20);
  EXPECT_GE(a[2].repetitions_left, 5);
  EXPECT_LE(PredictSeconds(a, none, 0.005), 45);
  a = pts;
  FitRepetitions(a, none, 10, 10, 0.005);  // cannot be met: every floor
  EXPECT_EQ(a[2].repetitions_left, 5);
  a = pts;
  cut = FitRepetitions(a, none, 100, 100, 0.005);  // fits: nothing cut
  EXPECT_LT(cut.figure_cap_s, 0);
  EXPECT_EQ(a[0].repetitions_left, 5);
}

}  // namespace
}  // namespace lockline
