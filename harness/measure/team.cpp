// The thread team; where a window is timed (RunWindow).
#include "harness/measure/team.h"

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <new>
#include <utility>

#include "harness/machine/memory.h"
#include "harness/machine/restore.h"
#include "harness/measure/duration.h"
#include "harness/measure/pingpong.h"

namespace lockline {
namespace {

/// The mapping of a team's Flags: their offset (under a page) plus the Flags.
constexpr std::size_t kFlagsMapBytes = 2 * 4096;

// A set-up step or window that never ends: one `lockline: error:` line
// (printf `fmt`), RestoreAll, exit 3.
[[noreturn]] __attribute__((format(printf, 1, 2))) void ExitStuck(
    const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fflush(stderr);
  RestoreAll();
  UnmountWhatLocklineMounted();
  std::_Exit(3);
}

}  // namespace

std::unique_ptr<ThreadTeam::Flags, ThreadTeam::FlagsDeleter>
ThreadTeam::NewFlags() {
  const std::size_t offset =
      SampleLayoutOffset(kDestructiveLine, sizeof(Flags));
  void* p = mmap(nullptr, kFlagsMapBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw MapFailed(kFlagsMapBytes, errno);
  Flags* f = new (static_cast<char*>(p) + offset) Flags();
  return std::unique_ptr<Flags, FlagsDeleter>(f, FlagsDeleter{offset});
}

void ThreadTeam::FlagsDeleter::operator()(Flags* f) const {
  if (!f) return;
  f->~Flags();
  munmap(reinterpret_cast<char*>(f) - offset, kFlagsMapBytes);
}

ThreadTeam::ThreadTeam(const Topology* topo, std::vector<int> pus,
                       CounterSession* counters,
                       std::string no_page_fault_counters)
    : topo_(topo),
      pus_(std::move(pus)),
      counter_session_(counters),
      no_page_fault_counters_(std::move(no_page_fault_counters)),
      slots_(pus_.size()) {
  threads_.reserve(pus_.size());
  try {
    for (int i = 0; i < size(); ++i) StartThreadOnOwnStack(i);
    // Bind each thread and open its counters on it; a failure surfaces here.
    RunOnAllWithin(
        [this](int i) {
          if (topo_ && topo_->is_host() && pus_[i] >= 0)
            BindThisThread(*topo_, pus_[i]);
          if (counter_session_)
            slots_[i].counters =
                no_page_fault_counters_.empty()
                    ? counter_session_->OpenForThisThread()
                    : counter_session_->OpenForThisThreadWithoutPageFaults(
                          no_page_fault_counters_);
        },
        SetupTimeoutNs(), "binding the threads and opening their counters");
  } catch (...) {
    // The threads already started wait on cv_: stop and join them before the
    // members they use go away.
    Shutdown();
    throw;
  }
}

void ThreadTeam::StartThreadOnOwnStack(int index) {
  const StackPlacement at = SampleStackPlacement(index);
  pthread_attr_t attr;
  std::size_t bytes = 0;
  if (pthread_getattr_default_np(&attr) != 0)
    throw std::runtime_error("pthread_getattr_default_np failed");
  pthread_attr_getstacksize(&attr, &bytes);  // RLIMIT_STACK's, as std::thread
  // glibc's default guard: one page below the stack, never mapped writable.
  bytes = RoundUpToPage(std::max<std::size_t>(bytes, 1 << 20)) + 4096;
  void* base =
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  const std::string what =
      std::to_string(index) + " of " + std::to_string(size());
  if (base == MAP_FAILED) {  // EAGAIN, as pthread_create's own stack gives
    pthread_attr_destroy(&attr);
    throw std::runtime_error(ThreadFailure(what, EAGAIN));
  }
  stacks_.push_back({base, bytes});
  mprotect(base, 4096, PROT_NONE);
  // glibc puts the thread's TCB and static TLS at the stack's top.
  pthread_attr_setstack(&attr, static_cast<char*>(base) + 4096,
                        bytes - 4096 - at.top_offset);
  auto* arg = new std::pair<ThreadTeam*, int>(this, index);
  pthread_t thread;
  int err = 0;
  {
    SkipFreePages skip(at.skip_pages);  // pthread_create faults the top page
    err = pthread_create(&thread, &attr, &ThreadTeam::ThreadEntry, arg);
  }
  pthread_attr_destroy(&attr);
  if (err != 0) {
    delete arg;
    throw std::runtime_error(ThreadFailure(what, err));
  }
  threads_.push_back(thread);
}

void* ThreadTeam::ThreadEntry(void* team_and_index) {
  const auto* arg = static_cast<std::pair<ThreadTeam*, int>*>(team_and_index);
  ThreadTeam* team = arg->first;
  const int index = arg->second;
  delete arg;
  team->ThreadMain(index);
  return nullptr;
}

ThreadTeam::~ThreadTeam() { Shutdown(); }

void ThreadTeam::Shutdown() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (quit_) return;
    quit_ = true;
  }
  cv_.notify_all();
  for (pthread_t t : threads_) pthread_join(t, nullptr);
  threads_.clear();
  for (const auto& [base, bytes] : stacks_) munmap(base, bytes);
  stacks_.clear();
}

void ThreadTeam::ThreadMain(int index) {
  uint64_t seen = 0;
  for (;;) {
    std::function<void(int)> task;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return quit_ || generation_ != seen; });
      if (quit_) return;
      seen = generation_;
      task = task_;
    }
    try {
      task(index);
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu_);
      if (!error_) error_ = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++done_;
    }
    done_cv_.notify_all();
  }
}

void ThreadTeam::Post(const std::function<void(int)>& fn) {
  task_ = fn;
  done_ = 0;
  error_ = nullptr;
  ++generation_;
  cv_.notify_all();
}

void ThreadTeam::RethrowError() {
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ThreadTeam::RunOnAll(const std::function<void(int)>& fn) {
  std::unique_lock<std::mutex> lk(mu_);
  Post(fn);
  done_cv_.wait(lk, [&] { return done_ == size(); });
  RethrowError();
}

void ThreadTeam::RunOnAllWithin(const std::function<void(int)>& fn,
                                uint64_t limit_ns, const std::string& what) {
  std::unique_lock<std::mutex> lk(mu_);
  Post(fn);
  if (!done_cv_.wait_for(lk, std::chrono::nanoseconds(limit_ns),
                         [&] { return done_ == size(); })) {
    ExitStuck(
        "lockline: error: thread set-up (%s) did not finish within "
        "%.1f s (%d of %d threads done: a thread is blocked); "
        "exiting. Results of finished points are kept.\n",
        what.c_str(), NsToSeconds(limit_ns), done_, size());
  }
  RethrowError();
}

uint64_t SetupTimeoutNs() {
  static const uint64_t ns = []() -> uint64_t {
    const char* env = std::getenv("LOCKLINE_SETUP_TIMEOUT");
    if (env != nullptr && *env != '\0') {
      try {
        return SecondsToNs(
            ParseDuration(env, "LOCKLINE_SETUP_TIMEOUT", 1e-3, 3600));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "lockline: warning: %s; using 120 s\n", e.what());
      }
    }
    return 120'000'000'000ull;
  }();
  return ns;
}

std::unique_ptr<Topology> LoadTopologyWithin(
    const std::string& spec, uint64_t limit_ns,
    std::unique_ptr<Topology> (*load)(const std::string&)) {
  // A hung loader thread outlives this call: the process exits without it.
  std::packaged_task<std::unique_ptr<Topology>()> task(
      [spec, load] { return load(spec); });
  std::future<std::unique_ptr<Topology>> result = task.get_future();
  std::thread loader = StartThread("discovering the topology", std::move(task));
  if (result.wait_for(std::chrono::nanoseconds(limit_ns)) !=
      std::future_status::ready) {
    ExitStuck(
        "lockline: error: topology discovery of '%s' (hwloc, which "
        "binds a thread to each PU in turn) did not finish within "
        "%.1f s (LOCKLINE_SETUP_TIMEOUT sets the limit); exiting\n",
        spec.c_str(), NsToSeconds(limit_ns));
  }
  loader.join();
  return result.get();
}

WindowResult ThreadTeam::RunWindow(Workload& wl,
                                   const std::vector<ThreadCtx>& ctx,
                                   uint64_t duration_ns, uint64_t bound_ns,
                                   uint64_t hard_limit_ns) {
  const int n = size();
  arrived_.store(0, std::memory_order_relaxed);
  stop_.store(false, std::memory_order_relaxed);
  for (int i = 0; i < n; ++i) slots_[i].ops = 0;
  const bool fixed = wl.fixed_work();

  std::unique_lock<std::mutex> lk(mu_);
  Post([this, &wl, &ctx, n](int i) {
    Slot& s = slots_[i];  // once, before the barrier and the window
    // The run delay before the barrier: a pread, kept out of the window.
    const uint64_t delay0 = ThreadRunDelayNs();
    // Start barrier: all spin until all have arrived, so they leave together.
    arrived_.fetch_add(1, std::memory_order_acq_rel);
    while (arrived_.load(std::memory_order_acquire) < n) CpuRelax();
    if (s.counters) s.counters->Start();
    const uint64_t cpu0 = ThreadCpuNs();
    s.start_ns = NowNs();
    s.ops = wl.RunWindow(ctx[i], stop_);
    s.end_ns = NowNs();
    s.cpu_ns = ThreadCpuNs() - cpu0;
    s.run_delay_ns = RunDelayBetween(delay0, ThreadRunDelayNs());
    s.last_cpu = sched_getcpu();
    if (s.counters) s.counters->Stop();
  });
  lk.unlock();

  // The window's clock starts when the last thread arrives at the barrier.
  while (arrived_.load(std::memory_order_acquire) < n)
    std::this_thread::yield();
  const uint64_t released = NowNs();
  bool overrun = false;
  lk.lock();
  if (!fixed) {
    done_cv_.wait_for(lk, std::chrono::nanoseconds(duration_ns),
                      [&] { return done_ == n; });
    // Release store: the workers' relaxed loads see it promptly; join via the
    // mutex orders it.
    stop_.store(true, std::memory_order_release);
  }
  const auto until = [&](uint64_t limit) {
    const uint64_t now = NowNs() - released;
    return std::chrono::nanoseconds(limit > now ? limit - now : 0);
  };
  if (!done_cv_.wait_for(lk, until(bound_ns), [&] { return done_ == n; })) {
    overrun = true;
    if (!done_cv_.wait_for(lk, until(hard_limit_ns),
                           [&] { return done_ == n; })) {
      ExitStuck(
          "lockline: error: a window is still running %.1f s after its "
          "start (threads that never return from RunWindow, or a lock that "
          "never hands over); exiting. Results of finished points are kept.\n",
          NsToSeconds(hard_limit_ns));
    }
  }
  RethrowError();
  lk.unlock();

  WindowResult r;
  uint64_t first = UINT64_MAX, last = 0;
  for (int i = 0; i < n; ++i) {
    r.ops.push_back(slots_[i].ops);
    r.total_ops += slots_[i].ops;
    r.cpu_seconds += NsToSeconds(slots_[i].cpu_ns);
    r.last_cpus.push_back(slots_[i].last_cpu);
    first = std::min(first, slots_[i].start_ns);
    last = std::max(last, slots_[i].end_ns);
  }
  r.seconds = NsToSeconds(last - first);
  r.overrun = overrun;
  r.max_off_cpu = MaxOffCpuShare(
      n, [&](int i) { return slots_[i].start_ns; },
      [&](int i) { return slots_[i].end_ns; },
      [&](int i) { return slots_[i].cpu_ns; },
      [&](int i) { return slots_[i].run_delay_ns; });
  return r;
}

std::vector<std::vector<CounterReading>> ThreadTeam::ReadCounters() {
  std::vector<std::vector<CounterReading>> out(size());
  RunOnAll([&](int i) {
    if (slots_[i].counters) out[i] = slots_[i].counters->Read();
  });
  return out;
}

void ThreadTeam::ResetCounters() {
  RunOnAll([&](int i) {
    if (slots_[i].counters) slots_[i].counters->Reset();
  });
}

std::vector<std::vector<int>> ThreadTeam::BoundPus() {
  std::vector<std::vector<int>> out(size());
  RunOnAll([&](int i) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) out[i].push_back(c);
  });
  return out;
}

std::pair<double, double> ThreadTeam::PingPong(int a, int b,
                                               uint64_t budget_ns) {
  if (a == b || a < 0 || b < 0 || a >= size() || b >= size()) return {0, 0};
  PingPongLine line;
  std::vector<double> samples;
  RunOnAll([&](int i) {
    if (i == a) {
      const uint64_t deadline = NowNs() + budget_ns;
      // At least 5 samples for a median; at most 100000 (a budget too long).
      line.Initiate(
          [&] {
            return (NowNs() < deadline || samples.size() < 5) &&
                   samples.size() <= 100000;
          },
          samples);
    } else if (i == b) {
      line.Respond();
    }
  });
  if (samples.empty()) return {0, 0};
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples.front()};
}

uint64_t OverrunBoundNs(uint64_t window_ns, bool fixed_work) {
  if (fixed_work) return 60'000'000'000ull;
  return 2 * window_ns + 20'000'000ull;
}

}  // namespace lockline
