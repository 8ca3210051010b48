// `struct page` and `struct list_head` of Linux 4.0 x86_64 without debug
// options (include/linux/mm_types.h, list.h, page-flags.h, mm.h): field order,
// sizes and atomic orderings are the kernel's; unions reduced to the member
// used. One 64-byte line: flags 0, mapping 8, index 16, _mapcount 24,
// _refcount 28 (4.0's _count), lru 32, private_ 48, padding to 64
// (cmpxchg_double alignment). A batch of K pages touches K lines.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace lockline {

// ---- list_head (include/linux/list.h) ----

/// `struct list_head`; callers hold the list's lock.
struct ListHead {
  ListHead* next;
  ListHead* prev;
};
static_assert(sizeof(ListHead) == 16,
              "two pointers, as struct list_head on LP64");
static_assert(std::is_standard_layout_v<ListHead>,
              "offsetof/container_of need standard layout");

/// LIST_POISON1/2 (no POISON_POINTER_DELTA): a use-after-del faults.
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
/// list_add: after `head` (stack order, the hot end).
inline void ListAdd(ListHead* entry, ListHead* head) {
  ListInsertBetween(entry, head, head->next);
}
/// list_add_tail: before `head` (queue order, the cold end).
inline void ListAddTail(ListHead* entry, ListHead* head) {
  ListInsertBetween(entry, head->prev, head);
}
/// __list_del_entry: unlink without touching the entry's own pointers.
inline void ListUnlink(ListHead* entry) {
  entry->next->prev = entry->prev;
  entry->prev->next = entry->next;
}
/// list_del: unlink and poison the entry.
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

// ---- struct page ----

/// enum pageflags, 4.0 numbering (2.6.16 alike but PG_writeback 12).
inline constexpr int kPgLocked = 0;
inline constexpr int kPgLru = 5;     ///< on a zone LRU list (under lru_lock)
inline constexpr int kPgActive = 6;  ///< on the active list
inline constexpr int kPgSlab = 7;
inline constexpr int kPgReserved = 10;
inline constexpr int kPgPrivate = 11;
inline constexpr int kPgWriteback = 13;
/// Flags the 5.8 LRU paths test (include/linux/page-flags.h@v5.8 numbers).
inline constexpr int kPgSwapBacked = 19;   ///< PG_swapbacked: anon / shmem
inline constexpr int kPgUnevictable = 20;  ///< PG_unevictable
inline constexpr int kPgMlocked = 21;      ///< PG_mlocked

/// Mask of one flag bit.
constexpr unsigned long PageFlagMask(int bit) { return 1UL << bit; }

/// `struct page`, Linux 4.0 x86_64 (the file comment); an empty lru node.
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

// Flag ops ordered as Documentation/atomic_bitops.txt: test_bit relaxed,
// set/clear_bit unordered RMWs, test_and_{set,clear}_bit fully ordered.

inline bool TestPageFlag(const Page& page, int bit) {
  return (page.flags.load(std::memory_order_relaxed) & PageFlagMask(bit)) != 0;
}
inline void SetPageFlag(Page& page, int bit) {
  page.flags.fetch_or(PageFlagMask(bit), std::memory_order_relaxed);
}
inline void ClearPageFlag(Page& page, int bit) {
  page.flags.fetch_and(~PageFlagMask(bit), std::memory_order_relaxed);
}
/// __clear_bit: non-atomic (the caller excludes writers, as under lru_lock).
inline void ClearPageFlagNonAtomic(Page& page, int bit) {
  page.flags.store(
      page.flags.load(std::memory_order_relaxed) & ~PageFlagMask(bit),
      std::memory_order_relaxed);
}
inline bool TestSetPageFlag(Page& page, int bit) {
  return (page.flags.fetch_or(PageFlagMask(bit), std::memory_order_seq_cst) &
          PageFlagMask(bit)) != 0;
}
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

// Reference count (include/linux/mm.h, 4.0): read/set plain, inc unordered,
// dec_and_test and inc_not_zero fully ordered.

/// page_count: a racy snapshot.
inline int page_count(const Page& page) {
  return page._refcount.load(std::memory_order_relaxed);
}
/// set_page_count: only when no one else can hold a reference.
inline void set_page_count(Page& page, int count) {
  page._refcount.store(count, std::memory_order_relaxed);
}
/// get_page: the caller already holds a reference.
inline void get_page(Page& page) {
  page._refcount.fetch_add(1, std::memory_order_relaxed);
}
/// put_page_testzero: true when it dropped the last reference.
inline bool put_page_testzero(Page& page) {
  return page._refcount.fetch_sub(1, std::memory_order_seq_cst) == 1;
}
/// get_page_unless_zero: atomic_add_unless(&count, 1, 0), a CAS loop.
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
