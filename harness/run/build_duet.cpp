#include "harness/run/build_duet.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "harness/machine/cpu.h"
#include "harness/machine/memory.h"
#include "harness/machine/restore.h"
#include "harness/measure/counters.h"
#include "harness/measure/shared_calibration.h"
#include "harness/measure/team.h"
#include "harness/record/results.h"
#include "harness/run/options.h"
#include "harness/run/runner.h"

namespace lockline {
namespace {

using nlohmann::json;

/// The client's wait for one answer, past a window's hard limit (bound + 120
/// s): 300 s, or $LOCKLINE_DUET_ANSWER_TIMEOUT (tests).
double AnswerTimeoutSeconds() {
  static const double s = [] {
    const char* env = std::getenv("LOCKLINE_DUET_ANSWER_TIMEOUT");
    return env && *env ? ParseDurationSeconds(
                             env, "LOCKLINE_DUET_ANSWER_TIMEOUT", 1e-3, 3600)
                       : 300.0;
  }();
  return s;
}

/// Limits on an answer line (a "closed" one is a few KiB, 4 deep).
constexpr size_t kMaxLineBytes = 16u << 20;
constexpr int kMaxJsonDepth = 32;

/// Async-signal-safe: removes the flat directory `dir`.
void RemoveFlatDir(const char* dir) {
  const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    // linux_dirent64: d_reclen at offset 16, d_name at 19.
    char buf[4096];
    for (long n; (n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0;)
      for (long off = 0; off < n;) {
        unsigned short len = 0;
        std::memcpy(&len, buf + off + 16, sizeof len);
        if (buf[off + 19] != '.') unlinkat(fd, buf + off + 19, 0);
        off += len;
      }
    close(fd);
  }
  rmdir(dir);
}

/// Forks a watchdog: when its pipe ends (lockline exits on any path) it kills
/// process group `group` unless told "R" (reaped) and removes `dir` (nullptr:
/// none). Returns the pipe's write end (-1: none).
int StartWatchdog(pid_t group, const char* dir) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls here: lockline may have threads.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    for (int sig = 1; sig < 32; ++sig)
      if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &ignore, nullptr);
    // Nothing held open but the pipe (a reader waits for lockline's stdout).
    for (int fd = 0; fd < 65536; ++fd)
      if (fd != p[0]) close(fd);
    bool reaped = false;
    char c = 0;
    for (ssize_t n; (n = read(p[0], &c, 1)) != 0;) {
      if (n < 0 && errno != EINTR) break;
      reaped |= n == 1 && c == 'R';
    }
    if (!reaped) kill(-group, SIGKILL);
    if (dir != nullptr) RemoveFlatDir(dir);
    _exit(0);
  }
  close(p[0]);
  if (pid > 0) return p[1];
  close(p[1]);
  return -1;
}

/// Moves `buffer`'s first complete line to `line`; false while none.
bool TakeLine(std::string& buffer, std::string* line) {
  const size_t nl = buffer.find('\n');
  if (nl == std::string::npos) return false;
  *line = buffer.substr(0, nl);
  buffer.erase(0, nl + 1);
  return true;
}

/// One line of a protocol text without control characters (an error text).
std::string OneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

/// " (a, b, c, d, ... (N more))", or "" for none.
std::string Listed(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < 4; ++i) out += (i ? ", " : "") + v[i];
  if (v.size() > 4) out += ", ... (" + std::to_string(v.size() - 4) + " more)";
  return v.empty() ? "" : " (" + out + ")";
}

/// The refusal of the old build `binary`: one `lockline: error:` line.
UsageError Refusal(const std::string& binary, const std::string& why) {
  return UsageError("--duet-with=" + binary + ": " + why);
}

/// Refuses a hello of another protocol or result schema.
void CheckHello(const std::string& binary, const std::string& hello) {
  int proto = 0, schema = 0;
  size_t npoints = 0;
  if (std::sscanf(hello.c_str(),
                  "lockline-window-server proto=%d schema=%d points=%zu",
                  &proto, &schema, &npoints) != 3)
    throw Refusal(binary, "malformed hello '" + OneLine(hello) + "'");
  if (schema != kSchemaVersion || proto != kWindowServerProtocol)
    throw Refusal(binary, "it writes result schema " + std::to_string(schema) +
                              " (window protocol " + std::to_string(proto) +
                              "), this build schema " +
                              std::to_string(kSchemaVersion) + " (protocol " +
                              std::to_string(kWindowServerProtocol) +
                              "); accepted: a build of the same result "
                              "schema and protocol");
}

/// Refuses other point keys, naming those only one side has.
void CheckKeys(const std::string& binary, const std::vector<std::string>& keys,
               const std::set<std::string>& theirs) {
  const std::set<std::string> ours(keys.begin(), keys.end());
  std::vector<std::string> only_ours, only_theirs;
  for (const auto& k : ours)
    if (!theirs.count(k)) only_ours.push_back(k);
  for (const auto& k : theirs)
    if (!ours.count(k)) only_theirs.push_back(k);
  if (only_ours.empty() && only_theirs.empty()) return;
  throw Refusal(
      binary,
      "the two builds' suites differ: " + std::to_string(only_ours.size()) +
          " key(s) only in this build" + Listed(only_ours) + ", " +
          std::to_string(only_theirs.size()) + " only in the old build" +
          Listed(only_theirs) +
          "; accepted: builds with the same point keys for the selected suite "
          "(narrow both with --benchmark_filter)");
}

// ---- client --------------------------------------------------------------

/// One window of either build (the old build's as the server measured it).
struct SideWindow {
  uint64_t ops = 0;      ///< operations of all its threads
  double seconds = 0;    ///< its first thread's start to its last thread's end
  bool overrun = false;  ///< past its wall-clock bound (OverrunBoundNs)
  double cpu_seconds = 0;   ///< its threads' summed CPU time in the window
  double max_off_cpu = -1;  ///< -1: unknown (a server before off-CPU shares)
};

/// The client's end of a window server (a child on a socket pair), used by one
/// thread at a time.
class WindowClient {
 public:
  /// Starts `binary --window-server args...` (its stderr relayed as "old
  /// build: " lines). Throws UsageError on refusal.
  WindowClient(const std::string& binary, const std::vector<std::string>& args,
               const std::vector<std::string>& keys)
      : binary_(binary) {
    Start(args);
    try {
      std::string hello;
      try {
        hello = ReadLine();
      } catch (const std::exception& e) {
        hello_error_ = e.what();
      }
      if (hello.rfind("lockline-window-server ", 0) != 0) RefuseSilentServer();
      CheckHello(binary_, hello);
      layout_ = hello.find(" layout=1") != std::string::npos;
      std::set<std::string> theirs;
      for (std::string line; (line = ReadLine()) != "end";) {
        if (line.rfind("key ", 0) != 0)
          throw Refusal(binary_, "malformed key line '" + OneLine(line) + "'");
        theirs.insert(line.substr(4));
      }
      CheckKeys(binary_, keys, theirs);
    } catch (...) {
      Kill();
      throw;
    }
    // From here on the old build's messages go to our stderr as they come.
    if (!err_text_.empty())
      std::fprintf(stderr, "old build: %s", err_text_.c_str());
    err_text_.clear();
    relay_ = true;
    const char* dir = std::getenv(kSharedCalibrationEnv);
    watchdog_ = StartWatchdog(pid_, dir && *dir ? dir : nullptr);
  }

  ~WindowClient() {
    if (fd_ >= 0) {
      WriteAll(fd_, "quit\n");
      close(fd_);
      fd_ = -1;
    }
    // One stuck in a window is killed after 10 s.
    if (pid_ > 0 && !ReapWithin(10'000)) Kill();
    if (watchdog_ >= 0) {
      WriteAll(watchdog_, "R");
      close(watchdog_);
    }
    if (err_fd_ >= 0) {
      DrainErr(0);
      close(err_fd_);
    }
  }
  WindowClient(const WindowClient&) = delete;
  WindowClient& operator=(const WindowClient&) = delete;

  /// Opens point `key` on the server; returns its workload's fixed_work().
  bool Open(const std::string& key, uint64_t window_ns, int windows,
            const std::vector<int>& pus, bool oversubscribed) {
    // Piece by piece: GCC 12's -Wrestrict misreads operator+ chains at -O3.
    std::string line = "open ";
    line.append(key).append(" ").append(std::to_string(window_ns));
    line.append(" ").append(std::to_string(windows)).append(" ");
    for (size_t i = 0; i < pus.size(); ++i)
      line.append(i ? "," : "").append(std::to_string(pus[i]));
    line.append(oversubscribed ? " 1" : " 0");
    uint64_t seed = 0;
    if (layout_ && LiveLayoutSeed(&seed))
      line.append(" layout=").append(std::to_string(seed));
    const std::string a = Ask(line);
    int fixed = 0;
    if (std::sscanf(a.c_str(), "ok %d", &fixed) != 1)
      Stop("unexpected answer to open: " + a);
    return fixed != 0;
  }

  /// Runs one window of the open point.
  SideWindow Window() {
    const std::string a = Ask("window");
    SideWindow w;
    unsigned long long ops = 0;
    int overrun = 0;
    const int got =
        std::sscanf(a.c_str(), "done %llu %lf %d %lf %lf", &ops, &w.seconds,
                    &overrun, &w.cpu_seconds, &w.max_off_cpu);
    if (got < 4) Stop("unexpected answer to window: " + a);
    if (got == 4) w.max_off_cpu = -1;  // a server before off-CPU shares
    w.ops = ops;
    w.overrun = overrun != 0;
    return w;
  }

  /// Closes the open point: {"verify": "", "metrics": {...}} of its side.
  std::string Close() {
    const std::string a = Ask("close");
    if (a.rfind("closed ", 0) != 0) Stop("unexpected answer to close: " + a);
    return a.substr(7);
  }

  /// Ends the run on an answer out of protocol (before acceptance, throws
  /// std::runtime_error(why) for the refusal).
  [[noreturn]] void Stop(const std::string& why) {
    if (!relay_) throw std::runtime_error(why);
    const std::string path = KeptResultPath();
    const std::string kept = path.empty() ? " (no result file was written yet)"
                                          : ": " + path + " keeps the " +
                                                std::to_string(KeptRows()) +
                                                " measured rows written before";
    std::fflush(stdout);
    std::fprintf(stderr,
                 "lockline: error: --duet-with=%s: %s; stopping the run%s\n",
                 EscapeForMessage(binary_).c_str(),
                 EscapeForMessage(why).c_str(), kept.c_str());
    std::fflush(stderr);
    Kill();
    RestoreAll();
    UnmountWhatLocklineMounted();
    _exit(3);
  }

  const std::string& binary() const { return binary_; }
  /// The server samples offsets from the client's layout seed (layout=1).
  bool layout() const { return layout_; }

 private:
  void Start(const std::vector<std::string>& args) {
    int sv[2], ep[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 ||
        pipe2(ep, O_CLOEXEC) != 0)
      throw Refusal(binary_, std::string("cannot create a socket: ") +
                                 std::strerror(errno));
    std::vector<std::string> argv = {binary_, "--window-server"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    AnswerTimeoutSeconds();  // a bad $LOCKLINE_DUET_ANSWER_TIMEOUT: refused
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0)
      throw Refusal(binary_,
                    std::string("cannot fork: ") + std::strerror(errno));
    if (pid == 0) {
      // Its own process group, SIGKILLed should lockline die first.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      dup2(sv[1], 0);
      dup2(sv[1], 1);
      dup2(ep[1], 2);
      execv(binary_.c_str(), cargv.data());
      std::fprintf(stderr, "cannot execute: %s\n", std::strerror(errno));
      _exit(127);
    }
    pid_ = pid;
    setpgid(pid, pid);
    close(sv[1]);
    close(ep[1]);
    fd_ = sv[0];
    // Its stderr: kept for a refusal's quote, then relayed in ReadLine.
    err_fd_ = ep[0];
  }

  /// Refuses a binary that did not say the hello, quoting its exit and words.
  [[noreturn]] void RefuseSilentServer() {
    close(fd_);
    fd_ = -1;
    const bool exited = ReapWithin(2'000);
    if (!exited) Kill();
    std::string said = EscapeForMessage(OneLine(err_text_));
    if (said.size() > 200) said = said.substr(0, 200) + "...";
    throw Refusal(
        binary_,
        "it did not answer as a lockline window server (" +
            (!exited ? EscapeForMessage(hello_error_) + "; killed"
             : WIFEXITED(status_)
                 ? "exit status " + std::to_string(WEXITSTATUS(status_))
                 : std::string("killed by a signal")) +
            (said.empty() ? "" : ", it said: " + said) +
            "); accepted: a lockline build with --window-server (issue 38 "
            "and later) of result schema " +
            std::to_string(kSchemaVersion));
  }

  /// True when the server exited within `ms` (its status in status_).
  bool ReapWithin(int ms) {
    for (int waited = 0; pid_ > 0; waited += 10) {
      if (waitpid(pid_, &status_, WNOHANG) == pid_) pid_ = -1;
      if (pid_ > 0 && waited >= ms) return false;
      if (pid_ > 0) usleep(10'000);
    }
    return true;
  }

  /// Kills the server's process group and reaps the server.
  void Kill() {
    if (pid_ <= 0) return;
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
    pid_ = -1;
  }

  /// The answer to `line`; "error <text>" throws std::runtime_error.
  std::string Ask(const std::string& line) {
    if (fd_ < 0 || !WriteAll(fd_, line + "\n"))
      Stop("the old build's window server (" + binary_ + ") is gone");
    std::string answer = ReadLine();
    if (answer.rfind("error ", 0) == 0)
      throw std::runtime_error("old build: " +
                               EscapeForMessage(answer.substr(6)));
    return answer;
  }

  /// The next answer line; Stop when out of protocol.
  std::string ReadLine() {
    const uint64_t deadline = NowNs() + SecondsToNs(AnswerTimeoutSeconds());
    // Searched only when new bytes brought a newline (one pass a line).
    bool complete = true;
    for (std::string line;;) {
      if (complete && TakeLine(buffer_, &line)) return line;
      complete = false;
      if (buffer_.size() > kMaxLineBytes)
        Stop("the old build's window server (" + binary_ +
             ") wrote a line longer than " +
             std::to_string(kMaxLineBytes >> 20) + " MiB");
      if (NowNs() > deadline) {
        char limit[32];
        std::snprintf(limit, sizeof limit, "%g s", AnswerTimeoutSeconds());
        Stop("the old build's window server (" + binary_ +
             ") did not answer within " + limit);
      }
      if (fd_ < 0) Stop("the old build's server is gone");
      pollfd p[2] = {{fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
      const int n = poll(p, err_fd_ >= 0 ? 2 : 1, 100);
      if (n < 0 && errno != EINTR)
        Stop(std::string("poll: ") + std::strerror(errno));
      if (err_fd_ >= 0 && n > 0 && (p[1].revents & (POLLIN | POLLHUP)))
        DrainErr(0);
      if (n > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
        char buf[16384];
        const ssize_t r = read(fd_, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
          DrainErr(100);
          Stop("the old build's window server (" + binary_ +
               ") closed the connection" +
               (err_text_.empty() ? "" : ": " + OneLine(err_text_)));
        }
        buffer_.append(buf, static_cast<size_t>(r));
        complete = std::memchr(buf, '\n', static_cast<size_t>(r)) != nullptr;
      }
    }
  }

  /// Reads the server's stderr (kept in err_text_ until relay_).
  void DrainErr(int timeout_ms) {
    if (err_fd_ < 0) return;
    pollfd p{err_fd_, POLLIN, 0};
    while (poll(&p, 1, timeout_ms) > 0 && (p.revents & (POLLIN | POLLHUP))) {
      char buf[4096];
      const ssize_t n = read(err_fd_, buf, sizeof buf);
      if (n <= 0) {
        close(err_fd_);
        err_fd_ = -1;
        return;
      }
      if (relay_)
        std::fprintf(stderr, "old build: %.*s", static_cast<int>(n), buf);
      else if (err_text_.size() < 65536)
        err_text_.append(buf, static_cast<size_t>(n));
      timeout_ms = 0;
    }
  }

  std::string binary_;
  int fd_ = -1;        ///< the socket: the server's stdin and stdout
  int err_fd_ = -1;    ///< the server's stderr
  int pid_ = -1;       ///< the server, leader of its own process group
  int status_ = 0;     ///< its wait status once reaped
  int watchdog_ = -1;  ///< StartWatchdog's pipe
  bool relay_ = false;
  bool layout_ = false;
  std::string buffer_, err_text_, hello_error_;
};

// ---- the paired workload -------------------------------------------------

/// One repetition of a build duet (A = the old build, B = this one).
struct DuetRepetition {
  std::string key;
  std::vector<DuetSide> schedule;
  bool old_prepares_first = false;
  uint64_t window_ns = 0;
  std::vector<int> pus;
  bool oversubscribed = false;
};

/// This build's workload (B) paired window by window with the old build's
/// (A, on the server while thread 0 waits); Report() adds the pairs.
class BuildDuetWorkload : public HeapPlacedWorkload {
 public:
  BuildDuetWorkload(std::unique_ptr<Workload> local,
                    std::shared_ptr<WindowClient> client, DuetRepetition rep)
      : local_(std::move(local)),
        client_(std::move(client)),
        rep_(std::move(rep)) {}
  ~BuildDuetWorkload() override {
    if (!open_) return;
    try {
      client_->Close();
    } catch (...) {
    }
  }

  void Prepare(int threads) override {
    // Who prepares first is drawn per repetition: set-up leaves the caches to
    // whoever prepared last, and fixed work has no warm-up pair.
    if (!rep_.old_prepares_first) local_->Prepare(threads);
    logs_ = PaddedSlots<ThreadLog>(static_cast<size_t>(threads));
    for (size_t i = 0; i < logs_.size(); ++i)
      logs_[i].windows.assign(rep_.schedule.size(), LocalWindow{});
    remote_.assign(rep_.schedule.size(), SideWindow{});
    const auto old_windows =
        std::count_if(rep_.schedule.begin(), rep_.schedule.end(),
                      [](DuetSide s) { return !IsLocal(s); });
    const bool fixed =
        client_->Open(rep_.key, rep_.window_ns, static_cast<int>(old_windows),
                      rep_.pus, rep_.oversubscribed);
    open_ = true;
    if (rep_.old_prepares_first) local_->Prepare(threads);
    if (fixed != local_->fixed_work())
      throw std::runtime_error(
          "build duet: " + rep_.key +
          " is fixed work in one build and a timed window in the other");
  }

  void SetupThread(const ThreadCtx& ctx) override { local_->SetupThread(ctx); }

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    ThreadLog& log = logs_[static_cast<size_t>(ctx.index)];
    const size_t w = static_cast<size_t>(log.next++);
    // Past the schedule: this build alone, unrecorded.
    if (w >= rep_.schedule.size()) return local_->RunWindow(ctx, stop);
    if (IsLocal(rep_.schedule[w])) {
      LocalWindow& mine = log.windows[w];
      const uint64_t d0 = ThreadRunDelayNs();
      const uint64_t c0 = ThreadCpuNs();
      mine.start_ns = NowNs();
      mine.ops = local_->RunWindow(ctx, stop);
      mine.end_ns = NowNs();
      mine.cpu_ns = ThreadCpuNs() - c0;
      mine.run_delay_ns = RunDelayBetween(d0, ThreadRunDelayNs());
      return mine.ops;
    }
    // The old build's: thread 0 sleeps in the read, the others return, so
    // the old build's threads have the PUs to themselves.
    if (ctx.index != 0) return 0;
    remote_[w] = client_->Window();
    return remote_[w].ops;
  }

  void TeardownThread(const ThreadCtx& ctx) override {
    local_->TeardownThread(ctx);
  }
  bool fixed_work() const override { return local_->fixed_work(); }
  std::string page_fault_counters_left_out() const override {
    return local_->page_fault_counters_left_out();
  }
  bool shares_lines() const override { return local_->shares_lines(); }

  void Report(PointReport& out, double /*window_seconds*/,
              uint64_t /*ops*/) override {
    const size_t n = rep_.schedule.size();
    // A window past its bound marks its pair (compare.py leaves it out).
    const double bound_s =
        NsToSeconds(OverrunBoundNs(rep_.window_ns, local_->fixed_work()));
    std::vector<SideWindow> win(n);
    std::vector<uint64_t> ops(n);
    std::vector<double> seconds(n);
    size_t ran = 0;  // the schedule's windows up to the last that ran
    uint64_t new_ops = 0, measured_ops[2] = {0, 0};  // by DuetSide kA, kB
    double new_sec = 0, measured_sec[2] = {0, 0};
    int old_overruns = 0;
    for (size_t w = 0; w < n; ++w) {
      const DuetSide side = rep_.schedule[w];
      win[w] = IsLocal(side) ? LocalWindowAt(w, bound_s) : remote_[w];
      ops[w] = win[w].ops;
      seconds[w] = win[w].seconds;
      if (IsLocal(side)) {
        new_ops += ops[w];
        new_sec += seconds[w];
      } else {
        old_overruns += win[w].overrun ? 1 : 0;
      }
      if (seconds[w] > 0) ran = w + 1;
      if (side == DuetSide::kA || side == DuetSide::kB) {
        measured_ops[static_cast<int>(side)] += ops[w];
        measured_sec[static_cast<int>(side)] += seconds[w];
      }
    }
    // The old side's own report and verification, then the current side's.
    const json old_side = CloseOldSide();
    local_->Report(out, new_sec, new_ops);
    const std::vector<DuetPair> pairs = DuetPairs(
        {rep_.schedule.begin(), rep_.schedule.begin() + ran}, ops, seconds);
    size_t warm = 0;
    while (warm < ran && (rep_.schedule[warm] == DuetSide::kWarmupA ||
                          rep_.schedule[warm] == DuetSide::kWarmupB))
      ++warm;
    json rows = json::array();
    std::vector<double> logs;  // log ratios new/old where both sides ran
    for (size_t k = 0; k < pairs.size(); ++k) {
      const DuetPair& p = pairs[k];
      bool overrun = false;
      double cpu_rate[2] = {0, 0};  // old, new: ops per CPU second
      double off = 0;  // the larger off-CPU share of the pair; -1: unknown
      for (size_t w = warm + 2 * k; w < warm + 2 * k + 2 && w < ran; ++w) {
        const double o = win[w].max_off_cpu, cpu = win[w].cpu_seconds;
        off = o < 0 || off < 0 ? -1 : std::max(off, o);
        overrun |= win[w].overrun;
        cpu_rate[IsLocal(rep_.schedule[w]) ? 1 : 0] =
            cpu > 0 ? static_cast<double>(ops[w]) / cpu : 0.0;
      }
      rows.push_back({{"a_ops_per_s", p.a_ops_per_s},
                      {"b_ops_per_s", p.b_ops_per_s},
                      {"a_ops_per_cpu_s", cpu_rate[0]},
                      {"b_ops_per_cpu_s", cpu_rate[1]},
                      {"order", p.b_first ? "ba" : "ab"},
                      {"overrun", overrun},
                      {"off_cpu", off < 0 ? json(nullptr) : json(off)}});
      if (p.a_ops_per_s > 0 && p.b_ops_per_s > 0)
        logs.push_back(std::log(p.b_ops_per_s / p.a_ops_per_s));
    }
    json sides = json::array();
    static const char* kNames[] = {"old", "new", "warmup_old", "warmup_new"};
    for (size_t w = 0; w < ran; ++w)
      sides.push_back(kNames[static_cast<int>(rep_.schedule[w])]);
    double ratio = 0;  // the median pair ratio new/old
    if (!logs.empty()) {
      std::sort(logs.begin(), logs.end());
      const size_t m = logs.size() / 2;
      ratio =
          std::exp(logs.size() % 2 ? logs[m] : 0.5 * (logs[m - 1] + logs[m]));
    }
    const auto rate = [](uint64_t o, double s) {
      return s > 0 ? static_cast<double>(o) / s : 0.0;
    };
    out.Metric("build_ratio", ratio);
    out.Metric("old_ops_per_s", rate(measured_ops[0], measured_sec[0]));
    out.Metric("new_ops_per_s", rate(measured_ops[1], measured_sec[1]));
    if (!out.details.is_object()) out.details = json::object();
    out.details["build_duet"] = {
        {"old_binary", client_->binary()},
        {"layout", client_->layout() ? "shared" : "page_start"},
        {"prepared_first", rep_.old_prepares_first ? "old" : "new"},
        {"sides", sides},
        {"pairs", rows},
        {"old_overrun_windows", old_overruns},
        {"old", old_side.value("metrics", json::object())},
        {"old_address_layout", old_side.value("address_layout", json())}};
  }

  std::string Verify() override {
    const std::string mine = local_->Verify();
    if (remote_verify_.empty()) return mine;
    return (mine.empty() ? "" : mine + "; ") + "old build: " + remote_verify_;
  }

 private:
  /// One window of this build's thread (ns; kNoRunDelay: unknown).
  struct LocalWindow {
    uint64_t ops = 0, start_ns = 0, end_ns = 0, cpu_ns = 0;
    uint64_t run_delay_ns = kNoRunDelay;
  };
  struct ThreadLog {
    int next = 0;
    std::vector<LocalWindow> windows;
  };
  static bool IsLocal(DuetSide s) {
    return s == DuetSide::kB || s == DuetSide::kWarmupB;
  }

  /// This build's window w: its threads' summed ops and CPU time, first start
  /// to last end; an overrun past `bound_s` seconds.
  SideWindow LocalWindowAt(size_t w, double bound_s) const {
    const auto at = [&](int i) -> const LocalWindow& {
      return logs_[static_cast<size_t>(i)].windows[w];
    };
    const int threads = static_cast<int>(logs_.size());
    SideWindow x;
    uint64_t first = UINT64_MAX, last = 0;
    for (int i = 0; i < threads; ++i) {
      x.ops += at(i).ops;
      x.cpu_seconds += NsToSeconds(at(i).cpu_ns);
      if (at(i).end_ns == 0) continue;
      first = std::min(first, at(i).start_ns);
      last = std::max(last, at(i).end_ns);
    }
    x.seconds = SecondsBetween(first, last);
    x.overrun = x.seconds > bound_s;
    x.max_off_cpu = MaxOffCpuShare(
        threads, [&](int i) { return at(i).start_ns; },
        [&](int i) { return at(i).end_ns; },
        [&](int i) { return at(i).cpu_ns; },
        [&](int i) { return at(i).run_delay_ns; });
    return x;
  }

  /// The old side's "closed" answer, its verification kept in remote_verify_.
  json CloseOldSide() {
    open_ = false;
    std::string closed;
    try {
      closed = client_->Close();
    } catch (const std::exception& e) {
      remote_verify_ =
          std::string("cannot close the old build's point: ") + e.what();
    }
    if (closed.empty()) return json::object();
    json old_side;
    try {
      old_side = json::parse(closed, [](int depth, json::parse_event_t, json&) {
        if (depth > kMaxJsonDepth)
          throw std::length_error("nested deeper than " +
                                  std::to_string(kMaxJsonDepth) + " levels");
        return true;
      });
    } catch (const std::length_error& e) {
      client_->Stop(std::string("its closed answer is ") + e.what());
    } catch (const std::exception&) {
      remote_verify_ = "the old build's report is not JSON";
      return json::object();
    }
    if (!old_side.is_object() ||
        (old_side.contains("verify") && !old_side["verify"].is_string()))
      client_->Stop("its closed answer is not {\"verify\": <text>, ...}");
    if (old_side.contains("verify"))
      remote_verify_ = EscapeForMessage(old_side["verify"].get<std::string>());
    return old_side;
  }

  std::unique_ptr<Workload> local_;
  std::shared_ptr<WindowClient> client_;
  const DuetRepetition rep_;
  bool open_ = false;
  std::string remote_verify_;
  PaddedSlots<ThreadLog> logs_;
  std::vector<SideWindow> remote_;  ///< per window, written by thread 0
};

/// The run's selection flags, passed to the old build's server.
std::vector<std::string> ServerArgs(const RunState& run) {
  static const char* const kPassed[] = {"--quick",
                                        "--full",
                                        "--pin=",
                                        "--threads=",
                                        "--mem=",
                                        "--padding=",
                                        "--oversubscribe",
                                        "--topology=",
                                        "--evidence=",
                                        "--fault-sampling=",
                                        "--benchmark_filter=",
                                        "--events="};
  std::vector<std::string> args;
  for (size_t i = 1; i < run.opts.argv.size(); ++i) {
    const std::string& a = run.opts.argv[i];
    if (std::any_of(std::begin(kPassed), std::end(kPassed),
                    [&](const char* p) { return a.rfind(p, 0) == 0; }))
      args.push_back(a);
  }
  return args;
}

/// A shared calibration directory for both processes, removed at exit.
void ShareCalibrations() {
  char dir[] = "/tmp/lockline-calibration-XXXXXX";
  if (mkdtemp(dir) == nullptr) return;
  setenv(kSharedCalibrationEnv, dir, 1);
  static const std::string kept = dir;
  std::atexit([] { RemoveFlatDir(kept.c_str()); });
}

/// `variant`'s workloads as build duets with `client`'s old build.
void PairWithOldBuild(const std::string& family, Variant& v,
                      std::shared_ptr<WindowClient> client, bool pinned) {
  v.make = [inner = v.make, client, family, params = v.params,
            pinned](const PointEnv& env) {
    const std::string key = RowKey(family, params, env.threads);
    static std::map<std::string, uint64_t> repetition;
    const uint64_t seed =
        std::hash<std::string>{}(key)*0x9E3779B97F4A7C15ull + repetition[key]++;
    const bool one = env.windows <= 2;
    DuetRepetition rep;
    rep.key = key;
    rep.schedule = one ? DuetSchedule(0, 1, seed)
                       : DuetSchedule(kDuetWarmupPairs,
                                      env.windows / 2 - kDuetWarmupPairs, seed);
    // A bit of the seed DuetSchedule's mt19937_64 does not use.
    rep.old_prepares_first = ((seed * 0xD1B54A32D192ED03ull) >> 63) != 0;
    rep.window_ns = env.window_ns;
    for (int i = 0; i < env.threads && env.plan; ++i)
      rep.pus.push_back(pinned && static_cast<size_t>(i) < env.plan->pus.size()
                            ? env.plan->pus[i].os_index
                            : -1);
    rep.oversubscribed = env.plan && env.plan->oversubscribed;
    PointEnv mine = env;
    mine.windows = env.windows / 2;  // the current build's share
    return std::make_unique<BuildDuetWorkload>(inner(mine), client,
                                               std::move(rep));
  };
}

/// The server's open point and the commands that act on it; answers to `out`.
class WindowServer {
 public:
  WindowServer(RunState& run, int out) : run_(run), out_(out) {
    for (const Point& p : run.points) points_[p.key] = &p;
    // The client's --events: both builds pay the same counting cost.
    try {
      counters_ = CounterSession::Create(run.opts.events);
    } catch (const std::exception&) {  // none: counted on neither side
    }
  }
  ~WindowServer() { ClosePoint(); }

  void SayHello() const {
    Say("lockline-window-server proto=" +
        std::to_string(kWindowServerProtocol) +
        " schema=" + std::to_string(kSchemaVersion) +
        " points=" + std::to_string(run_.points.size()) + " layout=1");
    for (const Point& p : run_.points) Say("key " + p.key);
    Say("end");
  }

  /// Answers one command line; false at "quit".
  bool Answer(const std::string& line) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    try {
      if (cmd == "quit") return false;
      if (cmd == "open")
        Open(in);
      else if (cmd == "window")
        RunOneWindow();
      else if (cmd == "close")
        Close();
      else
        throw std::runtime_error("unknown command '" + OneLine(cmd) + "'");
    } catch (const std::exception& e) {
      Say("error " + OneLine(e.what()));
    }
    return true;
  }

 private:
  bool Say(const std::string& line) const {
    return WriteAll(out_, line + "\n");
  }

  void Open(std::istringstream& in) {
    ClosePoint();
    wl_.reset();
    std::string key, pu_list;
    int windows = 0, oversub = 0;
    in >> key >> window_ns_ >> windows >> pu_list >> oversub;
    std::optional<LayoutSampling> layout;  // the last layout=SEED given
    for (std::string extra; in >> extra;)
      if (extra.rfind("layout=", 0) == 0)
        layout.emplace(std::stoull(extra.substr(7)));
    const auto it = points_.find(key);
    if (it == points_.end()) throw std::runtime_error("no point " + key);
    const Point& point = *it->second;
    std::vector<int> pus;
    std::stringstream ps(pu_list);
    for (std::string item; std::getline(ps, item, ',');)
      pus.push_back(std::stoi(item));
    if (static_cast<int>(pus.size()) != point.threads)
      throw std::runtime_error("open " + key + ": " +
                               std::to_string(pus.size()) + " PUs for " +
                               std::to_string(point.threads) + " threads");
    PointEnv env = MakePointEnv(point, run_, window_ns_);
    env.windows = windows;  // the client's windows of this repetition
    wl_ = point.variant->make(env);
    team_ = StartThreads(run_, point, pus, window_ns_, oversub != 0,
                         counters_.get(), *wl_, &ctx_);
    seconds_ = 0;
    total_ops_ = 0;
    open_layout_ = layout ? layout->Json() : json(nullptr);
    Say(std::string("ok ") + (wl_->fixed_work() ? "1" : "0"));
  }

  void RunOneWindow() {
    if (!team_ || !wl_) throw std::runtime_error("window: no open point");
    const uint64_t bound = OverrunBoundNs(window_ns_, wl_->fixed_work());
    const WindowResult r = team_->RunWindow(*wl_, ctx_, window_ns_, bound,
                                            bound + 120'000'000'000ull);
    seconds_ += r.seconds;
    total_ops_ += r.total_ops;
    char buf[160];
    std::snprintf(buf, sizeof buf, "done %llu %.9e %d %.9e %.6f",
                  static_cast<unsigned long long>(r.total_ops), r.seconds,
                  r.overrun ? 1 : 0, r.cpu_seconds, r.max_off_cpu);
    Say(buf);
  }

  void Close() {
    if (!wl_) throw std::runtime_error("close: no open point");
    ClosePoint();
    PointReport rep;
    wl_->Report(rep, seconds_, total_ops_);
    const std::string broken = wl_->Verify();
    wl_.reset();
    json metrics = json::object();
    for (const auto& [k, v] : rep.metrics)
      metrics[k] = std::isfinite(v) ? v : 0;
    Say("closed " + json{{"verify", broken},
                         {"metrics", metrics},
                         {"address_layout", open_layout_}}
                        .dump(-1, ' ', true, json::error_handler_t::replace));
  }

  void ClosePoint() {
    if (team_ && wl_)
      team_->RunOnAll([&](int i) { wl_->TeardownThread(ctx_[i]); });
    team_.reset();
  }

  RunState& run_;
  const int out_;
  std::map<std::string, const Point*> points_;
  std::unique_ptr<CounterSession> counters_;
  std::unique_ptr<Workload> wl_;
  std::unique_ptr<ThreadTeam> team_;
  std::vector<ThreadCtx> ctx_;
  uint64_t window_ns_ = 0;
  double seconds_ = 0;
  uint64_t total_ops_ = 0;
  json open_layout_;  ///< the open point's sampled offsets (closed's answer)
};

bool ReadCommand(std::string& buffer, std::string* line) {
  while (!TakeLine(buffer, line)) {
    char buf[4096];
    const ssize_t n = read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffer.append(buf, static_cast<size_t>(n));
  }
  return true;
}

std::vector<WorkloadWrap>& WrapList() {
  static std::vector<WorkloadWrap> list;
  return list;
}

}  // namespace

// ---- set-up of a duet run --------------------------------------------------

std::string DisableAslrForDuet(char** argv) {
  static const char kTried[] = "LOCKLINE_DUET_ASLR_REEXEC";
  const int current = personality(0xffffffff);
  if (current != -1 && (current & ADDR_NO_RANDOMIZE)) return "off";
  const bool tried = std::getenv(kTried) != nullptr;
  if (current != -1 && !tried &&
      personality(static_cast<unsigned long>(current) | ADDR_NO_RANDOMIZE) !=
          -1) {
    setenv(kTried, "1", 1);
    std::fflush(stdout);
    std::fflush(stderr);
    execv("/proc/self/exe", argv);
    // exec failed: go on with randomization (the flag only acts on exec).
    personality(static_cast<unsigned long>(current));
  }
  std::fprintf(stderr,
               "lockline: warning: --duet-with: address-space randomization "
               "stays on (personality(ADDR_NO_RANDOMIZE) %s): the two "
               "processes' code and stacks lie at other addresses, which can "
               "read as a constant difference of a few %% between builds\n",
               tried ? "did not take effect" : std::strerror(errno));
  return "on";
}

void PrepareBuildDuet(RunState& run) {
  std::vector<std::string> keys;
  for (const Point& p : run.points) keys.push_back(p.key);
  ShareCalibrations();
  auto client =
      std::make_shared<WindowClient>(run.opts.duet_with, ServerArgs(run), keys);
  run.sample_layout = client->layout();
  if (!run.sample_layout)
    std::fprintf(stderr,
                 "lockline: warning: --duet-with=%s does not sample address "
                 "layouts (a build before layout=1): both builds keep their "
                 "structures at the page start\n",
                 run.opts.duet_with.c_str());
  for (Point& p : run.points) {
    // A one-window (fixed-work) point: one pair per repetition.
    if (p.windows <= 1)
      p.repetitions =
          std::max(run.opts.repetitions, kBuildDuetOneWindowRepetitions);
    p.windows = p.windows <= 1 ? 2 : 2 * (kDuetWarmupPairs + kDuetMinPairs);
  }
  const bool pin_all = run.pin.policy != PinPolicy::kNone;
  for (auto& [family, v] : run.variants_storage)
    PairWithOldBuild(family, v, client, pin_all || !v.pus.empty());
}

// ---- the server ----------------------------------------------------------

int ServeWindows(RunState& run) {
  // The protocol owns fd 0 / fd 1; stdout output goes to stderr instead.
  const int out = dup(1);
  dup2(2, 1);
  {
    WindowServer server(run, out);
    server.SayHello();
    std::string buffer, line;
    while (ReadCommand(buffer, &line) && server.Answer(line)) {
    }
  }
  RestoreAll();
  close(out);
  return 0;
}

// ---- test-build wraps ------------------------------------------------------

bool RegisterWorkloadWrap(WorkloadWrap wrap) {
  WrapList().push_back(std::move(wrap));
  return true;
}

void ApplyWorkloadWraps(RunState& run) {
  if (WrapList().empty()) return;
  for (auto& [family, v] : run.variants_storage) {
    v.make = [inner = v.make, fam = family](const PointEnv& env) {
      std::unique_ptr<Workload> wl = inner(env);
      for (const WorkloadWrap& w : WrapList()) wl = w(fam, std::move(wl));
      return wl;
    };
  }
}

}  // namespace lockline
