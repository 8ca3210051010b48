// Perf counters: software events agree with known work (page faults of fresh
// pages, no migrations when pinned), hardware events are honest about a missing
// PMU, bad input is reported, and the unprivileged (perf_event_paranoid) case
// marks kernel-only events unavailable instead of reading 0.
#include "harness/measure/counters.h"

#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>

namespace lockline {
namespace {

constexpr size_t kPage = 4096;

const CounterReading* Find(const std::vector<CounterReading>& rs,
                           const std::string& name) {
  for (const CounterReading& r : rs) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

const EventAvailability* FindAvail(const CounterSession& s,
                                   const std::string& name) {
  for (const EventAvailability& a : s.availability()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

// Touches `pages` fresh 4 KiB pages of an anonymous mapping with THP (and mTHP)
// off, so each first write is exactly one page fault; returns the readings of
// that window.
std::vector<CounterReading> CountTouchingPages(CounterSession& session,
                                               size_t pages) {
  auto counters = session.OpenForThisThread();
  void* mem = mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(mem, MAP_FAILED);
  EXPECT_EQ(madvise(mem, pages * kPage, MADV_NOHUGEPAGE), 0);
  volatile char* p = static_cast<volatile char*>(mem);
  counters->Start();
  for (size_t i = 0; i < pages; ++i) p[i * kPage] = 1;
  counters->Stop();
  munmap(mem, pages * kPage);
  return counters->Read();
}

// ---- spec parsing
// ---------------------------------------------------------------------------

TEST(CountersSpec, DefaultNoneAndLists) {
  EXPECT_EQ(ParseEventList("default").size(), 7u);
  EXPECT_EQ(ParseEventList("default")[0], "cycles");
  EXPECT_TRUE(ParseEventList("none").empty());
  EXPECT_EQ(ParseEventList("cycles, page-faults:u").size(), 2u);
  EXPECT_EQ(ParseEventList("default,MEM_LOAD_L3_HIT_RETIRED:XSNP_HITM").size(),
            8u);
  EXPECT_EQ(ParseEventList("perf::cycles")[0], "perf::cycles");
}

TEST(CountersSpec, MalformedListsThrowNamingTheValue) {
  for (const char* bad :
       {"", "cycles,,instructions", "cycles,", "none,cycles", "cycles:", ":u",
        "cyc les", "cycles;instructions", "cycles,cycles", "default,cycles"}) {
    try {
      ParseEventList(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const CounterSpecError& e) {
      EXPECT_NE(std::string(e.what()).find("accepted"), std::string::npos)
          << e.what();  // every message says what is accepted or names the
                        // duplicate
    }
  }
}

TEST(CountersSpec, NoneGivesNoEvents) {
  auto s = CounterSession::Create("none");
  EXPECT_TRUE(s->availability().empty());
  EXPECT_EQ(s->SummaryLine(), "counters: none requested");
  auto c = s->OpenForThisThread();
  c->Start();
  c->Stop();
  EXPECT_TRUE(c->Read().empty());
  EXPECT_TRUE(s->AvailabilityJson()["events"].empty());
}

// Policy (documented in counters.h): a modifier libpfm4 rejects for a known
// event throws.
TEST(CountersSpec, BadModifierIsRejected) {
  try {
    CounterSession::Create("task-clock,cycles:x");
    FAIL() << "cycles:x accepted";
  } catch (const CounterSpecError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cycles:x"), std::string::npos) << what;
    EXPECT_NE(what.find("accepted modifiers"), std::string::npos) << what;
  }
}

// :u excludes the kernel, :k the user, :u:k (and perf's :uk) counts both.
TEST(CountersSpec, PrivilegeModifiersAreHonoured) {
  auto s = CounterSession::Create(
      "cycles:u,cycles:k,cycles:u:k,task-clock:uk,page-faults:u");
  const EventAvailability* u = FindAvail(*s, "cycles:u");
  ASSERT_NE(u, nullptr);
  EXPECT_TRUE(u->exclude_kernel);
  EXPECT_FALSE(u->exclude_user);
  const EventAvailability* uk = FindAvail(*s, "cycles:u:k");
  EXPECT_FALSE(uk->exclude_kernel);
  EXPECT_FALSE(uk->exclude_user);
  const EventAvailability* tc = FindAvail(*s, "task-clock:uk");
  EXPECT_EQ(tc->status, "available") << tc->reason;
  EXPECT_FALSE(tc->exclude_kernel);
  const EventAvailability* pf = FindAvail(*s, "page-faults:u");
  EXPECT_EQ(pf->status, "available") << pf->reason;
  EXPECT_TRUE(pf->exclude_kernel);
  EXPECT_EQ(pf->pmu,
            "perf");  // software events come from libpfm4's perf (perf_sw) PMU
  if (geteuid() == 0) {
    const EventAvailability* k = FindAvail(*s, "cycles:k");
    EXPECT_TRUE(k->exclude_user);
    EXPECT_FALSE(k->exclude_kernel);
  }
}

// Issue 14: a software clock counts the whole run time whatever :u / :k say,
// so a one-mode clock is refused up front instead of reported as a half.
TEST(CountersSpec, SoftwareClockModifiersAreRejected) {
  for (const char* spec : {"task-clock:u", "task-clock:k", "cpu-clock:u",
                           "page-faults,task-clock:k"}) {
    try {
      CounterSession::Create(spec);
      ADD_FAILURE() << "accepted " << spec;
    } catch (const CounterSpecError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("software clock"), std::string::npos) << what;
      EXPECT_NE(what.find("accepted: "), std::string::npos) << what;
    }
  }
  auto s = CounterSession::Create("task-clock:u:k,page-faults:u,page-faults:k");
  EXPECT_EQ(FindAvail(*s, "task-clock:u:k")->status, "available");
  // Page faults are split by the mode they happen in: :u and :k are honest.
  EXPECT_TRUE(FindAvail(*s, "page-faults:u")->exclude_kernel);
  EXPECT_TRUE(FindAvail(*s, "page-faults:k")->exclude_user);
}

// User-only context-switches open but always read 0: unavailable, whoever asks.
TEST(CountersSpec, KernelOnlyEventsUserOnlyAreUnavailable) {
  auto s = CounterSession::Create("context-switches:u,cpu-migrations:u");
  for (const EventAvailability& a : s->availability()) {
    EXPECT_EQ(a.status, "unavailable") << a.name;
    EXPECT_NE(a.reason.find("always reads 0"), std::string::npos) << a.reason;
  }
}

TEST(CountersSpec, UnknownEventIsReportedAndSkipped) {
  auto s = CounterSession::Create("no_such_event_xyz,task-clock");
  const EventAvailability* bad = FindAvail(*s, "no_such_event_xyz");
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->status, "unavailable");
  EXPECT_NE(bad->reason.find("unknown event no_such_event_xyz for PMU"),
            std::string::npos)
      << bad->reason;
  EXPECT_EQ(FindAvail(*s, "task-clock")->status, "available");
  EXPECT_NE(
      s->SummaryLine().find("no_such_event_xyz unavailable (unknown event"),
      std::string::npos)
      << s->SummaryLine();
  auto c = s->OpenForThisThread();
  c->Start();
  c->Stop();
  auto rs = c->Read();
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].status, "unavailable");
  EXPECT_EQ(rs[1].status, "measured");
}

// ---- pure helpers
// -----------------------------------------------------------------------------

TEST(CountersModel, ClassifyReading) {
  CounterReading m = ClassifyReading("x", 100, 50, 50);
  EXPECT_EQ(m.status, "measured");
  EXPECT_EQ(m.value, 100);
  CounterReading s = ClassifyReading("x", 100, 400, 100);
  EXPECT_EQ(s.status, "scaled");
  EXPECT_DOUBLE_EQ(s.value, 400);
  EXPECT_EQ(s.time_running_ns, 100u);
  CounterReading u = ClassifyReading("x", 0, 400, 0);
  EXPECT_EQ(u.status, "unavailable");
  EXPECT_NE(u.reason.find("time_running 0"), std::string::npos);
  // The instructions == 0 trap: a real window cannot retire 0 user
  // instructions.
  CounterReading z = ClassifyReading("instructions", 0, 400, 400, true);
  EXPECT_EQ(z.status, "unavailable");
  EXPECT_NE(z.reason.find("counted 0"), std::string::npos);
  EXPECT_EQ(ClassifyReading("instructions", 5, 400, 400, true).status,
            "measured");
  EXPECT_EQ(ClassifyReading("page-faults", 0, 400, 400).status, "measured");
}

TEST(CountersModel, SumReadingsKeepsWorstStatus) {
  std::vector<std::vector<CounterReading>> t = {
      {ClassifyReading("a", 10, 5, 5), ClassifyReading("b", 1, 5, 5)},
      {ClassifyReading("a", 10, 10, 5), ClassifyReading("b", 0, 5, 0)}};
  auto sum = SumReadings(t);
  ASSERT_EQ(sum.size(), 2u);
  EXPECT_EQ(sum[0].status, "scaled");
  EXPECT_DOUBLE_EQ(sum[0].value, 30);
  EXPECT_EQ(sum[0].raw, 20u);
  EXPECT_EQ(sum[1].status, "unavailable");
  EXPECT_FALSE(sum[1].reason.empty());
  EXPECT_TRUE(SumReadings({}).empty());
  t[1].pop_back();
  EXPECT_THROW(SumReadings(t), std::invalid_argument);
}

TEST(CountersModel, PortableNamesPerPmuModel) {
  EXPECT_EQ(PortableEventCandidates("cycles", "spr"),
            std::vector<std::string>{"spr::UNHALTED_CORE_CYCLES"});
  EXPECT_EQ(PortableEventCandidates("CYCLES", "amd64_fam19h_zen4"),
            std::vector<std::string>{"amd64_fam19h_zen4::CYCLES_NOT_IN_HALT"});
  EXPECT_EQ(PortableEventCandidates("hitm", "skx")[0],
            "skx::MEM_LOAD_L3_HIT_RETIRED:XSNP_HITM");
  EXPECT_FALSE(PortableEventCandidates("hitm", "amd64_fam19h_zen3").empty());
  EXPECT_TRUE(PortableEventCandidates("no-such", "spr").empty());
  EXPECT_TRUE(PortableEventCandidates("cycles", "").empty());
  EXPECT_EQ(GenericSoftwareEvent("task-clock"), 1);
  EXPECT_EQ(GenericSoftwareEvent("cs"), 3);
  EXPECT_EQ(GenericSoftwareEvent("cycles"), -1);
}

// The row: per-op values, the scaling factor of multiplexed events, and the
// derived metrics, or why they are missing; never a 0 for a missing count.
TEST(CountersModel, RowCarriesScalingAndDerivedMetrics) {
  const std::vector<std::vector<CounterReading>> threads = {
      {ClassifyReading("cycles", 3000, 100, 100),
       ClassifyReading("instructions", 1500, 100, 50),
       ClassifyReading("MEM_LOAD_L3_HIT_RETIRED:XSNP_HITM", 10, 100, 100),
       ClassifyReading("cache-misses", 0, 100, 0)},
      {ClassifyReading("cycles", 3000, 100, 100),
       ClassifyReading("instructions", 3000, 100, 100),
       ClassifyReading("MEM_LOAD_L3_HIT_RETIRED:XSNP_HITM", 10, 100, 100),
       ClassifyReading("cache-misses", 5, 100, 100)}};
  const CounterRow row = CountersForRow(threads, 100);
  const nlohmann::json& c = row.counters;
  EXPECT_EQ(c["status"]["instructions"], "scaled");
  EXPECT_DOUBLE_EQ(c["scaling"]["instructions"].get<double>(), 200.0 / 150.0);
  EXPECT_FALSE(c["scaling"].contains("cycles"));
  EXPECT_DOUBLE_EQ(c["per_op"]["cycles"].get<double>(), 60);
  EXPECT_EQ(c["derived"]["IPC"]["status"], "scaled");
  EXPECT_DOUBLE_EQ(c["derived"]["IPC"]["value"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(c["derived"]["hitm/op"]["value"].get<double>(), 0.2);
  EXPECT_EQ(c["derived"]["cache-misses/op"]["status"], "unavailable");
  EXPECT_NE(c["derived"]["cache-misses/op"]["reason"].get<std::string>().find(
                "cache-misses unavailable: not counted"),
            std::string::npos);
  EXPECT_TRUE(c["per_thread"][0]["cache-misses"].is_null());
  std::map<std::string, double> m(row.metrics.begin(), row.metrics.end());
  EXPECT_DOUBLE_EQ(m.at("IPC"), 1.0);
  EXPECT_DOUBLE_EQ(m.at("hitm/op"), 0.2);
  EXPECT_EQ(m.count("cache-misses/op"), 0u);
  EXPECT_EQ(m.count("MEM_LOAD_L3_HIT_RETIRED:XSNP_HITM/op"), 1u);

  const CounterRow none = CountersForRow({{}}, 10);
  EXPECT_EQ(none.counters["derived"]["IPC"]["reason"],
            "instructions not requested (--events)");
  EXPECT_TRUE(none.metrics.empty());
  const CounterRow no_cycles =
      CountersForRow({{ClassifyReading("instructions", 5, 1, 1)}}, 10);
  EXPECT_EQ(no_cycles.counters["derived"]["IPC"]["reason"],
            "cycles not requested (--events)");
}

TEST(CountersModel, OpenErrorsNameTheirCause) {
  EXPECT_NE(ExplainPerfOpenError(ENOENT, true, true, false, 2)
                .find("no hardware PMU"),
            std::string::npos);
  EXPECT_EQ(
      ExplainPerfOpenError(ENOENT, true, true, true, 2).find("no hardware PMU"),
      std::string::npos);
  const std::string eacces =
      ExplainPerfOpenError(EACCES, false, true, false, 2);
  EXPECT_NE(eacces.find("perf_event_paranoid=2"), std::string::npos) << eacces;
  EXPECT_NE(eacces.find("CAP_PERFMON"), std::string::npos) << eacces;
  const std::string eperm = ExplainPerfOpenError(EPERM, false, true, false, 2);
  EXPECT_NE(eperm.find("seccomp"), std::string::npos) << eperm;
  EXPECT_NE(eperm.find("CAP_PERFMON"), std::string::npos) << eperm;
}

// ---- real counting
// ----------------------------------------------------------------------------

TEST(CountersLive, NoWindowIsNotCountedNotZero) {
  auto s = CounterSession::Create("task-clock,page-faults");
  auto c = s->OpenForThisThread();
  for (const CounterReading& r : c->Read()) {
    EXPECT_EQ(r.status, "unavailable") << r.name;
    EXPECT_NE(r.reason.find("time_running 0"), std::string::npos) << r.reason;
  }
}

// A point whose ops are page faults it counts itself opens its counters
// without the page-fault software events (their per-fault hook slowed
// kernel_zone's cycle): they read unavailable with the point's reason, every
// other event still counts.
TEST(CountersLive, PageFaultEventsCanBeLeftOutOfAPoint) {
  auto s = CounterSession::Create("page-faults,minor-faults,task-clock");
  ASSERT_EQ(FindAvail(*s, "page-faults")->status, "available")
      << s->SummaryLine();
  auto c = s->OpenForThisThreadWithoutPageFaults("counted by getrusage");
  constexpr size_t kPages = 64;
  void* mem = mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  volatile char* p = static_cast<volatile char*>(mem);
  c->Start();
  for (size_t i = 0; i < kPages; ++i) p[i * kPage] = 1;
  c->Stop();
  munmap(mem, kPages * kPage);
  const auto rs = c->Read();
  for (const char* name : {"page-faults", "minor-faults"}) {
    const CounterReading* r = Find(rs, name);
    ASSERT_NE(r, nullptr) << name;
    EXPECT_EQ(r->status, "unavailable") << name;
    EXPECT_EQ(r->reason, "counted by getrusage") << name;
    EXPECT_EQ(r->raw, 0u) << name;
  }
  EXPECT_EQ(Find(rs, "task-clock")->status, "measured");
  // The session itself still offers them to other points.
  auto all = CountTouchingPages(*s, kPages);
  EXPECT_EQ(Find(all, "page-faults")->status, "measured");
}

TEST(CountersLive, PageFaultsMatchTouchedPages) {
  auto s = CounterSession::Create("page-faults,task-clock");
  ASSERT_EQ(FindAvail(*s, "page-faults")->status, "available")
      << s->SummaryLine();
  constexpr size_t kPages = 256;
  const auto start = std::chrono::steady_clock::now();
  auto rs = CountTouchingPages(*s, kPages);
  const auto wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count();
  const CounterReading* pf = Find(rs, "page-faults");
  ASSERT_EQ(pf->status, "measured") << pf->reason;
  // One fault per fresh page; a stray fault on a stack or code page is
  // possible, not fewer.
  EXPECT_GE(pf->raw, kPages);
  EXPECT_LE(pf->raw, kPages + 4);
  const CounterReading* tc = Find(rs, "task-clock");
  ASSERT_EQ(tc->status, "measured") << tc->reason;
  EXPECT_GT(tc->value, 0);
  EXPECT_LE(tc->value, static_cast<double>(
                           wall_ns));  // CPU time of one thread <= wall time
}

TEST(CountersLive, ResetStartsAFreshAccumulation) {
  auto s = CounterSession::Create("page-faults");
  auto c = s->OpenForThisThread();
  void* mem = mmap(nullptr, 64 * kPage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  madvise(mem, 64 * kPage, MADV_NOHUGEPAGE);
  volatile char* p = static_cast<volatile char*>(mem);
  c->Start();
  for (size_t i = 0; i < 32; ++i) p[i * kPage] = 1;
  c->Stop();
  EXPECT_GE(c->Read()[0].raw, 32u);
  c->Reset();
  c->Start();
  for (size_t i = 32; i < 48; ++i) p[i * kPage] = 1;
  c->Stop();
  c->Start();  // windows accumulate until Reset
  for (size_t i = 48; i < 64; ++i) p[i * kPage] = 1;
  c->Stop();
  const CounterReading r = c->Read()[0];
  EXPECT_EQ(r.status, "measured");
  EXPECT_GE(r.raw, 32u);
  EXPECT_LE(r.raw, 36u);
  munmap(mem, 64 * kPage);
}

TEST(CountersLive, SumOverThreads) {
  auto s = CounterSession::Create("page-faults");
  constexpr size_t kPages = 64;
  std::vector<std::vector<CounterReading>> per_thread(2);
  std::thread a([&] { per_thread[0] = CountTouchingPages(*s, kPages); });
  std::thread b([&] { per_thread[1] = CountTouchingPages(*s, kPages); });
  a.join();
  b.join();
  auto sum = SumReadings(per_thread);
  EXPECT_EQ(sum[0].status, "measured");
  EXPECT_GE(sum[0].raw, 2 * kPages);
  EXPECT_LE(sum[0].raw, 2 * kPages + 8);
}

TEST(CountersLive, PinnedThreadDoesNotMigrate) {
  auto s = CounterSession::Create("cpu-migrations,context-switches");
  if (FindAvail(*s, "cpu-migrations")->status != "available") {
    GTEST_SKIP() << "cpu-migrations unavailable: "
                 << FindAvail(*s, "cpu-migrations")->reason;
  }
  std::vector<CounterReading> rs;
  std::thread t([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(sched_getcpu(), &set);
    ASSERT_EQ(sched_setaffinity(0, sizeof(set), &set), 0)
        << std::strerror(errno);
    auto c = s->OpenForThisThread();
    c->Start();
    for (int i = 0; i < 20; ++i) {
      std::this_thread::sleep_for(
          std::chrono::microseconds(200));  // a voluntary switch each
      sched_yield();
    }
    c->Stop();
    rs = c->Read();
  });
  t.join();
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].status, "measured") << rs[0].reason;
  EXPECT_EQ(rs[0].raw, 0u);
  EXPECT_EQ(rs[1].status, "measured") << rs[1].reason;
  EXPECT_GE(rs[1].raw,
            20u);  // each sleep blocks the thread: one context switch at least
}

// No PMU: cycles and instructions are unavailable with the kernel's reason,
// never 0. With a PMU: instructions over real work are > 0.
TEST(CountersLive, HardwareEventsAreHonest) {
  auto s = CounterSession::Create("default");
  auto c = s->OpenForThisThread();
  c->Start();
  volatile uint64_t x = 0;
  for (int i = 0; i < 100000; ++i) x = x + i;
  c->Stop();
  const auto rs = c->Read();
  const CounterReading* instructions = Find(rs, "instructions");
  const CounterReading* cycles = Find(rs, "cycles");
  if (!KernelHasHardwarePmu()) {
    for (const CounterReading* r : {instructions, cycles}) {
      EXPECT_EQ(r->status, "unavailable") << r->name;
      EXPECT_NE(r->reason.find("no hardware PMU exposed by the kernel"),
                std::string::npos)
          << r->reason;
    }
    EXPECT_NE(s->SummaryLine().find(
                  "cycles instructions cache-misses unavailable (no hardware "
                  "PMU"),
              std::string::npos)
        << s->SummaryLine();
    const nlohmann::json j = s->AvailabilityJson();
    EXPECT_FALSE(j["kernel_hardware_pmu"].get<bool>());
    EXPECT_EQ(j["events"][0]["status"], "unavailable");
    return;
  }
  if (instructions->status == "unavailable") {
    GTEST_SKIP() << "hardware PMU present but instructions unavailable: "
                 << instructions->reason;
  }
  EXPECT_GT(instructions->raw, 0u);
}

// Runs `body` in a forked child (so setuid / seccomp do not leak into the test
// process) and returns what it printed, or "child failed".
std::string RunInChild(const std::function<std::string()>& body) {
  int fds[2];
  if (pipe(fds) != 0) return "child failed";
  const pid_t pid = fork();
  if (pid < 0) return "child failed";
  if (pid == 0) {
    close(fds[0]);
    const std::string out = body();
    if (write(fds[1], out.data(), out.size()) < 0) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) got.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "child failed";
  return got;
}

// The session's availability plus one window's readings, as JSON text.
std::string SessionReport(const std::string& spec) {
  auto s = CounterSession::Create(spec);
  nlohmann::json j = s->AvailabilityJson();
  auto c = s->OpenForThisThread();
  c->Start();
  c->Stop();
  j["readings"] = nlohmann::json::array();
  for (const CounterReading& r : c->Read())
    j["readings"].push_back(
        {{"name", r.name},
         {"status", r.status},
         {"value", r.status == "unavailable" ? nlohmann::json()
                                             : nlohmann::json(r.value)}});
  return j.dump();
}

nlohmann::json EventJson(const nlohmann::json& report,
                         const std::string& name) {
  for (const auto& e : report["events"]) {
    if (e["name"] == name) return e;
  }
  return nullptr;
}

// Unprivileged: Create() as nobody in a forked child. With perf_event_paranoid
// >= 2 kernel counting is refused, events fall back to user-only and
// context-switches (kernel-only) must be unavailable with the paranoid value in
// the reason.
TEST(CountersLive, UnprivilegedMarksKernelOnlyEventsUnavailable) {
  if (geteuid() != 0)
    GTEST_SKIP() << "needs root to switch to nobody (uid 65534)";
  const int paranoid = PerfEventParanoid();
  if (paranoid == kParanoidUnreadable) {
    GTEST_SKIP() << "perf_event_paranoid unreadable";
  }
  const std::string got = RunInChild([] {
    if (setgid(65534) != 0 || setuid(65534) != 0)
      return std::string("setuid failed");
    return SessionReport("default");
  });
  ASSERT_NE(got, "child failed");
  ASSERT_NE(got, "setuid failed");
  const nlohmann::json j = nlohmann::json::parse(got);
  EXPECT_FALSE(j["perf_privileged"].get<bool>());
  const nlohmann::json cs = EventJson(j, "context-switches");
  const nlohmann::json tc = EventJson(j, "task-clock");
  if (paranoid < 2) {
    EXPECT_EQ(cs["status"], "available") << cs.dump();
    return;
  }
  EXPECT_EQ(cs["status"], "unavailable") << cs.dump();
  const std::string reason = cs["reason"];
  EXPECT_NE(reason.find("perf_event_paranoid=" + std::to_string(paranoid)),
            std::string::npos)
      << reason;
  if (paranoid == 2) {  // 3 (Debian) refuses even user-only counting
    EXPECT_EQ(tc["status"], "available") << tc.dump();
    EXPECT_TRUE(tc["exclude_kernel"].get<bool>());
    // Opened user-only to pass the check, but a clock still counts both modes:
    // the reason must not call it "user mode only" (issue 14).
    const std::string why = tc["reason"];
    EXPECT_NE(why.find("counts user + kernel time"), std::string::npos) << why;
    EXPECT_EQ(why.find("user mode only"), std::string::npos) << why;
    for (const auto& r : j["readings"]) {
      if (r["name"] == "task-clock") {
        EXPECT_EQ(r["status"], "measured") << r.dump();
      }
    }
  }
}

// A container's seccomp profile: perf_event_open fails with EPERM. Reproduced
// with a seccomp filter in a child; every event is unavailable, saying so.
TEST(CountersLive, SeccompEpermIsExplained) {
  const std::string got = RunInChild([] {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_perf_event_open, 0, 1),
        BPF_STMT(BPF_RET | BPF_K,
                 SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof(filter) / sizeof(filter[0]), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
      return std::string("seccomp failed: ") + std::strerror(errno);
    }
    return SessionReport("task-clock,page-faults");
  });
  ASSERT_NE(got, "child failed");
  if (got.rfind("seccomp failed", 0) == 0) GTEST_SKIP() << got;
  const nlohmann::json j = nlohmann::json::parse(got);
  for (const char* name : {"task-clock", "page-faults"}) {
    const nlohmann::json e = EventJson(j, name);
    EXPECT_EQ(e["status"], "unavailable") << e.dump();
    const std::string reason = e["reason"];
    EXPECT_NE(reason.find("EPERM"), std::string::npos) << reason;
    EXPECT_NE(reason.find("seccomp"), std::string::npos) << reason;
  }
  for (const auto& r : j["readings"]) {
    EXPECT_TRUE(r["value"].is_null()) << r.dump();  // never 0
  }
}

}  // namespace
}  // namespace lockline
