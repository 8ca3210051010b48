#include "harness/run/build_duet.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "harness/locks/spin_wait.h"
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

/// How long the client waits for one answer of the server: longer than a
/// window's hard limit (ThreadTeam: bound + 120 s), so a server that hangs is
/// reported rather than waited for forever.
constexpr int kAnswerTimeoutMs = 300'000;

bool WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    // send: no SIGPIPE when the other side is gone; write for a pipe (a
    // server run by hand).
    ssize_t n = send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK)
      n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

/// One line of a protocol text without control characters (an error text).
std::string OneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string Join(const std::vector<std::string>& v, size_t limit) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < limit; ++i)
    out += (i ? ", " : "") + v[i];
  if (v.size() > limit)
    out += ", ... (" + std::to_string(v.size() - limit) + " more)";
  return out;
}

}  // namespace

// ---- client --------------------------------------------------------------

WindowClient::WindowClient(const std::string& binary,
                           const std::vector<std::string>& args,
                           const std::vector<std::string>& keys)
    : binary_(binary) {
  int sv[2], ep[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 ||
      pipe2(ep, O_CLOEXEC) != 0)
    throw UsageError("--duet-with=" + binary +
                     ": cannot create a socket: " + std::strerror(errno));
  std::vector<std::string> argv = {binary, "--window-server"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0)
    throw UsageError("--duet-with=" + binary +
                     ": cannot fork: " + std::strerror(errno));
  if (pid == 0) {
    dup2(sv[1], 0);
    dup2(sv[1], 1);
    dup2(ep[1], 2);
    execv(binary.c_str(), cargv.data());
    std::fprintf(stderr, "cannot execute: %s\n", std::strerror(errno));
    _exit(127);
  }
  pid_ = pid;
  close(sv[1]);
  close(ep[1]);
  fd_ = sv[0];
  // The old build's stderr: kept until its point keys are checked (its error
  // line is quoted in ours), then copied to ours whenever the client waits
  // for an answer (ReadLine), so no thread is needed.
  err_fd_ = ep[0];
  std::string hello;
  try {
    hello = ReadLine();
  } catch (const std::exception&) {
    hello.clear();
  }
  if (hello.rfind("lockline-window-server ", 0) != 0) {
    int status = 0;
    close(fd_);
    fd_ = -1;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    std::string said = OneLine(err_text_);
    if (said.size() > 200) said = said.substr(0, 200) + "...";
    throw UsageError(
        "--duet-with=" + binary + ": it did not answer as a lockline window " +
        "server (" +
        (WIFEXITED(status)
             ? "exit status " + std::to_string(WEXITSTATUS(status))
             : std::string("killed by a signal")) +
        (said.empty() ? "" : ", it said: " + said) +
        "); accepted: a lockline build with --window-server (issue 38 and " +
        "later) of result schema " + std::to_string(kSchemaVersion));
  }
  int proto = 0, schema = 0;
  size_t npoints = 0;
  if (std::sscanf(hello.c_str(),
                  "lockline-window-server proto=%d schema=%d points=%zu",
                  &proto, &schema, &npoints) != 3)
    throw UsageError("--duet-with=" + binary + ": malformed hello '" +
                     OneLine(hello) + "'");
  if (schema != kSchemaVersion || proto != kWindowServerProtocol)
    throw UsageError("--duet-with=" + binary + ": it writes result schema " +
                     std::to_string(schema) + " (window protocol " +
                     std::to_string(proto) + "), this build schema " +
                     std::to_string(kSchemaVersion) + " (protocol " +
                     std::to_string(kWindowServerProtocol) +
                     "); accepted: a build of the same result schema and "
                     "protocol");
  layout_ = hello.find(" layout=1") != std::string::npos;
  std::set<std::string> theirs;
  for (;;) {
    const std::string line = ReadLine();
    if (line == "end") break;
    if (line.rfind("key ", 0) != 0)
      throw UsageError("--duet-with=" + binary + ": malformed key line '" +
                       OneLine(line) + "'");
    theirs.insert(line.substr(4));
  }
  const std::set<std::string> ours(keys.begin(), keys.end());
  std::vector<std::string> only_ours, only_theirs;
  for (const auto& k : ours)
    if (!theirs.count(k)) only_ours.push_back(k);
  for (const auto& k : theirs)
    if (!ours.count(k)) only_theirs.push_back(k);
  if (!only_ours.empty() || !only_theirs.empty())
    throw UsageError(
        "--duet-with=" + binary + ": the two builds' suites differ: " +
        std::to_string(only_ours.size()) + " key(s) only in this build" +
        (only_ours.empty() ? "" : " (" + Join(only_ours, 4) + ")") + ", " +
        std::to_string(only_theirs.size()) + " only in the old build" +
        (only_theirs.empty() ? "" : " (" + Join(only_theirs, 4) + ")") +
        "; accepted: builds with the same point keys for the selected suite "
        "(narrow both with --benchmark_filter)");
  // From here on the old build's messages go to our stderr as they come.
  if (!err_text_.empty())
    std::fprintf(stderr, "old build: %s", err_text_.c_str());
  err_text_.clear();
  relay_ = true;
}

WindowClient::~WindowClient() {
  if (fd_ >= 0) {
    WriteAll(fd_, "quit\n");
    close(fd_);
  }
  if (pid_ > 0) {
    // The server leaves at "quit" or end of input; one stuck in a window is
    // killed after 10 s.
    int status = 0;
    for (int i = 0; i < 1000; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      usleep(10'000);
    }
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
  }
  if (err_fd_ >= 0) {
    DrainErr(0);
    close(err_fd_);
  }
}

void WindowClient::DrainErr(int timeout_ms) {
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
    if (relay_) {
      std::string text(buf, static_cast<size_t>(n));
      std::fprintf(stderr, "old build: %s", text.c_str());
    } else if (err_text_.size() < 65536) {
      err_text_.append(buf, static_cast<size_t>(n));
    }
    timeout_ms = 0;
  }
}

std::string WindowClient::ReadLine() {
  const uint64_t deadline =
      NowNs() + static_cast<uint64_t>(kAnswerTimeoutMs) * 1'000'000ull;
  for (;;) {
    const size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    if (fd_ < 0) throw std::runtime_error("the old build's server is gone");
    pollfd p[2] = {{fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    const int n = poll(p, err_fd_ >= 0 ? 2 : 1, 1000);
    if (n < 0 && errno != EINTR)
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    if (err_fd_ >= 0 && n > 0 && (p[1].revents & (POLLIN | POLLHUP)))
      DrainErr(0);
    if (n > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      char buf[4096];
      const ssize_t r = read(fd_, buf, sizeof buf);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        DrainErr(100);
        throw std::runtime_error(
            "the old build's window server (" + binary_ +
            ") closed the connection" +
            (err_text_.empty() ? "" : ": " + OneLine(err_text_)));
      }
      buffer_.append(buf, static_cast<size_t>(r));
      continue;
    }
    if (NowNs() > deadline)
      throw std::runtime_error("the old build's window server (" + binary_ +
                               ") did not answer within " +
                               std::to_string(kAnswerTimeoutMs / 1000) + " s");
  }
}

std::string WindowClient::Ask(const std::string& line) {
  if (fd_ < 0 || !WriteAll(fd_, line + "\n"))
    throw std::runtime_error("the old build's window server (" + binary_ +
                             ") is gone");
  std::string answer = ReadLine();
  if (answer.rfind("error ", 0) == 0)
    throw std::runtime_error("old build: " + answer.substr(6));
  return answer;
}

bool WindowClient::Open(const std::string& key, uint64_t window_ns, int windows,
                        const std::vector<int>& pus, bool oversubscribed) {
  std::string list;
  for (size_t i = 0; i < pus.size(); ++i)
    list += (i ? "," : "") + std::to_string(pus[i]);
  // The repetition's layout seed (harness/machine/memory.h): the server places
  // its structures at the offsets ours have, so each window pair compares the
  // two builds at one address layout, and the layouts sampled from repetition
  // to repetition vary both sides alike.
  uint64_t seed = 0;
  const std::string layout = layout_ && LiveLayoutSeed(&seed)
                                 ? " layout=" + std::to_string(seed)
                                 : std::string();
  const std::string a = Ask("open " + key + " " + std::to_string(window_ns) +
                            " " + std::to_string(windows) + " " + list + " " +
                            (oversubscribed ? "1" : "0") + layout);
  int fixed = 0;
  if (std::sscanf(a.c_str(), "ok %d", &fixed) != 1)
    throw std::runtime_error("old build: unexpected answer to open: " + a);
  return fixed != 0;
}

RemoteWindow WindowClient::Window() {
  const std::string a = Ask("window");
  RemoteWindow w;
  unsigned long long ops = 0;
  int overrun = 0;
  const int got =
      std::sscanf(a.c_str(), "done %llu %lf %d %lf %lf", &ops, &w.seconds,
                  &overrun, &w.cpu_seconds, &w.max_off_cpu);
  if (got < 4)
    throw std::runtime_error("old build: unexpected answer to window: " + a);
  if (got == 4) w.max_off_cpu = -1;  // a server before off-CPU shares
  w.ops = ops;
  w.overrun = overrun != 0;
  return w;
}

std::string WindowClient::Close() {
  const std::string a = Ask("close");
  if (a.rfind("closed ", 0) != 0)
    throw std::runtime_error("old build: unexpected answer to close: " + a);
  return a.substr(7);
}

// ---- the paired workload -------------------------------------------------

BuildDuetWorkload::BuildDuetWorkload(
    std::unique_ptr<Workload> local, std::shared_ptr<WindowClient> client,
    std::string key, std::vector<DuetSide> schedule, bool old_prepares_first,
    uint64_t window_ns, std::vector<int> pus, bool oversubscribed)
    : local_(std::move(local)),
      client_(std::move(client)),
      key_(std::move(key)),
      schedule_(std::move(schedule)),
      old_prepares_first_(old_prepares_first),
      window_ns_(window_ns),
      pus_(std::move(pus)),
      oversubscribed_(oversubscribed) {}

BuildDuetWorkload::~BuildDuetWorkload() {
  if (open_) {
    try {
      client_->Close();
    } catch (...) {
    }
  }
}

void BuildDuetWorkload::Prepare(int threads) {
  // Which build prepares first is drawn per repetition (half each): set-up
  // leaves caches and memory in the state of whoever prepared last, and a
  // one-window (fixed-work) point has no warm-up pair to wash it out. With the
  // current build always first, an A/A duet read idle_burst rows 10-23 %
  // slower on the current side in every repetition (issue 38).
  if (!old_prepares_first_) local_->Prepare(threads);
  logs_ = PaddedSlots<ThreadLog>(static_cast<size_t>(threads));
  for (size_t i = 0; i < logs_.size(); ++i) {
    logs_[i].ops.assign(schedule_.size(), 0);
    logs_[i].start_ns.assign(schedule_.size(), 0);
    logs_[i].end_ns.assign(schedule_.size(), 0);
    logs_[i].cpu_ns.assign(schedule_.size(), 0);
    logs_[i].run_delay_ns.assign(schedule_.size(), kNoRunDelay);
  }
  remote_.assign(schedule_.size(), RemoteWindow{});
  int side_windows = 0;
  for (DuetSide s : schedule_)
    if (!IsLocal(s)) ++side_windows;
  const bool fixed =
      client_->Open(key_, window_ns_, side_windows, pus_, oversubscribed_);
  open_ = true;
  if (old_prepares_first_) local_->Prepare(threads);
  if (fixed != local_->fixed_work())
    throw std::runtime_error(
        "build duet: " + key_ +
        " is fixed work in one build and a timed window in the other");
}

void BuildDuetWorkload::SetupThread(const ThreadCtx& ctx) {
  local_->SetupThread(ctx);
}

uint64_t BuildDuetWorkload::RunWindow(const ThreadCtx& ctx,
                                      const std::atomic<bool>& stop) {
  ThreadLog& log = logs_[static_cast<size_t>(ctx.index)];
  const size_t w = static_cast<size_t>(log.next++);
  // Past the schedule (Google Benchmark ran extra iterations): the current
  // build alone, unrecorded.
  if (w >= schedule_.size()) return local_->RunWindow(ctx, stop);
  if (IsLocal(schedule_[w])) {
    const uint64_t d0 = ThreadRunDelayNs();
    const uint64_t c0 = ThreadCpuNs();
    const uint64_t t0 = NowNs();
    const uint64_t ops = local_->RunWindow(ctx, stop);
    const uint64_t t1 = NowNs();
    log.cpu_ns[w] = ThreadCpuNs() - c0;
    log.run_delay_ns[w] = RunDelayBetween(d0, ThreadRunDelayNs());
    log.ops[w] = ops;
    log.start_ns[w] = t0;
    log.end_ns[w] = t1;
    return ops;
  }
  // The old build's window: thread 0 asks the server and sleeps in the read;
  // the other threads return at once and wait on the team's condition
  // variable, so the old build's threads have the PUs to themselves.
  if (ctx.index != 0) return 0;
  remote_[w] = client_->Window();
  return remote_[w].ops;
}

void BuildDuetWorkload::TeardownThread(const ThreadCtx& ctx) {
  local_->TeardownThread(ctx);
}

void BuildDuetWorkload::Report(PointReport& out, double /*window_seconds*/,
                               uint64_t /*ops*/) {
  const size_t n = schedule_.size();
  std::vector<uint64_t> ops(n, 0);
  std::vector<double> seconds(n, 0), cpu(n, 0);
  std::vector<double> off_cpu(n, -1);  // WindowResult::max_off_cpu per window
  size_t ran = 0;
  uint64_t new_ops = 0, meas_ops[2] = {0, 0};
  double new_sec = 0, meas_sec[2] = {0, 0};
  int old_overruns = 0;
  for (size_t w = 0; w < n; ++w) {
    if (IsLocal(schedule_[w])) {
      uint64_t first = UINT64_MAX, last = 0;
      for (size_t i = 0; i < logs_.size(); ++i) {
        ops[w] += logs_[i].ops[w];
        cpu[w] += static_cast<double>(logs_[i].cpu_ns[w]) / 1e9;
        if (logs_[i].end_ns[w] == 0) continue;
        first = std::min(first, logs_[i].start_ns[w]);
        last = std::max(last, logs_[i].end_ns[w]);
      }
      if (last > first) seconds[w] = static_cast<double>(last - first) / 1e9;
      off_cpu[w] = MaxOffCpuShare(
          static_cast<int>(logs_.size()),
          [&](int i) { return logs_[i].start_ns[w]; },
          [&](int i) { return logs_[i].end_ns[w]; },
          [&](int i) { return logs_[i].cpu_ns[w]; },
          [&](int i) { return logs_[i].run_delay_ns[w]; });
      new_ops += ops[w];
      new_sec += seconds[w];
    } else {
      ops[w] = remote_[w].ops;
      seconds[w] = remote_[w].seconds;
      cpu[w] = remote_[w].cpu_seconds;
      off_cpu[w] = remote_[w].max_off_cpu;
      old_overruns += remote_[w].overrun ? 1 : 0;
    }
    if (seconds[w] > 0) ran = w + 1;
    if (schedule_[w] == DuetSide::kA || schedule_[w] == DuetSide::kB) {
      meas_ops[static_cast<int>(schedule_[w])] += ops[w];
      meas_sec[static_cast<int>(schedule_[w])] += seconds[w];
    }
  }
  // The old side's own report and verification, then the current side's.
  std::string closed;
  try {
    closed = client_->Close();
    open_ = false;
  } catch (const std::exception& e) {
    open_ = false;
    remote_verify_ =
        std::string("cannot close the old build's point: ") + e.what();
  }
  json old_side = json::object();
  if (!closed.empty()) {
    try {
      old_side = json::parse(closed);
      if (old_side.contains("verify") && old_side["verify"].is_string())
        remote_verify_ = old_side["verify"].get<std::string>();
    } catch (const std::exception&) {
      remote_verify_ = "the old build's report is not JSON";
    }
  }
  local_->Report(out, new_sec, new_ops);

  const std::vector<DuetSide> schedule(schedule_.begin(),
                                       schedule_.begin() + ran);
  const std::vector<DuetPair> pairs = DuetPairs(schedule, ops, seconds);
  std::vector<double> logs;
  json pair_rows = json::array(), sides = json::array();
  // A pair with a window past its wall-clock bound (OverrunBoundNs; the old
  // build's as its server flagged it) is marked: ci/compare.py --builds
  // leaves it out.
  const double bound_s =
      static_cast<double>(OverrunBoundNs(window_ns_, local_->fixed_work())) /
      1e9;
  size_t warm = 0;
  while (warm < ran && (schedule_[warm] == DuetSide::kWarmupA ||
                        schedule_[warm] == DuetSide::kWarmupB))
    ++warm;
  for (size_t k = 0; k < pairs.size(); ++k) {
    const DuetPair& p = pairs[k];
    bool overrun = false;
    double cpu_rate[2] = {0, 0};  // old, new: ops per CPU second
    double off = 0;  // the larger off-CPU share of the pair; -1: unknown
    for (size_t w = warm + 2 * k; w < warm + 2 * k + 2 && w < ran; ++w) {
      off = off_cpu[w] < 0 || off < 0 ? -1 : std::max(off, off_cpu[w]);
      overrun |=
          IsLocal(schedule_[w]) ? seconds[w] > bound_s : remote_[w].overrun;
      cpu_rate[IsLocal(schedule_[w]) ? 1 : 0] =
          cpu[w] > 0 ? static_cast<double>(ops[w]) / cpu[w] : 0.0;
    }
    pair_rows.push_back({{"a_ops_per_s", p.a_ops_per_s},
                         {"b_ops_per_s", p.b_ops_per_s},
                         {"a_ops_per_cpu_s", cpu_rate[0]},
                         {"b_ops_per_cpu_s", cpu_rate[1]},
                         {"order", p.b_first ? "ba" : "ab"},
                         {"overrun", overrun},
                         {"off_cpu", off < 0 ? json(nullptr) : json(off)}});
    if (p.a_ops_per_s > 0 && p.b_ops_per_s > 0)
      logs.push_back(std::log(p.b_ops_per_s / p.a_ops_per_s));
  }
  static const char* kNames[] = {"old", "new", "warmup_old", "warmup_new"};
  for (size_t w = 0; w < ran; ++w)
    sides.push_back(kNames[static_cast<int>(schedule_[w])]);
  double ratio = 0;
  if (!logs.empty()) {
    std::sort(logs.begin(), logs.end());
    const size_t m = logs.size() / 2;
    ratio = std::exp(logs.size() % 2 ? logs[m] : 0.5 * (logs[m - 1] + logs[m]));
  }
  const auto rate = [](uint64_t o, double s) {
    return s > 0 ? static_cast<double>(o) / s : 0.0;
  };
  out.Metric("build_ratio", ratio);
  out.Metric("old_ops_per_s", rate(meas_ops[0], meas_sec[0]));
  out.Metric("new_ops_per_s", rate(meas_ops[1], meas_sec[1]));
  if (!out.details.is_object()) out.details = json::object();
  out.details["build_duet"] = {
      {"old_binary", client_->binary()},
      // "shared": the old build sampled the same structure offsets as this
      // row's address_layout; "page_start": neither side sampled.
      {"layout", client_->layout() ? "shared" : "page_start"},
      {"prepared_first", old_prepares_first_ ? "old" : "new"},
      {"sides", sides},
      {"pairs", pair_rows},
      {"old_overrun_windows", old_overruns},
      {"old",
       old_side.contains("metrics") ? old_side["metrics"] : json::object()},
      // The old build's own draws (its "closed" answer): the same offsets as
      // the row's address_layout when the layout is shared.
      {"old_address_layout", old_side.contains("address_layout")
                                 ? old_side["address_layout"]
                                 : json(nullptr)}};
}

std::string BuildDuetWorkload::Verify() {
  std::string mine = local_->Verify();
  std::string theirs =
      remote_verify_.empty() ? "" : "old build: " + remote_verify_;
  if (!mine.empty() && !theirs.empty()) return mine + "; " + theirs;
  return mine.empty() ? theirs : mine;
}

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
  const std::string& old = run.opts.duet_with;
  // The server selects its suite from the same flags; the rest (run
  // directory, budget, repetitions, counters) are the client's.
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
    for (const char* p : kPassed)
      if (a.rfind(p, 0) == 0) {
        args.push_back(a);
        break;
      }
  }
  std::vector<std::string> keys;
  for (const Point& p : run.points) keys.push_back(p.key);
  // One value per calibration for both processes (harness/
  // shared_calibration.h): a private directory, inherited by the server
  // through the environment, removed when the client ends.
  char dir[] = "/tmp/lockline-calibration-XXXXXX";
  if (mkdtemp(dir) != nullptr) {
    setenv(kSharedCalibrationEnv, dir, 1);
    static const std::string kept = dir;
    std::atexit([] {
      const std::string cmd = kept;
      if (DIR* d = opendir(cmd.c_str())) {
        while (dirent* e = readdir(d))
          if (e->d_name[0] != '.') unlink((cmd + "/" + e->d_name).c_str());
        closedir(d);
      }
      rmdir(cmd.c_str());
    });
  }
  auto client = std::make_shared<WindowClient>(old, args, keys);
  // Both sides at one address layout per repetition: an old build that
  // cannot take the client's layout seed keeps its structures at the page
  // start, and so does this side then.
  run.sample_layout = client->layout();
  if (!run.sample_layout)
    std::fprintf(stderr,
                 "lockline: warning: --duet-with=%s does not sample address "
                 "layouts (a build before layout=1): both builds keep their "
                 "structures at the page start\n",
                 old.c_str());

  for (Point& p : run.points) {
    // A one-window point (fixed work: a fault pass, a burst) runs one pair
    // per repetition, so it gets kBuildDuetOneWindowRepetitions of them:
    // compare.py needs 8 pairs of one regime for an interval.
    if (p.windows <= 1)
      p.repetitions =
          std::max(run.opts.repetitions, kBuildDuetOneWindowRepetitions);
    p.windows = p.windows <= 1 ? 2 : 2 * (kDuetWarmupPairs + kDuetMinPairs);
  }
  const bool pin_all = run.pin.policy != PinPolicy::kNone;
  for (auto& [family, v] : run.variants_storage) {
    auto inner = v.make;
    const std::string fam = family;
    const Params params = v.params;
    const bool pinned = pin_all || !v.pus.empty();
    v.make = [inner, client, fam, params, pinned](const PointEnv& env) {
      const std::string key = RowKey(fam, params, env.threads);
      static std::map<std::string, uint64_t> repetition;
      const uint64_t seed =
          std::hash<std::string>{}(key)*0x9E3779B97F4A7C15ull +
          repetition[key]++;
      const bool one = env.windows <= 2;
      std::vector<DuetSide> schedule =
          one ? DuetSchedule(0, 1, seed)
              : DuetSchedule(kDuetWarmupPairs,
                             env.windows / 2 - kDuetWarmupPairs, seed);
      PointEnv mine = env;
      mine.windows = env.windows / 2;  // the current build's share
      std::vector<int> pus;
      for (int i = 0; i < env.threads && env.plan; ++i)
        pus.push_back(pinned && static_cast<size_t>(i) < env.plan->pus.size()
                          ? env.plan->pus[i].os_index
                          : -1);
      // The prepare order: a bit of the seed the window order does not use
      // (DuetSchedule draws from an mt19937_64 seeded with it).
      const bool old_first = ((seed * 0xD1B54A32D192ED03ull) >> 63) != 0;
      return std::make_unique<BuildDuetWorkload>(
          inner(mine), client, key, std::move(schedule), old_first,
          env.window_ns, std::move(pus), env.plan && env.plan->oversubscribed);
    };
  }
}

// ---- the server ----------------------------------------------------------

int ServeWindows(RunState& run) {
  // The protocol owns the socket on fd 0 / fd 1; anything the families or the
  // harness print to stdout goes to stderr instead.
  const int out = dup(1);
  dup2(2, 1);
  std::map<std::string, const Point*> points;
  for (const Point& p : run.points) points[p.key] = &p;
  // The same perf events as the client's threads count (--events is passed
  // on): both builds' windows then pay the same counting cost.
  std::unique_ptr<CounterSession> counters;
  try {
    counters = CounterSession::Create(run.opts.events);
  } catch (const std::exception&) {
    counters.reset();
  }
  const auto say = [out](const std::string& line) {
    return WriteAll(out, line + "\n");
  };
  // layout=1: "open" may end with "layout=<seed>" (the client's repetition
  // seed), and the server then samples the same structure offsets.
  say("lockline-window-server proto=" + std::to_string(kWindowServerProtocol) +
      " schema=" + std::to_string(kSchemaVersion) +
      " points=" + std::to_string(run.points.size()) + " layout=1");
  for (const Point& p : run.points) say("key " + p.key);
  say("end");

  // The open point: its workload, team and threads' contexts.
  std::unique_ptr<Workload> wl;
  std::unique_ptr<ThreadTeam> team;
  std::vector<ThreadCtx> ctx;
  uint64_t window_ns = 0;
  double seconds = 0;
  uint64_t total_ops = 0;
  json open_layout;  // the open point's sampled offsets (closed's answer)
  const auto close_point = [&]() {
    if (team && wl) team->RunOnAll([&](int i) { wl->TeardownThread(ctx[i]); });
    team.reset();
  };

  std::string buffer;
  int status = 0;
  for (;;) {
    size_t nl;
    while ((nl = buffer.find('\n')) == std::string::npos) {
      char buf[4096];
      const ssize_t n = read(0, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) goto done;
      buffer.append(buf, static_cast<size_t>(n));
    }
    {
      const std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      std::istringstream in(line);
      std::string cmd;
      in >> cmd;
      try {
        if (cmd == "quit") break;
        if (cmd == "open") {
          close_point();
          wl.reset();
          std::string key, pu_list;
          int windows = 0, oversub = 0;
          in >> key >> window_ns >> windows >> pu_list >> oversub;
          // The client's layout seed (a build with layout sampling): this
          // side's structures go to the same offsets as the client's.
          std::optional<uint64_t> layout_seed;
          for (std::string extra; in >> extra;)
            if (extra.rfind("layout=", 0) == 0)
              layout_seed = std::stoull(extra.substr(7));
          std::optional<LayoutSampling> layout;
          if (layout_seed) layout.emplace(*layout_seed);
          const auto it = points.find(key);
          if (it == points.end()) throw std::runtime_error("no point " + key);
          const Point& point = *it->second;
          PointEnv env;
          env.topology = run.topo.get();
          env.plan = &point.plan;
          env.threads = point.threads;
          env.window_ns = window_ns;
          env.windows = windows;
          env.mem_policy = run.opts.mem;
          env.quick = run.opts.suite == Suite::kQuick;
          env.fault_sample_period_ns =
              run.opts.evidence_windows == 0
                  ? 0
                  : static_cast<uint64_t>(run.opts.fault_sampling_s * 1e9 +
                                          0.5);
          env.evidence_windows = run.opts.evidence_windows;
          env.oversubscribe = run.opts.oversubscribe;
          std::vector<int> pus;
          std::stringstream ps(pu_list);
          for (std::string item; std::getline(ps, item, ',');)
            pus.push_back(std::stoi(item));
          if (static_cast<int>(pus.size()) != point.threads)
            throw std::runtime_error(
                "open " + key + ": " + std::to_string(pus.size()) +
                " PUs for " + std::to_string(point.threads) + " threads");
          wl = point.variant->make(env);
          ctx.clear();
          for (int i = 0; i < point.threads; ++i) {
            ThreadCtx c;
            c.index = i;
            c.threads = point.threads;
            c.pu = pus[i];
            c.numa = point.plan.pus.size() > static_cast<size_t>(i)
                         ? point.plan.pus[i].numa
                         : -1;
            c.window_ns = window_ns;
            c.oversubscribed = oversub != 0;
            ctx.push_back(c);
          }
          team =
              std::make_unique<ThreadTeam>(run.topo.get(), pus, counters.get(),
                                           wl->page_fault_counters_left_out());
          wl->Prepare(point.threads);
          team->RunOnAllWithin(
              [&](int i) {
                SetSpinYield(ctx[i].oversubscribed ? SpinYield::kAfterSpins
                                                   : SpinYield::kNever);
                wl->SetupThread(ctx[i]);
              },
              SetupTimeoutNs(), key + ": the family's SetupThread");
          seconds = 0;
          total_ops = 0;
          open_layout = layout ? layout->Json() : json(nullptr);
          say(std::string("ok ") + (wl->fixed_work() ? "1" : "0"));
        } else if (cmd == "window") {
          if (!team || !wl) throw std::runtime_error("window: no open point");
          const uint64_t bound = OverrunBoundNs(window_ns, wl->fixed_work());
          const WindowResult r = team->RunWindow(*wl, ctx, window_ns, bound,
                                                 bound + 120'000'000'000ull);
          seconds += r.seconds;
          total_ops += r.total_ops;
          char buf[160];
          std::snprintf(buf, sizeof buf, "done %llu %.9e %d %.9e %.6f",
                        static_cast<unsigned long long>(r.total_ops), r.seconds,
                        r.overrun ? 1 : 0, r.cpu_seconds, r.max_off_cpu);
          say(buf);
        } else if (cmd == "close") {
          if (!wl) throw std::runtime_error("close: no open point");
          close_point();
          PointReport rep;
          wl->Report(rep, seconds, total_ops);
          const std::string broken = wl->Verify();
          wl.reset();
          json metrics = json::object();
          for (const auto& [k, v] : rep.metrics)
            metrics[k] = std::isfinite(v) ? v : 0;
          say("closed " +
              json{{"verify", broken},
                   {"metrics", metrics},
                   {"address_layout", open_layout}}
                  .dump(-1, ' ', true, json::error_handler_t::replace));
        } else {
          throw std::runtime_error("unknown command '" + OneLine(cmd) + "'");
        }
      } catch (const std::exception& e) {
        say("error " + OneLine(e.what()));
      }
    }
  }
done:
  close_point();
  wl.reset();
  RestoreAll();
  close(out);
  return status;
}

// ---- test-build wraps ------------------------------------------------------

namespace {
std::vector<WorkloadWrap>& WrapList() {
  static std::vector<WorkloadWrap> list;
  return list;
}
}  // namespace

bool RegisterWorkloadWrap(WorkloadWrap wrap) {
  WrapList().push_back(std::move(wrap));
  return true;
}

void ApplyWorkloadWraps(RunState& run) {
  if (WrapList().empty()) return;
  for (auto& [family, v] : run.variants_storage) {
    auto inner = v.make;
    const std::string fam = family;
    v.make = [inner, fam](const PointEnv& env) {
      std::unique_ptr<Workload> wl = inner(env);
      for (const WorkloadWrap& w : WrapList()) wl = w(fam, std::move(wl));
      return wl;
    };
  }
}

}  // namespace lockline
