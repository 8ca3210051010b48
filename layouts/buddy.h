// Linux 4.0's buddy allocator over free_area[MAX_ORDER] as the zone->lock
// holder runs it (mm/page_alloc.c@v4.0): __free_one_page and
// __rmqueue_smallest + expand, touching the struct pages the kernel's do.
// A pool is `nr` pages, nr a multiple of MAX_ORDER_NR_PAGES, so every buddy
// lies inside it (pfn_valid_within always true). Not modelled:
// __rmqueue_fallback (one migrate type), MIGRATE_RESERVE, pageblock
// isolation, DEBUG_PAGEALLOC guard pages, the migratetype bitmap.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "layouts/page.h"
#include "layouts/zone.h"

namespace lockline::buddy {

/// PAGE_BUDDY_MAPCOUNT_VALUE (include/linux/mm.h@v4.0): page->_mapcount of the
/// head page of a free block; -1 is any other page.
inline constexpr int kPageBuddyMapcount = -128;
/// MAX_ORDER_NR_PAGES: the largest block, and the pool's granule.
inline constexpr unsigned long kMaxOrderNrPages = 1UL << (kMaxOrder - 1);
/// page_zone_id in flags' top bits (ZONES_PGSHIFT): node 0, ZONE_NORMAL.
inline constexpr unsigned long kZoneIdShift = 62;
inline constexpr unsigned long kZoneIdNormal = 2;

/// PageBuddy(page): the head of a free block.
inline bool PageBuddy(const Page& p) {
  return p._mapcount.load(std::memory_order_relaxed) == kPageBuddyMapcount;
}
/// set_page_order (page_alloc.c@v4.0:490): private = order, __SetPageBuddy.
inline void SetPageOrder(Page& p, unsigned order) {
  p.private_ = order;
  p._mapcount.store(kPageBuddyMapcount, std::memory_order_relaxed);
}
/// rmv_page_order (page_alloc.c@v4.0:496): __ClearPageBuddy, private = 0.
inline void RmvPageOrder(Page& p) {
  p._mapcount.store(-1, std::memory_order_relaxed);
  p.private_ = 0;
}
/// page_zone_id: the flags' top bits.
inline unsigned long PageZoneId(const Page& p) {
  return p.flags.load(std::memory_order_relaxed) >> kZoneIdShift;
}

/// Index of `page` in the pool of `nr` struct pages at `base`, or -1 for a
/// pointer outside it.
inline long PoolIndexOf(const Page* base, unsigned long nr, const Page* page) {
  const auto p = reinterpret_cast<std::uintptr_t>(page);
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  if (p < b || (p - b) % sizeof(Page) != 0) return -1;
  const std::uintptr_t idx = (p - b) / sizeof(Page);
  return idx < nr ? static_cast<long>(idx) : -1;
}

/// The buddy allocator over `nr` pages at `base` and free_area[] (FA =
/// FreeAreaOf<MIGRATE_TYPES>); zone->lock held by the caller except around
/// Init and Check. Read-only after construction (a counter here would be a
/// shared line the kernel does not write): merges and splits are returned.
template <class FA>
class BuddyAllocator {
 public:
  BuddyAllocator(Page* base, unsigned long nr, FA* free_area)
      : base_(base), nr_(nr), area_(free_area) {}

  /// Boot: zone ids set, the pool freed as order-10 blocks onto
  /// free_list[mt]; false (nothing changed) unless nr fits.
  bool Init(int mt) {
    if (nr_ == 0 || nr_ % kMaxOrderNrPages != 0) return false;
    for (unsigned long i = 0; i < nr_; ++i) {
      base_[i].flags.store(kZoneIdNormal << kZoneIdShift,
                           std::memory_order_relaxed);
      base_[i]._mapcount.store(-1, std::memory_order_relaxed);
      base_[i].private_ = 0;
    }
    for (unsigned long i = 0; i < nr_; i += kMaxOrderNrPages) {
      SetPageOrder(base_[i], kMaxOrder - 1);
      ListAddTail(&base_[i].lru, &area_[kMaxOrder - 1].free_list[mt]);
      ++area_[kMaxOrder - 1].nr_free;
    }
    return true;
  }

  /// page_is_buddy (page_alloc.c@v4.0:517): a free block's head, this order
  /// and zone.
  static bool PageIsBuddy(const Page& page, const Page& buddy, unsigned order) {
    if (PageBuddy(buddy) && buddy.private_ == order)
      return PageZoneId(page) == PageZoneId(buddy);
    return false;
  }

  /// __free_one_page (page_alloc.c@v4.0:573-652): merges, then list_add (the
  /// tail when the next-higher buddy is free). Returns the order added.
  unsigned FreeOne(Page* page, unsigned order, int mt) {
    constexpr unsigned kMax = kMaxOrder;  // max_order = MAX_ORDER
    unsigned long page_idx =
        static_cast<unsigned long>(page - base_) & ((1UL << kMax) - 1);
    unsigned long buddy_idx = 0;
    while (order < kMax - 1) {
      buddy_idx = page_idx ^ (1UL << order);  // __find_buddy_index
      Page* buddy =
          page + (static_cast<long>(buddy_idx) - static_cast<long>(page_idx));
      if (!PageIsBuddy(*page, *buddy, order)) break;
      ListDel(&buddy->lru);  // writes the buddy's list neighbours
      --area_[order].nr_free;
      RmvPageOrder(*buddy);
      const unsigned long combined_idx = buddy_idx & page_idx;
      page = page +
             (static_cast<long>(combined_idx) - static_cast<long>(page_idx));
      page_idx = combined_idx;
      ++order;
    }
    SetPageOrder(*page, order);
    // The next-highest buddy check (page_alloc.c@v4.0:628-646).
    if (order < kMaxOrder - 2) {
      const unsigned long combined_idx = buddy_idx & page_idx;
      Page* higher_page = page + (static_cast<long>(combined_idx) -
                                  static_cast<long>(page_idx));
      const unsigned long hb_idx = combined_idx ^ (1UL << (order + 1));
      Page* higher_buddy = higher_page + (static_cast<long>(hb_idx) -
                                          static_cast<long>(combined_idx));
      if (PageIsBuddy(*higher_page, *higher_buddy, order + 1)) {
        ListAddTail(&page->lru, &area_[order].free_list[mt]);
        ++area_[order].nr_free;
        return order;
      }
    }
    ListAdd(&page->lru, &area_[order].free_list[mt]);
    ++area_[order].nr_free;
    return order;
  }

  /// __rmqueue_smallest (page_alloc.c@v4.0:1000-1025) + expand
  /// (page_alloc.c@v4.0:900-928), set_freepage_migratetype; nullptr when
  /// empty. `splits` (the caller's) grows by the blocks split.
  Page* RmqueueSmallest(unsigned order, int mt, unsigned* splits = nullptr) {
    for (unsigned cur = order; cur < static_cast<unsigned>(kMaxOrder); ++cur) {
      FA* area = &area_[cur];
      if (ListEmpty(&area->free_list[mt])) continue;
      Page* page = PageFromLru(area->free_list[mt].next);
      ListDel(&page->lru);
      RmvPageOrder(*page);
      --area->nr_free;
      Expand(page, order, cur, area, mt);
      if (splits != nullptr) *splits += cur - order;
      page->index = static_cast<unsigned long>(mt);
      return page;
    }
    return nullptr;
  }

  /// Index of `page` in the pool, or -1 for a pointer outside it.
  long IndexOf(const Page* page) const { return PoolIndexOf(base_, nr_, page); }

  /// The buddy invariants (lock held or quiescent): well-formed lists of
  /// aligned free-block heads, no page in two blocks, nr_free exact, no
  /// unmerged buddies, no PageBuddy inside a block. `covered` (size nr,
  /// zeroed) marks free pages; "" or the first violation; `free_pages` set.
  std::string Check(int migrate_types, std::vector<uint8_t>& covered,
                    long* free_pages) const {
    long total = 0;
    for (int order = 0; order < kMaxOrder; ++order) {
      unsigned long blocks = 0;
      for (int mt = 0; mt < migrate_types; ++mt) {
        const std::string where = "free_area[" + std::to_string(order) +
                                  "].free_list[" + std::to_string(mt) + "]";
        const ListHead* head = &area_[order].free_list[mt];
        const ListHead* prev = head;
        for (const ListHead* node = head->next; node != head;
             node = node->next) {
          if (node->prev != prev)
            return where + ": an entry's prev does not point back";
          const long idx = IndexOf(PageFromLru(node));
          if (idx < 0) return where + ": an entry is not a page of the pool";
          const Page& p = base_[idx];
          if (!PageBuddy(p) || p.private_ != static_cast<unsigned>(order))
            return where + ": page " + std::to_string(idx) +
                   " is not marked a free block of this order (_mapcount " +
                   std::to_string(p._mapcount.load()) + ", private " +
                   std::to_string(p.private_) + ")";
          const unsigned long size = 1UL << order;
          if (static_cast<unsigned long>(idx) % size != 0)
            return where + ": block " + std::to_string(idx) + " misaligned";
          for (unsigned long i = 0; i < size; ++i) {
            if (covered[idx + i])
              return where + ": page " + std::to_string(idx + i) +
                     " is in two free blocks (or a list has a cycle)";
            covered[idx + i] = 1;
            if (i != 0 && PageBuddy(base_[idx + i]))
              return where + ": page " + std::to_string(idx + i) +
                     " inside block " + std::to_string(idx) +
                     " is marked PageBuddy";
          }
          if (order < kMaxOrder - 1) {
            const unsigned long b = static_cast<unsigned long>(idx) ^ size;
            if (PageIsBuddy(p, base_[b], order))
              return where + ": blocks " + std::to_string(idx) + " and " +
                     std::to_string(b) + " are free buddies left unmerged";
          }
          ++blocks;
          prev = node;
        }
        if (head->prev != prev) return where + ": head's prev is not the last";
      }
      if (blocks != area_[order].nr_free)
        return "free_area[" + std::to_string(order) + "].nr_free is " +
               std::to_string(area_[order].nr_free) + " but its lists hold " +
               std::to_string(blocks) + " blocks";
      total += static_cast<long>(blocks) << order;
    }
    *free_pages = total;
    return "";
  }

 private:
  /// expand: the upper halves from `high` down to `low` onto their lists.
  void Expand(Page* page, unsigned low, unsigned high, FA* area, int mt) {
    unsigned long size = 1UL << high;
    while (high > low) {
      --area;
      --high;
      size >>= 1;
      ListAdd(&page[size].lru, &area->free_list[mt]);
      ++area->nr_free;
      SetPageOrder(page[size], high);
    }
  }

  Page* base_;
  unsigned long nr_;
  FA* area_;
};

}  // namespace lockline::buddy
