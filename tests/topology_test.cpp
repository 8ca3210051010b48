// Topology loading, placement orders, thread-count lists and plans, on
// synthetic topologies, the real machines' XML fixtures in
// LOCKLINE_FIXTURES_DIR/topologies (tests/fixtures), a /sys dump loaded through
// HWLOC_FSROOT, and (binding only) this host.
#include "harness/machine/topology.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "harness/measure/team.h"
#include "harness/record/provenance.h"
#include "harness/run/options.h"

namespace lockline {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures =
    std::string(LOCKLINE_FIXTURES_DIR) + "/topologies/";
const std::string k256 = "synthetic:pack:4 numa:2 core:16 pu:2";

std::vector<int> Os(const std::vector<PuInfo>& pus) {
  std::vector<int> out;
  for (const PuInfo& p : pus) out.push_back(p.os_index);
  return out;
}

// Runs `fn` and returns the TopologyError message it throws ("" if it does not
// throw).
template <typename Fn>
std::string ErrorOf(Fn fn) {
  try {
    fn();
  } catch (const TopologyError& e) {
    return e.what();
  }
  return "";
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A fresh directory under the temp dir, removed at scope exit.
struct TempDir {
  TempDir() {
    std::string tmpl =
        (fs::temp_directory_path() / "lockline_topo_XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string Write(const std::string& name, const std::string& text) const {
    std::string p = path + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  std::string path;
};

PinSpec Pin(const std::string& text) { return ParsePinSpec(text); }

TEST(TopologySynthetic, CountsAndSummary) {
  auto t = Topology::Load(k256);
  EXPECT_FALSE(t->is_host());
  const TopologySummary& s = t->summary();
  EXPECT_EQ(s.packages, 4);
  EXPECT_EQ(s.numa_nodes, 8);
  EXPECT_EQ(s.cores, 128);
  EXPECT_EQ(s.pus, 256);
  EXPECT_EQ(s.usable_pus, 256);
  EXPECT_EQ(s.cache_line_bytes, 64);
  // Quotes around the description are stripped.
  auto quoted = Topology::Load("synthetic:\"pack:4 numa:2 core:16 pu:2\"");
  EXPECT_EQ(quoted->summary().usable_pus, 256);
}

TEST(TopologySynthetic, CountNumaNodesOfOrdersAndPlans) {
  auto t = Topology::Load(k256);
  const auto order = PlacementOrder(*t, Pin("cores"));
  EXPECT_EQ(CountNumaNodes(order), 8);
  EXPECT_EQ(CountNumaNodes(PlanThreads(order, 16, false).pus), 1);
  EXPECT_EQ(CountNumaNodes(PlanThreads(order, 17, false).pus), 2);
  EXPECT_EQ(CountNumaNodes({}), 0);
  EXPECT_EQ(CountNumaNodes({PuInfo{}, PuInfo{}}), 0);  // node unknown (-1)
}

TEST(TopologySynthetic, CoresOrderFillsNodeBeforeSiblings) {
  auto t = Topology::Load(k256);
  auto order = PlacementOrder(*t, Pin("cores"));
  ASSERT_EQ(order.size(), 256u);
  // 16 threads: the 16 cores of one NUMA node, one thread each.
  ThreadPlan p16 = PlanThreads(order, 16, false);
  EXPECT_EQ(p16.numa_nodes, 1);
  EXPECT_EQ(p16.cores, 16);
  EXPECT_EQ(p16.packages, 1);
  EXPECT_FALSE(p16.smt_siblings);
  EXPECT_EQ(PlanThreads(order, 32, false).packages, 1);
  EXPECT_EQ(PlanThreads(order, 33, false).packages, 2);
  // No SMT sibling until every one of the 128 cores has a thread.
  ThreadPlan p128 = PlanThreads(order, 128, false);
  EXPECT_FALSE(p128.smt_siblings);
  EXPECT_EQ(p128.cores, 128);
  EXPECT_TRUE(PlanThreads(order, 129, false).smt_siblings);
  ThreadPlan p256 = PlanThreads(order, 256, false);
  EXPECT_TRUE(p256.smt_siblings);
  EXPECT_FALSE(p256.oversubscribed);
  const std::vector<int> os = Os(p256.pus);
  std::set<int> distinct(os.begin(), os.end());
  EXPECT_EQ(distinct.size(), 256u);
  // --pin=none reports the cores order.
  EXPECT_EQ(Os(PlacementOrder(*t, Pin("none"))), Os(order));
}

TEST(TopologySynthetic, CompactPutsSiblingsAdjacent) {
  auto t = Topology::Load(k256);
  auto order = PlacementOrder(*t, Pin("compact"));
  ASSERT_EQ(order.size(), 256u);
  for (size_t i = 0; i + 1 < order.size(); i += 2) {
    EXPECT_EQ(order[i].core, order[i + 1].core) << "thread " << i;
  }
  EXPECT_TRUE(PlanThreads(order, 2, false).smt_siblings);
}

TEST(TopologySynthetic, ScatterSpreadsAcrossPackagesThenNodes) {
  auto t = Topology::Load(k256);
  auto order = PlacementOrder(*t, Pin("scatter"));
  ASSERT_EQ(order.size(), 256u);
  std::set<int> packages, nodes;
  for (int i = 0; i < 4; ++i)
    packages.insert(order[static_cast<size_t>(i)].package);
  EXPECT_EQ(packages.size(), 4u);
  for (int i = 0; i < 8; ++i) nodes.insert(order[static_cast<size_t>(i)].numa);
  EXPECT_EQ(nodes.size(), 8u);
  EXPECT_FALSE(PlanThreads(order, 128, false).smt_siblings);
  const std::vector<int> os = Os(order);
  std::set<int> all(os.begin(), os.end());
  EXPECT_EQ(all.size(), 256u);
}

TEST(TopologySynthetic, TopoThreadCounts) {
  auto t = Topology::Load(k256);
  auto order = PlacementOrder(*t, Pin("cores"));
  // Powers of two up to 256; boundaries 16 (node), 32 (package), 128 (all
  // cores) coincide.
  EXPECT_EQ(ParseThreadCounts("topo", order, false),
            (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256}));
  EXPECT_EQ(ParseThreadCounts("pow2", order, false),
            (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256}));
  EXPECT_EQ(ParseThreadCounts("max", order, false), (std::vector<int>{256}));
  EXPECT_EQ(ParseThreadCounts("8,1,2", order, false),
            (std::vector<int>{1, 2, 8}));
  EXPECT_EQ(ParseThreadCounts("1-4", order, false),
            (std::vector<int>{1, 2, 3, 4}));
  // Compact fills a node's 16 cores x 2 PUs (32), then a package (64).
  auto compact =
      ParseThreadCounts("topo", PlacementOrder(*t, Pin("compact")), false);
  EXPECT_TRUE(std::find(compact.begin(), compact.end(), 32) != compact.end());
}

TEST(TopologySynthetic, NonPowerBoundaries) {
  // 3 cores per L3, 6 per node, 12 per package, 24 cores, 48 PUs.
  auto t = Topology::Load("synthetic:pack:2 numa:2 l3:2 core:3 pu:2");
  auto counts =
      ParseThreadCounts("topo", PlacementOrder(*t, Pin("cores")), false);
  EXPECT_EQ(counts, (std::vector<int>{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48}));
  // pow2 always ends with the whole placement.
  EXPECT_EQ(ParseThreadCounts("pow2", PlacementOrder(*t, Pin("cores")), false),
            (std::vector<int>{1, 2, 4, 8, 16, 32, 48}));
}

TEST(TopologySynthetic, Plans4096Pus) {
  auto t = Topology::Load("synthetic:pack:8 numa:2 l3:4 core:16 pu:4");
  ASSERT_EQ(t->summary().usable_pus, 4096);
  const PinSpec pin = Pin("cores");
  auto order = PlacementOrder(*t, pin);
  auto counts = ParseThreadCounts("topo", order, false);
  for (int boundary :
       {16, 128, 256, 1024, 4096}) {  // L3, node, package, cores, PUs
    EXPECT_TRUE(std::find(counts.begin(), counts.end(), boundary) !=
                counts.end())
        << boundary;
  }
  for (const char* policy : {"cores", "compact", "scatter"}) {
    std::string text = FormatPlans(*t, Pin(policy), counts, false);
    EXPECT_TRUE(Contains(text, "threads 4096: PUs 0-4095 |")) << policy;
    EXPECT_TRUE(Contains(text, "packages 8, SMT siblings: yes")) << policy;
    // Header + placement line + per count one line and one per helper (one
    // per NUMA node, issue 36) + table header + 4096 rows.
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'),
              static_cast<long>(2 + counts.size() * (1 + 16) + 1 + 4096));
  }
  std::string cores = FormatPlans(*t, pin, {16}, false);
  EXPECT_TRUE(Contains(
      cores,
      "threads 16: PUs 0-60:4 | cores 16, L3s 1, NUMA nodes 1, packages 1, "
      "SMT siblings: no"))
      << cores.substr(0, 600);
}

TEST(TopologyFixtures, CoronaHwloc1Format) {
  auto t = Topology::Load(kFixtures +
                          "llnl-corona-epyc7402-2p-16l3-96pu-hwloc1format.xml");
  const TopologySummary& s = t->summary();
  EXPECT_EQ(s.usable_pus, 96);
  EXPECT_EQ(s.packages, 2);
  EXPECT_EQ(s.l3s, 16);
  EXPECT_EQ(s.cores, 48);
  EXPECT_FALSE(t->is_host());
  auto order = PlacementOrder(*t, Pin("cores"));
  // 3 cores per L3 (CCX), 24 per node and package, 48 cores, 96 PUs.
  auto counts = ParseThreadCounts("topo", order, false);
  for (int boundary : {3, 24, 48, 96}) {
    EXPECT_TRUE(std::find(counts.begin(), counts.end(), boundary) !=
                counts.end())
        << boundary;
  }
  EXPECT_EQ(PlanThreads(order, 3, false).l3s, 1);
  EXPECT_EQ(PlanThreads(order, 4, false).l3s, 2);
  EXPECT_FALSE(PlanThreads(order, 48, false).smt_siblings);
  EXPECT_TRUE(PlanThreads(order, 49, false).smt_siblings);
}

TEST(TopologyFixtures, LakefieldHybridPCoreFirst) {
  auto t =
      Topology::Load(kFixtures + "intel-lakefield-i5-l16g7-1p4e-hybrid.xml");
  EXPECT_EQ(t->summary().usable_pus, 5);
  EXPECT_EQ(t->summary().cpukinds, 2);
  auto order = PlacementOrder(*t, Pin("cores"));
  ASSERT_EQ(order.size(), 5u);
  EXPECT_EQ(order[0].os_index, 4);
  EXPECT_GT(order[0].cpukind, order[1].cpukind);
  EXPECT_EQ(Os(order), (std::vector<int>{4, 0, 1, 2, 3}));
  // compact keeps topology order.
  EXPECT_EQ(Os(PlacementOrder(*t, Pin("compact"))),
            (std::vector<int>{0, 1, 2, 3, 4}));
}

// Issue 36: CPU kinds without efficiency or frequency (hand-made fixture,
// tests/fixtures/README.md) left the sweep in OS order with no message.
TEST(TopologyFixtures, UnrankedKindsAreSaidInThePlan) {
  auto t = Topology::Load(kFixtures + "synthetic-2kinds-unranked-8c.xml");
  EXPECT_EQ(t->summary().cpukinds, 2);
  EXPECT_FALSE(t->summary().cpukinds_ranked);
  const std::string want =
      "2 CPU kinds found but not ranked: sweep order is by OS index; "
      "--pin=LIST sets it";
  EXPECT_EQ(UnrankedKindsWarning(t->summary()), want);
  EXPECT_NE(FormatPlans(*t, Pin("cores"), {1, 8}, false).find(want),
            std::string::npos);
  for (const PuInfo& p : t->usable_pus()) EXPECT_EQ(p.cpukind, -1);
  // Ranked kinds (Lakefield, the 5-kind Arm fixture) and one kind: no message.
  for (const char* f : {"intel-lakefield-i5-l16g7-1p4e-hybrid.xml",
                        "synthetic-arm-5kinds-2l3-12c.xml"}) {
    auto r = Topology::Load(kFixtures + f);
    EXPECT_TRUE(r->summary().cpukinds_ranked) << f;
    EXPECT_EQ(UnrankedKindsWarning(r->summary()), "") << f;
  }
  EXPECT_EQ(UnrankedKindsWarning(Topology::Load(k256)->summary()), "");
}

// ... and in the run's warnings (the run context's provenance).
TEST(TopologyFixtures, UnrankedKindsAreARunWarning) {
  auto t = Topology::Load(kFixtures + "synthetic-2kinds-unranked-8c.xml");
  const nlohmann::json p = CollectProvenance(Options{}, *t);
  bool found = false;
  for (const auto& w : p["warnings"])
    found = found || w.get<std::string>() == UnrankedKindsWarning(t->summary());
  EXPECT_TRUE(found) << p["warnings"].dump();
  auto ranked = Topology::Load(kFixtures + "synthetic-arm-5kinds-2l3-12c.xml");
  for (const auto& w : CollectProvenance(Options{}, *ranked)["warnings"])
    EXPECT_EQ(w.get<std::string>().find("not ranked"), std::string::npos);
}

// Issue 36 item 6: the plan shows where each helper runs for each count, and
// on the 2-socket SNC4 fixture never on a measured PU.
TEST(TopologyFixtures, PlanShowsHelperPlacement) {
  auto t = Topology::Load(kFixtures + "synthetic-spr-2p-snc4-224pu.xml");
  const std::string text = FormatPlans(*t, Pin("cores"), {14, 112, 224}, false);
  EXPECT_NE(text.find("threads 14:"), std::string::npos);
  EXPECT_NE(text.find("  helper 0 (prezero zeroer"), std::string::npos)
      << text.substr(0, 2000);
  EXPECT_NE(text.find("nearest node to the measured ones (NUMA distance 12)"),
            std::string::npos);
  EXPECT_NE(text.find("idle SMT sibling of a measured thread"),
            std::string::npos);
  EXPECT_NE(text.find("none: every usable PU runs a measured thread; "
                      "prezero's zeroer points are refused"),
            std::string::npos);
  EXPECT_EQ(text.find("own PU"), std::string::npos);
}

TEST(TopologyLoad, WithinTheSetUpLimit) {
  auto t = LoadTopologyWithin(k256, 60'000'000'000ull);
  EXPECT_EQ(t->summary().pus, 256);
  EXPECT_THROW(LoadTopologyWithin("synthetic:pack:x", 60'000'000'000ull),
               TopologyError);
}

// Issue 36 item 5: hwloc's discovery of "host" binds a thread to each PU; a
// binding that never returns (injected here as a loader that never returns)
// used to hang lockline silently. Now: one error line, exit 3.
TEST(TopologyLoadDeathTest, HangInDiscoveryEndsTheRunWithOneLine) {
  const auto hang = [](const std::string&) -> std::unique_ptr<Topology> {
    for (;;) pause();
  };
  EXPECT_EXIT(LoadTopologyWithin("host", 200'000'000ull, hang),
              ::testing::ExitedWithCode(3),
              "lockline: error: topology discovery of 'host' .*did not finish "
              "within 0.2 s \\(LOCKLINE_SETUP_TIMEOUT");
}

TEST(TopologyFixtures, CpusetRestrictedOpteronPlansOnlyAllowedPus) {
  auto t = Topology::Load(kFixtures + "opteron865-8n2c-cpuset-restricted.xml");
  const std::vector<int> allowed = {0, 1,  2,  3,  5,
                                    6, 12, 13, 14, 15};  // mask 0xf06f
  EXPECT_EQ(t->summary().usable_pus, 10);
  for (const char* policy : {"cores", "compact", "scatter"}) {
    auto order = PlacementOrder(*t, Pin(policy));
    std::vector<int> os = Os(order);
    std::sort(os.begin(), os.end());
    EXPECT_EQ(os, allowed) << policy;
  }
  auto order = PlacementOrder(*t, Pin("cores"));
  EXPECT_EQ(ParseThreadCounts("max", order, false), (std::vector<int>{10}));
  EXPECT_EQ(t->FindPu(4), nullptr);
  ASSERT_NE(t->FindPu(12), nullptr);
  std::string err = ErrorOf([&] { PlacementOrder(*t, Pin("0,4")); });
  EXPECT_TRUE(Contains(err, "PU 4")) << err;
  EXPECT_TRUE(Contains(err, "0-3,5-6,12-15")) << err;
  EXPECT_EQ(Os(PlacementOrder(*t, Pin("13,0"))), (std::vector<int>{13, 0}));
}

TEST(TopologyFixtures, Opteron6276NodesAndL3Boundaries) {
  auto t = Topology::Load(kFixtures + "opteron6276-4p-8n-64c.xml");
  const TopologySummary& s = t->summary();
  EXPECT_EQ(s.numa_nodes, 8);
  EXPECT_EQ(s.usable_pus, 64);
  EXPECT_EQ(s.packages, 4);
  EXPECT_EQ(s.l3s, 8);
  auto order = PlacementOrder(*t, Pin("cores"));
  ThreadPlan p8 = PlanThreads(order, 8, false);  // one L3 = one node = 8 cores
  EXPECT_EQ(p8.l3s, 1);
  EXPECT_EQ(p8.numa_nodes, 1);
  EXPECT_EQ(PlanThreads(order, 9, false).l3s, 2);
  EXPECT_EQ(PlanThreads(order, 16, false).packages, 1);
  auto counts = ParseThreadCounts("topo", order, false);
  for (int boundary : {8, 16, 64}) {  // L3 and node, package, all
    EXPECT_TRUE(std::find(counts.begin(), counts.end(), boundary) !=
                counts.end())
        << boundary;
  }
  // Scatter's first 8 threads land on the 8 nodes.
  std::set<int> nodes;
  auto scatter = PlacementOrder(*t, Pin("scatter"));
  for (size_t i = 0; i < 8; ++i) nodes.insert(scatter[i].numa);
  EXPECT_EQ(nodes.size(), 8u);
}

TEST(TopologyFixtures, SysfsDumpThroughFsroot) {
  TempDir dir;
  const std::string tarball = kFixtures + "sysfs/16amd64-8n2c-cpusets.tar.bz2";
  const std::string cmd =
      "tar xjf '" + tarball + "' -C '" + dir.path + "' 2>/dev/null";
  if (std::system(cmd.c_str()) != 0)
    GTEST_SKIP() << "cannot extract " << tarball;
  const std::string root = dir.path + "/16amd64-8n2c-cpusets";
  ASSERT_EQ(setenv("HWLOC_FSROOT", root.c_str(), 1), 0);
  std::unique_ptr<Topology> t;
  std::string err = ErrorOf([&] { t = Topology::Load("host"); });
  unsetenv("HWLOC_FSROOT");
  ASSERT_EQ(err, "");
  EXPECT_FALSE(t->is_host());  // a /sys dump is not this machine
  EXPECT_TRUE(Contains(t->summary().source, "HWLOC_FSROOT"));
  std::vector<int> os = Os(PlacementOrder(*t, Pin("cores")));
  std::sort(os.begin(), os.end());
  EXPECT_EQ(os, (std::vector<int>{0, 1, 2, 3, 5, 6, 12, 13, 14, 15}));
  EXPECT_TRUE(
      Contains(ErrorOf([&] { BindThisThread(*t, 0); }), "not this machine"));
}

TEST(TopologyErrors, BadCpuLists) {
  for (const char* bad : {"0-", "a", "3-1", "1,1", "", "  ", "1,,2", "1,", "-1",
                          "0-4,2", "1-3:0", "99999999"}) {
    std::string err = ErrorOf([&] { ParseCpuList(bad); });
    EXPECT_FALSE(err.empty()) << "'" << bad << "' accepted";
    EXPECT_TRUE(Contains(err, "accepted")) << err;
  }
  EXPECT_EQ(ParseCpuList("0,2,4-7"), (std::vector<int>{0, 2, 4, 5, 6, 7}));
  EXPECT_EQ(ParseCpuList("0-6:2"), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(ParseCpuList(" 3 , 1 "), (std::vector<int>{3, 1}));
  EXPECT_EQ(FormatCpuList({5, 0, 1, 2, 3}), "0-3,5");
  EXPECT_EQ(FormatCpuList({0, 2, 4, 6}), "0-6:2");
  EXPECT_EQ(FormatCpuList({1, 3}), "1,3");
  EXPECT_EQ(ParseCpuList(FormatCpuList({0, 1, 2, 8, 10, 12, 14, 20})),
            (std::vector<int>{0, 1, 2, 8, 10, 12, 14, 20}));
}

TEST(TopologyErrors, BadPinSpecs) {
  EXPECT_TRUE(Contains(ErrorOf([] { ParsePinSpec("spread"); }), "'spread'"));
  EXPECT_FALSE(ErrorOf([] { ParsePinSpec("1,1"); }).empty());
  EXPECT_FALSE(ErrorOf([] { ParsePinSpec(""); }).empty());
  PinSpec list = ParsePinSpec("2,0-1");
  EXPECT_EQ(list.policy, PinPolicy::kList);
  EXPECT_EQ(list.list, (std::vector<int>{2, 0, 1}));
  auto t = Topology::Load(k256);
  std::string err = ErrorOf([&] { PlacementOrder(*t, Pin("0,300")); });
  EXPECT_TRUE(Contains(err, "PU 300")) << err;
  EXPECT_TRUE(Contains(err, "0-255")) << err;
}

TEST(TopologyErrors, BadFiles) {
  TempDir dir;
  std::string err = ErrorOf([&] { Topology::Load(dir.path + "/missing.xml"); });
  EXPECT_TRUE(Contains(err, "missing.xml") && Contains(err, "cannot open"))
      << err;
  err = ErrorOf([&] { Topology::Load(dir.path); });
  EXPECT_TRUE(Contains(err, "directory")) << err;
  std::string garbage = dir.Write("garbage.xml", "this is not XML at all\n");
  err = ErrorOf([&] { Topology::Load(garbage); });
  EXPECT_TRUE(Contains(err, "garbage.xml")) << err;
  std::string broken = dir.Write("broken.xml",
                                 "<?xml version=\"1.0\"?>\n<topology "
                                 "version=\"2.0\">\n<object type=\"Mach");
  err = ErrorOf([&] { Topology::Load(broken); });
  EXPECT_TRUE(Contains(err, "broken.xml")) << err;
  std::string v3 =
      dir.Write("v3.xml",
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE "
                "topology SYSTEM \"hwloc2.dtd\">\n"
                "<topology version=\"3.0\">\n  <object type=\"Machine\" "
                "os_index=\"0\" cpuset=\"0x1\" "
                "complete_cpuset=\"0x1\" allowed_cpuset=\"0x1\" "
                "nodeset=\"0x1\" complete_nodeset=\"0x1\" "
                "allowed_nodeset=\"0x1\" gp_index=\"1\">\n    <object "
                "type=\"PU\" os_index=\"0\" "
                "cpuset=\"0x1\" complete_cpuset=\"0x1\" nodeset=\"0x1\" "
                "complete_nodeset=\"0x1\" "
                "gp_index=\"2\"/>\n  </object>\n</topology>\n");
  err = ErrorOf([&] { Topology::Load(v3); });
  EXPECT_TRUE(Contains(err, "hwloc 3")) << err;
  EXPECT_TRUE(Contains(err, "hwloc 2.x")) << err;
  EXPECT_TRUE(Contains(err, "lstopo --of xml")) << err;
  EXPECT_TRUE(Contains(ErrorOf([] { Topology::Load(""); }), "host"));
}

TEST(TopologyErrors, BadSyntheticStrings) {
  for (const char* bad :
       {"synthetic:", "synthetic:pack:x", "synthetic:bogus:4 pu:2",
        "synthetic:\"\"", "synthetic:pack:4 core:0"}) {
    std::string err = ErrorOf([&] { Topology::Load(bad); });
    EXPECT_TRUE(Contains(err, "synthetic")) << "'" << bad << "': " << err;
  }
}

TEST(TopologyErrors, ThreadCounts) {
  auto t = Topology::Load(k256);
  auto order = PlacementOrder(*t, Pin("cores"));
  for (const char* bad : {"0", "-1", "abc", "", "1,,2", "1,1", "4-2", "0,1"}) {
    EXPECT_FALSE(ErrorOf([&] { ParseThreadCounts(bad, order, false); }).empty())
        << bad;
  }
  std::string err = ErrorOf([&] { ParseThreadCounts("300", order, false); });
  EXPECT_TRUE(Contains(err, "300") && Contains(err, "256") &&
              Contains(err, "--oversubscribe") && Contains(err, "0-255"))
      << err;
  err = ErrorOf([&] { PlanThreads(order, 257, false); });
  EXPECT_TRUE(Contains(err, "--oversubscribe")) << err;
  EXPECT_EQ(ParseThreadCounts("300", order, true), (std::vector<int>{300}));
  ThreadPlan p = PlanThreads(order, 300, true);
  EXPECT_TRUE(p.oversubscribed);
  ASSERT_EQ(p.pus.size(), 300u);
  EXPECT_EQ(p.pus[256].os_index, order[0].os_index);  // wraps around the order
  EXPECT_EQ(p.cores, 128);
  EXPECT_FALSE(PlanThreads(order, 256, true).oversubscribed);
  EXPECT_TRUE(Contains(FormatPlans(*t, Pin("cores"), {300}, true),
                       "oversubscribed: yes"));
}

TEST(TopologyHost, LoadsAndBindsWithReadBack) {
  auto t = Topology::Load("host");
  ASSERT_TRUE(t->is_host());
  const auto& pus = t->usable_pus();
  ASSERT_FALSE(pus.empty());
  EXPECT_EQ(t->summary().source, "host");
  EXPECT_GT(t->summary().cache_line_bytes, 0);
  if (pus.size() < 2)
    GTEST_SKIP() << "the process may run on only 1 PU; binding is trivial";
  // A separate thread, so the test runner's own affinity is left alone.
  std::vector<std::string> failures;
  std::thread worker([&] {
    for (const PuInfo& pu : pus) {
      std::string err = ErrorOf([&] { BindThisThread(*t, pu.os_index); });
      if (!err.empty()) {
        failures.push_back(err);
        continue;
      }
      // The thread is bound to exactly this PU, so wherever it last ran, it is
      // this one.
      int now = sched_getcpu();
      if (now != pu.os_index) {
        failures.push_back("bound to " + std::to_string(pu.os_index) +
                           " but on " + std::to_string(now));
      }
    }
  });
  worker.join();
  EXPECT_TRUE(failures.empty()) << failures.front();
  EXPECT_FALSE(ErrorOf([&] { BindThisThread(*t, 1 << 20); }).empty());
}

TEST(TopologyHost, BindingRefusedOnNonHostTopology) {
  auto t = Topology::Load(k256);
  std::string err = ErrorOf([&] { BindThisThread(*t, 0); });
  EXPECT_TRUE(Contains(err, "PU 0") && Contains(err, "not this machine"))
      << err;
}

}  // namespace
}  // namespace lockline
