// On hwloc 2.9's C API. Every failing call is checked: hwloc keeps host
// discovery when set_xml() or set_synthetic() fails (a 1024-PU plan on 2 PUs).
#include "harness/machine/topology.h"

#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "harness/machine/helpers.h"

namespace lockline {
namespace {

// Largest number a list may name: far above NR_CPUS, low enough to refuse a
// typo like "1-99999999" instead of allocating it.
constexpr long kMaxListValue = 1 << 20;

std::string Trim(const std::string& s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  return b == std::string::npos ? ""
                                : s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Strips one pair of matching surrounding quotes.
std::string StripQuotes(std::string s) {
  s = Trim(s);
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') &&
      s.back() == s.front())
    s = Trim(s.substr(1, s.size() - 2));
  return s;
}

// RAII for an hwloc bitmap.
struct Bitmap {
  Bitmap() : b(hwloc_bitmap_alloc()) {
    if (b == nullptr)
      throw TopologyError("hwloc_bitmap_alloc failed (out of memory)");
  }
  ~Bitmap() { hwloc_bitmap_free(b); }
  Bitmap(const Bitmap&) = delete;
  Bitmap& operator=(const Bitmap&) = delete;
  hwloc_bitmap_t b;
};

// A non-negative decimal integer of at most kMaxListValue, else false.
bool ParseNumber(const std::string& s, long* out) {
  if (s.empty() || s.size() > 9 ||
      s.find_first_not_of("0123456789") != std::string::npos)
    return false;
  const long v = std::stol(s);
  if (v > kMaxListValue) return false;
  *out = v;
  return true;
}

// Comma-separated N, A-B or A-B:S (util-linux taskset), in order, no
// duplicates; `what` names the option in errors.
std::vector<int> ParseIntList(const std::string& raw, const std::string& what) {
  const std::string text = Trim(raw);
  const std::string accepted =
      "; accepted: comma-separated non-negative numbers and ranges such as "
      "0,2,4-7 or 0-14:2 (no duplicates)";
  if (text.empty()) throw TopologyError(what + " is empty" + accepted);
  // getline drops a trailing empty field ("1,2,").
  if (text.back() == ',')
    throw TopologyError(what + " '" + text + "' has an empty item" + accepted);
  std::vector<int> out;
  std::unordered_set<int> seen;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = Trim(item);
    auto bad = [&](const std::string& why) {
      return TopologyError(what + " '" + text + "': item '" + item + "' " +
                           why + accepted);
    };
    if (item.empty()) throw bad("is empty");
    long lo = 0, hi = 0, stride = 1;
    size_t dash = item.find('-');
    if (dash == std::string::npos) {
      if (!ParseNumber(item, &lo)) throw bad("is not a non-negative number");
      hi = lo;
    } else {
      const std::string a = item.substr(0, dash), rest = item.substr(dash + 1);
      const size_t colon = rest.find(':');
      const std::string b = rest.substr(0, colon);
      if (colon != std::string::npos &&
          (!ParseNumber(rest.substr(colon + 1), &stride) || stride == 0))
        throw bad("has a bad stride (want a positive number after ':')");
      if (a.empty())
        throw bad("has no range start (negative numbers are not accepted)");
      if (b.empty()) throw bad("has no range end");
      if (!ParseNumber(a, &lo) || !ParseNumber(b, &hi))
        throw bad("is not a range A-B of numbers");
      if (lo > hi) throw bad("is a reversed range (start above end)");
    }
    for (long v = lo; v <= hi; v += stride) {
      if (!seen.insert(static_cast<int>(v)).second)
        throw bad("repeats " + std::to_string(v));
      out.push_back(static_cast<int>(v));
    }
  }
  return out;
}

// The first <topology> element's version attribute ("" if none: hwloc 1.x).
std::string XmlTopologyVersion(const std::string& head) {
  size_t pos = 0;
  while ((pos = head.find("<topology", pos)) != std::string::npos) {
    const char next = pos + 9 < head.size() ? head[pos + 9] : '>';
    if (std::string(" >\t\n\r").find(next) != std::string::npos) break;
    pos += 9;
  }
  if (pos == std::string::npos) return "";
  // Up to the tag's '>' (npos - pos: to the end).
  const std::string tag = head.substr(pos, head.find('>', pos) - pos);
  const size_t v = tag.find("version=");
  if (v == std::string::npos || v + 9 > tag.size()) return "";
  const size_t close = tag.find(tag[v + 8], v + 9);
  return close == std::string::npos ? "" : tag.substr(v + 9, close - v - 9);
}

// Checks `path` is a file hwloc 2.x can parse (hwloc says only EINVAL).
void CheckXmlFile(const std::string& path) {
  const auto bad = [&](const std::string& why) {
    return TopologyError("topology '" + path + "'" + why +
                         "; accepted: host, synthetic:DESCRIPTION, or the path "
                         "of an hwloc 1.x/2.x XML file");
  };
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    throw bad(": cannot open (" + std::string(std::strerror(errno)) + ")");
  if (S_ISDIR(st.st_mode)) throw bad(" is a directory, not an XML file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw bad(": cannot read (" + std::string(std::strerror(errno)) + ")");
  std::string head(8192, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  if (head.find("<topology") == std::string::npos)
    throw bad(" is not an hwloc XML file (no <topology> element in its first " +
              std::to_string(head.size()) + " bytes)");
  const std::string version = XmlTopologyVersion(head);
  if (!version.empty() && std::atoi(version.c_str()) >= 3)
    throw TopologyError(
        "topology '" + path + "' was written by hwloc " + version +
        " (<topology version=\"" + version +
        "\">); this build uses hwloc " HWLOC_VERSION
        " and hwloc 2.x cannot read hwloc 3 XML: re-export it with hwloc 2's "
        "`lstopo --of xml FILE` or pass a file written by hwloc 2.x");
}

int LogicalOrMinus1(hwloc_obj_t obj) {
  return obj ? static_cast<int>(obj->logical_index) : -1;
}

// A PU's core, also without a Core level (each PU its own core).
long CoreKey(const PuInfo& pu) {
  return pu.core >= 0 ? pu.core : (1L << 32) + pu.logical_index;
}

// Scatter: at `level` (0 package, 1 node, 2 L3, 3 core) PUs grouped by
// object in first-seen order, each ordered recursively, merged round-robin.
std::vector<PuInfo> RoundRobin(const std::vector<PuInfo>& pus, int level) {
  if (level == 4 || pus.size() <= 1) return pus;
  auto key = [level](const PuInfo& p) -> long {
    return level == 0   ? p.package
           : level == 1 ? p.numa
           : level == 2 ? p.l3
                        : CoreKey(p);
  };
  std::vector<std::vector<PuInfo>> groups;
  std::unordered_map<long, size_t> index;
  for (const PuInfo& p : pus) {
    auto [it, inserted] = index.emplace(key(p), groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(p);
  }
  size_t longest = 0;
  for (auto& g : groups) {
    g = RoundRobin(g, level + 1);
    longest = std::max(longest, g.size());
  }
  std::vector<PuInfo> out;
  out.reserve(pus.size());
  for (size_t i = 0; i < longest; ++i)
    for (const auto& g : groups)
      if (i < g.size()) out.push_back(g[i]);
  return out;
}

std::vector<int> OsIndices(const std::vector<PuInfo>& pus) {
  std::vector<int> out;
  out.reserve(pus.size());
  for (const PuInfo& p : pus) out.push_back(p.os_index);
  return out;
}

// Length of `order`'s initial run sharing order[0]'s `field`.
int InitialRun(const std::vector<PuInfo>& order, int PuInfo::*field) {
  size_t n = 1;
  while (n < order.size() && order[n].*field == order[0].*field) ++n;
  return static_cast<int>(n);
}

// The --pin policies by name (kList has no name of its own: "list").
constexpr std::pair<const char*, PinPolicy> kPolicyNames[] = {
    {"cores", PinPolicy::kCores},     {"compact", PinPolicy::kCompact},
    {"scatter", PinPolicy::kScatter}, {"none", PinPolicy::kNone},
    {"list", PinPolicy::kList},       {"per-l3", PinPolicy::kPerL3},
    {"per-numa", PinPolicy::kPerNuma}};

const char* PolicyName(PinPolicy p) {
  for (const auto& [name, policy] : kPolicyNames)
    if (policy == p) return name;
  return "?";
}

// `prefix` + "N threads exceed the M usable PUs ...; pass --oversubscribe".
TopologyError TooManyThreads(const std::string& prefix, int threads,
                             const std::vector<PuInfo>& order) {
  return TopologyError(prefix + std::to_string(threads) +
                       " threads exceed the " + std::to_string(order.size()) +
                       " usable PUs of the placement (" +
                       FormatCpuList(OsIndices(order)) +
                       "); pass --oversubscribe to run more threads than PUs");
}

std::string UsableList(const Topology& topo) {
  return FormatCpuList(OsIndices(topo.usable_pus()));
}

// The "host" source's name; sets IS_THISSYSTEM in *flags only when no
// HWLOC_* variable redirects discovery to another machine.
std::string HostSource(unsigned long* flags) {
  std::string source = "host";
  const char* fsroot = std::getenv("HWLOC_FSROOT");
  bool redirected =
      fsroot != nullptr && *fsroot != '\0' && std::string(fsroot) != "/";
  if (redirected) source = std::string("host (HWLOC_FSROOT=") + fsroot + ")";
  for (const char* var :
       {"HWLOC_XMLFILE", "HWLOC_SYNTHETIC", "HWLOC_CPUID_PATH"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') {
      redirected = true;
      source += std::string(" (") + var + "=" + v + ")";
    }
  }
  if (!redirected) *flags |= HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM;
  return source;
}

// Hands hwloc a synthetic description, refusing giant ones before it
// allocates them; returns "synthetic:DESCRIPTION".
std::string SetSynthetic(hwloc_topology_t topo, const std::string& desc) {
  double total = 1;
  std::istringstream levels(desc);
  std::string level;
  while (levels >> level) {
    const size_t colon = level.find(':');
    if (colon == std::string::npos) continue;
    const double n = std::strtod(level.c_str() + colon + 1, nullptr);
    if (n > 0) total *= n;
  }
  if (total > kMaxTopologyPus)
    throw TopologyError(
        "synthetic topology '" + desc + "' has " +
        std::to_string(static_cast<long long>(std::min(total, 1e18))) +
        " PUs; accepted: up to " + std::to_string(kMaxTopologyPus) + " PUs");
  if (desc.empty() || hwloc_topology_set_synthetic(topo, desc.c_str()) != 0)
    throw TopologyError("bad synthetic topology '" + desc +
                        "': hwloc_topology_set_synthetic rejected it; "
                        "accepted: hwloc synthetic "
                        "syntax, levels TYPE:COUNT from the top, e.g. "
                        "synthetic:\"pack:4 numa:2 core:16 pu:2\"");
  return "synthetic:" + desc;
}

// Hands hwloc an XML file, checked first (CheckXmlFile). Returns the path.
std::string SetXml(hwloc_topology_t topo, const std::string& path) {
  if (path.empty())
    throw TopologyError(
        "topology spec is empty; accepted: host, synthetic:DESCRIPTION, or "
        "an hwloc XML path");
  CheckXmlFile(path);
  if (hwloc_topology_set_xml(topo, path.c_str()) != 0)
    throw TopologyError(
        "topology '" + path +
        "': hwloc " HWLOC_VERSION
        " cannot parse it as hwloc XML (hwloc_topology_set_xml: " +
        std::strerror(errno) +
        "); accepted: an XML written by hwloc 1.x/2.x "
        "`lstopo --of xml`");
  return path;
}

// Sets the flags, loads, refuses more than kMaxTopologyPus; returns the
// complete cpuset's PUs. Without INCLUDE_DISALLOWED hwloc keeps only allowed
// PUs (offline PUs are never objects in hwloc 2).
int LoadChecked(hwloc_topology_t topo, unsigned long flags,
                const std::string& source) {
  if (hwloc_topology_set_flags(topo, flags) != 0)
    throw TopologyError(std::string("hwloc_topology_set_flags failed: ") +
                        std::strerror(errno));
  if (hwloc_topology_load(topo) != 0)
    throw TopologyError("topology '" + source +
                        "': hwloc_topology_load failed (" +
                        std::strerror(errno) + ")");
  const int complete_pus =
      hwloc_bitmap_weight(hwloc_topology_get_complete_cpuset(topo));
  if (complete_pus > kMaxTopologyPus ||
      hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU) > kMaxTopologyPus)
    throw TopologyError(
        "topology '" + source + "' has " + std::to_string(complete_pus) +
        " PUs; accepted: up to " + std::to_string(kMaxTopologyPus) + " PUs");
  return complete_pus;
}

// Online PUs: sysfs on the host (hwloc drops disallowed ones), else the set.
void OnlinePus(bool is_host, hwloc_const_cpuset_t present, Bitmap* online) {
  hwloc_bitmap_copy(online->b, present);
  if (!is_host) return;
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string text;
  if (in && std::getline(in, text) &&
      hwloc_bitmap_list_sscanf(online->b, Trim(text).c_str()) != 0)
    hwloc_bitmap_copy(online->b, present);
}

// cpukind indices rank performance only when hwloc knows every kind's
// efficiency; otherwise PUs report -1, so placement prefers no arbitrary kind.
bool KindsRanked(hwloc_topology_t topo) {
  const int nr_kinds = hwloc_cpukinds_get_nr(topo, 0);
  bool ranked = nr_kinds >= 1;
  for (int k = 0; nr_kinds > 1 && k < nr_kinds; ++k) {
    int efficiency = -1;
    if (hwloc_cpukinds_get_info(topo, static_cast<unsigned>(k), nullptr,
                                &efficiency, nullptr, nullptr, 0) != 0 ||
        efficiency < 0)
      ranked = false;
  }
  return ranked;
}

// One usable PU; `usable_in_core` counts the usable PUs seen per core.
PuInfo DescribePu(hwloc_topology_t topo, hwloc_obj_t pu, bool kinds_ranked,
                  std::unordered_map<int, int>& usable_in_core) {
  const auto ancestor = [&](hwloc_obj_type_t type) {
    return LogicalOrMinus1(hwloc_get_ancestor_obj_by_type(topo, type, pu));
  };
  PuInfo info;
  info.os_index = static_cast<int>(pu->os_index);
  info.logical_index = static_cast<int>(pu->logical_index);
  info.core = ancestor(HWLOC_OBJ_CORE);
  // Rank among the core's usable PUs, so a core whose first hardware thread
  // is disallowed still gets a rank-0 thread in the `cores` order.
  if (info.core >= 0) info.smt_rank = usable_in_core[info.core]++;
  info.l2 = ancestor(HWLOC_OBJ_L2CACHE);
  info.l3 = ancestor(HWLOC_OBJ_L3CACHE);
  info.package = ancestor(HWLOC_OBJ_PACKAGE);
  // NUMA nodes are memory children, not ancestors: take the lowest OS index
  // of the PU's nodeset (-1 without an allowed local node).
  int node_os = hwloc_bitmap_first(pu->nodeset);
  if (node_os >= 0)
    info.numa = LogicalOrMinus1(hwloc_get_numanode_obj_by_os_index(
        topo, static_cast<unsigned>(node_os)));
  info.cpukind =
      kinds_ranked ? hwloc_cpukinds_get_by_cpuset(topo, pu->cpuset, 0) : -1;
  if (info.cpukind < 0) info.cpukind = -1;
  return info;
}

// The usable PUs in hwloc logical order; throws when there is none.
std::vector<PuInfo> UsablePus(hwloc_topology_t topo,
                              hwloc_const_cpuset_t allowed,
                              hwloc_const_cpuset_t present,
                              const Bitmap* affinity, bool kinds_ranked,
                              const std::string& source) {
  std::vector<PuInfo> out;
  std::unordered_map<int, int> usable_in_core;
  for (hwloc_obj_t pu = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, nullptr);
       pu != nullptr; pu = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, pu)) {
    if (hwloc_bitmap_isset(allowed, pu->os_index) &&
        hwloc_bitmap_isset(present, pu->os_index) &&
        (affinity == nullptr || hwloc_bitmap_isset(affinity->b, pu->os_index)))
      out.push_back(DescribePu(topo, pu, kinds_ranked, usable_in_core));
  }
  if (out.empty())
    throw TopologyError("topology '" + source +
                        "' has no usable PU (the allowed cpuset, the online "
                        "PUs and the affinity mask do not intersect)");
  return out;
}

// What removed PUs from the complete set, in order (restricted_by).
std::vector<std::string> RestrictedBy(const TopologySummary& s, bool is_host,
                                      const Bitmap& online,
                                      hwloc_const_cpuset_t present,
                                      hwloc_const_cpuset_t allowed,
                                      const Bitmap* affinity) {
  std::vector<std::string> out;
  Bitmap set;
  hwloc_bitmap_and(set.b, online.b, present);
  if (is_host) {
    if (s.online_pus < s.complete_pus) out.push_back("online");
    // hwloc drops disallowed PUs from its topology cpuset on the host.
    if (!hwloc_bitmap_isincluded(set.b, allowed) ||
        hwloc_bitmap_weight(present) < s.online_pus)
      out.push_back("allowed cpuset");
  } else {
    // A file records PUs missing from its cpuset but not whether they were
    // offline or outside the cpuset of the machine it was taken on.
    if (hwloc_bitmap_weight(present) < s.complete_pus)
      out.push_back("offline or allowed cpuset");
    if (!hwloc_bitmap_isincluded(present, allowed))
      out.push_back("allowed cpuset");
  }
  hwloc_bitmap_and(set.b, set.b, allowed);
  if (affinity != nullptr && !hwloc_bitmap_isincluded(set.b, affinity->b))
    out.push_back("affinity mask");
  return out;
}

void CountLevels(hwloc_topology_t topo, TopologySummary* s) {
  auto count = [&](hwloc_obj_type_t type) {
    return std::max(0, hwloc_get_nbobjs_by_type(topo, type));
  };
  s->packages = count(HWLOC_OBJ_PACKAGE);
  s->numa_nodes = count(HWLOC_OBJ_NUMANODE);
  s->l3s = count(HWLOC_OBJ_L3CACHE);
  s->cores = count(HWLOC_OBJ_CORE);
  // No core level (synthetic "pack:1 pu:4"): each PU is a core, as in plans.
  if (s->cores == 0) s->cores = count(HWLOC_OBJ_PU);
  s->pus = count(HWLOC_OBJ_PU);
}

// hwloc's first NUMA latency matrix (SLIT), row-major by logical index, or {}.
std::vector<int> NumaLatencies(hwloc_topology_t topo, int nodes) {
  unsigned nr = 1;
  hwloc_distances_s* dist[1] = {nullptr};
  if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nr, dist,
                                  HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) != 0 ||
      nr < 1 || dist[0] == nullptr)
    return {};
  std::vector<int> out(static_cast<size_t>(nodes) * nodes, -1);
  const unsigned n = dist[0]->nbobjs;
  for (unsigned i = 0; i < n; ++i)
    for (unsigned j = 0; j < n; ++j) {
      const hwloc_obj_t a = dist[0]->objs[i], b = dist[0]->objs[j];
      if (a == nullptr || b == nullptr ||
          static_cast<int>(a->logical_index) >= nodes ||
          static_cast<int>(b->logical_index) >= nodes)
        continue;
      out[a->logical_index * static_cast<size_t>(nodes) + b->logical_index] =
          static_cast<int>(
              std::min<hwloc_uint64_t>(dist[0]->values[i * n + j], 1u << 30));
    }
  hwloc_distances_release(topo, dist[0]);
  return out;
}

// Coherence granularity: the first cache level reporting a line size.
void CacheLine(hwloc_topology_t topo, TopologySummary* s) {
  s->cache_line_bytes = 64;
  s->cache_line_known = false;
  for (hwloc_obj_type_t type :
       {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE}) {
    hwloc_obj_t c = hwloc_get_obj_by_type(topo, type, 0);
    if (c != nullptr && c->attr != nullptr && c->attr->cache.linesize > 0) {
      s->cache_line_bytes = static_cast<int>(c->attr->cache.linesize);
      s->cache_line_known = true;
      return;
    }
  }
}

}  // namespace

std::string FormatCpuList(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  size_t i = 0;
  while (i < cpus.size()) {
    if (!out.empty()) out += ',';
    // Longest arithmetic run from i: A-B when contiguous, A-B:S (3 or more)
    // with a larger step, as util-linux taskset and ParseCpuList accept.
    size_t j = i + 1;
    if (j < cpus.size()) {
      const int step = cpus[j] - cpus[i];
      while (j + 1 < cpus.size() && cpus[j + 1] - cpus[j] == step) ++j;
      if (step == 1 || j - i >= 2) {
        out += std::to_string(cpus[i]) + "-" + std::to_string(cpus[j]) +
               (step == 1 ? "" : ":" + std::to_string(step));
        i = j + 1;
        continue;
      }
    }
    out += std::to_string(cpus[i]);
    ++i;
  }
  return out;
}

std::unique_ptr<Topology> Topology::Load(const std::string& raw_spec) {
  const std::string spec = Trim(raw_spec);
  std::unique_ptr<Topology> t(new Topology());
  if (hwloc_topology_init(&t->topo_) != 0) {
    t->topo_ = nullptr;
    throw TopologyError(std::string("hwloc_topology_init failed: ") +
                        std::strerror(errno));
  }
  unsigned long flags = 0;
  const std::string synthetic = "synthetic:";
  const std::string source =
      spec == "host" ? HostSource(&flags)
      : spec.compare(0, synthetic.size(), synthetic) == 0
          ? SetSynthetic(t->topo_, StripQuotes(spec.substr(synthetic.size())))
          : SetXml(t->topo_, spec);
  const int complete_pus = LoadChecked(t->topo_, flags, source);
  t->is_host_ = spec == "host" && hwloc_topology_is_thissystem(t->topo_) != 0;
  hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(t->topo_);
  hwloc_const_cpuset_t present = hwloc_topology_get_topology_cpuset(t->topo_);
  Bitmap affinity, online;
  // The start affinity mask (taskset, numactl; hwloc reads the thread's
  // sched_getaffinity): the allowed cpuset is the cgroup's, wider than this.
  const bool have_affinity =
      t->is_host_ &&
      hwloc_get_cpubind(t->topo_, affinity.b, HWLOC_CPUBIND_THREAD) == 0;
  OnlinePus(t->is_host_, present, &online);
  const bool kinds_ranked = KindsRanked(t->topo_);
  t->pus_ =
      UsablePus(t->topo_, allowed, present, have_affinity ? &affinity : nullptr,
                kinds_ranked, source);
  for (size_t i = 0; i < t->pus_.size(); ++i)
    t->by_os_index_[t->pus_[i].os_index] = static_cast<int>(i);

  TopologySummary& s = t->summary_;
  s.source = source;
  CountLevels(t->topo_, &s);
  s.usable_pus = static_cast<int>(t->pus_.size());
  s.online_pus = hwloc_bitmap_weight(online.b);
  s.complete_pus = std::max({complete_pus, s.pus, s.online_pus});
  s.allowed_pus = hwloc_bitmap_weight(allowed);
  s.affinity_pus = have_affinity ? hwloc_bitmap_weight(affinity.b) : -1;
  s.restricted_by = RestrictedBy(s, t->is_host_, online, present, allowed,
                                 have_affinity ? &affinity : nullptr);
  s.cpukinds = std::max(0, hwloc_cpukinds_get_nr(t->topo_, 0));
  s.cpukinds_ranked = s.cpukinds <= 1 || kinds_ranked;
  t->numa_distance_ = NumaLatencies(t->topo_, s.numa_nodes);
  if (!t->numa_distance_.empty()) t->numa_distance_n_ = s.numa_nodes;
  CacheLine(t->topo_, &s);
  return t;
}

Topology::~Topology() {
  if (topo_ != nullptr) hwloc_topology_destroy(topo_);
}

int Topology::NumaDistance(int from, int to) const {
  if (from < 0 || to < 0 || from >= numa_distance_n_ || to >= numa_distance_n_)
    return -1;
  return numa_distance_[static_cast<size_t>(from) * numa_distance_n_ +
                        static_cast<size_t>(to)];
}

std::string UnrankedKindsWarning(const TopologySummary& s) {
  if (s.cpukinds_ranked || s.cpukinds <= 1) return "";
  return std::to_string(s.cpukinds) +
         " CPU kinds found but not ranked: sweep order is by OS index; "
         "--pin=LIST sets it";
}

const PuInfo* Topology::FindPu(int os_index) const {
  auto it = by_os_index_.find(os_index);
  return it == by_os_index_.end() ? nullptr
                                  : &pus_[static_cast<size_t>(it->second)];
}

std::vector<int> ParseCpuList(const std::string& text) {
  return ParseIntList(text, "CPU list");
}

PinSpec ParsePinSpec(const std::string& raw) {
  PinSpec pin;
  pin.text = Trim(raw);
  const std::string& t = pin.text;
  const auto named =
      std::find_if(std::begin(kPolicyNames), std::end(kPolicyNames),
                   [&](const auto& n) { return t == n.first && t != "list"; });
  if (named != std::end(kPolicyNames)) {
    pin.policy = named->second;
  } else if (!t.empty() && t[0] >= '0' && t[0] <= '9') {
    pin.policy = PinPolicy::kList;
    try {
      pin.list = ParseIntList(t, "--pin CPU list");
    } catch (const TopologyError& e) {
      throw TopologyError(
          std::string(e.what()) +
          "; --pin also accepts cores, compact, scatter, per-l3, per-numa or "
          "none");
    }
  } else {
    throw TopologyError("--pin='" + t +
                        "' is not a placement; accepted: cores, compact, "
                        "scatter, per-l3, per-numa, none, or a CPU "
                        "list of OS indices such as 0,2,4-7");
  }
  return pin;
}

std::vector<PuInfo> PlacementOrder(const Topology& topo, const PinSpec& pin) {
  const std::vector<PuInfo>& pus =
      topo.usable_pus();  // logical (depth-first tree) order
  switch (pin.policy) {
    case PinPolicy::kCompact:
      return pus;
    case PinPolicy::kPerL3:
    case PinPolicy::kPerNuma: {
      // The first usable PU of each L3 / node in logical order.
      const bool l3 = pin.policy == PinPolicy::kPerL3;
      std::vector<PuInfo> out;
      std::unordered_set<int> seen;
      for (const PuInfo& p : pus) {
        const int obj = l3 ? p.l3 : p.numa;
        if (obj >= 0 && seen.insert(obj).second) out.push_back(p);
      }
      if (out.empty())
        throw TopologyError(
            "--pin=" + pin.text + ": topology '" + topo.summary().source +
            "' has no " + (l3 ? "L3 cache" : "NUMA node") +
            " level over its usable PUs; accepted there: cores, compact, "
            "scatter, none or a CPU list");
      return out;
    }
    case PinPolicy::kList: {
      std::vector<PuInfo> out;
      out.reserve(pin.list.size());
      for (int os : pin.list) {
        const PuInfo* p = topo.FindPu(os);
        if (p == nullptr)
          throw TopologyError(
              "--pin='" + pin.text + "': PU " + std::to_string(os) +
              " is not usable on " + topo.summary().source +
              "; usable PUs (allowed, online and in the affinity mask "
              "lockline started with): " +
              UsableList(topo));
        out.push_back(*p);
      }
      if (out.empty()) throw TopologyError("--pin CPU list is empty");
      return out;
    }
    case PinPolicy::kScatter:
    case PinPolicy::kCores:
    case PinPolicy::kNone: {
      // Rounds: every core's first usable thread, then every core's second,
      // ...; in a round the most performant cpukind first, then depth-first
      // logical order: `cores` fills an L3, a NUMA node, a package in turn.
      std::vector<PuInfo> out = pus;
      std::stable_sort(out.begin(), out.end(),
                       [](const PuInfo& a, const PuInfo& b) {
                         if (a.smt_rank != b.smt_rank)
                           return a.smt_rank < b.smt_rank;
                         return a.cpukind > b.cpukind;
                       });
      if (pin.policy != PinPolicy::kScatter) return out;
      // Scatter: each (smt_rank, cpukind) round through RoundRobin.
      for (auto i = out.begin(); i != out.end();) {
        const auto j = std::find_if(i, out.end(), [&](const PuInfo& p) {
          return p.smt_rank != i->smt_rank || p.cpukind != i->cpukind;
        });
        const std::vector<PuInfo> round = RoundRobin({i, j}, 0);
        i = std::copy(round.begin(), round.end(), i);
      }
      return out;
    }
  }
  return pus;
}

ThreadPlan PlanThreads(const std::vector<PuInfo>& order, int threads,
                       bool oversubscribe) {
  if (threads <= 0)
    throw TopologyError("thread count " + std::to_string(threads) +
                        " is not positive");
  if (order.empty())
    throw TopologyError("cannot plan threads on an empty placement order");
  const size_t n = order.size();
  if (static_cast<size_t>(threads) > n && !oversubscribe)
    throw TooManyThreads("", threads, order);
  ThreadPlan plan;
  plan.threads = threads;
  plan.oversubscribed = static_cast<size_t>(threads) > n;
  plan.pus.reserve(static_cast<size_t>(threads));
  std::unordered_map<long, int>
      core_first_pu;  // core -> OS index of the first PU used on it
  std::unordered_set<int> l3s, nodes, packages;
  for (int i = 0; i < threads; ++i) {
    const PuInfo& p = order[static_cast<size_t>(i) % n];
    plan.pus.push_back(p);
    auto [it, inserted] = core_first_pu.emplace(CoreKey(p), p.os_index);
    if (!inserted && it->second != p.os_index) plan.smt_siblings = true;
    if (p.l3 >= 0) l3s.insert(p.l3);
    if (p.numa >= 0) nodes.insert(p.numa);
    if (p.package >= 0) packages.insert(p.package);
  }
  plan.cores = static_cast<int>(core_first_pu.size());
  plan.l3s = static_cast<int>(l3s.size());
  plan.numa_nodes = static_cast<int>(nodes.size());
  plan.packages = static_cast<int>(packages.size());
  return plan;
}

int CountNumaNodes(const std::vector<PuInfo>& pus) {
  std::unordered_set<int> nodes;
  for (const PuInfo& p : pus)
    if (p.numa >= 0) nodes.insert(p.numa);
  return static_cast<int>(nodes.size());
}

std::vector<int> ParseThreadCounts(const std::string& raw,
                                   const std::vector<PuInfo>& order,
                                   bool oversubscribe, bool force) {
  const std::string text = Trim(raw);
  if (order.empty())
    throw TopologyError("cannot choose thread counts: no usable PU");
  const int n = static_cast<int>(order.size());
  std::vector<int> counts;
  if (text == "max") return {n};
  if (text == "pow2" || text == "topo") {
    for (long c = 1; c <= n; c *= 2) counts.push_back(static_cast<int>(c));
    counts.push_back(n);  // the whole placement is always measured
    if (text == "topo") {
      // Where order[0]'s L3 / NUMA node / package fill, all cores, all PUs.
      for (int PuInfo::*level : {&PuInfo::l3, &PuInfo::numa, &PuInfo::package})
        if (order[0].*level >= 0) counts.push_back(InitialRun(order, level));
      std::unordered_set<long> cores;
      for (const PuInfo& p : order) cores.insert(CoreKey(p));
      counts.push_back(static_cast<int>(cores.size()));
    }
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    return counts;
  }
  if (text.empty() || text[0] < '0' || text[0] > '9')
    throw TopologyError(
        "--threads='" + text +
        "' is not accepted; accepted: max, pow2, topo, or a list of positive "
        "counts such as 1,2,8 or 1-4");
  counts = ParseIntList(text, "--threads list");
  for (int c : counts) {
    if (c == 0)
      throw TopologyError("--threads='" + text +
                          "': 0 threads; counts must be at least 1");
    if (c > n && oversubscribe && !force &&
        c > static_cast<long>(kMaxOversubscription) * n)
      throw TopologyError(
          "--threads='" + text + "': " + std::to_string(c) + " threads are " +
          "more than " + std::to_string(kMaxOversubscription) + "x the " +
          std::to_string(n) + " usable PUs of the placement (at most " +
          std::to_string(kMaxOversubscription * n) +
          " with --oversubscribe); pass --oversubscribe=force to run them");
    if (c > n && !oversubscribe)
      throw TooManyThreads("--threads='" + text + "': ", c, order);
  }
  std::sort(counts.begin(), counts.end());
  return counts;
}

std::string FormatPlans(const Topology& topo, const PinSpec& pin,
                        const std::vector<int>& counts, bool oversubscribe) {
  const std::vector<PuInfo> order = PlacementOrder(topo, pin);
  const TopologySummary& s = topo.summary();
  std::string restricted;
  for (const std::string& why : s.restricted_by)
    restricted += (restricted.empty() ? "; restricted by " : ", ") + why;
  std::ostringstream out;
  out << "topology " << s.source << ": " << s.packages << " packages, "
      << s.numa_nodes << " NUMA nodes, " << s.l3s << " L3s, " << s.cores
      << " cores, " << s.pus << " PUs (" << s.usable_pus << " of "
      << s.complete_pus << " usable: " << UsableList(topo) << restricted
      << "), cache line "
      << (s.cache_line_known
              ? std::to_string(s.cache_line_bytes) + " bytes"
              : "unknown (assumed " + std::to_string(s.cache_line_bytes) +
                    " for padding)")
      << ", cpukinds " << s.cpukinds << "\n";
  if (const std::string kinds = UnrankedKindsWarning(s); !kinds.empty())
    out << "warning: " << kinds << "\n";
  out << "placement --pin="
      << (pin.text.empty() ? PolicyName(pin.policy) : pin.text)
      << (pin.policy == PinPolicy::kNone
              ? " (threads not bound; cores order shown)"
              : "")
      << ": thread i runs on row i of the table below; N threads use rows "
         "0..N-1"
      << (oversubscribe ? " (wrapping around when N exceeds the rows)" : "")
      << "\n";
  int largest = 0;
  for (int c : counts) {
    const ThreadPlan plan = PlanThreads(order, c, oversubscribe);
    largest = std::max(largest, c);
    // Irregular sets make cpulists of thousands of characters: past
    // kMaxListChars the table's rows 0..c-1 are the reference.
    constexpr size_t kMaxListChars = 96;
    std::string list = FormatCpuList(OsIndices(plan.pus));
    if (list.size() > kMaxListChars) {
      size_t cut = list.rfind(',', kMaxListChars);
      list = list.substr(0, cut == std::string::npos ? kMaxListChars : cut) +
             ",... (table rows 0-" +
             std::to_string(std::min(c, static_cast<int>(order.size())) - 1) +
             ")";
    }
    out << "threads " << c << ": PUs " << list << " | cores " << plan.cores
        << ", L3s " << plan.l3s << ", NUMA nodes " << plan.numa_nodes
        << ", packages " << plan.packages
        << ", SMT siblings: " << (plan.smt_siblings ? "yes" : "no")
        << (plan.oversubscribed ? ", oversubscribed: yes" : "") << "\n";
    // Where each helper thread would run, and why.
    const HelperRule rule{.allow_shared_pu = oversubscribe, .topo = &topo};
    const std::vector<std::string> helpers =
        DescribeHelperPlaces(PlanHelperPlaces(topo, plan, oversubscribe),
                             PlannedHelperCount(topo), rule);
    for (size_t h = 0; h < helpers.size(); ++h)
      out << "  helper " << h << " (" << HelperRole(static_cast<int>(h))
          << "): " << helpers[h] << "\n";
  }
  const size_t rows = std::min(order.size(), static_cast<size_t>(largest));
  out << std::setw(7) << "thread" << std::setw(7) << "pu" << std::setw(7)
      << "core" << std::setw(5) << "smt" << std::setw(6) << "L3" << std::setw(6)
      << "NUMA" << std::setw(8) << "package" << std::setw(6) << "kind"
      << "\n";
  for (size_t i = 0; i < rows; ++i) {
    const PuInfo& p = order[i];
    out << std::setw(7) << i << std::setw(7) << p.os_index << std::setw(7)
        << p.core << std::setw(5) << p.smt_rank << std::setw(6) << p.l3
        << std::setw(6) << p.numa << std::setw(8) << p.package << std::setw(6)
        << p.cpukind << "\n";
  }
  return out.str();
}

void BindThisThread(const Topology& topo, int os_index) {
  const std::string what = "binding to PU " + std::to_string(os_index);
  if (!topo.is_host())
    throw TopologyError(
        what + ": topology '" + topo.summary().source +
        "' is not this machine's (XML, synthetic or HWLOC_FSROOT); binding "
        "needs --topology=host");
  if (topo.FindPu(os_index) == nullptr)
    throw TopologyError(what +
                        ": PU is not usable; usable PUs: " + UsableList(topo));
  // sched_setaffinity with a mask on the stack, not hwloc_set_cpubind, whose
  // unchecked allocation of the kernel mask SIGSEGVs near an address-space
  // limit (ulimit -v). Nothing here allocates except the error messages.
  constexpr int kBits = kMaxTopologyPus;
  constexpr size_t kWordBits = 8 * sizeof(unsigned long);
  unsigned long mask[kBits / kWordBits] = {};
  if (os_index < 0 || os_index >= kBits)
    throw TopologyError(what + ": OS index outside 0-" +
                        std::to_string(kBits - 1));
  mask[os_index / kWordBits] = 1ul << (os_index % kWordBits);
  const auto failed = [&](const char* call) {
    const int err = errno;
    return TopologyError(what + ": " + call + " failed (errno " +
                         std::to_string(err) + ", " + std::strerror(err) + ")");
  };
  if (sched_setaffinity(0, sizeof mask, reinterpret_cast<cpu_set_t*>(mask)))
    throw failed("sched_setaffinity");
  unsigned long got[kBits / kWordBits] = {};
  if (sched_getaffinity(0, sizeof got, reinterpret_cast<cpu_set_t*>(got)) < 0)
    throw failed("sched_getaffinity");
  if (std::memcmp(got, mask, sizeof mask) != 0) {
    std::vector<int> pus;
    for (int c = 0; c < kBits; ++c)
      if (got[c / kWordBits] >> (c % kWordBits) & 1ul) pus.push_back(c);
    throw TopologyError(what + ": read-back binding is PUs " +
                        FormatCpuList(pus) +
                        " (errno 0: the kernel or a cgroup changed the mask)");
  }
}

}  // namespace lockline
