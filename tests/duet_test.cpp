// Paired windows (harness/measure/duet.h): the schedule, the pairing of
// windows, and that a DuetWorkload runs each side exactly in its scheduled
// windows and reports both. Correctness only: no speed is asserted here.
#include "harness/measure/duet.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/workload_driver.h"

namespace lockline {
namespace {

TEST(DuetSchedule, WarmupFirstThenEveryPairHoldsOneOfEachSide) {
  const std::vector<DuetSide> s = DuetSchedule(2, 50, 7);
  ASSERT_EQ(s.size(), 2u * 52);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(s[2 * i], DuetSide::kWarmupA);
    EXPECT_EQ(s[2 * i + 1], DuetSide::kWarmupB);
  }
  int b_first = 0;
  for (size_t i = 4; i < s.size(); i += 2) {
    const bool ab = s[i] == DuetSide::kA && s[i + 1] == DuetSide::kB;
    const bool ba = s[i] == DuetSide::kB && s[i + 1] == DuetSide::kA;
    EXPECT_TRUE(ab || ba) << "window pair at " << i;
    b_first += ba;
  }
  // Both orders occur (random, seeded): 50 fair coin flips all equal has
  // probability 2^-49.
  EXPECT_GT(b_first, 0);
  EXPECT_LT(b_first, 50);
  EXPECT_EQ(DuetSchedule(2, 50, 7), s) << "the same seed gives the same order";
  EXPECT_NE(DuetSchedule(2, 50, 8), s);
}

TEST(DuetPairs, PairsWindowsBySideAndSkipsWarmups) {
  const std::vector<DuetSide> s = {DuetSide::kWarmupA, DuetSide::kWarmupB,
                                   DuetSide::kA,       DuetSide::kB,
                                   DuetSide::kB,       DuetSide::kA};
  const std::vector<uint64_t> ops = {1, 1, 100, 300, 600, 200};
  const std::vector<double> sec = {1, 1, 1, 1, 2, 1};
  const std::vector<DuetPair> p = DuetPairs(s, ops, sec);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_DOUBLE_EQ(p[0].a_ops_per_s, 100);
  EXPECT_DOUBLE_EQ(p[0].b_ops_per_s, 300);
  EXPECT_FALSE(p[0].b_first);
  EXPECT_DOUBLE_EQ(p[1].a_ops_per_s, 200);
  EXPECT_DOUBLE_EQ(p[1].b_ops_per_s, 300);
  EXPECT_TRUE(p[1].b_first);
}

/// A side that counts its calls: every RunWindow does `per_window` operations
/// (fixed work) and records that it ran.
class CountingSide : public Workload {
 public:
  CountingSide(uint64_t per_window, std::string broken = "")
      : per_window_(per_window), broken_(std::move(broken)) {}
  void Prepare(int threads) override { prepared_ = threads; }
  void SetupThread(const ThreadCtx&) override { setups_.fetch_add(1); }
  uint64_t RunWindow(const ThreadCtx&, const std::atomic<bool>&) override {
    windows_.fetch_add(1);
    return per_window_;
  }
  void TeardownThread(const ThreadCtx&) override { teardowns_.fetch_add(1); }
  bool fixed_work() const override { return true; }
  void Report(PointReport& out, double seconds, uint64_t ops) override {
    out.Metric("side_ops", static_cast<double>(ops));
    out.details["seconds"] = seconds;
    out.layouts.push_back("layout_of_" + std::to_string(per_window_));
  }
  std::string Verify() override { return broken_; }

  uint64_t per_window_;
  std::string broken_;
  int prepared_ = 0;
  std::atomic<int> setups_{0}, windows_{0}, teardowns_{0};
};

TEST(DuetWorkload, RunsEachSideInItsWindowsAndReportsBoth) {
  auto a = std::make_unique<CountingSide>(10);
  auto b = std::make_unique<CountingSide>(30);
  CountingSide *pa = a.get(), *pb = b.get();
  const std::vector<DuetSide> schedule = DuetSchedule(1, 6, 3);
  DuetWorkload duet(std::move(a), std::move(b), schedule, "f/x:1", "f/x:2");
  {
    testing::WorkloadDriver drv(duet, 2);
    for (size_t w = 0; w < schedule.size(); ++w) drv.Window(0.001);
    drv.Teardown();
  }
  EXPECT_EQ(pa->prepared_, 2);
  EXPECT_EQ(pb->prepared_, 2);
  EXPECT_EQ(pa->setups_.load(), 2);
  EXPECT_EQ(pb->setups_.load(), 2);
  // 7 windows per side (1 warm-up + 6 measured), on each of the 2 threads.
  EXPECT_EQ(pa->windows_.load(), 14);
  EXPECT_EQ(pb->windows_.load(), 14);
  EXPECT_EQ(pa->teardowns_.load(), 2);
  PointReport rep;
  duet.Report(rep, 1.0, 0);
  const nlohmann::json& d = rep.details["duet"];
  EXPECT_EQ(d["a_key"], "f/x:1");
  EXPECT_EQ(d["b_key"], "f/x:2");
  ASSERT_EQ(d["sides"].size(), schedule.size());
  ASSERT_EQ(d["pairs"].size(), 6u);
  // Each side's own report sees its own windows' operations, warm-ups
  // included: 7 windows x 2 threads x ops per window.
  EXPECT_EQ(d["a"]["metrics"]["side_ops"], 140.0);
  EXPECT_EQ(d["b"]["metrics"]["side_ops"], 420.0);
  EXPECT_EQ(rep.layouts.size(), 2u);
  EXPECT_EQ(duet.Verify(), "");
}

TEST(DuetWorkload, VerifyNamesTheBrokenSide) {
  DuetWorkload duet(std::make_unique<CountingSide>(1),
                    std::make_unique<CountingSide>(1, "pages lost"),
                    DuetSchedule(0, 1, 1), "f/x:1", "f/x:2");
  EXPECT_EQ(duet.Verify(), "side b (f/x:2): pages lost");
}

class TimedSide : public CountingSide {
 public:
  TimedSide() : CountingSide(1) {}
  bool fixed_work() const override { return false; }
};

TEST(DuetWorkload, RefusesAFixedWorkSideBesideATimedOne) {
  EXPECT_THROW(DuetWorkload(std::make_unique<CountingSide>(1),
                            std::make_unique<TimedSide>(),
                            DuetSchedule(0, 1, 1), "f/x:1", "f/x:2"),
               std::invalid_argument);
}

TEST(PlanPairs, OneThreadReachesThePrecisionInMoreShorterRepetitions) {
  // Cost-optimal pairs sqrt(pi 0.03^2 7 / 0.02^2) = 7 -> the minimum 12; 10
  // repetitions of one regime give the verdict's interval +-2.9 %.
  const PairPlan p = PlanPairs(0.03, 1, 5);
  EXPECT_EQ(p.pairs_per_repetition, kDuetMinPairs);
  EXPECT_EQ(p.repetitions, 10);
  EXPECT_NEAR(p.expected_half_width, 0.0294, 0.0005);
  EXPECT_LE(p.expected_half_width, 0.03);
}

TEST(PlanPairs, ContendedPointsAreCappedAndSayWhatTheyWillReach) {
  // 60 % of 20 repetitions in one regime: 12 units, +-4.1 %.
  const PairPlan p = PlanPairs(0.03, 2, 5);
  EXPECT_EQ(p.repetitions, kDuetMaxRepetitionFactor * 5);
  EXPECT_NEAR(p.expected_half_width, 0.0409, 0.0005);
  // A loose precision never plans fewer than the run's repetitions.
  EXPECT_EQ(PlanPairs(0.5, 1, 5).repetitions, 5);
}

TEST(PlanPairs, WorkBetweenHoldsNeedsFewerRepetitionsThanASaturatedLock) {
  // Calibrated work between holds (within 0.02, between 0.01): 60 % of 10
  // repetitions give 6 units, about +-2.5 %; a saturated lock keeps the cap.
  const PairPlan work = PlanPairs(0.03, 2, 5, true);
  EXPECT_EQ(work.pairs_per_repetition, kDuetMinPairs);
  EXPECT_EQ(work.repetitions, 10);
  EXPECT_GT(work.expected_half_width, 0.02);
  EXPECT_LE(work.expected_half_width, 0.03);
  EXPECT_EQ(PlanPairs(0.03, 2, 5, false).repetitions,
            kDuetMaxRepetitionFactor * 5);
  // One thread has no lock to saturate: the same plan either way.
  EXPECT_EQ(PlanPairs(0.03, 1, 5, true).repetitions,
            PlanPairs(0.03, 1, 5).repetitions);
}

TEST(PlanPairs, TheVerdictsIntervalNarrowsWithUnitsNotPairs) {
  const PairPrior prior{0.03, 0.03, 1};
  EXPECT_TRUE(std::isinf(PairedHalfWidth(1, 64, prior)));
  EXPECT_LT(PairedHalfWidth(20, 12, prior), PairedHalfWidth(5, 48, prior));
  EXPECT_NEAR(PairedHalfWidth(1000, 1000, PairPrior{0, 0, 1}), std::expm1(0.01),
              1e-9);
}

TEST(PlanPairs, RefusesNonsense) {
  EXPECT_THROW(PlanPairs(0, 1, 5), std::invalid_argument);
  EXPECT_THROW(PlanPairs(0.03, 0, 5), std::invalid_argument);
  EXPECT_THROW(PlanPairs(0.03, 1, 0), std::invalid_argument);
}

}  // namespace
}  // namespace lockline
