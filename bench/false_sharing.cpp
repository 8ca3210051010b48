// false_sharing: two pinned threads increment their own 8-byte counters
// `distance` bytes apart (0 = one counter, up to 256, plus the host's line
// size) on a PU pair of each sharing class; the 64-vs-128-byte padding
// answer is the smallest distance without a slowdown. Not measured: readers,
// lines shared by more than two PUs.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "harness/family.h"
#include "harness/machine/memory.h"

namespace lockline {
namespace {

constexpr int kOpsPerStopCheck = 64;
/// Counter distances, bytes: the classic padding candidates.
constexpr int kDistances[] = {0, 8, 32, 64, 128, 256};
/// Both counters in one page-aligned block: the distance alone decides what
/// they share.
constexpr std::size_t kBlockBytes = 4096;

/// The host's L1d line size (sysconf), or 0.
int HostLineBytes() {
  const long line = sysconf(_SC_LEVEL1_DCACHE_LINESIZE);
  return line > 0 ? static_cast<int>(line) : 0;
}

// inc: plain load/add/store (distance > 0 only); xadd: lock xadd, also at
// distance 0 (true sharing).
enum class Op { kInc, kXadd };

class FalseSharingWorkload : public Workload {
 public:
  FalseSharingWorkload(Op op, int distance, const PointEnv& env)
      : op_(op), distance_(distance), block_(AllocShared(kBlockBytes, env)) {}

  std::atomic<uint64_t>& Counter(int index) {
    auto* base = static_cast<unsigned char*>(block_.get());
    return *reinterpret_cast<std::atomic<uint64_t>*>(base + index * distance_);
  }

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    std::atomic<uint64_t>& c = Counter(ctx.index);
    uint64_t ops = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < kOpsPerStopCheck; ++i) {
        if (op_ == Op::kInc) {
          c.store(c.load(std::memory_order_relaxed) + 1,
                  std::memory_order_relaxed);
          benchmark::ClobberMemory();  // one store per op, not one per batch
        } else {
          c.fetch_add(1, std::memory_order_relaxed);
        }
      }
      ops += kOpsPerStopCheck;
    }
    return ops;
  }

  void Prepare(int threads) override { threads_ = threads; }

  void Report(PointReport& out, double, uint64_t ops) override {
    total_ops_ = ops;
    out.details["distance_bytes"] = distance_;
    out.details["counter_bytes"] = sizeof(uint64_t);
    out.details["host_line_bytes"] = HostLineBytes();
#ifdef __cpp_lib_hardware_interference_size
    out.details["hardware_destructive_interference_size"] =
        std::hardware_destructive_interference_size;
#endif
    out.details["op"] = op_ == Op::kInc ? "plain load/add/store" : "lock xadd";
    out.details["shares"] =
        distance_ == 0   ? "one counter (true sharing)"
        : distance_ < 64 ? "one 64-byte line"
        : distance_ < 128
            ? "one 128-byte line (POWER) or adjacent-line pair (x86)"
        : distance_ < 256 ? "one 256-byte line (IBM Z, if any)"
                          : "nothing below 512 bytes";
  }

  // Counts add up: each operation added exactly one to one counter.
  std::string Verify() override {
    uint64_t sum = 0;
    const int counters = distance_ == 0 ? 1 : threads_;
    for (int i = 0; i < counters; ++i) sum += Counter(i).load();
    if (sum != total_ops_)
      return "counters sum to " + std::to_string(sum) + " but " +
             std::to_string(total_ops_) + " operations ran";
    return "";
  }

 private:
  Op op_;
  int distance_;
  SharedPtr block_;
  int threads_ = 2;
  uint64_t total_ops_ = 0;
};

/// The sharing class of two PUs: smt, l2_shared, l3_shared, package_local,
/// package_remote.
std::string PairClass(const PuInfo& a, const PuInfo& b) {
  if (b.core == a.core) return "smt";
  if (b.package != a.package) return "package_remote";
  if (a.l2 >= 0 && b.l2 == a.l2) return "l2_shared";
  if (a.l3 >= 0 && b.l3 == a.l3) return "l3_shared";
  return "package_local";
}

/// The first PU pair in placement order of each class the machine has.
std::vector<std::pair<std::string, std::pair<int, int>>> PairClasses(
    const std::vector<PuInfo>& order) {
  static const char* const kClasses[] = {"smt", "l2_shared", "l3_shared",
                                         "package_local", "package_remote"};
  std::map<std::string, std::pair<int, int>> found;
  for (std::size_t i = 0;
       i < order.size() && found.size() < std::size(kClasses); ++i)
    for (std::size_t j = i + 1; j < order.size(); ++j)
      found.try_emplace(PairClass(order[i], order[j]), order[i].os_index,
                        order[j].os_index);
  std::vector<std::pair<std::string, std::pair<int, int>>> out;
  for (const char* cls : kClasses)
    if (found.count(cls)) out.push_back({cls, found[cls]});
  return out;
}

std::vector<Variant> FalseSharingVariants(const std::vector<PuInfo>& order) {
  std::vector<int> distances(std::begin(kDistances), std::end(kDistances));
  // The host's line size joins the sweep when it is not a candidate.
  const int line = HostLineBytes();
  if (line > 0 && line < static_cast<int>(kBlockBytes) / 2 &&
      std::find(distances.begin(), distances.end(), line) == distances.end())
    distances.push_back(line);
  std::vector<Variant> out;
  const auto classes = PairClasses(order);
  for (const auto& [cls, pair] : classes) {
    for (Op op : {Op::kInc, Op::kXadd}) {
      for (int d : distances) {
        if (op == Op::kInc && d == 0) continue;
        Variant v;
        v.params = {{"op", op == Op::kInc ? "inc" : "xadd"},
                    {"distance", std::to_string(d)},
                    {"pair", cls}};
        // Quick: inc at 8, 64, 128 on the first class; xadd in full.
        const bool quick_row = op == Op::kInc && cls == classes[0].first &&
                               (d == 8 || d == 64 || d == 128);
        v.suite = quick_row        ? Suite::kQuick
                  : op == Op::kInc ? Suite::kDefault
                                   : Suite::kFull;
        v.description =
            std::string(op == Op::kInc ? "plain increments" : "lock xadd") +
            " of two counters " + std::to_string(d) + " bytes apart, PUs " +
            std::to_string(pair.first) + " and " + std::to_string(pair.second) +
            " (" + cls + ")";
        v.threads = {2};
        v.pus = {pair.first, pair.second};
        v.make = [op, d](const PointEnv& env) {
          return std::make_unique<FalseSharingWorkload>(op, d, env);
        };
        out.push_back(std::move(v));
      }
    }
  }
  return out;
}

LOCKLINE_REGISTER_FAMILY(Family{
    .name = "false_sharing",
    .description =
        "two threads' private counters 0-256 bytes apart on PU pairs of "
        "each sharing class: the 64 vs 128 byte padding question",
    .variants = nullptr,
    .planned_variants = FalseSharingVariants,
});

}  // namespace
}  // namespace lockline
