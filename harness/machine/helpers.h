// Placement of a workload's helper threads (prezero's zeroer, pagevec's
// reclaim scanner, the kernel families' evidence timer): the rule measured
// threads follow, applied to the PUs the point leaves free. A helper gets a
// core of its own, never a measured thread's PU.
//
// Order of preference: a free core (no measured thread, no earlier
// helper) in the L3 of the measured threads it serves, then on their NUMA
// node, then on another measured node, then on the nearest other node (NUMA
// distance when the topology has a matrix, else the same package first); at
// each step a CPU kind no slower than the fastest measured thread's. With no
// free core anywhere, an idle SMT sibling of a measured thread (flagged
// smt_sibling_of_measured, said in `reason`); with none of those either, the
// point has no place for the helper and is refused, unless the caller allows
// sharing a measured PU (--oversubscribe; flagged shares_measured_pu).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "harness/machine/topology.h"

namespace lockline {

/// Where one helper thread runs: PuInfo's indices, -1 when unbound (no host
/// topology, or no PU met the rule; `reason` says why).
struct HelperPlace {
  int pu = -1, core = -1, numa = -1;
  bool smt_sibling_of_measured = false;  ///< an idle SMT sibling
  /// "" on a free core of a measured node, else how and why.
  std::string reason{};
  int l3 = -1, cpukind = -1, package = -1;
  bool shares_measured_pu = false;  ///< only when the caller allows it
  std::string why{};                ///< always set when placed (--plan)
};

/// Options of PlaceHelpersNear.
struct HelperRule {
  /// After every free core of every node: idle SMT siblings of measured
  /// threads.
  bool allow_smt_sibling = true;
  /// Last resort (--oversubscribe, or a helper outside the timed windows): the
  /// least loaded measured PU, the last in plan order among equals.
  bool allow_shared_pu = false;
  /// NUMA distances for "nearest node" (Topology::NumaDistance); nullptr:
  /// nodes of a measured thread's package count as nearer than others.
  const Topology* topo = nullptr;
};

/// Picks PUs for up to `count` helpers of a point planned as `plan` on
/// `usable` (the topology's usable PUs) by the rule above. Helper i serves
/// the i-th measured NUMA node (mod their number, in plan order): its L3s,
/// node and kind are the preferred ones. Returns fewer than `count` places
/// (possibly none) when the rule cannot be met; never throws.
std::vector<HelperPlace> PlaceHelpersNear(const std::vector<PuInfo>& usable,
                                          const ThreadPlan& plan, int count,
                                          const HelperRule& rule);

/// The row's record of helpers: {"helper_pu": [..], "helper_core": [..],
/// "helper_numa": [..], "helper_l3": [..], "helper_kind": [..]} as JSON-ready
/// vectors (one entry per helper, -1 when unbound or unknown), for details.
struct HelperColumns {
  std::vector<int> pu, core, numa, l3, kind;
};
HelperColumns HelperColumnsOf(const std::vector<HelperPlace>& places);

/// One line per helper for --plan: "PU 17 (core 8, L3 0, node 1, kind -1):
/// WHY", or "none: WHY" when `places` holds fewer than `count`.
std::vector<std::string> DescribeHelperPlaces(
    const std::vector<HelperPlace>& places, int count, const HelperRule& rule);

/// Helpers --plan shows per thread count: max(1, the topology's NUMA nodes).
/// Helper 0 is prezero's zeroer (steady state, engine), the kernel_*
/// families' evidence timer and pagevec's zones:1 scanner; helper i is
/// pagevec's zones:per_numa scanner of zone i (one zone per NUMA node).
int PlannedHelperCount(const Topology& topo);

/// The places of PlannedHelperCount(topo) helpers of `plan` under the run's
/// rule: NUMA distances of `topo`, idle SMT siblings allowed (flagged),
/// sharing a measured PU only with `oversubscribe`.
std::vector<HelperPlace> PlanHelperPlaces(const Topology& topo,
                                          const ThreadPlan& plan,
                                          bool oversubscribe);

/// What a helper index stands for in the plan ("zeroer, evidence timer,
/// scanner of zone 0" for 0; "scanner of zone I (zones:per_numa)" else).
std::string HelperRole(int index);

/// --plan=json's "helpers" of one thread count: one object per planned helper
/// {"helper", "role", "pu", "core", "l3", "numa", "package", "kind",
/// "smt_sibling_of_measured", "shares_measured_pu", "why"} (pu -1 and
/// "refused": true when none is left).
nlohmann::json HelperPlanJson(const Topology& topo, const ThreadPlan& plan,
                              bool oversubscribe);

/// --plan=json's CPU-kind facts: {"cpukinds", "cpukinds_ranked", "warnings":
/// [UnrankedKindsWarning] or []}.
nlohmann::json CpuKindsJson(const TopologySummary& s);

/// Writes HelperColumnsOf(places) into `d` as "helper_pu", "helper_core",
/// "helper_numa", "helper_l3" and "helper_kind".
void AddHelperColumnsJson(nlohmann::json& d,
                          const std::vector<HelperPlace>& places);

}  // namespace lockline
