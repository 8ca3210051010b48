// Tests of bench/pagevec.cpp (issue 7): the LRU stays intact and pages are
// conserved after multi-threaded runs in both modes and several slot counts,
// lru_lock acquisitions per page are exactly 2 / slots, the checker catches a
// corrupted LRU, the 2004 sizing formulas give the quoted values, and the row
// keys have the documented shapes.
//
// The workloads are driven on the harness's thread team without the runner
// (tests/workload_driver.h, no pinning): the family's source is compiled into
// this test so its types and its registration are visible.
#include "bench/pagevec.cpp"  // NOLINT(build/include): the family under test

#include <gtest/gtest.h>

#include <set>

#include "tests/workload_driver.h"

namespace lockline::pagevec_bench {
namespace {

using testing::MetricOf;
using testing::TestEnv;

/// One point of `w` on the harness's team (tests/workload_driver.h): Prepare,
/// SetupThread, one window of about `seconds`, TeardownThread, then Report.
/// ctx.numa = index % numa_nodes. Returns the report.
PointReport Drive(Workload& w, int threads, double seconds,
                  int numa_nodes = 1) {
  testing::WorkloadDriver drv(w, threads, numa_nodes);
  const uint64_t ops = drv.Window(seconds);
  drv.Teardown();
  return drv.Report(seconds, ops);
}

TEST(PagevecFormulas, FourLg) {
  EXPECT_EQ(FourLgSlots(1), 4);
  EXPECT_EQ(FourLgSlots(2), 4);
  EXPECT_EQ(FourLgSlots(4), 8);
  EXPECT_EQ(FourLgSlots(16), 16);
  EXPECT_EQ(FourLgSlots(1024), 40);
  EXPECT_EQ(FourLgSlots(0), 4);
}

TEST(PagevecFormulas, SqrtLg) {
  EXPECT_EQ(SqrtLgSlots(4), 6);  // 2^(2.5*sqrt(2)-1) = 5.66, rounded to nearest
  EXPECT_EQ(SqrtLgSlots(16), 16);
  EXPECT_EQ(SqrtLgSlots(1024), 120);  // 119.6
  EXPECT_EQ(SqrtLgSlots(1), 1);       // 2^-1 = 0.5 rounds away from zero
  EXPECT_EQ(SqrtLgSlots(2), 3);       // 2.83
}

TEST(PagevecFormulas, ResolveAndBadInput) {
  EXPECT_EQ(ResolveSlots("fixed", 31, 64), 31);
  EXPECT_EQ(ResolveSlots("4lg", 0, 16), 16);
  EXPECT_EQ(ResolveSlots("sqrtlg", 0, 4), 6);
  EXPECT_THROW(ResolveSlots("fixed", 0, 1), std::invalid_argument);
  EXPECT_THROW(ResolveSlots("fixed", 256, 1), std::invalid_argument);
  try {
    ResolveSlots("bogus", 15, 1);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bogus"), std::string::npos);
  }
  EXPECT_THROW(MakePagevecWorkload(TestEnv(1), "no_such_lock", "", Config{}),
               std::invalid_argument);
  EXPECT_THROW(
      MakePagevecWorkload(TestEnv(1), "ticket", "no_such_layout", Config{}),
      std::invalid_argument);
}

struct IntegrityCase {
  bool rapid;
  int slots;
};

class PagevecIntegrity : public ::testing::TestWithParam<IntegrityCase> {};

// 4 threads (oversubscribed on 2 PUs) for ~200 ms: LRU intact, pages conserved,
// exact acquisitions (Verify), and the reported acquisitions_per_page is 2 /
// slots.
TEST_P(PagevecIntegrity, LruIntactAndExactAcquisitions) {
  const IntegrityCase c = GetParam();
  Config cfg;
  cfg.rapid = c.rapid;
  cfg.slots = c.slots;
  auto w = MakePagevecWorkload(TestEnv(4), "ticket", "", cfg);
  const PointReport r = Drive(*w, 4, 0.2);
  EXPECT_EQ(w->Verify(), "");
  EXPECT_GT(MetricOf(r, "pages_per_s"), 0);
  EXPECT_DOUBLE_EQ(MetricOf(r, "acquisitions_per_page"), 2.0 / c.slots);
  EXPECT_EQ(MetricOf(r, "pagevec_bytes"),
            static_cast<double>(Pagevec5xBytes(c.slots)));
  EXPECT_EQ(MetricOf(r, "slots_resolved"), c.slots);
}

INSTANTIATE_TEST_SUITE_P(
    ModesAndSlots, PagevecIntegrity,
    ::testing::Values(IntegrityCase{false, 1}, IntegrityCase{false, 15},
                      IntegrityCase{false, 31}, IntegrityCase{false, 128},
                      IntegrityCase{true, 1}, IntegrityCase{true, 15},
                      IntegrityCase{true, 31}, IntegrityCase{true, 128}),
    [](const auto& info) {
      return std::string(info.param.rapid ? "rapid" : "deferred") + "_" +
             std::to_string(info.param.slots);
    });

// The named layouts at an offset, with other locks, and two zones (threads
// split by ctx.numa).
TEST(PagevecIntegrity, NamedLayoutsOffsetsLocksZones) {
  for (const NamedLayout& l : kNamedLayouts) {
    for (const char* lock : {"qspinlock", "mcs"}) {
      Config cfg;
      cfg.slots = l.slots;
      cfg.offset = 8;
      cfg.zones = 2;
      auto w = MakePagevecWorkload(TestEnv(3), lock, l.name, cfg);
      const PointReport r = Drive(*w, 3, 0.05, 2);
      EXPECT_EQ(w->Verify(), "") << l.name << " " << lock;
      EXPECT_DOUBLE_EQ(MetricOf(r, "acquisitions_per_page"), 2.0 / l.slots)
          << l.name;
      ASSERT_EQ(r.layouts.size(), 1u);
      EXPECT_EQ(r.layouts[0], std::string(l.name) + "/offset:8/line:64");
      EXPECT_NE(FindLayout(r.layouts[0]), nullptr);
    }
  }
}

// Single thread, deferred: acquisitions == 2 * pages / slots exactly
// (uncontended, so every acquisition is the batch's one).
TEST(PagevecAcquisitions, DeferredSingleThreadExact) {
  for (const int slots : {1, 4, 15, 16, 31, 64, 128, 255}) {
    Config cfg;
    cfg.slots = slots;
    auto w = MakePagevecWorkload(TestEnv(1), "ticket", "", cfg);
    auto* pw = static_cast<PagevecWorkload<TicketLock, GenericPv>*>(w.get());
    const PointReport r = Drive(*w, 1, 0.03);
    EXPECT_EQ(w->Verify(), "") << slots;
    const auto* t = pw->thread_state(0);
    ASSERT_GT(t->ops, 0u);
    EXPECT_EQ(t->ops % slots, 0u);
    EXPECT_EQ(t->stat.acquisitions * slots, 2 * t->ops) << slots;
    EXPECT_DOUBLE_EQ(MetricOf(r, "acquisitions_per_page"), 2.0 / slots);
  }
}

// The checker is not vacuous: a cleared PG_lru, a lost count and an extra link
// are reported.
TEST(PagevecVerify, DetectsCorruption) {
  Config cfg;
  cfg.slots = 15;
  auto w = MakePagevecWorkload(TestEnv(1), "ticket", "", cfg);
  auto* pw = static_cast<PagevecWorkload<TicketLock, GenericPv>*>(w.get());
  Drive(*w, 1, 0.02);
  ASSERT_EQ(w->Verify(), "");
  Page* p = pw->thread_state(0)->on_lru.at(0);
  ClearPageLru(*p);
  EXPECT_NE(w->Verify().find("PG_lru"), std::string::npos) << w->Verify();
  SetPageLru(*p);
  ASSERT_EQ(w->Verify(), "");
  ++pw->zone(0)->nr_lru;
  EXPECT_NE(w->Verify().find("nr_lru"), std::string::npos) << w->Verify();
  --pw->zone(0)->nr_lru;
  ListDel(&p->lru);  // unlinked but still recorded as on the LRU
  --pw->zone(0)->nr_lru;
  EXPECT_NE(w->Verify().find("not linked"), std::string::npos) << w->Verify();
}

TEST(PagevecBytes, StackCostAndLines) {
  Config cfg;
  for (const auto& [slots, offset, bytes, lines] :
       std::vector<std::tuple<int, int, double, double>>{{15, 0, 128, 2},
                                                         {15, 8, 128, 3},
                                                         {31, 0, 256, 4},
                                                         {16, 0, 136, 3}}) {
    cfg.slots = slots;
    cfg.offset = offset;
    auto w = MakePagevecWorkload(TestEnv(1), "ticket", "", cfg);
    const PointReport r = Drive(*w, 1, 0.01);
    EXPECT_EQ(MetricOf(r, "pagevec_bytes"), bytes);
    EXPECT_EQ(MetricOf(r, "lines_spanned"), lines);
  }
  cfg = Config{};
  cfg.slots = 16;
  auto w = MakePagevecWorkload(TestEnv(1), "ticket", PagevecV269::kName, cfg);
  const PointReport r = Drive(*w, 1, 0.01);
  EXPECT_EQ(MetricOf(r, "pagevec_bytes"), 136);
  EXPECT_EQ(MetricOf(r, "lines_spanned"), 3);
}

TEST(PagevecKeys, ShapesSuitesAndUniqueness) {
  const std::vector<Variant> vs = PagevecVariants();
  std::set<std::string> keys;
  int quick = 0, dflt = 0;
  for (const Variant& v : vs) {
    const std::string key = RowKey("pagevec", v.params, 2);
    EXPECT_TRUE(keys.insert(key).second) << "duplicate " << key;
    for (const auto& [k, val] : v.params) {
      EXPECT_EQ(k.find_first_of("/:"), std::string::npos) << key;
      EXPECT_EQ(val.find_first_of("/:"), std::string::npos) << key;
    }
    quick += v.suite == Suite::kQuick;
    dflt += v.suite == Suite::kDefault;
  }
  EXPECT_EQ(quick, 3);
  EXPECT_EQ(quick + dflt,
            17);  // 9 sizes + 2 at offset 8 + 4 layouts + 2 policies
  for (const char* want : {"pagevec/mode:deferred/slots:15/offset:0/"
                           "policy:fixed/lock:ticket/work_ns:0/zones:1/"
                           "threads:2",
                           "pagevec/mode:deferred/slots:16/offset:8/"
                           "policy:fixed/lock:ticket/work_ns:0/zones:1/"
                           "threads:2",
                           "pagevec/mode:deferred/slots:auto/offset:0/"
                           "policy:4lg/lock:ticket/work_ns:0/zones:1/"
                           "threads:2",
                           "pagevec/mode:deferred/layout:pagevec_v2_6_9/"
                           "offset:0/lock:ticket/work_ns:0/zones:1/"
                           "threads:2",
                           "pagevec/mode:rapid/slots:255/offset:0/policy:fixed/"
                           "lock:mcs/work_ns:200/zones:1/"
                           "threads:2",
                           "pagevec/mode:deferred/layout:pagevec_5x31/"
                           "offset:56/lock:ticket/work_ns:0/zones:1/"
                           "threads:2",
                           "pagevec/mode:deferred/slots:31/offset:0/"
                           "policy:fixed/lock:ticket/work_ns:200/"
                           "zones:per_numa/threads:2"}) {
    EXPECT_TRUE(keys.count(want)) << want;
  }
  // Policy rows resolve their slot count from the point's threads.
  for (const Variant& v : vs) {
    if (v.params[1].second != "auto" || v.suite == Suite::kFull) continue;
    auto w = v.make(TestEnv(4));
    const PointReport r = Drive(*w, 4, 0.01);
    const bool four_lg = v.params[3].second == "4lg";
    EXPECT_EQ(MetricOf(r, "slots_resolved"), four_lg ? 8 : 6);
    EXPECT_EQ(w->Verify(), "");
  }
}

}  // namespace
}  // namespace lockline::pagevec_bench
