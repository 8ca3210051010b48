// The work outside the lock of pagevec and zone_lock
// (harness/measure/page_work.h, issue 40 item 6): each op touches a fresh
// page's 64 lines and the line of its page-table entry, in ring order, and the
// ring is sized beyond the thread's share of the caches. Correctness only,
// never speed.
#include "harness/measure/page_work.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

namespace lockline {
namespace {

TEST(PageWork, RingIsLargerThanTheThreadsShareOfTheCaches) {
  WorkCaches c;
  c.l2_bytes = std::size_t{1} << 20;
  c.l3_bytes = std::size_t{32} << 20;
  c.l3_pus = 16;
  // One thread: twice the L3 (64 MiB of 4 KiB pages).
  EXPECT_EQ(WorkRingPages(c, 1), (std::size_t{64} << 20) / kPageBytes);
  // Two threads share the L3: together still twice its size.
  EXPECT_EQ(WorkRingPages(c, 2), (std::size_t{32} << 20) / kPageBytes);
  // More threads than the L3's PUs: its PUs share it; never under 2 x L2.
  EXPECT_EQ(WorkRingPages(c, 64), (std::size_t{4} << 20) / kPageBytes);
  c.l3_bytes = 0;
  EXPECT_EQ(WorkRingPages(c, 8), (std::size_t{2} << 20) / kPageBytes);
  // The bounds.
  c.l2_bytes = 0;
  EXPECT_EQ(WorkRingPages(c, 1), kMinWorkPages);
  c.l3_bytes = std::size_t{1} << 40;
  EXPECT_EQ(WorkRingPages(c, 1), kMaxWorkPages);
  // This machine's caches are read from somewhere, and named.
  const WorkCaches here = ReadWorkCaches(nullptr);
  EXPECT_FALSE(here.source.empty());
  EXPECT_GE(WorkRingPages(here, 1) * kPageBytes,
            std::min(2 * here.l3_bytes, kMaxWorkPages * kPageBytes));
}

/// Which 64-byte lines of `ring` (pages and entries) differ from `before`.
std::set<const void*> ChangedLines(const PageWorkRing& ring,
                                   const std::vector<unsigned char>& pages,
                                   const std::vector<uint64_t>& ptes) {
  std::set<const void*> out;
  for (std::size_t i = 0; i < pages.size(); ++i)
    if (ring.pages[i] != pages[i]) out.insert(ring.pages + i / 64 * 64);
  for (std::size_t i = 0; i < ptes.size(); ++i)
    if (ring.ptes[i] != ptes[i])
      out.insert(ring.ptes + i / kPtesPerLine * kPtesPerLine);
  return out;
}

TEST(PageWork, EachOpWritesAFreshPageAndItsPageTableEntry) {
  constexpr std::size_t kRing = 20;
  PageWorkRing ring;
  ring.Allocate(kRing);
  ASSERT_EQ(ring.count, kRing);
  if (ring.fresh) {
    for (std::size_t i = 0; i < kRing * kPageBytes; ++i)
      ASSERT_EQ(ring.pages[i], 1);
  }
  std::set<const void*> pte_lines;
  for (std::size_t op = 0; op < 2 * kRing + 3; ++op) {
    const std::size_t page = op % kRing;
    if (page == 0) {
      // A new cycle: make the ring dirty again so every op's writes show.
      std::memset(ring.pages, 1, kRing * kPageBytes);
      for (std::size_t i = 0; i < kRing; ++i) ring.ptes[i] = 0;
    }
    const std::vector<unsigned char> pages(ring.pages,
                                           ring.pages + kRing * kPageBytes);
    const std::vector<uint64_t> ptes(ring.ptes, ring.ptes + kRing);
    ring.Page(0);
    const std::set<const void*> changed = ChangedLines(ring, pages, ptes);
    // The op's page: all 64 lines written with zeros, nothing else of the
    // ring; plus the one line holding its entry.
    ASSERT_EQ(changed.size(), kPageLines + 1) << "op " << op;
    const unsigned char* mine = ring.pages + page * kPageBytes;
    for (std::size_t i = 0; i < kPageBytes; ++i) ASSERT_EQ(mine[i], 0);
    EXPECT_EQ(ring.ptes[page], reinterpret_cast<uintptr_t>(mine) | 1);
    EXPECT_TRUE(changed.count(ring.ptes + page / kPtesPerLine * kPtesPerLine));
    if (op < kRing) pte_lines.insert(ring.ptes + page / kPtesPerLine * 8);
  }
  // Consecutive pages' entries share a line, 8 to a line, as a PTE page's.
  EXPECT_EQ(pte_lines.size(), (kRing + kPtesPerLine - 1) / kPtesPerLine);
  // The ring cycles in order.
  EXPECT_EQ(ring.next, (2 * kRing + 3) % kRing);
}

TEST(PageWork, RingMemoryIsReusedNotRemapped) {
  // Stay on one CPU (so on one NUMA node: the pool is per node).
  cpu_set_t old_mask, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof(old_mask), &old_mask), 0);
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  unsigned char* first = nullptr;
  {
    PageWorkRing a;
    a.Allocate(300);
    first = a.pages;
    a.Touch();
  }
  PageWorkRing b;
  b.Allocate(200);  // fits in the 300-page block just returned
  EXPECT_FALSE(b.fresh);
  EXPECT_EQ(b.pages, first);
  EXPECT_EQ(b.count, 200u);
  EXPECT_EQ(b.next, 0u);
  PageWorkRing c;
  c.Allocate(200);  // the block is taken: a new one
  EXPECT_TRUE(c.fresh);
  EXPECT_NE(c.pages, first);
  sched_setaffinity(0, sizeof(old_mask), &old_mask);
}

}  // namespace
}  // namespace lockline
