#include "harness/helpers.h"

#include <algorithm>
#include <set>

namespace lockline {

std::vector<HelperPlace> PlaceHelpers(const std::vector<PuInfo>& usable,
                                      const ThreadPlan& plan, int count,
                                      bool allow_smt_sibling) {
  std::set<int> measured_pus, measured_cores;
  for (const PuInfo& pu : plan.pus) {
    measured_pus.insert(pu.os_index);
    if (pu.core >= 0) measured_cores.insert(pu.core);
  }
  const int node = plan.pus.empty() ? -1 : plan.pus.front().numa;
  std::set<int> taken_cores;
  std::vector<HelperPlace> out;
  // Pass 0: own core; pass 1 (allowed only): a measured thread's core.
  for (int pass = 0; pass < (allow_smt_sibling ? 2 : 1); ++pass) {
    for (const PuInfo& pu : usable) {
      if (static_cast<int>(out.size()) >= count) return out;
      if (measured_pus.count(pu.os_index)) continue;
      if (node >= 0 && pu.numa != node) continue;
      const bool on_measured_core =
          pu.core >= 0 && measured_cores.count(pu.core);
      if (on_measured_core != (pass == 1)) continue;
      if (pu.core >= 0 && taken_cores.count(pu.core)) continue;
      HelperPlace h;
      h.pu = pu.os_index;
      h.core = pu.core;
      h.numa = pu.numa;
      h.smt_sibling_of_measured = on_measured_core;
      if (on_measured_core)
        h.reason = "SMT sibling of a measured thread (allowed)";
      if (pu.core >= 0) taken_cores.insert(pu.core);
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
