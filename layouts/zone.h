// Userspace model of `struct zone` following Linux 4.0 (include/linux/mmzone.h)
// on x86_64, with the zone lock's placement as the experiment variable
// (linux-mm, March 2015).
//
// Pinned configuration (it fixes MIGRATE_TYPES and the read-mostly section's
// size): x86_64, CONFIG_NUMA, CONFIG_SPARSEMEM (no pageblock_flags pointer),
// CONFIG_CMA and CONFIG_MEMORY_ISOLATION (both on in common distribution
// kernels, so MIGRATE_TYPES = 6), CONFIG_COMPACTION, no CONFIG_MEMORY_HOTPLUG
// (no span_seqlock), MAX_ORDER 11, MAX_NR_ZONES 4 (DMA, DMA32, NORMAL,
// MOVABLE). Pointers are opaque stand-ins (void*).
//
// Sections, each starting on a new line (ZONE_PADDING = alignas(kLine) on its
// first member):
//
//   read-mostly      watermark[3], lowmem_reserve[4], ..., managed_pages, ...,
//   wait_table_bits page allocator   lock + free_area[11] (each: free_list[6]
//   list heads, nr_free) + flags page reclaim     lru_lock, lru_lists[5],
//   reclaim stats, compaction cursors statistics       vm_stat[39]
//
// The lock-placement variants (one template, four partial specializations;
// offsets relative to the allocator section's first line L, 4-byte lock,
// 64-byte lines):
//
//   lock_before_free_area   3484b2de9499 (v3.16 .. v4.0): [L+0 lock][L+8
//   free_area[0] lists of
//                           UNMOVABLE, RECLAIMABLE, MOVABLE, half of RESERVE]
//                           -> lock waiters and the holder's order-0 list
//                           updates fight over line L. (order-0 nr_free sits at
//                           L+104, in line L+1, with 64-byte lines; with
//                           128-byte lines and a <= 24-byte lock it shares line
//                           L too.)
//   lock_after_free_area    the 2015 fix (v4.1): free_area[11], flags, then
//   lock at L+1152,
//                           which is a line boundary for 64 and 128 -> the
//                           lock's line holds nothing else of the allocator
//                           section.
//   lock_own_line           lock padded to a full line of its own, free_area on
//   the next line
//                           (the alternative the thread rejected because the
//                           zone grows).
//   lock_in_readmostly_line the lock right after watermark[] in the read-mostly
//   line: every
//                           allocation reads the watermarks lock-free, and each
//                           lock handoff invalidates that line in every
//                           reader's cache.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "harness/locks/lock.h"
#include "layouts/cacheline.h"
#include "layouts/page.h"
#include "layouts/report.h"

namespace lockline {

/// MAX_ORDER in Linux 4.0 (default CONFIG_FORCE_MAX_ZONEORDER): orders 0..10.
inline constexpr int kMaxOrder = 11;

/// Migrate types, Linux 4.0 enum order with CONFIG_CMA and
/// CONFIG_MEMORY_ISOLATION set. MIGRATE_RESERVE == MIGRATE_PCPTYPES (the first
/// type not on the per-CPU lists).
enum MigrateType : int {
  kMigrateUnmovable = 0,
  kMigrateReclaimable = 1,
  kMigrateMovable = 2,
  kMigratePcptypes = 3,
  kMigrateReserve = kMigratePcptypes,
  kMigrateCma = 4,      ///< CONFIG_CMA
  kMigrateIsolate = 5,  ///< CONFIG_MEMORY_ISOLATION
};
inline constexpr int kMigrateTypes = 6;
/// Kernel names, indexed by MigrateType.
inline constexpr const char* kMigrateTypeNames[kMigrateTypes] = {
    "MIGRATE_UNMOVABLE", "MIGRATE_RECLAIMABLE", "MIGRATE_MOVABLE",
    "MIGRATE_RESERVE",   "MIGRATE_CMA",         "MIGRATE_ISOLATE"};

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
inline constexpr int kNrFreePages = 0;     ///< NR_FREE_PAGES
inline constexpr int kNrAllocBatch = 1;    ///< NR_ALLOC_BATCH
inline constexpr int kNrInactiveAnon = 2;  ///< NR_INACTIVE_ANON (= NR_LRU_BASE)
inline constexpr int kNrActiveAnon = 3;    ///< NR_ACTIVE_ANON
inline constexpr int kNrInactiveFile = 4;  ///< NR_INACTIVE_FILE
inline constexpr int kNrActiveFile = 5;    ///< NR_ACTIVE_FILE
inline constexpr int kNrUnevictable = 6;   ///< NR_UNEVICTABLE

/// `struct free_area`: one list head per migrate type and the count of free
/// blocks of this order. 6 * 16 + 8 = 104 bytes.
struct FreeArea {
  ListHead free_list[kMigrateTypes];
  unsigned long nr_free;
};
static_assert(sizeof(FreeArea) == 104,
              "6 list heads + nr_free (4.0, CMA + ISOLATION)");
static_assert(offsetof(FreeArea, nr_free) == 96, "nr_free after the lists");

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
  switch (p) {
    case ZoneLockPlacement::kLockBeforeFreeArea:
      return "lock_before_free_area";
    case ZoneLockPlacement::kLockAfterFreeArea:
      return "lock_after_free_area";
    case ZoneLockPlacement::kLockOwnLine:
      return "lock_own_line";
    case ZoneLockPlacement::kLockInReadmostlyLine:
      return "lock_in_readmostly_line";
  }
  return "?";
}
/// One-line description of a placement, with its kernel source.
constexpr const char* PlacementDescription(ZoneLockPlacement p) {
  switch (p) {
    case ZoneLockPlacement::kLockBeforeFreeArea:
      return "lock shares a line with the order-0 free lists (3484b2de9499, "
             "v3.16-v4.0)";
    case ZoneLockPlacement::kLockAfterFreeArea:
      return "lock after free_area[] and flags (the March 2015 fix, v4.1)";
    case ZoneLockPlacement::kLockOwnLine:
      return "lock padded to a cache line of its own (the rejected "
             "alternative)";
    case ZoneLockPlacement::kLockInReadmostlyLine:
      return "lock in the read-mostly line with the watermarks "
             "(counter-example)";
  }
  return "?";
}
/// Parses a placement name; false (and `out` untouched) for anything else.
/// Accepted names are those of PlacementName.
inline bool ParsePlacement(std::string_view name, ZoneLockPlacement* out) {
  for (ZoneLockPlacement p : kAllZoneLockPlacements) {
    if (name == PlacementName(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

/// `struct zone`, Linux 4.0, with `Lock` as spinlock_t (both zone->lock and
/// zone->lru_lock), lock placement P and line size kLine (ZONE_PADDING and the
/// struct's alignment). Defined by the four partial specializations below; all
/// have the same member names. Construct with new (C++17 aligned new honours
/// alignas) or in static storage; list heads start uninitialized: call
/// ZoneInit.
template <LockAlgorithm Lock, ZoneLockPlacement P, std::size_t kLine>
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

#define LOCKLINE_ZONE_COMMON_CHECKS                                           \
  static_assert(kLine >= 64 && (kLine & (kLine - 1)) == 0,                    \
                "line size: a power of two >= 64 (64, 128, 256 are real)");   \
  static_assert(                                                              \
      std::is_standard_layout_v<Lock>,                                        \
      "the lock must be standard-layout so offsetof(Zone, lock) is defined"); \
  static constexpr ZoneLockPlacement kPlacement = P;                          \
  static constexpr std::size_t kLineSize = kLine;

/// 3484b2de9499 (v3.16 .. v4.0): lock first in the allocator section,
/// free_area[0] right after.
template <LockAlgorithm Lock, std::size_t kLine>
struct alignas(
    kLine) Zone<Lock, ZoneLockPlacement::kLockBeforeFreeArea, kLine> {
  static constexpr ZoneLockPlacement P = ZoneLockPlacement::kLockBeforeFreeArea;
  LOCKLINE_ZONE_COMMON_CHECKS
  unsigned long watermark[kNrWmark];
  LOCKLINE_ZONE_READMOSTLY_AFTER_WATERMARK
  alignas(kLine) Lock lock;  // ZONE_PADDING(_pad1_)
  FreeArea free_area[kMaxOrder];
  unsigned long flags;
  LOCKLINE_ZONE_RECLAIM_AND_STATS
};

/// The 2015 fix (v4.1): free_area[] and flags first, the lock at the far end.
template <LockAlgorithm Lock, std::size_t kLine>
struct alignas(kLine) Zone<Lock, ZoneLockPlacement::kLockAfterFreeArea, kLine> {
  static constexpr ZoneLockPlacement P = ZoneLockPlacement::kLockAfterFreeArea;
  LOCKLINE_ZONE_COMMON_CHECKS
  unsigned long watermark[kNrWmark];
  LOCKLINE_ZONE_READMOSTLY_AFTER_WATERMARK
  alignas(kLine) FreeArea free_area[kMaxOrder];  // ZONE_PADDING(_pad1_)
  unsigned long flags;
  Lock lock;
  LOCKLINE_ZONE_RECLAIM_AND_STATS
};

/// The lock alone on a line: free_area starts on the next line.
template <LockAlgorithm Lock, std::size_t kLine>
struct alignas(kLine) Zone<Lock, ZoneLockPlacement::kLockOwnLine, kLine> {
  static constexpr ZoneLockPlacement P = ZoneLockPlacement::kLockOwnLine;
  LOCKLINE_ZONE_COMMON_CHECKS
  unsigned long watermark[kNrWmark];
  LOCKLINE_ZONE_READMOSTLY_AFTER_WATERMARK
  alignas(kLine) Lock lock;                      // ZONE_PADDING(_pad1_)
  alignas(kLine) FreeArea free_area[kMaxOrder];  // the lock's own-line padding
  unsigned long flags;
  LOCKLINE_ZONE_RECLAIM_AND_STATS
};

/// Counter-example: the lock in the read-mostly line, right after the
/// watermarks.
template <LockAlgorithm Lock, std::size_t kLine>
struct alignas(
    kLine) Zone<Lock, ZoneLockPlacement::kLockInReadmostlyLine, kLine> {
  static constexpr ZoneLockPlacement P =
      ZoneLockPlacement::kLockInReadmostlyLine;
  LOCKLINE_ZONE_COMMON_CHECKS
  unsigned long watermark[kNrWmark];
  Lock lock;
  LOCKLINE_ZONE_READMOSTLY_AFTER_WATERMARK
  alignas(kLine) FreeArea free_area[kMaxOrder];  // ZONE_PADDING(_pad1_)
  unsigned long flags;
  LOCKLINE_ZONE_RECLAIM_AND_STATS
};

#undef LOCKLINE_ZONE_READMOSTLY_AFTER_WATERMARK
#undef LOCKLINE_ZONE_RECLAIM_AND_STATS
#undef LOCKLINE_ZONE_COMMON_CHECKS

/// Byte offset of the hot order-0 list head,
/// free_area[0].free_list[MIGRATE_UNMOVABLE] (the first byte of free_area[],
/// "the head of free_area[]" in the 2015 thread).
template <class Z>
constexpr std::size_t Order0ListHeadOffset() {
  return offsetof(Z, free_area) + offsetof(FreeArea, free_list);
}
/// Byte offset of free_area[0].nr_free.
template <class Z>
constexpr std::size_t Order0NrFreeOffset() {
  return offsetof(Z, free_area) + offsetof(FreeArea, nr_free);
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
  for (FreeArea& area : z.free_area) {
    for (ListHead& head : area.free_list) ListInit(&head);
    area.nr_free = 0;
  }
  for (ListHead& head : z.lru_lists) ListInit(&head);
  for (auto& stat : z.vm_stat) stat.store(0, std::memory_order_relaxed);
  z.flags = 0;
}

/// Layout name: "zone_v4_0/<placement>/lock:<Lock::kName>/line:<kLine>".
template <LockAlgorithm Lock, ZoneLockPlacement P, std::size_t kLine>
std::string ZoneLayoutName() {
  return std::string("zone_v4_0/") + PlacementName(P) + "/lock:" + Lock::kName +
         "/line:" + std::to_string(kLine);
}

/// The zone variant's layout report: every member with its offsetof/sizeof,
/// free_area[0] expanded into its six list heads and nr_free (the lines the
/// 2015 thread is about), orders 1..10 as one block; lock_field "lock".
template <LockAlgorithm Lock, ZoneLockPlacement P, std::size_t kLine>
LayoutInfo DescribeZone() {
  using Z = Zone<Lock, P, kLine>;
  static_assert(CheckZoneLayout<Z>());
  LayoutInfo info;
  info.name = ZoneLayoutName<Lock, P, kLine>();
  info.kernel =
      "Linux 4.0 include/linux/mmzone.h struct zone (x86_64, NUMA, SPARSEMEM, "
      "CMA, "
      "MEMORY_ISOLATION, COMPACTION; MAX_ORDER 11, MIGRATE_TYPES 6)";
  info.note = std::string(PlacementDescription(P)) + "; lock " + Lock::kName +
              " is " + std::to_string(sizeof(Lock)) + " bytes";
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
  for (int mt = 0; mt < kMigrateTypes; ++mt) {
    info.fields.push_back(
        {std::string("free_area[0].free_list[") + kMigrateTypeNames[mt] + "]",
         area0 + offsetof(FreeArea, free_list) + mt * sizeof(ListHead),
         sizeof(ListHead)});
  }
  info.fields.push_back({"free_area[0].nr_free",
                         area0 + offsetof(FreeArea, nr_free),
                         sizeof(unsigned long)});
  info.fields.push_back({"free_area[1..10]", area0 + sizeof(FreeArea),
                         (kMaxOrder - 1) * sizeof(FreeArea)});
  SortFields(info);
  return info;
}

}  // namespace lockline
