// The fork-child protocol of the families whose tasks can run as processes
// (`tasks:processes`: fault, kernel_lru, kernel_zone, kernel_put_page): one
// child process per team thread, forked in SetupThread so fork is not timed.
// The child inherits the thread's PU binding and the memory prepared before
// fork, dies with its parent (PR_SET_PDEATHSIG) and, since the harness is
// multithreaded, runs only async-signal-safe code until _exit.
//
// Protocol: one AF_UNIX SOCK_SEQPACKET socket pair per child (message
// boundaries, EOF when the other side is gone). The parent sends a command
// word (kRun / kExit); on kRun the child runs its job once and sends its
// result, a trivially copyable struct, as one message. Both sides send with
// MSG_NOSIGNAL: a dead peer (say, OOM-killed) is EPIPE, never a SIGPIPE that
// kills the parent. The child resets every signal handler the parent
// installed and clears its mask, so a signal to one child kills that child
// only, and closes its siblings' socket ends (ChildHygiene).
#pragma once

#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "harness/measure/barrier.h"

namespace lockline::child_task {

/// The barrier of a point's tasks (the team threads that drive them block on
/// it between a clean and an evidence window): harness/measure/barrier.h.
using TaskBarrier = SleepBarrier;

/// MemAvailable from /proc/meminfo, bytes (0 when unreadable): the bound on
/// the tasks' mappings.
inline uint64_t MemAvailableBytes() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  uint64_t kb = 0;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

/// tv as seconds.
inline double TvSeconds(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) +
         static_cast<double>(tv.tv_usec) * 1e-6;
}

/// What getrusage says a task spent between two readings `a` and `b`: user
/// and system CPU seconds and minor faults.
struct Usage {
  double user_s = 0, sys_s = 0;
  uint64_t minflt = 0;
};
inline Usage UsageBetween(const rusage& a, const rusage& b) {
  return {TvSeconds(b.ru_utime) - TvSeconds(a.ru_utime),
          TvSeconds(b.ru_stime) - TvSeconds(a.ru_stime),
          static_cast<uint64_t>(b.ru_minflt - a.ru_minflt)};
}

/// Copies `from` into the error field `to` when `to` is still empty (the
/// first error of a task wins). Async-signal-safe.
template <std::size_t N>
void KeepFirstError(char (&to)[N], const char (&from)[N]) {
  if (to[0] == 0 && from[0] != 0) std::memcpy(to, from, N);
}

/// How a reaped child ended, from its waitpid status: "task died: signal 9
/// (Killed)", "task exited with status 1" (a child that could not send its
/// result), "task exited" (status 0).
inline std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return "task died: signal " + std::to_string(sig) + " (" +
           (name ? name : "?") + ")";
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    return "task exited with status " + std::to_string(WEXITSTATUS(status));
  return "task exited";
}

/// Grace a child gets to exit after kExit before Stop kills it, ms.
inline constexpr int kStopGraceMs = 2000;

namespace detail {
/// Parent ends of every live child's socket, and the lock that serializes
/// forks against changes to that list (so a child forked by one team thread
/// sees a complete list and never one half-made by another).
inline std::mutex& ForkMutex() {
  static std::mutex m;
  return m;
}
inline std::vector<int>& ParentEnds() {
  static std::vector<int> v;
  return v;
}
}  // namespace detail

/// One child process that runs `job` (given to Start) each time its parent
/// asks, and sends back the job's `Result`. Owned by one team thread; not
/// thread-safe. The destructor stops the child.
template <typename Result>
class ChildTask {
  static_assert(std::is_trivially_copyable_v<Result>,
                "a child's result crosses a socket as bytes");
  static_assert(sizeof(Result) <= PIPE_BUF,
                "a result must fit one small message");

 public:
  ChildTask() = default;
  ChildTask(const ChildTask&) = delete;
  ChildTask& operator=(const ChildTask&) = delete;
  ~ChildTask() { Stop(); }

  /// Forks the child. In the child, `job()` (returning Result; only
  /// async-signal-safe calls) runs once per Request until kExit, a closed
  /// socket, or the parent's death. Returns "" or the failing call
  /// ("socketpair failed: <strerror>", "fork failed: <strerror>").
  template <typename Job>
  std::string Start(Job job) {
    Stop();
    died_.clear();
    std::lock_guard<std::mutex> lk(detail::ForkMutex());
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
      return std::string("socketpair failed: ") + std::strerror(errno);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      const int err = errno;
      close(sv[0]), close(sv[1]);
      return std::string("fork failed: ") + std::strerror(err);
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(0);
      ChildHygiene(sv[0]);
      const int fd = sv[1];
      for (;;) {
        int c = kExit;
        const ssize_t n = recv(fd, &c, sizeof c, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n != static_cast<ssize_t>(sizeof c) || c != kRun) _exit(0);
        const Result r = job();
        if (send(fd, &r, sizeof r, MSG_NOSIGNAL) !=
            static_cast<ssize_t>(sizeof r))
          _exit(1);
      }
    }
    close(sv[1]);
    pid_ = pid;
    fd_ = sv[0];
    detail::ParentEnds().push_back(fd_);
    return "";
  }

  /// The child's pid, or -1 before Start / after Stop or its death.
  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  /// The parent's end of the socket (-1 without a child): readable when a
  /// result arrived, POLLHUP when the child is gone.
  int fd() const { return fd_; }
  /// How the child ended when it died unasked ("" while it lives).
  const std::string& died() const { return died_; }

  /// Parent: asks the child to run its job once. "" or why not: no child
  /// ("task has no child process" or how it died), or the send failed (EPIPE:
  /// the child is dead, reaped and described).
  std::string Request() {
    if (pid_ <= 0)
      return died_.empty() ? std::string("task has no child process") : died_;
    const int c = kRun;
    ssize_t n;
    do {
      n = send(fd_, &c, sizeof c, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(sizeof c)) return "";
    const int err = errno;
    if (n < 0 && err != EPIPE && err != ECONNRESET)
      return std::string("sending to the task failed: ") + std::strerror(err);
    return Reap(false);
  }

  /// Parent: waits up to `timeout_ms` (< 0: without limit) for the result of
  /// the last Request into *r. While none has arrived, calls
  /// `while_waiting()` every `poll_ms` milliseconds (< 0: just block).
  /// Returns "" or why there is no result: the child died (EOF: reaped,
  /// "task died: signal 9 (Killed)"), did not answer in time (killed,
  /// reaped: "task did not report within N ms (killed)"), or the read failed.
  template <typename F>
  std::string AwaitFor(Result* r, int64_t timeout_ms, int poll_ms,
                       F while_waiting) {
    if (pid_ <= 0)
      return died_.empty() ? std::string("task has no child process") : died_;
    const int64_t deadline =
        timeout_ms < 0 ? -1 : MonotonicMs() + std::max<int64_t>(timeout_ms, 0);
    for (;;) {
      int wait_ms = poll_ms;
      if (deadline >= 0) {
        const int64_t left = std::max<int64_t>(deadline - MonotonicMs(), 0);
        wait_ms = poll_ms < 0
                      ? static_cast<int>(std::min<int64_t>(left, 1 << 30))
                      : static_cast<int>(std::min<int64_t>(left, poll_ms));
      }
      pollfd p{fd_, POLLIN, 0};
      const int n = poll(&p, 1, wait_ms);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return std::string("poll failed: ") + std::strerror(errno);
      if (n > 0) break;
      if (deadline >= 0 && MonotonicMs() >= deadline) {
        kill(pid_, SIGKILL);
        Reap(true);
        died_ = "task did not report within " + std::to_string(timeout_ms) +
                " ms (killed)";
        return died_;
      }
      while_waiting();
    }
    ssize_t got;
    do {
      got = recv(fd_, r, sizeof *r, 0);
    } while (got < 0 && errno == EINTR);
    if (got == static_cast<ssize_t>(sizeof *r)) return "";
    if (got < 0 && errno != ECONNRESET)
      return std::string("reading the task's result failed: ") +
             std::strerror(errno);
    return Reap(false);  // EOF: the child is gone
  }
  std::string AwaitFor(Result* r, int64_t timeout_ms) {
    return AwaitFor(r, timeout_ms, -1, [] {});
  }

  /// Parent: tells the child to exit, reaps it (SIGKILL when it has not
  /// exited within kStopGraceMs or the socket is broken) and closes the
  /// socket. Does nothing without a child.
  void Stop() {
    if (pid_ <= 0) return;
    const int c = kExit;
    if (send(fd_, &c, sizeof c, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof c))
      kill(pid_, SIGKILL);
    int status = 0;
    for (int waited = 0;; ++waited) {
      const pid_t w = waitpid(pid_, &status, WNOHANG);
      if (w == pid_ || (w < 0 && errno != EINTR)) break;
      if (waited == kStopGraceMs) {
        kill(pid_, SIGKILL);
        while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
        break;
      }
      const timespec ms{0, 1'000'000};
      nanosleep(&ms, nullptr);
    }
    CloseFd();
    pid_ = -1;
  }

 private:
  enum : int { kExit = 0, kRun = 1 };

  static int64_t MonotonicMs() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
  }

  // In the child, right after fork: default dispositions and an empty mask
  // for every signal, and the parent's end of this and every sibling's
  // socket closed. Async-signal-safe (forks are serialized against changes
  // to the list, so it is complete and only read here).
  static void ChildHygiene(int own_parent_end) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int s = 1; s < NSIG; ++s)
      if (s != SIGKILL && s != SIGSTOP) sigaction(s, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    close(own_parent_end);
    for (int fd : detail::ParentEnds()) close(fd);
  }

  // The child is gone or going: reap it (blocking: its socket end is closed,
  // so it is exiting; after `killed` it is dying) and say how it ended.
  std::string Reap(bool killed) {
    int status = 0;
    pid_t w;
    do {
      w = waitpid(pid_, &status, 0);
    } while (w < 0 && errno == EINTR);
    died_ = w == pid_ ? DescribeExit(status) : "task died (not reapable)";
    if (killed) died_ += " (killed by lockline)";
    CloseFd();
    pid_ = -1;
    return died_;
  }

  void CloseFd() {
    if (fd_ < 0) return;
    std::lock_guard<std::mutex> lk(detail::ForkMutex());
    auto& v = detail::ParentEnds();
    v.erase(std::remove(v.begin(), v.end(), fd_), v.end());
    close(fd_);
    fd_ = -1;
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  std::string died_;
};

}  // namespace lockline::child_task
