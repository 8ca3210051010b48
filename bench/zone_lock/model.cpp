// zone_lock's untimed code (bench/zone_lock.h): the bodies of Report and of
// Verify's per-thread checks, compiled once instead of once per zone layout.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/common.h"
#include "bench/zone_lock.h"
#include "harness/measure/kernel_probe.h"

namespace lockline::zone_lock {
namespace {

/// The threads' counters summed, and their lock statistics (nullptr for a
/// thread never set up) into `stats`.
Counters SumCounters(const PaddedSlots<PerThread>& per_thread,
                     std::vector<const LockStatThread*>& stats) {
  Counters sum;
  for (std::size_t i = 0; i < per_thread.size(); ++i) {
    const PerThread* t = per_thread.get(i);
    stats.push_back(t ? &t->stat : nullptr);
    if (!t) continue;
    using C = Counters;
    kernel::AddFields(sum, t->c, &C::ops, &C::steps, &C::allocs, &C::refills,
                      &C::drains, &C::alloc_failures, &C::watermark_failures,
                      &C::stat_folds, &C::fair_resets, &C::fair_depletions);
    for (auto h : {&C::refill_hold, &C::drain_hold})
      kernel::AddFields(sum.*h, t->c.*h, &HoldTimes::ns, &HoldTimes::samples);
  }
  return sum;
}

/// The model, and the layout's facts and line sharing.
void AddLayoutDetails(nlohmann::json& d, const LayoutFacts& layout) {
  const std::string& name = layout.name;
  d["op"] =
      "one op = one order-0 page allocated and one freed (two steps of a "
      "thread's burst cycle): ops_per_s counts alloc+free pairs; "
      "pages_per_s counts pages allocated";
  d["kernel"] =
      "Linux 4.0 mm/page_alloc.c: get_page_from_freelist (fair-zone flag, "
      "watermark) + buffered_rmqueue / rmqueue_bulk / __rmqueue_smallest / "
      "expand, free_hot_cold_page / free_pcppages_bulk / __free_one_page; "
      "struct zone of include/linux/mmzone.h@v4.0 with the lock placed as "
      "the layout says";
  d["not_modelled"] =
      "__rmqueue_fallback and MIGRATE_RESERVE (one migrate type), the "
      "pageblock migratetype bitmap, zone_statistics' per-CPU NUMA "
      "counters, reclaim, compaction, interrupts";
  d["layout"] = name;
  d["placement"] = PlacementName(layout.placement);
  d["placement_description"] = PlacementDescription(layout.placement);
  d["config"] = ZoneConfigName(layout.config);
  d["config_description"] = ZoneConfigDescription(layout.config);
  d["line"] = layout.line;
  d["zone_size_bytes"] = layout.zone_size;
  d["lock"] = {{"name", layout.lock_name},
               {"size_bytes", layout.lock_size},
               {"offset", layout.lock_offset},
               {"description", layout.lock_description}};
  if (const LayoutInfo* info = FindLayout(name)) {
    d["lock_shares_line_with"] = FieldsSharingLine(*info, "lock");
    d["movable_list_shares_lock_line"] =
        SharesLine(*info, "lock",
                   std::string("free_area[0].free_list[") +
                       MigrateTypeName(layout.config, kMigratetype) + "]");
    d["order0_nr_free_shares_lock_line"] =
        SharesLine(*info, "lock", "free_area[0].nr_free");
    d["flags_shares_lock_line"] = SharesLine(*info, "lock", "flags");
    d["watermark_shares_lock_line"] = SharesLine(*info, "lock", "watermark");
  } else {
    d["layout_error"] = "FindLayout does not know " + name;
  }
}

/// The pcp lists, the zones' state and the pool.
void AddZoneDetails(nlohmann::json& d, const std::vector<ZoneSnapshot>& zones,
                    int batch, int high, int burst) {
  d["pcp"] = {{"batch", batch},
              {"high", high},
              {"kernel_batch_for_this_zone", KernelBatchSize(zones[0].pool)},
              {"role", batch == 0 ? "counter-example: no pcp lists (4.0 "
                                    "has no such order-0 path)"
                                  : "Linux 4.0 pcp lists"}};
  d["hold_ns_note"] =
      "hold_ns_per_refill / hold_ns_per_drain: mean time zone->lock is held "
      "by one rmqueue_bulk / free_pcppages_bulk (with pcp_batch:0: one "
      "locked allocation / free), every 64th timed";
  d["burst_pages"] = burst;
  nlohmann::json zj = nlohmann::json::array();
  for (const ZoneSnapshot& zs : zones) {
    zj.push_back({{"pool_pages", zs.pool},
                  {"struct_page_bytes", zs.pool * sizeof(Page)},
                  {"threads", zs.threads},
                  {"watermark_low", zs.watermark_low},
                  {"stat_threshold", zs.stat_threshold},
                  {"nr_free_at_end", zs.nr_free},
                  {"buddy_merges", zs.merges},
                  {"buddy_splits", zs.splits}});
  }
  d["zones"] = zones.size();
  d["zone_state"] = zj;
  d["pool_pages"] = zones[0].pool;
  d["cold_pool_note"] =
      "each zone's struct pages (pool_pages x 64 B) circulate through the "
      "threads' bursts: far beyond L2, so buddy checks and list updates "
      "under the lock miss in cache";
}

/// The work per page outside zone->lock, and its split (WorkSplit).
void AddWorkDetails(nlohmann::json& d, const Options& options) {
  d["work_ns"] = options.work_ns;
  d["work"] = WorkDetails(
      options.work_ns, options.work_calibrated, options.calibration,
      "zone->lock",
      "Linux 4.0's configuration: ticket lock, lock_after_free_area, pcp_batch "
      "31, cma, 64-byte lines, one zone; min of 3 whole burst cycles",
      options.work_ring_pages, options.work_caches);
  if (options.work_ns != 0) {
    const WorkSplit split = SplitWork(options.work_ns, options.work_calibrated,
                                      options.calibration);
    d["work"]["split"] = {
        {"alloc_spin_ns", split.alloc_spin_ns},
        {"free_spin_ns", split.free_spin_ns},
        {"unmap_fault_ratio", split.unmap_fault_ratio},
        {"note",
         "work / (1 + unmap_fault_ratio) after each allocation (zeroing + "
         "spin), the rest before each free: the machine's munmap / fault "
         "cost per page (1024 pages, timed apart, min of 3; 1 uncalibrated)"}};
  }
}

/// The threads' burst phases of this repetition (BurstPhaseSteps).
void AddPhaseDetails(nlohmann::json& d, const Options& options,
                     const PaddedSlots<PerThread>& per_thread, int burst) {
  nlohmann::json steps = nlohmann::json::array();
  for (std::size_t i = 0; i < per_thread.size(); ++i) {
    const PerThread* t = per_thread.get(i);
    steps.push_back(t ? t->phase_steps : 0);
  }
  d["burst_phase"] = {
      {"seed", options.phase_seed},
      {"steps", steps},
      {"cycle_steps", 2 * burst},
      {"note",
       options.phase_seed == 0
           ? "no sampled layout: every thread starts allocating, in phase"
           : "each thread ran `steps` of its cycle untimed, without the work, "
             "drawn from the seed (the row's address_layout.seed)"}};
}

}  // namespace

void ReportZoneLock(PointReport& out, double window_seconds, uint64_t ops,
                    const LayoutFacts& layout,
                    const PaddedSlots<PerThread>& per_thread,
                    const std::vector<ZoneSnapshot>& zones, int batch, int high,
                    int burst, const Options& options) {
  out.layouts.push_back(layout.name);
  std::vector<const LockStatThread*> stats;
  const Counters sum = SumCounters(per_thread, stats);
  const double thread_seconds =
      window_seconds * static_cast<double>(per_thread.size());
  AddLockStatMetrics(out, SummarizeLockStats(stats, thread_seconds, ops));
  out.Metric("pages_per_s", Ratio(sum.allocs, window_seconds));
  for (const auto& [name, h] :
       {std::pair{"hold_ns_per_refill", sum.refill_hold},
        {"hold_ns_per_drain", sum.drain_hold}}) {
    if (h.samples > 0)
      out.Metric(name,
                 static_cast<double>(h.ns) / static_cast<double>(h.samples));
  }
  nlohmann::json& d = out.details;
  AddLayoutDetails(d, layout);
  AddZoneDetails(d, zones, batch, high, burst);
  d["migratetype"] = MigrateTypeName(layout.config, kMigratetype);
  AddWorkDetails(d, options);
  AddPhaseDetails(d, options, per_thread, burst);
  d["lock_stat_on"] = options.stats;
  d["lock_stat_clock_reads"] = LockStatClockReads(options.stats);
  out.Metric("work_ns", static_cast<double>(options.work_ns));
  // zone->lock holds per page (one alloc+free pair): refills + drains per
  // pair (page_fault1's cycle at batch 31: just under 2/31).
  if (sum.ops > 0 && batch > 0) {
    out.Metric("zone_lock_holds_per_page",
               static_cast<double>(sum.refills + sum.drains) /
                   (static_cast<double>(sum.steps) / 2.0));
  }
  d["events"] = {{"ops", sum.ops},
                 {"allocs", sum.allocs},
                 {"refills", sum.refills},
                 {"drains", sum.drains},
                 {"alloc_failures", sum.alloc_failures},
                 {"watermark_failures", sum.watermark_failures},
                 {"steps", sum.steps},
                 {"stat_folds", sum.stat_folds},
                 {"fair_depletions", sum.fair_depletions},
                 {"fair_resets", sum.fair_resets}};
}

std::string VerifyZoneThreads(int zi, const Page* pages, unsigned long pool,
                              long nr_free_stat, long free_pages,
                              std::vector<uint8_t>& seen,
                              const PaddedSlots<PerThread>& per_thread) {
  const std::string zn = "zone " + std::to_string(zi) + ": ";
  long diffs = 0;
  for (std::size_t t = 0; t < per_thread.size(); ++t) {
    const PerThread* me = per_thread.get(t);
    if (!me || me->zone != zi) continue;
    const std::string who = zn + "thread " + std::to_string(t) + " ";
    long n = 0;
    const ListHead* prev = &me->pcp_list;
    for (const ListHead* node = me->pcp_list.next; node != &me->pcp_list;
         node = node->next) {
      if (node->prev != prev) return who + "pcp list: a torn prev link";
      const long idx = buddy::PoolIndexOf(pages, pool, PageFromLru(node));
      if (idx < 0) return who + "pcp list: a page not of its zone";
      if (seen[idx])
        return who + "pcp list: page " + std::to_string(idx) +
               " is also free or on two lists";
      if (buddy::PageBuddy(pages[idx]))
        return who + "pcp list: page marked PageBuddy";
      seen[idx] = 1;
      ++n;
      prev = node;
    }
    if (n != me->pcp_count)
      return who + "pcp count is " + std::to_string(me->pcp_count) +
             " but its list holds " + std::to_string(n);
    for (const Page* page : me->held) {
      const long idx = buddy::PoolIndexOf(pages, pool, page);
      if (idx < 0 || seen[idx])
        return who + "holds a page that is foreign, free or on a list";
      seen[idx] = 1;
    }
    diffs += me->stat_diff;
  }
  const long missing = std::count(seen.begin(), seen.end(), uint8_t{0});
  if (missing != 0)
    return zn + std::to_string(missing) + " of " + std::to_string(pool) +
           " pages are in no free block, on no pcp list and held by no "
           "thread (lost)";
  if (nr_free_stat + diffs != free_pages)
    return zn + "vm_stat[NR_FREE_PAGES] " + std::to_string(nr_free_stat) +
           " + per-thread diffs " + std::to_string(diffs) +
           " != pages in free blocks " + std::to_string(free_pages);
  return "";
}

}  // namespace lockline::zone_lock
