// Tests of harness/helpers.h (issue 14): helper threads are placed like
// measured threads -- a core of their own, the measured threads' NUMA node,
// never an SMT sibling of a measured thread unless allowed -- on synthetic
// topologies (hwloc's synthetic syntax, no host dependence).
#include "harness/helpers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

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

// Issue 27: a 16-thread point on a 2-socket machine in SNC4 mode (8 NUMA
// nodes, 224 PUs, like a Sapphire Rapids 8480 pair) got no helper, because
// only the first measured thread's node was searched and --pin=cores fills it.
// Helpers now land on free cores of the measured threads' nodes.
void ExpectHelpersOnMeasuredNodes(const Topology& topo, int threads,
                                  int helpers) {
  const ThreadPlan plan = Plan(topo, threads);
  std::set<int> measured_pus, measured_cores, measured_nodes;
  for (const PuInfo& pu : plan.pus) {
    measured_pus.insert(pu.os_index);
    measured_cores.insert(pu.core);
    measured_nodes.insert(pu.numa);
  }
  ASSERT_GT(measured_nodes.size(), 1u) << "the point must span nodes";
  const auto places = PlaceHelpers(topo.usable_pus(), plan, helpers);
  ASSERT_EQ(static_cast<int>(places.size()), helpers);
  std::set<int> cores, nodes_served;
  for (const HelperPlace& h : places) {
    EXPECT_EQ(measured_pus.count(h.pu), 0u) << "helper on a measured PU";
    EXPECT_EQ(measured_cores.count(h.core), 0u) << "helper on a measured core";
    EXPECT_EQ(measured_nodes.count(h.numa), 1u)
        << "helper on node " << h.numa << ", not a measured node";
    EXPECT_TRUE(cores.insert(h.core).second) << "two helpers share a core";
    EXPECT_FALSE(h.smt_sibling_of_measured);
    nodes_served.insert(h.numa);
  }
  // Helper i serves measured node i mod k; a full node's helper goes to
  // another measured node, so at least one node is served.
  EXPECT_GE(nodes_served.size(), 1u);
}

TEST(HelperPlacement, SixteenThreadsOnATwoSocketEightNodeMachine) {
  // 2 packages x 4 NUMA nodes (SNC4) x 14 cores x 2 PUs = 224 PUs.
  auto topo = Topology::Load("synthetic:pack:2 numa:4 core:14 pu:2");
  // --pin=cores: 14 threads fill node 0's cores, threads 15-16 go to node 1.
  ExpectHelpersOnMeasuredNodes(*topo, 16, 1);
  ExpectHelpersOnMeasuredNodes(*topo, 16, 2);
  ExpectHelpersOnMeasuredNodes(*topo, 16, 8);
}

TEST(HelperPlacement, VendoredEightNodeOpteron) {
  // 4 x Opteron 6276: 8 NUMA nodes of 8 PUs (tests/fixtures/README.md).
  auto topo = Topology::Load(std::string(LOCKLINE_FIXTURES_DIR) +
                             "/topologies/opteron6276-4p-8n-64c.xml");
  // 12 threads: node 0's 8 PUs and half of node 1's; node 1 has free cores.
  ExpectHelpersOnMeasuredNodes(*topo, 12, 1);
  ExpectHelpersOnMeasuredNodes(*topo, 12, 4);
  // 16 threads fill nodes 0 and 1: no free core on a measured node, so no
  // helper (the caller then says so on the row), never one on a measured PU.
  PinSpec pin;
  const ThreadPlan full = PlanThreads(PlacementOrder(*topo, pin), 16, false);
  EXPECT_TRUE(PlaceHelpers(topo->usable_pus(), full, 1).empty());
}

TEST(HelperPlacement, VendoredTwoSocketEpyc) {
  // LLNL Corona: 2 x EPYC 7402, 2 NUMA nodes, 48 cores, SMT2.
  auto topo = Topology::Load(
      std::string(LOCKLINE_FIXTURES_DIR) +
      "/topologies/llnl-corona-epyc7402-2p-16l3-96pu-hwloc1format.xml");
  ExpectHelpersOnMeasuredNodes(*topo, 30, 2);
}

}  // namespace
}  // namespace lockline
