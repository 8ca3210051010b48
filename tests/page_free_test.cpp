// Tests of bench/page_free.cpp (issues 8 and 17): the put_page variants reach
// identical end states when run alone, the cost workload conserves pages with
// 2 threads, and the race checker, at a widened window, finds violations for
// the fast path against both scanner orders and for Ken Chen's
// lock-only-if-PageLRU against the 2.6.16 order, and none for 2.6.16's
// re-checking atomic variant (either order) or Ken Chen's against 2.6.18.
//
// The workloads are driven on the harness's thread team without the runner
// (tests/workload_driver.h, no pinning): the family's source is compiled into
// this test so its types and its registration are visible.
#include "bench/page_free.cpp"  // NOLINT(build/include): the family under test

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>

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
  std::map<std::string, Suite> suite_of;  // row key without threads -> suite
  for (const Variant& v : cost->variants()) {
    suite_of[RowKey("page_free", v.params, 0)] = v.suite;
    if (v.suite <= Suite::kDefault) {
      ++cost_default;
      EXPECT_EQ(v.params[2].second, "same");
      EXPECT_EQ(v.params[3].second, kDefaultLock);
    }
  }
  // 4 variants x on_lru_pct {0, 100}, plus the stats:off twins of atomic and
  // fastpath at 0 % (question 002's rows) and of atomic at 100 %.
  EXPECT_EQ(cost_default, 4 * 2 + 3);
  // Each twin is in the suite of its instrumented row (question 002's are in
  // --quick, as the rows they replace in the verdict).
  for (const char* key :
       {"page_free/variant:atomic/on_lru_pct:0/free_cpu:same/lock:ttas",
        "page_free/variant:fastpath/on_lru_pct:0/free_cpu:same/lock:ttas",
        "page_free/variant:atomic/on_lru_pct:100/free_cpu:same/lock:ttas"}) {
    const std::string on = std::string(key) + "/threads:0";
    const std::string off = std::string(key) + "/stats:off/threads:0";
    ASSERT_EQ(suite_of.count(on), 1u) << on;
    ASSERT_EQ(suite_of.count(off), 1u) << off;
    EXPECT_EQ(suite_of[off], suite_of[on]) << off;
  }
  EXPECT_EQ(
      suite_of["page_free/variant:fastpath/on_lru_pct:0/free_cpu:same/lock:"
               "ttas/stats:off/threads:0"],
      Suite::kQuick);
  int race_default = 0, race_quick = 0;
  for (const Variant& v : race->variants()) {
    EXPECT_EQ(v.threads, std::vector<int>{2});
    ASSERT_EQ(v.params.size(), 3u);
    EXPECT_EQ(v.params[1].first, "scanner");
    EXPECT_EQ(v.params[2].first, "race_window_ns");
    if (v.suite <= Suite::kDefault) ++race_default;
    if (v.suite == Suite::kQuick) {
      ++race_quick;
      EXPECT_EQ(v.params[1].second, "2.6.16");  // the verdict's scanner
    }
  }
  // 4 variants x scanner {2.6.16, 2.6.18} x race_window_ns {0, 2000}
  EXPECT_EQ(race_default, 4 * 2 * 2);
  EXPECT_EQ(race_quick, 4);
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
      const auto lcf = EndStateAfterRounds<LruCheckFirst2618>(p, kRounds, &rl);
      PointReport rp;
      const auto prop =
          EndStateAfterRounds<LruCheckFirstProposal>(p, kRounds, &rp);
      EXPECT_EQ(atomic, fast);
      EXPECT_EQ(atomic, lcf);
      EXPECT_EQ(atomic, prop);
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

// Question 002's uninstrumented twins (stats:off, issue 40 item 3): the same
// frees as the instrumented rows (same end state, the atomic side still takes
// lru_lock on every final put as 2.6.16's __page_cache_release does), with
// lock_stat off in the row's details.
TEST(PageFree, StatsOffTwinsOfQuestion002FreeAlikeWithoutLockStat) {
  constexpr int kRounds = 7;
  CostParams on{0, false};
  CostParams off = on;
  off.stats = false;
  PointReport ra_on, ra_off, rf_on, rf_off;
  const auto atomic_on = EndStateAfterRounds<AtomicPut>(on, kRounds, &ra_on);
  const auto atomic_off = EndStateAfterRounds<AtomicPut>(off, kRounds, &ra_off);
  const auto fast_on = EndStateAfterRounds<FastpathPut>(on, kRounds, &rf_on);
  const auto fast_off = EndStateAfterRounds<FastpathPut>(off, kRounds, &rf_off);
  EXPECT_EQ(atomic_on, atomic_off);
  EXPECT_EQ(fast_on, fast_off);
  EXPECT_EQ(atomic_off, fast_off);
  EXPECT_EQ(ra_on.details["lock_stat"], true);
  EXPECT_EQ(ra_off.details["lock_stat"], false);
  EXPECT_EQ(rf_off.details["lock_stat"], false);
  EXPECT_EQ(MetricOf(ra_off, "lru_lock_per_free"), 1.0);
  EXPECT_EQ(MetricOf(rf_off, "lru_lock_per_free"), 0.0);
  EXPECT_EQ(MetricOf(rf_off, "fastpath_share"), 1.0);
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
    TwoThreadCostRunConservesPages<LruCheckFirst2618>(remote);
    TwoThreadCostRunConservesPages<LruCheckFirstProposal>(remote);
  }
}

/// Runs the race workload of policy V against scanner order S in 0.1 s
/// windows until a violation shows (when `stop_at_first`) or `bound_s`
/// elapses. Returns {violations, frees}; checks that the two kinds add up and
/// the verdict names the outcome.
template <class V, class S>
std::pair<uint64_t, uint64_t> RunRace(uint64_t window_ns, double bound_s,
                                      bool stop_at_first) {
  RaceWorkload<V, S> w(TestEnv(2), window_ns);
  WorkloadDriver drv(w, 2);
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
             .count() < bound_s) {
    drv.Window(0.1);
    if (stop_at_first && w.Tally().first > 0) break;
  }
  const PointReport r = drv.Report(bound_s, 0);
  EXPECT_EQ(w.Verify(), "") << V::kName << " vs " << S::kName;
  const auto [violations, frees] = w.Tally();
  EXPECT_EQ(MetricOf(r, "violations"), static_cast<double>(violations));
  EXPECT_EQ(MetricOf(r, "violations_freed_referenced") +
                MetricOf(r, "violations_freed_on_lru"),
            static_cast<double>(violations));
  EXPECT_EQ(MetricOf(r, "frees"), static_cast<double>(frees));
  EXPECT_EQ(r.details["verdict_status"], violations ? "unsafe" : "none_seen");
  EXPECT_EQ(r.details["scanner"], S::kName);
  const std::string verdict = r.details["verdict"];
  EXPECT_NE(verdict.find(std::to_string(frees) + " frees"), std::string::npos)
      << verdict;
  EXPECT_NE(verdict.find(std::to_string(window_ns) + " ns"), std::string::npos)
      << verdict;
  if (violations == 0) {
    EXPECT_DOUBLE_EQ(MetricOf(r, "violation_rate_upper_95"),
                     3.0 / static_cast<double>(frees));
  }
  return {violations, frees};
}

// How long a race that must show a violation runs at most: it stops at the
// first one, so only a failing run takes this long. 5 s fell short on a
// runner busy with the parallel tests only when the two unbound threads
// rarely ran at once (the race needs both in their gaps).
constexpr double kFindS = 60.0;

// With the 2.6.16 order the scanner's TestClearPageLRU .. get_page_testone
// gap only has to overlap the fast path's two tests; with 2.6.18's the
// scanner's whole get_page_unless_zero .. ClearPageLRU must fall between them,
// which the equal widening of both gaps makes rare (about 1 in 10^4 frees
// here): that order is measured by the family, not asserted.
TEST(PageFreeRace, FastpathLosesReferencesAgainstThe2616Scanner) {
  const auto [v, f] = RunRace<FastpathPut, Scanner2616>(2000, kFindS, true);
  EXPECT_GT(f, 0u);
  EXPECT_GT(v, 0u) << "no violation in " << kFindS
                   << " s with a 2000 ns window";
}

TEST(PageFreeRace, LruCheckFirstIsUnsafeAgainstThe2616Scanner) {
  const auto [v, f] =
      RunRace<LruCheckFirst2618, Scanner2616>(2000, kFindS, true);
  EXPECT_GT(f, 0u);
  EXPECT_GT(v, 0u) << "no violation in " << kFindS
                   << " s with a 2000 ns window";
  const auto [vp, fp] =
      RunRace<LruCheckFirstProposal, Scanner2616>(2000, kFindS, true);
  EXPECT_GT(fp, 0u);
  EXPECT_GT(vp, 0u) << "no violation in " << kFindS
                    << " s with a 2000 ns window";
}

TEST(PageFreeRace, RecheckingAtomicIsSafeAgainstBothScanners) {
  const auto [v16, f16] = RunRace<AtomicPut, Scanner2616>(2000, 1.5, false);
  EXPECT_GT(f16, 0u);
  EXPECT_EQ(v16, 0u);
  const auto [v18, f18] = RunRace<AtomicPut, Scanner2618>(2000, 1.5, false);
  EXPECT_GT(f18, 0u);
  EXPECT_EQ(v18, 0u);
}

TEST(PageFreeRace, LruCheckFirstIsSafeAgainstThe2618Scanner) {
  const auto [v, f] = RunRace<LruCheckFirst2618, Scanner2618>(2000, 1.5, false);
  EXPECT_GT(f, 0u);
  EXPECT_EQ(v, 0u);
  const auto [vp, fp] =
      RunRace<LruCheckFirstProposal, Scanner2618>(2000, 1.5, false);
  EXPECT_GT(fp, 0u);
  EXPECT_EQ(vp, 0u);
}

TEST(PageFreeRace, UpperBoundIsRuleOfThreeAtZero) {
  EXPECT_DOUBLE_EQ(ViolationRateUpper95(0, 1000), 0.003);
  // Exact Poisson one-sided 95 % upper limits: k=1 -> 4.744, k=10 -> 17.0.
  EXPECT_NEAR(ViolationRateUpper95(1, 1000) * 1000, 4.744, 0.05);
  EXPECT_NEAR(ViolationRateUpper95(10, 1000) * 1000, 17.0, 0.1);
  EXPECT_EQ(ViolationRateUpper95(0, 0), 1.0);
}

}  // namespace
}  // namespace lockline::page_free
