// What the emulated rehearsal (ci/rehearse.sh, issue 19) reads from rows,
// checked on this machine: the PUs a thread is bound to and ran on, the NUMA
// nodes of shared memory (NodesOfRange, SharedRegionsJson) and the --emulated
// marker. The multi-node behaviour itself is checked on the rehearsal's result
// by tests/python/test_rehearsal.py.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/family.h"
#include "harness/machine/memory.h"
#include "harness/machine/restore.h"
#include "harness/machine/topology.h"
#include "harness/measure/team.h"
#include "harness/record/provenance.h"
#include "harness/run/options.h"

namespace lockline {
namespace {

class SpinWorkload : public Workload {
 public:
  uint64_t RunWindow(const ThreadCtx&, const std::atomic<bool>& stop) override {
    uint64_t ops = 0;
    while (!stop.load(std::memory_order_relaxed)) ++ops;
    return ops;
  }
};

TEST(Rehearsal, BoundAndObservedPusAreThePlannedOnes) {
  auto topo = Topology::Load("host");
  std::vector<int> pus;
  for (const PuInfo& pu : PlacementOrder(*topo, ParsePinSpec("cores")))
    pus.push_back(pu.os_index);
  ThreadTeam team(topo.get(), pus, nullptr);
  const auto bound = team.BoundPus();
  ASSERT_EQ(bound.size(), pus.size());
  for (size_t i = 0; i < pus.size(); ++i)
    EXPECT_EQ(bound[i], std::vector<int>{pus[i]}) << i;
  SpinWorkload wl;
  std::vector<ThreadCtx> ctx(pus.size());
  for (size_t i = 0; i < pus.size(); ++i) ctx[i].index = static_cast<int>(i);
  const WindowResult r =
      team.RunWindow(wl, ctx, 2'000'000, 10'000'000'000, 60'000'000'000);
  ASSERT_EQ(r.last_cpus.size(), pus.size());
  for (size_t i = 0; i < pus.size(); ++i) EXPECT_EQ(r.last_cpus[i], pus[i]);
}

TEST(Rehearsal, UnboundThreadsReportTheirWholeAffinity) {
  ThreadTeam team(nullptr, {-1}, nullptr);
  const auto bound = team.BoundPus();
  ASSERT_EQ(bound.size(), 1u);
  EXPECT_GE(bound[0].size(), 1u);
}

TEST(Rehearsal, NodesOfRangeSeesTouchedPagesOnly) {
  const long page = sysconf(_SC_PAGESIZE);
  void* p = mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_TRUE(NodesOfRange(p, 4 * page).empty());  // nothing resident yet
  static_cast<char*>(p)[0] = 1;
  const std::vector<int> nodes = NodesOfRange(p, 4 * page);
  // A NUMA kernel names the node (this VM: one, node 0); a kernel without NUMA
  // support cannot say.
  EXPECT_LE(nodes.size(), 1u);
  if (!nodes.empty()) {
    EXPECT_GE(nodes[0], 0);
  }
  EXPECT_TRUE(NodesOfRange(nullptr, 10).empty());
  EXPECT_TRUE(NodesOfRange(p, 0).empty());
  munmap(p, 4 * page);
}

TEST(Rehearsal, SharedRegionsListLiveAllocationsWithTheirPolicy) {
  auto topo = Topology::Load("host");
  const auto order = PlacementOrder(*topo, ParsePinSpec("cores"));
  const ThreadPlan plan = PlanThreads(order, 1, false);
  PointEnv env;
  env.topology = topo.get();
  env.plan = &plan;
  env.mem_policy = "node:0";
  const size_t before = SharedRegionsJson(topo.get()).size();
  {
    SharedPtr mem = AllocShared(3 * 4096, env);
    const nlohmann::json regions = SharedRegionsJson(topo.get());
    ASSERT_EQ(regions.size(), before + 1);
    bool found = false;
    for (const auto& r : regions) {
      if (r["bytes"] != 3 * 4096) continue;
      found = true;
      EXPECT_EQ(r["policy"], "node:0");
      EXPECT_EQ(r["requested"], nlohmann::json::array({0}));
      // Bound and zeroed by AllocShared: resident on node 0 where the kernel
      // can tell.
      if (!r["os_nodes"].empty()) {
        EXPECT_EQ(r["nodes"], nlohmann::json::array({0}));
      }
    }
    EXPECT_TRUE(found) << regions.dump();
  }
  EXPECT_EQ(SharedRegionsJson(topo.get()).size(), before);
}

TEST(Rehearsal, EmulatedFlagAndTcgDetection) {
  const char* argv[] = {"lockline", "--emulated"};
  EXPECT_TRUE(ParseOptions(2, const_cast<char**>(argv)).emulated);
  const char* plain[] = {"lockline"};
  EXPECT_FALSE(ParseOptions(1, const_cast<char**>(plain)).emulated);
  // This test machine is KVM or bare metal (ci/rehearse.sh's guest is where it
  // is true); the signature read must not crash anywhere.
  const bool tcg = RunningUnderTcg();
  if (ReadSmallFile("/proc/cpuinfo").find(" hypervisor") == std::string::npos) {
    EXPECT_FALSE(tcg);
  }
}

}  // namespace
}  // namespace lockline
