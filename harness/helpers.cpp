#include "harness/helpers.h"

#include <algorithm>
#include <set>

namespace lockline {

std::vector<HelperPlace> PlaceHelpers(const std::vector<PuInfo>& usable,
                                      const ThreadPlan& plan, int count,
                                      bool allow_smt_sibling) {
  std::set<int> measured_pus, measured_cores;
  // The measured threads' NUMA nodes, in plan order (issue 27: the first
  // thread's node alone gave a 16-thread point on an 8-node machine no helper
  // although ~200 PUs of its other nodes were free).
  std::vector<int> nodes;
  bool node_unknown = plan.pus.empty();
  for (const PuInfo& pu : plan.pus) {
    measured_pus.insert(pu.os_index);
    if (pu.core >= 0) measured_cores.insert(pu.core);
    if (pu.numa < 0)
      node_unknown = true;
    else if (std::find(nodes.begin(), nodes.end(), pu.numa) == nodes.end())
      nodes.push_back(pu.numa);
  }
  std::set<int> taken_cores, taken_pus;
  std::vector<HelperPlace> out;
  // A PU for one helper: `pass` 0 a free core, 1 (allowed only) a measured
  // thread's core; `node` -1 any measured node (any node when unknown).
  const auto pick = [&](int pass, int node) -> const PuInfo* {
    for (const PuInfo& pu : usable) {
      if (measured_pus.count(pu.os_index) || taken_pus.count(pu.os_index))
        continue;
      if (node >= 0 && pu.numa != node) continue;
      if (node < 0 && !node_unknown &&
          std::find(nodes.begin(), nodes.end(), pu.numa) == nodes.end())
        continue;
      const bool on_measured_core =
          pu.core >= 0 && measured_cores.count(pu.core);
      if (on_measured_core != (pass == 1)) continue;
      if (pu.core >= 0 && taken_cores.count(pu.core)) continue;
      return &pu;
    }
    return nullptr;
  };
  for (int pass = 0; pass < (allow_smt_sibling ? 2 : 1); ++pass) {
    while (static_cast<int>(out.size()) < count) {
      // Helper i serves measured node i mod k (the nodes in plan order); when
      // that node has no free core left, any measured node's.
      const int i = static_cast<int>(out.size());
      const int own = nodes.empty() || node_unknown
                          ? -1
                          : nodes[static_cast<size_t>(i) % nodes.size()];
      const PuInfo* pu = pick(pass, own);
      if (pu == nullptr && own >= 0) pu = pick(pass, -1);
      if (pu == nullptr) break;
      HelperPlace h;
      h.pu = pu->os_index;
      h.core = pu->core;
      h.numa = pu->numa;
      h.smt_sibling_of_measured = pass == 1;
      if (pass == 1) h.reason = "SMT sibling of a measured thread (allowed)";
      if (pu->core >= 0) taken_cores.insert(pu->core);
      taken_pus.insert(pu->os_index);
      out.push_back(h);
    }
  }
  return out;
}

HelperColumns HelperColumnsOf(const std::vector<HelperPlace>& places) {
  HelperColumns c;
  for (const HelperPlace& h : places) {
    c.pu.push_back(h.pu);
    c.core.push_back(h.core);
    c.numa.push_back(h.numa);
  }
  return c;
}

}  // namespace lockline
