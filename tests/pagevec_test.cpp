// Tests of bench/pagevec.cpp (issues 7 and 16): the LRU stays intact and pages
// are conserved after multi-threaded runs in both modes, both kernels' per-page
// work and several slot counts, with and without the reclaim scanner; lru_lock
// acquisitions per page are exactly (1 + ceil(slots / R)) / slots (R = 16 for
// 2.6.9, 32 for 5.8) without the scanner; the checker catches a corrupted LRU;
// the 2004 sizing formulas give wli's values (4 * ceil(lg N)); and the row
// keys and suites have the documented shapes.
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

using testing::Machine;
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

/// lru_lock acquisitions per page without the scanner: one add drain and
/// ceil(slots / R) release holds per `slots` pages.
double PerPage(int slots, Kernel k = Kernel::k269) {
  const int r = k == Kernel::k269 ? 16 : 32;
  return (1.0 + (slots + r - 1) / r) / slots;
}

TEST(PagevecFormulas, FourLg) {
  EXPECT_EQ(FourLgSlots(1), 4);
  EXPECT_EQ(FourLgSlots(2), 4);
  EXPECT_EQ(FourLgSlots(4), 8);
  EXPECT_EQ(FourLgSlots(16), 16);
  EXPECT_EQ(FourLgSlots(1024), 40);
  EXPECT_EQ(FourLgSlots(0), 4);
  // wli's lg is ceil(log2 NR_CPUS), not a rounded real logarithm.
  EXPECT_EQ(FourLgSlots(3), 8);
  EXPECT_EQ(FourLgSlots(5), 12);
  EXPECT_EQ(FourLgSlots(8), 12);
  EXPECT_EQ(FourLgSlots(9), 16);
  EXPECT_EQ(FourLgSlots(1000), 40);
  EXPECT_EQ(FourLgSlots(1025), 44);
  EXPECT_GE(PossibleCpus(7), 1);
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
  EXPECT_DOUBLE_EQ(MetricOf(r, "acquisitions_per_page"), PerPage(c.slots));
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
      EXPECT_DOUBLE_EQ(MetricOf(r, "acquisitions_per_page"), PerPage(l.slots))
          << l.name;
      ASSERT_EQ(r.layouts.size(), 1u);
      EXPECT_EQ(r.layouts[0], std::string(l.name) + "/offset:8/line:64");
      EXPECT_NE(FindLayout(r.layouts[0]), nullptr);
    }
  }
}

// Single thread, deferred: acquisitions == pages / slots * (1 + ceil(slots /
// R)) exactly, for both kernels.
TEST(PagevecAcquisitions, DeferredSingleThreadExact) {
  for (const Kernel k : {Kernel::k269, Kernel::k58}) {
    for (const int slots : {1, 4, 15, 16, 31, 32, 33, 64, 128, 255}) {
      Config cfg;
      cfg.slots = slots;
      cfg.kernel = k;
      auto w = MakePagevecWorkload(TestEnv(1), "ticket", "", cfg);
      auto* pw = static_cast<PagevecWorkload<TicketLock, GenericPv>*>(w.get());
      const PointReport r = Drive(*w, 1, 0.03);
      EXPECT_EQ(w->Verify(), "") << slots;
      const auto* t = pw->thread_state(0);
      ASSERT_GT(t->ops, 0u);
      EXPECT_EQ(t->ops % slots, 0u);
      const uint64_t r_batch = k == Kernel::k269 ? 16 : 32;
      EXPECT_EQ(t->stat.acquisitions * slots,
                t->ops * (1 + (slots + r_batch - 1) / r_batch))
          << slots << " " << KernelName(k);
      EXPECT_DOUBLE_EQ(MetricOf(r, "acquisitions_per_page"), PerPage(slots, k));
      EXPECT_EQ(r.details["kernel"]["version"], KernelName(k));
    }
  }
}

// kernel:5.8's per-page work keeps the memcg LRU size and the folded counters
// consistent, in both modes, 4 threads.
TEST(PagevecKernel58, LruSizesAndCountersAddUp) {
  for (const bool rapid : {false, true}) {
    Config cfg;
    cfg.rapid = rapid;
    cfg.slots = 31;
    cfg.kernel = Kernel::k58;
    auto w = MakePagevecWorkload(TestEnv(4), "qspinlock", "", cfg);
    auto* pw = static_cast<PagevecWorkload<QspinLock, GenericPv>*>(w.get());
    const PointReport r = Drive(*w, 4, 0.1);
    EXPECT_EQ(w->Verify(), "") << rapid;
    EXPECT_DOUBLE_EQ(MetricOf(r, "acquisitions_per_page"),
                     PerPage(31, Kernel::k58));
    // Folded totals + the threads' unfolded diffs = pages on the LRU.
    const auto* z = pw->zone(0);
    long node = z->node_lru.load(), memcg = z->memcg_lru.load();
    for (int i = 0; i < 4; ++i) {
      node += pw->thread_state(i)->node_diff;
      memcg += pw->thread_state(i)->memcg_diff;
    }
    // Setup's resident pages were counted in lru_zone_size only.
    const long setup = 4L * kResidentPages;
    EXPECT_EQ(node + setup, static_cast<long>(z->Count(Kernel::k58)));
    EXPECT_EQ(memcg + setup, static_cast<long>(z->Count(Kernel::k58)));
  }
}

// The reclaim scanner: 4 threads and a scanner on one lock, both kernels;
// pages conserved, every release it took over freed, its cycles counted.
TEST(PagevecScanner, IsolatesAndPutsBackWithoutLosingPages) {
  for (const Kernel k : {Kernel::k269, Kernel::k58}) {
    Config cfg;
    cfg.slots = 15;
    cfg.kernel = k;
    cfg.scanner = true;
    auto w = MakePagevecWorkload(TestEnv(4), "ticket", "", cfg);
    const PointReport r = Drive(*w, 4, 0.2);
    EXPECT_EQ(w->Verify(), "") << KernelName(k);
    const auto& sc = r.details["scanner"];
    EXPECT_TRUE(sc["on"].get<bool>());
    EXPECT_GT(sc["cycles"].get<uint64_t>(), 0u) << KernelName(k);
    EXPECT_EQ(sc["pages_freed_by_scanner"], sc["releases_handed_to_scanner"]);
    EXPECT_GE(sc["acquisitions"].get<uint64_t>(),
              2 * sc["cycles"].get<uint64_t>());
    EXPECT_GT(MetricOf(r, "scanner_acquisitions_per_page"), 0.0);
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
  EXPECT_NE(w->Verify().find("LRU size"), std::string::npos) << w->Verify();
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
  const std::vector<Variant> vs = PagevecVariants(Machine(1));
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
  EXPECT_LT(vs.size(), 1000u);
  EXPECT_EQ(quick, 3);  // 4 slots (2.6.9); 15 and 31 slots (5.8, scanner)
  // 9 sizes under 2.6.9 + 2 at offset 8 + 2 layouts + 2 policies + 15 and 31
  // under 5.8 with the scanner.
  EXPECT_EQ(quick + dflt, 17);
  for (const char* want : {"pagevec/mode:deferred/slots:15/offset:0/"
                           "policy:fixed/lock:ticket/work_ns:0/zones:1/"
                           "kernel:5.8/scanner:on/threads:2",
                           "pagevec/mode:deferred/slots:15/offset:0/"
                           "policy:fixed/lock:ticket/work_ns:0/zones:1/"
                           "kernel:2.6.9/scanner:off/threads:2",
                           "pagevec/mode:deferred/slots:16/offset:8/"
                           "policy:fixed/lock:ticket/work_ns:0/zones:1/"
                           "kernel:2.6.9/scanner:off/threads:2",
                           "pagevec/mode:deferred/slots:auto/offset:0/"
                           "policy:4lg/lock:ticket/work_ns:0/zones:1/"
                           "kernel:2.6.9/scanner:off/threads:2",
                           "pagevec/mode:deferred/layout:pagevec_v2_6_9/"
                           "offset:0/lock:ticket/work_ns:0/zones:1/"
                           "kernel:2.6.9/scanner:off/threads:2",
                           "pagevec/mode:rapid/slots:255/offset:0/policy:fixed/"
                           "lock:mcs/work_ns:200/zones:1/"
                           "kernel:2.6.9/scanner:off/threads:2",
                           "pagevec/mode:deferred/layout:pagevec_5x31/"
                           "offset:56/lock:ticket/work_ns:0/zones:1/"
                           "kernel:2.6.9/scanner:off/threads:2",
                           "pagevec/mode:deferred/layout:pagevec_5x31/"
                           "offset:0/lock:ticket/work_ns:0/zones:1/"
                           "kernel:5.8/scanner:off/threads:2",
                           "pagevec/mode:deferred/slots:31/offset:0/"
                           "policy:fixed/lock:ticket/work_ns:200/"
                           "zones:per_numa/kernel:5.8/scanner:on/threads:2"}) {
    EXPECT_TRUE(keys.count(want)) << want;
  }
  // On a two-node machine zones:per_numa is the default and zones:1 stays
  // for the 2020 sizes as the single-lock case.
  int numa_default = 0, one_default = 0;
  for (const Variant& v : PagevecVariants(Machine(2))) {
    if (v.suite == Suite::kFull) continue;
    const std::string key = RowKey("pagevec", v.params, 2);
    if (key.find("zones:per_numa") != std::string::npos) ++numa_default;
    if (key.find("zones:1/") != std::string::npos) {
      ++one_default;
      EXPECT_NE(key.find("kernel:5.8/scanner:on"), std::string::npos) << key;
    }
  }
  // The offset sweep (alignment question) runs with zones:1 only, so on a
  // multi-node machine its two offset:8 points are in the full suite.
  EXPECT_EQ(numa_default, 15);
  EXPECT_EQ(one_default, 2);
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
