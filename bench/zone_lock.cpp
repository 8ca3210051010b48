// zone_lock: the family's table and registration. The model (Linux 4.0's
// order-0 allocation and free under zone->lock, the 3484b2de9499 regression
// and its fix a368ab67aa55) is bench/zone_lock.h; its 112 zone layouts are
// compiled in bench/zone_lock/. Row keys, work_ns and the stats:off twins
// (every side of a question-001 verdict, at the largest thread count):
// docs/experiments.md.
#include "bench/zone_lock.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "harness/family.h"
#include "harness/locks/all_locks.h"
#include "harness/machine/topology.h"
#include "layouts/zone.h"

namespace lockline::zone_lock {

/// One point of the table before thread counts.
struct GridPoint {
  std::string lock;
  ZoneLockPlacement placement;
  int batch;
  std::size_t line;
  ZoneConfig config;
  bool per_numa;             ///< zones:per_numa (else zones:1)
  std::string work = "cal";  ///< work_ns: cal | 0
  bool stats = true;  ///< false: the uninstrumented twin (key ends stats:off)
};

/// The work_ns axis: calibrated fault-path work per page (the default), and
/// none (the labelled saturated case).
constexpr const char* kWork[] = {"cal", "0"};

/// SuiteOf's answer for the point at work_ns:cal (see SuiteOf).
Suite SuiteOfAtCal(const GridPoint& p, bool multi_node) {
  const bool main_zones = p.per_numa == multi_node;
  const bool ticket = p.lock == "ticket";
  const bool pair = p.placement == ZoneLockPlacement::kLockBeforeFreeArea ||
                    p.placement == ZoneLockPlacement::kLockAfterFreeArea;
  if (p.line != kCacheLine64) return Suite::kFull;
  if (!main_zones) {
    // zones:1 on a multi-node machine: the worst case, ticket pair only.
    return multi_node && !p.per_numa && ticket && pair &&
                   p.batch == kDefaultBatch && p.config == ZoneConfig::kCma
               ? Suite::kDefault
               : Suite::kFull;
  }
  if (p.config == ZoneConfig::kNoCma)
    return ticket && pair && p.batch == kDefaultBatch ? Suite::kDefault
                                                      : Suite::kFull;
  if (p.batch == 0) return ticket && pair ? Suite::kDefault : Suite::kFull;
  if (p.batch != kDefaultBatch) return Suite::kFull;
  if (ticket && pair) return Suite::kQuick;
  if (ticket || p.lock == "qspinlock") return Suite::kDefault;
  if (p.lock == "pthread_mutex" && pair) return Suite::kDefault;
  return Suite::kFull;
}

/// Which suite a point belongs to. `multi_node`: zones:per_numa (the kernel's
/// shape) is the default and zones:1 the labelled worst case; on one node
/// only zones:1 runs outside full. Outside full only the question pair also
/// runs at work_ns:0.
///   quick:   ticket x {before, after} x pcp 31, cma, 64-byte lines (the
///            question pair), work_ns:cal, and their stats:off twins;
///   default: + the question pair at work_ns:0 (saturated); the stats:off
///            twin of every verdict side (IsVerdictSide); the other two
///            placements and qspinlock; pthread_mutex before/after; the
///            counter-example pcp_batch:0 and the no_cma config for ticket
///            before/after; on multi-node machines zones:1 for ticket
///            before/after as the worst case;
///   full:    every lock x placement x line x batch x config x zones x
///            work_ns.
Suite SuiteOf(const GridPoint& p, bool multi_node) {
  if (!p.stats) {
    // A twin is in the suite of the point it twins (IsVerdictSide).
    GridPoint on = p;
    on.stats = true;
    return SuiteOf(on, multi_node);
  }
  const Suite at_cal = SuiteOfAtCal(p, multi_node);
  if (p.work == "cal") return at_cal;
  return at_cal == Suite::kQuick ? Suite::kDefault : Suite::kFull;
}

/// The point's key parameters (the key: docs/experiments.md).
Params ParamsOf(const GridPoint& p) {
  Params params = {{"layout", PlacementName(p.placement)},
                   {"lock", p.lock},
                   {"pcp_batch", std::to_string(p.batch)},
                   {"line", std::to_string(p.line)},
                   {"config", ZoneConfigName(p.config)},
                   {"zones", p.per_numa ? "per_numa" : "1"},
                   {"work_ns", p.work}};
  if (!p.stats) params.emplace_back("stats", "off");
  return params;
}

/// Whether `p` is a side of a question-001 verdict (plots/verdicts.py
/// zone_lock_after_before and its what-ifs): before/after free_area, pcp
/// batch 31, cma, 64-byte lines, any lock and work_ns. Such points outside
/// the full suite get an uninstrumented twin (stats:off).
bool IsVerdictSide(const GridPoint& p) {
  return p.stats &&
         (p.placement == ZoneLockPlacement::kLockBeforeFreeArea ||
          p.placement == ZoneLockPlacement::kLockAfterFreeArea) &&
         p.batch == kDefaultBatch && p.line == kCacheLine64 &&
         p.config == ZoneConfig::kCma;
}

/// The row description of point `p` on a lock described by
/// `lock_description`.
std::string DescriptionOf(const GridPoint& p, const char* lock_description) {
  return std::string(PlacementDescription(p.placement)) + "; " +
         lock_description + "; " +
         (p.batch == 0
              ? std::string("no pcp lists (counter-example: every "
                            "alloc and free takes zone->lock)")
              : "pcp lists, batch " + std::to_string(p.batch) + ", high " +
                    std::to_string(kPcpHighBatches * p.batch)) +
         "; " + ZoneConfigDescription(p.config) + "; " +
         std::to_string(p.line) + "-byte lines; " +
         (p.per_numa ? "one zone per NUMA node, node-local pages"
                     : "one zone for all threads (the worst case on a "
                       "multi-node machine)") +
         "; " +
         (p.work == "cal"
              ? "calibrated fault-path work per page outside zone->lock"
              : "no work outside zone->lock (saturated)") +
         (p.stats ? "" : "; lock_stat off (uninstrumented twin)") +
         "; ops_per_s counts alloc+free pairs of one order-0 page";
}

/// The row of point `p` (lock L, placement P): its workload is built by the
/// run-time dispatch to the layout of p's lock, line and config.
template <class L, ZoneLockPlacement P>
Variant VariantOf(const GridPoint& p, bool multi_node) {
  Variant v;
  v.params = ParamsOf(p);
  v.suite = SuiteOf(p, multi_node);
  // A twin answers its verdict at the contended end only.
  v.largest_thread_count_only = !p.stats;
  // For the budget: building the pool and its buddy lists, and the drain
  // after the windows (the run rescales by what it measures).
  v.cost_s = 0.012;
  v.quick_cost_fraction = 0.125;
  v.description = DescriptionOf(p, L::kDescription);
  v.make = [p](const PointEnv& env) -> std::unique_ptr<Workload> {
    const int zones = p.per_numa && env.topology != nullptr
                          ? std::max(1, env.topology->summary().numa_nodes)
                          : 1;
    Options options;
    if (p.work == "cal") {
      options.calibration = CalibratedWork(env.quick);
      options.work_ns = options.calibration.work_ns;
      options.work_calibrated = true;
    }
    options.stats = p.stats;
    return MakeZoneLockWorkload<P>(L::kName, p.line, p.config, env, p.batch,
                                   zones, options);
  };
  return v;
}

/// The table: lock x placement x line x config x pcp_batch x zones x work_ns,
/// plus the stats:off twins of the verdict sides outside the full suite.
/// `order` is the run's usable PUs (for the NUMA node count).
std::vector<Variant> ZoneLockVariants(const std::vector<PuInfo>& order) {
  const bool multi_node = CountNumaNodes(order) > 1;
  std::vector<Variant> out;
  ForEachLock([&]<class L>() {
    ForEachOf<kAllZoneLockPlacements>([&]<ZoneLockPlacement P>() {
      for (const std::size_t line : kLines) {
        for (const ZoneConfig config : kAllZoneConfigs) {
          for (const int batch : kPcpBatches) {
            for (const bool per_numa : {false, true}) {
              for (const char* work : kWork) {
                GridPoint p{L::kName, P, batch, line, config, per_numa, work};
                out.push_back(VariantOf<L, P>(p, multi_node));
                if (IsVerdictSide(p) &&
                    SuiteOf(p, multi_node) != Suite::kFull) {
                  p.stats = false;
                  out.push_back(VariantOf<L, P>(p, multi_node));
                }
              }
            }
          }
        }
      }
    });
  });
  return out;
}

LOCKLINE_REGISTER_FAMILY(Family{
    .name = "zone_lock",
    .description =
        "order-0 page alloc/free the Linux 4.0 way (pcp lists, buddy "
        "allocator under zone->lock, lock-free fair-zone and watermark reads) "
        "for four lock placements x lock kind x pcp batch x line size x "
        "config x zones x work per page outside the lock (calibrated fault "
        "path | none): the 3484b2de9499 regression (v3.16-v3.19) and its "
        "fix a368ab67aa55 (v4.0); ops_per_s counts alloc+free pairs",
    .variants = nullptr,
    .planned_variants = ZoneLockVariants,
});

}  // namespace lockline::zone_lock
