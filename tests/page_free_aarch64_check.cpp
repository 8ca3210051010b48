// Compile-only check that the put_page policies and scanner orders of the
// page_free families (bench/page_free/model.h) build for aarch64, where the
// fast path's two relaxed loads may be reordered (issue 17): run by ctest as
// `aarch64-linux-gnu-g++ -fsyntax-only`, like locks_aarch64_check.cpp. Not
// linked or run. Every policy is instantiated against every scanner order with
// a minimal context.
#include "bench/page_free/model.h"

#if !defined(__aarch64__)
#error "this file is compiled with the aarch64 cross compiler only"
#endif

namespace lockline::page_free {

struct CheckCtx {
  int locked = 0, freed = 0, underflows = 0;
  void LockLru() { ++locked; }
  void UnlockLru() { --locked; }
  void LruDel(Page& page) { ListDel(&page.lru); }
  void FreeHot(Page&) { ++freed; }
  void RaceWindow() {}
  void ScanGap() {}
  void RefUnderflow(Page&) { ++underflows; }
};

int CheckAllPolicies() {
  int n = 0;
  static_assert(ThisMemoryModel().loads_may_reorder);
  ForEachVariant([&]<class V>() {
    ForEachScanner([&]<class S>() {
      Page page;
      CheckCtx ctx;
      set_page_count(page, 1);
      SetPageLru(page);
      n += static_cast<int>(S::Isolate(page, ctx));
      n += static_cast<int>(V::PutPage(page, ctx));
    });
  });
  return n;
}

}  // namespace lockline::page_free
