// Issue 39: address-layout sampling (harness/machine/memory.h LayoutSampling),
// the duet's overrun pairs (harness/run/runner.h MarkOverrunPairs) and --runs
// (harness/run/options.h, harness/run/runs.h).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/machine/memory.h"
#include "harness/measure/team.h"
#include "harness/run/options.h"
#include "harness/run/runner.h"
#include "harness/run/runs.h"

namespace lockline {
namespace {

using nlohmann::json;

struct alignas(64) Small {
  uint64_t word[3] = {1, 2, 3};
};
struct alignas(256) Wide {
  char bytes[300] = {};
};

TEST(LayoutSampling, WithoutSamplingStructuresStartOnAPage) {
  PointEnv env;
  auto s = MakeShared<Small>(env);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(s.get()) % 4096, 0u);
  EXPECT_EQ(s->word[2], 3u);
}

TEST(LayoutSampling, OffsetsAreWithinThePageOnTheStepAndRecorded) {
  PointEnv env;
  std::set<uintptr_t> offsets;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    LayoutSampling sampling(seed);
    auto a = MakeShared<Small>(env);
    auto b = MakeShared<Wide>(env);
    const uintptr_t oa = reinterpret_cast<uintptr_t>(a.get()) % 4096;
    const uintptr_t ob = reinterpret_cast<uintptr_t>(b.get()) % 4096;
    // Small's step is kDestructiveLine (128), Wide's its own alignment (256);
    // every line offset inside the structure is kept.
    EXPECT_EQ(oa % kDestructiveLine, 0u);
    EXPECT_EQ(ob % 256, 0u);
    // Both fit in a page: they stay inside the page they start on.
    EXPECT_LE(oa + sizeof(Small), LayoutSampling::kSpanBytes);
    EXPECT_LE(ob + sizeof(Wide), LayoutSampling::kSpanBytes);
    EXPECT_EQ(a->word[0], 1u);  // constructed, usable across the page end
    b->bytes[299] = 7;
    offsets.insert(oa);
    const json j = sampling.Json();
    EXPECT_EQ(j["seed"], seed);
    EXPECT_EQ(j["span_bytes"], 4096);
    ASSERT_EQ(j["allocations"].size(), 2u);
    EXPECT_EQ(j["allocations"][0]["offset_bytes"], oa);
    EXPECT_EQ(j["allocations"][0]["step_bytes"], kDestructiveLine);
    EXPECT_EQ(j["allocations"][0]["bytes"], sizeof(Small));
    EXPECT_EQ(j["allocations"][1]["step_bytes"], 256);
    char addr[32];
    std::snprintf(
        addr, sizeof addr, "0x%llx",
        static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(a.get())));
    EXPECT_EQ(j["allocations"][0]["address"], addr);
  }
  // 40 draws of 32 offsets: more than a handful distinct (not stuck at 0).
  EXPECT_GT(offsets.size(), 10u);
}

// Issue 38: the workload object, read in every timed loop, is placed like
// the structures under test: its own pages, the sampled offset, alike for one
// seed (the two builds of a duet); a one-side wrapper draws nothing.
class Probe : public Workload {
 public:
  uint64_t RunWindow(const ThreadCtx&, const std::atomic<bool>&) override {
    return word;
  }
  uint64_t word = 5;
};
class OneSideWrapper : public HeapPlacedWorkload {
 public:
  uint64_t RunWindow(const ThreadCtx&, const std::atomic<bool>&) override {
    return 0;
  }
};

TEST(LayoutSampling, WorkloadObjectsTakeTheDrawnOffset) {
  std::vector<uintptr_t> first, second;
  for (auto* out : {&first, &second}) {
    LayoutSampling sampling(99);
    auto wrapper = std::make_unique<OneSideWrapper>();  // draws nothing
    for (int i = 0; i < 6; ++i) {
      std::unique_ptr<Workload> w = std::make_unique<Probe>();
      const uintptr_t at = reinterpret_cast<uintptr_t>(w.get());
      EXPECT_EQ(at % kDestructiveLine, 0u);
      EXPECT_EQ(w->RunWindow(ThreadCtx{}, std::atomic<bool>{true}), 5u);
      out->push_back(at % 4096);
    }
    const json j = sampling.Json();
    ASSERT_EQ(j["allocations"].size(), 6u);
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(j["allocations"][i]["what"], "workload object");
      EXPECT_EQ(j["allocations"][i]["offset_bytes"], (*out)[i]);
    }
  }
  EXPECT_EQ(first, second);
  EXPECT_GT(std::set<uintptr_t>(first.begin(), first.end()).size(), 1u);
  // Without a LayoutSampling: the page start.
  std::unique_ptr<Workload> w = std::make_unique<Probe>();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.get()) % 4096, 0u);
  FreeSampledObject(nullptr);  // a no-op
}

TEST(LayoutSampling, SameSeedSameOffsetsAndOneAtATime) {
  std::vector<std::size_t> first, second;
  {
    LayoutSampling s(77);
    for (int i = 0; i < 8; ++i) first.push_back(SampleLayoutOffset(128, 64));
    EXPECT_THROW(LayoutSampling other(78), std::logic_error);
  }
  {
    LayoutSampling s(77);
    for (int i = 0; i < 8; ++i) second.push_back(SampleLayoutOffset(128, 64));
  }
  EXPECT_EQ(first, second);
  // No sampler, or a step of a page: offset 0.
  EXPECT_EQ(SampleLayoutOffset(128, 64), 0u);
  LayoutSampling s(5);
  EXPECT_EQ(SampleLayoutOffset(4096, 64), 0u);
  EXPECT_EQ(SampleLayoutOffset(0, 64), 0u);
  // A structure of 4000 bytes on 128-byte steps fits at offset 0 only; one
  // of 5000 bytes may start anywhere on the page.
  for (int i = 0; i < 20; ++i) EXPECT_EQ(SampleLayoutOffset(128, 4000), 0u);
  std::set<std::size_t> big;
  for (int i = 0; i < 200; ++i) big.insert(SampleLayoutOffset(128, 5000));
  EXPECT_GT(big.size(), 16u);
  EXPECT_LT(*big.rbegin(), LayoutSampling::kSpanBytes);
}

TEST(LayoutSampling, PageAlignedAllocationsStayPageAligned) {
  // AllocShared without a step (false_sharing's block, zone_lock's mem_map)
  // keeps its page alignment while sampling is on.
  PointEnv env;
  LayoutSampling s(9);
  SharedPtr p = AllocShared(100, env);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p.get()) % 4096, 0u);
  EXPECT_TRUE(s.Json()["allocations"].empty());
}

TEST(LayoutSampling, SeedsDifferByRepetitionAndKey) {
  EXPECT_NE(RepetitionLayoutSeed("k", 0), RepetitionLayoutSeed("k", 1));
  EXPECT_NE(RepetitionLayoutSeed("k", 0), RepetitionLayoutSeed("j", 0));
  EXPECT_EQ(RepetitionLayoutSeed("k", 3), RepetitionLayoutSeed("k", 3));
}

// Issue 49: a team thread's stack top (its static TLS, the MCS nodes) moves
// by the recorded offset per seed, alike for one seed; drawing it leaves the
// structures' offsets as they were (a stream of its own).
thread_local char tls_probe[8];

json StackDraw(const json& layout, int thread) {
  for (const json& a : layout["allocations"])
    if (a.value("what", "") == "thread " + std::to_string(thread) + " stack")
      return a;
  return json();
}

TEST(LayoutSampling, TeamStacksMoveTheirTlsByTheRecordedOffset) {
  PointEnv env;
  std::set<uintptr_t> tls, tls_plus_offset;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    uintptr_t plain = 0, after_stacks = 0;
    {
      LayoutSampling sampling(seed);
      plain = reinterpret_cast<uintptr_t>(MakeShared<Small>(env).get());
    }
    {
      LayoutSampling sampling(seed);
      SampleStackPlacement(0);
      SampleStackPlacement(1);
      after_stacks = reinterpret_cast<uintptr_t>(MakeShared<Small>(env).get());
    }
    EXPECT_EQ(plain % 4096, after_stacks % 4096);
    LayoutSampling sampling(seed);
    ThreadTeam team(nullptr, {-1, -1}, nullptr);
    std::vector<uintptr_t> at(2);
    team.RunOnAll([&](int i) {
      tls_probe[0] = 1;
      at[i] = reinterpret_cast<uintptr_t>(&tls_probe[0]);
    });
    const json j = sampling.Json();
    for (int i = 0; i < 2; ++i) {
      const json d = StackDraw(j, i);
      ASSERT_TRUE(d.is_object()) << j.dump();
      const uint64_t off = d["offset_bytes"];
      EXPECT_EQ(off % kDestructiveLine, 0u);
      EXPECT_LT(off, LayoutSampling::kSpanBytes);
      EXPECT_LT(d["skip_pages"].get<int>(), 32);
      tls.insert(at[i] % 4096);
      tls_plus_offset.insert((at[i] + off) % 4096);
    }
    // The same seed draws the same placement.
    const StackPlacement again = SampleStackPlacement(0);
    EXPECT_EQ(again.top_offset, StackDraw(j, 0)["offset_bytes"].get<size_t>());
  }
  EXPECT_EQ(tls_plus_offset.size(), 1u);  // moved by exactly the offset
  EXPECT_GT(tls.size(), 5u);              // and it moves
}

TEST(DuetOverrun, OnlyThePairHoldingTheOverrunWindowIsFlagged) {
  json duet = {
      {"sides", {"warmup_a", "warmup_b", "a", "b", "b", "a", "a", "b"}},
      {"pairs", json::array()}};
  for (int k = 0; k < 3; ++k)
    duet["pairs"].push_back({{"a_ops_per_s", 1.0}, {"b_ops_per_s", 1.0}});
  json windows = json::array();
  for (int w = 0; w < 8; ++w)
    windows.push_back({{"seconds", 0.005}, {"ops", 10}, {"overrun", w == 5}});
  EXPECT_EQ(MarkOverrunPairs(duet, windows), 1);
  EXPECT_EQ(duet["overrun_pairs"], 1);
  EXPECT_EQ(duet["pairs"][0]["overrun"], false);
  EXPECT_EQ(duet["pairs"][1]["overrun"], true);  // windows 4, 5
  EXPECT_EQ(duet["pairs"][2]["overrun"], false);
  // An overrun warm-up window flags no pair.
  windows[5]["overrun"] = false;
  windows[0]["overrun"] = true;
  EXPECT_EQ(MarkOverrunPairs(duet, windows), 0);
  json malformed = {{"pairs", 3}};
  EXPECT_EQ(MarkOverrunPairs(malformed, windows), 0);
}

Options Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "lockline");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return ParseOptions(static_cast<int>(argv.size()), argv.data());
}

TEST(Runs, AcceptedValuesAndDefault) {
  EXPECT_EQ(Parse({}).runs, 1);
  EXPECT_EQ(Parse({"--runs=3"}).runs, 3);
  EXPECT_EQ(Parse({"--runs=20"}).runs, kMaxRuns);
}

TEST(Runs, BadValuesNameTheValueAndTheAcceptedRange) {
  for (const std::string bad : {"0", "21", "-1", "x", "2.5", "", "1000"}) {
    try {
      Parse({"--runs=" + bad});
      ADD_FAILURE() << "--runs=" << bad << " accepted";
    } catch (const std::exception& e) {
      const std::string what = e.what();
      if (!bad.empty()) {
        EXPECT_NE(what.find("--runs=" + bad), std::string::npos) << what;
        EXPECT_NE(what.find("1 to 20"), std::string::npos) << what;
      }
    }
  }
  EXPECT_THROW(Parse({"--runs=2", "--benchmark_out=x.json"}), std::exception);
}

TEST(Runs, ChildArgumentsDropRunsAndOut) {
  const std::vector<std::string> args = {"--quick", "--runs=3", "--out=old",
                                         "--budget=20s"};
  const std::vector<std::string> want = {"--quick", "--budget=20s",
                                         "--out=d/run-2"};
  EXPECT_EQ(RunArguments(args, "d", 2), want);
}

}  // namespace
}  // namespace lockline
