// calibration: op:* the uncontended cost of an increment, fetch_add and CAS
// on a private line, and fetch_add on one shared line; c2c: one-way
// core-to-core latency by ping-pong (all pairs up to 16 PUs, a sample above).
// Not measured: DRAM bandwidth or latency.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "harness/family.h"
#include "harness/machine/cpu.h"
#include "harness/machine/memory.h"
#include "harness/machine/padded_slots.h"
#include "harness/measure/pingpong.h"

namespace lockline {
namespace {

constexpr int kOpsPerStopCheck = 64;  // ops per stop-flag load

/// A counter on a line of its own (shared: MakeShared; private: PaddedSlots).
struct alignas(kCacheLine) PaddedWord {
  std::atomic<uint64_t> v{0};
};

enum class Op { kPlainInc, kAtomicFetchAdd, kCas };

class OpWorkload : public Workload {
 public:
  OpWorkload(Op op, bool shared, const PointEnv& env)
      : op_(op),
        shared_(shared),
        shared_word_(MakeShared<PaddedWord>(env)),
        private_(static_cast<std::size_t>(env.threads)) {}

  // 256-byte aligned: the 1-2 ns loop never straddles a page (a straddle
  // read plain_inc ~9 % slower: docs/validation.md).
  __attribute__((aligned(256))) uint64_t RunWindow(
      const ThreadCtx& ctx, const std::atomic<bool>& stop) override {
    std::atomic<uint64_t>& w =  // once, outside the timed loop
        shared_ ? shared_word_->v : private_[ctx.index].v;
    uint64_t ops = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < kOpsPerStopCheck; ++i) {
        switch (op_) {
          case Op::kPlainInc: {
            // Plain load/add/store, kept in memory (not folded into one add).
            w.store(w.load(std::memory_order_relaxed) + 1,
                    std::memory_order_relaxed);
            benchmark::ClobberMemory();
            break;
          }
          case Op::kAtomicFetchAdd:
            w.fetch_add(1, std::memory_order_relaxed);
            break;
          case Op::kCas: {
            uint64_t cur = w.load(std::memory_order_relaxed);
            while (!w.compare_exchange_weak(cur, cur + 1,
                                            std::memory_order_relaxed)) {
            }
            break;
          }
        }
      }
      ops += kOpsPerStopCheck;
    }
    return ops;
  }

  void Report(PointReport& out, double, uint64_t ops) override {
    out.details["op_word"] =
        shared_ ? "one shared cache line" : "a private cache line per thread";
    total_ops_ = ops;
  }

  // Counts add up: every operation incremented exactly one word by one.
  std::string Verify() override {
    uint64_t sum = shared_word_->v.load();
    for (int i = 0; i < threads_; ++i) sum += private_[i].v.load();
    if (sum != total_ops_)
      return "words sum to " + std::to_string(sum) + " but " +
             std::to_string(total_ops_) + " operations ran";
    return "";
  }
  void Prepare(int threads) override { threads_ = threads; }
  // line:private rows share nothing (no coherence probe, label "none").
  bool shares_lines() const override { return shared_; }

 private:
  Op op_;
  bool shared_;
  std::shared_ptr<PaddedWord> shared_word_;
  PaddedSlots<PaddedWord> private_;
  int threads_ = 1;
  uint64_t total_ops_ = 0;
};

// Ping-pong of one line (harness/measure/pingpong.h): one op = a round trip.
class PingPongWorkload : public Workload {
 public:
  explicit PingPongWorkload(const PointEnv& env)
      : line_(MakeShared<PingPongLine>(env)) {}

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    if (ctx.index != 0) {
      line_->Respond();
      return 0;
    }
    // At least one batch per window (an overcommitted machine may start the
    // initiator after the stop flag).
    const size_t before = samples_.size();
    return line_->Initiate(
        [&] {
          return samples_.size() == before ||
                 !stop.load(std::memory_order_relaxed);
        },
        samples_);
  }

  void Report(PointReport& out, double, uint64_t) override {
    if (samples_.empty()) return;
    std::sort(samples_.begin(), samples_.end());
    out.Metric("latency_ns", samples_[samples_.size() / 2]);
    out.Metric("latency_min_ns", samples_.front());
    out.details["latency_note"] =
        "one-way = round trip / 2, batches of 64 round trips";
  }

 private:
  std::shared_ptr<PingPongLine> line_;
  std::vector<double> samples_;
};

// Latency pairs: all up to 16 PUs; above, the first PU against each L3, node
// and package plus a fixed-seed sample, 64 pairs.
std::vector<std::pair<int, int>> LatencyPairs(
    const std::vector<PuInfo>& order) {
  std::vector<int> pus;
  for (const PuInfo& p : order) pus.push_back(p.os_index);
  std::sort(pus.begin(), pus.end());
  std::vector<std::pair<int, int>> pairs;
  if (pus.size() <= 16) {
    for (size_t i = 0; i < pus.size(); ++i)
      for (size_t j = i + 1; j < pus.size(); ++j)
        pairs.emplace_back(pus[i], pus[j]);
    return pairs;
  }
  std::set<std::pair<int, int>> chosen;
  std::set<int> l3s, nodes, packages;
  const PuInfo& first = order.front();
  for (const PuInfo& p : order) {
    if (p.os_index == first.os_index) continue;
    const bool sibling = p.core == first.core;
    if (sibling || l3s.insert(p.l3).second || nodes.insert(p.numa).second ||
        packages.insert(p.package).second)
      chosen.insert(std::minmax(first.os_index, p.os_index));
  }
  std::mt19937 rng(42);
  std::uniform_int_distribution<size_t> pick(0, pus.size() - 1);
  while (chosen.size() < 64) {
    const int a = pus[pick(rng)], b = pus[pick(rng)];
    if (a != b) chosen.insert(std::minmax(a, b));
  }
  return {chosen.begin(), chosen.end()};
}

std::vector<Variant> CalibrationVariants(const std::vector<PuInfo>& order) {
  std::vector<Variant> out;
  struct OpRow {
    const char* name;
    Op op;
    bool shared;  ///< one line for all threads (else private, threads:1)
    const char* description;
  };
  static const OpRow kOps[] = {
      {"plain_inc", Op::kPlainInc, false,
       "plain load/add/store on a private line"},
      {"atomic_fetch_add", Op::kAtomicFetchAdd, false,
       "lock xadd on a private line"},
      {"cas", Op::kCas, false, "compare-exchange loop on a private line"},
      {"atomic_fetch_add", Op::kAtomicFetchAdd, true,
       "lock xadd on one line shared by all threads"},
  };
  for (const OpRow& row : kOps) {
    Variant v;
    v.params = {{"op", row.name}, {"line", row.shared ? "shared" : "private"}};
    v.suite = Suite::kQuick;
    v.description = row.description;
    if (!row.shared) v.threads = {1};
    v.make = [row](const PointEnv& env) {
      return std::make_unique<OpWorkload>(row.op, row.shared, env);
    };
    out.push_back(std::move(v));
  }
  for (const auto& [a, b] : LatencyPairs(order)) {
    Variant v;
    v.params = {{"c2c", "pingpong"},
                {"pu_a", std::to_string(a)},
                {"pu_b", std::to_string(b)}};
    v.suite = Suite::kQuick;
    v.description = "one-way cache-line transfer latency between two PUs";
    v.threads = {2};
    v.pus = {a, b};
    v.make = [](const PointEnv& env) {
      return std::make_unique<PingPongWorkload>(env);
    };
    out.push_back(std::move(v));
  }
  return out;
}

LOCKLINE_REGISTER_FAMILY(Family{
    .name = "calibration",
    .description =
        "uncontended op costs and core-to-core latency on this machine",
    .variants = nullptr,
    .planned_variants = CalibrationVariants,
});

}  // namespace
}  // namespace lockline
