// locks: every lock of harness/locks/ saturated by {lock, ++counter, `cs` ns,
// unlock} (threads:1: the uncontended cost); stats:on rows carry lock_stat
// figures, stats:off rows are the plain lock (like-for-like with other tools).
// Not measured: wake-up latency alone, reader-writer and NUMA-aware locks.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/family.h"
#include "harness/locks/all_locks.h"
#include "harness/locks/lock_stat.h"
#include "harness/machine/memory.h"
#include "harness/machine/padded_slots.h"

namespace lockline {
namespace {

/// Ops per stop-flag load: amortized at ~2 ns per op, a few hand-offs over.
constexpr int kOpsPerStopCheck = 8;

/// The lock and, on its line, a plain counter (a broken lock loses counts).
template <LockAlgorithm L>
struct alignas(kDestructiveLine) Guarded {
  L lock;
  uint64_t counter = 0;
};

/// Thread-private lock statistics and op count (PaddedSlots).
struct alignas(kCacheLine) PerThread {
  LockStatThread stat;
  uint64_t ops = 0;
};

template <LockAlgorithm L, bool kStats>
class LockWorkload : public Workload {
 public:
  LockWorkload(const PointEnv& env, uint64_t cs_ns)
      : cs_ns_(cs_ns),
        guarded_(MakeShared<Guarded<L>>(env)),
        per_thread_(static_cast<std::size_t>(env.threads), kDeferConstruction) {
  }

  void SetupThread(const ThreadCtx& ctx) override {
    per_thread_.Emplace(ctx.index);  // first touch by its thread
  }

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    PerThread& me = per_thread_[ctx.index];  // once, outside the timed loop
    Guarded<L>& g = *guarded_;
    uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < kOpsPerStopCheck; ++i) {
        if constexpr (kStats) {
          LockWithStats(g.lock, me.stat);
        } else {
          g.lock.lock();
        }
        // The clobber keeps iterations' increments apart.
        ++g.counter;
        benchmark::ClobberMemory();
        if (cs_ns_ != 0) ThinkNs(cs_ns_);
        if constexpr (kStats) {
          UnlockWithStats(g.lock, me.stat);
        } else {
          g.lock.unlock();
        }
      }
      n += kOpsPerStopCheck;
    }
    me.ops += n;
    return n;
  }

  void Report(PointReport& out, double window_seconds, uint64_t ops) override {
    harness_ops_ = ops;
    out.details["lock"] = {{"name", L::kName},
                           {"size_bytes", sizeof(L)},
                           {"description", L::kDescription}};
    out.details["stats"] = kStats;
    if constexpr (kStats) {
      std::vector<const LockStatThread*> stats;
      for (std::size_t i = 0; i < per_thread_.size(); ++i) {
        const PerThread* t = per_thread_.get(i);
        stats.push_back(t ? &t->stat : nullptr);
      }
      const double thread_seconds =
          window_seconds * static_cast<double>(per_thread_.size());
      AddLockStatMetrics(out, SummarizeLockStats(stats, thread_seconds, ops));
    }
  }

  // Mutual exclusion held: the counter saw every operation of every thread.
  std::string Verify() override {
    uint64_t sum = 0;
    for (std::size_t i = 0; i < per_thread_.size(); ++i)
      sum += per_thread_.get(i) ? per_thread_.get(i)->ops : 0;
    const uint64_t counter = guarded_->counter;
    if (counter != sum || sum != harness_ops_)
      return std::string("race condition: ") + L::kName + " counter " +
             std::to_string(counter) + ", threads counted " +
             std::to_string(sum) + " ops, harness " +
             std::to_string(harness_ops_);
    return "";
  }

 private:
  uint64_t cs_ns_;
  std::shared_ptr<Guarded<L>> guarded_;
  PaddedSlots<PerThread> per_thread_;
  uint64_t harness_ops_ = 0;
};

/// Critical sections: the increment only, or 100 ns (a short list splice).
constexpr uint64_t kCsNs[] = {0, 100};

/// Quick: the FIFO spinlock, the queue lock and the sleeping lock.
bool InQuick(const std::string& name) {
  return name == "ticket" || name == "mcs" || name == "pthread_mutex";
}

std::vector<Variant> LockVariants() {
  std::vector<Variant> out;
  ForEachLock([&]<class L>() {
    for (const uint64_t cs : kCsNs) {
      for (const bool stats : {true, false}) {
        Variant v;
        v.params = {{"lock", L::kName},
                    {"cs", std::to_string(cs)},
                    {"stats", stats ? "on" : "off"}};
        v.description = std::string(L::kDescription) + "; " +
                        std::to_string(cs) + " ns critical section; " +
                        (stats ? "with lock_stat instrumentation"
                               : "plain lock, no instrumentation");
        // A plain cs:0 row beside each lock_stat row (plain cs:100 in full).
        v.suite = !stats && cs != 0              ? Suite::kFull
                  : cs == 0 && InQuick(L::kName) ? Suite::kQuick
                                                 : Suite::kDefault;
        v.make = [cs, stats](const PointEnv& env) -> std::unique_ptr<Workload> {
          if (stats) return std::make_unique<LockWorkload<L, true>>(env, cs);
          return std::make_unique<LockWorkload<L, false>>(env, cs);
        };
        out.push_back(std::move(v));
      }
    }
  });
  return out;
}

}  // namespace

LOCKLINE_REGISTER_FAMILY(Family{
    .name = "locks",
    .description = "every lock algorithm x critical-section length x threads, "
                   "with lock_stat "
                   "figures: the baseline for the kernel-structure families",
    .variants = LockVariants,
    .planned_variants = nullptr,
});

}  // namespace lockline
