// Tests of harness/helpers.h (issue 14): helper threads are placed like
// measured threads -- a core of their own, the measured threads' NUMA node,
// never an SMT sibling of a measured thread unless allowed -- on synthetic
// topologies (hwloc's synthetic syntax, no host dependence).
#include "harness/helpers.h"

#include <gtest/gtest.h>

#include <set>

namespace lockline {
namespace {

ThreadPlan Plan(const Topology& topo, int threads) {
  PinSpec pin;  // cores: one PU per core, filling a NUMA node first
  return PlanThreads(PlacementOrder(topo, pin), threads, false);
}

TEST(HelperPlacement, OwnCoreSameNodeNeverASibling) {
  // 2 NUMA nodes x 4 cores x 2 PUs: measured threads on node 0's cores 0, 1.
  auto topo = Topology::Load("synthetic:pack:1 numa:2 core:4 pu:2");
  const ThreadPlan plan = Plan(*topo, 2);
  std::set<int> measured_cores;
  for (const PuInfo& pu : plan.pus) measured_cores.insert(pu.core);
  const auto places = PlaceHelpers(topo->usable_pus(), plan, 8);
  // Node 0 has 4 cores, 2 measured: two helpers fit, one per free core.
  ASSERT_EQ(places.size(), 2u);
  std::set<int> cores;
  for (const HelperPlace& h : places) {
    EXPECT_EQ(h.numa, plan.pus[0].numa);
    EXPECT_EQ(measured_cores.count(h.core), 0u) << "helper on a measured core";
    EXPECT_TRUE(cores.insert(h.core).second) << "two helpers share a core";
    EXPECT_FALSE(h.smt_sibling_of_measured);
    EXPECT_EQ(h.reason, "");
  }
  const HelperColumns cols = HelperColumnsOf(places);
  EXPECT_EQ(cols.pu.size(), 2u);
  EXPECT_EQ(cols.core[0], places[0].core);
}

TEST(HelperPlacement, NoPlaceWhenEveryCoreIsMeasured) {
  auto topo = Topology::Load("synthetic:pack:1 numa:1 core:2 pu:2");
  const ThreadPlan plan = Plan(*topo, 2);  // both cores hold a measured thread
  EXPECT_TRUE(PlaceHelpers(topo->usable_pus(), plan, 1).empty());
  // Allowed explicitly: a sibling, flagged so the row says so.
  const auto sib = PlaceHelpers(topo->usable_pus(), plan, 1, true);
  ASSERT_EQ(sib.size(), 1u);
  EXPECT_TRUE(sib[0].smt_sibling_of_measured);
  EXPECT_NE(sib[0].reason, "");
}

TEST(HelperPlacement, LowestFreePuByOsIndexIsNotEnough) {
  // 1 node, 4 cores x 2 PUs, 1 measured thread on core 0: the first unused PU
  // by OS index may be core 0's sibling; the helper must go to core 1.
  auto topo = Topology::Load("synthetic:pack:1 numa:1 core:4 pu:2");
  const ThreadPlan plan = Plan(*topo, 1);
  const auto places = PlaceHelpers(topo->usable_pus(), plan, 1);
  ASSERT_EQ(places.size(), 1u);
  EXPECT_NE(places[0].core, plan.pus[0].core);
}

}  // namespace
}  // namespace lockline
