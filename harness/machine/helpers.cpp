#include "harness/machine/helpers.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <tuple>

namespace lockline {
namespace {

// A set of small non-negative indices (OS indices, logical indices) as a
// flag vector: the placement loop asks it ~10 times per usable PU and helper,
// so --plan on 8192 PUs stays fast. Negative indices are never members.
class IndexSet {
 public:
  void insert(int i) {
    if (i < 0) return;
    if (static_cast<size_t>(i) >= bits_.size())
      bits_.resize(static_cast<size_t>(i) + 1, 0);
    bits_[static_cast<size_t>(i)] = 1;
  }
  size_t count(int i) const {
    return i >= 0 && static_cast<size_t>(i) < bits_.size() &&
           bits_[static_cast<size_t>(i)];
  }

 private:
  std::vector<char> bits_;
};

std::string NodeList(const std::vector<int>& nodes) {
  std::string s;
  for (int n : nodes) s += (s.empty() ? "" : ",") + std::to_string(n);
  return s;
}

}  // namespace

std::vector<HelperPlace> PlaceHelpersNear(const std::vector<PuInfo>& usable,
                                          const ThreadPlan& plan, int count,
                                          const HelperRule& rule) {
  IndexSet measured_pus, measured_cores;
  // The measured threads' NUMA nodes, in plan order (issue 27: the first
  // thread's node alone gave a 16-thread point on an 8-node machine no helper
  // although ~200 PUs of its other nodes were free).
  std::vector<int> nodes;
  std::map<int, std::set<int>> node_l3s;  // measured node -> its threads' L3s
  std::map<int, int> node_kind;           // measured node -> fastest kind
  IndexSet measured_packages;
  std::map<int, int> load;  // measured PU -> threads on it
  for (const PuInfo& pu : plan.pus) {
    measured_pus.insert(pu.os_index);
    ++load[pu.os_index];
    if (pu.core >= 0) measured_cores.insert(pu.core);
    if (pu.package >= 0) measured_packages.insert(pu.package);
    if (std::find(nodes.begin(), nodes.end(), pu.numa) == nodes.end())
      nodes.push_back(pu.numa);
    if (pu.l3 >= 0) node_l3s[pu.numa].insert(pu.l3);
    auto [it, fresh] = node_kind.emplace(pu.numa, pu.cpukind);
    if (!fresh) it->second = std::max(it->second, pu.cpukind);
  }
  std::vector<int> known_nodes;
  IndexSet known_node_set;
  for (int n : nodes)
    if (n >= 0) {
      known_nodes.push_back(n);
      known_node_set.insert(n);
    }
  // Distance from measured node `from` to node `to`: the topology's matrix,
  // else 0 same node, 1 a measured package, 2 any other (unknown: 2).
  const auto distance = [&](int from, const PuInfo& to) -> int {
    if (from >= 0 && to.numa == from) return 0;
    if (rule.topo != nullptr && from >= 0 && to.numa >= 0) {
      const int d = rule.topo->NumaDistance(from, to.numa);
      if (d >= 0) return d;
    }
    return to.package >= 0 && measured_packages.count(to.package) ? 1 : 2;
  };
  IndexSet taken_cores, taken_pus;
  std::vector<HelperPlace> out;
  // Best PU for a helper serving measured node `node` in `pass`: 0 a free
  // core, 1 an idle sibling of a measured thread. Lexicographic preference:
  // the served threads' L3, their node, any measured node, a kind no slower,
  // NUMA distance, the closest kind, logical order.
  const auto pick = [&](int pass, int node) -> const PuInfo* {
    const std::set<int>& l3s = node_l3s[node];
    const int kind = node_kind.count(node) ? node_kind[node] : -1;
    const PuInfo* best = nullptr;
    std::tuple<int, int, int, int, int> best_key{};
    for (const PuInfo& pu : usable) {
      if (measured_pus.count(pu.os_index) || taken_pus.count(pu.os_index))
        continue;
      const bool on_measured_core =
          pu.core >= 0 && measured_cores.count(pu.core);
      if (on_measured_core != (pass == 1)) continue;
      if (pu.core >= 0 && taken_cores.count(pu.core)) continue;
      const bool measured_node = known_node_set.count(pu.numa) != 0;
      const int node_rank = node >= 0 && pu.numa == node ? 0
                            : measured_node              ? 1
                                                         : 2;
      const bool slower = kind >= 0 && pu.cpukind >= 0 && pu.cpukind < kind;
      const int kind_gap =
          kind >= 0 && pu.cpukind >= 0 ? std::abs(pu.cpukind - kind) : 0;
      const auto key =
          std::make_tuple(pu.l3 >= 0 && l3s.count(pu.l3) ? 0 : 1, node_rank,
                          slower ? 1 : 0, distance(node, pu), kind_gap);
      if (best == nullptr || key < best_key) {  // ties: logical order
        best = &pu;
        best_key = key;
      }
    }
    return best;
  };
  const auto describe = [&](const PuInfo& pu, int node, int pass) {
    HelperPlace h;
    h.pu = pu.os_index;
    h.core = pu.core;
    h.numa = pu.numa;
    h.l3 = pu.l3;
    h.cpukind = pu.cpukind;
    h.package = pu.package;
    h.smt_sibling_of_measured = pass == 1;
    const bool same_l3 = pu.l3 >= 0 && node_l3s[node].count(pu.l3);
    const bool measured_node =
        pu.numa < 0 || std::find(known_nodes.begin(), known_nodes.end(),
                                 pu.numa) != known_nodes.end();
    const int kind = node_kind.count(node) ? node_kind[node] : -1;
    std::string where =
        same_l3 ? "in the measured threads' L3 " + std::to_string(pu.l3)
                : "outside the measured threads' L3";
    where += pu.numa == node ? ", on their node " + std::to_string(pu.numa)
                             : ", on node " + std::to_string(pu.numa);
    if (kind >= 0 && pu.cpukind >= 0)
      where += pu.cpukind < kind
                   ? ", a slower kind (" + std::to_string(pu.cpukind) + " < " +
                         std::to_string(kind) + ": none faster free)"
                   : ", kind " + std::to_string(pu.cpukind) + " (no slower)";
    if (pass == 0 && measured_node) {
      h.why = "free core " + where;
    } else if (pass == 0) {
      const int d = distance(node, pu);
      h.why =
          "free core " + where + ", nearest node to the measured ones (" +
          (rule.topo != nullptr && rule.topo->NumaDistance(node, pu.numa) >= 0
               ? "NUMA distance " + std::to_string(d)
               : std::string(d == 1 ? "same package" : "other package")) +
          ")";
      h.reason = "free core on node " + std::to_string(pu.numa) +
                 ": the measured threads fill node(s) " + NodeList(known_nodes);
    } else {
      h.why = "idle SMT sibling of a measured thread " + where +
              ": no free core on any node";
      h.reason = "idle SMT sibling of a measured thread (no free core)";
    }
    return h;
  };
  for (int pass = 0; pass < (rule.allow_smt_sibling ? 2 : 1); ++pass) {
    while (static_cast<int>(out.size()) < count) {
      const int i = static_cast<int>(out.size());
      const int own =
          nodes.empty() ? -1 : nodes[static_cast<size_t>(i) % nodes.size()];
      const PuInfo* pu = pick(pass, own);
      if (pu == nullptr) break;
      out.push_back(describe(*pu, own, pass));
      if (pu->core >= 0) taken_cores.insert(pu->core);
      taken_pus.insert(pu->os_index);
    }
  }
  // Allowed by the caller (--oversubscribe, or a helper outside the timed
  // windows): share the least-loaded measured PU, the last in plan order among
  // equals (SCHED_IDLE is the caller's business).
  while (rule.allow_shared_pu && static_cast<int>(out.size()) < count &&
         !plan.pus.empty()) {
    const PuInfo* least = nullptr;
    int least_load = INT_MAX;
    for (const PuInfo& pu : plan.pus) {
      const int l = load[pu.os_index];
      if (l <= least_load) {
        least = &pu;
        least_load = l;
      }
    }
    ++load[least->os_index];
    HelperPlace h;
    h.pu = least->os_index;
    h.core = least->core;
    h.numa = least->numa;
    h.l3 = least->l3;
    h.cpukind = least->cpukind;
    h.package = least->package;
    h.shares_measured_pu = true;
    h.reason = "shares measured PU " + std::to_string(least->os_index) +
               " (no free PU; allowed by the caller)";
    h.why = h.reason;
    out.push_back(h);
  }
  return out;
}

std::vector<HelperPlace> PlaceHelpers(const std::vector<PuInfo>& usable,
                                      const ThreadPlan& plan, int count,
                                      bool allow_smt_sibling) {
  HelperRule rule;
  rule.allow_smt_sibling = allow_smt_sibling;
  return PlaceHelpersNear(usable, plan, count, rule);
}

HelperColumns HelperColumnsOf(const std::vector<HelperPlace>& places) {
  HelperColumns c;
  for (const HelperPlace& h : places) {
    c.pu.push_back(h.pu);
    c.core.push_back(h.core);
    c.numa.push_back(h.numa);
    c.l3.push_back(h.l3);
    c.kind.push_back(h.cpukind);
  }
  return c;
}

std::vector<std::string> DescribeHelperPlaces(
    const std::vector<HelperPlace>& places, int count, const HelperRule& rule) {
  std::vector<std::string> out;
  for (const HelperPlace& h : places)
    out.push_back("PU " + std::to_string(h.pu) + " (core " +
                  std::to_string(h.core) + ", L3 " + std::to_string(h.l3) +
                  ", node " + std::to_string(h.numa) + ", kind " +
                  std::to_string(h.cpukind) + "): " + h.why);
  for (int i = static_cast<int>(places.size()); i < count; ++i)
    out.push_back(
        std::string(rule.allow_smt_sibling
                        ? "none: every usable PU runs a measured thread"
                        : "none: no free core") +
        (rule.allow_shared_pu
             ? ""
             : "; prezero's zeroer points are refused (pass --oversubscribe "
               "to share a measured PU); the evidence timer shares the least "
               "loaded measured PU in evidence windows only (said in the "
               "row)"));
  return out;
}

int PlannedHelperCount(const Topology& topo) {
  return std::max(1, topo.summary().numa_nodes);
}

std::vector<HelperPlace> PlanHelperPlaces(const Topology& topo,
                                          const ThreadPlan& plan,
                                          bool oversubscribe) {
  HelperRule rule;
  rule.topo = &topo;
  rule.allow_smt_sibling = true;
  rule.allow_shared_pu = oversubscribe;
  return PlaceHelpersNear(topo.usable_pus(), plan, PlannedHelperCount(topo),
                          rule);
}

std::string HelperRole(int index) {
  return index == 0 ? "prezero zeroer, kernel_* evidence timer, pagevec "
                      "scanner of zone 0"
                    : "pagevec scanner of zone " + std::to_string(index) +
                          " (zones:per_numa)";
}

nlohmann::json HelperPlanJson(const Topology& topo, const ThreadPlan& plan,
                              bool oversubscribe) {
  const int count = PlannedHelperCount(topo);
  const std::vector<HelperPlace> places =
      PlanHelperPlaces(topo, plan, oversubscribe);
  nlohmann::json out = nlohmann::json::array();
  for (int i = 0; i < count; ++i) {
    nlohmann::json h = {{"helper", i}, {"role", HelperRole(i)}};
    if (i < static_cast<int>(places.size())) {
      const HelperPlace& p = places[static_cast<size_t>(i)];
      h.update({{"pu", p.pu},
                {"core", p.core},
                {"l3", p.l3},
                {"numa", p.numa},
                {"package", p.package},
                {"kind", p.cpukind},
                {"smt_sibling_of_measured", p.smt_sibling_of_measured},
                {"shares_measured_pu", p.shares_measured_pu},
                {"refused", false},
                {"why", p.why}});
    } else {
      HelperRule rule;
      rule.allow_shared_pu = oversubscribe;
      h.update({{"pu", -1},
                {"refused", true},
                {"why", DescribeHelperPlaces({}, 1, rule)[0]}});
    }
    out.push_back(h);
  }
  return out;
}

nlohmann::json CpuKindsJson(const TopologySummary& s) {
  const std::string w = UnrankedKindsWarning(s);
  return {{"cpukinds", s.cpukinds},
          {"cpukinds_ranked", s.cpukinds_ranked},
          {"warnings",
           w.empty() ? nlohmann::json::array() : nlohmann::json::array({w})}};
}

}  // namespace lockline
