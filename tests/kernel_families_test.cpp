// Tests of the kernel_* families (issue 18) and their harness pieces
// (harness/kernel_probe.h, harness/restore.h): exact op accounting (minor
// faults == pages touched, bytes received == bytes sent, memfds empty after
// truncate / punch), contention tracepoints read when tracefs has
// lock:contention_begin (skipped with the reason elsewhere), the parsers of
// /proc/zoneinfo, kallsyms and kernel config text, callchain attribution, and
// RestoreAll writing registered values back. Windows are short (50-100 ms);
// no speed is asserted.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "bench/kernel_lru.cpp"
#include "bench/kernel_put_page.cpp"
#include "bench/kernel_zone.cpp"
#include "harness/kernel_probe.h"
#include "harness/restore.h"
#include "tests/workload_driver.h"

namespace lockline {
namespace {

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

TEST(KernelZone, BatchesOverflowPcpHighAndFaultsAreExact) {
  kernel_zone::ZoneWorkload wl({"default", Tasks::kThreads}, 2);
  const Result r = Drive(wl, 2, 2, 0.1);
  EXPECT_EQ(r.verify, "");
  // pcp high auto-tunes (6.7+): compare with the zone state the point saw.
  const auto& pcp = r.report.details["pcp_at_prepare"];
  const std::string zone = r.report.details.value("main_zone", "");
  if (!zone.empty()) {
    const uint64_t high = pcp[zone]["high_max_over_cpus"].get<uint64_t>();
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

// SIGTERM in the middle of a sweep point: the harness's handler puts
// vm.percpu_pagelist_high_fraction back (harness/restore.h) before exiting.
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
    EXPECT_NE(r.verify.find("for 2000 pages touched"), std::string::npos)
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
  EXPECT_EQ(kernel_zone::BatchPages(zones), 14000u);

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
