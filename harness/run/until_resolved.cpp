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
#include <map>
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

// "" when verdicts.py and its interpreter are there, else what is missing.
std::string VerdictsMissing() {
  const std::string script = PlotsDir() + "/verdicts.py";
  if (access(script.c_str(), R_OK) != 0)
    return "--until-resolved needs " + script +
           " (the statistics that decide which comparisons are open); it is "
           "missing: set LOCKLINE_PLOTS_DIR to the plots/ directory of a "
           "lockline source tree";
  if (access(kVerdictsPython, X_OK) != 0)
    return std::string("--until-resolved needs ") + kVerdictsPython +
           " with numpy and scipy (bash ci/install_deps.sh installs them)";
  return "";
}

double Number(const json& v) { return v.is_number() ? v.get<double>() : NAN; }

// Look round + 1 of the sequential design: runs verdicts.py and reads its
// verdicts into `v`, those in `stopped` resolved (ReadVerdicts; the planned
// repetitions' kept as verdicts_planned.json);
// `verdicts_s`: the seconds it took. False, said on stderr, when it failed.
bool LookAtVerdicts(const RunState& run, uint64_t deadline_ns,
                    std::set<std::string>& stopped, VerdictSummary& v,
                    double& verdicts_s) {
  const std::string dir = run.results->dir();
  const uint64_t start = NowNs();
  std::string failed = RunVerdicts(PlotsDir() + "/verdicts.py", dir,
                                   run.resolve_round + 1, deadline_ns);
  verdicts_s = SecondsBetween(start, NowNs());
  if (failed.empty()) {
    try {
      v = ReadVerdicts(dir + "/verdicts.json", &stopped);
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

// Extra round run.resolve_round + 1: `round`'s repetitions, interleaved,
// then their aggregates. Returns the repetitions run.
int RunExtraRound(RunState& run, benchmark::BenchmarkReporter& reporter,
                  const std::vector<std::pair<const Point*, int>>& round,
                  const VerdictSummary& v) {
  int repetitions = 0;
  for (const auto& [p, n] : round) repetitions += n;
  ++run.resolve_round;
  run.progress_total += repetitions;
  run.progress_note = ", " + std::to_string(v.open) + " of " +
                      std::to_string(v.total) + " comparisons open";
  benchmark::ClearRegisteredBenchmarks();
  for (const auto& [p, n] : round) RegisterPoint(run, *p, n);
  benchmark::RunSpecifiedBenchmarks(&reporter, ".");
  for (const auto& [p, n] : round)
    UpdateAggregates(run.results->doc_mutable(), p->key);
  return repetitions;
}

// Coherence labels as RecordRepetition keeps them (the run's RegimeCache,
// EditRows): only changed rows are serialized again, not the whole file.
void RelabelRows(RunState& run) {
  run.results->EditRows(
      [&](json& doc) { return RelabelCoherence(doc, &run.regimes); });
}

// How the extra rounds ended, as context.lockline.until_resolved records it.
struct Outcome {
  uint64_t start_ns = 0;
  double max_s = 0;  // the time they had
  int extra = 0;     // extra repetitions run
  int looks = 0;     // verdicts.py runs
  VerdictSummary v;
  std::string stopped;  // resolved, verdicts_failed, no_runnable_points...
};

// Records the outcome, marks the file finished and prints the last line;
// after a failed verdicts.py `open` is null, never 0, and returns false.
bool RecordOutcome(RunState& run, const Outcome& out) {
  run.progress_note.clear();
  RelabelRows(run);
  const bool known =
      out.stopped != "verdicts_failed" && out.stopped != "not_run";
  run.results->lockline_context()["until_resolved"] = {
      {"max_s", out.max_s},
      {"within_budget", run.opts.until_resolved_auto},
      {"spent_s", SecondsBetween(out.start_ns, NowNs())},
      {"rounds", run.resolve_round},
      {"extra_repetitions", out.extra},
      {"comparisons", known ? json(out.v.total) : json(nullptr)},
      {"open", known ? json(out.v.open) : json(nullptr)},
      {"looks", out.looks},
      {"design",
       "sequential: the interval at look k has confidence 1 - 5 % x 6 / "
       "(pi^2 k^2) (alpha spending; plots/stats.py sequential_confidence)"},
      {"stopped", out.stopped}};
  run.results->lockline_context()["finished"] = true;
  run.results->Flush();
  const double ran = SecondsBetween(run.run_start_ns, NowNs());
  if (known)
    std::printf(
        "until-resolved: %d extra repetitions in %d rounds; %d of %d "
        "comparisons still open (%s); the run took %s (budget %s)\n",
        out.extra, run.resolve_round, out.v.open, out.v.total,
        out.stopped.c_str(), FormatDuration(ran).c_str(),
        FormatDuration(run.opts.budget_s).c_str());
  else if (out.stopped != "not_run")
    std::printf(
        "until-resolved: %d extra repetitions in %d rounds; which comparisons "
        "are open is unknown (verdicts.py failed)\n",
        out.extra, run.resolve_round);
  std::fflush(stdout);
  return out.stopped != "verdicts_failed";
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
  // The default run's (auto) goes without, saying so (RunUntilResolved).
  if (o.until_resolved_s <= 0 || o.until_resolved_auto) return "";
  if (std::string why = VerdictsMissing(); !why.empty()) return why;
  for (const std::string& a : o.benchmark_args)
    if (a.rfind("--benchmark_out=", 0) == 0)
      return "--until-resolved and " + a +
             " exclude each other: Google Benchmark rewrites its file on every "
             "extra round; lockline.json in the run directory holds every "
             "repetition";
  return "";
}

VerdictSummary ReadVerdicts(const std::string& path,
                            std::set<std::string>* stopped) {
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
  if (doc.contains("min_effect") && doc["min_effect"].is_number())
    s.min_effect = doc["min_effect"].get<double>();
  std::set<std::string> seen;
  for (const json& v : doc["verdicts"]) {
    if (!v.is_object()) continue;
    ++s.total;
    bool resolved = v.value("resolved", false);
    if (const json id = v.value("id", json()); stopped && id.is_string()) {
      if (resolved) stopped->insert(id.get<std::string>());
      resolved = resolved || stopped->count(id.get<std::string>()) > 0;
    }
    // A question its mechanism cannot reach here (plots/verdicts.py ANSWERABLE)
    // stays so however many repetitions run.
    if (resolved || v.value("status", std::string()) == "not_answerable")
      continue;
    ++s.open;
    OpenComparison c;
    const json regime = v.value("regime", json());
    if (regime.is_string() && regime != "all") c.regime = regime;
    c.effect = Number(v.value("effect", json()));
    const json ci = v.value("ci", json());
    if (ci.is_array() && ci.size() == 2) {
      c.lo = Number(ci[0]);
      c.hi = Number(ci[1]);
    }
    // A paired verdict (method "paired") is continued on its duet row alone:
    // more window pairs, not more unpaired repetitions.
    const bool paired = v.value("duet_key", json()).is_string();
    for (const char* k : {"duet_key", "base_key", "variant_key"}) {
      if (paired != (std::string(k) == "duet_key")) continue;
      const json key = v.value(k, json());
      if (!key.is_string()) continue;
      c.keys.push_back(key.get<std::string>());
      if (seen.insert(c.keys.back()).second) s.keys.push_back(c.keys.back());
    }
    s.comparisons.push_back(std::move(c));
  }
  return s;
}

std::vector<std::pair<const Point*, int>> PlanRound(const RunState& run,
                                                    const VerdictSummary& v,
                                                    double seconds) {
  // Each key's repetitions, in all and per coherence label, and the seconds
  // they took (timing: wall_s and the gap before each).
  std::map<std::string, std::map<std::string, int>> in;
  std::map<std::string, int> total;
  std::map<std::string, double> took;
  for (const json& r : run.results->doc()["benchmarks"]) {
    if (r.value("run_type", "") != "iteration") continue;
    const std::string key = r.value("lockline_key", "");
    const json timing = r.value("timing", json::object());
    took[key] += timing.value("wall_s", 0.0) + timing.value("gap_s", 0.0);
    if (r.value("error_occurred", false)) continue;
    ++total[key];
    ++in[key][r.value("coherence", json::object()).value("label", "")];
  }
  const auto cost_of = [&](const Point& p) {
    return took[p.key] / std::max(1, total[p.key]);
  };
  // Per comparison: its points' wanted repetitions and their cost.
  std::vector<std::pair<double, std::vector<std::pair<const Point*, int>>>>
      wants;
  const int cap = 8 * run.opts.repetitions;
  for (const OpenComparison& c : v.comparisons) {
    std::vector<std::pair<const Point*, double>> have;  // units, then share
    int units = cap;
    for (const std::string& k : c.keys) {
      const auto it = run.by_key.find(k);
      if (it == run.by_key.end()) break;
      const int n = c.regime.empty() ? total[k] : in[k][c.regime];
      units = std::min(units, n);
      have.push_back({it->second, n});
    }
    if (have.size() != c.keys.size() || have.empty()) continue;
    double goal = 8;
    const double e = std::log1p(c.effect);
    const double h = std::max(std::log1p(c.hi) - e, e - std::log1p(c.lo));
    if (std::isfinite(h) && h > 0 && units >= 2)
      goal =
          units *
          std::pow(1.25 * h /
                       (0.9 * std::max(std::log1p(v.min_effect) - std::fabs(e),
                                       std::fabs(e))),
                   2);
    double cost = 0;
    std::vector<std::pair<const Point*, int>> want;
    for (const auto& [p, n] : have) {
      const double share =
          c.regime.empty() ? 1.0 : (n + 1.0) / (total[p->key] + 2.0);
      const int more = static_cast<int>(std::clamp(
          std::ceil((goal - n) / share), 1.0, static_cast<double>(cap)));
      want.push_back({p, more});
      cost += more * cost_of(*p);
    }
    wants.push_back({cost, std::move(want)});
  }
  std::stable_sort(
      wants.begin(), wants.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  std::map<const Point*, int> round;  // in run.points' order (their addresses)
  for (const auto& [cost, want] : wants) {
    const double f = std::min(1.0, seconds / cost);
    for (const auto& [p, n] : want) {
      const int k = static_cast<int>(f * n);
      seconds -= k * cost_of(*p);
      if (k > 0) round[p] = std::min(round[p] + k, cap);
    }
    if (f < 1) break;
  }
  return {round.begin(), round.end()};
}

bool RunUntilResolved(RunState& run, benchmark::BenchmarkReporter& reporter) {
  Outcome out;
  out.start_ns = NowNs();
  const Options& o = run.opts;
  // The statistics count against the time limit, which holds; each round
  // leaves the time the last verdicts took for the next ones. The default
  // run's limit is its budget, counted from its start.
  const uint64_t deadline =
      o.until_resolved_auto ? run.run_start_ns + SecondsToNs(o.budget_s)
                            : out.start_ns + SecondsToNs(o.until_resolved_s);
  out.max_s = SecondsBetween(out.start_ns, deadline);
  if (o.until_resolved_auto) {
    std::string why = VerdictsMissing();
    // Less than a look at the verdicts and a round: not worth starting.
    if (why.empty() && out.max_s < 10)
      why = "the budget leaves " + FormatDuration(out.max_s);
    if (!why.empty()) {
      std::printf(
          "until-resolved: the comparisons still open are not continued "
          "within the budget: %s\n",
          why.c_str());
      out.stopped = "not_run";
      return RecordOutcome(run, out);
    }
  }
  double verdicts_s = 0;          // the last verdicts.py run, seconds
  std::set<std::string> stopped;  // comparisons resolved at an earlier look
  for (;;) {
    RelabelRows(run);
    run.results->Flush();
    // No look that cannot end in time: the last one's open count stands.
    if (run.resolve_round > 0 &&
        NowNs() + static_cast<uint64_t>(1.5e9 * verdicts_s) > deadline) {
      out.stopped = "time_spent";
      break;
    }
    ++out.looks;
    if (!LookAtVerdicts(run, deadline, stopped, out.v, verdicts_s)) {
      out.stopped = "verdicts_failed";
      break;
    }
    const double spent = SecondsBetween(out.start_ns, NowNs());
    const std::string after =
        run.resolve_round == 0
            ? std::string("the planned repetitions")
            : "extra round " + std::to_string(run.resolve_round);
    std::printf(
        "until-resolved: %d of %d comparisons open after %s (%s of %s "
        "spent)\n",
        out.v.open, out.v.total, after.c_str(), FormatDuration(spent).c_str(),
        FormatDuration(out.max_s).c_str());
    std::fflush(stdout);
    if (out.v.open == 0) {
      out.stopped = "resolved";
      break;
    }
    if (std::none_of(
            out.v.keys.begin(), out.v.keys.end(),
            [&](const std::string& k) { return run.by_key.count(k); })) {
      out.stopped = "no_runnable_points";
      std::printf(
          "until-resolved: the open comparisons' points are not in "
          "this run (filtered out)\n");
      break;
    }
    // A margin: the next look may take longer than the last, and a round
    // its points' per-instance overheads besides their rows' time.
    const auto round =
        PlanRound(run, out.v, 0.8 * (out.max_s - spent - 1.5 * verdicts_s));
    if (round.empty()) {
      out.stopped = "time_spent";
      break;
    }
    out.extra += RunExtraRound(run, reporter, round, out.v);
  }
  return RecordOutcome(run, out);
}

}  // namespace lockline
