// Where helper threads go (helpers.h), and the columns a row records.
#include "harness/machine/helpers.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <tuple>

namespace lockline {
namespace {

// A flag vector of small indices (negatives never members): --plan on 8192
// PUs asks it ~10 times per PU and helper.
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

// A helper on `pu`, its place columns filled.
HelperPlace PlaceOn(const PuInfo& pu) {
  HelperPlace h;
  h.pu = pu.os_index;
  h.core = pu.core;
  h.numa = pu.numa;
  h.l3 = pu.l3;
  h.cpukind = pu.cpukind;
  h.package = pu.package;
  return h;
}

// PlaceHelpersNear's steps, one helper at a time on the best free PU.
class HelperPlacer {
 public:
  HelperPlacer(const ThreadPlan& plan, const HelperRule& rule) : rule_(rule) {
    for (const PuInfo& pu : plan.pus) {
      measured_pus_.insert(pu.os_index);
      ++load_[pu.os_index];
      if (pu.core >= 0) measured_cores_.insert(pu.core);
      if (pu.package >= 0) measured_packages_.insert(pu.package);
      if (std::find(nodes_.begin(), nodes_.end(), pu.numa) == nodes_.end())
        nodes_.push_back(pu.numa);
      if (pu.l3 >= 0) node_l3s_[pu.numa].insert(pu.l3);
      auto [it, fresh] = node_kind_.emplace(pu.numa, pu.cpukind);
      if (!fresh) it->second = std::max(it->second, pu.cpukind);
    }
    for (int n : nodes_)
      if (n >= 0) {
        known_nodes_.push_back(n);
        known_node_set_.insert(n);
      }
  }

  // Pass 0 free cores, then (if allowed) pass 1 idle SMT siblings, until
  // `count` are placed; helper i serves the i-th measured node, round-robin.
  void PlaceOnFreePus(const std::vector<PuInfo>& usable, int count) {
    for (int pass = 0; pass < (rule_.allow_smt_sibling ? 2 : 1); ++pass) {
      while (static_cast<int>(out.size()) < count) {
        const int i = static_cast<int>(out.size());
        const int own = nodes_.empty()
                            ? -1
                            : nodes_[static_cast<size_t>(i) % nodes_.size()];
        const PuInfo* pu = Pick(usable, pass, own);
        if (pu == nullptr) break;
        out.push_back(Describe(*pu, own, pass));
        if (pu->core >= 0) taken_cores_.insert(pu->core);
        taken_pus_.insert(pu->os_index);
      }
    }
  }

  // If the caller allows (--oversubscribe, or a helper outside the timed
  // windows): the least-loaded measured PU, the last in plan order of equals.
  void ShareMeasuredPus(const ThreadPlan& plan, int count) {
    while (rule_.allow_shared_pu && static_cast<int>(out.size()) < count &&
           !plan.pus.empty()) {
      const PuInfo* least = nullptr;
      int least_load = INT_MAX;
      for (const PuInfo& pu : plan.pus) {
        const int l = load_[pu.os_index];
        if (l <= least_load) {
          least = &pu;
          least_load = l;
        }
      }
      ++load_[least->os_index];
      HelperPlace h = PlaceOn(*least);
      h.shares_measured_pu = true;
      h.reason = "shares measured PU " + std::to_string(least->os_index) +
                 " (no free PU; allowed by the caller)";
      h.why = h.reason;
      out.push_back(h);
    }
  }

  std::vector<HelperPlace> out;

 private:
  // Distance from measured node `from` to node `to`: the topology's matrix,
  // else 0 same node, 1 a measured package, 2 any other (unknown: 2).
  int Distance(int from, const PuInfo& to) const {
    if (from >= 0 && to.numa == from) return 0;
    if (rule_.topo != nullptr && from >= 0 && to.numa >= 0) {
      const int d = rule_.topo->NumaDistance(from, to.numa);
      if (d >= 0) return d;
    }
    return to.package >= 0 && measured_packages_.count(to.package) ? 1 : 2;
  }

  int KindOf(int node) {
    return node_kind_.count(node) ? node_kind_[node] : -1;
  }

  // Best PU for a helper of measured node `node` in `pass` (0 a free core, 1
  // an idle sibling), by the served threads' L3, their node, any measured
  // node, a kind no slower, NUMA distance, the closest kind, logical order.
  const PuInfo* Pick(const std::vector<PuInfo>& usable, int pass, int node) {
    const std::set<int>& l3s = node_l3s_[node];
    const int kind = KindOf(node);
    const PuInfo* best = nullptr;
    std::tuple<int, int, int, int, int> best_key{};
    for (const PuInfo& pu : usable) {
      if (measured_pus_.count(pu.os_index) || taken_pus_.count(pu.os_index))
        continue;
      const bool on_measured_core =
          pu.core >= 0 && measured_cores_.count(pu.core);
      if (on_measured_core != (pass == 1)) continue;
      if (pu.core >= 0 && taken_cores_.count(pu.core)) continue;
      const bool measured_node = known_node_set_.count(pu.numa) != 0;
      const int node_rank = node >= 0 && pu.numa == node ? 0
                            : measured_node              ? 1
                                                         : 2;
      const bool slower = kind >= 0 && pu.cpukind >= 0 && pu.cpukind < kind;
      const int kind_gap =
          kind >= 0 && pu.cpukind >= 0 ? std::abs(pu.cpukind - kind) : 0;
      const auto key =
          std::make_tuple(pu.l3 >= 0 && l3s.count(pu.l3) ? 0 : 1, node_rank,
                          slower ? 1 : 0, Distance(node, pu), kind_gap);
      if (best == nullptr || key < best_key) {  // ties: logical order
        best = &pu;
        best_key = key;
      }
    }
    return best;
  }

  // The helper on `pu` serving `node`, with why it sits there.
  HelperPlace Describe(const PuInfo& pu, int node, int pass) {
    HelperPlace h = PlaceOn(pu);
    h.smt_sibling_of_measured = pass == 1;
    const bool same_l3 = pu.l3 >= 0 && node_l3s_[node].count(pu.l3);
    const bool measured_node = pu.numa < 0 || known_node_set_.count(pu.numa);
    const int kind = KindOf(node);
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
      const int d = Distance(node, pu);
      h.why =
          "free core " + where + ", nearest node to the measured ones (" +
          (rule_.topo != nullptr && rule_.topo->NumaDistance(node, pu.numa) >= 0
               ? "NUMA distance " + std::to_string(d)
               : std::string(d == 1 ? "same package" : "other package")) +
          ")";
      h.reason = "free core on node " + std::to_string(pu.numa) +
                 ": the measured threads fill node(s) " +
                 NodeList(known_nodes_);
    } else {
      h.why = "idle SMT sibling of a measured thread " + where +
              ": no free core on any node";
      h.reason = "idle SMT sibling of a measured thread (no free core)";
    }
    return h;
  }

  const HelperRule& rule_;
  IndexSet measured_pus_, measured_cores_, measured_packages_;
  // The measured threads' NUMA nodes, in plan order (helpers serve them all).
  std::vector<int> nodes_, known_nodes_;
  IndexSet known_node_set_;
  std::map<int, std::set<int>> node_l3s_;  // measured node -> its threads' L3s
  std::map<int, int> node_kind_;           // measured node -> fastest kind
  std::map<int, int> load_;                // measured PU -> threads on it
  IndexSet taken_cores_, taken_pus_;
};

}  // namespace

std::vector<HelperPlace> PlaceHelpersNear(const std::vector<PuInfo>& usable,
                                          const ThreadPlan& plan, int count,
                                          const HelperRule& rule) {
  HelperPlacer placer(plan, rule);
  placer.PlaceOnFreePus(usable, count);
  placer.ShareMeasuredPus(plan, count);
  return placer.out;
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
               "to share a measured PU), as are pagevec scanner points; "
               "kernel_* points run with no evidence windows (their timer "
               "would share a measured PU; said in the row's evidence.off)"));
  return out;
}

int PlannedHelperCount(const Topology& topo) {
  return std::max(1, topo.summary().numa_nodes);
}

std::vector<HelperPlace> PlanHelperPlaces(const Topology& topo,
                                          const ThreadPlan& plan,
                                          bool oversubscribe) {
  const HelperRule rule{.allow_shared_pu = oversubscribe, .topo = &topo};
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
      const HelperRule rule{.allow_shared_pu = oversubscribe};
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

void AddHelperColumnsJson(nlohmann::json& d,
                          const std::vector<HelperPlace>& places) {
  const HelperColumns cols = HelperColumnsOf(places);
  d["helper_pu"] = cols.pu;
  d["helper_core"] = cols.core;
  d["helper_numa"] = cols.numa;
  d["helper_l3"] = cols.l3;
  d["helper_kind"] = cols.kind;
}

}  // namespace lockline
