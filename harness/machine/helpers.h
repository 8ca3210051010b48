// Places helper threads (prezero's zeroer, pagevec's scanner, the evidence
// timer) on PUs the point leaves free: a free core in the served threads' L3,
// their node, another measured node, the nearest other node (NUMA distance,
// else same package), of a CPU kind no slower than the fastest measured
// thread's; then an idle SMT sibling; then refused, unless sharing a measured
// PU is allowed (--oversubscribe).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/machine/topology.h"

namespace lockline {

/// Where one helper thread runs: PuInfo's indices, -1 when unbound.
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
  bool allow_smt_sibling = true;  ///< after every free core
  /// Last resort: the least loaded measured PU (the last in plan order).
  bool allow_shared_pu = false;
  /// NUMA distances for "nearest node"; nullptr: same package is nearer.
  const Topology* topo = nullptr;
};

/// Places up to `count` helpers of `plan` on `usable` (helper i serves the
/// i-th measured node); fewer when the rule cannot be met. Never throws.
std::vector<HelperPlace> PlaceHelpersNear(const std::vector<PuInfo>& usable,
                                          const ThreadPlan& plan, int count,
                                          const HelperRule& rule);

/// The row's helper columns, one entry per helper (-1 unbound or unknown).
struct HelperColumns {
  std::vector<int> pu, core, numa, l3, kind;
};
HelperColumns HelperColumnsOf(const std::vector<HelperPlace>& places);

/// One --plan line per helper: "PU 17 (core 8, ...): WHY" or "none: WHY".
std::vector<std::string> DescribeHelperPlaces(
    const std::vector<HelperPlace>& places, int count, const HelperRule& rule);

/// Helpers --plan shows per thread count: max(1, NUMA nodes) (HelperRole).
int PlannedHelperCount(const Topology& topo);

/// PlannedHelperCount(topo) helpers of `plan` under the run's rule.
std::vector<HelperPlace> PlanHelperPlaces(const Topology& topo,
                                          const ThreadPlan& plan,
                                          bool oversubscribe);

/// What a helper index stands for in the plan ("zeroer, evidence timer,
/// scanner of zone 0" for 0; "scanner of zone I (zones:per_numa)" else).
std::string HelperRole(int index);

/// --plan=json's "helpers" of one thread count, one object per helper.
nlohmann::json HelperPlanJson(const Topology& topo, const ThreadPlan& plan,
                              bool oversubscribe);

/// --plan=json's {"cpukinds", "cpukinds_ranked", "warnings"}.
nlohmann::json CpuKindsJson(const TopologySummary& s);

/// Writes HelperColumnsOf(places) into `d` as "helper_pu", ... "helper_kind".
void AddHelperColumnsJson(nlohmann::json& d,
                          const std::vector<HelperPlace>& places);

}  // namespace lockline
