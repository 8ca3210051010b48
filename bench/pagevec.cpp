// pagevec: pages/s, lru_lock acquisitions per page and lock wait share against
// the pagevec's batching factor, line offset and sizing formula (BACKGROUND.md
// sections 1 and 4; issues 7, 16 and 23). Threads push their own pages through
// lru_cache_add and release them on a shared LRU. The per-page work under the
// lock follows the kernel the row names (checked in the trees named):
//   kernel:2.6.9  anonymous pages go through lru_cache_add_active
//                 (mm/memory.c@v2.6.9:1450) -> __pagevec_lru_add_active
//                 (mm/swap.c@v2.6.9:316): TestSetPageLRU, TestSetPageActive,
//                 add_page_to_active_list, nr_active++; release_pages
//                 (swap.c@v2.6.9:207): TestClearPageLRU, del_page_from_lru
//                 (list_del, ClearPageActive, nr_active--), the lock dropped
//                 when its own pages_to_free pagevec (PAGEVEC_SIZE = the
//                 swept slot count) fills;
//   kernel:5.8    anonymous pages are SetPageActive'd by
//                 lru_cache_add_active_or_unevictable (mm/swap.c@v5.8.1:488)
//                 outside the lock; __pagevec_lru_add_fn (swap.c@v5.8.1:969):
//                 TestClearPageUnevictable, SetPageLRU, smp_mb__after_atomic
//                 (empty on x86, arch/x86/include/asm/barrier.h@v5.8.1:83: a
//                 compiler barrier here, a real fence on weakly ordered CPUs),
//                 page_evictable, update_lru_size (node, zone and memcg
//                 per-CPU counters, memcg lru_zone_size), list_add on the
//                 memcg lruvec's LRU_ACTIVE_ANON; release_pages
//                 (swap.c@v5.8.1:827): __ClearPageLRU, page_off_lru
//                 (__ClearPageActive), del_page_from_lru_list, the lock dropped
//                 every SWAP_CLUSTER_MAX = 32 pages (swap.c@v5.8.1:844).
// release:R says where released pages come from (issue 23 item 1):
//   unmap     exit/munmap. 2.6.9: the mmu_gather collects FREE_PTE_NR = 506
//             pages (include/asm-generic/tlb.h@v2.6.9:26), then
//             free_pages_and_swap_cache hands release_pages chunks of 16
//             (mm/swap_state.c@v2.6.9:288-304): ceil(16 / S) holds per 16
//             pages. 5.8: tlb_batch_pages_flush (mm/mmu_gather.c@v5.8.1:44)
//             hands release_pages a whole batch of MAX_GATHER_BATCH = 510
//             pages (include/asm-generic/tlb.h@v5.8.1:232), one hold per 32.
//             Both are independent of the add side's S except 2.6.9's
//             pages_to_free;
//   truncate  pagevec_release of an S-page pagevec (truncate_inode_pages'
//             shape; lockline's release side before issue 23): one
//             release_pages call per S pages;
//   none      the 2020 pmbench case: nothing is released per operation; the
//             reclaim scanner (scanner:on required) isolates pages from the
//             LRU tail and frees them (shrink_page_list reclaims every page;
//             move_pages_to_lru still retakes the lock, mm/vmscan.c@v5.8.1:
//             1967).
// lru_lock acquisitions per page without the scanner are exactly 1/S plus the
// release side's holds (KernelAcquisitionsPerPage): 2.6.9 unmap 0.126 at 16
// slots, 0.191 at 15 (per 16-page chunk: 0.125 / 0.192); 5.8 unmap 0.098 at
// 15, 0.064 at 31.
// work_ns:W is the work a kernel path does per page outside the lock (fault,
// zeroing, page tables): W = cal is calibrated on the machine once per process
// (WorkCalibration: an anonymous fault-in + munmap per page, minus the
// model's own single-thread cost per page), W = 0 is the labelled saturated
// case (every model saturates lru_lock at 2 threads). The work touches what
// a fault on a fresh page touches (harness/measure/page_work.h, issue 40 item
// 6): it zeroes the next 4 KiB page of a per-thread ring larger than the
// thread's share of L2 and L3 (cold: memset, as clear_page writes its 64 lines)
// and writes the page's page-table entry, then spins for the rest. The default
// lock is each era's: ttas for 2.6.9 (x86 `lock; decb` byte lock), qspinlock
// for 5.8; other locks are what-if rows. stats:off rows take lru_lock without
// lock_stat: every side of a seed comparison (IsVerdictSide: both slot counts,
// both layouts, offsets 0 and 8, work_ns cal and 0) has one in the suites it is
// in, at the largest thread count only; the verdicts of questions 000 and 003
// are answered from them (paired duets on stats:off both sides,
// bench/duet.cpp), and the instrumented rows give the lock wait share beside
// them (issue 40 item 3). scanner:on adds one reclaim scanner thread per lock
// (placed by the helper rule, harness/machine/helpers.h, on a PU no measured
// thread runs on: scanner rows run only at thread counts that leave it one,
// Variant::needs_spare_pu; it sleeps between cycles), one cycle per
// SWAP_CLUSTER_MAX = 32 pages the workers add, under the same lock. kernel:5.8:
// shrink_active_list isolates 32 pages from the LRU_ACTIVE_ANON tail,
// deactivates them outside the lock and moves them to LRU_INACTIVE_ANON;
// shrink_inactive_list isolates them, reclaims outside the lock and puts back
// the rest: 4 lru_lock holds per 32 pages (mm/vmscan.c@v5.8.1). kernel:2.6.9:
// one isolate and one putback, 2 holds. A worker short of free pages asks for
// one extra cycle, and a window ends once the scanner has covered the pages it
// added (design rate: scanner_design_acquisitions_per_page). Simplified:
// shrink_page_list frees without swap-out work, page_referenced is not run
// (every anonymous page is deactivated), no irq-off cost, no icache misses,
// free_pages_and_swap_cache's lru_add_drain is not modelled, the freed pages
// go back to a private pool (no buddy/pcp cost).
//
// Row keys (every component key:value; parse by splitting on '/' then on the
// first ':'):
//   pagevec/mode:M/slots:S/offset:O/policy:fixed/lock:L/work_ns:W/zones:Z/kernel:K/release:R/scanner:C[/stats:off]/threads:N
//       generic Linux 5.x header (Pagevec5x layout, run-time slot count S
//       = 1..255);
//   pagevec/mode:M/slots:auto/offset:O/policy:4lg|sqrtlg/lock:L/work_ns:W/zones:Z/kernel:K/release:R/scanner:C/threads:N
//       the 2004 sizing formulas resolved for N = the point's thread count
//       (metric slots_resolved and details.slots give the count used;
//       details.formulas the 4lg value for the machine's possible CPUs too);
//   pagevec/mode:M/layout:K/offset:O/lock:L/work_ns:W/zones:Z/kernel:K/release:R/scanner:C/threads:N
//       a named struct at its native slot count: K = pagevec_v2_6_9 (16),
//       pagevec_v2_6_10 (14), pagevec_2004_proposal (15), pagevec_5x15,
//       pagevec_5x31 (no slots param, so sweeps over slots do not mix them in).
//   M: deferred (per-CPU pagevec, pages trickle in) | rapid (on-stack pagevec
//   filled and drained at once); O: bytes past a cache-line boundary; W: cal |
//   0; Z: 1 (one lock for all threads) | per_numa (one lru_lock per NUMA node,
//   threads on their local one: the default on multi-node machines); K: 2.6.9
//   | 5.8; R: unmap | truncate | none; C: off | on.
//
// Operation: one page added to the LRU (lru_cache_add) and, unless
// release:none, one page released; pages_per_s = ops_per_s. A thread checks
// the stop flag only after every S pages, so each window holds exactly one
// add drain per S pages (Verify checks the acquisitions exactly).
#include "bench/pagevec.h"

#include <iterator>
#include <string_view>

namespace lockline {
namespace pagevec_bench {

/// This model's own cost per page on one (unpinned) thread at work_ns:0:
/// kernel `k`, 15 slots, release:unmap, the era's lock; min of 3 windows of
/// 10 ms.
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

/// work_ns:cal for kernel `k`, measured once per process (~0.1 s; thread
/// safe): fault ns per page minus the model's own ns per page, at least 0.
inline WorkCalibration CalibratedWork(Kernel k) {
  static std::mutex mu;
  static WorkCalibration cache[2];
  static bool done[2] = {false, false};
  std::lock_guard<std::mutex> g(mu);
  const int i = k == Kernel::k269 ? 0 : 1;
  if (!done[i]) {
    const WorkCalibration c = CalibrateWork(
        MeasureModelNsPerPage(k), i == 0 ? "pagevec:2.6.9" : "pagevec:5.8");
    cache[i] = c;
    done[i] = true;
  }
  return cache[i];
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

// The one table the grid is generated from. The full suite is every
// combination of the axes with restrictions that keep it under 900 variants:
// zones:per_numa only with the era locks (ttas, qspinlock); offsets other
// than 0 only for the alignment question's sizes (14, 15, 16, 31 and the
// named layouts) with lock:ttas (2.6.9's lock), work_ns:0, zones:1, and
// offset 8 at 16 slots with lock:ttas, work_ns:cal (the alignment question at
// calibrated work, default suite: issue 40 item 7); the other
// kernels, release paths and the scanner only in mode:deferred at offset 0
// for the questions' sizes (15, 16, 31, the named 5.x layouts): 2.6.9's cases
// under ttas and ticket, 5.8's under qspinlock and ticket.
inline constexpr const char* kModes[] = {"deferred", "rapid"};
inline constexpr int kSlots[] = {1,  2,  4,  8,  14,  15, 16,
                                 31, 32, 63, 64, 128, 255};
inline constexpr std::size_t kOffsets[] = {0, 8, 16, 24, 32, 40, 48, 56};
inline constexpr const char* kPolicies[] = {"4lg", "sqrtlg"};
inline constexpr const char* kLocks[] = {"ttas", "ticket", "qspinlock", "mcs",
                                         "pthread_mutex"};
// The grid's locks are exactly the ones compiled (PagevecLocks,
// bench/pagevec.h).
template <LockAlgorithm... Ls>
constexpr bool SameLocks(LockList<Ls...>) {
  const std::string_view compiled[] = {Ls::kName...};
  if (std::size(compiled) != std::size(kLocks)) return false;
  for (std::size_t i = 0; i < std::size(kLocks); ++i)
    if (compiled[i] != std::string_view(kLocks[i])) return false;
  return true;
}
static_assert(SameLocks(PagevecLocks{}),
              "kLocks and PagevecLocks must name the same locks in one order");
inline constexpr const char* kWork[] = {"cal", "0"};
inline constexpr const char* kZones[] = {"1", "per_numa"};
/// The default suite's generic sizes under 2.6.9 (quick: 4).
inline constexpr int kDefaultSlots[] = {4, 8, 14, 15, 16, 31, 32, 64};

/// The questions' sizes: where the other kernels, release paths and the
/// scanner are swept.
inline bool Is2020Size(const GridPoint& p) {
  if (!p.layout.empty()) return p.layout.rfind("pagevec_5x", 0) == 0;
  if (p.policy != "fixed") return false;
  return p.slots == 15 || p.slots == 16 || p.slots == 31;
}

/// Which suite a grid point belongs to (see the table above for the full
/// suite's restrictions). `multi_node`: the machine has more than one NUMA
/// node, so zones:per_numa (one lru_lock per node, as in the kernel) is the
/// default and zones:1 the labelled single-lock case. Default-suite rows run
/// the era's lock (EraLock) and work_ns:cal; the questions' pairs also run
/// at work_ns:0 (the labelled saturated case). The 2004 question runs under
/// kernel:2.6.9, release:unmap, no scanner; the 2020 question (15 vs 31
/// slots) under kernel:5.8 with release:none and the scanner (pmbench).
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
    // The alignment pair at calibrated work (issue 40 item 7).
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

/// Every grid point of the full suite, in a stable order (default-suite
/// points first within each mode x lock x work_ns x zones block), then the
/// uninstrumented twins (stats:off) of one contended pair per kernel.
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
    for (const char* lock : kLocks) {
      for (const char* work : kWork) {
        for (const char* zones : kZones) {
          const std::string l = lock;
          if (std::string(zones) != "1" && l != "ttas" && l != "qspinlock")
            continue;
          const bool sweep_offsets = l == "ttas" && std::string(work) == "0" &&
                                     std::string(zones) == "1";
          // The alignment question at calibrated work too (issue 40 item 7):
          // 2.6.9's 16 slots at offset 8 under its lock.
          const bool offset8_cal = l == "ttas" && std::string(work) == "cal";
          for (const std::size_t off : kOffsets) {
            if (off != 0 && !sweep_offsets && !(off == 8 && offset8_cal))
              continue;
            for (const int s : kSlots) {
              if (off != 0 && s != 14 && s != 15 && s != 16 && s != 31)
                continue;
              if (off != 0 && !sweep_offsets && s != 16) continue;
              GridPoint p;
              p.mode = mode;
              p.slots = s;
              p.offset = off;
              p.policy = "fixed";
              p.lock = lock;
              p.work = work;
              p.zones = zones;
              push(p);
            }
            for (const NamedLayout& nl : kNamedLayouts) {
              if (off != 0 && !sweep_offsets) continue;
              GridPoint p;
              p.mode = mode;
              p.layout = nl.name;
              p.slots = nl.slots;
              p.offset = off;
              p.lock = lock;
              p.work = work;
              p.zones = zones;
              push(p);
            }
            if (off == 0) {
              for (const char* pol : kPolicies) {
                GridPoint p;
                p.mode = mode;
                p.offset = off;
                p.policy = pol;
                p.lock = lock;
                p.work = work;
                p.zones = zones;
                push(p);
              }
            }
          }
        }
      }
    }
  }
  return out;
}

/// Whether `p` is a side of a seed comparison whose verdict plots/verdicts.py
/// gives (PV_2004 / PV_2020, issue 40 item 3): 2.6.9 (unmap, no scanner,
/// ttas, deferred) 15 and 16 slots at offset 0 and 16 slots at offset 8, at
/// work_ns cal and 0, and the 2.6.9 / 2.6.10 layouts at offset 0; 5.8
/// (release:none, scanner, qspinlock) 15 and 31 slots at offset 0, at both
/// work_ns. Those points get an uninstrumented twin (stats:off) in the suites
/// they are in: the verdicts are answered from the twins, the instrumented
/// rows give the wait share beside them.
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

/// Row-key parameters of a grid point (see the file header for the three key
/// shapes).
inline Params ParamsOf(const GridPoint& p) {
  Params params = {{"mode", p.mode}};
  if (!p.layout.empty()) {
    params.emplace_back("layout", p.layout);
    params.emplace_back("offset", std::to_string(p.offset));
  } else {
    params.emplace_back("slots",
                        p.policy == "fixed" ? std::to_string(p.slots) : "auto");
    params.emplace_back("offset", std::to_string(p.offset));
    params.emplace_back("policy", p.policy);
  }
  params.emplace_back("lock", p.lock);
  params.emplace_back("work_ns", p.work);
  params.emplace_back("zones", p.zones);
  params.emplace_back("kernel", p.kernel);
  params.emplace_back("release", p.release);
  params.emplace_back("scanner", p.scanner ? "on" : "off");
  if (!p.stats) params.emplace_back("stats", "off");
  return params;
}

/// Line size for offsets and lines_spanned: the topology's if it is 32..256
/// bytes, else 64.
inline std::size_t LineOf(const PointEnv& env) {
  if (env.topology == nullptr) return kCacheLine64;
  const int line = env.topology->summary().cache_line_bytes;
  return (line == 32 || line == 64 || line == 128 || line == 256)
             ? static_cast<std::size_t>(line)
             : kCacheLine64;
}

/// The grid for a machine whose usable PUs are `order` (its NUMA node count
/// decides the default zones).
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
    // The reclaim scanner is a helper thread: its rows run only at thread
    // counts that leave it a PU of its own (the runner refuses the others
    // with the reason; --oversubscribe runs them, the row saying
    // details.scanner.shares_measured_pu), issue 40 item 1.
    v.needs_spare_pu = p.scanner;
    // A twin answers its verdict at the contended end only (the verdict's
    // thread count, verdicts.py threads "max"): one point, not one per count.
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
      // zones:per_numa: one lru_lock per NUMA node the machine has (1 on a
      // one-node machine, where the rows equal zones:1 and are kept only in
      // the full suite).
      cfg.zones = p.zones == "per_numa" && env.topology != nullptr
                      ? std::max(1, env.topology->summary().numa_nodes)
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
