// Coherence regimes: which state of the machine a contended point was measured
// in. On a VM one PU pair's line transfer latency switches between a few
// levels (2-vCPU KVM guest: ~32 ns "near", ~156 ns "far", every few seconds)
// and contended throughput 4-7x with it. Every point that shares a line is
// probed before and after (ThreadTeam::PingPong); the run's probes are
// clustered per PU pair into regimes (`near` = the pair's lowest), and each
// point is labelled with the regime its probes fall in.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lockline {

/// A probe whose median one-way latency exceeds this timed the scheduler, not
/// a cache line: the slowest transfers measured anywhere (cross-socket on 4-8
/// socket machines) stay under ~1 us, and a 64-round-trip batch reaches 5 us
/// one way (640 us) only when a probe thread lost its PU for about a CFS
/// slice (0.75 ms and up). Such a probe is `preempted`: never clustered, and a
/// row with one is labelled `preempted`, no regime (issue 49: a starved run
/// listed a 6.6 ms "regime").
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

/// Clusters one PU pair's probe latencies (ns; values <= 0 are ignored) into
/// regimes, lowest first. Method: Gaussian kernel density of ln(latency)
/// (bandwidth ln 1.15: probes within ~15 % are one state), split at the density
/// minima between its modes; modes closer than 1.4x or with a valley above
/// half the smaller peak are one regime. A cluster is a regime when it holds
/// at least 5 % of the probes (and at least 2), or when it is slower than
/// every such cluster and holds at least 2 probes (a slow state seen briefly;
/// one slow probe alone may be a preempted probe); other clusters join the
/// nearest regime, so a brief faster outlier (16 ns among 32 ns probes) never
/// becomes `near` and turns the usual state into `far`. Empty input: no
/// regimes.
std::vector<CoherenceRegime> ClusterLatencies(const std::vector<double>& ns);

/// Index into `regimes` of the regime `ns` falls in; -1 for ns <= 0 or no
/// regimes.
int ClassifyLatency(const std::vector<CoherenceRegime>& regimes, double ns);

/// Relabels every iteration row of a lockline.json document from the whole
/// run's probes: per PU pair, the start-of-run probes
/// (context.lockline.coherence_baseline[].probes_ns) and every row's
/// before_ns / after_ns are clustered and each row's coherence gets `label`,
/// `regime` (rank or null), `regime_ns` (median probe or null), `matches` and
/// `regime_name`, e.g. "near 32 ns (matches start_of_run:0-1 30 ns)": `label`
/// ranks regimes within this run only, `matches` names the nearest measured
/// core-to-core class within 1.4x ("start_of_run:A-B", calibration "c2c:A-B";
/// null when none). Labels: `none` (shares_lines false), `unknown` (no
/// probes), `preempted` (a probe above kPreemptedProbeNs), the regime's when
/// both probes fall in one, `mixed` when not.
/// Writes context.lockline.coherence_regimes too. Called after every
/// repetition and at the end (earlier rows may change label). Returns the
/// indices of the rows whose coherence changed (ResultFile::EditRows).
std::vector<size_t> RelabelCoherence(nlohmann::json& doc);

}  // namespace lockline
