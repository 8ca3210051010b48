// Userspace model of `struct zone` following Linux 4.0
// (include/linux/mmzone.h@v4.0:327-530) on x86_64, with the zone lock's
// placement as the experiment variable (linux-mm, March 2015) and the
// migrate-type config as a second axis.
//
// Pinned configuration (it fixes the read-mostly section's size): x86_64,
// CONFIG_NUMA, CONFIG_SPARSEMEM (no pageblock_flags pointer),
// CONFIG_MEMORY_ISOLATION, CONFIG_COMPACTION, no CONFIG_MEMORY_HOTPLUG (no
// span_seqlock), MAX_ORDER 11, MAX_NR_ZONES 4 (DMA, DMA32, NORMAL, MOVABLE).
// The config axis (ZoneConfig) is CONFIG_CMA: with it MIGRATE_TYPES = 6 and a
// free_area is 104 bytes (common distribution kernels), without it 5 and 88
// (mmzone.h@v4.0:38-64). Pointers are opaque stand-ins (void*).
//
// Sections, each starting on a new line (ZONE_PADDING = alignas(kLine) on its
// first member):
//
//   read-mostly      watermark[3], lowmem_reserve[4], ..., wait_table_bits
//   page allocator   free_area[11] (each: free_list[MIGRATE_TYPES] list heads,
//                    nr_free) + flags + lock   (the v4.0 order)
//   page reclaim     lru_lock, lru_lists[5], reclaim stats, compaction cursors
//   statistics       vm_stat[39]
//
// The lock-placement variants (offsets relative to the allocator section's
// first line L, 4-byte lock, 64-byte lines):
//
//   lock_before_free_area   3484b2de9499 (merged for v3.16; in v3.16-v3.19):
//                           [L+0 lock][L+8 free_area[0] lists of UNMOVABLE,
//                           RECLAIMABLE, MOVABLE, half of RESERVE] -> lock
//                           waiters and the holder's order-0 list updates
//                           fight over line L.
//   lock_after_free_area    the fix a368ab67aa55 (in v4.0, mmzone.h@v4.0:
//                           476-484): free_area[11], flags, then the lock;
//                           cma: at L+1152, alone on its line (64 or 128);
//                           no_cma: at L+976, in the line of `flags` (L+968),
//                           which every allocation tests lock-free
//                           (ZONE_FAIR_DEPLETED).
//   lock_own_line           lock padded to a full line of its own (the
//                           alternative the thread rejected: the zone grows).
//   lock_in_readmostly_line the lock right after watermark[], which every
//                           allocation reads lock-free: each lock handoff
//                           invalidates that line in every reader's cache
//                           (counter-example).
//
// The zone is otherwise v4.0's in every variant: v3.16-v3.19's struct zone
// differs in fields this model does not exercise.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <type_traits>

#include "harness/locks/lock.h"
#include "layouts/cacheline.h"
#include "layouts/page.h"
#include "layouts/report.h"

namespace lockline {

/// MAX_ORDER in Linux 4.0 (default CONFIG_FORCE_MAX_ZONEORDER): orders 0..10.
inline constexpr int kMaxOrder = 11;

/// Migrate types, Linux 4.0 enum order (mmzone.h@v4.0:38-64).
/// MIGRATE_RESERVE == MIGRATE_PCPTYPES (the first type not on the per-CPU
/// lists). kMigrateCma and kMigrateIsolate are the CONFIG_CMA numbering; use
/// MigrateIsolateOf for the other config.
enum MigrateType : int {
  kMigrateUnmovable = 0,
  kMigrateReclaimable = 1,
  kMigrateMovable = 2,
  kMigratePcptypes = 3,
  kMigrateReserve = kMigratePcptypes,
  kMigrateCma = 4,      ///< CONFIG_CMA
  kMigrateIsolate = 5,  ///< CONFIG_MEMORY_ISOLATION (with CONFIG_CMA)
};
/// MIGRATE_TYPES with CONFIG_CMA (the default config).
inline constexpr int kMigrateTypes = 6;
/// Kernel names, indexed by MigrateType (CONFIG_CMA numbering).
inline constexpr const char* kMigrateTypeNames[kMigrateTypes] = {
    "MIGRATE_UNMOVABLE", "MIGRATE_RECLAIMABLE", "MIGRATE_MOVABLE",
    "MIGRATE_RESERVE",   "MIGRATE_CMA",         "MIGRATE_ISOLATE"};

/// The kernel config axis of the zone model: CONFIG_CMA on or off (with
/// CONFIG_MEMORY_ISOLATION on in both).
enum class ZoneConfig { kCma, kNoCma };
inline constexpr ZoneConfig kAllZoneConfigs[] = {ZoneConfig::kCma,
                                                 ZoneConfig::kNoCma};
/// "cma" | "no_cma".
constexpr const char* ZoneConfigName(ZoneConfig c) {
  return c == ZoneConfig::kCma ? "cma" : "no_cma";
}
/// One line on what the config changes.
constexpr const char* ZoneConfigDescription(ZoneConfig c) {
  return c == ZoneConfig::kCma
             ? "CONFIG_CMA=y: MIGRATE_TYPES 6, free_area 104 bytes"
             : "CONFIG_CMA=n: MIGRATE_TYPES 5, free_area 88 bytes (the fixed "
               "lock shares the line of flags)";
}
/// MIGRATE_TYPES of a config: 6 with CMA, 5 without.
constexpr int MigrateTypesOf(ZoneConfig c) {
  return c == ZoneConfig::kCma ? 6 : 5;
}
/// MIGRATE_ISOLATE of a config (the last type): 5 with CMA, 4 without.
constexpr int MigrateIsolateOf(ZoneConfig c) { return MigrateTypesOf(c) - 1; }
/// Kernel name of migrate type `mt` under config `c` ("?" out of range).
constexpr const char* MigrateTypeName(ZoneConfig c, int mt) {
  if (mt < 0 || mt >= MigrateTypesOf(c)) return "?";
  if (mt == MigrateIsolateOf(c)) return "MIGRATE_ISOLATE";
  return kMigrateTypeNames[mt];
}

/// NR_WMARK (WMARK_MIN, WMARK_LOW, WMARK_HIGH) and MAX_NR_ZONES of the pinned
/// config.
inline constexpr int kNrWmark = 3;
inline constexpr int kMaxNrZones = 4;
/// enum lru_list: inactive anon, active anon, inactive file, active file,
/// unevictable.
inline constexpr int kNrLruLists = 5;
/// enum zone_stat_item (4.0, CONFIG_NUMA): 39 counters; the model names the
/// ones it uses.
inline constexpr int kNrVmZoneStatItems = 39;
inline constexpr int kNrFreePages = 0;   ///< NR_FREE_PAGES
inline constexpr int kNrAllocBatch = 1;  ///< NR_ALLOC_BATCH

/// `struct free_area` (mmzone.h@v4.0:92-95): one list head per migrate type
/// and the count of free blocks of this order.
template <int kTypes>
struct FreeAreaOf {
  ListHead free_list[kTypes];
  unsigned long nr_free;
};
/// The CONFIG_CMA free_area: 6 * 16 + 8 = 104 bytes.
using FreeArea = FreeAreaOf<kMigrateTypes>;
static_assert(sizeof(FreeAreaOf<6>) == 104,
              "6 list heads + nr_free (4.0, CMA + ISOLATION)");
static_assert(offsetof(FreeAreaOf<6>, nr_free) == 96, "nr_free after lists");
static_assert(sizeof(FreeAreaOf<5>) == 88,
              "5 list heads + nr_free (4.0, ISOLATION, no CMA)");
static_assert(offsetof(FreeAreaOf<5>, nr_free) == 80, "nr_free after lists");

/// Where zone->lock sits (see the diagram at the top of this file).
enum class ZoneLockPlacement {
  kLockBeforeFreeArea,
  kLockAfterFreeArea,
  kLockOwnLine,
  kLockInReadmostlyLine,
};
inline constexpr ZoneLockPlacement kAllZoneLockPlacements[] = {
    ZoneLockPlacement::kLockBeforeFreeArea,
    ZoneLockPlacement::kLockAfterFreeArea, ZoneLockPlacement::kLockOwnLine,
    ZoneLockPlacement::kLockInReadmostlyLine};

/// "lock_before_free_area", "lock_after_free_area", "lock_own_line",
/// "lock_in_readmostly_line".
constexpr const char* PlacementName(ZoneLockPlacement p) {
  constexpr const char* kNames[] = {"lock_before_free_area",
                                    "lock_after_free_area", "lock_own_line",
                                    "lock_in_readmostly_line"};
  return kNames[static_cast<int>(p)];
}
/// One-line description of a placement, with its kernel source.
constexpr const char* PlacementDescription(ZoneLockPlacement p) {
  constexpr const char* kText[] = {
      "lock shares a line with the order-0 free lists (3484b2de9499, "
      "v3.16-v3.19)",
      "lock after free_area[] and flags (the March 2015 fix a368ab67aa55, "
      "v4.0)",
      "lock padded to a cache line of its own (the rejected alternative)",
      "lock in the read-mostly line with the watermarks (counter-example)"};
  return kText[static_cast<int>(p)];
}

/// `struct zone`, Linux 4.0, with `Lock` as spinlock_t (both zone->lock and
/// zone->lru_lock), lock placement P, line size kLine (ZONE_PADDING and the
/// struct's alignment) and config C (MIGRATE_TYPES). Defined by the four
/// partial specializations below; all have the same member names. Construct
/// with new (C++17 aligned new honours alignas) or in static storage; list
/// heads start uninitialized: call ZoneInit.
template <LockAlgorithm Lock, ZoneLockPlacement P, std::size_t kLine,
          ZoneConfig C = ZoneConfig::kCma>
struct Zone;

// Member lists the four variants share, in kernel order. Macros, not base
// classes: a base with members would make Zone non-standard-layout (offsetof
// undefined), and the sections must stay in one class for their order to be the
// declaration order.
#define LOCKLINE_ZONE_READMOSTLY_AFTER_WATERMARK \
  long lowmem_reserve[kMaxNrZones];              \
  int node;                                      \
  unsigned int inactive_ratio;                   \
  void* zone_pgdat;                              \
  void* pageset;                                 \
  unsigned long dirty_balance_reserve;           \
  unsigned long min_unmapped_pages;              \
  unsigned long min_slab_pages;                  \
  unsigned long zone_start_pfn;                  \
  unsigned long managed_pages;                   \
  unsigned long spanned_pages;                   \
  unsigned long present_pages;                   \
  const char* name;                              \
  int nr_migrate_reserve_block;                  \
  unsigned long nr_isolate_pageblock;            \
  void* wait_table;                              \
  unsigned long wait_table_hash_nr_entries;      \
  unsigned long wait_table_bits;

// ZONE_PADDING(_pad2_) then the reclaim section, ZONE_PADDING(_pad3_) then the
// statistics. lru_lists/recent_* are struct lruvec's lists and reclaim_stat,
// flattened.
#define LOCKLINE_ZONE_RECLAIM_AND_STATS        \
  alignas(kLine) Lock lru_lock;                \
  ListHead lru_lists[kNrLruLists];             \
  unsigned long recent_rotated[2];             \
  unsigned long recent_scanned[2];             \
  std::atomic<long> inactive_age;              \
  unsigned long percpu_drift_mark;             \
  unsigned long compact_cached_free_pfn;       \
  unsigned long compact_cached_migrate_pfn[2]; \
  unsigned int compact_considered;             \
  unsigned int compact_defer_shift;            \
  int compact_order_failed;                    \
  bool compact_blockskip_flush;                \
  alignas(kLine) std::atomic<long> vm_stat[kNrVmZoneStatItems];

// The placement P, the checks and the layout's constants of every variant.
#define LOCKLINE_ZONE_COMMON(placement)                                       \
  static constexpr ZoneLockPlacement P = ZoneLockPlacement::placement;        \
  static_assert(kLine >= 64 && (kLine & (kLine - 1)) == 0,                    \
                "line size: a power of two >= 64 (64, 128, 256 are real)");   \
  static_assert(                                                              \
      std::is_standard_layout_v<Lock>,                                        \
      "the lock must be standard-layout so offsetof(Zone, lock) is defined"); \
  static constexpr ZoneLockPlacement kPlacement = P;                          \
  static constexpr std::size_t kLineSize = kLine;                             \
  static constexpr ZoneConfig kConfig = C;                                    \
  using FreeAreaT = FreeAreaOf<MigrateTypesOf(C)>;

/// 3484b2de9499 (v3.16-v3.19): lock first in the allocator section,
/// free_area[0] right after.
template <LockAlgorithm Lock, std::size_t kLine, ZoneConfig C>
struct alignas(
    kLine) Zone<Lock, ZoneLockPlacement::kLockBeforeFreeArea, kLine, C> {
  LOCKLINE_ZONE_COMMON(kLockBeforeFreeArea)
  unsigned long watermark[kNrWmark];
  LOCKLINE_ZONE_READMOSTLY_AFTER_WATERMARK
  alignas(kLine) Lock lock;  // ZONE_PADDING(_pad1_)
  FreeAreaT free_area[kMaxOrder];
  unsigned long flags;
  LOCKLINE_ZONE_RECLAIM_AND_STATS
};

/// The 2015 fix a368ab67aa55 (v4.0, mmzone.h@v4.0:476-484): free_area[] and
/// flags first, the lock at the far end.
template <LockAlgorithm Lock, std::size_t kLine, ZoneConfig C>
struct alignas(
    kLine) Zone<Lock, ZoneLockPlacement::kLockAfterFreeArea, kLine, C> {
  LOCKLINE_ZONE_COMMON(kLockAfterFreeArea)
  unsigned long watermark[kNrWmark];
  LOCKLINE_ZONE_READMOSTLY_AFTER_WATERMARK
  alignas(kLine) FreeAreaT free_area[kMaxOrder];  // ZONE_PADDING(_pad1_)
  unsigned long flags;
  Lock lock;
  LOCKLINE_ZONE_RECLAIM_AND_STATS
};

/// The lock alone on a line: free_area starts on the next line.
template <LockAlgorithm Lock, std::size_t kLine, ZoneConfig C>
struct alignas(kLine) Zone<Lock, ZoneLockPlacement::kLockOwnLine, kLine, C> {
  LOCKLINE_ZONE_COMMON(kLockOwnLine)
  unsigned long watermark[kNrWmark];
  LOCKLINE_ZONE_READMOSTLY_AFTER_WATERMARK
  alignas(kLine) Lock lock;                       // ZONE_PADDING(_pad1_)
  alignas(kLine) FreeAreaT free_area[kMaxOrder];  // the lock's own-line padding
  unsigned long flags;
  LOCKLINE_ZONE_RECLAIM_AND_STATS
};

/// Counter-example: the lock in the read-mostly line, right after the
/// watermarks.
template <LockAlgorithm Lock, std::size_t kLine, ZoneConfig C>
struct alignas(
    kLine) Zone<Lock, ZoneLockPlacement::kLockInReadmostlyLine, kLine, C> {
  LOCKLINE_ZONE_COMMON(kLockInReadmostlyLine)
  unsigned long watermark[kNrWmark];
  Lock lock;
  LOCKLINE_ZONE_READMOSTLY_AFTER_WATERMARK
  alignas(kLine) FreeAreaT free_area[kMaxOrder];  // ZONE_PADDING(_pad1_)
  unsigned long flags;
  LOCKLINE_ZONE_RECLAIM_AND_STATS
};

#undef LOCKLINE_ZONE_READMOSTLY_AFTER_WATERMARK
#undef LOCKLINE_ZONE_RECLAIM_AND_STATS
#undef LOCKLINE_ZONE_COMMON

/// Byte offset of the hot order-0 list head,
/// free_area[0].free_list[MIGRATE_UNMOVABLE] (the first byte of free_area[],
/// "the head of free_area[]" in the 2015 thread).
template <class Z>
constexpr std::size_t Order0ListHeadOffset() {
  return offsetof(Z, free_area) + offsetof(typename Z::FreeAreaT, free_list);
}
/// Byte offset of free_area[0].nr_free.
template <class Z>
constexpr std::size_t Order0NrFreeOffset() {
  return offsetof(Z, free_area) + offsetof(typename Z::FreeAreaT, nr_free);
}

/// Compile-time layout checks every zone instantiation passes (DescribeZone
/// instantiates them, so every lock x placement x line in the report is checked
/// by the compiler).
template <class Z>
constexpr bool CheckZoneLayout() {
  constexpr std::size_t kLine = Z::kLineSize;
  using Lock = decltype(Z::lock);
  constexpr std::size_t lock_first = offsetof(Z, lock) / kLine;
  constexpr std::size_t lock_last =
      (offsetof(Z, lock) + sizeof(Lock) - 1) / kLine;
  constexpr std::size_t head_line = Order0ListHeadOffset<Z>() / kLine;
  constexpr std::size_t nr_free_line = Order0NrFreeOffset<Z>() / kLine;
  static_assert(alignof(Z) == kLine, "____cacheline_internodealigned_in_smp");
  static_assert(sizeof(Z) % kLine == 0, "a zone is a whole number of lines");
  static_assert(offsetof(Z, watermark) == 0,
                "watermarks open the read-mostly line");
  static_assert(offsetof(Z, lru_lock) % kLine == 0,
                "ZONE_PADDING(_pad2_) before reclaim");
  static_assert(offsetof(Z, vm_stat) % kLine == 0,
                "ZONE_PADDING(_pad3_) before statistics");
  if constexpr (Z::kPlacement == ZoneLockPlacement::kLockBeforeFreeArea) {
    static_assert(offsetof(Z, lock) % kLine == 0,
                  "lock opens the allocator section");
    static_assert(head_line == lock_last,
                  "3484b2de9499: lock and order-0 lists share a line");
  } else if constexpr (Z::kPlacement == ZoneLockPlacement::kLockAfterFreeArea) {
    static_assert(offsetof(Z, lock) > offsetof(Z, flags),
                  "the fix: lock after flags");
    static_assert(lock_first > nr_free_line,
                  "the fix: lock off the order-0 lines");
    // The config decides whether the fix gives the lock a line of its own.
    constexpr std::size_t alloc_start = offsetof(Z, free_area);
    if constexpr (Z::kConfig == ZoneConfig::kCma) {
      static_assert(offsetof(Z, flags) - alloc_start == 11 * 104,
                    "cma: flags after 11 free_areas of 104 bytes");
      static_assert(offsetof(Z, lock) - alloc_start == 1152,
                    "cma: lock at allocator offset 1152");
      static_assert(offsetof(Z, lock) % kLine == 0,
                    "cma: the fixed lock starts a line (flags not in it)");
    } else {
      static_assert(offsetof(Z, flags) - alloc_start == 11 * 88,
                    "no_cma: flags after 11 free_areas of 88 bytes");
      static_assert(offsetof(Z, lock) - alloc_start == 976,
                    "no_cma: lock at allocator offset 976");
      static_assert(offsetof(Z, flags) / kLine == lock_first,
                    "no_cma: the fixed lock shares the line of flags");
    }
  } else if constexpr (Z::kPlacement == ZoneLockPlacement::kLockOwnLine) {
    static_assert(offsetof(Z, lock) % kLine == 0, "own line: starts a line");
    static_assert(head_line > lock_last, "own line: free_area on a later line");
  } else {
    static_assert(lock_first == 0, "read-mostly: lock in the watermarks' line");
    static_assert(head_line > lock_last,
                  "read-mostly: not with the free lists");
  }
  return true;
}

/// Puts a zone in its boot state: empty free and LRU lists, zero counters. The
/// locks are default-constructed (unlocked) by the constructor already.
template <class Z>
void ZoneInit(Z& z) {
  for (auto& area : z.free_area) {
    for (ListHead& head : area.free_list) ListInit(&head);
    area.nr_free = 0;
  }
  for (ListHead& head : z.lru_lists) ListInit(&head);
  for (auto& stat : z.vm_stat) stat.store(0, std::memory_order_relaxed);
  z.flags = 0;
}

/// Layout name: "zone_v4_0/<placement>/lock:<Lock::kName>/line:<kLine>" for
/// the CMA config, with "/config:no_cma" appended for the other.
template <LockAlgorithm Lock, ZoneLockPlacement P, std::size_t kLine,
          ZoneConfig C = ZoneConfig::kCma>
std::string ZoneLayoutName() {
  return std::string("zone_v4_0/") + PlacementName(P) + "/lock:" + Lock::kName +
         "/line:" + std::to_string(kLine) +
         (C == ZoneConfig::kCma ? "" : "/config:no_cma");
}

/// The zone variant's layout report: every member with its offsetof/sizeof,
/// free_area[0] expanded into its list heads and nr_free (the lines the 2015
/// thread is about), orders 1..9 as one block and free_area[10].nr_free (next
/// to flags); lock_field "lock".
template <LockAlgorithm Lock, ZoneLockPlacement P, std::size_t kLine,
          ZoneConfig C = ZoneConfig::kCma>
LayoutInfo DescribeZone() {
  using Z = Zone<Lock, P, kLine, C>;
  using FA = typename Z::FreeAreaT;
  static_assert(CheckZoneLayout<Z>());
  LayoutInfo info;
  info.name = ZoneLayoutName<Lock, P, kLine, C>();
  info.kernel = std::string(
                    "Linux 4.0 include/linux/mmzone.h struct zone (x86_64, "
                    "NUMA, SPARSEMEM, ") +
                (C == ZoneConfig::kCma ? "CMA, " : "no CMA, ") +
                "MEMORY_ISOLATION, COMPACTION; MAX_ORDER 11, MIGRATE_TYPES " +
                std::to_string(MigrateTypesOf(C)) + ")";
  info.note = std::string(PlacementDescription(P)) + "; " +
              ZoneConfigDescription(C) + "; lock " + Lock::kName + " is " +
              std::to_string(sizeof(Lock)) + " bytes";
  info.size = sizeof(Z);
  info.align = alignof(Z);
  info.line = kLine;
  info.lock_field = "lock";
#define LOCKLINE_ZONE_FIELD(member) \
  info.fields.push_back({#member, offsetof(Z, member), sizeof(Z::member)})
  LOCKLINE_ZONE_FIELD(watermark);
  LOCKLINE_ZONE_FIELD(lowmem_reserve);
  LOCKLINE_ZONE_FIELD(node);
  LOCKLINE_ZONE_FIELD(inactive_ratio);
  LOCKLINE_ZONE_FIELD(zone_pgdat);
  LOCKLINE_ZONE_FIELD(pageset);
  LOCKLINE_ZONE_FIELD(dirty_balance_reserve);
  LOCKLINE_ZONE_FIELD(min_unmapped_pages);
  LOCKLINE_ZONE_FIELD(min_slab_pages);
  LOCKLINE_ZONE_FIELD(zone_start_pfn);
  LOCKLINE_ZONE_FIELD(managed_pages);
  LOCKLINE_ZONE_FIELD(spanned_pages);
  LOCKLINE_ZONE_FIELD(present_pages);
  LOCKLINE_ZONE_FIELD(name);
  LOCKLINE_ZONE_FIELD(nr_migrate_reserve_block);
  LOCKLINE_ZONE_FIELD(nr_isolate_pageblock);
  LOCKLINE_ZONE_FIELD(wait_table);
  LOCKLINE_ZONE_FIELD(wait_table_hash_nr_entries);
  LOCKLINE_ZONE_FIELD(wait_table_bits);
  LOCKLINE_ZONE_FIELD(lock);
  LOCKLINE_ZONE_FIELD(flags);
  LOCKLINE_ZONE_FIELD(lru_lock);
  LOCKLINE_ZONE_FIELD(lru_lists);
  LOCKLINE_ZONE_FIELD(recent_rotated);
  LOCKLINE_ZONE_FIELD(recent_scanned);
  LOCKLINE_ZONE_FIELD(inactive_age);
  LOCKLINE_ZONE_FIELD(percpu_drift_mark);
  LOCKLINE_ZONE_FIELD(compact_cached_free_pfn);
  LOCKLINE_ZONE_FIELD(compact_cached_migrate_pfn);
  LOCKLINE_ZONE_FIELD(compact_considered);
  LOCKLINE_ZONE_FIELD(compact_defer_shift);
  LOCKLINE_ZONE_FIELD(compact_order_failed);
  LOCKLINE_ZONE_FIELD(compact_blockskip_flush);
  LOCKLINE_ZONE_FIELD(vm_stat);
#undef LOCKLINE_ZONE_FIELD
  const std::size_t area0 = offsetof(Z, free_area);
  for (int mt = 0; mt < MigrateTypesOf(C); ++mt) {
    info.fields.push_back(
        {std::string("free_area[0].free_list[") + MigrateTypeName(C, mt) + "]",
         area0 + offsetof(FA, free_list) + mt * sizeof(ListHead),
         sizeof(ListHead)});
  }
  info.fields.push_back({"free_area[0].nr_free", area0 + offsetof(FA, nr_free),
                         sizeof(unsigned long)});
  info.fields.push_back(
      {"free_area[1..9]", area0 + sizeof(FA), (kMaxOrder - 2) * sizeof(FA)});
  info.fields.push_back({"free_area[10].free_list[]",
                         area0 + (kMaxOrder - 1) * sizeof(FA),
                         offsetof(FA, nr_free)});
  info.fields.push_back(
      {"free_area[10].nr_free",
       area0 + (kMaxOrder - 1) * sizeof(FA) + offsetof(FA, nr_free),
       sizeof(unsigned long)});
  SortFields(info);
  return info;
}

}  // namespace lockline
