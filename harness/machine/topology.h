// Machine topology through hwloc (host, XML, synthetic): usable PUs,
// placement orders (--pin), thread counts, plans and binding. All but
// BindThisThread work on any loaded topology (a 1024-PU plan tests on 2 cores).
#pragma once

#include <hwloc.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace lockline {

/// Bad input or a failing hwloc call; what() names it and what is accepted.
class TopologyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One PU and its containing objects' hwloc logical indices (-1: no such
/// level); os_index is the OS CPU number.
struct PuInfo {
  int os_index = -1;
  int logical_index = -1;
  int core = -1;
  int smt_rank = 0;  ///< 0 for its core's first PU, 1 for the next, ...
  int l2 = -1;       ///< shared by E-core clusters and Bulldozer modules
  int l3 = -1;
  int numa = -1;  ///< the first NUMA node in its locality
  int package = -1;
  int cpukind = -1;  ///< higher = more performant; -1 unknown or unranked
};

/// Counts of the levels that matter for placement.
struct TopologySummary {
  std::string source;  ///< "host", the XML path, or "synthetic:..."
  int packages = 0, numa_nodes = 0, l3s = 0, cores = 0, pus = 0;
  int usable_pus = 0;  ///< allowed, online and (host) in the start affinity
  /// PUs of the complete cpuset, allowed, online, in the affinity (host; -1).
  int complete_pus = 0, allowed_pus = 0, online_pus = 0, affinity_pus = -1;
  std::vector<std::string> restricted_by;  ///< what removed PUs, if anything
  int cache_line_bytes = 64;  ///< L1d/L2/L3 linesize attribute, else 64
  /// False when every level reports line size 0 (64 is then assumed).
  bool cache_line_known = true;
  int cpukinds = 0;  ///< number of hwloc cpukinds (>1 on hybrid CPUs)
  /// False when 2+ cpukinds are not all ranked (cpukind -1, OS order).
  bool cpukinds_ranked = true;
};

/// "" when the CPU kinds are ranked, else a warning for the plan and the run.
std::string UnrankedKindsWarning(const TopologySummary& s);

/// A loaded hwloc topology. Not copyable.
class Topology {
 public:
  /// Loads "host" (honouring HWLOC_FSROOT, then not is_host()), an hwloc XML
  /// file or "synthetic:DESCRIPTION", never falling back to the host; call
  /// before any binding. Throws TopologyError for a bad file (or hwloc 3
  /// XML), a bad synthetic string, or over kMaxTopologyPus PUs.
  static std::unique_ptr<Topology> Load(const std::string& spec);
  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  bool is_host() const { return is_host_; }
  hwloc_topology_t raw() const { return topo_; }
  /// Usable PUs in hwloc logical order.
  const std::vector<PuInfo>& usable_pus() const { return pus_; }
  const TopologySummary& summary() const { return summary_; }
  /// Looks up a usable PU by OS index; nullptr if not usable.
  const PuInfo* FindPu(int os_index) const;
  /// NUMA latency (ACPI SLIT: 10 local) between logical nodes; -1 unknown.
  int NumaDistance(int from, int to) const;

 private:
  Topology() = default;
  hwloc_topology_t topo_ = nullptr;
  bool is_host_ = false;
  std::vector<PuInfo> pus_;
  TopologySummary summary_;
  std::unordered_map<int, int> by_os_index_;  ///< OS index -> position in pus_
  /// NUMA latency matrix by logical index, row-major; empty when unknown.
  std::vector<int> numa_distance_;
  int numa_distance_n_ = 0;
};

/// Largest topology planned on, PUs: Linux's largest NR_CPUS (x86-64 MAXSMP).
inline constexpr int kMaxTopologyPus = 8192;

/// --oversubscribe's cap of threads per PU (=force lifts it).
inline constexpr int kMaxOversubscription = 8;

/// --pin policies. kCores: one PU per core, filling an L3, a node, then a
/// package; SMT siblings last; the most performant cpukind first. kCompact:
/// topology order. kScatter: kCores rounds, round-robin over packages, nodes,
/// L3s, cores. kNone: unbound. kList: as given. kPerL3 / kPerNuma: the first
/// PU of each.
enum class PinPolicy {
  kCores,
  kCompact,
  kScatter,
  kNone,
  kList,
  kPerL3,
  kPerNuma
};

struct PinSpec {
  PinPolicy policy = PinPolicy::kCores;
  std::vector<int> list;  ///< OS indices, for kList
  std::string text;       ///< as given, for the results
};

/// Parses "0,2,4-7" and "0-14:2" into OS indices, in order. Throws
/// TopologyError for a malformed or empty item, negatives or duplicates.
std::vector<int> ParseCpuList(const std::string& text);

/// Formats OS indices as a sorted cpulist: "0-7", "0,3", "0-254:2".
std::string FormatCpuList(std::vector<int> cpus);

/// Parses --pin=cores|compact|scatter|per-l3|per-numa|none|LIST.
PinSpec ParsePinSpec(const std::string& text);

/// The usable PUs in `pin`'s order (thread i on element i). Throws
/// TopologyError for an unusable listed PU or a missing level.
std::vector<PuInfo> PlacementOrder(const Topology& topo, const PinSpec& pin);

/// The placement of one thread count.
struct ThreadPlan {
  int threads = 0;
  std::vector<PuInfo> pus;    ///< wraps around the order when oversubscribed
  bool smt_siblings = false;  ///< two threads on PUs of one core
  bool oversubscribed = false;
  int cores = 0, l3s = 0, numa_nodes = 0, packages = 0;  ///< spanned
};

/// Plans `threads` threads on `order` (TopologyError past it without
/// oversubscribe).
ThreadPlan PlanThreads(const std::vector<PuInfo>& order, int threads,
                       bool oversubscribe);

/// Distinct NUMA nodes among `pus` (unknown, -1, not counted).
int CountNumaNodes(const std::vector<PuInfo>& pus);

/// Parses --threads=LIST|pow2|topo|max against `order` (topo: pow2 plus the
/// counts filling order[0]'s L3, node, package, and the cores), sorted.
/// TopologyError for a bad list, 0, a count over the size (without
/// oversubscribe) or kMaxOversubscription x it (without `force`).
std::vector<int> ParseThreadCounts(const std::string& text,
                                   const std::vector<PuInfo>& order,
                                   bool oversubscribe, bool force = false);

/// The --plan text: per thread count its PUs, span and helpers, then the
/// largest count's thread -> PU table. Throws like PlanThreads.
std::string FormatPlans(const Topology& topo, const PinSpec& pin,
                        const std::vector<int>& counts, bool oversubscribe);

/// Binds the calling thread to OS PU `os_index` (host only), read back;
/// throws TopologyError if it fails or differs.
void BindThisThread(const Topology& topo, int os_index);

}  // namespace lockline
