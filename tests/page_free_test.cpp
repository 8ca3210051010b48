// Tests of bench/page_free.cpp (issue 8): the put_page variants reach identical
// end states when run alone, the cost workload conserves pages with 2 threads,
// and the race checker finds lost references for the fast path with a widened
// window and none for the other variants.
//
// The workloads are driven on the harness's thread team without the runner
// (tests/workload_driver.h, no pinning): the family's source is compiled into
// this test so its types and its registration are visible.
#include "bench/page_free.cpp"  // NOLINT(build/include): the family under test

#include <gtest/gtest.h>

#include <chrono>

#include "tests/workload_driver.h"

namespace lockline::page_free {
namespace {

using testing::MetricOf;
using testing::TestEnv;
using testing::WorkloadDriver;

TEST(PageFree, FamiliesRegisterTheirGrids) {
  const Family* cost = nullptr;
  const Family* race = nullptr;
  for (const Family& f : Families()) {
    if (f.name == "page_free") cost = &f;
    if (f.name == "page_free_race") race = &f;
  }
  ASSERT_NE(cost, nullptr);
  ASSERT_NE(race, nullptr);
  int cost_default = 0;
  for (const Variant& v : cost->variants()) {
    if (v.suite <= Suite::kDefault) {
      ++cost_default;
      EXPECT_EQ(v.params[2].second, "same");
      EXPECT_EQ(v.params[3].second, kDefaultLock);
    }
  }
  EXPECT_EQ(cost_default, 3 * 2);  // 3 variants x on_lru_pct {0, 100}
  int race_default = 0;
  for (const Variant& v : race->variants()) {
    EXPECT_EQ(v.threads, std::vector<int>{2});
    if (v.suite <= Suite::kDefault) ++race_default;
  }
  EXPECT_EQ(race_default, 3 * 2);  // 3 variants x race_window_ns {0, 2000}
}

// Single-threaded, every variant must end in the same state after the same
// rounds: all pages back on the hot list in the same order with count 0 and no
// flags, the LRU empty.
template <class V>
nlohmann::json EndStateAfterRounds(CostParams params, int rounds,
                                   PointReport* report) {
  CostWorkload<V, TicketLock> w(TestEnv(1), params);
  WorkloadDriver drv(w, 1);
  uint64_t ops = 0;
  // Window(0): `stop` is already set, so each window is exactly one round.
  for (int r = 0; r < rounds; ++r) ops += drv.Window(0);
  EXPECT_EQ(ops, static_cast<uint64_t>(rounds * kBatch));
  *report = drv.Report(1.0, ops);
  EXPECT_EQ(w.Verify(), "") << V::kName;
  return report->details["end_state"];
}

TEST(PageFree, VariantsReachIdenticalEndStatesSingleThreaded) {
  for (int pct : {0, 50, 100}) {
    for (bool remote : {false, true}) {
      SCOPED_TRACE("on_lru_pct " + std::to_string(pct) +
                   (remote ? " remote" : " same"));
      const CostParams p{pct, remote};
      constexpr int kRounds = 7;
      PointReport ra, rf, rl;
      const auto atomic = EndStateAfterRounds<AtomicPut>(p, kRounds, &ra);
      const auto fast = EndStateAfterRounds<FastpathPut>(p, kRounds, &rf);
      const auto lcf = EndStateAfterRounds<LruCheckFirstPut>(p, kRounds, &rl);
      EXPECT_EQ(atomic, fast);
      EXPECT_EQ(atomic, lcf);
      if (!remote) {
        EXPECT_EQ(atomic["lru_pages"], 0);
      }
      // Remote with one thread hands the last round to itself: those pages are
      // in flight.
      EXPECT_EQ(atomic["in_flight"], remote ? kBatch : 0);
      EXPECT_EQ(MetricOf(ra, "fastpath_share"), 0.0);
      EXPECT_EQ(MetricOf(rl, "fastpath_share"), 0.0);
      // Only pages off the LRU at the final put qualify for the fast path.
      EXPECT_NEAR(MetricOf(rf, "fastpath_share"), (100 - pct) / 100.0, 0.05);
      EXPECT_NEAR(MetricOf(rl, "lru_lock_per_free"), pct / 100.0, 0.05);
      EXPECT_EQ(MetricOf(ra, "lru_lock_per_free"), 1.0);
    }
  }
}

template <class V>
void TwoThreadCostRunConservesPages(bool remote) {
  CostWorkload<V, TicketLock> w(TestEnv(2), CostParams{50, remote});
  WorkloadDriver drv(w, 2);
  uint64_t ops = 0;
  for (int i = 0; i < 3; ++i) ops += drv.Window(0.05);
  EXPECT_GT(ops, 0u);
  const PointReport r = drv.Report(0.15, ops);
  EXPECT_EQ(w.Verify(), "") << V::kName;
  EXPECT_TRUE(r.details.contains("lock_stat"));
}

TEST(PageFree, TwoThreadsConservePages) {
  for (bool remote : {false, true}) {
    TwoThreadCostRunConservesPages<AtomicPut>(remote);
    TwoThreadCostRunConservesPages<FastpathPut>(remote);
    TwoThreadCostRunConservesPages<LruCheckFirstPut>(remote);
  }
}

/// Runs the race workload in 0.1 s windows until a violation shows or `bound_s`
/// elapses. Returns {violations, frees}.
template <class V>
std::pair<uint64_t, uint64_t> RunRace(uint64_t window_ns, double bound_s,
                                      bool stop_at_first) {
  RaceWorkload<V> w(TestEnv(2), window_ns);
  WorkloadDriver drv(w, 2);
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
             .count() < bound_s) {
    drv.Window(0.1);
    if (stop_at_first && w.Tally().first > 0) break;
  }
  const PointReport r = drv.Report(bound_s, 0);
  EXPECT_EQ(w.Verify(), "") << V::kName;
  EXPECT_EQ(MetricOf(r, "violations"), static_cast<double>(w.Tally().first));
  EXPECT_EQ(r.details["verdict"],
            w.Tally().first ? "unsafe" : "no violation seen");
  return w.Tally();
}

TEST(PageFreeRace, FastpathLosesReferencesWithWidenedWindow) {
  const auto [violations, frees] = RunRace<FastpathPut>(2000, 5.0, true);
  EXPECT_GT(frees, 0u);
  EXPECT_GT(violations, 0u) << "no lost reference in 5 s with a 2000 ns window";
}

TEST(PageFreeRace, AtomicAndLruCheckFirstAreSafe) {
  const auto [va, fa] = RunRace<AtomicPut>(2000, 2.5, false);
  EXPECT_GT(fa, 0u);
  EXPECT_EQ(va, 0u);
  const auto [vl, fl] = RunRace<LruCheckFirstPut>(2000, 2.5, false);
  EXPECT_GT(fl, 0u);
  EXPECT_EQ(vl, 0u);
}

}  // namespace
}  // namespace lockline::page_free
