// Tests of bench/zone_lock.cpp (issues 6 and 16): the family's table, row keys
// and suites (pcp_batch:31 the default, zones:per_numa the default on
// multi-node machines), page conservation, list integrity and the buddy
// invariants after oversubscribed multi-threaded runs for every zone layout
// and both configs, exact lock bookkeeping with one thread, the lock-free
// fair-zone accounting, and that Verify catches a broken zone.
//
// The workloads are driven on the harness's thread team without the runner
// (tests/workload_driver.h, no pinning): the family's source is compiled into
// this test so its types and its registration are visible.
#include "bench/zone_lock.cpp"  // NOLINT(build/include): the family under test

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <set>

#include "tests/workload_driver.h"

namespace lockline::zone_lock {
namespace {

using testing::Machine;
using testing::MetricOf;
using testing::TestEnv;

const Family& ZoneLockFamily() {
  for (const Family& f : Families()) {
    if (f.name == "zone_lock") return f;
  }
  ADD_FAILURE() << "zone_lock is not registered";
  static const Family kNone;
  return kNone;
}

/// The family's variants on a machine of `nodes` NUMA nodes.
std::vector<Variant> Variants(int nodes = 1) {
  return ZoneLockFamily().planned_variants(Machine(nodes));
}

/// The variant with these parameter values, or nullptr.
const Variant* FindVariant(const std::vector<Variant>& all,
                           const std::string& layout, const std::string& lock,
                           int batch, int line,
                           const std::string& config = "cma",
                           const std::string& zones = "1",
                           const std::string& work = "cal", bool stats = true) {
  Params want = {{"layout", layout},
                 {"lock", lock},
                 {"pcp_batch", std::to_string(batch)},
                 {"line", std::to_string(line)},
                 {"config", config},
                 {"zones", zones},
                 {"work_ns", work}};
  if (!stats) want.emplace_back("stats", "off");
  for (const Variant& v : all) {
    if (v.params == want) return &v;
  }
  return nullptr;
}

/// Runs one point the way the runner does, on the harness's thread team
/// (tests/workload_driver.h; 4 threads on 2 vCPUs is oversubscribed: FIFO locks
/// then hand off only when a preempted waiter runs, which is slow but correct).
/// Setup, windows of `seconds` until more than `min_ops` operations ran (one
/// window for 0; WorkloadDriver::WindowsUntil), then Verify with the pages
/// still spread over pcp lists and threads, then `before_teardown`,
/// TeardownThread, Report and Verify again with every page back in the zone.
struct PointResult {
  uint64_t ops = 0;
  std::string verify_running;
  std::string verify_after;
  PointReport report;
};
PointResult RunPoint(Workload& w, int threads, double seconds,
                     const std::function<void()>& before_teardown = {},
                     uint64_t min_ops = 0) {
  PointResult r;
  testing::WorkloadDriver drv(w, threads);
  r.ops = drv.WindowsUntil(seconds,
                           [&] { return min_ops == 0 || drv.ops() > min_ops; });
  r.verify_running = w.Verify();
  if (before_teardown) before_teardown();
  drv.Teardown();
  r.report = drv.Report(drv.seconds(), r.ops);
  r.verify_after = w.Verify();
  return r;
}

/// RunPoint of variant `v`'s workload on `threads` threads, expecting ops
/// and a zone that verifies both while running and after the teardown.
PointResult RunVerified(const Variant& v, int threads, double seconds) {
  auto w = v.make(TestEnv(threads));
  PointResult r = RunPoint(*w, threads, seconds);
  EXPECT_GT(r.ops, 0u);
  EXPECT_EQ(r.verify_running, "");
  EXPECT_EQ(r.verify_after, "");
  return r;
}

TEST(ZoneLock, TableAndRowKeys) {
  const std::vector<Variant> all = Variants(1);
  // Every lock x 4 placements x 2 lines x 2 configs x 3 batches x 2 zones x
  // 2 work_ns, and the stats:off twins of the verdict sides outside full
  // (issue 40 item 3): ticket before/after at work_ns cal and 0, qspinlock and
  // pthread_mutex before/after at cal.
  EXPECT_EQ(all.size(), LockNames().size() * 4 * 2 * 2 * 3 * 2 * 2 + 8);
  std::set<std::string> keys;
  int quick = 0, deflt = 0;
  for (const Variant& v : all) {
    EXPECT_TRUE(keys.insert(RowKey("zone_lock", v.params, 2)).second);
    EXPECT_FALSE(v.description.empty());
    if (v.suite == Suite::kQuick) ++quick;
    if (v.suite <= Suite::kDefault) ++deflt;
    // On one node zones:per_numa is the same zone as zones:1: full only.
    if (v.params[5].second == "per_numa") {
      EXPECT_EQ(v.suite, Suite::kFull);
    }
  }
  // ticket x {before, after}, pcp 31, work_ns:cal, and their stats:off twins.
  EXPECT_EQ(quick, 4);
  // + ticket/qspinlock x the other placements (2 + 4), pthread_mutex pair
  // (2), pcp_batch:0 pair (2), no_cma pair (2), all at work_ns:cal; the
  // question pair at work_ns:0 (2) and the twins of the ticket pair at 0 and
  // the qspinlock and pthread_mutex pairs at cal (6).
  EXPECT_EQ(deflt, 24);
  const Variant* v =
      FindVariant(all, "lock_before_free_area", "ticket", 31, 64);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(RowKey("zone_lock", v->params, 8),
            "zone_lock/layout:lock_before_free_area/lock:ticket/pcp_batch:31/"
            "line:64/config:cma/zones:1/work_ns:cal/threads:8");
  EXPECT_EQ(v->suite, Suite::kQuick);
  EXPECT_NE(v->description.find("calibrated"), std::string::npos);
  // The question pair at work_ns:0 (saturated) and its uninstrumented twins
  // are in the default suite; other points at work_ns:0 only in full.
  for (const char* layout : {"lock_before_free_area", "lock_after_free_area"}) {
    const Variant* sat =
        FindVariant(all, layout, "ticket", 31, 64, "cma", "1", "0");
    ASSERT_NE(sat, nullptr);
    EXPECT_EQ(sat->suite, Suite::kDefault);
    EXPECT_NE(sat->description.find("saturated"), std::string::npos);
    const Variant* twin =
        FindVariant(all, layout, "ticket", 31, 64, "cma", "1", "0", false);
    ASSERT_NE(twin, nullptr);
    EXPECT_EQ(twin->suite, Suite::kDefault);
    EXPECT_EQ(RowKey("zone_lock", twin->params, 2),
              std::string("zone_lock/layout:") + layout +
                  "/lock:ticket/pcp_batch:31/line:64/config:cma/zones:1/"
                  "work_ns:0/stats:off/threads:2");
    EXPECT_NE(twin->description.find("uninstrumented"), std::string::npos);
    EXPECT_TRUE(twin->largest_thread_count_only);
    // The twin at work_ns:cal is in the quick suite with its instrumented row.
    const Variant* cal_twin =
        FindVariant(all, layout, "ticket", 31, 64, "cma", "1", "cal", false);
    ASSERT_NE(cal_twin, nullptr);
    EXPECT_EQ(cal_twin->suite, Suite::kQuick);
    // No twin for a point that is not a verdict side (pcp_batch:0).
    EXPECT_EQ(
        FindVariant(all, layout, "ticket", 0, 64, "cma", "1", "cal", false),
        nullptr);
  }
  const Variant* own0 =
      FindVariant(all, "lock_own_line", "ticket", 31, 64, "cma", "1", "0");
  ASSERT_NE(own0, nullptr);
  EXPECT_EQ(own0->suite, Suite::kFull);
  const Variant* zero =
      FindVariant(all, "lock_before_free_area", "ticket", 0, 64);
  ASSERT_NE(zero, nullptr);
  EXPECT_EQ(zero->suite, Suite::kDefault);
  EXPECT_NE(zero->description.find("counter-example"), std::string::npos);
  const Variant* no_cma =
      FindVariant(all, "lock_after_free_area", "ticket", 31, 64, "no_cma");
  ASSERT_NE(no_cma, nullptr);
  EXPECT_EQ(no_cma->suite, Suite::kDefault);
  const Variant* full = FindVariant(all, "lock_own_line", "mcs", 63, 128);
  ASSERT_NE(full, nullptr);
  EXPECT_EQ(full->suite, Suite::kFull);
}

TEST(ZoneLock, PerNumaIsTheDefaultOnMultiNodeMachines) {
  const std::vector<Variant> all = Variants(2);
  const Variant* numa = FindVariant(all, "lock_after_free_area", "ticket", 31,
                                    64, "cma", "per_numa");
  ASSERT_NE(numa, nullptr);
  EXPECT_EQ(numa->suite, Suite::kQuick);
  // zones:1 stays, labelled, as the worst case.
  const Variant* one =
      FindVariant(all, "lock_after_free_area", "ticket", 31, 64, "cma", "1");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->suite, Suite::kDefault);
  EXPECT_NE(one->description.find("worst case"), std::string::npos);
  const Variant* own =
      FindVariant(all, "lock_own_line", "qspinlock", 31, 64, "cma", "1");
  ASSERT_NE(own, nullptr);
  EXPECT_EQ(own->suite, Suite::kFull);
  // The twins are on the main zones; zones:1's worst case only at cal.
  const Variant* twin = FindVariant(all, "lock_before_free_area", "ticket", 31,
                                    64, "cma", "per_numa", "0", false);
  ASSERT_NE(twin, nullptr);
  EXPECT_EQ(twin->suite, Suite::kDefault);
  EXPECT_EQ(FindVariant(all, "lock_before_free_area", "ticket", 31, 64, "cma",
                        "1", "0", false),
            nullptr);
  const Variant* one0 = FindVariant(all, "lock_after_free_area", "ticket", 31,
                                    64, "cma", "1", "0");
  ASSERT_NE(one0, nullptr);
  EXPECT_EQ(one0->suite, Suite::kFull);
}

TEST(ZoneLock, KernelBatchSizeOf40) {
  // zone_batchsize(): 31 from ~352 MiB (90112 pages) up.
  EXPECT_EQ(KernelBatchSize(90112), 31);
  EXPECT_EQ(KernelBatchSize(90111), 15);
  EXPECT_EQ(KernelBatchSize(1ul << 20), 31);
  EXPECT_EQ(KernelBatchSize(1024 * 4), 0);  // batch 1: 2^0 - 1, as in 4.0
}

TEST(ZoneLock, ReportNamesAKnownLayoutAndItsLineSharing) {
  const std::vector<Variant> all = Variants(1);
  for (const char* layout : {"lock_before_free_area", "lock_after_free_area"}) {
    auto w = FindVariant(all, layout, "ticket", 31, 64)->make(TestEnv(1));
    const PointResult r = RunPoint(*w, 1, 0.02);
    ASSERT_EQ(r.report.layouts.size(), 1u);
    EXPECT_NE(FindLayout(r.report.layouts[0]), nullptr) << r.report.layouts[0];
    EXPECT_EQ(r.report.layouts[0],
              std::string("zone_v4_0/") + layout + "/lock:ticket/line:64");
    const bool before = std::string(layout) == "lock_before_free_area";
    // 3484b2de9499 put the movable list head in the lock's line; the fix
    // moved it off.
    EXPECT_EQ(r.report.details["movable_list_shares_lock_line"], before);
    EXPECT_FALSE(r.report.details.contains("layout_error"));
    EXPECT_GT(MetricOf(r.report, "pages_per_s"), 0);
  }
}

/// Pages in the zone's free blocks (sum of nr_free << order).
template <class Z>
unsigned long FreePagesInZone(const Z& z) {
  unsigned long n = 0;
  for (int o = 0; o < kMaxOrder; ++o) n += z.free_area[o].nr_free << o;
  return n;
}

// Pages conserved, buddy invariants, lists intact, vm_stat consistent, for
// every placement with and without pcp lists and both configs, 4 threads on 2
// vCPUs.
TEST(ZoneLock, PagesConservedAfterMultiThreadedRuns) {
  const std::vector<Variant> all = Variants(1);
  for (ZoneLockPlacement p : kAllZoneLockPlacements) {
    for (int batch : {0, 31}) {
      for (const char* lock : {"ticket", "qspinlock"}) {
        for (const char* config : {"cma", "no_cma"}) {
          if (std::string(config) == "no_cma" && batch == 0) continue;
          SCOPED_TRACE(std::string(PlacementName(p)) + " " + lock + " pcp " +
                       std::to_string(batch) + " " + config);
          const Variant* v =
              FindVariant(all, PlacementName(p), lock, batch, 64, config);
          ASSERT_NE(v, nullptr);
          const PointResult r = RunVerified(*v, 4, 0.1);
          const auto& ev = r.report.details["events"];
          EXPECT_EQ(ev["alloc_failures"], 0);
          // The harness counts steps / 2 (an alloc and a free per op).
          EXPECT_EQ(ev["steps"].get<uint64_t>(), 2 * r.ops);
          EXPECT_EQ(ev["steps"].get<uint64_t>(),
                    ev["allocs"].get<uint64_t>() + ev["ops"].get<uint64_t>());
          // After teardown every page is free in the zone.
          EXPECT_EQ(r.report.details["zone_state"][0]["nr_free_at_end"],
                    r.report.details["pool_pages"]);
        }
      }
    }
  }
}

// Two zones (zones:per_numa on a two-node machine, threads split by ctx.numa):
// each zone conserves its own pages.
TEST(ZoneLock, PerNumaZonesKeepTheirPages) {
  ZoneLockWorkload<TicketLock, ZoneLockPlacement::kLockAfterFreeArea, 64> w(
      TestEnv(4), 31, /*zones=*/2);
  testing::WorkloadDriver drv(w, 4, /*numa_nodes=*/2);
  const uint64_t ops = drv.Window(0.05);
  EXPECT_EQ(w.Verify(), "");
  drv.Teardown();
  const PointReport rep = drv.Report(0.05, ops);
  EXPECT_EQ(w.Verify(), "");
  EXPECT_EQ(rep.details["zones"], 2);
  for (int z = 0; z < 2; ++z) {
    EXPECT_EQ(rep.details["zone_state"][z]["threads"], 2);
    EXPECT_EQ(FreePagesInZone(w.zone(z)), w.pool_pages(z));
  }
}

// One thread, pcp_batch:0: exactly one acquisition per alloc and one per free.
TEST(ZoneLock, SingleThreadBookkeepingWithoutPcp) {
  ZoneLockWorkload<TicketLock, ZoneLockPlacement::kLockAfterFreeArea, 64> w(
      TestEnv(1), 0, 1, {}, /*burst=*/64);
  const PointResult r = RunPoint(w, 1, 0.02);
  ASSERT_GT(r.ops, 0u);
  const auto& ls = r.report.details["lock_stat"];
  const uint64_t allocs = r.report.details["events"]["allocs"];
  const uint64_t frees = r.report.details["events"]["ops"];
  // One acquisition per allocation and per free: two per op.
  EXPECT_EQ(ls["acquisitions"].get<uint64_t>(), allocs + frees);
  EXPECT_EQ(ls["acquisitions"].get<uint64_t>(), 2 * r.ops);
  EXPECT_EQ(ls["contended"].get<uint64_t>(), 0u);
  EXPECT_LE(allocs - frees, 64u);  // at most one burst still held
  EXPECT_EQ(r.verify_after, "");
  EXPECT_EQ(FreePagesInZone(w.zone()), w.pool_pages());
  EXPECT_EQ(w.zone().vm_stat[kNrFreePages].load(),
            static_cast<long>(w.pool_pages()));
  // Freed bursts merge back: the pool ends as order-10 blocks.
  EXPECT_EQ(w.zone().free_area[kMaxOrder - 1].nr_free,
            w.pool_pages() / buddy::kMaxOrderNrPages);
}

// One thread, pcp_batch:N: one acquisition per refill or drain, each moving N
// pages; per alloc+free pair about 1.4 / N with bursts of 16 batches.
TEST(ZoneLock, SingleThreadBookkeepingWithPcp) {
  for (int batch : {31, 63}) {
    SCOPED_TRACE(batch);
    ZoneLockWorkload<QspinLock, ZoneLockPlacement::kLockBeforeFreeArea, 64> w(
        TestEnv(1), batch, 1, {}, /*burst=*/16 * batch);
    unsigned long out_of_zone = 0;  // pages on the pcp list or held
    const PointResult r = RunPoint(
        w, 1, 0.05,
        [&] { out_of_zone = w.pool_pages() - FreePagesInZone(w.zone()); },
        20u * 16 * batch);
    ASSERT_GT(r.ops, 20u * 16 * batch);  // many burst cycles
    const auto& ev = r.report.details["events"];
    const uint64_t refills = ev["refills"], drains = ev["drains"];
    const uint64_t acq = r.report.details["lock_stat"]["acquisitions"];
    EXPECT_EQ(acq, refills + drains);
    const double per_op = static_cast<double>(acq) / r.ops;
    EXPECT_GT(per_op, 1.0 / batch);
    EXPECT_LT(per_op, 2.0 / batch);
    // Pages leave and enter the zone only in whole batches: what the windows
    // took out and did not give back is exactly what the thread still has.
    EXPECT_EQ(ev["alloc_failures"], 0);
    EXPECT_EQ((refills - drains) * batch, out_of_zone);
    EXPECT_EQ(r.verify_running, "");
    EXPECT_EQ(r.verify_after, "");
    EXPECT_GT(MetricOf(r.report, "hold_ns_per_refill"), 0.0);
    EXPECT_GT(MetricOf(r.report, "hold_ns_per_drain"), 0.0);
  }
}

// The lock-free fair-zone policy: every high - low allocations one thread
// sets ZONE_FAIR_DEPLETED and the next allocation resets the batch.
TEST(ZoneLock, FairZoneBatchIsSetAndReset) {
  ZoneLockWorkload<TicketLock, ZoneLockPlacement::kLockAfterFreeArea, 64> w(
      TestEnv(1), 31);
  const PointResult r = RunPoint(w, 1, 0.05);
  const auto& ev = r.report.details["events"];
  const uint64_t allocs = ev["allocs"];
  const auto batch =
      static_cast<uint64_t>(w.zone().watermark[2] - w.zone().watermark[1]);
  ASSERT_GT(batch, 0u);
  if (allocs > 4 * (batch + 125)) {
    EXPECT_GT(ev["fair_depletions"].get<uint64_t>(), 0u);
    EXPECT_GT(ev["fair_resets"].get<uint64_t>(), 0u);
  }
  EXPECT_LE(ev["fair_resets"].get<uint64_t>(),
            ev["fair_depletions"].get<uint64_t>());
}

TEST(ZoneLock, VerifyCatchesBrokenZones) {
  using W = ZoneLockWorkload<TicketLock, ZoneLockPlacement::kLockOwnLine, 64>;
  constexpr int kTop = kMaxOrder - 1;
  {
    W w(TestEnv(1), 31);
    ++w.zone().free_area[kTop].nr_free;
    EXPECT_NE(w.Verify().find("nr_free"), std::string::npos) << w.Verify();
  }
  {
    W w(TestEnv(1), 31);
    ListHead& head = w.zone().free_area[kTop].free_list[kMigrateMovable];
    ListDel(head.next);  // a block vanishes from the list
    --w.zone().free_area[kTop].nr_free;
    w.zone().vm_stat[kNrFreePages].fetch_sub(1 << kTop);
    EXPECT_NE(w.Verify().find("lost"), std::string::npos) << w.Verify();
  }
  {
    W w(TestEnv(1), 31);
    w.zone().vm_stat[kNrFreePages].fetch_add(1);
    EXPECT_NE(w.Verify().find("NR_FREE_PAGES"), std::string::npos);
  }
  {
    W w(TestEnv(1), 31);
    ListHead& head = w.zone().free_area[kTop].free_list[kMigrateMovable];
    head.next->next->prev = &head;  // a torn link
    EXPECT_NE(w.Verify().find("prev"), std::string::npos) << w.Verify();
  }
  {
    W w(TestEnv(1), 31);
    // A page inside a free block marked as a block head.
    buddy::SetPageOrder(w.pages()[5], 0);
    EXPECT_NE(w.Verify().find("PageBuddy"), std::string::npos) << w.Verify();
  }
}

// work_ns:cal is measured once per process (the quick pool here) and
// recorded in the row's details.work with pagevec's field names.
TEST(ZoneLock, CalibratedWorkIsRecorded) {
  const WorkCalibration c = CalibratedWork(/*quick=*/true);
  EXPECT_GT(c.fault_ns_per_page, 0);
  EXPECT_GT(c.model_ns_per_page, 0);
  EXPECT_GT(c.zero_ns_per_page, 0);
  EXPECT_GT(c.unmap_fault_ratio, 0);  // the work's split (issue 50 item 4)
  EXPECT_EQ(c.work_ns, c.fault_ns_per_page > c.model_ns_per_page
                           ? static_cast<uint64_t>(c.fault_ns_per_page -
                                                   c.model_ns_per_page)
                           : 0u);
  EXPECT_EQ(CalibratedWork(true).work_ns, c.work_ns);  // once per process
  const std::vector<Variant> all = Variants(1);
  auto w = FindVariant(all, "lock_after_free_area", "ticket", 31, 64)
               ->make(TestEnv(1));
  const PointResult r = RunPoint(*w, 1, 0.02);
  const auto& work = r.report.details["work"];
  EXPECT_EQ(work["work_ns"], c.work_ns);
  EXPECT_EQ(work["calibrated"], true);
  EXPECT_EQ(work["fault_ns_per_page"], c.fault_ns_per_page);
  EXPECT_EQ(work["model_ns_per_page"], c.model_ns_per_page);
  EXPECT_EQ(work["zero_ns_per_page"], c.zero_ns_per_page);
  EXPECT_TRUE(work.contains("method"));
  EXPECT_EQ(work["split"]["unmap_fault_ratio"], c.unmap_fault_ratio);
  EXPECT_EQ(MetricOf(r.report, "work_ns"), static_cast<double>(c.work_ns));
  EXPECT_EQ(r.report.details["lock_stat_on"], true);
  EXPECT_EQ(r.verify_after, "");
  auto sat = FindVariant(all, "lock_after_free_area", "ticket", 31, 64, "cma",
                         "1", "0")
                 ->make(TestEnv(1));
  const PointResult r0 = RunPoint(*sat, 1, 0.02);
  EXPECT_EQ(r0.report.details["work"]["work_ns"], 0);
  EXPECT_EQ(r0.report.details["work"]["calibrated"], false);
  EXPECT_FALSE(r0.report.details["work"].contains("fault_ns_per_page"));
}

// The work runs outside zone->lock and does not change the allocator's
// path: for the same steps, one thread takes exactly the acquisitions it
// takes without work (with and without pcp lists), every page of its ring is
// zeroed, and the zone verifies.
TEST(ZoneLock, WorkRunsOutsideTheLock) {
  using W =
      ZoneLockWorkload<TicketLock, ZoneLockPlacement::kLockAfterFreeArea, 64>;
  for (int batch : {0, 31}) {
    SCOPED_TRACE(batch);
    const int burst = 16 * 31;
    const uint64_t steps = 10 * 2 * burst + 77;  // mid-burst at the end
    uint64_t acquisitions[2] = {0, 0};
    for (int with_work = 0; with_work < 2; ++with_work) {
      Options options;
      options.work_ns = with_work ? 300 : 0;
      W w(TestEnv(1), batch, 1, options, burst);
      ThreadCtx ctx;
      w.SetupThread(ctx);
      w.RunSteps(ctx, steps);
      EXPECT_EQ(w.Verify(), "");
      const PerThread& me = w.thread(0);
      acquisitions[with_work] = me.stat.acquisitions;
      EXPECT_EQ(me.c.allocs + me.c.ops, steps);
      if (with_work) {
        ASSERT_NE(me.work.pages, nullptr);
        // One ring page zeroed per allocation, in ring order (the ring is
        // larger than the pages this run allocates): the allocated count's
        // pages are all zero, the next one untouched.
        const std::size_t touched =
            std::min<std::size_t>(me.c.allocs, me.work.count);
        ASSERT_GT(touched, 0u);
        const unsigned char* ring = me.work.pages;
        EXPECT_TRUE(std::all_of(ring, ring + touched * kPageBytes,
                                [](unsigned char b) { return b == 0; }));
        if (me.work.fresh && touched < me.work.count) {
          EXPECT_EQ(ring[touched * kPageBytes], 1);
        }
      } else {
        EXPECT_EQ(me.work.pages, nullptr);  // no ring without work
      }
      w.TeardownThread(ctx);
      EXPECT_EQ(w.Verify(), "");
      EXPECT_EQ(FreePagesInZone(w.zone()), w.pool_pages());
    }
    EXPECT_GT(acquisitions[0], 0u);
    EXPECT_EQ(acquisitions[1], acquisitions[0]);
  }
}

// The stats:off twin takes zone->lock plainly: the same acquisitions are
// counted (privately), lock_stat records no waits, and the zone verifies
// after a contended run.
TEST(ZoneLock, StatsOffTwinRuns) {
  const std::vector<Variant> all = Variants(1);
  const Variant* twin = FindVariant(all, "lock_before_free_area", "ticket", 31,
                                    64, "cma", "1", "0", false);
  ASSERT_NE(twin, nullptr);
  const PointResult r = RunVerified(*twin, 2, 0.05);
  EXPECT_EQ(r.report.details["lock_stat_on"], false);
  const auto& ev = r.report.details["events"];
  EXPECT_EQ(r.report.details["lock_stat"]["acquisitions"].get<uint64_t>(),
            ev["refills"].get<uint64_t>() + ev["drains"].get<uint64_t>());
  EXPECT_EQ(r.report.details["lock_stat"]["contended"].get<uint64_t>(), 0u);
}

// page_fault1's zone->lock holds per page (issue 40 item 5), by phase (issue
// 50 item 4): each task maps 128 MiB (32768 pages), writes every page and
// unmaps it. 4.0's arithmetic (page_alloc.c@v4.0): an allocation from an
// empty pcp list refills `batch` pages (rmqueue_bulk, :1274-1305); a free
// that brings pcp->count to high = 6 x batch drains `batch`
// (free_hot_cold_page, :1485-1530). {refills per allocated page, drains per
// freed page} over `cycles` cycles of `burst` pages.
std::pair<double, double> PcpHoldsPerPage(int burst, int batch, int cycles) {
  const int high = kPcpHighBatches * batch;
  int pcp = 0;
  uint64_t refills = 0, drains = 0;
  for (int c = 0; c < cycles; ++c) {
    for (int i = 0; i < burst; ++i) {
      if (pcp == 0) {
        pcp += batch;
        ++refills;
      }
      --pcp;
    }
    for (int i = 0; i < burst; ++i) {
      if (++pcp >= high) {
        pcp -= batch;
        ++drains;
      }
    }
  }
  const double pages = static_cast<double>(burst) * cycles;
  return {refills / pages, drains / pages};
}

// With work outside the lock (the default rows) a thread takes zone->lock as
// page_fault1 does, phase by phase: refills per allocated page and drains
// per unmapped page each within 2 % of 1/31 and of page_fault1's 128 MiB
// cycle (the 10 % issue 50 asks; a burst of 16 batches took 31 % fewer).
// The work is split in the unmap / fault cost ratio r, so the free phase
// runs r times as long per page and its drains come 1/r as often per ns.
TEST(ZoneLock, HoldsPerPageAreThoseOfPageFault1) {
  using W =
      ZoneLockWorkload<TicketLock, ZoneLockPlacement::kLockAfterFreeArea, 64>;
  const auto [pf1_refill, pf1_drain] = PcpHoldsPerPage(32768, kDefaultBatch, 4);
  EXPECT_NEAR(pf1_drain * 31 - 1, 0, 0.01);
  EXPECT_NEAR(pf1_refill * 31 - 1, 0, 0.01);
  Options options;
  options.work_ns = 1;  // any work: the burst of the calibrated rows
  options.stats = false;
  W w(TestEnv(1), kDefaultBatch, 1, options);
  EXPECT_EQ(w.burst_pages(), kWorkBurstPages);
  ThreadCtx ctx;
  w.SetupThread(ctx);
  const uint64_t cycles = 4;
  w.RunSteps(ctx, cycles * 2 * static_cast<uint64_t>(w.burst_pages()));
  const PerThread& me = w.thread(0);
  EXPECT_EQ(me.stat.acquisitions, me.c.refills + me.c.drains);
  const double refill = static_cast<double>(me.c.refills) / me.c.allocs;
  const double drain = static_cast<double>(me.c.drains) / me.c.ops;
  EXPECT_NEAR(drain / pf1_drain - 1, 0, 0.02) << drain << " vs " << pf1_drain;
  EXPECT_NEAR(refill / pf1_refill - 1, 0, 0.02) << refill;
  const auto [m_refill, m_drain] =
      PcpHoldsPerPage(w.burst_pages(), kDefaultBatch, 4);
  EXPECT_NEAR(refill, m_refill, 1e-9);
  EXPECT_NEAR(drain, m_drain, 1e-9);
  // The split: 1400 ns at r = 0.125 (zeroing 300 ns): the fault's 1244 ns
  // after the allocation, the unmap's 156 before the free; uncalibrated r 1.
  WorkCalibration c{0, 0, 300, 0, 0.125};
  const WorkSplit split = SplitWork(1400, true, c);
  EXPECT_EQ(split.alloc_spin_ns + 300, 1244u);
  EXPECT_EQ(split.free_spin_ns, 156u);
  EXPECT_EQ(split.unmap_fault_ratio, 0.125);
  EXPECT_EQ(SplitWork(1400, false, c).free_spin_ns, 700u);
  w.TeardownThread(ctx);
  EXPECT_EQ(w.Verify(), "");
}

// The threads' burst phases are drawn per repetition (issue 50 item 4): from
// the live layout seed, spread over the cycle, recorded on the row; with no
// seed every thread starts allocating, in phase.
TEST(ZoneLock, BurstPhasesAreDrawnPerRepetition) {
  EXPECT_EQ(BurstPhaseSteps(0, 1, 100), 0u);
  std::set<uint64_t> seen;
  for (int i = 0; i < 8; ++i) {
    const uint64_t s = BurstPhaseSteps(12345, i, 100);
    EXPECT_LT(s, 200u);
    EXPECT_EQ(s, BurstPhaseSteps(12345, i, 100));
    seen.insert(s);
  }
  EXPECT_GT(seen.size(), 4u);
  EXPECT_NE(BurstPhaseSteps(12345, 0, 100), BurstPhaseSteps(54321, 0, 100));
  const std::vector<Variant> all = Variants(2);
  const Variant* v = FindVariant(all, "lock_after_free_area", "ticket", 31, 64,
                                 "cma", "1", "0");
  ASSERT_NE(v, nullptr);
  LayoutSampling sampling(777);
  const PointResult r = RunVerified(*v, 2, 0.02);
  const auto& phase = r.report.details["burst_phase"];
  EXPECT_EQ(phase["seed"], 777u);
  ASSERT_EQ(phase["steps"].size(), 2u);
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(phase["steps"][i],
              BurstPhaseSteps(777, i, phase["cycle_steps"].get<int>() / 2));
}

// What a zone->lock hold writes (issue 40 item 4): one thread, step by step;
// across every step that took the lock (a refill or a drain), the 64-byte
// lines of the modelled struct zone that changed all hold the lock, free_area
// (the buddy lists' heads and nr_free) or vm_stat / flags (the kernel's own
// writes); the buddy allocator object, shared by the zone's threads, is never
// written (its merge / split counters are gone: they are counted in the
// holder's locals and added to its own counters after the release).
TEST(ZoneLock, HoldsWriteOnlyTheKernelsLines) {
  using W =
      ZoneLockWorkload<TicketLock, ZoneLockPlacement::kLockAfterFreeArea, 64>;
  using Z = W::Z;
  for (int batch : {31, 0}) {
    SCOPED_TRACE(batch);
    Options options;
    options.stats = false;
    W w(TestEnv(1), batch, 1, options, /*burst=*/16 * 31);
    ThreadCtx ctx;
    w.SetupThread(ctx);
    const auto* zone_bytes = reinterpret_cast<const unsigned char*>(&w.zone());
    const auto* buddy_bytes =
        reinterpret_cast<const unsigned char*>(&w.buddy());
    const std::vector<unsigned char> buddy0(buddy_bytes,
                                            buddy_bytes + sizeof(W::Buddy));
    const auto in = [](std::size_t off, std::size_t begin, std::size_t size) {
      return off + 64 > begin && off < begin + size;
    };
    std::set<std::size_t> written;
    uint64_t holds = 0;
    for (int step = 0; step < 4 * 2 * 16 * 31; ++step) {
      const std::vector<unsigned char> before(zone_bytes,
                                              zone_bytes + sizeof(Z));
      const uint64_t acq = w.thread(0).stat.acquisitions;
      w.RunSteps(ctx, 1);
      if (w.thread(0).stat.acquisitions == acq) continue;
      ++holds;
      for (std::size_t line = 0; line < sizeof(Z); line += 64) {
        const std::size_t n = std::min<std::size_t>(64, sizeof(Z) - line);
        if (std::memcmp(&before[line], zone_bytes + line, n) == 0) continue;
        written.insert(line);
        EXPECT_TRUE(in(line, offsetof(Z, lock), sizeof(Z::lock)) ||
                    in(line, offsetof(Z, free_area), sizeof(Z::free_area)) ||
                    in(line, offsetof(Z, vm_stat), sizeof(Z::vm_stat)) ||
                    in(line, offsetof(Z, flags), sizeof(Z::flags)))
            << "step " << step << " wrote zone line at byte " << line;
      }
      ASSERT_EQ(std::memcmp(buddy0.data(), buddy_bytes, buddy0.size()), 0)
          << "a hold wrote the buddy allocator object (step " << step << ")";
    }
    EXPECT_GT(holds, 0u);
    EXPECT_FALSE(written.empty());
    // The merges and splits are still counted, in the thread's own counters.
    EXPECT_GT(w.thread(0).c.splits, 0u);
    EXPECT_GT(w.thread(0).c.merges, 0u);
    w.TeardownThread(ctx);
    EXPECT_EQ(w.Verify(), "");
  }
}

TEST(ZoneLock, RejectsNegativeBatch) {
  using W = ZoneLockWorkload<TicketLock, ZoneLockPlacement::kLockOwnLine, 64>;
  EXPECT_THROW(W(TestEnv(1), -1), std::invalid_argument);
}

}  // namespace
}  // namespace lockline::zone_lock
