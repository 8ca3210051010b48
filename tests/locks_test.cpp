// Validation of every lock in the table, separate from speed (Concurrency Kit's
// validate/): mutual exclusion under 2-8 threads and oversubscribed (a plain
// counter incremented inside the lock must add up: the "race condition" count
// is 0), try_lock semantics, and the lock_stat bookkeeping. Uses std::thread
// only, never the harness. A watchdog fails a hung test instead of letting it
// hang.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "harness/family.h"
#include "harness/locks/all_locks.h"
#include "harness/locks/lock_stat.h"

namespace lockline {
namespace {

// Iterations per thread. ThreadSanitizer builds define a smaller count: TSan
// slows atomics ~10x and oversubscribed FIFO locks hand off only through
// sched_yield.
#ifndef LOCKLINE_LOCKS_TEST_ITERS
#define LOCKLINE_LOCKS_TEST_ITERS 20000
#endif
constexpr uint64_t kIters = LOCKLINE_LOCKS_TEST_ITERS;
#ifndef LOCKLINE_LOCKS_TEST_TIMEOUT_S
#define LOCKLINE_LOCKS_TEST_TIMEOUT_S 60
#endif
constexpr int kTimeoutS = LOCKLINE_LOCKS_TEST_TIMEOUT_S;

/// Aborts the process with a message if not destroyed within kTimeoutS seconds
/// (a lock that deadlocks or livelocks fails the test run instead of hanging
/// ctest). Given `progress`, only kTimeoutS seconds without `progress` moving
/// abort: on a loaded 2-vCPU runner every hand-off of an oversubscribed FIFO
/// lock can wait a timeslice for its preempted successor, and 40000 of them
/// may outlast kTimeoutS while the lock is live; the ctest TIMEOUT still
/// bounds the test.
class Watchdog {
 public:
  explicit Watchdog(std::string what,
                    const std::atomic<uint64_t>* progress = nullptr)
      : what_(std::move(what)),
        progress_(progress),
        thread_([this] { Run(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> g(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> g(mu_);
    uint64_t seen = progress_ ? progress_->load(std::memory_order_relaxed) : 0;
    while (!cv_.wait_for(g, std::chrono::seconds(kTimeoutS),
                         [this] { return done_; })) {
      if (progress_ != nullptr) {
        const uint64_t now = progress_->load(std::memory_order_relaxed);
        if (now != seen) {
          seen = now;
          continue;
        }
      }
      std::fprintf(
          stderr, "FAILED: %s did not %s within %d s (deadlock or livelock?)\n",
          what_.c_str(), progress_ ? "progress" : "finish", kTimeoutS);
      std::abort();
    }
  }
  std::string what_;
  const std::atomic<uint64_t>* progress_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

/// The lock and the counter it protects, sharing a line as in a real structure.
template <class L>
struct Protected {
  L lock;
  uint64_t counter =
      0;  // plain: a lock that lets two threads in loses increments
};

/// Per-thread iterations for `threads` threads: 2 * kIters acquisitions in
/// total, because on a small machine every thread beyond the CPU count makes
/// FIFO locks (ticket, MCS) wait for a preempted successor on each hand-off
/// (lock-waiter preemption: ~0.1-1 ms each).
uint64_t ItersFor(int threads) {
  return std::max<uint64_t>(500, 2 * kIters / threads);
}

/// Runs `threads` threads each doing `iters` x {lock, ++counter (plain RMW),
/// unlock}; returns threads * iters - counter, the race condition count.
template <class L>
uint64_t RaceCount(int threads, uint64_t iters) {
  std::atomic<uint64_t> progress{0};  // bumped every 256 iterations
  Watchdog dog(
      std::string(L::kName) + " with " + std::to_string(threads) + " threads",
      &progress);
  auto p = std::make_unique<Protected<L>>();
  std::atomic<bool> go{false};
  std::vector<std::thread> team;
  for (int t = 0; t < threads; ++t) {
    team.emplace_back([&] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (uint64_t i = 0; i < iters; ++i) {
        p->lock.lock();
        // Split load and store with a relax between them, so a broken lock
        // overlaps here.
        const uint64_t v = p->counter;
        CpuRelax();
        p->counter = v + 1;
        p->lock.unlock();
        if ((i & 255) == 255) progress.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  go.store(true, std::memory_order_release);
  for (auto& th : team) th.join();
  return static_cast<uint64_t>(threads) * iters - p->counter;
}

template <class L>
class LockTest : public ::testing::Test {};

using LockTypes =
    ::testing::Types<TasLock, TtasLock, TicketLock, McsLock, QspinLock,
                     PthreadMutexLock, PthreadSpinLock>;
class LockNameGen {
 public:
  template <class L>
  static std::string GetName(int) {
    return L::kName;
  }
};
TYPED_TEST_SUITE(LockTest, LockTypes, LockNameGen);

TYPED_TEST(LockTest, MutualExclusion2To8Threads) {
  for (int threads : {2, 4, 8}) {
    EXPECT_EQ(RaceCount<TypeParam>(threads, ItersFor(threads)), 0u)
        << "race condition count with " << threads << " threads";
  }
}

TYPED_TEST(LockTest, MutualExclusionOversubscribed) {
  // 16 threads on this 2-CPU VM (at least 4 per CPU elsewhere): holders and
  // FIFO successors get preempted, which exercises the spin-then-yield path.
  const int cpus =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = std::max(16, 4 * cpus);
  EXPECT_EQ(RaceCount<TypeParam>(threads, ItersFor(threads)), 0u)
      << "race condition count with " << threads << " threads";
}

TYPED_TEST(LockTest, TryLockSemantics) {
  Watchdog dog(std::string(TypeParam::kName) + " try_lock");
  TypeParam lock;
  ASSERT_TRUE(lock.try_lock()) << "a fresh lock must be free";
  bool other_got_it = true;
  std::thread([&] { other_got_it = lock.try_lock(); }).join();
  EXPECT_FALSE(other_got_it) << "try_lock succeeded on a held lock";
  lock.unlock();
  std::thread([&] {
    other_got_it = lock.try_lock();
    if (other_got_it) lock.unlock();
  }).join();
  EXPECT_TRUE(other_got_it) << "try_lock failed on a released lock";
  // lock() after try_lock/unlock cycles still works, and try_lock fails while
  // lock() holds it.
  lock.lock();
  std::thread([&] { other_got_it = lock.try_lock(); }).join();
  EXPECT_FALSE(other_got_it);
  lock.unlock();
}

TYPED_TEST(LockTest, NestedDistinctLocks) {
  // Up to the queue locks' nesting depth of 4, held in any order.
  Watchdog dog(std::string(TypeParam::kName) + " nesting");
  TypeParam a, b, c, d;
  a.lock();
  b.lock();
  c.lock();
  EXPECT_TRUE(d.try_lock());
  b.unlock();  // not LIFO
  d.unlock();
  a.unlock();
  c.unlock();
  EXPECT_EQ(RaceCount<TypeParam>(2, kIters / 4), 0u)
      << "lock state after nesting";
}

// ---- the no-yield rule (harness/locks/spin_wait.h)

/// Waits for `lock` on a new thread whose spin policy is `policy` while the
/// calling thread holds it for `hold_ms`; returns the yields the waiter made.
template <class L>
uint64_t YieldsOfOneWait(SpinYield policy, int hold_ms) {
  Watchdog dog(std::string(L::kName) + " no-yield wait");
  L lock;
  std::atomic<bool> waiting{false};
  uint64_t yields = ~uint64_t{0};
  lock.lock();
  std::thread waiter([&] {
    SetSpinYield(policy);
    const uint64_t before = SpinYieldsOnThisThread();
    waiting.store(true, std::memory_order_release);
    lock.lock();
    lock.unlock();
    yields = SpinYieldsOnThisThread() - before;
  });
  while (!waiting.load(std::memory_order_acquire)) std::this_thread::yield();
  // Far longer than kSpinsBeforeYield PAUSEs (~10-60 us): a waiter allowed to
  // yield does.
  std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
  lock.unlock();
  waiter.join();
  return yields;
}

template <class L>
class SpinPolicyTest : public ::testing::Test {};
using SpinningLocks =
    ::testing::Types<TasLock, TtasLock, TicketLock, McsLock, QspinLock>;
TYPED_TEST_SUITE(SpinPolicyTest, SpinningLocks);

TYPED_TEST(SpinPolicyTest, NonOversubscribedWaiterNeverYields) {
  EXPECT_EQ(YieldsOfOneWait<TypeParam>(SpinYield::kNever, 30), 0u)
      << "a waiter of a point that is not oversubscribed called sched_yield";
}

TEST(SpinPolicy, OversubscribedWaiterYieldsAndDefaultIsAfterSpins) {
  // Threads the harness did not start keep the bounded-spin default.
  std::thread([] {
    EXPECT_EQ(CurrentSpinYield(), SpinYield::kAfterSpins);
  }).join();
  EXPECT_GT(YieldsOfOneWait<TicketLock>(SpinYield::kAfterSpins, 50), 0u)
      << "an oversubscribed waiter held off 50 ms never yielded";
  ThreadCtx ctx;
  EXPECT_FALSE(ctx.oversubscribed)
      << "ThreadCtx defaults to not oversubscribed";
}

TEST(LockTable, NamesAndLookup) {
  const std::vector<std::string> names = LockNames();
  EXPECT_EQ(names, (std::vector<std::string>{"tas", "ttas", "ticket", "mcs",
                                             "qspinlock", "pthread_mutex",
                                             "pthread_spin"}));
  for (const std::string& name : names) {
    std::string seen;
    EXPECT_TRUE(WithLock(name, [&]<class L>() { seen = L::kName; }));
    EXPECT_EQ(seen, name);
  }
  EXPECT_FALSE(WithLock(
      "no_such_lock", []<class L>() { FAIL() << "called for unknown name"; }));
}

TEST(LockTable, Sizes) {
  EXPECT_EQ(sizeof(TasLock), 4u);
  EXPECT_EQ(sizeof(TtasLock), 4u);
  EXPECT_EQ(sizeof(TicketLock), 4u);
  EXPECT_EQ(sizeof(McsLock), 8u);
  EXPECT_EQ(sizeof(QspinLock), 4u);
  EXPECT_EQ(sizeof(PthreadMutexLock), sizeof(pthread_mutex_t));
  EXPECT_EQ(sizeof(PthreadSpinLock), 4u);
}

TEST(LockStat, SingleThreadIsUncontended) {
  TicketLock lock;
  LockStatThread st;
  constexpr uint64_t kN = 1000;
  for (uint64_t i = 0; i < kN; ++i) {
    LockWithStats(lock, st);
    UnlockWithStats(lock, st);
  }
  EXPECT_EQ(st.acquisitions, kN);
  EXPECT_EQ(st.contended, 0u);
  EXPECT_EQ(st.wait_ns, 0u);
  EXPECT_EQ(st.handoffs, 0u);
  EXPECT_EQ(st.hold_samples, kN / kHoldSampleEvery);
  const nlohmann::json s = SummarizeLockStats({&st}, 1.0, kN);
  EXPECT_EQ(s["acquisitions"], kN);
  EXPECT_EQ(s["contended_share"], 0.0);
  EXPECT_EQ(s["handoff_share"], 0.0);
  EXPECT_EQ(s["acquisitions_per_op"], 1.0);
  EXPECT_EQ(s["jain_fairness"], 1.0);
  PointReport report;
  AddLockStatMetrics(report, s);
  std::set<std::string> keys;
  for (const auto& [k, v] : report.metrics) keys.insert(k);
  for (const char* k :
       {"wait_share", "handoff_share", "contended_share", "wait_p50_ns",
        "wait_p99_ns", "wait_max_ns", "hold_ns", "acquisitions_per_op"}) {
    EXPECT_TRUE(keys.count(k)) << k;
  }
  EXPECT_TRUE(report.details.contains("lock_stat"));
  st.Reset();
  EXPECT_EQ(st.acquisitions, 0u);
}

TEST(LockStat, ContendedStatsAddUp) {
  Watchdog dog("lock_stat with 2 threads");
  McsLock lock;
  LockStatThread st[2];
  uint64_t counter = 0;
  std::vector<std::thread> team;
  for (int t = 0; t < 2; ++t) {
    team.emplace_back([&, t] {
      for (uint64_t i = 0; i < kIters; ++i) {
        LockWithStats(lock, st[t]);
        ++counter;
        UnlockWithStats(lock, st[t]);
      }
    });
  }
  for (auto& th : team) th.join();
  EXPECT_EQ(counter, 2 * kIters);
  EXPECT_EQ(st[0].acquisitions + st[1].acquisitions, 2 * kIters);
  uint64_t hist_total = 0;
  for (const LockStatThread& s : st) {
    EXPECT_LE(s.contended, s.acquisitions);
    EXPECT_LE(s.handoffs, s.acquisitions);
    uint64_t h = 0;
    for (uint64_t c : s.wait_hist) h += c;
    EXPECT_EQ(h, s.contended)
        << "every contended acquisition is in the histogram";
    EXPECT_GE(s.wait_ns, s.max_wait_ns);
    hist_total += h;
  }
  // Hand-offs are counted without shared state (issue 23): every contended
  // acquisition, and nothing else.
  EXPECT_EQ(st[0].handoffs, st[0].contended);
  EXPECT_EQ(st[1].handoffs, st[1].contended);
  const nlohmann::json s =
      SummarizeLockStats({&st[0], &st[1]}, 1.0, 2 * kIters);
  EXPECT_EQ(s["acquisitions"], 2 * kIters);
  EXPECT_EQ(s["contended"], hist_total);
  EXPECT_EQ(s["per_thread"].size(), 2u);
  EXPECT_LE(s["wait_p50_ns"].get<uint64_t>(), s["wait_p99_ns"].get<uint64_t>());
  EXPECT_LE(s["wait_p99_ns"].get<uint64_t>(), s["wait_max_ns"].get<uint64_t>());
}

TEST(LockStat, WaitBuckets) {
  EXPECT_EQ(WaitBucket(0), 0);
  EXPECT_EQ(WaitBucket(1), 1);
  EXPECT_EQ(WaitBucket(2), 2);
  EXPECT_EQ(WaitBucket(3), 2);
  EXPECT_EQ(WaitBucket(1024), 11);
  EXPECT_EQ(WaitBucket(~uint64_t{0}), kWaitBuckets - 1);
}

}  // namespace
}  // namespace lockline
