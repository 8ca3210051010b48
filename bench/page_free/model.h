// page_free's put_page policies and scanner isolation orders, built with
// nothing but layouts/page.h so tests/page_free_aarch64_check.cpp compiles
// them for aarch64 (where the fast path's two loads may be reordered).
// Sources (pristine trees):
//   2.6.11 mm/vmscan.c:562-574 shrink_cache (TestClearPageLRU, then
//     get_page_testone; "being freed elsewhere": __put_page, SetPageLRU);
//     mm/swap.c:178-191 __page_cache_release (lru_lock unconditionally, the
//     page_count re-check); include/linux/mm.h:307 get_page_testone.
//   2.6.16: the same order in __isolate_lru_page (include/linux/mm_inline.h);
//     no 2.6.16 tree was found: its text is the one Nick Piggin's "Race in
//     new page migration code?" (LKML, 2006-01-14) quotes and removes.
//   2.6.18 mm/vmscan.c:593-626 isolate_lru_pages (get_page_unless_zero
//     first, ClearPageLRU after); mm/swap.c:233-242 __page_cache_release
//     (lru_lock only if PageLRU, no re-check; rocklee104/linux-2.6.18);
//     include/linux/mm.h:308-311 get_page_unless_zero.
// The refcount is unbiased (0 = free): get_page_testone is "increment, and
// the old count was 0".
#pragma once

#include <atomic>

#include "layouts/page.h"

namespace lockline {
namespace page_free {

// ---- put_page policies: kName, kDescription, PutPage(page, ctx); ctx has
// LockLru/UnlockLru, LruDel (lock held), FreeHot, RaceWindow (the race family's
// widening of the racy gap), RefUnderflow ------------------------------------

/// How a put_page call ended.
enum class PutResult {
  kLive,           ///< references remain
  kFreedLocked,    ///< last reference; lru_lock was taken
  kFreedNoLock,    ///< last reference by the atomic decrement, no lru_lock
  kFreedFast,      ///< last reference by the fast path's plain store
  kKeptByRecheck,  ///< 2.6.16's re-check found the page resurrected
};

/// local_irq_save of spin_lock_irqsave (mm/swap.c@v2.6.11:180-188,
/// mm/swap.c@v2.6.18:233-242), counted in the fast path's saving: pushf + pop
/// (user mode cannot cli); a no-op off x86 (DAIF is not writable at EL0).
inline unsigned long LocalIrqSave() {
  unsigned long flags = 0;
#if defined(__x86_64__)
  asm volatile("pushfq\n\tpopq %0" : "=r"(flags) : : "memory");
#endif
  return flags;
}
/// local_irq_restore: push + popf (IF is not changed from user mode).
inline void LocalIrqRestore(unsigned long flags) {
#if defined(__x86_64__)
  asm volatile("pushq %0\n\tpopfq" : : "r"(flags) : "memory", "cc");
#else
  (void)flags;
#endif
}

/// atomic_dec_and_test (fully ordered); true when it dropped the last
/// reference; an underflow goes to the context.
template <class Ctx>
bool DecAndTest(Page& page, Ctx& ctx) {
  const int old = page._refcount.fetch_sub(1, std::memory_order_seq_cst);
  if (old <= 0) [[unlikely]]
    ctx.RefUnderflow(page);
  return old == 1;
}

/// 2.6.16 __page_cache_release's locked end: lru_lock (irqs saved),
/// `unlink`, the page_count != 0 re-check (a scanner may have resurrected
/// the page), free_hot_page.
template <class Ctx, class Unlink>
PutResult UnlinkAndRecheckLocked(Page& page, Ctx& ctx, Unlink unlink) {
  const unsigned long flags = LocalIrqSave();
  ctx.LockLru();
  unlink();
  const bool resurrected = page_count(page) != 0;
  ctx.UnlockLru();
  LocalIrqRestore(flags);
  if (resurrected) return PutResult::kKeptByRecheck;
  ctx.FreeHot(page);
  return PutResult::kFreedLocked;
}

/// 2.6.16's put_page (mm/swap.c@2.6.11:178-191, unchanged in 2.6.16).
struct AtomicPut {
  static constexpr const char* kName = "atomic";
  static constexpr const char* kDescription =
      "2.6.16 put_page: atomic_dec_and_test; at zero take lru_lock with irqs "
      "saved unconditionally, TestClearPageLRU + unlink, re-check "
      "page_count != 0, free to the hot list";
  template <class Ctx>
  static PutResult PutPage(Page& page, Ctx& ctx) {
    if (!DecAndTest(page, ctx)) return PutResult::kLive;
    ctx.RaceWindow();
    return UnlinkAndRecheckLocked(page, ctx, [&] {
      if (TestClearPageLru(page)) ctx.LruDel(page);
    });
  }
};

/// The March 2006 proposal: page_count == 1 && !PageLRU -> a plain store of
/// 0 (claimed 1-2 cycles vs ~17). Relaxed loads and store, unordered against
/// vmscan: a scanner's reference taken between the two tests (RaceWindow)
/// is erased.
struct FastpathPut {
  static constexpr const char* kName = "fastpath";
  static constexpr const char* kDescription =
      "2006 proposal: page_count == 1 && !PageLRU -> plain store of 0 and free "
      "(no atomic RMW, no lock); else the 2.6.16 atomic path";
  template <class Ctx>
  static PutResult PutPage(Page& page, Ctx& ctx) {
    if (page_count(page) == 1) {
      ctx.RaceWindow();
      if (!PageLru(page)) {
        set_page_count(page, 0);
        ctx.FreeHot(page);
        return PutResult::kFreedFast;
      }
    }
    return AtomicPut::PutPage(page, ctx);
  }
};

/// Ken Chen's proposal in the thread (not found in the stores; the shape
/// issue 23 quotes): TestClearPageLRU before the lock, lru_lock only if it
/// was set, the re-check kept. Races 2.6.16's TestClearPageLRU-first scanner.
struct LruCheckFirstProposal {
  static constexpr const char* kName = "lru_check_first_proposal";
  static constexpr const char* kDescription =
      "2006 thread's proposal: atomic_dec_and_test; at zero TestClearPageLRU "
      "before the lock; if it was set, lru_lock (irqs saved), unlink, "
      "re-check page_count != 0; free";
  template <class Ctx>
  static PutResult PutPage(Page& page, Ctx& ctx) {
    if (!DecAndTest(page, ctx)) return PutResult::kLive;
    ctx.RaceWindow();
    if (!TestClearPageLru(page)) {
      ctx.FreeHot(page);
      return PutResult::kFreedNoLock;
    }
    return UnlinkAndRecheckLocked(page, ctx, [&] { ctx.LruDel(page); });
  }
};

/// What 2.6.17/2.6.18 shipped (mm/swap.c@v2.6.18:233-242): lru_lock only if
/// PageLRU, no re-check; safe only with 2.6.18's scanner order. Where 2.6.18
/// would BUG, the model skips the unlink and the checker reports.
struct LruCheckFirst2618 {
  static constexpr const char* kName = "lru_check_first_2_6_18";
  static constexpr const char* kDescription =
      "2.6.18 __page_cache_release: atomic_dec_and_test; at zero take "
      "lru_lock (irqs saved) only if PageLRU, __ClearPageLRU + unlink under "
      "it, no re-check; free";
  template <class Ctx>
  static PutResult PutPage(Page& page, Ctx& ctx) {
    if (!DecAndTest(page, ctx)) return PutResult::kLive;
    ctx.RaceWindow();
    PutResult result = PutResult::kFreedNoLock;
    if (PageLru(page)) {
      const unsigned long flags = LocalIrqSave();
      ctx.LockLru();
      if (PageLru(page)) {  // BUG_ON(!PageLRU(page)) in 2.6.18
        ClearPageFlagNonAtomic(page, kPgLru);  // __ClearPageLRU
        ctx.LruDel(page);
      }
      ctx.UnlockLru();
      LocalIrqRestore(flags);
      result = PutResult::kFreedLocked;
    }
    ctx.FreeHot(page);
    return result;
  }
};

/// A table of policy types (the put_page variants, the scanner orders).
template <class... Ts>
struct TypeList {};

template <class F, class... Ts>
void ForEachType(F& f, TypeList<Ts...>) {
  (f.template operator()<Ts>(), ...);
}

/// A new put_page = one policy type + one entry here.
using AllVariants =
    TypeList<AtomicPut, FastpathPut, LruCheckFirstProposal, LruCheckFirst2618>;

template <class F>
void ForEachVariant(F&& f) {
  ForEachType(f, AllVariants{});
}

// ---- scanner orders: Isolate(page, ctx) with lru_lock held on the tail page;
// ctx.ScanGap() widens the gap between the two steps -------------------------

enum class Isolation {
  kNotOnLru,    ///< PG_lru was clear: nothing done
  kTaken,       ///< reference taken, PG_lru cleared: the caller unlinks it
  kBeingFreed,  ///< count was 0: left on (or put back on) the LRU, PG_lru set
};

/// 2.6.16 (mm_inline.h __isolate_lru_page; 2.6.11 mm/vmscan.c:562-574):
/// between its two steps PG_lru is clear while the count may be the freer's
/// 1, the window Nick Piggin's objection was about.
struct Scanner2616 {
  static constexpr const char* kName = "2.6.16";
  static constexpr const char* kDescription =
      "2.6.16 __isolate_lru_page: TestClearPageLRU, then get_page_testone "
      "(0 -> undo, SetPageLRU)";
  template <class Ctx>
  static Isolation Isolate(Page& page, Ctx& ctx) {
    if (!TestClearPageLru(page)) return Isolation::kNotOnLru;
    ctx.ScanGap();  // 2.6.11 shrink_cache does list_del(&page->lru) here
    const int old = page._refcount.fetch_add(1, std::memory_order_seq_cst);
    if (old == 0) {           // get_page_testone: it is being freed elsewhere
      DecAndTest(page, ctx);  // __put_page: drop the reference just taken
      SetPageLru(page);
      return Isolation::kBeingFreed;
    }
    return Isolation::kTaken;
  }
};

/// 2.6.18 (mm/vmscan.c@2.6.18:593-626): get_page_unless_zero first; a zero
/// count leaves the page, PG_lru set, for the freer to unlink.
struct Scanner2618 {
  static constexpr const char* kName = "2.6.18";
  static constexpr const char* kDescription =
      "2.6.18 isolate_lru_pages: get_page_unless_zero, then ClearPageLRU";
  template <class Ctx>
  static Isolation Isolate(Page& page, Ctx& ctx) {
    if (!PageLru(page)) return Isolation::kNotOnLru;  // BUG_ON in 2.6.18
    if (!get_page_unless_zero(page)) return Isolation::kBeingFreed;
    ctx.ScanGap();
    ClearPageLru(page);
    return Isolation::kTaken;
  }
};

using AllScanners = TypeList<Scanner2616, Scanner2618>;

/// 2.6.16 first: the order the objection was made against.
template <class F>
void ForEachScanner(F&& f) {
  ForEachType(f, AllScanners{});
}

/// The race rows' architecture and whether loads may reorder there.
struct MemoryModel {
  const char* arch;
  const char* model;
  bool loads_may_reorder;
};
constexpr MemoryModel ThisMemoryModel() {
#if defined(__x86_64__) || defined(__i386__)
  return {"x86_64", "x86-TSO: loads are not reordered with older loads", false};
#elif defined(__aarch64__)
  return {"aarch64",
          "Armv8 weakly ordered: relaxed loads to different locations may be "
          "reordered",
          true};
#else
  return {"other", "unknown: assume relaxed loads may be reordered", true};
#endif
}

}  // namespace page_free
}  // namespace lockline
