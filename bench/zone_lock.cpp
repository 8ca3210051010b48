// zone_lock: the family's table and registration. The model (Linux 4.0's
// order-0 allocation and free under zone->lock, the 3484b2de9499 regression
// and its fix a368ab67aa55) is bench/zone_lock.h; its 112 zone layouts are
// compiled in bench/zone_lock/.
#include "bench/zone_lock.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "harness/family.h"
#include "harness/locks/all_locks.h"
#include "harness/topology.h"
#include "layouts/zone.h"

namespace lockline::zone_lock {

/// One point of the table before thread counts.
struct GridPoint {
  std::string lock;
  ZoneLockPlacement placement;
  int batch;
  std::size_t line;
  ZoneConfig config;
  bool per_numa;  ///< zones:per_numa (else zones:1)
};

/// Which suite a point belongs to. `multi_node`: the machine has more than
/// one NUMA node, so zones:per_numa (the kernel's shape) is the default and
/// zones:1 the labelled worst case; on one node the two are the same zone and
/// only zones:1 runs outside full.
///   quick:   ticket x {before, after} x pcp 31, cma, 64-byte lines;
///   default: + the other two placements and qspinlock; pthread_mutex before/
///            after; the counter-example pcp_batch:0 and the no_cma config for
///            ticket before/after; on multi-node machines zones:1 for ticket
///            before/after as the worst case;
///   full:    every lock x placement x line x batch x config x zones.
Suite SuiteOf(const GridPoint& p, bool multi_node) {
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
  if (p.config == ZoneConfig::kNoCma) {
    return ticket && pair && p.batch == kDefaultBatch ? Suite::kDefault
                                                      : Suite::kFull;
  }
  if (p.batch == 0) return ticket && pair ? Suite::kDefault : Suite::kFull;
  if (p.batch != kDefaultBatch) return Suite::kFull;
  if (ticket && pair) return Suite::kQuick;
  if (ticket || p.lock == "qspinlock") return Suite::kDefault;
  if (p.lock == "pthread_mutex" && pair) return Suite::kDefault;
  return Suite::kFull;
}

/// The table: lock x placement x line x config x pcp_batch x zones, one Zone
/// instantiation per lock x placement x line x config (pcp_batch and zones
/// are run-time values). `order` is the run's usable PUs (for the NUMA node
/// count).
std::vector<Variant> ZoneLockVariants(const std::vector<PuInfo>& order) {
  const bool multi_node = CountNumaNodes(order) > 1;
  std::vector<Variant> out;
  ForEachLock([&]<class L>() {
    ForEachPlacement([&]<ZoneLockPlacement P>() {
      ForEachLine([&]<std::size_t kLine>() {
        ForEachConfig([&]<ZoneConfig C>() {
          for (const int batch : kPcpBatches) {
            for (const bool per_numa : {false, true}) {
              const GridPoint gp{L::kName, P, batch, kLine, C, per_numa};
              Variant v;
              v.params = {{"layout", PlacementName(P)},
                          {"lock", L::kName},
                          {"pcp_batch", std::to_string(batch)},
                          {"line", std::to_string(kLine)},
                          {"config", ZoneConfigName(C)},
                          {"zones", per_numa ? "per_numa" : "1"}};
              v.suite = SuiteOf(gp, multi_node);
              // For the budget: building the pool and its buddy lists, and
              // the drain after the windows (2-vCPU VM, 0.2-0.4 s; a --quick
              // run's 4 MiB of cold struct pages instead of 32, 0.03 s).
              v.cost_s = 0.25;
              v.quick_cost_fraction = 0.125;
              v.description =
                  std::string(PlacementDescription(P)) + "; " +
                  L::kDescription + "; " +
                  (batch == 0
                       ? std::string("no pcp lists (counter-example: every "
                                     "alloc and free takes zone->lock)")
                       : "pcp lists, batch " + std::to_string(batch) +
                             ", high " +
                             std::to_string(kPcpHighBatches * batch)) +
                  "; " + ZoneConfigDescription(C) + "; " +
                  std::to_string(kLine) + "-byte lines; " +
                  (per_numa ? "one zone per NUMA node, node-local pages"
                            : "one zone for all threads (the worst case on "
                              "a multi-node machine)") +
                  "; ops_per_s counts alloc+free pairs of one order-0 page";
              v.make = [batch, per_numa](
                           const PointEnv& env) -> std::unique_ptr<Workload> {
                const int zones =
                    per_numa && env.topology != nullptr
                        ? std::max(1, env.topology->summary().numa_nodes)
                        : 1;
                return MakeZoneLockWorkload<P>(L::kName, kLine, C, env, batch,
                                               zones);
              };
              out.push_back(std::move(v));
            }
          }
        });
      });
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
        "config x zones: the 3484b2de9499 regression (v3.16-v3.19) and its "
        "fix a368ab67aa55 (v4.0); ops_per_s counts alloc+free pairs",
    .variants = nullptr,
    .planned_variants = ZoneLockVariants,
});

}  // namespace lockline::zone_lock
