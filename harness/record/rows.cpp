#include "harness/record/rows.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace lockline {
namespace {

using nlohmann::json;

/// Numeric top-level row keys that are not metrics.
const std::set<std::string>& NotMetrics() {
  static const std::set<std::string> keys = {
      "family_index", "per_family_instance_index",
      "repetitions",  "repetition_index",
      "threads",      "iterations",
      "real_time",    "cpu_time",
      "resolve_round"};
  return keys;
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

double MedianOf(const std::vector<double>& values) {
  if (values.empty()) return 0;
  std::vector<double> v = values;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Sample standard deviation (n - 1), as Google Benchmark's StatisticsStdDev.
double StdDev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = Mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

double Cv(const std::vector<double>& v) {
  const double m = Mean(v);
  return m != 0 ? StdDev(v) / m : 0;
}

bool IsRepetitionOf(const json& row, const std::string& key) {
  return row.value("run_type", "") == "iteration" &&
         row.value("lockline_key", "") == key &&
         !row.value("error_occurred", false);
}

bool IsAggregateOf(const json& row, const std::string& key) {
  return row.value("run_type", "") == "aggregate" &&
         row.value("lockline_key", "") == key;
}

std::vector<json> AggregateRows(const json& doc, const std::string& key) {
  std::vector<const json*> reps;
  for (const json& row : doc["benchmarks"])
    if (IsRepetitionOf(row, key)) reps.push_back(&row);
  if (reps.size() < 2) return {};
  const json& first = *reps.front();

  // Values per field, in the order the first row lists them.
  std::vector<std::string> fields = {"real_time", "cpu_time"};
  for (const auto& [k, v] : first.items())
    if (v.is_number() && !NotMetrics().count(k)) fields.push_back(k);
  std::map<std::string, std::vector<double>> values;
  std::vector<double> ops;
  for (const json* r : reps) {
    for (const std::string& f : fields)
      if (r->contains(f) && (*r)[f].is_number())
        values[f].push_back((*r)[f].get<double>());
    ops.push_back(r->value("iterations", 0.0));
  }

  const std::string run_name = first.value("run_name", key);
  struct Stat {
    const char* name;
    double (*fn)(const std::vector<double>&);
    const char* unit;
  };
  static const Stat kStats[] = {{"mean", Mean, "time"},
                                {"median", MedianOf, "time"},
                                {"stddev", StdDev, "time"},
                                {"cv", Cv, "percentage"}};
  std::vector<json> out;
  for (const Stat& s : kStats) {
    json row = {{"name", run_name + "_" + s.name}};
    for (const char* k : {"family_index", "per_family_instance_index"})
      if (first.contains(k)) row[k] = first[k];
    row["run_name"] = run_name;
    row["run_type"] = "aggregate";
    row["repetitions"] = reps.size();
    row["threads"] = first.value("threads", 1);
    row["aggregate_name"] = s.name;
    row["aggregate_unit"] = s.unit;
    row["iterations"] = static_cast<uint64_t>(std::llround(Mean(ops)));
    for (const std::string& f : fields)
      if (values.count(f)) row[f] = s.fn(values[f]);
    row["time_unit"] = first.value("time_unit", "ns");
    for (const char* k : {"lockline_key", "family", "params", "emulated"})
      if (first.contains(k)) row[k] = first[k];
    row["error_occurred"] = false;
    row["error_message"] = "";
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace

void SetPerOpTimes(json& row, double wall_seconds, double cpu_seconds,
                   uint64_t ops) {
  const double n = static_cast<double>(ops);
  row["iterations"] = ops;
  row["real_time"] = ops ? wall_seconds * 1e9 / n : 0.0;
  row["cpu_time"] = ops ? cpu_seconds * 1e9 / n : 0.0;
  row["time_unit"] = "ns";
}

std::vector<size_t> UpdateAggregates(json& doc, const std::string& key) {
  std::vector<json> fresh = AggregateRows(doc, key);
  json& rows = doc["benchmarks"];
  std::vector<size_t> replaced;
  size_t next = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    if (IsAggregateOf(rows[i], key) && next < fresh.size()) {
      rows[i] = std::move(fresh[next++]);
      replaced.push_back(i);
    }
  for (; next < fresh.size(); ++next) rows.push_back(std::move(fresh[next]));
  return replaced;
}

}  // namespace lockline
