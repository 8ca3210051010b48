#include "harness/run/options.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <set>

#include "harness/machine/padded_slots.h"
#include "harness/measure/duration.h"

namespace lockline {
namespace {

bool TakeValue(const std::string& arg, const std::string& flag,
               std::string* value) {
  if (arg.rfind(flag + "=", 0) != 0) return false;
  *value = arg.substr(flag.size() + 1);
  if (value->empty())
    throw UsageError(flag + " needs a value: " + flag + "=VALUE (see --help)");
  return true;
}

// `v` as a whole number (digits only) from 1 to `max` (< 1000); else throws
// UsageError(`why`).
int WholeNumber(const std::string& v, int max, const std::string& why) {
  const bool digits = !v.empty() && v.size() <= 3 &&
                      v.find_first_not_of("0123456789") == std::string::npos;
  const int n = digits ? std::stoi(v) : 0;
  if (n < 1 || n > max) throw UsageError(why);
  return n;
}

// --precision=PCT: a percentage from 0.5 to 50, "3" or "3%".
double ParsePrecision(const std::string& v) {
  std::string t = v;
  if (!t.empty() && t.back() == '%') t.pop_back();
  char* end = nullptr;
  const double pct = t.empty() ? 0 : std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || !(pct >= 0.5 && pct <= 50))
    throw UsageError("--precision=" + v +
                     ": accepted: a percentage from 0.5 to 50 (the half-width "
                     "of a paired effect's 95 % interval), e.g. 3 or 3%");
  return pct / 100;
}

// --padding=BYTES: a power of two from kMinSlotPadding to kMaxSlotPadding.
std::size_t ParsePadding(const std::string& v) {
  const auto bad = [&](const std::string& why) {
    return UsageError("--padding=" + v + ": " + why +
                      "; accepted: a power of two from " +
                      std::to_string(kMinSlotPadding) + " to " +
                      std::to_string(kMaxSlotPadding) + " bytes");
  };
  if (v.empty() || v.size() > 6 ||
      v.find_first_not_of("0123456789") != std::string::npos)
    throw bad("not a whole number of bytes");
  const std::size_t n = std::stoul(v);
  if (n < kMinSlotPadding) throw bad("less than one 64-byte cache line");
  if (n > kMaxSlotPadding) throw bad("more than one 4096-byte page");
  if (!IsValidSlotPadding(n)) throw bad("not a power of two");
  return n;
}

// The length of the well-formed UTF-8 sequence at text[i] (1 for ASCII); 0
// when the bytes there are not one.
size_t Utf8Length(const std::string& text, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const unsigned char c = p[i];
  if (c < 0x80) return 1;
  const size_t len = (c & 0xE0) == 0xC0   ? 2
                     : (c & 0xF0) == 0xE0 ? 3
                     : (c & 0xF8) == 0xF0 ? 4
                                          : 0;
  if (len == 0 || i + len > text.size()) return 0;
  uint32_t cp = c & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    if ((p[i + k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i + k] & 0x3F);
  }
  // Overlong forms, surrogates and code points past U+10FFFF.
  if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
      (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return len;
}

// Google Benchmark 1.7.1's flags and what lockline does with them.
constexpr const char* kFixedWindows =
    "windows are fixed: use --window or --budget";
constexpr const char* kOwnConsole =
    "the console shows lockline's own progress lines";
const char* const kGbApplies[] = {"benchmark_filter",
                                  "benchmark_repetitions",
                                  "benchmark_enable_random_interleaving",
                                  "benchmark_report_aggregates_only",
                                  "benchmark_display_aggregates_only",
                                  "benchmark_out",
                                  "benchmark_out_format",
                                  "benchmark_context"};
const std::pair<const char*, const char*> kGbRefused[] = {
    {"benchmark_min_time", kFixedWindows},
    {"benchmark_min_warmup_time", kFixedWindows},
    {"benchmark_perf_counters", "Debian's 1.7.1 has no libpfm: use --events"},
    {"benchmark_format", kOwnConsole},
    {"benchmark_color", kOwnConsole},
    {"benchmark_counters_tabular", kOwnConsole},
    {"benchmark_time_unit",
     "lockline.json rows are reported in ns; Google Benchmark's own "
     "--benchmark_out file keeps ms"},
    {"benchmark_list_tests", "use --list"}};
const char* const kGbBool[] = {"benchmark_enable_random_interleaving",
                               "benchmark_report_aggregates_only",
                               "benchmark_display_aggregates_only"};

// Checks one --benchmark_* argument; throws UsageError naming it.
void CheckBenchmarkFlag(const std::string& arg, Options* o) {
  const size_t eq = arg.find('=');
  const std::string name =
      arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
  const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
  for (const auto& [refused, why] : kGbRefused)
    if (name == refused)
      throw UsageError("--" + name + " does not apply to lockline (" + why +
                       "); see lockline --help");
  if (std::find(std::begin(kGbApplies), std::end(kGbApplies), name) ==
      std::end(kGbApplies)) {
    std::string list;
    for (const char* f : kGbApplies)
      list += std::string(list.empty() ? "" : ", ") + "--" + f;
    throw UsageError("unknown Google Benchmark flag '" + arg +
                     "'; accepted: " + list);
  }
  for (const char* f : kGbBool) {
    if (name != f) continue;
    static const std::set<std::string> kValues = {
        "", "true", "false", "1", "0", "yes", "no", "on", "off"};
    if (!kValues.count(value) || (eq != std::string::npos && value.empty()))
      throw UsageError("bad --" + name + " value '" + value +
                       "': accepted are true, false, yes, no, on, off, 1, 0");
    return;
  }
  if (eq == std::string::npos || value.empty())
    throw UsageError("--" + name + " needs a value: --" + name +
                     "=VALUE (see --help)");
  if (name == "benchmark_filter") {
    const std::string re = value[0] == '-' ? value.substr(1) : value;
    try {
      std::regex check(re, std::regex::extended);
    } catch (const std::regex_error& e) {
      throw UsageError("bad --benchmark_filter '" + value +
                       "': not an extended regular expression (" + e.what() +
                       "); accepted: a regex over the keys --list prints, a "
                       "leading '-' negates");
    }
    o->benchmark_filter = value;
  } else if (name == "benchmark_repetitions") {
    char* end = nullptr;
    const long n = std::strtol(value.c_str(), &end, 10);
    if (*end != '\0' || n < 1 || n > 100000)
      throw UsageError("bad --benchmark_repetitions value '" + value +
                       "': accepted is a whole number 1-100000");
    o->repetitions = static_cast<int>(n);
    o->repetitions_given = true;
  } else if (name == "benchmark_out_format") {
    if (value != "json" && value != "console" && value != "csv")
      throw UsageError("bad --benchmark_out_format value '" + value +
                       "': accepted are json, console, csv");
  } else if (name == "benchmark_out") {
    const size_t slash = value.rfind('/');
    const std::string dir = slash == std::string::npos ? "."
                            : slash == 0               ? "/"
                                                       : value.substr(0, slash);
    struct stat st {};
    if (slash == value.size() - 1 ||
        (stat(value.c_str(), &st) == 0 && S_ISDIR(st.st_mode)))
      throw UsageError("bad --benchmark_out value '" + value +
                       "': it names a directory; accepted: a file path");
    // Google Benchmark writes the file at the end and does not check the
    // write: /dev/full or a FIFO would lose the output with exit 0.
    if (stat(value.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      throw UsageError("bad --benchmark_out value '" + value +
                       "': it exists and is not a regular file (a device, "
                       "FIFO or socket); accepted: a new or regular file");
    if (access(dir.c_str(), W_OK | X_OK) != 0)
      throw UsageError(
          "bad --benchmark_out value '" + value + "': directory " + dir + " " +
          (errno == ENOENT ? "does not exist" : "is not writable") +
          "; accepted: a file in an existing writable directory");
  } else if (name == "benchmark_context") {
    // Every comma-separated part is KEY=VALUE with a non-empty key: Google
    // Benchmark 1.7.1 aborts on "a=b,c" after the run directory is claimed.
    for (size_t start = 0, comma = 0; comma != std::string::npos;
         start = comma + 1) {
      comma = value.find(',', start);
      const std::string part = value.substr(start, comma - start);
      const size_t eq_at = part.find('=');
      if (eq_at == std::string::npos || eq_at == 0)
        throw UsageError("bad --benchmark_context value '" + value +
                         "': part '" + part +
                         "' is not KEY=VALUE; accepted: "
                         "KEY=VALUE[,KEY=VALUE...]");
    }
  }
}

// The options as parsed, with --quick / --full until the suite is chosen.
struct Parsed {
  Options o;
  bool quick = false, full = false;
};
using V = const std::string&;

void SetEvidence(Parsed& p, V v) {
  p.o.evidence_windows =
      v == "on"    ? kDefaultEvidenceWindows
      : v == "off" ? 0
                   : WholeNumber(v, kMaxEvidenceWindows,
                                 "--evidence=" + v +
                                     ": expected on, off, or a number of "
                                     "evidence windows from 1 to " +
                                     std::to_string(kMaxEvidenceWindows));
}

// --FLAG=DURATION|off: `off` for "off", else ParseDurationSeconds.
double DurationOrOff(V v, double off, const std::string& flag, double min_s,
                     double max_s) {
  return v == "off" ? off
                    : ParseDurationSeconds(v, flag + " (or off)", min_s, max_s);
}

// lockline's own flags: a switch (exactly `name`) or valued (`name`=VALUE,
// TakeValue); `set` takes the value ("" for a switch), UsageError if bad.
struct Flag {
  const char* name;
  bool valued;
  void (*set)(Parsed&, V);
};
const Flag kFlags[] = {
    {"--help", false, [](Parsed& p, V) { p.o.help = true; }},
    {"-h", false, [](Parsed& p, V) { p.o.help = true; }},
    {"--quick", false, [](Parsed& p, V) { p.quick = true; }},
    {"--full", false, [](Parsed& p, V) { p.full = true; }},
    {"--calibrate-only", false,
     [](Parsed& p, V) { p.o.calibrate_only = true; }},
    {"--plan", false, [](Parsed& p, V) { p.o.plan = true; }},
    {"--plan=json", false,
     [](Parsed& p, V) { p.o.plan = p.o.plan_json = true; }},
    {"--list", false, [](Parsed& p, V) { p.o.list = true; }},
    {"--window-server", false, [](Parsed& p, V) { p.o.window_server = true; }},
    {"--duet-with", true,
     [](Parsed& p, V v) {
       if (v.empty() || access(v.c_str(), X_OK) != 0)
         throw UsageError("--duet-with=" + v +
                          ": not an executable file; accepted: the path of "
                          "an earlier lockline binary");
       p.o.duet_with = v;
     }},
    {"--oversubscribe", false, [](Parsed& p, V) { p.o.oversubscribe = true; }},
    {"--oversubscribe", true,
     [](Parsed& p, V v) {
       if (v != "force")
         throw UsageError("bad --oversubscribe value '" + v +
                          "': accepted are --oversubscribe (up to 8x the "
                          "usable PUs) and --oversubscribe=force (no cap)");
       p.o.oversubscribe = p.o.oversubscribe_force = true;
     }},
    {"--emulated", false, [](Parsed& p, V) { p.o.emulated = true; }},
    {"--layouts", false, [](Parsed& p, V) { p.o.layouts = "text"; }},
    {"--layouts", true,
     [](Parsed& p, V v) {
       if (v != "text" && v != "json")
         throw UsageError("bad --layouts value '" + v +
                          "': accepted are text and json");
       p.o.layouts = v;
     }},
    {"--pin", true, [](Parsed& p, V v) { p.o.pin = v; }},
    {"--threads", true, [](Parsed& p, V v) { p.o.threads = v; }},
    {"--mem", true, [](Parsed& p, V v) { p.o.mem = v; }},
    {"--topology", true, [](Parsed& p, V v) { p.o.topology = v; }},
    {"--events", true, [](Parsed& p, V v) { p.o.events = v; }},
    {"--out", true, [](Parsed& p, V v) { p.o.out = v; }},
    {"--budget", true,
     [](Parsed& p, V v) {
       p.o.budget_s = ParseDurationSeconds(v, "--budget", kMinBudgetSeconds,
                                           kMaxBudgetSeconds);
     }},
    {"--until-resolved", false,
     [](Parsed& p, V) { p.o.until_resolved_s = kDefaultUntilResolvedS; }},
    {"--until-resolved", true,
     [](Parsed& p, V v) {
       p.o.until_resolved_s = DurationOrOff(
           v, -1, "--until-resolved", kMinBudgetSeconds, kMaxBudgetSeconds);
     }},
    {"--fault-sampling", true,
     [](Parsed& p, V v) {
       p.o.fault_sampling_s = DurationOrOff(
           v, 0, "--fault-sampling", kMinFaultSamplingS, kMaxFaultSamplingS);
     }},
    {"--evidence", true, SetEvidence},
    {"--precision", true,
     [](Parsed& p, V v) { p.o.precision = ParsePrecision(v); }},
    {"--runs", true,
     [](Parsed& p, V v) {
       p.o.runs = WholeNumber(v, kMaxRuns,
                              "--runs=" + v +
                                  ": accepted: a whole number of independent "
                                  "runs from 1 to " +
                                  std::to_string(kMaxRuns) + " (default 1)");
     }},
    {"--padding", true,
     [](Parsed& p, V v) {
       p.o.padding = ParsePadding(v);
       p.o.padding_given = true;
     }},
    {"--window", true,
     [](Parsed& p, V v) {
       p.o.window_s = ParseDurationSeconds(v, "--window", kMinWindowSeconds,
                                           kMaxWindowSeconds);
     }},
};

// One argument: a flag of kFlags, a Google Benchmark flag (checked here,
// passed on), or an unknown flag (UsageError).
void ParseArgument(const std::string& a, Parsed& p) {
  std::string v;
  for (const Flag& f : kFlags)
    if (f.valued ? TakeValue(a, f.name, &v) : a == f.name) return f.set(p, v);
  if (a.rfind("--benchmark_", 0) == 0) {
    CheckBenchmarkFlag(a, &p.o);
    // lockline selects the points by key itself (BuildPoints): Google
    // Benchmark's names add "/iterations:N/manual_time", so a $-anchored
    // filter passed on would select nothing there.
    if (a.rfind("--benchmark_filter=", 0) != 0) p.o.benchmark_args.push_back(a);
  } else if (a.rfind("--v=", 0) == 0) {
    // Google Benchmark's verbosity: an integer (1.7.1 aborts on "abc" after
    // the run directory is claimed).
    static const std::regex kInt("-?[0-9]{1,9}");
    if (!std::regex_match(a.substr(4), kInt))
      throw UsageError("bad --v value '" + a.substr(4) +
                       "': accepted is a whole number (Google Benchmark's "
                       "log verbosity, e.g. --v=1)");
    p.o.benchmark_args.push_back(a);
  } else {
    throw UsageError("unknown flag '" + a +
                     "' (see lockline --help for the accepted flags)");
  }
}

// --calibrate-only: refuses the flags that select other points or repeat
// the run; sets its budget and repetitions unless given.
void SetUpCalibrateOnly(Options& o) {
  for (const std::string& a : o.argv)
    for (const char* f : {"--quick", "--full", "--threads", "--runs",
                          "--until-resolved", "--duet-with"})
      if (a == f || a.rfind(std::string(f) + "=", 0) == 0)
        throw UsageError(
            "--calibrate-only and " + a +
            " exclude each other: it runs the default suite's 1-thread rows "
            "and c2c rows once; accepted with it: --pin, --topology, --plan, "
            "--list, --budget, --window, --out, --benchmark_filter, "
            "--benchmark_repetitions");
  if (o.budget_s == 0) o.budget_s = kCalibrateBudgetS;
  for (const std::string& b : o.benchmark_args)
    if (b.rfind("--benchmark_repetitions=", 0) == 0) return;
  o.repetitions = kCalibrateRepetitions;
  o.benchmark_args.push_back("--benchmark_repetitions=" +
                             std::to_string(o.repetitions));
}

}  // namespace

const char* const kUsage = R"(usage: lockline [flags] [--benchmark_* flags]
       lockline predict RUN_DIR --topology=FILE.xml [--latencies=FILE] (plots/predict.py --help)

lockline runs lock-contention and cache-line-layout experiments (see README.md). It owns its
threads: each point starts pinned threads that run fixed-duration measurement windows; one Google
Benchmark iteration is one window, reported as manual time.

Suite and time:
  --quick                 smoke-sized suite (seconds; CI)
  --full                  every axis of every family (default: the declared default subset)
  --calibrate-only        about 10 s on the target of a prediction: the default suite's 1-thread
                          rows of locks, zone_lock, page_free and pagevec and its c2c rows, 3
                          repetitions, --budget 10s unless given; no plots or report: it is
                          read by lockline predict RUN_DIR --topology=FILE.xml --target=DIR
  --budget=DURATION       target wall time of the run, e.g. 90s, 20m, 1h (default: quick 30s,
                          default 4m, full 30m); the window length is fitted to it (and
                          refitted after every repetition) and the estimate printed before
                          starting, with a line when fixed work alone exceeds it; the default
                          suite fits its planned repetitions to 72 % of it (without
                          --benchmark_repetitions: the figure rows' cut, costliest first, to 3,
                          then the comparisons' may take the rest) and gives what is left to
                          the comparisons still open (--until-resolved within the budget; not
                          with --window, --benchmark_filter or --until-resolved=off)
  --window=DURATION       fixed window length (e.g. 50ms, 0.1ms to 10m); overrides the fit
                          to --budget
  --precision=PCT         half-width of a paired comparison's verdict interval the plan aims
                          at (default 3): the seed comparisons' paired points get the
                          repetitions (5 to 20) and window pairs that precision needs at this
                          machine class's measured spreads; the plan prints, per question, the
                          pairs and the half-width they are expected to give
  --out=DIR               run directory (default results/<host>-<UTC timestamp>/); must be
                          writable: checked before any point runs
  --runs=N                N independent lockline processes (1 to 20, default 1), one after
                          the other, each with the whole --budget, into DIR/run-1 .. run-N;
                          then plots/reproduce.py writes DIR/verdicts.json: each verdict over
                          all runs' repetitions and in how many runs it held (the time is N x
                          one run's)
  --until-resolved[=MAX_DURATION]
                          after the planned repetitions, run plots/verdicts.py and re-run the
                          points of every unresolved comparison (interleaved, more repetitions
                          in the same lockline.json) until all are resolved or MAX_DURATION
                          (default 5m; off: not even within the default budget) of extra
                          time is spent; needs /usr/bin/python3 and
                          verdicts.py ($LOCKLINE_PLOTS_DIR overrides the source tree's plots/)

Placement:
  --pin=cores|compact|scatter|per-l3|per-numa|none|LIST
                          cores (default): one PU per core, filling an L3, a NUMA node, then a
                          package; SMT siblings last; hybrid CPUs: fastest kind first.
                          compact: topology order, siblings adjacent. scatter: round-robin across
                          packages, NUMA nodes, L3s. per-l3 / per-numa: one PU per L3 / NUMA
                          node, in topology order. none: no binding. LIST: OS indices "0,2,4-7".
                          Usable PUs: hwloc's allowed cpuset, online, and in the affinity mask
                          lockline starts with (taskset, numactl, container)
  --threads=LIST|pow2|topo|max
                          thread counts (default topo: 1,2,4,... plus every topology boundary)
  --oversubscribe         allow more threads than usable PUs, up to 8x the PUs of the placement
  --oversubscribe=force   no cap (thread creation may then fail: the point reports
                          "cannot create thread N: EAGAIN")
  --mem=first-touch|local|node:N|interleave
                          where shared structures (locks, zone, LRU) live (hwloc membind)
  --padding=BYTES         distance between per-thread slots (each thread's counters, lock
                          statistics and private state): a power of two from 64 to 4096
                          (default 128: two lines, for the adjacent-line prefetcher); the
                          kernel-structure layouts keep the kernel's own padding
  --topology=host|FILE.xml|synthetic:STRING
                          topology to plan on; benchmarks only run on host
  --plan                  print the placement of every thread count and exit
  --plan=json             the same as JSON: every thread count's plan and the placement order
                          with each PU's core, L2, L3, NUMA node and package (plots/predict.py)
  --emulated              mark the run and every row "emulated" (set on its own under QEMU
                          TCG): timing means nothing there, and no comparison mixes it with
                          real runs (ci/rehearse.sh)

Counters and layouts:
  --fault-sampling=DURATION|off
                          task-clock sampling period of the fault rows' sampled clear_page
                          share (kernel callchains; needs root or perf_event_paranoid <= 1):
                          100us to 100ms (default 2ms); off: no sampling (the rows say
                          clear_page_sampled is unavailable: sampling off)
  --evidence=on|off|N
                          kernel evidence of the kernel_* rows (lock:contention_* counts and
                          callchains, spin profile, vmstat, kernel_zone's zone->lock holds)
                          is collected in N evidence windows per repetition (on: 2, one
                          before and one after the timed windows), never in the timed
                          windows; rows give the evidence windows' throughput ratio. off:
                          no evidence windows, no perf events, and no fault-row sampling
  --events=LIST|default|none
                          perf events (libpfm4 / perf list names, :u / :k modifiers); default:
                          cycles,instructions,cache-misses,task-clock,context-switches,
                          cpu-migrations,page-faults. Unavailable events are reported, never 0.
  --layouts[=text|json]   print the structure layouts (pahole style) and exit
  --list                  print the point keys of the selected suite and exit
  --duet-with=OLD_BINARY  regression check on a noisy machine: every point runs its windows in
                          alternation with the same point of OLD_BINARY (an earlier lockline
                          build of the same result schema and suite keys), one at a time on the
                          same PUs; rows add build_ratio (new/old) and details.build_duet's
                          window pairs (ci/compare.py --builds RUN answers them)
  --help                  this text

Google Benchmark flags that apply: --benchmark_filter=REGEX (matched against the keys --list
prints), --benchmark_repetitions=N (default 5: an effect's interval needs 4
same-regime repetitions a side), --benchmark_enable_random_interleaving (default on), --benchmark_report_aggregates_only, --benchmark_display_aggregates_only,
--benchmark_out=FILE and --benchmark_out_format=json|console|csv (Google Benchmark's own output,
in its 1.7.1 semantics: threads is always 1 there; lockline.json is the full record),
--benchmark_context=KEY=VALUE.
Flags that do not apply, and are refused: --benchmark_min_time and --benchmark_min_warmup_time
(windows are fixed: use --window or --budget), --benchmark_perf_counters (Debian's 1.7.1 has no
libpfm: use --events), --benchmark_format, --benchmark_color and --benchmark_counters_tabular
(the console shows lockline's own progress lines), --benchmark_time_unit (lockline.json rows are in ns; Google Benchmark's own
--benchmark_out file keeps ms),
--benchmark_list_tests (use --list).

Exit status: 0 every point ran; 1 some point reported an error; 2 bad input (nothing created);
3 a window never ended; 4 a result could not be written (disk full, read-only, out of file descriptors: the message
says which); 128 + N
ended by signal N: 130 / 143 SIGINT / SIGTERM, likewise SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
SIGPIPE, SIGALRM (lockline.json keeps every finished point; changed sysctls are restored, and a
run killed outright is undone by the next run's start, from /run/lockline/restore.state).
)";

bool IsValidUtf8(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const size_t len = Utf8Length(text, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string EscapeForMessage(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    // Valid UTF-8 is kept; control characters and other bytes are escaped.
    const size_t len = c < 0x20 || c == 0x7f ? 0 : Utf8Length(text, i);
    if (len > 0) {
      out.append(text, i, len);
      i += len;
      continue;
    }
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
    ++i;
  }
  return out;
}

int FailWithError(const std::string& message) {
  std::fprintf(stderr, "lockline: error: %s\n",
               EscapeForMessage(message).c_str());
  return 2;
}

double ParseDurationSeconds(const std::string& text, const std::string& flag,
                            double min_s, double max_s) {
  try {
    return ParseDuration(text, flag, min_s, max_s);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

Options ParseOptions(int argc, char** argv) {
  Parsed p;
  Options& o = p.o;
  for (int i = 0; i < argc; ++i) o.argv.push_back(argv[i]);
  // Every argument is recorded in lockline.json (context.lockline.argv and
  // elsewhere), which is UTF-8: invalid bytes are refused before anything.
  for (int i = 1; i < argc; ++i)
    if (!IsValidUtf8(argv[i]))
      throw UsageError("argument '" + EscapeForMessage(argv[i]) +
                       "' is not valid UTF-8 (the result file is JSON, which "
                       "is UTF-8); accepted: UTF-8 text");
  for (int i = 1; i < argc; ++i) ParseArgument(argv[i], p);
  if (p.quick && p.full)
    throw UsageError("--quick and --full exclude each other: pick one");
  if (!o.duet_with.empty() && o.until_resolved_s > 0)
    throw UsageError(
        "--duet-with and --until-resolved exclude each other: the build duet "
        "runs a fixed number of window pairs per repetition");
  if (o.calibrate_only) SetUpCalibrateOnly(o);
  o.suite = p.quick ? Suite::kQuick : p.full ? Suite::kFull : Suite::kDefault;
  if (o.budget_s == 0) o.budget_s = p.quick ? 30 : p.full ? 1800 : 240;
  // The default run resolves within its budget (until_resolved.h) when it
  // runs the whole suite on fitted windows into lockline.json alone.
  const auto gb_out = std::find_if(
      o.benchmark_args.begin(), o.benchmark_args.end(),
      [](const std::string& a) { return a.rfind("--benchmark_out=", 0) == 0; });
  o.until_resolved_auto = o.suite == Suite::kDefault && !o.calibrate_only &&
                          o.until_resolved_s == 0 && o.window_s <= 0 &&
                          o.benchmark_filter.empty() && o.duet_with.empty() &&
                          gb_out == o.benchmark_args.end();
  if (o.until_resolved_auto) o.until_resolved_s = o.budget_s;
  o.until_resolved_s = std::max(0.0, o.until_resolved_s);
  if (o.runs > 1 && gb_out != o.benchmark_args.end())
    throw UsageError("--runs=" + std::to_string(o.runs) + " and " + *gb_out +
                     " exclude each other: every run writes its own "
                     "lockline.json (RUN_DIR/run-K)");
  return o;
}

}  // namespace lockline
