// Issue 14 in unit tests: the affinity mask restricts the host's usable PUs,
// --pin=per-l3 / per-numa on real machines' fixtures, the oversubscription cap,
// refused giant topologies and absurd durations, the cgroup CPU quota and
// cpu.stat parsing on files laid out like cgroup v1 / v2 mounts, exclusive run
// directories and temporary files, and a thread team whose thread creation
// fails (in a child with a small address-space limit).
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "harness/machine/cgroup.h"
#include "harness/machine/topology.h"
#include "harness/measure/team.h"
#include "harness/record/results.h"
#include "harness/run/options.h"

namespace lockline {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures =
    std::string(LOCKLINE_FIXTURES_DIR) + "/topologies/";

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

template <typename Fn>
std::string ErrorOf(Fn fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// A fresh directory under the temp dir, removed at scope exit.
struct TempDir {
  TempDir() {
    std::string tmpl =
        (fs::temp_directory_path() / "lockline_aff_XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void Write(const std::string& rel, const std::string& text) const {
    fs::create_directories(fs::path(path + "/" + rel).parent_path());
    std::ofstream(path + "/" + rel) << text;
  }
  std::string path;
};

// ---- affinity ---------------------------------------------------------------

TEST(Affinity, HostUsablePusFollowTheAffinityMask) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "needs 2 CPUs in the affinity mask";
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &all)) last = c;
  // Restrict this thread, load, and put the mask back.
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(last, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  std::unique_ptr<Topology> topo;
  const std::string err = ErrorOf([&] { topo = Topology::Load("host"); });
  ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
  ASSERT_EQ(err, "");
  ASSERT_EQ(topo->usable_pus().size(), 1u);
  EXPECT_EQ(topo->usable_pus()[0].os_index, last);
  const TopologySummary& s = topo->summary();
  EXPECT_EQ(s.affinity_pus, 1);
  EXPECT_GE(s.complete_pus, CPU_COUNT(&all));
  EXPECT_NE(std::find(s.restricted_by.begin(), s.restricted_by.end(),
                      "affinity mask"),
            s.restricted_by.end());
  // The plan names the restriction.
  const std::string plan =
      FormatPlans(*topo, ParsePinSpec("cores"), {1}, false);
  EXPECT_TRUE(Contains(plan, "1 of ")) << plan;
  EXPECT_TRUE(Contains(plan, "affinity mask")) << plan;
}

TEST(Affinity, FullMaskRestrictsNothing) {
  auto topo = Topology::Load("host");
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(topo->summary().affinity_pus, CPU_COUNT(&all));
  EXPECT_EQ(topo->summary().usable_pus, CPU_COUNT(&all));
}

TEST(Affinity, NonHostTopologiesIgnoreTheMask) {
  auto topo = Topology::Load("synthetic:pack:2 core:4 pu:2");
  EXPECT_EQ(topo->summary().affinity_pus, -1);
  EXPECT_EQ(topo->summary().usable_pus, 16);
  EXPECT_EQ(topo->summary().complete_pus, 16);
  EXPECT_TRUE(topo->summary().restricted_by.empty());
}

TEST(Affinity, CpusetRestrictedFixtureCountsTheMissingPus) {
  auto topo =
      Topology::Load(kFixtures + "opteron865-8n2c-cpuset-restricted.xml");
  const TopologySummary& s = topo->summary();
  EXPECT_EQ(s.usable_pus, 10);
  EXPECT_EQ(s.complete_pus, 16);  // complete_cpuset 0xffff, cpuset 0xf06f
  ASSERT_EQ(s.restricted_by.size(), 1u);
  EXPECT_EQ(s.restricted_by[0], "offline or allowed cpuset");
}

// ---- --pin=per-l3 / per-numa ------------------------------------------------

TEST(PerObjectPin, PerL3OnCoronaCoversItsSixteenL3s) {
  auto topo = Topology::Load(
      kFixtures + "llnl-corona-epyc7402-2p-16l3-96pu-hwloc1format.xml");
  const auto order = PlacementOrder(*topo, ParsePinSpec("per-l3"));
  ASSERT_EQ(order.size(), 16u);
  std::set<int> l3s, cores;
  for (const PuInfo& p : order) {
    l3s.insert(p.l3);
    cores.insert(p.core);
    EXPECT_EQ(p.smt_rank, 0);
  }
  EXPECT_EQ(l3s.size(), 16u);
  // In topology order: L3 logical indices ascend.
  for (size_t i = 1; i < order.size(); ++i)
    EXPECT_LT(order[i - 1].l3, order[i].l3);
  EXPECT_EQ(ParseThreadCounts("max", order, false), std::vector<int>{16});
}

TEST(PerObjectPin, PerNumaOnOpteronCoversItsEightNodes) {
  auto topo = Topology::Load(kFixtures + "opteron6276-4p-8n-64c.xml");
  const auto order = PlacementOrder(*topo, ParsePinSpec("per-numa"));
  ASSERT_EQ(order.size(), 8u);
  std::set<int> nodes;
  for (const PuInfo& p : order) nodes.insert(p.numa);
  EXPECT_EQ(nodes.size(), 8u);
  const ThreadPlan plan = PlanThreads(order, 8, false);
  EXPECT_EQ(plan.numa_nodes, 8);
  EXPECT_EQ(plan.packages, 4);
}

TEST(PerObjectPin, Power9LikeSyntheticOneThreadPerL3) {
  // POWER9-like: 2 packages, 12 L3s each (one per core pair), SMT4.
  auto topo = Topology::Load("synthetic:pack:2 l3:12 core:2 pu:4");
  const auto order = PlacementOrder(*topo, ParsePinSpec("per-l3"));
  ASSERT_EQ(order.size(), 24u);
  const ThreadPlan plan = PlanThreads(order, 23, false);
  EXPECT_EQ(plan.l3s, 23);  // 23 threads, 23 L3s
  EXPECT_FALSE(plan.smt_siblings);
}

TEST(PerObjectPin, MissingLevelIsAnError) {
  auto topo = Topology::Load("synthetic:pack:2 core:2 pu:1");
  EXPECT_TRUE(
      Contains(ErrorOf([&] { PlacementOrder(*topo, ParsePinSpec("per-l3")); }),
               "no L3 cache level"));
  EXPECT_TRUE(Contains(ErrorOf([] { ParsePinSpec("per-core"); }), "per-l3"));
}

// ---- oversubscription cap, size limits, durations ---------------------------

TEST(Limits, OversubscriptionIsCappedUnlessForced) {
  auto topo = Topology::Load("synthetic:pack:1 core:2 pu:1");
  const auto order = PlacementOrder(*topo, ParsePinSpec("cores"));
  EXPECT_EQ(ParseThreadCounts("16", order, true), std::vector<int>{16});
  EXPECT_TRUE(Contains(ErrorOf([&] { ParseThreadCounts("17", order, true); }),
                       "--oversubscribe=force"));
  EXPECT_EQ(ParseThreadCounts("1000", order, true, true),
            std::vector<int>{1000});
}

TEST(Limits, GiantSyntheticTopologiesAreRefused) {
  const std::string err =
      ErrorOf([] { Topology::Load("synthetic:pack:64 core:1024 pu:2"); });
  EXPECT_TRUE(Contains(err, "131072")) << err;
  EXPECT_TRUE(Contains(err, "up to 8192")) << err;
  EXPECT_TRUE(Contains(
      ErrorOf([] { Topology::Load("synthetic:pack:1 core:8193 pu:1"); }),
      "up to 8192"));
  // The maximum itself loads (issue 27 item 13: planning scales to it).
  EXPECT_EQ(
      ErrorOf([] { Topology::Load("synthetic:pack:2 numa:8 core:256 pu:2"); }),
      "");
}

TEST(Limits, AbsurdDurationsAreRefusedWithTheRange) {
  for (const char* bad : {"1e-300", "0x10", "inf", "nan", "1e400", "-1",
                          "10mss", "", "5 ms", "11m"}) {
    const std::string err = ErrorOf([&] {
      ParseDurationSeconds(bad, "--window", kMinWindowSeconds,
                           kMaxWindowSeconds);
    });
    EXPECT_TRUE(Contains(err, "0.0001 s to 600 s")) << bad << ": " << err;
  }
  EXPECT_DOUBLE_EQ(ParseDurationSeconds("50ms", "--window", kMinWindowSeconds,
                                        kMaxWindowSeconds),
                   0.05);
  EXPECT_DOUBLE_EQ(ParseDurationSeconds("1.5e1", "--budget"), 15);
  EXPECT_DOUBLE_EQ(ParseDurationSeconds(".5m", "--budget"), 30);
}

// ---- Google Benchmark flags
// ---------------------------------------------------

Options Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "lockline");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return ParseOptions(static_cast<int>(argv.size()), argv.data());
}

TEST(BenchmarkFlags, FilterIsLocklinesNotGoogleBenchmarks) {
  const Options o = Parse({"--benchmark_filter=^locks/.*threads:2$",
                           "--benchmark_repetitions=5",
                           "--benchmark_report_aggregates_only=true"});
  EXPECT_EQ(o.benchmark_filter, "^locks/.*threads:2$");
  EXPECT_EQ(o.repetitions, 5);
  for (const auto& a : o.benchmark_args)
    EXPECT_FALSE(Contains(a, "benchmark_filter")) << a;
}

TEST(FaultSamplingFlag, DurationOrOff) {
  EXPECT_DOUBLE_EQ(Parse({}).fault_sampling_s, kDefaultFaultSamplingS);
  EXPECT_DOUBLE_EQ(Parse({"--fault-sampling=500us"}).fault_sampling_s, 5e-4);
  EXPECT_DOUBLE_EQ(Parse({"--fault-sampling=10ms"}).fault_sampling_s, 1e-2);
  EXPECT_EQ(Parse({"--fault-sampling=off"}).fault_sampling_s, 0.0);
  for (const char* bad :
       {"--fault-sampling=0", "--fault-sampling=1s", "--fault-sampling=10us",
        "--fault-sampling=on", "--fault-sampling="}) {
    try {
      Parse({bad});
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_TRUE(Contains(what, "--fault-sampling")) << what;
    }
  }
}

TEST(BenchmarkFlags, BadOnesAreUsageErrors) {
  for (const char* bad :
       {"--benchmark_filer=x", "--benchmark_format=json",
        "--benchmark_out_format=xml", "--benchmark_min_time=2",
        "--benchmark_time_unit=ns", "--benchmark_counters_tabular=true",
        "--benchmark_enable_random_interleaving=perhaps",
        "--benchmark_out=/no/such/dir/x.json", "--benchmark_filter=a[",
        "--benchmark_repetitions=0",
        "--benchmark_out=", "--benchmark_list_tests"}) {
    EXPECT_THROW(Parse({bad}), UsageError) << bad;
  }
}

// ---- cgroup quota and throttling
// ----------------------------------------------

TEST(Cgroup, V2QuotaWalksUpAndTakesTheSmallest) {
  TempDir root;
  root.Write("cpu.max", "max 100000\n");
  root.Write("a/cpu.max", "150000 100000\n");
  root.Write("a/b/cpu.max", "max 100000\n");
  root.Write(
      "a/b/cpu.stat",
      "usage_usec 10\nnr_periods 5\nnr_throttled 3\nthrottled_usec 42\n");
  const CgroupCpu cg = ReadCgroupCpu("0::/a/b\n", root.path);
  EXPECT_EQ(cg.version, 2);
  EXPECT_DOUBLE_EQ(cg.quota_cpus, 1.5);
  EXPECT_EQ(cg.limited_by, root.path + "/a/cpu.max");
  const CpuThrottle t = ReadCpuThrottle(cg);
  ASSERT_TRUE(t.ok);
  EXPECT_EQ(t.nr_throttled, 3u);
  EXPECT_EQ(t.throttled_usec, 42u);
}

TEST(Cgroup, V1QuotaFromTheCpuController) {
  TempDir root;
  root.Write("cpu,cpuacct/job/cpu.cfs_quota_us", "25000\n");
  root.Write("cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
  root.Write("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  root.Write("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  root.Write("cpu,cpuacct/job/cpu.stat",
             "nr_periods 9\nnr_throttled 4\nthrottled_time 7000000\n");
  const CgroupCpu cg =
      ReadCgroupCpu("4:memory:/job\n3:cpu,cpuacct:/job\n0::/\n", root.path);
  EXPECT_EQ(cg.version, 1);
  EXPECT_DOUBLE_EQ(cg.quota_cpus, 0.25);
  const CpuThrottle t = ReadCpuThrottle(cg);
  ASSERT_TRUE(t.ok);
  EXPECT_EQ(t.nr_throttled, 4u);
  EXPECT_EQ(t.throttled_usec, 7000u);  // throttled_time is ns in v1
  EXPECT_TRUE(CgroupJson(cg)["cpu_quota_cpus"].is_number());
}

// Issue 36: a container without a cgroup namespace. /proc/self/cgroup names
// the host's path, but the container's /sys/fs/cgroup is its own cgroup: the
// quota was found (the walk up reaches the mount root) while cpu.stat was read
// from a directory that does not exist, so rows lost nr_throttled.
TEST(Cgroup, V2NoNamespaceReadsTheMountRoot) {
  TempDir root;
  root.Write("cpu.max", "50000 100000\n");
  root.Write("cpu.stat", "usage_usec 10\nnr_throttled 7\nthrottled_usec 9\n");
  const CgroupCpu cg =
      ReadCgroupCpu("0::/system.slice/docker-0123abcd.scope\n", root.path);
  EXPECT_DOUBLE_EQ(cg.quota_cpus, 0.5);
  EXPECT_EQ(cg.dir, root.path);
  EXPECT_NE(cg.dir_note, "");
  const CpuThrottle t = ReadCpuThrottle(cg);
  ASSERT_TRUE(t.ok) << cg.dir;
  EXPECT_EQ(t.nr_throttled, 7u);
  EXPECT_EQ(t.throttled_usec, 9u);
}

TEST(Cgroup, V1NoNamespaceReadsTheMountRoot) {
  TempDir root;
  root.Write("cpu,cpuacct/cpu.cfs_quota_us", "150000\n");
  root.Write("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  root.Write("cpu,cpuacct/cpu.stat",
             "nr_periods 9\nnr_throttled 4\nthrottled_time 7000000\n");
  const CgroupCpu cg = ReadCgroupCpu(
      "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n", root.path);
  EXPECT_DOUBLE_EQ(cg.quota_cpus, 1.5);
  const CpuThrottle t = ReadCpuThrottle(cg);
  ASSERT_TRUE(t.ok);
  EXPECT_EQ(t.nr_throttled, 4u);
}

TEST(Cgroup, MountinfoRootIsStrippedFromThePath) {
  // The mount shows /docker/abc of the hierarchy; the process is in its child
  // "job": its counters are ROOT/job's, not the mount root's.
  TempDir root;
  root.Write("cpu.max", "max 100000\n");
  root.Write("cpu.stat", "nr_throttled 1\nthrottled_usec 1\n");
  root.Write("job/cpu.max", "25000 100000\n");
  root.Write("job/cpu.stat", "nr_throttled 5\nthrottled_usec 6\n");
  const std::string mountinfo =
      "22 1 0:21 / /proc rw - proc proc rw\n"
      "30 25 0:26 /docker/abc " +
      root.path + " ro,nosuid - cgroup2 cgroup2 rw\n";
  const CgroupCpu cg =
      ReadCgroupCpu("0::/docker/abc/job\n", root.path, mountinfo);
  EXPECT_EQ(cg.dir, root.path + "/job");
  EXPECT_EQ(cg.dir_note, "");
  EXPECT_DOUBLE_EQ(cg.quota_cpus, 0.25);
  EXPECT_EQ(ReadCpuThrottle(cg).nr_throttled, 5u);
  EXPECT_EQ(CgroupJson(cg)["stat_dir"], root.path + "/job");
}

TEST(Cgroup, NoQuotaAndGarbage) {
  TempDir root;
  root.Write("x/cpu.max", "max 100000\n");
  EXPECT_EQ(ReadCgroupCpu("0::/x\n", root.path).quota_cpus, 0);
  EXPECT_TRUE(CgroupJson(ReadCgroupCpu("0::/x\n", root.path))["cpu_quota_cpus"]
                  .is_null());
  EXPECT_EQ(ReadCgroupCpu("garbage", root.path).version, 0);
  EXPECT_FALSE(ParseCpuStat("nr_periods 3\n").ok);
  EXPECT_FALSE(ReadCpuThrottle(CgroupCpu{}).ok);
}

// ---- run directories and temporary files
// ----------------------------------------

TEST(RunDirectory, ClaimedExclusively) {
  TempDir tmp;
  const std::string dir = tmp.path + "/run";
  ResultFile first(dir);
  EXPECT_THROW(ResultFile second(dir), RunDirTaken);
  // An empty directory made by the user is fine.
  fs::create_directories(tmp.path + "/empty");
  EXPECT_NO_THROW(ResultFile third(tmp.path + "/empty"));
}

TEST(RunDirectory, PlantedSymlinkIsNeverFollowed) {
  TempDir tmp;
  tmp.Write("victim", "precious");
  fs::create_directories(tmp.path + "/run");
  fs::create_symlink(tmp.path + "/victim", tmp.path + "/run/lockline.json");
  EXPECT_THROW(ResultFile r(tmp.path + "/run"), RunDirTaken);
  std::ifstream in(tmp.path + "/victim");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "precious");
}

TEST(RunDirectory, AtomicWriteLeavesNoTemporaryFile) {
  TempDir tmp;
  WriteFileAtomically(tmp.path + "/f.json", "{}\n");
  WriteFileAtomically(tmp.path + "/f.json", "{\"a\": 1}\n");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tmp.path))
    names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"f.json"});
  EXPECT_EQ(fs::status(tmp.path + "/f.json").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write |
                fs::perms::group_read | fs::perms::others_read);
  EXPECT_THROW(WriteFileAtomically(tmp.path + "/no/such/dir/f", "x"),
               std::runtime_error);
}

// ---- thread creation failure
// ----------------------------------------------------

TEST(ThreadTeamLimits, CreationFailureTearsDownAndNamesTheThread) {
  // In a child: a 512 MiB address-space limit leaves room for a few dozen
  // 8 MiB thread stacks, not 1000. The parent waits at most 60 s (a hang
  // fails the test instead of blocking ctest).
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(60);
    rlimit lim{512ull << 20, 512ull << 20};
    setrlimit(RLIMIT_AS, &lim);
    try {
      ThreadTeam team(nullptr, std::vector<int>(1000, -1), nullptr);
      _exit(10);  // no failure: the limit did not bite
    } catch (const std::exception& e) {
      const std::string what = e.what();
      _exit(Contains(what, "cannot create thread") && Contains(what, "EAGAIN")
                ? 0
                : 11);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status))
      << "child killed by signal "
      << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace lockline
