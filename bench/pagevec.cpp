// pagevec: pages/s, lru_lock acquisitions per page and wait share against
// the batching factor, line offset and sizing formula (BACKGROUND.md sections 1
// and 4): the grid, report and checks of the model in bench/pagevec/model.h;
// row keys and axes in docs/experiments.md. One op = one page added (and,
// unless release:none, one released); the stop flag is read every S pages, so
// Verify checks the acquisitions exactly.
#include "bench/pagevec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <mutex>
#include <optional>

#include "bench/common.h"
#include "harness/machine/restore.h"
#include "harness/machine/topology.h"
#include "harness/measure/kernel_probe.h"
#include "layouts/report.h"

namespace lockline {
namespace pagevec_bench {

// ---- sizing policies (LKML, September 2004) ---------------------------------

/// wli's PAGEVEC_SIZE = 4 * ceil(log2 NR_CPUS), 4 on UP: 4 at n <= 2, 16 at
/// 16, 40 at 1024; clamped to 1..255.
inline int FourLgSlots(int n) {
  if (n <= 2) return 4;
  const int lg = static_cast<int>(
      std::bit_width(static_cast<unsigned>(n) - 1));  // ceil(log2 n)
  return std::clamp(4 * lg, 1, kMaxSlots);
}

/// /sys/devices/system/cpu/possible's count (a boot-time sizing's n), or
/// `fallback`.
inline int PossibleCpus(int fallback) {
  try {
    return static_cast<int>(
        ParseCpuList(ReadSmallFile("/sys/devices/system/cpu/possible")).size());
  } catch (const TopologyError&) {
    return fallback;  // missing (empty) or malformed
  }
}

/// The gentler proposal 2^(2.5 * sqrt(lg n) - 1), std::lround'ed: 1 -> 1,
/// 2 -> 3, 4 -> 6, 16 -> 16, 1024 -> 120; clamped to 1..255, n < 1 as 1.
inline int SqrtLgSlots(int n) {
  const double lg = std::log2(static_cast<double>(std::max(n, 1)));
  const long v = std::lround(std::exp2(2.5 * std::sqrt(lg) - 1.0));
  return static_cast<int>(std::clamp<long>(v, 1, kMaxSlots));
}

/// Slot count for `policy` (fixed | 4lg | sqrtlg of `threads`). Throws
/// std::invalid_argument for a bad policy or a count outside 1..255.
inline int ResolveSlots(const std::string& policy, int fixed_slots,
                        int threads) {
  if (policy == "fixed") {
    if (fixed_slots < 1 || fixed_slots > kMaxSlots)
      throw std::invalid_argument("pagevec: slots " +
                                  std::to_string(fixed_slots) +
                                  " out of range: accepted 1..255");
    return fixed_slots;
  }
  if (policy == "4lg") return FourLgSlots(threads);
  if (policy == "sqrtlg") return SqrtLgSlots(threads);
  throw std::invalid_argument("pagevec: unknown policy '" + policy +
                              "': accepted are fixed, 4lg, sqrtlg");
}

/// "" when a scanner ran at its design rate (within `tolerance`) on a PU of
/// its own, else why not.
inline std::string ScannerRowProblem(double acquisitions_per_page,
                                     double design, bool shares_measured_pu,
                                     double tolerance = 0.10) {
  if (shares_measured_pu) return "the scanner shares a measured PU";
  if (design <= 0 || std::abs(acquisitions_per_page / design - 1) > tolerance)
    return "scanner lru_lock acquisitions per page " +
           std::to_string(acquisitions_per_page) + ", design " +
           std::to_string(design) + " (more than 10 % off)";
  return "";
}

/// The model's own ns per page: one unpinned thread, work_ns:0, 15 slots,
/// release:unmap, the era's lock; min of 3 windows of 10 ms.
inline double MeasureModelNsPerPage(Kernel k) {
  PointEnv env;
  env.threads = 1;
  env.mem_policy = "first-touch";
  Config cfg;
  cfg.kernel = k;
  cfg.slots = 15;
  auto w = MakePagevecWorkload(env, EraLock(k), "", cfg);
  ThreadCtx ctx;
  w->SetupThread(ctx);
  double best = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::atomic<bool> stop{false};
    std::thread timer([&stop] {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      stop.store(true, std::memory_order_relaxed);
    });
    const uint64_t t0 = NowNs();
    const uint64_t n = w->RunWindow(ctx, stop);
    const uint64_t t1 = NowNs();
    timer.join();
    const double ns = n ? static_cast<double>(t1 - t0) / n : 0;
    if (attempt == 0 || ns < best) best = ns;
  }
  w->TeardownThread(ctx);
  return best;
}

/// work_ns:cal for `k`, once per process: fault ns per page minus the
/// model's own, at least 0.
inline WorkCalibration CalibratedWork(Kernel k) {
  static std::mutex mu;
  static std::optional<WorkCalibration> cache[2];
  std::lock_guard<std::mutex> g(mu);
  std::optional<WorkCalibration>& c = cache[k == Kernel::k269 ? 0 : 1];
  if (!c) {
    c = CalibrateWork(MeasureModelNsPerPage(k),
                      std::string("pagevec:") + KernelName(k));
  }
  return *c;
}

/// One point of the grid before thread counts.
struct GridPoint {
  std::string mode;    ///< deferred | rapid
  std::string layout;  ///< "" for the generic header
  int slots = 0;  ///< fixed slot count (generic, policy fixed) or the layout's
  std::size_t offset = 0;
  std::string policy;  ///< fixed | 4lg | sqrtlg (generic only)
  std::string lock;
  std::string work;               ///< cal | 0
  std::string zones;              ///< 1 | per_numa
  std::string kernel;             ///< 2.6.9 | 5.8
  std::string release = "unmap";  ///< unmap | truncate | none
  bool scanner = false;
  bool stats = true;  ///< false: the uninstrumented twin (key ends stats:off)
};

// The axes of the grid. The full suite crosses them under restrictions that
// keep it under 900 variants (GridPoints); docs/experiments.md lists them.
inline constexpr const char* kModes[] = {"deferred", "rapid"};
inline constexpr int kSlots[] = {1,  2,  4,  8,  14,  15, 16,
                                 31, 32, 63, 64, 128, 255};
inline constexpr std::size_t kOffsets[] = {0, 8, 16, 24, 32, 40, 48, 56};
inline constexpr const char* kPolicies[] = {"4lg", "sqrtlg"};
inline constexpr const char* kWork[] = {"cal", "0"};
inline constexpr const char* kZones[] = {"1", "per_numa"};
/// The default suite's generic sizes under 2.6.9 (quick: 4).
inline constexpr int kDefaultSlots[] = {4, 8, 14, 15, 16, 31, 32, 64};

/// The questions' sizes, where kernels, release paths and scanner vary.
inline bool Is2020Size(const GridPoint& p) {
  if (!p.layout.empty()) return p.layout.rfind("pagevec_5x", 0) == 0;
  if (p.policy != "fixed") return false;
  return p.slots == 15 || p.slots == 16 || p.slots == 31;
}

/// A grid point's suite. `multi_node`: zones:per_numa is the default and
/// zones:1 the labelled single-lock case. Default rows: the era's lock,
/// work_ns:cal (the pairs also at 0); 2004 under 2.6.9/unmap, 2020 under
/// 5.8/none/scanner.
inline Suite SuiteOf(const GridPoint& p, bool multi_node = false) {
  const std::string main_zones = multi_node ? "per_numa" : "1";
  const Kernel k = p.kernel == "5.8" ? Kernel::k58 : Kernel::k269;
  const bool era = p.lock == EraLock(k);
  const bool k269_q = p.kernel == "2.6.9" && !p.scanner && p.release == "unmap";
  const bool k58_q = p.kernel == "5.8" && p.scanner && p.release == "none";
  const bool generic_fixed = p.layout.empty() && p.policy == "fixed";
  const bool pair58 =
      generic_fixed && p.offset == 0 && (p.slots == 15 || p.slots == 31);
  if (!p.stats) {
    // A twin is in the suite of the point it twins (IsVerdictSide).
    GridPoint on = p;
    on.stats = true;
    return SuiteOf(on, multi_node);
  }
  if (multi_node && p.zones == "1" && p.mode == "deferred" && era &&
      p.work == "cal" && k58_q && pair58) {
    return Suite::kDefault;  // the single-lock worst case, labelled
  }
  if (p.mode != "deferred" || !era || p.zones != main_zones)
    return Suite::kFull;
  if (k58_q) {
    if (!pair58) return Suite::kFull;
    return p.work == "cal" ? Suite::kQuick : Suite::kDefault;
  }
  if (!k269_q) return Suite::kFull;
  if (p.work == "0") {
    // The saturated case: the 2004 pair at offsets 0 and 8.
    if (generic_fixed && (p.slots == 15 || p.slots == 16) &&
        (p.offset == 0 || p.offset == 8))
      return Suite::kDefault;
    return Suite::kFull;
  }
  if (p.offset != 0) {
    // The alignment pair at calibrated work.
    return generic_fixed && p.offset == 8 && p.slots == 16 ? Suite::kDefault
                                                           : Suite::kFull;
  }
  if (!p.layout.empty())
    return p.layout.rfind("pagevec_5x", 0) == 0 ? Suite::kFull
                                                : Suite::kDefault;
  if (p.policy != "fixed") return Suite::kDefault;
  if (p.slots == 4) return Suite::kQuick;
  return std::find(std::begin(kDefaultSlots), std::end(kDefaultSlots),
                   p.slots) != std::end(kDefaultSlots)
             ? Suite::kDefault
             : Suite::kFull;
}

/// Every full-suite grid point in a stable order. zones:per_numa only with
/// the era locks; offsets only for 14, 15, 16, 31 and the named layouts under
/// ttas, work_ns:0, zones:1 (and 16 slots at offset 8, work_ns:cal); other
/// kernels, releases and the scanner at offset 0, deferred, the questions'
/// sizes: 2.6.9 under ttas and ticket, 5.8 under qspinlock and ticket.
inline std::vector<GridPoint> GridPoints() {
  std::vector<GridPoint> out;
  const auto push = [&](GridPoint p) {
    p.kernel = "2.6.9";
    p.release = "unmap";
    p.scanner = false;
    out.push_back(p);
    if (p.offset != 0 || p.mode != "deferred" || !Is2020Size(p)) return;
    struct Case {
      const char* kernel;
      const char* release;
      bool scanner;
    };
    for (const Case c :
         {Case{"2.6.9", "unmap", true}, Case{"2.6.9", "truncate", false},
          Case{"5.8", "unmap", false}, Case{"5.8", "unmap", true},
          Case{"5.8", "none", true}, Case{"5.8", "truncate", true}}) {
      const bool k269 = std::string(c.kernel) == "2.6.9";
      if (p.lock != "ticket" && p.lock != (k269 ? "ttas" : "qspinlock"))
        continue;
      p.kernel = c.kernel;
      p.release = c.release;
      p.scanner = c.scanner;
      out.push_back(p);
    }
  };
  for (const char* mode : kModes) {
    for (const std::string& lock : LockNamesOf(PagevecLocks{})) {
      for (const char* work : kWork) {
        for (const char* zones : kZones) {
          const std::string l = lock, w = work, z = zones;
          if (z != "1" && l != "ttas" && l != "qspinlock") continue;
          const bool sweep_offsets = l == "ttas" && w == "0" && z == "1";
          const bool offset8_cal = l == "ttas" && w == "cal";
          GridPoint base;
          base.mode = mode;
          base.lock = lock;
          base.work = work;
          base.zones = zones;
          for (const std::size_t off : kOffsets) {
            if (off != 0 && !sweep_offsets && !(off == 8 && offset8_cal))
              continue;
            base.offset = off;
            for (const int s : kSlots) {
              if (off != 0 && s != 14 && s != 15 && s != 16 && s != 31)
                continue;
              if (off != 0 && !sweep_offsets && s != 16) continue;
              GridPoint p = base;
              p.slots = s;
              p.policy = "fixed";
              push(p);
            }
            for (const NamedLayout& nl : kNamedLayouts) {
              if (off != 0 && !sweep_offsets) continue;
              GridPoint p = base;
              p.layout = nl.name;
              p.slots = nl.slots;
              push(p);
            }
            for (const char* pol : kPolicies) {
              if (off != 0) continue;
              GridPoint p = base;
              p.policy = pol;
              push(p);
            }
          }
        }
      }
    }
  }
  return out;
}

/// A side of a seed comparison (verdicts.py PV_2004 / PV_2020): it gets a
/// stats:off twin, which answers the verdict.
inline bool IsVerdictSide(const GridPoint& p) {
  if (p.mode != "deferred" || !p.stats) return false;
  const bool generic_fixed = p.layout.empty() && p.policy == "fixed";
  if (p.kernel == "2.6.9" && p.release == "unmap" && !p.scanner &&
      p.lock == "ttas") {
    if (generic_fixed && p.offset == 0 && (p.slots == 15 || p.slots == 16))
      return true;
    if (generic_fixed && p.offset == 8 && p.slots == 16) return true;
    return p.offset == 0 &&
           (p.layout == "pagevec_v2_6_9" || p.layout == "pagevec_v2_6_10");
  }
  return p.kernel == "5.8" && p.release == "none" && p.scanner &&
         p.lock == "qspinlock" && generic_fixed && p.offset == 0 &&
         (p.slots == 15 || p.slots == 31);
}

/// Row-key parameters (the three key shapes: docs/experiments.md).
inline Params ParamsOf(const GridPoint& p) {
  Params params = {{"mode", p.mode}};
  if (!p.layout.empty())
    params.emplace_back("layout", p.layout);
  else
    params.emplace_back("slots",
                        p.policy == "fixed" ? std::to_string(p.slots) : "auto");
  params.emplace_back("offset", std::to_string(p.offset));
  if (p.layout.empty()) params.emplace_back("policy", p.policy);
  params.emplace_back("lock", p.lock);
  params.emplace_back("work_ns", p.work);
  params.emplace_back("zones", p.zones);
  params.emplace_back("kernel", p.kernel);
  params.emplace_back("release", p.release);
  params.emplace_back("scanner", p.scanner ? "on" : "off");
  if (!p.stats) params.emplace_back("stats", "off");
  return params;
}

/// The topology's line size if 32..256 bytes, else 64.
inline std::size_t LineOf(const PointEnv& env) {
  if (env.topology == nullptr) return kCacheLine64;
  const int line = env.topology->summary().cache_line_bytes;
  return (line == 32 || line == 64 || line == 128 || line == 256)
             ? static_cast<std::size_t>(line)
             : kCacheLine64;
}

// ---- the row (PagevecWorkload::Report) --------------------------------------

/// details.pagevec: the pagevec's size and placement, the lock and the op.
nlohmann::json PagevecDetails(const PagevecFacts& f, const std::string& layout,
                              uint64_t acquisitions, uint64_t setup) {
  const Config& cfg = f.cfg;
  return {
      {"mode", cfg.rapid ? "rapid" : "deferred"},
      {"layout", layout},
      {"slots", cfg.slots},
      {"policy", cfg.policy},
      {"offset", cfg.offset},
      {"line", cfg.line},
      {"bytes", f.pv_bytes},
      {"lines_spanned", LinesSpanned(cfg.offset, f.pv_bytes, cfg.line)},
      {"zones", cfg.zones},
      {"work_ns", cfg.work_ns},
      {"resident_pages_per_thread", kResidentPages},
      {"lock", f.lock},
      {"lock_is_era_lock", std::string(f.lock) == EraLock(cfg.kernel)},
      {"lock_stat", cfg.stats},
      {"lock_stat_clock_reads", LockStatClockReads(cfg.stats)},
      {"window_acquisitions", acquisitions},
      {"setup_acquisitions", setup},
      {"op", cfg.release == Release::kNone
                 ? "one page added to the LRU (lru_cache_add); reclaim (the "
                   "scanner) frees it; pages_per_s = ops_per_s"
                 : "one page added to the LRU (lru_cache_add) and one "
                   "released (release_pages); pages_per_s = ops_per_s"},
  };
}

/// details.formulas: the 2004 formulas for threads and possible CPUs.
nlohmann::json FormulaDetails(const PointEnv& env) {
  const int possible = PossibleCpus(
      env.topology != nullptr ? env.topology->summary().pus : env.threads);
  return {
      {"four_lg_threads", FourLgSlots(env.threads)},
      {"four_lg_possible_cpus", FourLgSlots(possible)},
      {"possible_cpus", possible},
      {"sqrt_lg_threads", SqrtLgSlots(env.threads)},
      {"sqrt_lg_possible_cpus", SqrtLgSlots(possible)},
      {"note",
       "4*lg is wli's 4 * ceil(log2 NR_CPUS) of the compile-time config; "
       "here evaluated for the point's threads and for the machine's "
       "possible CPUs (what a boot-time sizing would use); policy:4lg rows "
       "run the threads value"},
  };
}

/// details.kernel: the modelled kernel's per-page work and release path.
nlohmann::json KernelDetails(const Config& cfg) {
  const char* release_path =
      cfg.release == Release::kNone
          ? "none: reclaim (the scanner) frees the pages (pmbench, 2020)"
          : (cfg.release == Release::kTruncate
                 ? "truncate: release_pages of an S-page pagevec"
                 : (cfg.kernel == Kernel::k269
                        ? "unmap: mmu_gather of 506 pages, "
                          "free_pages_and_swap_cache hands release_pages "
                          "chunks of 16, the lock dropped when the S-slot "
                          "pages_to_free pagevec fills"
                        : "unmap: tlb_batch_pages_flush hands "
                          "release_pages batches of 510, the lock dropped "
                          "every 32 pages"));
  return {
      {"version", KernelName(cfg.kernel)},
      {"era_lock", EraLock(cfg.kernel)},
      {"per_page_work",
       cfg.kernel == Kernel::k269
           ? "2.6.9 lru_cache_add_active -> __pagevec_lru_add_active: "
             "TestSetPageLRU, TestSetPageActive, add_page_to_active_list, "
             "nr_active++; release_pages: TestClearPageLRU, "
             "del_page_from_lru (list_del, ClearPageActive, nr_active--)"
           : "5.8 lru_cache_add_active_or_unevictable (SetPageActive "
             "outside the lock) -> __pagevec_lru_add_fn: "
             "TestClearPageUnevictable, SetPageLRU, smp_mb__after_atomic "
             "(compiler barrier on x86), page_evictable, update_lru_size "
             "(node/zone/memcg per-CPU diffs, memcg lru_zone_size), "
             "list_add to LRU_ACTIVE_ANON; release_pages: __ClearPageLRU, "
             "page_off_lru (__ClearPageActive), del_page_from_lru_list"},
      {"release", ReleaseName(cfg.release)},
      {"release_path", release_path},
      {"release_gather_pages", GatherPages(cfg.kernel, cfg.release, cfg.slots)},
      {"release_call_pages",
       ReleaseCallPages(cfg.kernel, cfg.release, cfg.slots)},
      {"release_hold_pages", ReleaseHoldPages(cfg.kernel, cfg.slots)},
      {"kernel_acquisitions_per_page",
       KernelAcquisitionsPerPage(cfg.kernel, cfg.release, cfg.slots)},
      {"lru_lock_scope", cfg.kernel == Kernel::k269
                             ? "zone->lru_lock (per zone)"
                             : "pgdat->lru_lock (per NUMA node)"},
      {"simplified",
       "no active/inactive aging, no irq-off cost, no icache misses, "
       "free_pages_and_swap_cache's lru_add_drain not modelled, freed "
       "pages return to a private pool (no pcp/buddy cost); the scanner "
       "frees without swap-out work"},
  };
}

/// details.scanner of a row with the reclaim scanner, and its metrics.
nlohmann::json ScannerDetails(PointReport& out, const PagevecFacts& f,
                              uint64_t ops, uint64_t handed) {
  ScannerFacts sum{};
  nlohmann::json pus = nlohmann::json::array();
  using S = ScannerFacts;
  for (const ScannerFacts& sc : f.scanners) {
    kernel::AddFields(sum, sc, &S::on_demand_cycles, &S::cycles, &S::isolated,
                      &S::freed, &S::acquisitions, &S::skipped_putbacks);
    pus.push_back(sc.pu);
  }
  const Kernel k = f.cfg.kernel;
  bool smt = false;
  for (const HelperPlace& hp : f.scanner_places)
    smt = smt || hp.smt_sibling_of_measured;
  nlohmann::json sj = {
      {"on", true},
      {"cycles", sum.cycles},
      {"on_demand_cycles", sum.on_demand_cycles},
      {"pages_isolated", sum.isolated},
      {"design_acquisitions_per_page", ScannerDesignAcquisitionsPerPage(k)},
      {"holds_per_cycle", ScannerHoldsPerCycle(k)},
      {"smt_sibling_of_measured", smt},
      {"pages_freed_by_scanner", sum.freed},
      {"acquisitions", sum.acquisitions},
      {"skipped_putbacks", sum.skipped_putbacks},
      {"releases_handed_to_scanner", handed},
      {"pus", pus},
      {"shares_measured_pu", f.scanner_shares_pu},
  };
  AddHelperColumnsJson(sj, f.scanner_places);
  sj["workers_spin_yield"] = f.scanner_shares_pu
                                 ? "after_1024_pauses (the scanner shares a "
                                   "measured PU: oversubscribed)"
                                 : "as placement.spin_yield";
  sj["placement"] =
      f.scanner_shares_pu
          ? "no spare PU: each scanner shares a measured thread's PU "
            "(it sleeps between cycles; its CPU time is taken from that thread)"
          : "each scanner on a spare PU outside the point's plan (or "
            "unbound where the topology is not the host's)";
  sj["model"] =
      k == Kernel::k58
          ? "one cycle per 32 pages the workers add to its LRU, 4 "
            "lru_lock holds (mm/vmscan.c@v5.8.1): shrink_active_list isolates "
            "32 pages from the LRU_ACTIVE_ANON tail (hold 1), deactivates them "
            "outside the lock and puts them on LRU_INACTIVE_ANON (hold 2); "
            "shrink_inactive_list isolates 32 from the inactive tail (hold 3), "
            "reclaims outside the lock (release:none: page_ref_freeze(2)) and "
            "puts back the rest (hold 4, not taken when it isolated nothing: "
            "skipped_putbacks); a page whose last reference a putback dropped "
            "is freed after the hold"
          : "one cycle per 32 pages the workers add to its LRU: isolate "
            "32 pages from the tail (PageLRU, get_page_unless_zero, "
            "ClearPageLRU, list_move, size -32) under lru_lock, unlock, "
            "relock and put them back (SetPageLRU, list_add, size +32, "
            "put_page; a page whose last reference that was is taken off "
            "the LRU and freed); 2 holds per cycle, a simplification of "
            "2.6.9's refill_inactive_zone + shrink_cache";
  sj["on_demand_note"] =
      "a worker short of free pages asks for one cycle before 32 pages "
      "were added (kswapd's wakeup); the scanner consumes the request, "
      "so it never cycles for a worker that is not waiting";
  out.Metric("scanner_acquisitions_per_page", Ratio(sum.acquisitions, ops));
  out.Metric("scanner_design_acquisitions_per_page",
             ScannerDesignAcquisitionsPerPage(k));
  return sj;
}

void ReportPagevec(PointReport& out, double window_seconds, uint64_t ops,
                   const PagevecFacts& f) {
  const Config& cfg = f.cfg;
  std::vector<const LockStatThread*> stats;
  uint64_t acquisitions = 0, setup = 0, handed = 0;
  for (const ThreadFacts& t : f.threads) {
    stats.push_back(t.stat);
    acquisitions += t.stat ? t.stat->acquisitions : 0;
    setup += t.setup_acquisitions;
    handed += t.handed_to_scanner;
  }
  const double thread_seconds =
      window_seconds * static_cast<double>(f.threads.size());
  AddLockStatMetrics(out, SummarizeLockStats(stats, thread_seconds, ops));
  out.Metric("pages_per_s", Ratio(ops, window_seconds));
  out.Metric("acquisitions_per_page", Ratio(acquisitions, ops));
  out.Metric("pagevec_bytes", static_cast<double>(f.pv_bytes));
  out.Metric("lines_spanned", LinesSpanned(cfg.offset, f.pv_bytes, cfg.line));
  out.Metric("slots_resolved", cfg.slots);
  const std::string layout = PagevecLayoutName(f.pv_name, cfg.offset, cfg.line);
  if (FindLayout(layout) != nullptr) out.layouts.push_back(layout);
  out.details["pagevec"] = PagevecDetails(f, layout, acquisitions, setup);
  out.details["work"] =
      WorkDetails(cfg.work_ns, cfg.work_calibrated, cfg.calibration, "lru_lock",
                  "kernel " + std::string(KernelName(cfg.kernel)) +
                      ", 15 slots, release:" + ReleaseName(cfg.release) +
                      ", min of 3 x 10 ms",
                  cfg.work_ring_pages, cfg.work_caches);
  out.Metric("work_ns", static_cast<double>(cfg.work_ns));
  out.details["formulas"] = FormulaDetails(*f.env);
  out.details["kernel"] = KernelDetails(cfg);
  out.details["scanner"] = cfg.scanner ? ScannerDetails(out, f, ops, handed)
                                       : nlohmann::json{{"on", false}};
}

// ---- the checks (PagevecWorkload::Verify) -----------------------------------

/// Per thread, per pool page: linked on an LRU list.
using OnList = std::vector<std::vector<char>>;

std::string Where(std::size_t z, uint64_t n) {
  return "zone " + std::to_string(z) + " LRU, node " + std::to_string(n) + ": ";
}

/// Walks f.lists[z] (links, PG_lru, PG_active, owner, zone, size) and marks
/// its pages in `on_list`. `pools`: (pool, thread) by address.
std::string WalkLru(const PagevecFacts& f, std::size_t z,
                    const std::vector<std::pair<const Page*, int>>& pools,
                    uint64_t total_pages, OnList& on_list) {
  const std::size_t zones = static_cast<std::size_t>(f.cfg.zones);
  const bool inactive = z >= zones;
  const ListHead* head = f.lists[z].head;
  uint64_t walked = 0;
  const ListHead* prev = head;
  for (const ListHead* node = head->next; node != head; node = node->next) {
    if (node->prev != prev) return Where(z, walked) + "broken prev link";
    if (++walked > total_pages)
      return Where(z, walked) + "longer than all pages (a cycle)";
    const Page* page = PageFromLru(node);
    auto it = std::upper_bound(
        pools.begin(), pools.end(),
        std::make_pair(page, static_cast<int>(f.threads.size())));
    if (it == pools.begin())
      return Where(z, walked) + "node is not a pool page";
    --it;
    const ThreadFacts& owner = f.threads[it->second];
    const std::ptrdiff_t idx = page - it->first;
    if (idx < 0 || idx >= owner.pool_size)
      return Where(z, walked) + "node is not a pool page";
    if (static_cast<std::size_t>(owner.zone) != z % zones)
      return Where(z, walked) + "page of another zone";
    if (PageActive(*page) == inactive)
      return Where(z, walked) + "PG_active does not match the list";
    if (on_list[it->second][idx]) return Where(z, walked) + "page listed twice";
    on_list[it->second][idx] = 1;
    if (!PageLru(*page))
      return Where(z, walked) + "page on the LRU without PG_lru";
    prev = node;
  }
  if (head->prev != prev)
    return Where(z, walked) + "head's prev is not the last node";
  if (walked != f.lists[z].count)
    return Where(z, walked) + "LRU size " + std::to_string(f.lists[z].count) +
           " but " + std::to_string(walked) + " pages linked";
  return "";
}

/// Every page of `t` in exactly one place, with its refcount and PG_lru.
std::string CheckPlaces(const PagevecFacts& f, const ThreadFacts& t,
                        const std::vector<char>& on_list,
                        const std::string& who) {
  std::vector<char> seen(t.pool_size, 0);
  auto place = [&](const Page* p, bool on_lru, int ref) -> std::string {
    const std::ptrdiff_t idx = p - t.pool;
    if (idx < 0 || idx >= t.pool_size)
      return who + "foreign page in its structures";
    if (seen[idx]++) return who + "page held twice";
    if (static_cast<bool>(on_list[idx]) != on_lru)
      return who + (on_lru ? "page should be on the LRU but is not linked"
                           : "page linked on the LRU but held off it");
    if (PageLru(*p) != on_lru)
      return who + "PG_lru does not match LRU membership";
    if (page_count(*p) != ref)
      return who + "refcount " + std::to_string(page_count(*p));
    return "";
  };
  std::string err;
  for (std::size_t i = 0; i < t.held.size() && err.empty(); ++i)
    err = place(t.held[i].page, t.held[i].on_lru, t.held[i].ref);
  std::size_t held = t.held.size();
  if (f.cfg.release == Release::kNone) {
    // The LRU's pages (the mapping's reference) are nobody's to hold.
    for (int idx = 0; idx < t.pool_size && err.empty(); ++idx) {
      if (!on_list[idx] || seen[idx]) continue;
      err = place(&t.pool[idx], true, 1);
      ++held;
    }
  }
  if (!err.empty()) return err;
  if (held != static_cast<std::size_t>(t.pool_size))
    return who + std::to_string(held) + " pages accounted of " +
           std::to_string(t.pool_size);
  return "";
}

/// One add drain per S pages, and the kernel's release holds.
std::string CheckAcquisitions(const Config& cfg, const ThreadFacts& t,
                              const std::string& who) {
  if (t.ops % cfg.slots != 0)
    return who + std::to_string(t.ops) +
           " pages is not a whole number of batches";
  const uint64_t batches = t.ops / cfg.slots;
  if (t.add_drains != batches)
    return who + std::to_string(t.add_drains) + " add drains for " +
           std::to_string(batches) + " batches";
  const uint64_t expected = batches + t.expected_release_locks;
  if (t.stat->acquisitions + t.release_lock_skips != expected)
    return who + std::to_string(t.stat->acquisitions) +
           " lru_lock acquisitions (+ " + std::to_string(t.release_lock_skips) +
           " skipped) for " + std::to_string(t.ops) + " pages at " +
           std::to_string(cfg.slots) + " slots (expected " +
           std::to_string(batches) + " add drains + " +
           std::to_string(t.expected_release_locks) +
           " release holds = " + std::to_string(expected) + ")";
  if (!cfg.scanner && (t.release_lock_skips != 0 || t.handed_to_scanner != 0))
    return who + "releases skipped the lock without a scanner";
  return "";
}

std::string VerifyPagevec(const PagevecFacts& f) {
  uint64_t total_pages = 0;
  // Owner lookup: pools sorted by address.
  std::vector<std::pair<const Page*, int>> pools;
  OnList on_list(f.threads.size());
  for (std::size_t i = 0; i < f.threads.size(); ++i) {
    total_pages += f.threads[i].pool_size;
    if (f.threads[i].stat == nullptr) continue;
    pools.emplace_back(f.threads[i].pool, static_cast<int>(i));
    on_list[i].assign(f.threads[i].pool_size, 0);
  }
  std::sort(pools.begin(), pools.end());
  for (std::size_t z = 0; z < f.lists.size(); ++z) {
    const std::string err = WalkLru(f, z, pools, total_pages, on_list);
    if (!err.empty()) return err;
  }
  uint64_t ops = 0, handed = 0, freed = 0;
  for (std::size_t i = 0; i < f.threads.size(); ++i) {
    const ThreadFacts& t = f.threads[i];
    if (t.stat == nullptr) continue;
    const std::string who = "thread " + std::to_string(i) + ": ";
    if (t.anomalies != 0)
      return who + std::to_string(t.anomalies) + " flag/refcount anomalies";
    std::string err = CheckPlaces(f, t, on_list[i], who);
    if (err.empty()) err = CheckAcquisitions(f.cfg, t, who);
    if (!err.empty()) return err;
    ops += t.ops;
    handed += t.handed_to_scanner;
  }
  if (ops != f.harness_ops)
    return "threads counted " + std::to_string(ops) + " pages, harness " +
           std::to_string(f.harness_ops);
  for (const ScannerFacts& sc : f.scanners) freed += sc.freed;
  if (f.cfg.release != Release::kNone && handed != freed)
    return std::to_string(handed) +
           " releases left the last reference to the scanner, which freed " +
           std::to_string(freed) + " pages";
  return "";
}

/// The grid for usable PUs `order` (its node count decides the zones).
inline std::vector<Variant> PagevecVariants(const std::vector<PuInfo>& order) {
  const bool multi_node = CountNumaNodes(order) > 1;
  std::vector<GridPoint> points = GridPoints();
  // The uninstrumented twins of every verdict side outside the full suite.
  const std::size_t grid = points.size();
  for (std::size_t i = 0; i < grid; ++i) {
    if (!IsVerdictSide(points[i]) ||
        SuiteOf(points[i], multi_node) == Suite::kFull)
      continue;
    GridPoint twin = points[i];
    twin.stats = false;
    points.push_back(twin);
  }
  std::vector<Variant> out;
  for (const GridPoint& p : points) {
    Variant v;
    v.params = ParamsOf(p);
    v.suite = SuiteOf(p, multi_node);
    // One helper scanner per lru_lock, each needing a PU of its own.
    v.needs_spare_pu = p.scanner;
    v.helper_per_node = p.scanner && p.zones == "per_numa";
    // A twin answers at the verdict's (largest) thread count only.
    v.largest_thread_count_only = !p.stats;
    const Kernel k = p.kernel == "5.8" ? Kernel::k58 : Kernel::k269;
    v.description =
        p.mode + " pagevec (" +
        (p.layout.empty()
             ? "5.x header, " + (p.policy == "fixed"
                                     ? std::to_string(p.slots) + " slots"
                                     : "policy " + p.policy)
             : p.layout) +
        ") at offset " + std::to_string(p.offset) + ", Linux " + p.kernel +
        " per-page work, lru_lock " + p.lock +
        (p.lock == EraLock(k) ? " (the era's lock)" : " (what-if lock)") +
        ", " +
        (p.work == "cal" ? "calibrated fault-path work per page"
                         : "no work outside the lock (saturated)") +
        ", " +
        (p.zones == "1" ? "one lru_lock for all threads"
                        : "one lru_lock per NUMA node") +
        ", release:" + p.release +
        (p.scanner ? ", a reclaim scanner per lock" : "") +
        (p.stats ? "" : ", lock_stat off (uninstrumented twin)");
    v.make = [p](const PointEnv& env) -> std::unique_ptr<Workload> {
      Config cfg;
      cfg.rapid = p.mode == "rapid";
      cfg.policy = p.layout.empty() ? p.policy : "fixed";
      cfg.slots = ResolveSlots(cfg.policy, p.slots, env.threads);
      cfg.line = LineOf(env);
      cfg.offset = p.offset % cfg.line;
      cfg.kernel = p.kernel == "5.8" ? Kernel::k58 : Kernel::k269;
      cfg.release = p.release == "none"
                        ? Release::kNone
                        : (p.release == "truncate" ? Release::kTruncate
                                                   : Release::kUnmap);
      if (p.work == "cal") {
        cfg.calibration = CalibratedWork(cfg.kernel);
        cfg.work_ns = cfg.calibration.work_ns;
        cfg.work_calibrated = true;
      }
      cfg.scanner = p.scanner;
      cfg.stats = p.stats;
      // zones:per_numa: one lru_lock per node the runner planned helpers for.
      cfg.zones = p.zones == "per_numa" && env.topology != nullptr
                      ? PlannedHelperCount(*env.topology)
                      : 1;
      return MakePagevecWorkload(env, p.lock, p.layout, cfg);
    };
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace pagevec_bench

LOCKLINE_REGISTER_FAMILY(Family{
    .name = "pagevec",
    .description = "pagevec batching factor, alignment and sizing formulas "
                   "against lru_lock with the per-page work of Linux 2.6.9 or "
                   "5.8 and an optional reclaim scanner: pages/s, lock "
                   "acquisitions per page, wait share, pagevec bytes",
    .variants = nullptr,
    .planned_variants = pagevec_bench::PagevecVariants,
});

}  // namespace lockline
