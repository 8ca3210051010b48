// Tests of the kernel_* families (issue 18) and their harness pieces
// (harness/measure/kernel_probe.h, harness/machine/restore.h): exact op
// accounting (minor faults == pages touched, bytes received == bytes sent,
// memfds empty after truncate / punch), contention tracepoints read when
// tracefs has lock:contention_begin (skipped with the reason elsewhere), the
// parsers of /proc/zoneinfo, kallsyms and kernel config text, callchain
// attribution, and RestoreAll writing registered values back. Windows are short
// (50-100 ms); no speed is asserted.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "bench/kernel_lru.cpp"
#include "bench/kernel_put_page.cpp"
#include "bench/kernel_zone.cpp"
#include "harness/machine/restore.h"
#include "harness/measure/kernel_probe.h"
#include "tests/workload_driver.h"

namespace lockline {
namespace {

// As root, the probes mount tracefs at /sys/kernel/tracing when nothing is
// mounted there (harness/measure/kernel_probe.cpp), as a lockline run does;
// lockline unmounts it when the run ends, and this binary does the same when
// its tests end, so a test run leaves the machine as found (issue 27: before,
// ctest left tracefs mounted on the host).
class TracefsAsFound : public ::testing::Environment {
 public:
  void SetUp() override { WatchTracefsMount(); }
  void TearDown() override { UnmountWhatLocklineMounted(); }
};
[[maybe_unused]] ::testing::Environment* const kTracefsAsFound =
    ::testing::AddGlobalTestEnvironment(new TracefsAsFound);

using kernel_tasks::Tasks;
using testing::MetricOf;

struct Result {
  uint64_t ops = 0;
  std::string verify;
  PointReport report;
};

Result Drive(Workload& wl, int threads, int windows = 2,
             double seconds = 0.05) {
  Result r;
  testing::WorkloadDriver drv(wl, threads);
  for (int w = 0; w < windows; ++w) r.ops += drv.Window(seconds);
  drv.Teardown();
  r.report = drv.Report(drv.seconds(), drv.ops());
  r.verify = wl.Verify();
  return r;
}

TEST(KernelLru, AnonFaultsEqualPagesTouchedThreadsAndProcesses) {
  for (Tasks t : {Tasks::kThreads, Tasks::kProcesses}) {
    for (int threads : {1, 2}) {
      kernel_lru::LruWorkload wl({kernel_lru::Case::kAnonFault, false, 256, t},
                                 threads);
      const Result r = Drive(wl, threads);
      EXPECT_EQ(r.verify, "") << kernel_tasks::TasksName(t) << " " << threads;
      EXPECT_GT(r.ops, 0u);
      const auto s = wl.Total();
      EXPECT_EQ(s.pages, r.ops);
      // Exact up to a few faults per task window (stack, libc).
      EXPECT_GE(s.minflt, s.pages);
      EXPECT_LE(s.minflt, s.pages + 8u * 2u * static_cast<uint64_t>(threads));
      EXPECT_GT(MetricOf(r.report, "pages_per_s"), 0);
    }
  }
}

TEST(KernelLru, FileCasesReleaseEveryPage) {
  struct C {
    kernel_lru::Case c;
    bool shared;
  };
  for (C c : {C{kernel_lru::Case::kFileTruncate, false},
              C{kernel_lru::Case::kFilePunch, false},
              C{kernel_lru::Case::kFilePunch, true}}) {
    for (Tasks t : {Tasks::kThreads, Tasks::kProcesses}) {
      kernel_lru::LruWorkload wl({c.c, c.shared, 256, t}, 2);
      const Result r = Drive(wl, 2);
      EXPECT_EQ(r.verify, "") << kernel_lru::CaseName(c.c);
      const auto s = wl.Total();
      EXPECT_GT(s.pages, 0u);
      EXPECT_EQ(s.bytes_sent, s.pages * kernel_tasks::kPage);
    }
  }
}

// A task out of phase (issue 40 item 10): after priming, every cycle faults
// in and frees exactly one batch, and leaves the next batch open with its
// first `offset` pages faulted in; at offset 0 it is AnonFaultBatch.
TEST(KernelTasks, PhasedCycleFaultsAndFreesOneBatchAndLeavesItsPhaseOpen) {
  constexpr std::size_t kPages = 1024, kOffset = 256;
  char err[160] = {};
  kernel_tasks::PhasedBatch b;
  ASSERT_TRUE(
      kernel_tasks::PrimePhasedBatch(b, kPages, kOffset, err, sizeof err))
      << err;
  ASSERT_NE(b.map, nullptr);
  EXPECT_EQ(b.touched, kOffset);
  const auto resident = [&](std::size_t from, std::size_t to) {
    std::vector<unsigned char> v(kPages);
    EXPECT_EQ(mincore(b.map, kPages * kernel_tasks::kPage, v.data()), 0);
    std::size_t n = 0;
    for (std::size_t i = from; i < to; ++i) n += v[i] & 1;
    return n;
  };
  EXPECT_EQ(resident(0, kOffset), kOffset);
  EXPECT_EQ(resident(kOffset, kPages), 0u);
  for (int cycle = 0; cycle < 3; ++cycle) {
    char* const open = b.map;
    rusage a{}, z{};
    getrusage(RUSAGE_THREAD, &a);
    const uint64_t n =
        kernel_tasks::PhasedAnonFaultCycle(b, kPages, kOffset, err, sizeof err);
    getrusage(RUSAGE_THREAD, &z);
    EXPECT_EQ(n, kPages) << err;
    const long faults = z.ru_minflt - a.ru_minflt;
    EXPECT_GE(faults, static_cast<long>(kPages));
    EXPECT_LE(faults,
              static_cast<long>(kPages + kernel_tasks::kFaultSlackPerWindow));
    ASSERT_NE(b.map, nullptr);
    EXPECT_EQ(b.touched, kOffset);
    EXPECT_EQ(resident(0, kOffset), kOffset);
    EXPECT_EQ(resident(kOffset, kPages), 0u);
    // The batch the cycle opened with is gone (its pages freed).
    unsigned char v = 0;
    if (open != b.map) {
      EXPECT_EQ(mincore(open, kernel_tasks::kPage, &v), -1);
    }
  }
  kernel_tasks::ReleasePhasedBatch(b, kPages);
  EXPECT_EQ(b.map, nullptr);
  // Offset 0: one whole batch mapped, faulted and unmapped, nothing left.
  EXPECT_EQ(kernel_tasks::PhasedAnonFaultCycle(b, kPages, 0, err, sizeof err),
            kPages);
  EXPECT_EQ(b.map, nullptr);
}

// Two tasks run half a batch apart, as threads and as processes (the child
// primes its own batch), and the fault accounting stays exact.
TEST(KernelZone, TwoTasksRunHalfABatchApart) {
  for (Tasks t : {Tasks::kThreads, Tasks::kProcesses}) {
    kernel_zone::ZoneWorkload wl({"default", t}, 2);
    wl.SetEvidenceWindows(0);
    const Result r = Drive(wl, 2, 2, 0.1);
    EXPECT_EQ(r.verify, "") << kernel_tasks::TasksName(t);
    const auto& off = r.report.details["task_phase_pages"];
    ASSERT_EQ(off.size(), 2u) << r.report.details.dump();
    EXPECT_EQ(off[0], 0u);
    EXPECT_EQ(off[1].get<std::size_t>(), wl.batch_pages() / 2 / 64 * 64);
    EXPECT_EQ(r.report.details["task_phase_seed"], 0u);  // no repetition
    const auto s = wl.Total();
    EXPECT_EQ(s.pages, 2u * 2u * wl.batch_pages())
        << kernel_tasks::TasksName(t);
    EXPECT_GE(s.minflt, s.pages);
    EXPECT_LE(s.minflt, s.pages + 8u * 4u);
  }
  // In a repetition the phases are drawn from its layout seed (issue 50).
  LayoutSampling sampling(4242);
  kernel_zone::ZoneWorkload wl({"default", Tasks::kThreads}, 2);
  wl.SetEvidenceWindows(0);
  const Result r = Drive(wl, 2, 1, 0.1);
  EXPECT_EQ(r.verify, "");
  EXPECT_EQ(r.report.details["task_phase_seed"], 4242u);
  for (const auto& off : r.report.details["task_phase_pages"]) {
    EXPECT_LT(off.get<std::size_t>(), wl.batch_pages());
    EXPECT_EQ(off.get<std::size_t>() % 64, 0u);
  }
}

TEST(KernelZone, BatchesOverflowPcpHighAndFaultsAreExact) {
  kernel_zone::ZoneWorkload wl({"default", Tasks::kThreads}, 2);
  const Result r = Drive(wl, 2, 2, 0.1);
  EXPECT_EQ(r.verify, "");
  // pcp high auto-tunes (6.7+): compare with the zone state the point saw.
  const auto& pcp = r.report.details["pcp_at_prepare"];
  const std::string zone = r.report.details.value("main_zone", "");
  if (!zone.empty()) {
    const uint64_t high =
        std::max<uint64_t>(pcp[zone]["high_max_over_cpus"].get<uint64_t>(),
                           pcp[zone].value("high_max", uint64_t{0}));
    const std::string note = r.report.details.value("size_note", "");
    if (note.empty()) {
      EXPECT_GE(wl.batch_pages(), 2 * high);
    } else {  // capped by memory: the row must say whether it still overflows
      EXPECT_EQ(note.find("not above pcp high") != std::string::npos,
                wl.batch_pages() <= high)
          << note;
    }
  }
  const auto s = wl.Total();
  EXPECT_GE(s.minflt, s.pages);
  EXPECT_LE(s.minflt, s.pages + 8u * 4u);
  ASSERT_TRUE(r.report.details.contains("kernel"));
  EXPECT_TRUE(r.report.details["kernel"].contains("pcp"));
}

TEST(KernelZone, HighFractionIsRestoredOrNeedsRoot) {
  const std::string before = ReadSmallFile(kernel_zone::kFractionPath);
  if (before.empty()) GTEST_SKIP() << "no " << kernel_zone::kFractionPath;
  {
    kernel_zone::ZoneWorkload wl({"1024", Tasks::kProcesses}, 1);
    const Result r = Drive(wl, 1, 1, 0.05);
    if (geteuid() != 0) {
      EXPECT_NE(r.verify.find("needs root"), std::string::npos) << r.verify;
    } else {
      EXPECT_EQ(r.verify, "");
      EXPECT_EQ(r.report.details.value("high_fraction", ""), "1024");
    }
  }  // destructor restores
  EXPECT_EQ(ReadSmallFile(kernel_zone::kFractionPath), before);
  EXPECT_EQ(RestorePending(), 0);
}

// Issue 27 item 2: the value is re-read after the windows, and a row measured
// while another process moved vm.percpu_pagelist_high_fraction says so
// (before: the row claimed one setting it did not have).
TEST(KernelZone, RowSaysWhenHighFractionMovedDuringWindows) {
  const std::string before = ReadSmallFile(kernel_zone::kFractionPath);
  if (before.empty()) GTEST_SKIP() << "no " << kernel_zone::kFractionPath;
  if (geteuid() != 0) GTEST_SKIP() << "writing the sysctl needs root";
  const std::string other = before.rfind("1024", 0) == 0 ? "2048" : "1024";
  struct PutBack {  // whatever happens below, the machine is left as found
    std::string value;
    ~PutBack() { kernel_zone::WriteProc(kernel_zone::kFractionPath, value); }
  } put_back{before};
  kernel_zone::ZoneWorkload wl({"default", Tasks::kThreads}, 1);
  testing::WorkloadDriver drv(wl, 1);
  drv.Window(0.05);
  // Another process (a second run, a tuning daemon) changes it now.
  ASSERT_EQ(kernel_zone::WriteProc(kernel_zone::kFractionPath, other), "");
  drv.Window(0.05);
  drv.Teardown();
  const PointReport report = drv.Report(drv.seconds(), drv.ops());
  const std::string moved = report.details.value("high_fraction_moved", "");
  EXPECT_NE(moved.find("another process changed it"), std::string::npos)
      << report.details.dump();
  EXPECT_NE(moved.find(other), std::string::npos) << moved;
}

// SIGTERM in the middle of a sweep point: the harness's handler puts
// vm.percpu_pagelist_high_fraction back (harness/machine/restore.h) before
// exiting.
TEST(KernelZone, SigtermRestoresHighFraction) {
  if (geteuid() != 0)
    GTEST_SKIP() << "needs root to write " << kernel_zone::kFractionPath;
  const std::string before = ReadSmallFile(kernel_zone::kFractionPath);
  if (before.empty()) GTEST_SKIP() << "no " << kernel_zone::kFractionPath;
  if (before == "8") GTEST_SKIP() << "the sysctl is already 8";
  char dir[] = "/tmp/lockline-sigterm-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string out = std::string("--out=") + dir + "/run";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execl(LOCKLINE_BINARY, LOCKLINE_BINARY, "--full",
          "--benchmark_filter=^kernel_zone/batch:2xhigh/high_fraction:8/"
          "tasks:threads/threads:1",
          "--window=30s", "--benchmark_repetitions=1", out.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  bool seen = false;
  for (int i = 0; i < 1200 && !seen; ++i) {  // up to 60 s
    seen = ReadSmallFile(kernel_zone::kFractionPath) == "8";
    if (!seen) usleep(50'000);
  }
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(seen) << "lockline never set the sysctl to 8";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 143)
      << status;  // 128 + SIGTERM
  EXPECT_EQ(ReadSmallFile(kernel_zone::kFractionPath), before);
  std::filesystem::remove_all(dir);
}

TEST(KernelPutPage, BytesReceivedEqualBytesSent) {
  for (Tasks t : {Tasks::kThreads, Tasks::kProcesses}) {
    for (int threads : {1, 2, 3}) {
      kernel_put_page::PutPageWorkload wl(t, threads, 16384);
      const Result r = Drive(wl, threads);
      EXPECT_EQ(r.verify, "") << kernel_tasks::TasksName(t) << " " << threads;
      const auto s = wl.Total();
      EXPECT_GT(s.bytes_sent, 0u);
      EXPECT_EQ(s.bytes_received, s.bytes_sent);
      EXPECT_GT(s.checked, 0u);
      EXPECT_EQ(MetricOf(r.report, "bytes_received"),
                MetricOf(r.report, "bytes_sent"));
      EXPECT_GT(MetricOf(r.report, "MB_per_s"), 0);
    }
  }
}

// A kernel_* workload whose tasks sleep through each window but claim
// `claimed` pages per window for task 1: the Report / Verify skeleton shared
// by the three families (kernel_tasks::KernelFamilyWorkload) is tested on it.
class ClaimsPages : public kernel_tasks::KernelFamilyWorkload {
 public:
  ClaimsPages(int threads, uint64_t claimed)
      : KernelFamilyWorkload(Tasks::kThreads, threads), claimed_(claimed) {}
  kernel_tasks::TaskWindow RunOps(int index,
                                  const std::atomic<bool>& stop) override {
    const timespec nap{0, 1'000'000};
    while (!stop.load(std::memory_order_relaxed)) nanosleep(&nap, nullptr);
    kernel_tasks::TaskWindow r;
    r.ops = r.pages = index == 1 ? claimed_ : 0;
    return r;
  }
  int point_checks = 0;  ///< VerifyPoint calls

 protected:
  void ReportFamily(PointReport& out, const kernel_tasks::TaskWindow& total,
                    double window_seconds) override {
    ReportPagesPerSecond(out, total, window_seconds);
  }
  std::string VerifyTask(int index,
                         const kernel_tasks::TaskWindow& task) override {
    return CheckFaultsPerPage(index, task);
  }
  std::string VerifyPoint() override {
    ++point_checks;
    return "";
  }

 private:
  uint64_t claimed_;
};

// The family's metrics come first, then ReportCommon's; Verify stops at the
// first task whose minor faults do not cover its pages, and checks the point
// only once every task passed.
TEST(KernelFamilyWorkload, ReportsFamilyFirstAndVerifiesTasksThenPoint) {
  {
    ClaimsPages wl(2, 0);
    const Result r = Drive(wl, 2);
    EXPECT_EQ(r.verify, "");
    EXPECT_EQ(wl.point_checks, 1);
    ASSERT_FALSE(r.report.metrics.empty());
    EXPECT_EQ(r.report.metrics.front().first, "pages_per_s");
    EXPECT_EQ(MetricOf(r.report, "pages_per_s"), 0);
    EXPECT_TRUE(r.report.details.contains("per_task"));
  }
  {
    ClaimsPages wl(2, 1000);
    const Result r = Drive(wl, 2);
    EXPECT_EQ(r.verify.rfind("task 1: ", 0), 0u) << r.verify;
    // 2 timed windows + 2 evidence windows (one before, one after) of 1000
    // pages each: exact accounting covers both kinds.
    EXPECT_NE(r.verify.find("for 4000 pages touched"), std::string::npos)
        << r.verify;
    EXPECT_EQ(wl.point_checks, 0);
    EXPECT_GT(MetricOf(r.report, "pages_per_s"), 0);
  }
}

// lock:contention_begin is counted when tracefs has it (kernel 5.19+, root);
// elsewhere the row says why and the test is skipped with that reason.
TEST(KernelProbe, ContentionTracepointsAreRead) {
  const kernel::TracepointInfo& tp = kernel::ContentionTracepoints();
  if (!tp.available()) GTEST_SKIP() << tp.reason;
  kernel::TaskContention tc;
  const std::string why = tc.Open(0, 1, 100'000);
  if (!why.empty()) GTEST_SKIP() << why;
  ASSERT_TRUE(tc.counting());
  kernel::ContentionTally tally;
  tc.Enable();
  tc.Disable();
  tc.Collect(tally);
  // Through a family: two tasks faulting in one mm contend on its locks and
  // the row carries the counts (their number is the kernel's business: only
  // that they were read is asserted).
  kernel_zone::ZoneWorkload wl({"default", Tasks::kThreads}, 2);
  const Result r = Drive(wl, 2, 2, 0.1);
  EXPECT_EQ(r.verify, "");
  const auto& k = r.report.details["kernel"];
  EXPECT_EQ(k["sources"]["tracepoints"], "measured") << k.dump();
  EXPECT_TRUE(k.contains("contention_begin"));
  EXPECT_GE(MetricOf(r.report, "kernel_contention_per_op"), 0);
  EXPECT_EQ(k["sources"]["vmstat"], "measured");
  EXPECT_GT(k["vmstat_delta"].value("pgfault", 0), 0);
  if (k["sources"]["callchains"] == "measured") {
    const auto& a = k["attribution"];
    EXPECT_EQ(a["zone_lock"].get<uint64_t>() + a["lru_lock"].get<uint64_t>() +
                  a["other"].get<uint64_t>(),
              k["samples"].get<uint64_t>());
  }
}

TEST(KernelProbe, ClassifiesChainsByTheFunctionTakingTheLock) {
  std::string caller;
  EXPECT_EQ(kernel::ClassifyChain(
                {"perf_trace_contention_begin", "queued_spin_lock_slowpath",
                 "_raw_spin_lock_irqsave", "rmqueue_bulk", "__rmqueue_pcplist",
                 "get_page_from_freelist"},
                &caller),
            kernel::LockClass::kZone);
  EXPECT_EQ(caller, "rmqueue_bulk");
  EXPECT_EQ(kernel::ClassifyChain(
                {"queued_spin_lock_slowpath", "_raw_spin_lock_irqsave",
                 "folio_lruvec_lock_irqsave", "folio_batch_move_lru",
                 "lru_add_drain"},
                &caller),
            kernel::LockClass::kLru);
  EXPECT_EQ(caller, "folio_lruvec_lock_irqsave");
  EXPECT_EQ(kernel::ClassifyChain({"rwsem_down_write_slowpath",
                                   "down_write_killable", "vm_mmap_pgoff"},
                                  &caller),
            kernel::LockClass::kOther);
  EXPECT_EQ(caller, "vm_mmap_pgoff");
  EXPECT_TRUE(kernel::IsSpinChain({"native_queued_spin_lock_slowpath",
                                   "_raw_spin_lock_irqsave", "rmqueue_bulk"}));
  EXPECT_FALSE(kernel::IsSpinChain(
      {"_raw_spin_lock", "__pte_offset_map_lock", "do_anonymous_page"}));
  EXPECT_EQ(kernel::ClassifyChain({}, &caller), kernel::LockClass::kOther);
  EXPECT_EQ(caller, "");
}

TEST(KernelProbe, ParsesZoneinfoKallsymsAndConfig) {
  const std::string zi =
      "Node 0, zone      DMA\n  pages free     3840\n        managed  3840\n"
      "  pagesets\n    cpu: 0\n              count:    0\n"
      "              high:     0\n              batch:    1\n"
      "Node 0, zone   Normal\n  pages free     43965\n        min      9955\n"
      "        managed  1114112\n  pagesets\n    cpu: 0\n"
      "              count:    3811\n              high:     6221\n"
      "              batch:    63\n              high_min: 6221\n"
      "              high_max: 69632\n  vm stats threshold: 28\n    cpu: 1\n"
      "              count:    1888\n              high:     7000\n"
      "              batch:    63\n  vm stats threshold: 28\n"
      "Node 0, zone  Movable\n  pages free     0\n        managed  0\n";
  const auto zones = kernel::ParseZonePcp(zi);
  ASSERT_EQ(zones.size(), 2u);
  const kernel::ZonePcp* z = kernel::MainZone(zones);
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z->zone, "Normal");
  EXPECT_EQ(z->high, 6221u);
  EXPECT_EQ(z->batch, 63u);
  EXPECT_EQ(z->high_max_cpu, 7000u);
  EXPECT_EQ(z->high_max, 69632);
  // 6.7+: sized from high_max (69632), the bound high auto-tunes towards.
  EXPECT_EQ(kernel_zone::BatchPages(zones), 2u * 69632u);

  const kernel::KernelSymbols syms(
      "ffffffff81000000 T _text\nffffffff81631e20 t free_one_page\n"
      "ffffffff816327f0 t free_pcppages_bulk\nffffffff81700000 D data\n");
  ASSERT_TRUE(syms.usable());
  EXPECT_EQ(syms.Lookup(0xffffffff81632800ull), "free_pcppages_bulk");
  EXPECT_EQ(syms.Lookup(0xffffffff81631e21ull), "free_one_page");
  EXPECT_EQ(syms.Lookup(0x1000), "?");
  EXPECT_FALSE(kernel::KernelSymbols("0000000000000000 T _text\n").usable());

  const auto cfg = kernel::KernelConfigFromText(
      "CONFIG_NR_CPUS=256\nCONFIG_MEMCG=y\n# CONFIG_LOCK_STAT is not set\n"
      "CONFIG_TRANSPARENT_HUGEPAGE=y\n");
  EXPECT_EQ(cfg["CONFIG_NR_CPUS"], "256");
  EXPECT_EQ(cfg["CONFIG_MEMCG"], "y");
  EXPECT_EQ(cfg["CONFIG_LOCK_STAT"], "n");
  EXPECT_EQ(cfg["CONFIG_CMA"], "n");
  const auto live = kernel::KernelConfig();
  EXPECT_TRUE(live.contains("release"));
  EXPECT_TRUE(live.contains("CONFIG_NR_CPUS") || live.contains("reason"));
}

TEST(Restore, RestoreAllWritesOldValuesBackOnce) {
  char dir[] = "/tmp/lockline-restore-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/knob";
  std::ofstream(path) << "new";
  RegisterRestore(path, "old\n");
  RegisterRestore(path, "newer\n");  // first value wins
  EXPECT_EQ(RestorePending(), 1);
  RestoreAll();
  EXPECT_EQ(ReadSmallFile(path), "old");
  EXPECT_EQ(RestorePending(), 0);
  std::ofstream(path) << "changed";
  RestoreAll();  // nothing left to restore
  EXPECT_EQ(ReadSmallFile(path), "changed");
  std::remove(path.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace lockline

namespace lockline {
namespace {

// ---------------------------------------------------------------------------
// Issue 28 / issue 27: clean timed windows, evidence windows apart, a parent
// that blocks, and children whose death is an error row.
// ---------------------------------------------------------------------------

// A 1-task tasks:processes anon_fault point with 1 MiB batches.
std::unique_ptr<kernel_lru::LruWorkload> ProcessesPoint(int threads,
                                                        int evidence) {
  auto wl = std::make_unique<kernel_lru::LruWorkload>(
      kernel_lru::Config{kernel_lru::Case::kAnonFault, false, 256,
                         Tasks::kProcesses},
      threads);
  wl->SetEvidenceWindows(evidence);
  return wl;
}

// The tasks:processes parent sleeps through a child's window (it used to wake
// every 200 us on the child's PU: ~1500 voluntary switches in 0.3 s).
TEST(KernelTasks, ProcessesParentBlocksThroughTheWindow) {
  auto wl = ProcessesPoint(1, 0);
  testing::WorkloadDriver drv(*wl, 1);
  rusage a{}, b{};
  getrusage(RUSAGE_SELF, &a);
  drv.Window(0.3);
  getrusage(RUSAGE_SELF, &b);
  drv.Teardown();
  const long switches = b.ru_nvcsw - a.ru_nvcsw;
  EXPECT_LT(switches, 100) << "the parent woke " << switches
                           << " times in a 0.3 s window";
  EXPECT_EQ(wl->Verify(), "");
}

// A child killed between windows: the next window's request meets a dead
// socket; the parent must not die of SIGPIPE (it used to: exit 141) but fail
// the point with how the child died.
TEST(KernelTasks, ChildKilledBetweenWindowsIsAnErrorNotSigpipe) {
  auto wl = ProcessesPoint(2, 0);
  testing::WorkloadDriver drv(*wl, 2);
  drv.Window(0.05);
  const pid_t child = wl->ChildPid(1);
  ASSERT_GT(child, 0);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  usleep(100'000);
  try {
    drv.Window(0.05);
    ADD_FAILURE() << "a dead child went unnoticed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("task died: signal 9"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("task 1"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(wl->ChildPid(1), -1);  // reaped
}

// A child killed while it works: the parent sees EOF at once (not at the
// window's end) and names the signal.
TEST(KernelTasks, ChildKilledMidWindowIsAnError) {
  auto wl = ProcessesPoint(1, 0);
  testing::WorkloadDriver drv(*wl, 1);
  const pid_t child = wl->ChildPid(0);
  ASSERT_GT(child, 0);
  std::thread killer([child] {
    usleep(100'000);
    kill(child, SIGKILL);
  });
  std::string what;
  try {
    drv.Window(1.0);
  } catch (const std::runtime_error& e) {
    what = e.what();
  }
  killer.join();
  EXPECT_NE(what.find("task died: signal 9 (Killed)"), std::string::npos)
      << what;
}

std::atomic<int> g_sigint_seen{0};
void CountSigint(int) { g_sigint_seen.fetch_add(1); }

// A child inherits the parent's SIGINT handler (lockline's restores sysctls
// and prints "interrupted"); a SIGINT to one child must kill that child only,
// and the parent report it.
TEST(KernelTasks, SigintToAChildKillsOnlyThatChild) {
  struct sigaction sa {
  }, old{};
  sa.sa_handler = CountSigint;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGINT, &sa, &old), 0);
  g_sigint_seen = 0;
  std::string what;
  {
    auto wl = ProcessesPoint(1, 0);
    testing::WorkloadDriver drv(*wl, 1);
    const pid_t child = wl->ChildPid(0);
    std::thread sender([child] {
      usleep(100'000);
      kill(child, SIGINT);
    });
    try {
      drv.Window(0.5);
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    sender.join();
  }
  sigaction(SIGINT, &old, nullptr);
  EXPECT_NE(what.find("task died: signal 2"), std::string::npos) << what;
  EXPECT_EQ(g_sigint_seen.load(), 0);
}

// A child that stops answering (SIGSTOP) is killed after the report limit and
// the point fails; the parent used to wait in poll() forever.
TEST(KernelTasks, HungChildIsKilledAfterTheReportLimit) {
  auto wl = ProcessesPoint(1, 0);
  testing::WorkloadDriver drv(*wl, 1);
  const pid_t child = wl->ChildPid(0);
  std::thread stopper([child] {
    usleep(20'000);
    kill(child, SIGSTOP);
  });
  std::string what;
  const uint64_t t0 = NowNs();
  try {
    drv.Window(0.1);
  } catch (const std::runtime_error& e) {
    what = e.what();
  }
  stopper.join();
  EXPECT_NE(what.find("did not report within 2000 ms (killed)"),
            std::string::npos)
      << what;
  EXPECT_LT(NowNs() - t0, 20'000'000'000ull);
}

std::string SocketInode(pid_t pid, int fd) {
  char buf[128] = {};
  const std::string link =
      "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
}

// A child holds its own socket end only: not the parent's end of an earlier
// sibling's (with pipes, a later child kept an earlier child's command pipe
// open).
TEST(ChildTask, ChildrenCloseTheirSiblingsSockets) {
  child_task::ChildTask<int> a, b;
  ASSERT_EQ(a.Start([] { return 1; }), "");
  ASSERT_EQ(b.Start([] { return 2; }), "");
  const std::string a_end = SocketInode(getpid(), a.fd());
  ASSERT_NE(a_end.find("socket:"), std::string::npos) << a_end;
  int r = 0;
  ASSERT_EQ(b.Request(), "");
  ASSERT_EQ(b.AwaitFor(&r, 5000), "");  // b is past its hygiene
  EXPECT_EQ(r, 2);
  const std::string dir = "/proc/" + std::to_string(b.pid()) + "/fd";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const int fd = std::stoi(e.path().filename().string());
    EXPECT_NE(SocketInode(b.pid(), fd), a_end)
        << "child b holds the parent's end of child a's socket as fd " << fd;
  }
  a.Stop();
  b.Stop();
}

// Timed windows carry no evidence; evidence windows (one before, one after)
// do, and the row compares their throughput with the clean windows'.
TEST(KernelTasks, EvidenceWindowsAreSeparateAndCompared) {
  kernel_lru::LruWorkload wl(
      {kernel_lru::Case::kAnonFault, false, 256, Tasks::kThreads}, 1);
  const Result r = Drive(wl, 1, 3, 0.05);
  EXPECT_EQ(r.verify, "");
  const auto& e = r.report.details["evidence"];
  EXPECT_EQ(e["mode"], "separate windows");
  EXPECT_EQ(e["window_s"].size(), 2u);
  EXPECT_EQ(e["overhead"]["clean_windows"], 3u);
  EXPECT_EQ(e["overhead"]["evidence_windows"], 2u);
  EXPECT_GT(MetricOf(r.report, "evidence_ops_per_s"), 0);
  EXPECT_GT(MetricOf(r.report, "evidence_throughput_ratio"), 0);
  EXPECT_TRUE(e["overhead"]["ci95"].is_array());
  // Clean totals are the timed windows' only: pages == ops of the 3 windows.
  EXPECT_EQ(wl.Total().pages, r.ops);
}

TEST(KernelTasks, EvidenceOffOpensNothing) {
  kernel_lru::LruWorkload wl(
      {kernel_lru::Case::kAnonFault, false, 256, Tasks::kThreads}, 1);
  wl.SetEvidenceWindows(0);
  const Result r = Drive(wl, 1, 2, 0.05);
  EXPECT_EQ(r.verify, "");
  EXPECT_EQ(r.report.details["evidence"]["mode"], "off");
  EXPECT_EQ(r.report.details["kernel"]["sources"]["tracepoints"], "off");
  for (const auto& [k, v] : r.report.metrics) {
    EXPECT_NE(k, "kernel_contention_per_op");
    EXPECT_NE(k, "evidence_ops_per_s");
  }
}

// The overhead's interval: none with one window a side, a ratio below 1 with
// an interval under 1 when evidence windows are clearly slower.
TEST(KernelTasks, EvidenceOverheadInterval) {
  auto j = kernel_tasks::EvidenceOverhead({100, 102, 98}, {50});
  EXPECT_TRUE(j["ci95"].is_null());
  EXPECT_FALSE(j["resolved"].get<bool>());
  j = kernel_tasks::EvidenceOverhead({100, 102, 98, 101}, {50, 51, 49});
  EXPECT_NEAR(j["ratio"].get<double>(), 0.5, 0.01);
  ASSERT_TRUE(j["ci95"].is_array());
  EXPECT_LT(j["ci95"][1].get<double>(), 1.0);
  EXPECT_GT(j["ci95"][0].get<double>(), 0.4);
  EXPECT_TRUE(j["resolved"].get<bool>());
}

// zone->lock holds are counted from the kmem tracepoints (root, tracefs):
// 64 MiB faulted in and unmapped by this thread overflows this machine's pcp
// lists, so both sides take the lock, and a hold moves at least one page.
TEST(KernelZone, CountsZoneLockAcquisitions) {
  kernel::ZoneLockCounter zl;
  const std::string why = zl.Open(0);
  if (!why.empty()) GTEST_SKIP() << why;
  std::atomic<bool> stop{false};
  char err[160] = {};
  // Batches of 2 x pcp high, as kernel_zone sizes them (at most 1 GiB): the
  // pcp list cannot absorb them, so refills and drains take zone->lock. A
  // fixed 64 MiB failed 4 times in 5 here: this 6.7+ kernel auto-tunes high to
  // ~46k pages and served every page from the pcp list.
  const std::size_t pages = std::clamp<std::size_t>(
      kernel_zone::BatchPages(kernel::ReadZonePcp()), 16384, 262144);
  zl.Enable();
  for (int i = 0; i < 2; ++i)
    kernel_tasks::AnonFaultBatch(pages, stop, err, sizeof err);
  zl.Disable();
  kernel::ZoneLockTally t;
  zl.Drain(t);
  EXPECT_GT(t.alloc_pages + t.drain_pages, 0u);
  // A hold moves many pages (6.18 here: refills of 2016, drains of 32+).
  EXPECT_GT(t.refills, 0u);
  EXPECT_LT(t.refills * 8, t.alloc_pages) << t.refills << " refills";
  EXPECT_LT(t.drains * 8, t.drain_pages) << t.drains << " drains";
  // Through the family: the row names the source and, when measured, counts.
  kernel_zone::ZoneWorkload wl({"default", Tasks::kThreads}, 1);
  const Result r = Drive(wl, 1, 1, 0.1);
  EXPECT_EQ(r.verify, "");
  const auto& k = r.report.details["kernel"];
  EXPECT_EQ(k["sources"]["zone_lock"], "measured") << k["sources"].dump();
  EXPECT_TRUE(k.contains("zone_lock"));
}

// CPU seconds this machine's other processes ran, from /proc/stat's user,
// nice and system jiffies less this process's (getrusage): the kernel's pcp
// lists are per CPU, shared with whatever else allocates there. Interrupt
// time is left out: it is charged to no process, and our own tasks' page
// work raised 1.5 s of softirq time in 6 repetitions here.
double OthersCpuSeconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double busy = 0, v = 0;
  in >> cpu;
  for (int i = 0; i < 3 && in >> v; ++i) busy += v;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const auto sec = [](timeval t) { return t.tv_sec + t.tv_usec / 1e6; };
  return busy / sysconf(_SC_CLK_TCK) - sec(ru.ru_utime) - sec(ru.ru_stime);
}

// Repetitions of one point count within 10 % (issue 50 item 5): holds are
// counted at the kernel's call boundaries (ZoneHoldStarts), not at a gap
// threshold, which moved from 2.0 to 92.7 us between repetitions (x2.9 in
// acquisitions per op; 11-51 % spreads at a pooled threshold), and the
// evidence cycle follows the timed one (evidence_after_timed). Quiet here,
// 2026-12-06, four runs spread 2.8 %, 4.7 %, 6.5 % and 4.7 % (214-220 holds
// of ~2016 pages a 409,600-page cycle); beside ctest, with 1.2 CPU-s of
// other work, 12 %. Each repetition is its own workload, as a run makes
// them; the first is a warm-up. Work of other processes refills and drains
// the same per-CPU lists, so with more than 0.1 CPU-s a repetition of it the
// test skips, saying so.
TEST(KernelZone, RepetitionsOfAPointCountWithinTenPercent) {
  // Pinned, as a run pins its tasks: a task that moves between CPUs frees
  // into two pcp lists and starts its next cycle with up to twice the pages
  // (27 refills instead of ~110 in one repetition here, unpinned).
  cpu_set_t was, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof was, &was), 0);
  CPU_ZERO(&one);
  for (int c = CPU_SETSIZE - 1; c >= 0; --c)
    if (CPU_ISSET(c, &was)) {
      CPU_SET(c, &one);
      break;
    }
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  struct Restore {
    cpu_set_t set;
    ~Restore() { sched_setaffinity(0, sizeof set, &set); }
  } restore{was};
  std::vector<double> per_op;
  uint64_t lost = 0;
  const double others0 = OthersCpuSeconds();
  for (int rep = 0; rep < 6; ++rep) {
    LayoutSampling sampling(1000 + rep);
    kernel_zone::ZoneWorkload wl({"default", Tasks::kThreads}, 1);
    wl.SetEvidenceWindows(1);
    const Result r = Drive(wl, 1, 1, 0.05);
    EXPECT_EQ(r.verify, "");
    const auto& k = r.report.details["kernel"];
    if (k["sources"].value("zone_lock", "") != "measured")
      GTEST_SKIP() << k["sources"].dump();
    lost += k["zone_lock"]["events_lost"].get<uint64_t>();
    if (rep > 0)
      per_op.push_back(MetricOf(r.report, "zone_lock_acquisitions_per_op"));
    // Known as soon as it happens (beside ctest -j, at the first repetition):
    // the remaining ~20 s of repetitions could not change the skip.
    const double others = OthersCpuSeconds() - others0;
    if (others > 0.1 * (rep + 1))
      GTEST_SKIP() << "other processes ran " << others << " CPU-s beside "
                   << rep + 1
                   << " repetitions (their pages share the pcp lists): counts "
                   << ::testing::PrintToString(per_op);
  }
  const double others = OthersCpuSeconds() - others0;
  const std::string seen = "counts " + ::testing::PrintToString(per_op);
  if (lost > 0) GTEST_SKIP() << lost << " events lost: " << seen;
  const auto [lo, hi] = std::minmax_element(per_op.begin(), per_op.end());
  EXPECT_GT(*lo, 0) << seen;
  EXPECT_LE(*hi / *lo, 1.10) << seen << ", others' CPU-s " << others;
  std::cout << seen << ", others' CPU-s " << others << "\n";
}

// The timed windows run with the evidence's perf events closed, not only
// disabled (they slowed kernel_zone's 1-task timed cycle by about 5 %); they
// are open in the evidence windows, which still collect.
TEST(KernelZone, EvidenceEventsAreClosedInTimedWindows) {
  for (Tasks t : {Tasks::kThreads, Tasks::kProcesses}) {
    kernel_zone::ZoneWorkload wl({"default", t}, 1);
    wl.SetEvidenceWindows(1);
    testing::WorkloadDriver drv(wl, 1);
    EXPECT_FALSE(wl.evidence().TaskOpen(0)) << kernel_tasks::TasksName(t);
    drv.Window(0.1);
    EXPECT_FALSE(wl.evidence().TaskOpen(0)) << kernel_tasks::TasksName(t);
    drv.Teardown();
    const PointReport rep = drv.Report(drv.seconds(), drv.ops());
    EXPECT_EQ(wl.Verify(), "");
    const auto& k = rep.details["kernel"];
    // Where the kernel lets us count, the evidence window did.
    if (k["sources"]["zone_lock"] == "measured") {
      EXPECT_TRUE(k.contains("zone_lock")) << k.dump();
    }
    EXPECT_EQ(rep.details["evidence"]["windows_per_repetition"], 1);
  }
}

// A hold starts at the first event of its kind and wherever the marker count
// (events between holds) moved: the sequence ftrace showed on 6.18, refill
// runs of 63, 126 and 2016 pages each followed by the allocations they serve.
TEST(KernelZone, HoldsStartWhereTheMarkerCountMoves) {
  uint64_t last = 0, holds = 0, pages = 0, marker = 0;
  bool seen = false;
  for (int run : {63, 126, 2016, 2016}) {
    for (int i = 0; i < run; ++i, ++pages)
      holds += kernel::ZoneHoldStarts(marker, &last, &seen);
    marker += static_cast<uint64_t>(run);  // the pages handed out
  }
  EXPECT_EQ(holds, 4u);
  EXPECT_EQ(pages, 4221u);
  // The first event starts a hold even at marker 0 and a count of 0.
  seen = false;
  EXPECT_TRUE(kernel::ZoneHoldStarts(0, &last, &seen));
  EXPECT_FALSE(kernel::ZoneHoldStarts(0, &last, &seen));
}

// A count with no event is "not observed", never 0.0: in the row's details
// and by the absence of the per-op metrics (issue 40 item 10).
TEST(KernelZone, UnobservedHoldsAreNotObservedNotZero) {
  const nlohmann::json j = kernel::ZoneLockJson(kernel::ZoneLockTally{}, 5000);
  EXPECT_FALSE(j["observed"].get<bool>());
  ASSERT_TRUE(j["acquisitions_per_op"].is_string()) << j.dump();
  EXPECT_EQ(
      j["acquisitions_per_op"].get<std::string>().rfind("not observed", 0), 0u);
  EXPECT_TRUE(j["pages_per_refill"].is_string());
  EXPECT_TRUE(j["pages_per_drain"].is_string());
  // Observed: numbers.
  kernel::ZoneLockTally some;
  some.alloc_pages = 4032;
  some.refills = 2;
  const nlohmann::json o = kernel::ZoneLockJson(some, 1'000'000);
  EXPECT_TRUE(o["observed"].get<bool>());
  EXPECT_DOUBLE_EQ(o["acquisitions_per_op"].get<double>(), 2e-6);
  EXPECT_DOUBLE_EQ(o["pages_per_refill"].get<double>(), 2016);
  // Through KernelEvidence (root and tracefs): a task whose evidence window
  // does no page work reports no zone_lock_acquisitions_per_op metric.
  kernel::KernelEvidence ev(1, 0, 0);
  ev.CountZoneLock();
  ev.OpenTask(0, 0);
  ev.Begin(0);
  ev.End(0);
  ev.DrainLive();
  nlohmann::json details;
  std::vector<std::pair<std::string, double>> metrics;
  ev.Report(details, metrics, 1000);
  ev.CloseTask(0);
  if (details["kernel"]["sources"].value("zone_lock", "") != "measured")
    GTEST_SKIP() << details["kernel"]["sources"].dump();
  const auto& z = details["kernel"]["zone_lock"];
  if (z["observed"].get<bool>())
    GTEST_SKIP() << "another event on this thread: " << z.dump();
  for (const auto& [name, value] : metrics)
    EXPECT_NE(name.rfind("zone_lock_", 0), 0u) << name << " = " << value;
  EXPECT_TRUE(z["acquisitions_per_op"].is_string());
}

// The running kernel's folio_batch size is in the context: from BTF when the
// kernel has it (31 on mainline 6.9+), else the mainline table.
TEST(KernelProbe, RecordsFolioBatchSize) {
  const nlohmann::json cfg = kernel::KernelConfig();
  ASSERT_TRUE(cfg.contains("folio_batch_size"));
  const auto& f = cfg["folio_batch_size"];
  ASSERT_TRUE(f["value"].is_number()) << f.dump();
  EXPECT_GE(f["value"].get<int>(), 14);
  EXPECT_LE(f["value"].get<int>(), 64);
  EXPECT_EQ(kernel::FolioBatchSize("6.9.0")["value"].is_number(), true);
  EXPECT_EQ(kernel::BtfArrayMember("not btf", "folio_batch", "folios"), -1);
}

}  // namespace
}  // namespace lockline
