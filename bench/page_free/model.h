// The put_page policies and the reclaim scanner's isolation orders of the
// page_free families (bench/page_free.cpp), kept apart from the harness so
// they build with nothing but layouts/page.h: tests/page_free_aarch64_check.cpp
// compiles them for aarch64, where the fast path's two loads may really be
// reordered (x86-TSO never reorders loads with loads).
//
// Sources (line numbers of pristine trees read with the search tools):
//   2.6.11 mm/vmscan.c:562-574 shrink_cache: TestClearPageLRU, list_del, then
//     get_page_testone under lru_lock; "being freed elsewhere" -> __put_page,
//     SetPageLRU, list_add back.  2.6.11 mm/swap.c:178-191
//     __page_cache_release: lru_lock taken unconditionally, TestClearPageLRU +
//     del_page_from_lru, `if (page_count(page) != 0) page = NULL` (the scanner
//     may have taken a reference), free_hot_page.  2.6.11 include/linux/mm.h:
//     307 get_page_testone = atomic_inc_and_test of a count biased by -1.
//   2.6.16: the same order, factored into __isolate_lru_page in
//     include/linux/mm_inline.h (TestClearPageLRU first, then
//     get_page_testone; -ENOENT puts PG_lru back) and called from
//     isolate_lru_pages (mm/vmscan.c); __page_cache_release as in 2.6.11. No
//     pristine 2.6.16 tree was found in the search store: the 2.6.16 text is
//     the one quoted in Nick Piggin's "Race in new page migration code?"
//     (LKML, 2006-01-14, a patch against 2.6.16-rc), which removes exactly
//     these lines.
//   2.6.18 mm/vmscan.c:593-626 isolate_lru_pages: BUG_ON(!PageLRU),
//     get_page_unless_zero first, ClearPageLRU only after ("the page release
//     code relies on it"); 2.6.18 mm/swap.c:233-242 __page_cache_release:
//     lru_lock (irqsave) only `if (PageLRU(page))`, __ClearPageLRU, no
//     re-check (read in rocklee104/linux-2.6.18); 2.6.18
//     include/linux/mm.h:308-311 get_page_unless_zero = atomic_inc_not_zero.
// The model's refcount is unbiased (0 = free); get_page_testone(p) is
// "increment, and the old count was 0".
#pragma once

#include <atomic>
#include <cstdint>

#include "layouts/page.h"

namespace lockline {
namespace page_free {

// ---- the variants: one put_page policy each ---------------------------------
//
// A policy is a type with kName, kDescription and
//   template <class Ctx> static PutResult PutPage(Page& page, Ctx& ctx);
// The context supplies the zone and the checker hooks:
//   LockLru(), UnlockLru(): take and release zone->lru_lock
//   LruDel(page):      unlink from the zone LRU (caller holds lru_lock)
//   FreeHot(page):     free_hot_page: the page is free, put it on a free list
//   RaceWindow():      the race family's widening of the racy gap of the
//                      variant (between its two unsynchronised steps)
//   RefUnderflow(page): a decrement found the count already <= 0

/// How a put_page call ended.
enum class PutResult {
  kLive,         ///< references remain
  kFreedLocked,  ///< last reference; lru_lock was taken
  /// Last reference via the atomic decrement; no lru_lock (page was off LRU).
  kFreedNoLock,
  /// Last reference via the fast path's plain store: no atomic RMW, no lock.
  kFreedFast,
  /// The count fell to 0 but 2.6.16's re-check under lru_lock found it
  /// non-zero again (someone resurrected the page): not freed here.
  kKeptByRecheck,
};

/// local_irq_save's flag save (spin_lock_irqsave: pushf; pop; cli): the
/// locked put of 2.6.16 and 2.6.18 takes lru_lock with interrupts saved and
/// disabled (mm/swap.c@v2.6.11:180-188, mm/swap.c@v2.6.18:233-242), and the
/// fast path's author counted that in the saving. User mode may read and
/// write EFLAGS (pushf / popf) but not execute cli (IOPL 0), so the model
/// pays pushf + pop here and push + popf in LocalIrqRestore, not cli/sti.
/// No-op on other architectures (DAIF is not writable at EL0).
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

/// atomic_dec_and_test on the refcount (fully ordered, a locked XADD/DEC on
/// x86), reporting an underflow to the context. Returns true when this dropped
/// the last reference.
template <class Ctx>
bool DecAndTest(Page& page, Ctx& ctx) {
  const int old = page._refcount.fetch_sub(1, std::memory_order_seq_cst);
  if (old <= 0) [[unlikely]]
    ctx.RefUnderflow(page);
  return old == 1;
}

/// The locked end of 2.6.16's __page_cache_release, shared by the policies
/// that keep its re-check: lru_lock with irqs saved, `unlink` (the policy's
/// PG_lru test and del_page_from_lru), the re-check page_count != 0 under the
/// lock (a scanner may have resurrected the page), then free_hot_page.
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

/// 2.6.16's put_page (mm/swap.c@2.6.11:178-191, unchanged in 2.6.16):
/// atomic_dec_and_test; at zero __page_cache_release takes lru_lock
/// unconditionally, TestClearPageLRU + unlink, and re-checks page_count != 0
/// under the lock (the 2.6.16 scanner increments a zero count with
/// get_page_testone before it undoes it), then free_hot_page.
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

/// The March 2006 proposal: `if (page_count(page) == 1 && !PageLRU(page))` set
/// the count to 0 with a plain store and free, skipping the locked instruction
/// (claimed 1-2 cycles vs ~17). Both tests and the store are relaxed atomics (a
/// plain load/store on x86, never a C++ data race) and nothing orders them
/// against vmscan: a scanner can take a reference and clear PG_lru between the
/// two tests (or, with the loads reordered on a weakly ordered CPU, before the
/// first), and the store then erases its reference. RaceWindow() sits between
/// the two tests, where that happens.
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

/// The proposal made in the March 2006 thread (attributed there to Ken
/// Chen; the thread itself was not found in this session's stores, so the
/// shape is the one issue 23 quotes from it): atomic_dec_and_test; at zero an
/// atomic TestClearPageLRU *before* taking the lock; only a page that was on
/// the LRU takes lru_lock (irqs saved) to unlink, and the re-check
/// page_count != 0 under the lock is kept. Against 2.6.16's
/// TestClearPageLRU-first scanner the two TestClearPageLRU race: when the
/// scanner wins, the freer frees without the lock a page the scanner puts
/// back on the LRU. RaceWindow() sits between the decrement and the test.
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

/// What 2.6.17/2.6.18 shipped (mm/swap.c@v2.6.18:233-242,
/// __page_cache_release): atomic_dec_and_test; at zero `if (PageLRU(page))`
/// take lru_lock with irqs saved, BUG_ON(!PageLRU), the non-atomic
/// __ClearPageLRU and del_page_from_lru under it, no re-check; free. Safe
/// only with a scanner that never clears PG_lru of a page it has not
/// referenced (2.6.18's order): against 2.6.16's TestClearPageLRU-first
/// scanner the freer can see PG_lru clear while the scanner is about to put
/// the page back. RaceWindow() sits between the decrement and the PageLRU
/// test. (Where 2.6.18 would BUG, the model skips the unlink and lets the
/// race family's checker report what follows.)
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

/// Calls `f.template operator()<T>()` for every T of the table, in order.
template <class F, class... Ts>
void ForEachType(F& f, TypeList<Ts...>) {
  (f.template operator()<Ts>(), ...);
}

/// The variant table: a new put_page = one policy type + one entry here.
using AllVariants =
    TypeList<AtomicPut, FastpathPut, LruCheckFirstProposal, LruCheckFirst2618>;

/// Calls `f.template operator()<V>()` for every put_page policy, in table
/// order.
template <class F>
void ForEachVariant(F&& f) {
  ForEachType(f, AllVariants{});
}

// ---- the scanner orders -----------------------------------------------------
//
// A scanner order is a type with kName, kDescription and
//   template <class Ctx> static Isolation Isolate(Page& page, Ctx& ctx);
// called with lru_lock held on the page at the LRU tail. Ctx hooks: ScanGap()
// (the race family's widening of the gap between the two steps), and the
// policies' RefUnderflow(page) (__put_page is DecAndTest).

/// What an isolation attempt did.
enum class Isolation {
  kNotOnLru,    ///< PG_lru was clear: nothing done
  kTaken,       ///< reference taken, PG_lru cleared: the caller unlinks it
  kBeingFreed,  ///< count was 0: left on (or put back on) the LRU, PG_lru set
};

/// 2.6.16 (mm_inline.h __isolate_lru_page; 2.6.11 mm/vmscan.c:562-574):
/// TestClearPageLRU, then get_page_testone; a zero count means "being freed
/// elsewhere": __put_page, SetPageLRU, back on the list. Between the two steps
/// the page has PG_lru clear while its count may still be the freer's 1 (or
/// already 0): the window Nick Piggin's objection was about.
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

/// 2.6.18 (mm/vmscan.c@2.6.18:593-626): get_page_unless_zero first, and
/// ClearPageLRU only once the reference is held; a zero count leaves the page
/// on the LRU with PG_lru set for the freer's __page_cache_release to unlink.
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

/// The scanner table.
using AllScanners = TypeList<Scanner2616, Scanner2618>;

/// Calls `f.template operator()<S>()` for every scanner order (2.6.16 first:
/// the order the 2006 objection was made against, the verdict's default).
template <class F>
void ForEachScanner(F&& f) {
  ForEachType(f, AllScanners{});
}

/// The architecture and memory model the race rows were measured under, and
/// whether they can show the fast path's load reordering.
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
