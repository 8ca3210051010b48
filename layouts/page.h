// Userspace model of the kernel's `struct page` and `struct list_head`,
// following Linux 4.0 (include/linux/mm_types.h, include/linux/list.h,
// include/linux/page-flags.h, include/linux/mm.h) on x86_64 without debug
// options. Field order, sizes and the atomic operations' ordering are the
// kernel's; unions are reduced to the member the experiments use.
//
// struct Page, 64 bytes = exactly one 64-byte line when 64-byte aligned:
//
//   line 0  [ 0.. 8) flags       PG_* bits, atomic bit ops
//           [ 8..16) mapping     address_space / anon_vma stand-in
//           [16..24) index       offset within mapping
//           [24..28) _mapcount   page-table mappings - 1
//           [28..32) _refcount   reference count (4.0 calls it _count; renamed
//           in 4.6) [32..48) lru         LRU / buddy free-list node [48..56)
//           private_    buffer heads, swap entry, buddy order [56..64) padding
//           4.0 aligns struct page to 2 words for cmpxchg_double -> 64
//
// So every page-state check (flags), refcount update and list operation touches
// the same line: a batch of K pages is K lines of struct page on top of the
// pagevec's own lines.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace lockline {

// ---- list_head (include/linux/list.h)
// ---------------------------------------------------------

/// Circular doubly-linked list node, `struct list_head`. An empty list's head
/// points to itself. Not thread-safe: callers hold the lock that protects the
/// list (zone->lock, lru_lock).
struct ListHead {
  ListHead* next;
  ListHead* prev;
};
static_assert(sizeof(ListHead) == 16,
              "two pointers, as struct list_head on LP64");
static_assert(std::is_standard_layout_v<ListHead>,
              "offsetof/container_of need standard layout");

/// Poison values written into a deleted entry (LIST_POISON1/2 without
/// POISON_POINTER_DELTA): a use-after-del dereferences a non-canonical low
/// address and faults instead of corrupting the list.
inline ListHead* ListPoison1() {
  return reinterpret_cast<ListHead*>(std::uintptr_t{0x100});
}
inline ListHead* ListPoison2() {
  return reinterpret_cast<ListHead*>(std::uintptr_t{0x200});
}

/// INIT_LIST_HEAD: an empty list.
inline void ListInit(ListHead* head) {
  head->next = head;
  head->prev = head;
}
/// __list_add: insert `entry` between two known consecutive entries.
inline void ListInsertBetween(ListHead* entry, ListHead* prev, ListHead* next) {
  next->prev = entry;
  entry->next = next;
  entry->prev = prev;
  prev->next = entry;
}
/// list_add: insert `entry` right after `head` (stack order; the buddy
/// allocator's hot end).
inline void ListAdd(ListHead* entry, ListHead* head) {
  ListInsertBetween(entry, head, head->next);
}
/// list_add_tail: insert `entry` right before `head` (queue order; the cold
/// end).
inline void ListAddTail(ListHead* entry, ListHead* head) {
  ListInsertBetween(entry, head->prev, head);
}
/// __list_del_entry: unlink without touching the entry's own pointers.
inline void ListUnlink(ListHead* entry) {
  entry->next->prev = entry->prev;
  entry->prev->next = entry->next;
}
/// list_del: unlink and poison the entry (LIST_POISON1 in next, LIST_POISON2 in
/// prev).
inline void ListDel(ListHead* entry) {
  ListUnlink(entry);
  entry->next = ListPoison1();
  entry->prev = ListPoison2();
}
/// list_move: unlink from its list and add after `head`.
inline void ListMove(ListHead* entry, ListHead* head) {
  ListUnlink(entry);
  ListAdd(entry, head);
}
/// list_empty.
inline bool ListEmpty(const ListHead* head) { return head->next == head; }

// ---- struct page
// ------------------------------------------------------------------------------

/// Page-flag bit numbers (enum pageflags). Bits 0-7 and 10-11 have the same
/// numbers in 2.6.16 and 4.0; PG_writeback is 12 in 2.6.16 and 13 in 4.0
/// (PG_private_2 was inserted), we use 4.0.
inline constexpr int kPgLocked =
    0;  ///< PG_locked: page is locked (I/O, truncate)
inline constexpr int kPgError = 1;  ///< PG_error
inline constexpr int kPgReferenced =
    2;  ///< PG_referenced: recently accessed (second chance)
inline constexpr int kPgUptodate = 3;  ///< PG_uptodate
inline constexpr int kPgDirty = 4;     ///< PG_dirty
inline constexpr int kPgLru =
    5;  ///< PG_lru: page is on a zone LRU list (under lru_lock)
inline constexpr int kPgActive =
    6;  ///< PG_active: on the active rather than inactive list
inline constexpr int kPgSlab = 7;        ///< PG_slab
inline constexpr int kPgReserved = 10;   ///< PG_reserved
inline constexpr int kPgPrivate = 11;    ///< PG_private: private_ holds fs data
inline constexpr int kPgWriteback = 13;  ///< PG_writeback (4.0 numbering)
/// The flags the 5.8 LRU paths test (include/linux/page-flags.h@v5.8 numbers;
/// unused by the 2.6.x models, so they do not collide with the bits above).
inline constexpr int kPgSwapBacked = 19;   ///< PG_swapbacked: anon / shmem
inline constexpr int kPgUnevictable = 20;  ///< PG_unevictable
inline constexpr int kPgMlocked = 21;      ///< PG_mlocked

/// Mask of one flag bit.
constexpr unsigned long PageFlagMask(int bit) { return 1UL << bit; }

/// `struct page`, Linux 4.0 x86_64 (see the diagram at the top of this file).
/// Default construction gives flags 0, refcount 0 and a self-linked (empty) lru
/// node.
struct alignas(64) Page {
  std::atomic<unsigned long> flags{0};
  void* mapping = nullptr;
  unsigned long index = 0;
  std::atomic<int> _mapcount{-1};
  std::atomic<int> _refcount{0};
  ListHead lru{&lru, &lru};
  unsigned long private_ = 0;
};
static_assert(std::is_standard_layout_v<Page>,
              "offsetof on Page must be well-defined");
static_assert(sizeof(Page) == 64,
              "struct page is 64 bytes on x86_64 (4.0, no debug options)");
static_assert(alignof(Page) == 64,
              "one page descriptor = exactly one 64-byte line");
static_assert(offsetof(Page, flags) == 0,
              "flags lead the struct, as in every kernel version");
static_assert(offsetof(Page, _refcount) == 28,
              "4.0: _count after _mapcount in the 2nd dword");
static_assert(offsetof(Page, lru) == 32,
              "4.0: lru in the second half of the line");
static_assert(std::atomic<unsigned long>::is_always_lock_free,
              "flags must be a plain word");
static_assert(std::atomic<int>::is_always_lock_free,
              "refcount must be a plain atomic_t");

/// container_of(lru, struct page, lru): the page owning a list node.
inline Page* PageFromLru(ListHead* node) {
  return reinterpret_cast<Page*>(reinterpret_cast<char*>(node) -
                                 offsetof(Page, lru));
}
inline const Page* PageFromLru(const ListHead* node) {
  return reinterpret_cast<const Page*>(reinterpret_cast<const char*>(node) -
                                       offsetof(Page, lru));
}

// Flag operations. Ordering follows Linux's atomic bitops
// (Documentation/atomic_bitops.txt): test_bit is a plain (relaxed) read;
// set_bit/clear_bit are atomic RMWs without ordering;
// test_and_set_bit/test_and_clear_bit are fully ordered.

/// test_bit.
inline bool TestPageFlag(const Page& page, int bit) {
  return (page.flags.load(std::memory_order_relaxed) & PageFlagMask(bit)) != 0;
}
/// set_bit.
inline void SetPageFlag(Page& page, int bit) {
  page.flags.fetch_or(PageFlagMask(bit), std::memory_order_relaxed);
}
/// clear_bit.
inline void ClearPageFlag(Page& page, int bit) {
  page.flags.fetch_and(~PageFlagMask(bit), std::memory_order_relaxed);
}
/// __clear_bit: a non-atomic read-modify-write (the caller excludes other
/// writers of the word, as __ClearPageLRU under lru_lock does).
inline void ClearPageFlagNonAtomic(Page& page, int bit) {
  page.flags.store(
      page.flags.load(std::memory_order_relaxed) & ~PageFlagMask(bit),
      std::memory_order_relaxed);
}
/// test_and_set_bit: returns the old value (fully ordered).
inline bool TestSetPageFlag(Page& page, int bit) {
  return (page.flags.fetch_or(PageFlagMask(bit), std::memory_order_seq_cst) &
          PageFlagMask(bit)) != 0;
}
/// test_and_clear_bit: returns the old value (fully ordered).
inline bool TestClearPageFlag(Page& page, int bit) {
  return (page.flags.fetch_and(~PageFlagMask(bit), std::memory_order_seq_cst) &
          PageFlagMask(bit)) != 0;
}

/// PageLRU / SetPageLRU / ClearPageLRU / TestClearPageLRU.
inline bool PageLru(const Page& page) { return TestPageFlag(page, kPgLru); }
inline void SetPageLru(Page& page) { SetPageFlag(page, kPgLru); }
inline void ClearPageLru(Page& page) { ClearPageFlag(page, kPgLru); }
inline bool TestClearPageLru(Page& page) {
  return TestClearPageFlag(page, kPgLru);
}
/// PageActive / SetPageActive / ClearPageActive.
inline bool PageActive(const Page& page) {
  return TestPageFlag(page, kPgActive);
}
inline void SetPageActive(Page& page) { SetPageFlag(page, kPgActive); }
inline void ClearPageActive(Page& page) { ClearPageFlag(page, kPgActive); }

// Reference count (include/linux/mm.h, 4.0). atomic_read/atomic_set are plain
// accesses; atomic_inc has no ordering; atomic_dec_and_test and
// atomic_inc_not_zero are fully ordered.

/// page_count: current references (a racy snapshot, like atomic_read).
inline int page_count(const Page& page) {
  return page._refcount.load(std::memory_order_relaxed);
}
/// set_page_count: plain store (only valid when no one else can hold a
/// reference).
inline void set_page_count(Page& page, int count) {
  page._refcount.store(count, std::memory_order_relaxed);
}
/// get_page: take a reference on a page the caller already holds a reference
/// to.
inline void get_page(Page& page) {
  page._refcount.fetch_add(1, std::memory_order_relaxed);
}
/// put_page_testzero: drop a reference; true when it was the last one (fully
/// ordered).
inline bool put_page_testzero(Page& page) {
  return page._refcount.fetch_sub(1, std::memory_order_seq_cst) == 1;
}
/// get_page_unless_zero: take a speculative reference unless the page is free
/// (count 0); atomic_add_unless(&count, 1, 0) as a CAS loop, fully ordered on
/// success.
inline bool get_page_unless_zero(Page& page) {
  int c = page._refcount.load(std::memory_order_relaxed);
  while (c != 0) {
    if (page._refcount.compare_exchange_weak(
            c, c + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

}  // namespace lockline
