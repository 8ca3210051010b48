// Coherence regimes on synthetic probe latencies (harness/measure/coherence.h),
// the per-operation Google Benchmark times and lockline's aggregates on
// synthetic rows (harness/record/rows.h), and the verdicts.json reader of
// --until-resolved (harness/run/until_resolved.h). No timing: every input is
// made up.
#include "harness/measure/coherence.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "harness/record/rows.h"
#include "harness/run/until_resolved.h"

namespace lockline {
namespace {

using nlohmann::json;

// `n` latencies around `ns` with +-`jitter` relative uniform noise.
std::vector<double> Jittered(double ns, int n, double jitter, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(1 - jitter, 1 + jitter);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(ns * u(rng));
  return v;
}

TEST(CoherenceRegimes, TwoRegimesAreNearAndFarWhateverCameFirst) {
  for (const bool far_first : {true, false}) {
    std::vector<double> near = Jittered(32, 40, 0.1, 1);
    std::vector<double> far = Jittered(156, 30, 0.1, 2);
    std::vector<double> all = far_first ? far : near;
    const std::vector<double>& second = far_first ? near : far;
    all.insert(all.end(), second.begin(), second.end());
    const auto rs = ClusterLatencies(all);
    ASSERT_EQ(rs.size(), 2u) << "far first: " << far_first;
    EXPECT_EQ(rs[0].label, "near");
    EXPECT_EQ(rs[1].label, "far");
    EXPECT_EQ(rs[0].rank, 1);
    EXPECT_EQ(rs[1].rank, 2);
    EXPECT_NEAR(rs[0].ns, 32, 4);
    EXPECT_NEAR(rs[1].ns, 156, 16);
    EXPECT_EQ(rs[0].probes, 40);
    EXPECT_EQ(rs[1].probes, 30);
    for (double v : near) EXPECT_EQ(ClassifyLatency(rs, v), 0) << v;
    for (double v : far) EXPECT_EQ(ClassifyLatency(rs, v), 1) << v;
  }
}

TEST(CoherenceRegimes, OneRegimeIsAllNear) {
  const auto rs = ClusterLatencies(Jittered(32, 50, 0.12, 3));
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].label, "near");
  EXPECT_NEAR(rs[0].ns, 32, 4);
  EXPECT_EQ(ClassifyLatency(rs, 20), 0);
  EXPECT_EQ(ClassifyLatency(rs, 60), 0);
  EXPECT_EQ(ClassifyLatency(rs, 0), -1);
  EXPECT_TRUE(ClusterLatencies({}).empty());
  EXPECT_EQ(ClusterLatencies({25.0}).size(), 1u);
}

TEST(CoherenceRegimes, BriefFastOutlierDoesNotMakeUsualPointsFar) {
  // A start-of-run baseline from a brief fastest placement (16 ns, twice)
  // among the usual 32 ns probes.
  std::vector<double> v = {16.2, 15.9};
  for (double x : Jittered(32, 60, 0.1, 4)) v.push_back(x);
  const auto rs = ClusterLatencies(v);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].label, "near");
  EXPECT_NEAR(rs[0].ns, 32, 4);
  EXPECT_EQ(ClassifyLatency(rs, 32), 0);
  EXPECT_EQ(ClassifyLatency(rs, 16), 0);
}

TEST(CoherenceRegimes, ThirdRegimeAndBriefSlowState) {
  std::vector<double> v = Jittered(32, 30, 0.1, 5);
  for (double x : Jittered(156, 30, 0.1, 6)) v.push_back(x);
  for (double x : Jittered(600, 20, 0.1, 7)) v.push_back(x);
  auto rs = ClusterLatencies(v);
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[2].label, "regime3");
  // A slow state seen briefly (one point's two probes) stays its own regime
  // (a far point is not near); one slow probe alone (preempted) does not.
  v = Jittered(32, 60, 0.1, 8);
  v.push_back(150);
  rs = ClusterLatencies(v);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(ClassifyLatency(rs, 150), 0);
  v.push_back(160);
  rs = ClusterLatencies(v);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(ClassifyLatency(rs, 150), 1);
  EXPECT_EQ(ClassifyLatency(rs, 160), 1);
}

// A lockline.json document with a baseline of three 16 ns probes (a brief
// fastest placement at start) and rows probed at 32 ns and 156 ns.
json Document() {
  json doc = {{"context",
               {{"lockline",
                 {{"coherence_baseline",
                   {{{"pus", {0, 1}},
                     {"ns", 16.1},
                     {"probes_ns", {16.0, 16.1, 16.3}}}}}}}}},
              {"benchmarks", json::array()}};
  const auto row = [](double before, double after, bool shares = true,
                      json pair = {0, 1}) {
    return json{{"run_type", "iteration"},
                {"coherence",
                 {{"label", "unknown"},
                  {"shares_lines", shares},
                  {"pair", pair},
                  {"before_ns", before},
                  {"after_ns", after}}}};
  };
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> j(0.92, 1.08);
  for (int i = 0; i < 20; ++i)
    doc["benchmarks"].push_back(row(32 * j(rng), 32 * j(rng)));
  for (int i = 0; i < 10; ++i)
    doc["benchmarks"].push_back(row(156 * j(rng), 156 * j(rng)));
  doc["benchmarks"].push_back(row(32, 158));               // 30: mixed
  doc["benchmarks"].push_back(row(0, 0, false, nullptr));  // 31: no line
  doc["benchmarks"].push_back(row(0, 0, true, nullptr));   // 32: 1 thread
  return doc;
}

// A calibration c2c point at 150 ns makes the 156 ns regime "far 156 ns
// (matches c2c:0-1 150 ns)", so two runs' regimes can be told apart by what
// they match, not by their rank.
TEST(CoherenceRelabel, RegimeNameSaysNsAndMatchedClass) {
  json doc = Document();
  for (double ns : {149.0, 150.0, 151.0})
    doc["benchmarks"].push_back(
        {{"run_type", "iteration"},
         {"params", {{"c2c", "pingpong"}, {"pu_a", "0"}, {"pu_b", "1"}}},
         {"latency_ns", ns}});
  RelabelCoherence(doc);
  const json& far = doc["benchmarks"][20]["coherence"];
  ASSERT_EQ(far["label"], "far");
  EXPECT_EQ(far["matches"], "c2c:0-1");
  EXPECT_NE(
      far["regime_name"].get<std::string>().find("matches c2c:0-1 150 ns"),
      std::string::npos)
      << far["regime_name"];
  const json& regimes = doc["context"]["lockline"]["coherence_regimes"][0];
  EXPECT_EQ(regimes["regimes"][1]["matches"], "c2c:0-1");
  EXPECT_TRUE(regimes["regimes"][0]["matches"].is_null());
}

TEST(CoherenceRelabel, LabelsNameTheRegimeNotTheStartState) {
  json doc = Document();
  RelabelCoherence(doc);
  const json& rows = doc["benchmarks"];
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(rows[i]["coherence"]["label"], "near") << i;
    EXPECT_EQ(rows[i]["coherence"]["regime"], 1);
    EXPECT_NEAR(rows[i]["coherence"]["regime_ns"].get<double>(), 32, 3);
  }
  for (int i = 20; i < 30; ++i) {
    EXPECT_EQ(rows[i]["coherence"]["label"], "far") << i;
    EXPECT_NEAR(rows[i]["coherence"]["regime_ns"].get<double>(), 156, 12);
  }
  EXPECT_EQ(rows[30]["coherence"]["label"], "mixed");
  EXPECT_TRUE(rows[30]["coherence"]["regime"].is_null());
  EXPECT_EQ(rows[30]["coherence"]["probe_labels"], json({"near", "far"}));
  EXPECT_EQ(rows[31]["coherence"]["label"], "none");
  EXPECT_EQ(rows[32]["coherence"]["label"], "unknown");
  const json& regimes = doc["context"]["lockline"]["coherence_regimes"];
  ASSERT_EQ(regimes.size(), 1u);
  EXPECT_EQ(regimes[0]["regimes"].size(), 2u);
  // The label says what it is: the regime's ns and the measured class it
  // matches (none: the start-of-run probes were 16 ns, 2x away).
  EXPECT_EQ(
      rows[0]["coherence"]["regime_name"].get<std::string>().rfind("near 3", 0),
      0u)
      << rows[0]["coherence"]["regime_name"];
  EXPECT_TRUE(rows[0]["coherence"]["matches"].is_null());
  EXPECT_TRUE(rows[30]["coherence"]["regime_name"].is_null());
  // Relabelling is idempotent.
  json again = doc;
  RelabelCoherence(again);
  EXPECT_EQ(again, doc);
}

// Issue 49: a starved run's probes of 6.6 ms timed the scheduler. Rows
// probed then are `preempted` (no regime) and the probes form no regime.
TEST(CoherenceRelabel, APreemptedProbeIsNoRegime) {
  json doc = Document();
  for (int i = 0; i < 4; ++i) {
    json row = doc["benchmarks"][0];
    row["coherence"]["before_ns"] = 6.6e6;
    row["coherence"]["after_ns"] = i < 2 ? 6.6e6 : 32.0;
    doc["benchmarks"].push_back(row);
  }
  RelabelCoherence(doc);
  const json& rows = doc["benchmarks"];
  for (size_t i = 33; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["coherence"]["label"], "preempted") << i;
    EXPECT_TRUE(rows[i]["coherence"]["regime"].is_null());
  }
  EXPECT_EQ(rows[0]["coherence"]["label"], "near");
  EXPECT_EQ(
      doc["context"]["lockline"]["coherence_regimes"][0]["regimes"].size(), 2u);
}

// A run relabels after every repetition with a RegimeCache (only the rows
// appended are read; labelled rows are skipped while the regimes stand): the
// rows and regimes it ends with are those one relabelling of the whole file
// gives, whichever order the regimes appeared in, c2c aggregates left out.
TEST(CoherenceRelabel, IncrementalRelabellingMatchesOneOverTheWholeFile) {
  const json whole = Document();
  json grown = whole;
  grown["benchmarks"] = json::array();
  RegimeCache cache;
  std::vector<size_t> order(whole["benchmarks"].size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(3));
  json expected = whole;
  expected["benchmarks"] = json::array();
  for (size_t k = 0; k < order.size(); ++k) {
    const json& row = whole["benchmarks"][order[k]];
    grown["benchmarks"].push_back(row);
    expected["benchmarks"].push_back(row);
    if (k == 5) {  // a c2c point, and its aggregate (no latency of a pair)
      for (const char* type : {"iteration", "aggregate"}) {
        const json c2c = {
            {"run_type", type},
            {"params", {{"c2c", "pingpong"}, {"pu_a", "0"}, {"pu_b", "1"}}},
            {"latency_ns", type == std::string("iteration") ? 150.0 : 3.0}};
        grown["benchmarks"].push_back(c2c);
        expected["benchmarks"].push_back(c2c);
      }
    }
    RelabelCoherence(grown, &cache);
  }
  RelabelCoherence(expected);
  EXPECT_EQ(grown, expected);
  EXPECT_EQ(cache.rows_read, expected["benchmarks"].size());
  EXPECT_EQ(cache.c2c.at("c2c:0-1"), std::vector<double>{150.0});
}

// Synthetic repetitions: ticket at 2.3 ns/op and MCS at 4.4 ns/op of wall time
// (50 ms windows x 3, 2 threads), with a little spread.
json Rows() {
  json doc = {{"benchmarks", json::array()}};
  const auto add = [&](const std::string& lock, double ns_per_op, int rep,
                       double wobble) {
    const std::string key = "locks/lock:" + lock + "/cs:0/stats:off/threads:2";
    const double seconds = 0.15;
    const uint64_t ops =
        static_cast<uint64_t>(seconds * 1e9 / (ns_per_op * wobble));
    json row = {{"name", key + "/manual_time"},
                {"run_name", key + "/manual_time"},
                {"run_type", "iteration"},
                {"repetitions", 3},
                {"repetition_index", rep},
                {"threads", 2},
                {"lockline_key", key},
                {"family", "locks"},
                {"ops_per_s", static_cast<double>(ops) / seconds},
                {"ns_per_op", seconds * 2 * 1e9 / static_cast<double>(ops)},
                {"fairness", {{"cv", 0.1}}},
                {"overrun", false},
                {"error_occurred", false}};
    SetPerOpTimes(row, seconds, 2 * seconds * 0.99, ops);
    doc["benchmarks"].push_back(row);
  };
  const double wobble[] = {1.0, 0.98, 1.03};
  for (int r = 0; r < 3; ++r) {
    add("ticket", 2.3, r, wobble[r]);
    add("mcs", 4.4, r, wobble[r]);
  }
  return doc;
}

TEST(Rows, RealTimeIsWallNsPerOperation) {
  const json doc = Rows();
  const json& ticket = doc["benchmarks"][0];
  const json& mcs = doc["benchmarks"][1];
  EXPECT_EQ(ticket["time_unit"], "ns");
  EXPECT_NEAR(ticket["real_time"].get<double>(), 2.3, 1e-3);
  EXPECT_NEAR(mcs["real_time"].get<double>(), 4.4, 1e-3);
  EXPECT_NEAR(
      ticket["real_time"].get<double>() * ticket["ops_per_s"].get<double>(),
      1e9, 1);
  // Google's compare.py: (new - old) / old of real_time is the inverse
  // throughput ratio minus 1: +91 % for ticket -> MCS, not +0.1 %.
  const double change =
      (mcs["real_time"].get<double>() - ticket["real_time"].get<double>()) /
      ticket["real_time"].get<double>();
  EXPECT_NEAR(change, 4.4 / 2.3 - 1, 1e-3);
  EXPECT_NEAR(ticket["cpu_time"].get<double>(), 2 * 0.99 * 2.3, 1e-2);
  EXPECT_EQ(ticket["iterations"].get<uint64_t>(),
            static_cast<uint64_t>(0.15e9 / 2.3));
  json zero;
  SetPerOpTimes(zero, 0.1, 0.2, 0);
  EXPECT_EQ(zero["real_time"], 0.0);
  EXPECT_EQ(zero["iterations"], 0);
}

TEST(Rows, AggregatesAreGoogleShapedWithCvAsRatio) {
  json doc = Rows();
  const std::string key = "locks/lock:ticket/cs:0/stats:off/threads:2";
  UpdateAggregates(doc, key);
  std::vector<json> agg;
  for (const json& r : doc["benchmarks"])
    if (r["run_type"] == "aggregate") agg.push_back(r);
  ASSERT_EQ(agg.size(), 4u);
  EXPECT_EQ(agg[0]["name"], key + "/manual_time_mean");
  EXPECT_EQ(agg[3]["aggregate_name"], "cv");
  EXPECT_EQ(agg[3]["aggregate_unit"], "percentage");
  std::vector<double> rt;
  for (const json& r : doc["benchmarks"])
    if (r["run_type"] == "iteration" && r["lockline_key"] == key)
      rt.push_back(r["real_time"].get<double>());
  const double mean = (rt[0] + rt[1] + rt[2]) / 3;
  double ss = 0;
  for (double x : rt) ss += (x - mean) * (x - mean);
  const double sd = std::sqrt(ss / 2);
  EXPECT_NEAR(agg[0]["real_time"].get<double>(), mean, 1e-9);
  EXPECT_NEAR(agg[1]["real_time"].get<double>(), rt[0], 1e-9);  // the median
  EXPECT_NEAR(agg[2]["real_time"].get<double>(), sd, 1e-9);
  EXPECT_NEAR(agg[3]["real_time"].get<double>(), sd / mean, 1e-9);
  EXPECT_LT(agg[3]["ops_per_s"].get<double>(), 0.1);  // a ratio, not percent
  // The workers' CPU time, per operation.
  EXPECT_NEAR(agg[0]["cpu_time"].get<double>(), 2 * 0.99 * mean, 1e-6);
  EXPECT_EQ(agg[0]["repetitions"], 3);
  EXPECT_FALSE(agg[0].contains("fairness"));
  // More repetitions: the aggregates are rewritten in place, not duplicated.
  json extra = doc["benchmarks"][0];
  extra["repetition_index"] = 3;
  extra["resolve_round"] = 1;
  doc["benchmarks"].push_back(extra);
  const size_t size = doc["benchmarks"].size();
  UpdateAggregates(doc, key);
  EXPECT_EQ(doc["benchmarks"].size(), size);
  int aggregates = 0;
  for (const json& r : doc["benchmarks"])
    if (r["run_type"] == "aggregate") {
      ++aggregates;
      EXPECT_EQ(r["repetitions"], 4);
      EXPECT_FALSE(r.contains("resolve_round"));
    }
  EXPECT_EQ(aggregates, 4);
}

TEST(UntilResolved, ReadsOpenComparisonsKeys) {
  const std::string path =
      ::testing::TempDir() + "/verdicts_" + std::to_string(getpid()) + ".json";
  {
    std::ofstream out(path);
    out << R"({"schema": 1, "min_effect": 0.05, "verdicts": [
      {"question": "001", "base_key": "a/threads:2", "variant_key": "b/threads:2", "resolved": true},
      {"question": "001", "base_key": "a/threads:2", "variant_key": "c/threads:2", "resolved": false},
      {"question": "002", "base_key": "d/threads:2", "variant_key": "c/threads:2", "resolved": false,
       "status": "too_few"}]})";
  }
  const VerdictSummary s = ReadVerdicts(path);
  EXPECT_EQ(s.total, 3);
  EXPECT_EQ(s.open, 2);
  EXPECT_EQ(s.keys, (std::vector<std::string>{"a/threads:2", "c/threads:2",
                                              "d/threads:2"}));
  // A comparison resolved at an earlier look stays resolved: the stricter
  // look after a round that gave it nothing must not reopen it.
  {
    std::ofstream out(path);
    out << R"({"schema": 1, "verdicts": [
      {"id": "x", "base_key": "a/threads:2", "variant_key": "b/threads:2", "resolved": true},
      {"id": "y", "base_key": "a/threads:2", "variant_key": "c/threads:2", "resolved": false}]})";
  }
  std::set<std::string> stopped;
  EXPECT_EQ(ReadVerdicts(path, &stopped).open, 1);
  EXPECT_EQ(stopped, (std::set<std::string>{"x"}));
  {
    std::ofstream out(path);
    out << R"({"schema": 1, "verdicts": [
      {"id": "x", "base_key": "a/threads:2", "variant_key": "b/threads:2", "resolved": false},
      {"id": "y", "base_key": "a/threads:2", "variant_key": "c/threads:2", "resolved": false}]})";
  }
  const VerdictSummary later = ReadVerdicts(path, &stopped);
  EXPECT_EQ(later.open, 1);
  EXPECT_EQ(later.keys,
            (std::vector<std::string>{"a/threads:2", "c/threads:2"}));
  EXPECT_EQ(ReadVerdicts(path).open, 2);
  {
    std::ofstream out(path);
    out << "{\"schema\": 1}";
  }
  EXPECT_THROW(ReadVerdicts(path), std::runtime_error);
  std::filesystem::remove(path);
  EXPECT_THROW(ReadVerdicts(path), std::runtime_error);
}

}  // namespace
}  // namespace lockline

namespace lockline {
namespace {

// Issue 49: an extra round gives repetitions where a comparison's regime
// lacks them. Paired "d" has 3 far of 5 (needs 8 units); unpaired a/b: a has
// 5 far, b 2 far of 5, so b gets the repetitions; resolved-looking wide
// comparison c is the dearest and funded last.
TEST(UntilResolved, PlanRoundGivesRepetitionsWhereTheRegimeLacksThem) {
  const std::string dir =
      ::testing::TempDir() + "/plan_round_" + std::to_string(getpid());
  RunState run;
  run.opts.repetitions = 5;
  run.results = std::make_unique<ResultFile>(dir);
  const auto add = [&](const std::string& key, const char* label) {
    run.results->AddRow({{"run_type", "iteration"},
                         {"lockline_key", key},
                         {"error_occurred", false},
                         {"timing", {{"wall_s", 0.1}, {"gap_s", 0.0}}},
                         {"coherence", {{"label", label}}}});
  };
  for (int i = 0; i < 5; ++i) {
    add("a", "far");
    add("b", i < 2 ? "far" : "near");
    add("d", i < 3 ? "far" : "near");
  }
  for (const char* k : {"a", "b", "d"}) {
    Point p;
    p.key = k;
    run.points.push_back(p);
  }
  for (const Point& p : run.points) run.by_key[p.key] = &p;
  VerdictSummary v;
  v.comparisons.push_back({{"a", "b"}, "far", NAN, NAN, NAN});
  v.comparisons.push_back({{"d"}, "far", 0.0, -0.08, 0.08});
  const auto round = PlanRound(run, v, 100);
  std::map<std::string, int> got;
  for (const auto& [p, n] : round) got[p->key] = n;
  // a: 8 units wanted, 5 there, share 6/7: 4; b: 6 more at 3/7: 14.
  EXPECT_EQ(got["a"], 4);
  EXPECT_EQ(got["b"], 14);
  // d: 3 units at -8 % need 3 (1.25 x 0.0834 / 0.9 / 0.0488)^2 = 16.9, at
  // share 4/7: 25 more.
  EXPECT_EQ(got["d"], 25);
  // Little time: the cheapest comparison (a/b) alone, scaled down.
  const auto short_round = PlanRound(run, v, 1);
  ASSERT_EQ(short_round.size(), 2u);
  EXPECT_EQ(short_round[0].first->key, "a");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockline
