// The fork-child protocol of the families whose tasks can run as processes
// (`tasks:processes`: fault, kernel_lru, kernel_zone, kernel_put_page): one
// child process per team thread, forked in SetupThread so fork is not timed.
// The child inherits the thread's PU binding and the memory prepared before
// fork, dies with its parent (PR_SET_PDEATHSIG) and, since the harness is
// multithreaded, runs only async-signal-safe code until _exit.
//
// Protocol: two pipes. The parent writes a command word (kRun / kExit) to the
// command pipe; on kRun the child runs its job once and writes the job's
// result, a trivially copyable struct, to the result pipe (one write of at
// most PIPE_BUF bytes is atomic). The parent's end is Request (send kRun),
// Await (read the result, optionally doing other work while it waits, such
// as draining a sample ring of the child) and Stop (kExit, reap).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

namespace lockline::child_task {

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

/// One child process that runs `job` (given to Start) each time its parent
/// asks, and sends back the job's `Result`. Owned by one team thread; not
/// thread-safe. The destructor stops the child.
template <typename Result>
class ChildTask {
  static_assert(std::is_trivially_copyable_v<Result>,
                "a child's result crosses a pipe as bytes");
  static_assert(sizeof(Result) <= PIPE_BUF,
                "a result must fit one atomic pipe write");

 public:
  ChildTask() = default;
  ChildTask(const ChildTask&) = delete;
  ChildTask& operator=(const ChildTask&) = delete;
  ~ChildTask() { Stop(); }

  /// Forks the child. In the child, `job()` (returning Result; only
  /// async-signal-safe calls) runs once per Request until kExit, a closed
  /// command pipe, or the parent's death. Returns "" or the failing call
  /// ("pipe failed: <strerror>", "fork failed: <strerror>").
  template <typename Job>
  std::string Start(Job job) {
    Stop();
    int cmd[2], res[2];
    if (pipe2(cmd, O_CLOEXEC) != 0)
      return std::string("pipe failed: ") + std::strerror(errno);
    if (pipe2(res, O_CLOEXEC) != 0) {
      const int err = errno;
      close(cmd[0]), close(cmd[1]);
      return std::string("pipe failed: ") + std::strerror(err);
    }
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      const int err = errno;
      close(cmd[0]), close(cmd[1]), close(res[0]), close(res[1]);
      return std::string("fork failed: ") + std::strerror(err);
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(0);
      close(cmd[1]);
      close(res[0]);
      for (;;) {
        int c = kExit;
        if (read(cmd[0], &c, sizeof c) != static_cast<ssize_t>(sizeof c) ||
            c != kRun)
          _exit(0);
        const Result r = job();
        if (write(res[1], &r, sizeof r) != static_cast<ssize_t>(sizeof r))
          _exit(1);
      }
    }
    close(cmd[0]);
    close(res[1]);
    pid_ = pid;
    cmd_fd_ = cmd[1];
    result_fd_ = res[0];
    return "";
  }

  /// The child's pid, or -1 before Start / after Stop.
  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }

  /// Parent: asks the child to run its job once. False when there is no
  /// child or the command pipe is broken.
  bool Request() {
    const int c = kRun;
    return pid_ > 0 &&
           write(cmd_fd_, &c, sizeof c) == static_cast<ssize_t>(sizeof c);
  }

  /// Parent: waits for the result of the last Request into *r. While none
  /// has arrived, calls `while_waiting()` every `poll_ms` milliseconds
  /// (poll_ms < 0: just block). False when the child died or the pipe broke.
  template <typename F>
  bool Await(Result* r, int poll_ms, F while_waiting) {
    if (pid_ <= 0) return false;
    for (;;) {
      pollfd p{result_fd_, POLLIN, 0};
      const int n = poll(&p, 1, poll_ms);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return false;
      if (n > 0) break;
      while_waiting();
    }
    return read(result_fd_, r, sizeof *r) == static_cast<ssize_t>(sizeof *r);
  }
  bool Await(Result* r) {
    return Await(r, -1, [] {});
  }

  /// Parent: tells the child to exit (SIGKILL when the command pipe is
  /// broken), reaps it and closes the pipes. Does nothing without a child.
  void Stop() {
    if (pid_ <= 0) return;
    const int c = kExit;
    if (write(cmd_fd_, &c, sizeof c) != static_cast<ssize_t>(sizeof c))
      kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    close(cmd_fd_);
    close(result_fd_);
    pid_ = -1;
    cmd_fd_ = result_fd_ = -1;
  }

 private:
  enum : int { kExit = 0, kRun = 1 };
  pid_t pid_ = -1;
  int cmd_fd_ = -1, result_fd_ = -1;
};

}  // namespace lockline::child_task
