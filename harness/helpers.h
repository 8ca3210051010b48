// Placement of a workload's helper threads (a background zeroer, an engine
// thread): the rule measured threads follow, applied to the PUs the point
// leaves free (issue 14). A helper gets a core of its own (never an SMT
// sibling of a measured thread or of another helper, unless the caller allows
// it and says so on the row), on the NUMA node of the measured threads, in
// the topology's logical order; on a multi-node machine each helper on a
// node of the measured threads (issue 27).
#pragma once

#include <string>
#include <vector>

#include "harness/topology.h"

namespace lockline {

/// Where one helper thread runs. pu/core/numa are -1 when the helper is
/// unbound (no host topology, or no PU met the rule); `reason` then says why.
struct HelperPlace {
  int pu = -1;    ///< OS index (the one BindThisThread takes)
  int core = -1;  ///< logical index of its core
  int numa = -1;  ///< logical index of its NUMA node
  /// Shares a core with a measured thread (only when allowed by the caller).
  bool smt_sibling_of_measured = false;
  std::string reason;  ///< "" when placed by the rule, else why not / how
};

/// Picks PUs for up to `count` helpers of a point planned as `plan` on
/// `usable` (the topology's usable PUs): PUs not in the plan, whose core holds
/// no measured thread and no earlier helper, on the NUMA nodes of the measured
/// threads (any node when a measured PU's node is unknown, -1). Helper i
/// serves the i-th measured node (mod their number, in plan order) and takes a
/// free core there, else on any measured node. With `allow_smt_sibling`, PUs
/// on a measured thread's core are taken after every free core (flagged
/// smt_sibling_of_measured). Returns fewer than `count` places (possibly none)
/// when the rule cannot be met; never throws.
std::vector<HelperPlace> PlaceHelpers(const std::vector<PuInfo>& usable,
                                      const ThreadPlan& plan, int count,
                                      bool allow_smt_sibling = false);

/// The row's record of helpers: {"helper_pu": [..], "helper_core": [..],
/// "helper_numa": [..]} as JSON-ready vectors (one entry per helper, -1 when
/// unbound), for details.
struct HelperColumns {
  std::vector<int> pu, core, numa;
};
HelperColumns HelperColumnsOf(const std::vector<HelperPlace>& places);

}  // namespace lockline
