// Machine topology through hwloc: loading (host, XML file, synthetic), the
// usable PUs, placement orders (--pin), thread-count lists (--threads), plans
// (--plan) and thread binding with read-back. Everything but BindThisThread
// works on any loaded topology, so a 1024-PU plan is tested on 2 cores.
#pragma once

#include <hwloc.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace lockline {

/// Bad user input or a failing hwloc call; what() names the bad value and what
/// is accepted.
class TopologyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One processing unit (hardware thread) and the objects containing it. Indices
/// are hwloc logical indices of the containing object (-1 when the topology has
/// no such level), except os_index which is the OS CPU number used by taskset /
/// sched_setaffinity.
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
  /// PUs of the complete cpuset, allowed, online, and (host only, else -1)
  /// in the start affinity mask.
  int complete_pus = 0, allowed_pus = 0, online_pus = 0, affinity_pus = -1;
  /// Which of "allowed cpuset", "online", "affinity mask" removed PUs from the
  /// complete set (empty when every PU is usable).
  std::vector<std::string> restricted_by;
  int cache_line_bytes = 64;  ///< L1d/L2/L3 linesize attribute, else 64
  /// False when every cache level reports line size 0 (some POWER XML
  /// exports): cache_line_bytes is then the assumed 64, not a measurement.
  bool cache_line_known = true;
  int cpukinds = 0;  ///< number of hwloc cpukinds (>1 on hybrid CPUs)
  /// False when there are 2+ cpukinds and hwloc knows no efficiency for at
  /// least one (no CoreType, no frequency): PuInfo::cpukind is then -1
  /// everywhere and the `cores` order falls back to OS order.
  bool cpukinds_ranked = true;
};

/// "" when the CPU kinds are ranked (or there is one kind), else "N CPU kinds
/// found but not ranked: sweep order is by OS index; --pin=LIST sets it", for
/// the plan and the run's warnings.
std::string UnrankedKindsWarning(const TopologySummary& s);

/// A loaded hwloc topology. Not copyable.
class Topology {
 public:
  /// Loads "host", an hwloc XML file, or "synthetic:DESCRIPTION" (e.g.
  /// "pack:4 numa:2 core:16 pu:2"), never falling back to the host. Throws
  /// TopologyError for a missing, unreadable or invalid file, one written by
  /// hwloc 3.x, a bad synthetic string, or more than kMaxTopologyPus PUs.
  /// "host" honours HWLOC_FSROOT (then is_host() is false: no binding). On
  /// the host, PUs outside the start affinity mask are not usable: call Load
  /// before any thread binds itself.
  static std::unique_ptr<Topology> Load(const std::string& spec);
  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  bool is_host() const { return is_host_; }
  hwloc_topology_t raw() const { return topo_; }
  /// Usable PUs in hwloc logical order (allowed cpuset ∩ online ∩, on the
  /// host, the start affinity mask).
  const std::vector<PuInfo>& usable_pus() const { return pus_; }
  const TopologySummary& summary() const { return summary_; }
  /// Looks up a usable PU by OS index; nullptr if not usable.
  const PuInfo* FindPu(int os_index) const;
  /// Relative NUMA latency between the nodes of logical indices `from` and
  /// `to` (hwloc's NUMANode latency matrix, e.g. the ACPI SLIT: 10 local);
  /// -1 when the topology has no matrix or an index is out of range.
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

/// Largest topology lockline plans on, in PUs: 8192, Linux's largest
/// NR_CPUS (x86-64 MAXSMP; arm64 allows 4096), the largest machine Linux
/// runs on; planning far beyond it (`--list --full`, `--plan`) takes minutes.
inline constexpr int kMaxTopologyPus = 8192;

/// --oversubscribe runs at most this many threads per PU of the placement;
/// --oversubscribe=force lifts the cap.
inline constexpr int kMaxOversubscription = 8;

/// --pin policies. kCores: one PU per core, filling an L3, a NUMA node, then a
/// package; SMT siblings once every core has a thread; the most performant
/// cpukind first. kCompact: topology order. kScatter: the kCores rounds, each
/// ordered round-robin over packages, then nodes, L3s and cores (threads
/// 0..P-1 land on P packages). kNone: not bound (kCores order reported).
/// kList: OS indices as given. kPerL3 / kPerNuma: the first usable PU of each
/// L3 / NUMA node.
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

/// Parses "0,2,4-7" (and util-linux stride ranges "0-14:2") into OS indices, in
/// the order given. Throws TopologyError for "0-", "a", negative numbers,
/// reversed ranges, duplicates, an empty item, or an empty list.
std::vector<int> ParseCpuList(const std::string& text);

/// Formats OS indices as a sorted, de-duplicated cpulist: "0-7", "0,3", and
/// arithmetic runs of 3+ with a step above 1 as "0-254:2" (util-linux taskset
/// stride syntax, which ParseCpuList also accepts).
std::string FormatCpuList(std::vector<int> cpus);

/// Parses --pin=cores|compact|scatter|per-l3|per-numa|none|LIST. Throws
/// TopologyError naming the bad value.
PinSpec ParsePinSpec(const std::string& text);

/// The usable PUs in the order threads are placed by `pin` (thread i on
/// element i). Throws TopologyError for a listed PU that is not usable, or
/// kPerL3 / kPerNuma without that level.
std::vector<PuInfo> PlacementOrder(const Topology& topo, const PinSpec& pin);

/// The placement of one thread count.
struct ThreadPlan {
  int threads = 0;
  std::vector<PuInfo> pus;    ///< wraps around the order when oversubscribed
  bool smt_siblings = false;  ///< two threads on PUs of one core
  bool oversubscribed = false;
  int cores = 0, l3s = 0, numa_nodes = 0, packages = 0;  ///< spanned
};

/// Plans `threads` threads on `order`. Throws TopologyError if threads exceeds
/// order.size() and oversubscribe is false (naming both numbers and the
/// --oversubscribe flag).
ThreadPlan PlanThreads(const std::vector<PuInfo>& order, int threads,
                       bool oversubscribe);

/// Distinct NUMA nodes among `pus` (unknown, -1, not counted).
int CountNumaNodes(const std::vector<PuInfo>& pus);

/// Parses --threads=LIST|pow2|topo|max against the placement `order`. max:
/// its size; pow2: 1, 2, 4, ... plus its size; topo: pow2 plus where the
/// order's prefix fills order[0]'s L3, NUMA node and package, and the distinct
/// cores; LIST: "1,2,8", "1-4"; sorted. Throws TopologyError for a malformed
/// list, 0, a count above the size without oversubscribe, or above
/// kMaxOversubscription x the size without `force`.
std::vector<int> ParseThreadCounts(const std::string& text,
                                   const std::vector<PuInfo>& order,
                                   bool oversubscribe, bool force = false);

/// The --plan text: per thread count its PUs (a cpulist, cut after ~96
/// characters), what they span and its helpers; then one table, thread i -> PU
/// and its objects, for the largest count. Throws like PlanThreads.
std::string FormatPlans(const Topology& topo, const PinSpec& pin,
                        const std::vector<int>& counts, bool oversubscribe);

/// Binds the calling thread to OS PU `os_index` and reads the binding back;
/// throws TopologyError (naming the PU and errno) if it fails or differs.
/// Host topologies only.
void BindThisThread(const Topology& topo, int os_index);

}  // namespace lockline
