// A row's perf counters: readings, their sums and the derived metrics.
#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "harness/measure/counters.h"

namespace lockline {

CounterReading ClassifyReading(const std::string& name, uint64_t raw,
                               uint64_t time_enabled_ns,
                               uint64_t time_running_ns, bool zero_is_error) {
  CounterReading r;
  r.name = name;
  r.raw = raw;
  r.time_enabled_ns = time_enabled_ns;
  r.time_running_ns = time_running_ns;
  if (time_running_ns == 0) {
    r.status = "unavailable";
    r.reason = time_enabled_ns == 0
                   ? "not counted (time_running 0: no window since Reset)"
                   : "not counted (time_running 0: never scheduled on the PMU)";
  } else if (zero_is_error && raw == 0) {
    r.status = "unavailable";
    r.reason =
        "counted 0 over a window with time_running > 0: impossible for " +
        name + " in user mode, the (virtual) PMU is not really counting";
  } else if (time_running_ns >= time_enabled_ns) {
    r.status = "measured";
    r.value = static_cast<double>(raw);
  } else {
    r.status = "scaled";
    r.value = static_cast<double>(raw) * static_cast<double>(time_enabled_ns) /
              static_cast<double>(time_running_ns);
  }
  return r;
}

std::vector<CounterReading> SumReadings(
    const std::vector<std::vector<CounterReading>>& per_thread) {
  if (per_thread.empty()) return {};
  auto rank = [](const std::string& status) {
    return status == "unavailable" ? 2 : status == "scaled" ? 1 : 0;
  };
  std::vector<CounterReading> sum = per_thread[0];
  for (size_t t = 1; t < per_thread.size(); ++t) {
    if (per_thread[t].size() != sum.size())
      throw std::invalid_argument(
          "SumReadings: threads read different numbers of events");
    for (size_t i = 0; i < sum.size(); ++i) {
      const CounterReading& r = per_thread[t][i];
      if (r.name != sum[i].name)
        throw std::invalid_argument("SumReadings: event " + r.name + " vs " +
                                    sum[i].name);
      sum[i].value += r.value;
      sum[i].raw += r.raw;
      sum[i].time_enabled_ns += r.time_enabled_ns;
      sum[i].time_running_ns += r.time_running_ns;
      if (rank(r.status) > rank(sum[i].status)) {
        sum[i].status = r.status;
        sum[i].reason = r.reason;
      }
    }
  }
  return sum;
}

namespace {

using nlohmann::json;

// The first reading `pred` accepts with modifiers `mods` ("*": any), or null.
template <typename Pred>
const CounterReading* FindReading(const std::vector<CounterReading>& sum,
                                  Pred pred, const std::string& mods) {
  for (const CounterReading& r : sum)
    if (pred(r.name) && (mods == "*" || EventModifiers(r.name) == mods))
      return &r;
  return nullptr;
}

// A name predicate: the event's base name is one of `names` (lower case).
auto Named(std::initializer_list<const char*> names) {
  return [names](const std::string& n) {
    return std::find(names.begin(), names.end(), EventBaseName(n)) !=
           names.end();
  };
}

// The derived metrics of a row, each num / den (den nullptr: num / ops).
struct Derived {
  const uint64_t ops;
  CounterRow& row;
  json out = json::object();

  // One metric; `missing` says which event was not requested.
  void Put(const std::string& metric, const CounterReading* num,
           const CounterReading* den, bool per_operation,
           const std::string& missing) {
    json d = {{"status", "unavailable"}, {"value", nullptr}};
    const CounterReading* lost = nullptr;
    for (const CounterReading* r : {num, den})
      if (r != nullptr && r->status == "unavailable" && lost == nullptr)
        lost = r;
    if (!missing.empty()) {
      d["reason"] = missing;
    } else if (lost != nullptr) {
      d["reason"] = lost->name + " unavailable: " + lost->reason;
    } else if (den != nullptr && den->value <= 0) {
      d["reason"] = den->name + " counted 0";
    } else if (per_operation && ops == 0) {
      d["reason"] = "no operations counted";
    } else {
      const double v =
          num->value / (den != nullptr ? den->value : static_cast<double>(ops));
      const bool scaled = num->status == "scaled" ||
                          (den != nullptr && den->status == "scaled");
      d = {{"status", scaled ? "scaled" : "measured"}, {"value", v}};
      // An event literally named "cache-misses" already gave this metric.
      const bool have =
          std::any_of(row.metrics.begin(), row.metrics.end(),
                      [&](const auto& m) { return m.first == metric; });
      if (!have) row.metrics.emplace_back(metric, v);
    }
    out[metric] = std::move(d);
  }
};

// IPC, cache-misses/op and hitm/op from the first requested event of each
// kind (cycles counted like the instructions, when there is such a one).
json DerivedMetrics(const std::vector<CounterReading>& sum, uint64_t ops,
                    CounterRow& row) {
  Derived d{ops, row};
  const CounterReading* instr = FindReading(sum, Named({"instructions"}), "*");
  const CounterReading* cyc =
      instr != nullptr ? FindReading(sum, Named({"cycles", "cpu-cycles"}),
                                     EventModifiers(instr->name))
                       : nullptr;
  if (cyc == nullptr)
    cyc = FindReading(sum, Named({"cycles", "cpu-cycles"}), "*");
  d.Put("IPC", instr, cyc, false,
        instr == nullptr ? "instructions not requested (--events)"
        : cyc == nullptr ? "cycles not requested (--events)"
                         : "");
  const CounterReading* misses = FindReading(sum, Named({"cache-misses"}), "*");
  d.Put("cache-misses/op", misses, nullptr, true,
        misses == nullptr ? "cache-misses not requested (--events)" : "");
  const CounterReading* hitm = FindReading(
      sum,
      [](const std::string& n) {
        std::string u = n;
        for (char& c : u)
          c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return u.find("hitm") != std::string::npos ||
               u.find("xsnp_fwd") != std::string::npos;
      },
      "*");
  d.Put("hitm/op", hitm, nullptr, true,
        hitm == nullptr
            ? "no HITM-type event requested (e.g. --events=default,hitm)"
            : "");
  return d.out;
}

}  // namespace

CounterRow CountersForRow(
    const std::vector<std::vector<CounterReading>>& per_thread, uint64_t ops) {
  CounterRow row;
  json status = json::object(), per_op = json::object(),
       scaling = json::object(), threads = json::array();
  for (const auto& readings : per_thread) {
    json t = json::object();
    for (const CounterReading& r : readings)
      t[r.name] = r.status == "unavailable" ? json() : json(r.value);
    threads.push_back(std::move(t));
  }
  std::vector<CounterReading> sum;
  try {
    sum = SumReadings(per_thread);
  } catch (const std::invalid_argument&) {
    sum.clear();  // threads disagree: cannot happen with one session
  }
  for (const CounterReading& r : sum) {
    status[r.name] = r.status;
    if (r.status == "unavailable") {
      status[r.name + ":reason"] = r.reason;
      continue;
    }
    if (r.status == "scaled")
      scaling[r.name] = static_cast<double>(r.time_enabled_ns) /
                        static_cast<double>(r.time_running_ns);
    const double v = ops ? r.value / static_cast<double>(ops) : 0;
    per_op[r.name] = v;
    row.metrics.emplace_back(r.name + "/op", v);
  }
  const json derived = DerivedMetrics(sum, ops, row);
  row.counters = {{"per_op", per_op},
                  {"status", status},
                  {"scaling", scaling},
                  {"derived", derived},
                  {"per_thread", threads}};
  return row;
}

}  // namespace lockline
