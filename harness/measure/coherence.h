// Coherence regimes: which state of the machine a contended point ran in (on
// a VM a PU pair's line transfer latency switches between a few levels, and
// throughput with it; docs/measurement.md). Line-sharing points are probed
// before and after; the run's probes are clustered per PU pair into regimes
// (`near` = the lowest) and each point labelled.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace lockline {

/// A probe slower than this (one way, ns) timed the scheduler, not a line
/// (cross-socket transfers stay under ~1 us; 5 us needs a lost CFS slice):
/// `preempted`, never clustered.
inline constexpr double kPreemptedProbeNs = 5000;

/// One latency regime of a PU pair.
struct CoherenceRegime {
  int rank = 1;       ///< 1 = lowest latency
  std::string label;  ///< RegimeLabel(rank): near, far, regime3, ...
  double ns = 0;      ///< typical one-way latency: median of its probes, ns
  double lo_ns = 0;   ///< probes in (lo_ns, hi_ns] belong to it (ns)
  double hi_ns = 0;   ///< +inf for the highest regime
  int probes = 0;     ///< probes of the run in it
};

/// Regime name for a 1-based rank: 1 -> "near", 2 -> "far", k -> "regimek".
std::string RegimeLabel(int rank);

/// Clusters one PU pair's probe latencies (ns; <= 0 ignored) into regimes,
/// lowest first: Gaussian KDE of ln(latency) (bandwidth ln 1.15), split at the
/// minima between modes (modes within 1.4x or with a valley above half the
/// smaller peak merge). A cluster is a regime with >= 5 % and >= 2 probes, or
/// when slower than all such with >= 2; others join the nearest regime (a
/// brief fast outlier never becomes `near`).
std::vector<CoherenceRegime> ClusterLatencies(const std::vector<double>& ns);

/// Index of the regime `ns` falls in; -1 for ns <= 0 or no regimes.
int ClassifyLatency(const std::vector<CoherenceRegime>& regimes, double ns);

/// What RelabelCoherence keeps between calls on one growing lockline.json:
/// the probes and c2c latencies of the rows read so far (rows are appended,
/// and a row's probes never change) and what the labels were made from.
struct RegimeCache {
  size_t rows_read = 0;
  std::map<std::pair<int, int>, std::vector<double>> row_probes;
  std::map<std::string, std::vector<double>> c2c;
  std::string labels_from;
};

/// Relabels every row's coherence and context.lockline.coherence_regimes of a
/// lockline.json from the run's probes; returns the indices of changed rows.
/// With `cache` (RegimeCache) it reads only rows appended since the last
/// call, and when the regimes' labels, bounds and named latencies and the
/// measured classes are as last time, labels only rows never labelled (no
/// probe_labels): a run relabels after every repetition.
std::vector<size_t> RelabelCoherence(nlohmann::json& doc,
                                     RegimeCache* cache = nullptr);

}  // namespace lockline
