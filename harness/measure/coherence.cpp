// Coherence regimes (see coherence.h).
#include "harness/measure/coherence.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <utility>

namespace lockline {
namespace {

using nlohmann::json;

/// Kernel bandwidth in ln(ns): probes within ~15 % of each other are one state.
const double kBandwidth = std::log(1.15);
/// Modes closer than this ratio are one regime.
const double kMinModeGap = std::log(1.4);
/// Modes whose valley is above this share of the smaller peak are one regime.
constexpr double kValleyShare = 0.5;
/// A cluster with this share of the probes (and kMinProbes) is a regime.
constexpr double kMinShare = 0.05;
constexpr int kMinProbes = 2;
/// Density grid: bins per bandwidth, kernel cut-off in bandwidths.
constexpr int kBinsPerBandwidth = 4;
constexpr int kKernelBandwidths = 4;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double ProbeValue(const json& j) {
  return j.is_number() ? j.get<double>() : 0.0;
}

// A probe that times a cache line's transfer (0 for one that did not).
double LineProbe(const json& j) {
  const double ns = ProbeValue(j);
  return ns > kPreemptedProbeNs ? 0.0 : ns;
}

// context.lockline.coherence_baseline (the start-of-run probes), else [].
json Baselines(const json* ctx) {
  if (ctx && ctx->contains("coherence_baseline") &&
      (*ctx)["coherence_baseline"].is_array())
    return (*ctx)["coherence_baseline"];
  return json::array();
}

/// A core-to-core class measured in the run: a PU pair's latency.
struct MeasuredClass {
  std::string name;  ///< "start_of_run:0-1" or "c2c:0-64"
  double ns = 0;     ///< median one-way latency, ns
};

/// A c2c:pingpong calibration repetition's latency, under "c2c:A-B" in `c2c`
/// (not its aggregates: a stddev row's latency_ns is no latency).
void AddC2cLatency(const json& row,
                   std::map<std::string, std::vector<double>>& c2c) {
  if (!row.is_object() || row.value("run_type", "") == "aggregate") return;
  const auto params = row.find("params");
  if (params == row.end() || !params->is_object()) return;
  const auto kind = params->find("c2c");
  if (kind == params->end() || *kind != "pingpong") return;
  const json ns = row.value("latency_ns", json());
  if (!ns.is_number() || !(ns.get<double>() > 0)) return;
  const auto text = [](const json& v) {
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  c2c["c2c:" + text(params->value("pu_a", json())) + "-" +
      text(params->value("pu_b", json()))]
      .push_back(ns.get<double>());
}

/// Core-to-core latencies measured in the run: start-of-run probes and the
/// c2c:pingpong calibration points (`c2c`: AddC2cLatency; median of
/// repetitions).
std::vector<MeasuredClass> MeasuredClasses(
    const json* ctx, const std::map<std::string, std::vector<double>>& c2c) {
  std::vector<MeasuredClass> out;
  const auto pus = [](const json& a, const json& b) {
    return a.dump() + "-" + b.dump();
  };
  for (const json& b : Baselines(ctx)) {
    const json p = b.is_object() ? b.value("pus", json()) : json();
    const double ns = b.is_object() ? LineProbe(b.value("ns", json())) : 0;
    if (p.is_array() && p.size() == 2 && ns > 0)
      out.push_back({"start_of_run:" + pus(p[0], p[1]), ns});
  }
  for (const auto& [name, values] : c2c) out.push_back({name, Median(values)});
  return out;
}

/// The nearest measured class within kMinModeGap of `ns`, or nullptr.
const MeasuredClass* MatchClass(const std::vector<MeasuredClass>& classes,
                                double ns) {
  const MeasuredClass* best = nullptr;
  double best_gap = kMinModeGap;
  for (const MeasuredClass& c : classes) {
    const double gap = std::fabs(std::log(ns / c.ns));
    if (gap <= best_gap) {
      best_gap = gap;
      best = &c;
    }
  }
  return best;
}

/// A latency in ns, no exponent: 3 significant digits below 100 (32.4, 2.3),
/// whole ns above (156, 2354).
std::string NsText(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ns < 100 ? "%.3g" : "%.0f", ns);
  return buf;
}

/// "near 32 ns (start_of_run:0-1 21 ns)" / "far 156 ns (no measured
/// core-to-core class within 1.4x)": what a regime label stands for.
std::string RegimeName(const CoherenceRegime& r, const MeasuredClass* match) {
  std::string text = r.label + " " + NsText(r.ns) + " ns (";
  if (match)
    text += "matches " + match->name + " " + NsText(match->ns) + " ns)";
  else
    text += "no measured core-to-core class within 1.4x)";
  return text;
}

// A binned Gaussian kernel density of sorted ln(latency) values `x`.
struct Density {
  double origin = 0, w = 0;  // ln(ns) of bin 0, bin width
  std::vector<double> at;    // per bin

  explicit Density(const std::vector<double>& x)
      : origin(x.front() - kKernelBandwidths * kBandwidth),
        w(kBandwidth / kBinsPerBandwidth) {
    const int bins =
        static_cast<int>(std::ceil(
            (x.back() - x.front() + 2 * kKernelBandwidths * kBandwidth) / w)) +
        1;
    std::vector<double> counts(bins, 0);
    at.assign(bins, 0);
    for (double v : x)
      counts[std::clamp(static_cast<int>(std::lround((v - origin) / w)), 0,
                        bins - 1)] += 1;
    const int reach = kBinsPerBandwidth * kKernelBandwidths;
    std::vector<double> kernel(2 * reach + 1);
    for (int d = -reach; d <= reach; ++d)
      kernel[d + reach] = std::exp(
          -0.5 * std::pow(d / static_cast<double>(kBinsPerBandwidth), 2));
    for (int j = 0; j < bins; ++j) {
      if (counts[j] == 0) continue;
      for (int d = -reach; d <= reach; ++d)
        if (j + d >= 0 && j + d < bins)
          at[j + d] += counts[j] * kernel[d + reach];
    }
  }
  int bins() const { return static_cast<int>(at.size()); }
  // The lowest bin between bins a and b.
  int Valley(int a, int b) const {
    int low = a;
    for (int j = a; j <= b; ++j)
      if (at[j] < at[low]) low = j;
    return low;
  }
};

// The density's modes (first bin of a plateau), the least separated
// neighbours merged until all are separated.
std::vector<int> SeparatedModes(const Density& d) {
  std::vector<int> peaks;
  for (int j = 0; j < d.bins(); ++j) {
    const double left = j > 0 ? d.at[j - 1] : -1;
    const double right = j + 1 < d.bins() ? d.at[j + 1] : -1;
    if (d.at[j] > left && d.at[j] >= right && d.at[j] > 0) peaks.push_back(j);
  }
  for (;;) {
    int worst = -1;
    double worst_score = 0;
    for (size_t i = 0; i + 1 < peaks.size(); ++i) {
      const int a = peaks[i], b = peaks[i + 1];
      const double low = std::min(d.at[a], d.at[b]);
      const double share = d.at[d.Valley(a, b)] / low;
      const bool close = (b - a) * d.w < kMinModeGap;
      if (share > kValleyShare || close) {
        const double score = share + (close ? 1 : 0);
        if (worst < 0 || score > worst_score) {
          worst = static_cast<int>(i);
          worst_score = score;
        }
      }
    }
    if (worst < 0) return peaks;
    // Keep the higher peak of the pair.
    peaks.erase(peaks.begin() + worst +
                (d.at[peaks[worst]] >= d.at[peaks[worst + 1]] ? 1 : 0));
  }
}

struct Cluster {
  double lo, hi;  // ln(ns), (lo, hi]
  std::vector<double> members;
};

// The non-empty clusters of `x` between the valleys of modes `peaks`, bounds
// (ln(ns)) contiguous.
std::vector<Cluster> ClustersBetween(const Density& d,
                                     const std::vector<int>& peaks,
                                     const std::vector<double>& x) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<Cluster> clusters;
  double lo = -kInf;
  for (size_t i = 0; i < peaks.size(); ++i) {
    const double hi = i + 1 < peaks.size()
                          ? d.origin + d.Valley(peaks[i], peaks[i + 1]) * d.w
                          : kInf;
    clusters.push_back({lo, hi, {}});
    lo = hi;
  }
  for (double v : x)
    for (Cluster& c : clusters)
      if (v > c.lo && v <= c.hi) {
        c.members.push_back(v);
        break;
      }
  clusters.erase(
      std::remove_if(clusters.begin(), clusters.end(),
                     [](const Cluster& c) { return c.members.empty(); }),
      clusters.end());
  for (size_t i = 0; i + 1 < clusters.size(); ++i)
    clusters[i + 1].lo = clusters[i].hi;
  if (!clusters.empty()) clusters.front().lo = -kInf;
  return clusters;
}

// Per cluster, its regime: itself, or the nearest (ln distance of medians).
// `n`: all probes.
std::vector<size_t> RegimeOwners(const std::vector<Cluster>& clusters, int n) {
  const int need = std::max<int>(n >= kMinProbes ? kMinProbes : 1,
                                 static_cast<int>(std::ceil(kMinShare * n)));
  std::vector<bool> major(clusters.size(), false);
  size_t largest = 0;
  for (size_t i = 0; i < clusters.size(); ++i) {
    major[i] = static_cast<int>(clusters[i].members.size()) >= need;
    if (clusters[i].members.size() > clusters[largest].members.size())
      largest = i;
  }
  major[largest] = true;
  size_t top_major = 0;
  for (size_t i = 0; i < clusters.size(); ++i)
    if (major[i]) top_major = i;
  // A slow state seen briefly is a regime (a far point is not near), but one
  // probe alone is not a state: a preempted probe reads slow too.
  for (size_t i = top_major + 1; i < clusters.size(); ++i)
    major[i] =
        static_cast<int>(clusters[i].members.size()) >= std::min(kMinProbes, n);
  std::vector<size_t> owner(clusters.size());
  for (size_t i = 0; i < clusters.size(); ++i) {
    if (major[i]) {
      owner[i] = i;
      continue;
    }
    const double m = Median(clusters[i].members);
    double best = std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < clusters.size(); ++j)
      if (major[j] && std::abs(Median(clusters[j].members) - m) < best) {
        best = std::abs(Median(clusters[j].members) - m);
        owner[i] = j;
      }
  }
  return owner;
}

using Pair = std::pair<int, int>;

// A PU pair from a JSON [a, b] of integers; false when it is not one.
std::pair<bool, Pair> PairOf(const json& p) {
  if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() ||
      !p[1].is_number_integer())
    return {false, {}};
  return {true, {p[0].get<int>(), p[1].get<int>()}};
}

bool SharesLines(const json& c) { return c.value("shares_lines", true); }

// A line-sharing row's before / after probes, under its PU pair.
void AddRowProbes(const json& row,
                  std::map<Pair, std::vector<double>>& probes) {
  const auto it = row.find("coherence");
  if (it == row.end() || !it->is_object()) return;
  const json& c = *it;
  if (!SharesLines(c)) return;
  const auto [ok, pr] = PairOf(c.value("pair", json()));
  if (!ok) return;
  probes[pr].push_back(LineProbe(c.value("before_ns", json())));
  probes[pr].push_back(LineProbe(c.value("after_ns", json())));
}

// Per PU pair, the start-of-run probes, then `rows`' (AddRowProbes).
std::map<Pair, std::vector<double>> ProbesByPair(
    const json* ctx, const std::map<Pair, std::vector<double>>& rows) {
  std::map<Pair, std::vector<double>> probes;
  for (const json& b : Baselines(ctx)) {
    const auto [ok, pr] = PairOf(b.value("pus", json()));
    if (!ok) continue;
    if (b.contains("probes_ns") && b["probes_ns"].is_array())
      for (const json& v : b["probes_ns"]) probes[pr].push_back(LineProbe(v));
    else
      probes[pr].push_back(LineProbe(b.value("ns", json())));
  }
  for (const auto& [pr, v] : rows)
    probes[pr].insert(probes[pr].end(), v.begin(), v.end());
  return probes;
}

// One pair's regimes for context.lockline.coherence_regimes.
json RegimesJson(const std::vector<CoherenceRegime>& regimes,
                 const std::vector<MeasuredClass>& classes) {
  json rs = json::array();
  for (const CoherenceRegime& r : regimes) {
    const MeasuredClass* match = MatchClass(classes, r.ns);
    rs.push_back({{"label", r.label},
                  {"regime", r.rank},
                  {"ns", r.ns},
                  {"lo_ns", r.lo_ns},
                  {"hi_ns", std::isfinite(r.hi_ns) ? json(r.hi_ns) : json()},
                  {"probes", r.probes},
                  {"matches", match ? json(match->name) : json()},
                  {"name", RegimeName(r, match)}});
  }
  return rs;
}

// Labels one row's coherence (`rs`: its pair's regimes, nullptr for none).
void LabelRow(json& c, const std::vector<CoherenceRegime>* rs,
              const std::vector<MeasuredClass>& classes) {
  int idx[2] = {-1, -1};
  if (rs) {
    idx[0] = ClassifyLatency(*rs, LineProbe(c.value("before_ns", json())));
    idx[1] = ClassifyLatency(*rs, LineProbe(c.value("after_ns", json())));
  }
  json probe_labels = json::array();
  for (int i : idx)
    probe_labels.push_back(i < 0 ? json() : json((*rs)[i].label));
  c["probe_labels"] = probe_labels;
  if (idx[0] < 0) std::swap(idx[0], idx[1]);
  if (ProbeValue(c.value("before_ns", json())) > kPreemptedProbeNs ||
      ProbeValue(c.value("after_ns", json())) > kPreemptedProbeNs) {
    c["label"] = "preempted";
  } else if (idx[0] < 0) {
    c["label"] = "unknown";
  } else if (idx[1] >= 0 && idx[1] != idx[0]) {
    c["label"] = "mixed";
  } else {
    const CoherenceRegime& r = (*rs)[idx[0]];
    c["label"] = r.label;
    c["regime"] = r.rank;
    // At the precision of regime_name (3 digits): the regime's median moves a
    // little with every probe, and a row whose value changed is serialized
    // again at the next write (ResultFile::EditRows), every row of the pair.
    c["regime_ns"] = std::stod(NsText(r.ns));
    const MeasuredClass* match = MatchClass(classes, r.ns);
    c["regime_name"] = RegimeName(r, match);
    c["matches"] = match ? json(match->name) : json();
  }
}

}  // namespace

std::string RegimeLabel(int rank) {
  return rank == 1   ? "near"
         : rank == 2 ? "far"
                     : "regime" + std::to_string(rank);
}

std::vector<CoherenceRegime> ClusterLatencies(const std::vector<double>& ns) {
  std::vector<double> x;
  for (double v : ns)
    if (v > 0 && std::isfinite(v)) x.push_back(std::log(v));
  if (x.empty()) return {};
  std::sort(x.begin(), x.end());
  const Density density(x);
  const std::vector<Cluster> clusters =
      ClustersBetween(density, SeparatedModes(density), x);
  const std::vector<size_t> owner =
      RegimeOwners(clusters, static_cast<int>(x.size()));
  std::vector<CoherenceRegime> out;
  std::map<size_t, size_t> slot;  // major cluster -> index in out
  std::vector<std::vector<double>> members;
  for (size_t i = 0; i < clusters.size(); ++i) {
    const size_t o = owner[i];
    if (!slot.count(o)) {
      slot[o] = out.size();
      out.push_back({});
      members.push_back({});
      out.back().lo_ns = std::exp(clusters[i].lo);
    }
    CoherenceRegime& r = out[slot[o]];
    r.hi_ns = std::exp(clusters[i].hi);
    for (double v : clusters[i].members) members[slot[o]].push_back(v);
  }
  for (size_t k = 0; k < out.size(); ++k) {
    out[k].rank = static_cast<int>(k) + 1;
    out[k].label = RegimeLabel(out[k].rank);
    out[k].ns = std::exp(Median(members[k]));
    out[k].probes = static_cast<int>(members[k].size());
  }
  return out;
}

int ClassifyLatency(const std::vector<CoherenceRegime>& regimes, double ns) {
  if (!(ns > 0)) return -1;
  for (size_t i = 0; i < regimes.size(); ++i)
    if (ns > regimes[i].lo_ns && ns <= regimes[i].hi_ns)
      return static_cast<int>(i);
  return regimes.empty() ? -1 : static_cast<int>(regimes.size()) - 1;
}

std::vector<size_t> RelabelCoherence(json& doc, RegimeCache* cache) {
  std::vector<size_t> changed;
  if (!doc.contains("benchmarks") || !doc["benchmarks"].is_array())
    return changed;
  const json* ctx = nullptr;
  if (doc.contains("context") && doc["context"].contains("lockline"))
    ctx = &doc["context"]["lockline"];
  RegimeCache fresh;
  if (cache == nullptr) cache = &fresh;
  if (cache->rows_read > doc["benchmarks"].size()) *cache = RegimeCache{};
  // Rows are only appended, and a row's probes and latency never change.
  const json& all = doc["benchmarks"];
  for (; cache->rows_read < all.size(); ++cache->rows_read) {
    AddRowProbes(all[cache->rows_read], cache->row_probes);
    AddC2cLatency(all[cache->rows_read], cache->c2c);
  }
  std::map<Pair, std::vector<CoherenceRegime>> regimes;
  const std::vector<MeasuredClass> classes = MeasuredClasses(ctx, cache->c2c);
  json summary = json::array();
  for (const auto& [pr, v] : ProbesByPair(ctx, cache->row_probes)) {
    regimes[pr] = ClusterLatencies(v);
    summary.push_back({{"pus", {pr.first, pr.second}},
                       {"regimes", RegimesJson(regimes[pr], classes)}});
  }
  if (ctx) doc["context"]["lockline"]["coherence_regimes"] = summary;
  // What LabelRow reads; the same as last time: the labelled rows stand.
  std::string inputs;
  for (const auto& [pr, rs] : regimes) {
    inputs += std::to_string(pr.first) + "-" + std::to_string(pr.second);
    for (const CoherenceRegime& r : rs)
      inputs += ":" + RegimeName(r, MatchClass(classes, r.ns)) + "/" +
                std::to_string(r.rank) + "/" + std::to_string(r.lo_ns) + "/" +
                std::to_string(r.hi_ns);
    inputs += ";";
  }
  const bool only_new = cache->labels_from == inputs;
  cache->labels_from = std::move(inputs);
  json& rows = doc["benchmarks"];
  for (size_t row_index = 0; row_index < rows.size(); ++row_index) {
    json& row = rows[row_index];
    if (!row.contains("coherence") || !row["coherence"].is_object()) continue;
    json& c = row["coherence"];
    if (only_new && c.contains("probe_labels")) continue;
    // Compared after relabelling: most rows keep their label.
    const json before = c;
    for (const char* k : {"regime", "regime_ns", "regime_name", "matches"})
      c[k] = nullptr;
    if (!SharesLines(c)) {
      c["label"] = "none";
    } else {
      const auto [ok, pr] = PairOf(c.value("pair", json()));
      LabelRow(c, ok ? &regimes[pr] : nullptr, classes);
    }
    if (c != before) changed.push_back(row_index);
  }
  return changed;
}

}  // namespace lockline
