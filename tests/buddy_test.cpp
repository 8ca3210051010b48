// Tests of the buddy allocator model (layouts/buddy.h, Linux 4.0
// __free_one_page / __rmqueue_smallest / expand): splits and merges round-trip
// without losing or duplicating pages, no page is ever on two lists or in two
// blocks, freed buddies always merge, and Check catches each broken invariant.
#include "layouts/buddy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace lockline::buddy {
namespace {

/// A pool of `blocks` order-10 blocks with its own free_area[] (CMA config).
struct Pool {
  explicit Pool(unsigned long blocks, bool init = true)
      : nr(blocks * kMaxOrderNrPages),
        pages(new Page[nr]),
        buddy(pages.get(), nr, area) {
    for (auto& a : area) {
      for (ListHead& h : a.free_list) ListInit(&h);
      a.nr_free = 0;
    }
    if (init) {
      EXPECT_TRUE(buddy.Init(kMigrateMovable));
    }
  }
  /// Check()'s verdict and the free pages it counted.
  std::string Check(long* free_pages) {
    std::vector<uint8_t> covered(nr, 0);
    return buddy.Check(kMigrateTypes, covered, free_pages);
  }
  unsigned long nr;
  FreeArea area[kMaxOrder];
  std::unique_ptr<Page[]> pages;
  BuddyAllocator<FreeArea> buddy;
};

TEST(Buddy, InitRejectsPartialBlocks) {
  Pool p(1, false);
  BuddyAllocator<FreeArea> bad(p.pages.get(), 1000, p.area);
  EXPECT_FALSE(bad.Init(kMigrateMovable));
  EXPECT_EQ(p.area[kMaxOrder - 1].nr_free, 0u);
}

TEST(Buddy, BootIsOrder10Blocks) {
  Pool p(3);
  long free = 0;
  EXPECT_EQ(p.Check(&free), "");
  EXPECT_EQ(free, static_cast<long>(p.nr));
  EXPECT_EQ(p.area[kMaxOrder - 1].nr_free, 3u);
  for (int o = 0; o < kMaxOrder - 1; ++o) EXPECT_EQ(p.area[o].nr_free, 0u);
}

TEST(Buddy, OneOrder0AllocationSplitsTheBlockIntoEveryLowerOrder) {
  Pool p(1);
  unsigned splits = 0;
  Page* page = p.buddy.RmqueueSmallest(0, kMigrateMovable, &splits);
  ASSERT_NE(page, nullptr);
  EXPECT_EQ(page, &p.pages[0]);  // the lower half is kept, upper halves freed
  EXPECT_FALSE(PageBuddy(*page));
  EXPECT_EQ(page->index, static_cast<unsigned long>(kMigrateMovable));
  for (int o = 0; o < kMaxOrder - 1; ++o) {
    EXPECT_EQ(p.area[o].nr_free, 1u) << "order " << o;
    // expand put the buddy of size 2^o at pfn 2^o.
    EXPECT_TRUE(PageBuddy(p.pages[1ul << o]));
    EXPECT_EQ(p.pages[1ul << o].private_, static_cast<unsigned long>(o));
  }
  EXPECT_EQ(p.area[kMaxOrder - 1].nr_free, 0u);
  EXPECT_EQ(splits, static_cast<unsigned>(kMaxOrder - 1));
  long free = 0;
  EXPECT_EQ(p.Check(&free), "");
  EXPECT_EQ(free, static_cast<long>(p.nr) - 1);
  // Freeing it merges all the way back up.
  EXPECT_EQ(p.buddy.FreeOne(page, 0, kMigrateMovable),
            static_cast<unsigned>(kMaxOrder - 1));
  EXPECT_EQ(p.Check(&free), "");
  EXPECT_EQ(free, static_cast<long>(p.nr));
  EXPECT_EQ(p.area[kMaxOrder - 1].nr_free, 1u);
}

TEST(Buddy, NextHigherBuddyFreeGoesToTheTail) {
  Pool p(1);
  // Take pfn 0..3 as order-0 pages, free 2 and 3 (they merge into order 1 at
  // pfn 2), then free 0: its buddy 1 is allocated, but the next-higher buddy
  // (order-1 block at 2) is free, so page 0 goes to the tail of order 0.
  std::vector<Page*> got;
  for (int i = 0; i < 4; ++i)
    got.push_back(p.buddy.RmqueueSmallest(0, kMigrateMovable));
  for (int i = 0; i < 4; ++i) ASSERT_EQ(got[i], &p.pages[i]);
  // Put another order-0 block on the list first, so head vs tail is visible.
  Page* other = p.buddy.RmqueueSmallest(0, kMigrateMovable);  // pfn 4
  Page* five = p.buddy.RmqueueSmallest(0, kMigrateMovable);   // pfn 5
  ASSERT_EQ(other, &p.pages[4]);
  p.buddy.FreeOne(other, 0, kMigrateMovable);  // buddy 5 busy: order-0 head
  p.buddy.FreeOne(got[2], 0, kMigrateMovable);
  p.buddy.FreeOne(got[3], 0, kMigrateMovable);  // merges with 2: order 1
  EXPECT_EQ(p.buddy.FreeOne(got[0], 0, kMigrateMovable), 0u);
  const ListHead& head = p.area[0].free_list[kMigrateMovable];
  EXPECT_EQ(PageFromLru(head.prev), &p.pages[0]) << "not added at the tail";
  EXPECT_EQ(PageFromLru(head.next), &p.pages[4]);
  long free = 0;
  EXPECT_EQ(p.Check(&free), "");
  EXPECT_EQ(free, static_cast<long>(p.nr) - 2);  // pages 1 and 5 held
  p.buddy.FreeOne(got[1], 0, kMigrateMovable);
  p.buddy.FreeOne(five, 0, kMigrateMovable);
  EXPECT_EQ(p.Check(&free), "");
  EXPECT_EQ(free, static_cast<long>(p.nr));
  EXPECT_EQ(p.area[kMaxOrder - 1].nr_free, 1u);
}

// Random interleavings of allocations and frees: after every step the
// invariants hold and allocated + free == pool; freeing everything restores
// the boot state (all order-10 blocks).
TEST(Buddy, RandomSplitMergeRoundTripsConservePages) {
  Pool p(4);
  std::mt19937 rng(16);
  std::vector<Page*> held;
  std::vector<uint8_t> is_held(p.nr, 0);
  unsigned splits = 0;
  unsigned long merges = 0;
  // The allocator object is written only at construction (issue 40 item 4):
  // no counter of its own changes under the lock.
  std::vector<unsigned char> before(sizeof(p.buddy));
  std::memcpy(before.data(), &p.buddy, sizeof(p.buddy));
  for (int step = 0; step < 20000; ++step) {
    const bool alloc = held.empty() || (held.size() < p.nr && rng() % 3 != 0);
    if (alloc) {
      Page* page = p.buddy.RmqueueSmallest(0, kMigrateMovable, &splits);
      ASSERT_NE(page, nullptr) << "step " << step;
      const long idx = p.buddy.IndexOf(page);
      ASSERT_GE(idx, 0);
      ASSERT_FALSE(is_held[idx]) << "page handed out twice";
      is_held[idx] = 1;
      held.push_back(page);
    } else {
      const std::size_t k = rng() % held.size();
      Page* page = held[k];
      held[k] = held.back();
      held.pop_back();
      is_held[p.buddy.IndexOf(page)] = 0;
      merges += p.buddy.FreeOne(page, 0, kMigrateMovable);
    }
    if (step % 997 == 0) {
      std::vector<uint8_t> covered(p.nr, 0);
      long free = 0;
      ASSERT_EQ(p.buddy.Check(kMigrateTypes, covered, &free), "")
          << "step " << step;
      ASSERT_EQ(free + static_cast<long>(held.size()), static_cast<long>(p.nr));
      for (unsigned long i = 0; i < p.nr; ++i) {
        ASSERT_FALSE(covered[i] && is_held[i])
            << "page " << i << " both free and held";
      }
    }
  }
  for (Page* page : held) merges += p.buddy.FreeOne(page, 0, kMigrateMovable);
  long free = 0;
  EXPECT_EQ(p.Check(&free), "");
  EXPECT_EQ(free, static_cast<long>(p.nr));
  EXPECT_EQ(p.area[kMaxOrder - 1].nr_free, 4u);
  EXPECT_GT(merges, 0u);
  // Every split block was merged back: the pool is its 4 boot blocks again.
  EXPECT_EQ(merges, static_cast<unsigned long>(splits));
  EXPECT_EQ(std::memcmp(before.data(), &p.buddy, sizeof(p.buddy)), 0)
      << "the allocator object was written";
}

TEST(Buddy, ExhaustionReturnsNull) {
  Pool p(1);
  for (unsigned long i = 0; i < p.nr; ++i)
    ASSERT_NE(p.buddy.RmqueueSmallest(0, kMigrateMovable), nullptr);
  EXPECT_EQ(p.buddy.RmqueueSmallest(0, kMigrateMovable), nullptr);
  long free = -1;
  EXPECT_EQ(p.Check(&free), "");
  EXPECT_EQ(free, 0);
}

TEST(Buddy, CheckCatchesBrokenInvariants) {
  long free = 0;
  {
    Pool p(2);
    ++p.area[3].nr_free;
    EXPECT_NE(p.Check(&free).find("nr_free"), std::string::npos);
  }
  {
    // Two free buddies left unmerged.
    Pool p(1);
    Page* a = p.buddy.RmqueueSmallest(0, kMigrateMovable);  // pfn 0
    // Put pfn 0 back without merging, as a bug would.
    SetPageOrder(*a, 0);
    ListAdd(&a->lru, &p.area[0].free_list[kMigrateMovable]);
    ++p.area[0].nr_free;
    EXPECT_NE(p.Check(&free).find("unmerged"), std::string::npos)
        << p.Check(&free);
  }
  {
    // One page in two blocks: pfn 1 is a free order-0 block; pfn 0 (held)
    // is wrongly put on the order-1 list, whose block covers pfn 1 too.
    Pool p(1);
    Page* a = p.buddy.RmqueueSmallest(0, kMigrateMovable);  // pfn 0
    SetPageOrder(*a, 1);
    ListAdd(&a->lru, &p.area[1].free_list[kMigrateMovable]);
    ++p.area[1].nr_free;
    EXPECT_NE(p.Check(&free).find("two free blocks"), std::string::npos)
        << p.Check(&free);
  }
  {
    // A misaligned block head.
    Pool p(1);
    Page* a = p.buddy.RmqueueSmallest(0, kMigrateMovable);
    (void)a;
    Page& one = p.pages[1];  // order-0 block at pfn 1
    ASSERT_TRUE(PageBuddy(one));
    one.private_ = 1;  // claims order 1 at an odd pfn
    EXPECT_NE(p.Check(&free), "");
  }
}

TEST(Buddy, NoCmaFreeAreaWorksToo) {
  using FA5 = FreeAreaOf<MigrateTypesOf(ZoneConfig::kNoCma)>;
  FA5 area[kMaxOrder];
  for (auto& a : area) {
    for (ListHead& h : a.free_list) ListInit(&h);
    a.nr_free = 0;
  }
  std::unique_ptr<Page[]> pages(new Page[kMaxOrderNrPages]);
  BuddyAllocator<FA5> b(pages.get(), kMaxOrderNrPages, area);
  ASSERT_TRUE(b.Init(kMigrateMovable));
  Page* x = b.RmqueueSmallest(0, kMigrateMovable);
  ASSERT_NE(x, nullptr);
  b.FreeOne(x, 0, kMigrateMovable);
  std::vector<uint8_t> covered(kMaxOrderNrPages, 0);
  long free = 0;
  EXPECT_EQ(b.Check(MigrateTypesOf(ZoneConfig::kNoCma), covered, &free), "");
  EXPECT_EQ(free, static_cast<long>(kMaxOrderNrPages));
}

}  // namespace
}  // namespace lockline::buddy
