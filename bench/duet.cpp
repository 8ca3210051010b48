// duet: the seed questions' comparisons as paired windows
// (harness/measure/duet.h). Each row holds two variants of one family that
// differ in one parameter (the slot count, the zone->lock layout, the put_page
// variant, the pre-zeroing mode ...) and runs them alternately on one thread
// team, window by window, so each window pair is one sample of their ratio;
// plots/verdicts.py answers a question from these pairs where a duet row
// exists (method "paired windows"), else from repetitions. Not paired:
// workloads whose invariants assume one window per repetition (the prezero
// burst protocols). A/A rows (the same variant on both sides, suite full)
// measure how often the paired method finds an effect that is not there.
#include "harness/measure/duet.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/family.h"

namespace lockline {
namespace {

/// Measured window pairs per repetition when the harness does not plan them
/// (--quick; outside it PlanPairs sizes them from --precision), and discarded
/// warm-up pairs before them. 12 pairs x 5 repetitions = 60 pairs.
constexpr int kPairs = kDuetMinPairs;
constexpr int kWarmupPairs = kDuetWarmupPairs;

/// One paired comparison: rows of `family` whose `param` is `a` (base) vs `b`,
/// all other parameters equal; one duet per value of `group_by` (e.g. per lock
/// kind), each the candidate matching most of `prefer`. Mirrors
/// plots/verdicts.py COMPARISONS. `threads`: the verdict's own thread count
/// (kMin: the variant's smallest; kMax: its largest, the contended end) or
/// every thread count of the run (kAll: A/A rows, figures).
enum class DuetThreads { kAll, kMin, kMax };

struct DuetSpec {
  std::string question;
  std::string family;
  std::string param;
  std::string a;
  std::string b;
  /// "k:v/k:v", a row key's own syntax ("k:" is k with the value "").
  std::string prefer;
  /// Parameter names, '/'-separated.
  std::string group_by = "";
  DuetThreads threads = DuetThreads::kAll;
  /// kDefault: in the default suite (the questions' answers the report gives
  /// from pairs); kFull: measured with --full (or a filter) only.
  Suite suite = Suite::kFull;
  /// The value `param` has in a row whose key leaves it out (stats: "on", the
  /// instrumented rows; their twins end /stats:off): lets a duet pair a row
  /// with its twin. "" for parameters every row names.
  std::string absent = "";
  /// Parameters a side must have ("k:v/k:v", ParamOf with `absent` ""), e.g.
  /// policy fixed: rows without the parameter (the named layouts) are not
  /// sides.
  std::string only = "";
  /// Variant::repetition_factor of the duet's points.
  int repetition_factor = 1;
};

/// The '/'-separated parts of `s` (none for "").
std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at < s.size();) {
    const std::size_t end = std::min(s.find('/', at), s.size());
    out.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

/// "k:v/k:v" as (k, v) pairs.
Params KeyValues(const std::string& s) {
  Params out;
  for (const std::string& kv : Split(s)) {
    const std::size_t colon = kv.find(':');
    out.emplace_back(kv.substr(0, colon), kv.substr(colon + 1));
  }
  return out;
}

constexpr DuetThreads kMin = DuetThreads::kMin, kMax = DuetThreads::kMax;
constexpr Suite kDefault = Suite::kDefault, kFull = Suite::kFull;

/// `specs` and, after them, the questions' duets (000-003) on the
/// instrumented rows (stats absent), suite full: the same comparisons with
/// lock_stat on both sides, so a --full run (or a filter) shows what the
/// instrumentation does to each effect.
std::vector<DuetSpec> WithInstrumentedTwins(
    const std::vector<DuetSpec>& specs) {
  std::vector<DuetSpec> out = specs;
  for (const DuetSpec& s : specs) {
    const std::string& q = s.question;
    if (q != "000" && q != "001" && q != "002" && q != "003") continue;
    DuetSpec on = s;
    const std::size_t at = on.prefer.find("stats:off");
    if (at != std::string::npos) on.prefer.erase(at + 6, 3);  // "stats:"
    on.suite = Suite::kFull;
    out.push_back(std::move(on));
  }
  return out;
}

const std::vector<DuetSpec>& Specs() {
  // The 2004 and 2020 pagevec rows (verdicts.py PV_2004 / PV_2020): each era's
  // kernel, release path and lock; one duet per work_ns (cal, and the
  // labelled saturated 0) as the verdicts group them. The questions' duets
  // pair the uninstrumented twins (stats:off both sides); their instrumented
  // counterparts (WithInstrumentedTwins) are suite full.
  const std::string pv2004 =
      "kernel:2.6.9/release:unmap/scanner:off/lock:ttas/policy:fixed/"
      "mode:deferred/stats:off";
  const std::string pv2020 =
      "kernel:5.8/release:none/scanner:on/lock:qspinlock/policy:fixed/"
      "mode:deferred/stats:off";
  const std::string zone = "pcp_batch:31/config:cma/line:64/zones:per_numa/";
  static const std::vector<DuetSpec> specs = WithInstrumentedTwins({
      {"000", "pagevec", "slots", "16", "15", pv2004 + "/offset:0", "work_ns",
       kMax, kDefault},
      {"000", "pagevec", "layout", "pagevec_v2_6_9", "pagevec_v2_6_10",
       pv2004 + "/offset:0", "work_ns", kMax, kDefault},
      {"000", "pagevec", "offset", "0", "8", pv2004 + "/slots:16", "work_ns",
       kMax, kDefault},
      // 2015 is answered by the ticket lock of 4.0. One duet per work_ns for
      // 4.0's lock (cal: the answer; 0: the labelled saturated case), the
      // what-if locks at work_ns:cal; all on the stats:off twins.
      {"001", "zone_lock", "layout", "lock_before_free_area",
       "lock_after_free_area", "lock:ticket/" + zone + "work_ns:cal/stats:off",
       "work_ns", kMax, kDefault},
      {"001", "zone_lock", "layout", "lock_before_free_area",
       "lock_after_free_area", zone + "work_ns:cal/stats:off", "lock",
       DuetThreads::kAll, kDefault},
      // 002 at one thread, on the stats:off twins too: 2.6.16's put_page
      // takes lru_lock on every final put (__page_cache_release,
      // mm/swap.c@v2.6.16), the fast path at 0 % never does, so lock_stat
      // would sit on one side only.
      {"002", "page_free", "variant", "atomic", "fastpath",
       "on_lru_pct:0/free_cpu:same/lock:ttas/stats:off", "", kMin, kDefault},
      {"003", "pagevec", "slots", "15", "31", pv2020 + "/offset:0", "work_ns",
       kMax, kDefault},
      // 004: the steady-state verdict (zeroer on a PU of its own, allocator
      // never sleeps) from pairs. Twice the repetitions: they fall in two
      // modes, and an interval needs both.
      {"004", "prezero", "mode", "zero_on_alloc", "prezeroed_busy",
       "method:memset", "", kMin, kDefault, "", "", 2},
      // What lock_stat costs (suite full: not a question): each family's
      // contended rows against their /stats:off twins at work_ns:0, where the
      // lock is busiest, for both sides of each question (15 and 16 slots for
      // 2.6.9, 15 and 31 for 5.8, both zone->lock layouts).
      {"instr", "pagevec", "stats", "on", "off", pv2004 + "/offset:0/work_ns:0",
       "kernel/slots", kMax, kFull, "on", "policy:fixed/work_ns:0/offset:0"},
      {"instr", "zone_lock", "stats", "on", "off",
       "lock:ticket/" + zone + "work_ns:0", "layout", kMax, kFull, "on",
       "work_ns:0"},
      // A/A: the same variant on both sides (suite full), for the false
      // effect rate of the paired method across families and thread counts.
      {"aa", "pagevec", "slots", "15", "15",
       "kernel:2.6.9/scanner:off/offset:0/stats:"},
      {"aa", "zone_lock", "layout", "lock_after_free_area",
       "lock_after_free_area",
       "pcp_batch:31/config:cma/lock:ticket/work_ns:cal/stats:"},
      // The instrumented rows (a twin's key sorts first and would otherwise
      // win the tie).
      {"aa", "page_free", "variant", "atomic", "atomic",
       "on_lru_pct:0/free_cpu:same/stats:"},
      {"aa", "locks", "lock", "ticket", "ticket", "cs:0/stats:off"},
  });
  return specs;
}

/// `p` with `k` set to `v`; a parameter `p` lacks is appended (a twin's
/// /stats:off comes last before threads).
Params WithParam(Params p, const std::string& k, const std::string& v) {
  const auto it = std::find_if(p.begin(), p.end(),
                               [&](const auto& kv) { return kv.first == k; });
  if (it != p.end())
    it->second = v;
  else
    p.emplace_back(k, v);
  return p;
}

/// The duet variant of a (base, variant) pair of one family.
Variant MakeDuet(const DuetSpec& spec, const Variant& a, const Variant& b,
                 Suite suite) {
  Variant d;
  d.params = {
      {"of", spec.family}, {"param", spec.param}, {"a", spec.a}, {"b", spec.b}};
  for (const auto& kv : a.params)
    if (kv.first != spec.param) d.params.push_back(kv);
  d.suite = suite;
  d.question = spec.question;
  d.paired = true;
  d.quick_only = a.quick_only || b.quick_only;
  // RowKey ends in "/threads:0": the sides' keys without a thread count.
  const auto strip = [&](const Variant& v) {
    const std::string k = RowKey(spec.family, v.params, 0);
    return k.substr(0, k.rfind("/threads:"));
  };
  d.description = std::string("paired windows (duet), question ") +
                  spec.question + ": " + spec.param + ":" + spec.b + " vs " +
                  spec.param + ":" + spec.a + " alternating window by window" +
                  " on one thread team; A = " + a.description;
  d.threads = a.threads;
  d.largest_thread_count_only = spec.threads == DuetThreads::kMax;
  if (spec.threads == DuetThreads::kMin)
    d.threads = {a.threads.empty()
                     ? 1
                     : *std::min_element(a.threads.begin(), a.threads.end())};
  d.needs_spare_pu = a.needs_spare_pu || b.needs_spare_pu;
  d.helper_on_idle_pu = a.helper_on_idle_pu || b.helper_on_idle_pu;
  d.helper_per_node = a.helper_per_node || b.helper_per_node;
  d.windows = 2 * (kWarmupPairs + kPairs);
  d.repetition_factor = spec.repetition_factor;
  d.fixed_work = a.fixed_work;
  d.cost_mib = a.cost_mib + b.cost_mib;
  d.cost_s = a.cost_s + b.cost_s;
  d.quick_cost_fraction =
      std::max(a.quick_cost_fraction, b.quick_cost_fraction);
  d.pus = a.pus;
  const auto make_a = a.make, make_b = b.make;
  const std::string ka = strip(a), kb = strip(b);
  const std::string duet_key = RowKey("duet", d.params, 0);
  d.make = [make_a, make_b, ka, kb, duet_key](const PointEnv& env) {
    // A fresh order for every repetition of every point, reproducible from
    // the key and the repetition's sequence number within the process.
    static std::map<std::string, uint64_t> repetition;
    const uint64_t seed =
        std::hash<std::string>{}(duet_key)*0x9E3779B97F4A7C15ull +
        static_cast<uint64_t>(env.threads) * 1000003ull +
        repetition[duet_key + std::to_string(env.threads)]++;
    // The harness's plan (PointEnv::windows = 2 x (warm-up + pairs)).
    const int pairs = env.windows >= 2 * (kWarmupPairs + 1)
                          ? env.windows / 2 - kWarmupPairs
                          : kPairs;
    return std::make_unique<DuetWorkload>(
        make_a(env), make_b(env), DuetSchedule(kWarmupPairs, pairs, seed), ka,
        kb);
  };
  return d;
}

/// The pairs of `spec` among `candidates` (variants of one suite tier): per
/// group_by value, the candidate matching most of `prefer` (ties: the first in
/// key order), mirroring plots/verdicts.py find_pairs.
std::vector<std::pair<const Variant*, const Variant*>> FindPairs(
    const DuetSpec& spec, const std::vector<const Variant*>& candidates) {
  std::map<std::string, const Variant*> by_key;
  for (const Variant* v : candidates)
    by_key[RowKey(spec.family, v->params, 0)] = v;
  std::map<std::string, std::vector<std::pair<int, std::string>>> groups;
  for (const auto& [key, v] : by_key) {
    if (ParamOf(v->params, spec.param, spec.absent) != spec.a) continue;
    const std::string other =
        RowKey(spec.family, WithParam(v->params, spec.param, spec.b), 0);
    if (!by_key.count(other)) continue;
    bool fits = true;
    for (const auto& [k, val] : KeyValues(spec.only))
      fits = fits && ParamOf(v->params, k) == val;
    if (!fits) continue;
    std::string group;
    for (const auto& g : Split(spec.group_by))
      group += ParamOf(v->params, g) + "/";
    int score = 0;
    // A pair of stats:off twins wins first where the spec prefers them, as
    // verdicts.py find_pairs chooses the twins of questions 000-003.
    for (const auto& [k, val] : KeyValues(spec.prefer))
      if (ParamOf(v->params, k) == val)
        score += k == "stats" && val == "off" ? 1000 : 1;
    groups[group].push_back({-score, key});
  }
  std::vector<std::pair<const Variant*, const Variant*>> out;
  for (auto& [group, list] : groups) {
    std::sort(list.begin(), list.end());
    const Variant* a = by_key[list.front().second];
    const Variant* b = by_key[RowKey(
        spec.family, WithParam(a->params, spec.param, spec.b), 0)];
    out.push_back({a, b});
  }
  return out;
}

std::vector<Variant> DuetVariants(const std::vector<PuInfo>& order) {
  // Every other family's variants, as the run would plan them.
  std::map<std::string, std::vector<Variant>> all;
  for (const Family& fam : Families()) {
    if (fam.name == "duet") continue;
    all[fam.name] =
        fam.planned_variants ? fam.planned_variants(order) : fam.variants();
  }
  std::vector<Variant> out;
  std::map<std::string, bool> emitted;
  for (const DuetSpec& spec : Specs()) {
    auto it = all.find(spec.family);
    if (it == all.end()) continue;
    // Two tiers: what a --quick run has (suite quick, including quick-only
    // stand-ins), and what a default run has (suite <= default, none
    // quick-only); a pair found in both is one duet of suite quick.
    for (const Suite tier : {Suite::kQuick, Suite::kDefault, Suite::kFull}) {
      std::vector<const Variant*> candidates;
      for (const Variant& v : it->second) {
        const bool in_tier =
            tier == Suite::kQuick
                ? v.suite == Suite::kQuick
                : static_cast<int>(v.suite) <= static_cast<int>(tier) &&
                      !v.quick_only;
        if (in_tier) candidates.push_back(&v);
      }
      for (const auto& [a, b] : FindPairs(spec, candidates)) {
        const Suite suite = static_cast<Suite>(
            std::max({static_cast<int>(tier), static_cast<int>(spec.suite),
                      static_cast<int>(a->suite), static_cast<int>(b->suite)}));
        Variant d = MakeDuet(spec, *a, *b, suite);
        const std::string key = RowKey("duet", d.params, 0);
        if (emitted.count(key)) continue;
        emitted[key] = true;
        out.push_back(std::move(d));
      }
    }
  }
  return out;
}

LOCKLINE_REGISTER_FAMILY(Family{
    "duet",
    "the seed comparisons as paired windows: two variants of one family "
    "alternating window by window on one thread team (harness/measure/duet.h)",
    nullptr, DuetVariants});

}  // namespace
}  // namespace lockline
