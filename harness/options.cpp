#include "harness/options.h"

#include <cstdlib>

namespace lockline {

const char* const kUsage = R"(usage: lockline [flags] [--benchmark_* flags]

lockline runs lock-contention and cache-line-layout experiments (see README.md). It owns its
threads: each point starts pinned threads that run fixed-duration measurement windows; one Google
Benchmark iteration is one window, reported as manual time.

Suite and time:
  --quick                 smoke-sized suite (seconds; CI)
  --full                  every axis of every family (default: the declared default subset)
  --budget=DURATION       target wall time of the run, e.g. 90s, 20m, 1h (default: quick 30s,
                          default 2m, full 30m); the window length is fitted to it and the
                          estimate printed before starting
  --window=DURATION       fixed window length (e.g. 50ms); overrides the fit to --budget
  --out=DIR               run directory (default results/<host>-<UTC timestamp>/); must be
                          writable: checked before any point runs

Placement:
  --pin=cores|compact|scatter|none|LIST
                          cores (default): one PU per core, filling an L3, a NUMA node, then a
                          package; SMT siblings last; hybrid CPUs: fastest kind first.
                          compact: topology order, siblings adjacent. scatter: round-robin across
                          packages, NUMA nodes, L3s. none: no binding. LIST: OS indices "0,2,4-7"
  --threads=LIST|pow2|topo|max
                          thread counts (default topo: 1,2,4,... plus every topology boundary)
  --oversubscribe         allow more threads than usable PUs
  --mem=first-touch|local|node:N|interleave
                          where shared structures (locks, zone, LRU) live (hwloc membind)
  --topology=host|FILE.xml|synthetic:STRING
                          topology to plan on; benchmarks only run on host
  --plan                  print the placement of every thread count and exit
  --emulated              mark the run and every row "emulated" (set on its own under QEMU
                          TCG): timing means nothing there, and no comparison mixes it with
                          real runs (ci/rehearse.sh)

Counters and layouts:
  --events=LIST|default|none
                          perf events (libpfm4 / perf list names, :u / :k modifiers); default:
                          cycles,instructions,cache-misses,task-clock,context-switches,
                          cpu-migrations,page-faults. Unavailable events are reported, never 0.
  --layouts[=text|json]   print the structure layouts (pahole style) and exit
  --list                  print the point keys of the selected suite and exit
  --help                  this text

Google Benchmark flags that apply: --benchmark_filter=REGEX, --benchmark_repetitions=N (default
3), --benchmark_enable_random_interleaving (default on), --benchmark_report_aggregates_only,
--benchmark_display_aggregates_only, --benchmark_out=FILE (Google Benchmark's own JSON, in its
1.7.1 semantics: threads is always 1 there; lockline.json is the full record).
Flags that do not apply: --benchmark_min_time and --benchmark_min_warmup_time (windows are
fixed: use --window or --budget), --benchmark_perf_counters (Debian's 1.7.1 has no libpfm: use
--events), --benchmark_format (the console shows lockline's own progress lines).
)";

namespace {

bool TakeValue(const std::string& arg, const std::string& flag,
               std::string* value) {
  if (arg.rfind(flag + "=", 0) != 0) return false;
  *value = arg.substr(flag.size() + 1);
  if (value->empty())
    throw UsageError(flag + " needs a value: " + flag + "=VALUE (see --help)");
  return true;
}

int ParsePositiveInt(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 1 || v > 100000)
    throw UsageError("bad " + flag + " value '" + text +
                     "': accepted is a whole number 1-100000");
  return static_cast<int>(v);
}

}  // namespace

double ParseDurationSeconds(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit = end ? std::string(end) : "";
  double scale = -1;
  if (unit.empty() || unit == "s")
    scale = 1;
  else if (unit == "ms")
    scale = 1e-3;
  else if (unit == "us")
    scale = 1e-6;
  else if (unit == "m" || unit == "min")
    scale = 60;
  else if (unit == "h")
    scale = 3600;
  if (text.empty() || end == text.c_str() || scale < 0 || !(v > 0) ||
      v * scale > 7 * 86400)
    throw UsageError("bad " + flag + " value '" + text +
                     "': accepted is a positive duration like 90s, 500ms, 20m, "
                     "1h (a bare number "
                     "is seconds)");
  return v * scale;
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 0; i < argc; ++i) o.argv.push_back(argv[i]);
  bool quick = false, full = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string v;
    if (a == "--help" || a == "-h")
      o.help = true;
    else if (a == "--quick")
      quick = true;
    else if (a == "--full")
      full = true;
    else if (a == "--plan")
      o.plan = true;
    else if (a == "--list")
      o.list = true;
    else if (a == "--oversubscribe")
      o.oversubscribe = true;
    else if (a == "--emulated")
      o.emulated = true;
    else if (a == "--layouts")
      o.layouts = "text";
    else if (TakeValue(a, "--layouts", &v)) {
      if (v != "text" && v != "json")
        throw UsageError("bad --layouts value '" + v +
                         "': accepted are text and json");
      o.layouts = v;
    } else if (TakeValue(a, "--pin", &o.pin) ||
               TakeValue(a, "--threads", &o.threads) ||
               TakeValue(a, "--mem", &o.mem) ||
               TakeValue(a, "--topology", &o.topology) ||
               TakeValue(a, "--events", &o.events) ||
               TakeValue(a, "--out", &o.out)) {
    } else if (TakeValue(a, "--budget", &v)) {
      o.budget_s = ParseDurationSeconds(v, "--budget");
    } else if (TakeValue(a, "--window", &v)) {
      o.window_s = ParseDurationSeconds(v, "--window");
    } else if (a.rfind("--benchmark_", 0) == 0 || a.rfind("--v=", 0) == 0) {
      if (TakeValue(a, "--benchmark_filter", &v)) o.benchmark_filter = v;
      if (TakeValue(a, "--benchmark_repetitions", &v))
        o.repetitions = ParsePositiveInt(v, "--benchmark_repetitions");
      o.benchmark_args.push_back(a);
    } else {
      throw UsageError("unknown flag '" + a +
                       "' (see lockline --help for the accepted flags)");
    }
  }
  if (quick && full)
    throw UsageError("--quick and --full exclude each other: pick one");
  o.suite = quick ? Suite::kQuick : full ? Suite::kFull : Suite::kDefault;
  if (o.budget_s == 0) o.budget_s = quick ? 30 : full ? 1800 : 120;
  return o;
}

}  // namespace lockline
