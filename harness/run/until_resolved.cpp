#include "harness/run/until_resolved.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>

#include "harness/machine/cpu.h"
#include "harness/measure/coherence.h"
#include "harness/record/results.h"
#include "harness/record/rows.h"

extern char** environ;

namespace lockline {
namespace {

using nlohmann::json;

#ifndef LOCKLINE_PLOTS_DIR_DEFAULT
#define LOCKLINE_PLOTS_DIR_DEFAULT "plots"
#endif

bool IsFile(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

// The running verdicts.py child (0: none), for KillVerdictsChild.
std::atomic<pid_t> g_verdicts_pid{0};

// Runs `python verdicts.py dir --look=K`, stdout discarded; "" on exit status
// 0, else what went wrong. SIGKILLed at `deadline_ns` (the time limit covers
// the statistics too) and with lockline.
std::string RunVerdicts(const std::string& script, const std::string& dir,
                        int look, uint64_t deadline_ns) {
  std::vector<std::string> args = {kVerdictsPython, script, dir,
                                   "--look=" + std::to_string(look)};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  // Only async-signal-safe calls between fork and execve.
  const pid_t pid = fork();
  if (pid < 0) return std::string("cannot start ") + kVerdictsPython;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 1);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(kVerdictsPython, argv.data(), environ);
    _exit(127);
  }
  g_verdicts_pid.store(pid);
  const auto reaped = [&] { g_verdicts_pid.store(0); };
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      reaped();
      return "waitpid failed";
    }
    if (NowNs() >= deadline_ns) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      reaped();
      return script +
             " was still running at the --until-resolved time limit "
             "(killed)";
    }
    usleep(20000);
  }
  reaped();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  return script + " exited with status " +
         std::to_string(WIFEXITED(status) ? WEXITSTATUS(status)
                                          : 128 + WTERMSIG(status));
}

}  // namespace

void KillVerdictsChild() {
  const pid_t pid = g_verdicts_pid.exchange(0);
  if (pid > 0) kill(pid, SIGKILL);
}

std::string PlotsDir() {
  const char* env = std::getenv("LOCKLINE_PLOTS_DIR");
  if (env && *env) return env;
  return LOCKLINE_PLOTS_DIR_DEFAULT;
}

std::string CheckUntilResolved(const Options& o) {
  if (o.until_resolved_s <= 0) return "";
  const std::string script = PlotsDir() + "/verdicts.py";
  if (!IsFile(script))
    return "--until-resolved needs " + script +
           " (the statistics that decide which comparisons are open); it is "
           "missing: set LOCKLINE_PLOTS_DIR to the plots/ directory of a "
           "lockline source tree";
  if (access(kVerdictsPython, X_OK) != 0)
    return std::string("--until-resolved needs ") + kVerdictsPython +
           " with numpy and scipy (bash ci/install_deps.sh installs them)";
  for (const std::string& a : o.benchmark_args)
    if (a.rfind("--benchmark_out=", 0) == 0)
      return "--until-resolved and " + a +
             " exclude each other: Google Benchmark rewrites its file on every "
             "extra round; lockline.json in the run directory holds every "
             "repetition";
  return "";
}

VerdictSummary ReadVerdicts(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  json doc;
  try {
    doc = json::parse(in);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + " is not JSON: " + e.what());
  }
  if (!doc.is_object() || !doc.contains("verdicts") ||
      !doc["verdicts"].is_array())
    throw std::runtime_error(path + " has no \"verdicts\" list");
  VerdictSummary s;
  std::set<std::string> seen;
  for (const json& v : doc["verdicts"]) {
    if (!v.is_object()) continue;
    ++s.total;
    // A question its mechanism cannot reach here (plots/verdicts.py ANSWERABLE)
    // stays so however many repetitions run.
    if (v.value("resolved", false) ||
        v.value("status", std::string()) == "not_answerable")
      continue;
    ++s.open;
    // A paired verdict (method "paired") is continued on its duet row alone:
    // more window pairs, not more unpaired repetitions.
    const bool paired = v.value("duet_key", json()).is_string();
    for (const char* k : {"duet_key", "base_key", "variant_key"}) {
      if (paired != (std::string(k) == "duet_key")) continue;
      const json key = v.value(k, json());
      if (key.is_string() && seen.insert(key.get<std::string>()).second)
        s.keys.push_back(key.get<std::string>());
    }
  }
  return s;
}

namespace {

// Look round + 1 of the sequential design: runs verdicts.py and reads its
// verdicts into `v` (the planned repetitions' kept as verdicts_planned.json);
// `verdicts_s`: the seconds it took. False, said on stderr, when it failed.
bool LookAtVerdicts(const RunState& run, uint64_t deadline_ns,
                    VerdictSummary& v, double& verdicts_s) {
  const std::string dir = run.results->dir();
  const uint64_t start = NowNs();
  std::string failed = RunVerdicts(PlotsDir() + "/verdicts.py", dir,
                                   run.resolve_round + 1, deadline_ns);
  verdicts_s = static_cast<double>(NowNs() - start) / 1e9;
  if (failed.empty()) {
    try {
      v = ReadVerdicts(dir + "/verdicts.json");
      if (run.resolve_round == 0) {
        std::ifstream in(dir + "/verdicts.json");
        WriteFileAtomically(
            dir + "/verdicts_planned.json",
            std::string(std::istreambuf_iterator<char>(in), {}));
      }
    } catch (const std::exception& e) {
      failed = e.what();
    }
  }
  if (failed.empty()) return true;
  std::fprintf(stderr, "lockline: until-resolved: %s; no more repetitions\n",
               failed.c_str());
  return false;
}

// Extra round run.resolve_round + 1: `reps` more repetitions of each of
// `points`, then their aggregates. Returns the seconds a repetition took.
double RunExtraRound(RunState& run, benchmark::BenchmarkReporter& reporter,
                     const std::vector<const Point*>& points, int reps,
                     const VerdictSummary& v) {
  const int repetitions = reps * static_cast<int>(points.size());
  ++run.resolve_round;
  run.progress_total += repetitions;
  run.progress_note = ", " + std::to_string(v.open) + " of " +
                      std::to_string(v.total) + " comparisons open";
  benchmark::ClearRegisteredBenchmarks();
  for (const Point* p : points) RegisterPoint(run, *p, reps);
  const uint64_t round_start = NowNs();
  benchmark::RunSpecifiedBenchmarks(&reporter, ".");
  for (const Point* p : points)
    UpdateAggregates(run.results->doc_mutable(), p->key);
  return static_cast<double>(NowNs() - round_start) / 1e9 / repetitions;
}

// How the extra rounds ended, as context.lockline.until_resolved records it.
struct Outcome {
  uint64_t start_ns = 0;
  int extra = 0;  // extra repetitions run
  VerdictSummary v;
  std::string stopped;  // resolved, verdicts_failed, no_runnable_points...
};

// Records the outcome, marks the file finished and prints the last line;
// after a failed verdicts.py `open` is null, never 0, and returns false.
bool RecordOutcome(RunState& run, const Outcome& out) {
  run.progress_note.clear();
  RelabelCoherence(run.results->doc_mutable());
  const bool known = out.stopped != "verdicts_failed";
  run.results->lockline_context()["until_resolved"] = {
      {"max_s", run.opts.until_resolved_s},
      {"spent_s", static_cast<double>(NowNs() - out.start_ns) / 1e9},
      {"rounds", run.resolve_round},
      {"extra_repetitions", out.extra},
      {"comparisons", known ? json(out.v.total) : json(nullptr)},
      {"open", known ? json(out.v.open) : json(nullptr)},
      {"looks", run.resolve_round + 1},
      {"design",
       "sequential: the interval at look k has confidence 1 - 5 % x 6 / "
       "(pi^2 k^2) (alpha spending; plots/stats.py sequential_confidence)"},
      {"stopped", out.stopped}};
  run.results->lockline_context()["finished"] = true;
  run.results->Flush();
  if (known)
    std::printf(
        "until-resolved: %d extra repetitions in %d rounds; %d of %d "
        "comparisons still open (%s)\n",
        out.extra, run.resolve_round, out.v.open, out.v.total,
        out.stopped.c_str());
  else
    std::printf(
        "until-resolved: %d extra repetitions in %d rounds; which comparisons "
        "are open is unknown (verdicts.py failed)\n",
        out.extra, run.resolve_round);
  std::fflush(stdout);
  return known;
}

}  // namespace

bool RunUntilResolved(RunState& run, benchmark::BenchmarkReporter& reporter) {
  Outcome out;
  out.start_ns = NowNs();
  const double budget = run.opts.until_resolved_s;
  // The statistics count against the time limit, which holds; each round
  // leaves the time the last verdicts took for the next ones.
  const uint64_t deadline = out.start_ns + static_cast<uint64_t>(budget * 1e9);
  // Seconds per repetition, from the planned pass, then from each round.
  double rep_s =
      run.progress_done > 0
          ? static_cast<double>(out.start_ns - run.progress_start_ns) / 1e9 /
                run.progress_done
          : 0.1;
  double verdicts_s = 0;  // the last verdicts.py run, seconds
  for (;;) {
    RelabelCoherence(run.results->doc_mutable());
    run.results->Flush();
    if (!LookAtVerdicts(run, deadline, out.v, verdicts_s)) {
      out.stopped = "verdicts_failed";
      break;
    }
    const double spent = static_cast<double>(NowNs() - out.start_ns) / 1e9;
    std::vector<const Point*> points;
    for (const std::string& k : out.v.keys)
      if (const auto it = run.by_key.find(k); it != run.by_key.end())
        points.push_back(it->second);
    const std::string after =
        run.resolve_round == 0
            ? std::string("the planned repetitions")
            : "extra round " + std::to_string(run.resolve_round);
    std::printf(
        "until-resolved: %d of %d comparisons open after %s (%s of %s "
        "spent)\n",
        out.v.open, out.v.total, after.c_str(), FormatDuration(spent).c_str(),
        FormatDuration(budget).c_str());
    std::fflush(stdout);
    if (out.v.open == 0) {
      out.stopped = "resolved";
      break;
    }
    if (points.empty()) {
      out.stopped = "no_runnable_points";
      std::printf(
          "until-resolved: the open comparisons' points are not in "
          "this run (filtered out)\n");
      break;
    }
    // As many repetitions per point as fit, up to the run's repetitions.
    const double left = budget - spent - verdicts_s;
    const int reps = std::min<int>(
        run.opts.repetitions,
        static_cast<int>(left / (rep_s * static_cast<double>(points.size()))));
    if (reps < 1) {
      out.stopped = "time_spent";
      break;
    }
    rep_s = RunExtraRound(run, reporter, points, reps, out.v);
    out.extra += reps * static_cast<int>(points.size());
  }
  return RecordOutcome(run, out);
}

}  // namespace lockline
