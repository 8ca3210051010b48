// A reusable sleeping barrier for the threads of one point: they block on a
// condition variable rather than spin (a SCHED_IDLE zeroer sharing their PU
// must get it; the team threads driving forked tasks wait between windows).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace lockline {

/// Reset(n) before a round, then each of the n threads calls Wait(); the last
/// to arrive releases all (a generation count per round). Not for timed code.
class SleepBarrier {
 public:
  void Reset(int n) { n_ = n; }
  void Wait() {
    std::unique_lock<std::mutex> lk(mu_);
    const uint64_t gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lk, [&] { return gen_ != gen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_ = 1, count_ = 0;
  uint64_t gen_ = 0;
};

}  // namespace lockline
