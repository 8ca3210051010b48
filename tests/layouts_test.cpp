// Layout models: sizes, report offsets == offsetof, line sharing of every zone
// variant for every lock and both line sizes, pagevec placement, list and
// refcount helpers.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "harness/locks/all_locks.h"
#include "layouts/cacheline.h"
#include "layouts/page.h"
#include "layouts/pagevec.h"
#include "layouts/report.h"
#include "layouts/zone.h"

namespace lockline {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

const FieldInfo& Field(const LayoutInfo& info, const std::string& name) {
  for (const FieldInfo& f : info.fields) {
    if (f.name == name) return f;
  }
  ADD_FAILURE() << info.name << " has no field " << name;
  static const FieldInfo kNone;
  return kNone;
}

// Expects the layout report `info` to give field `member` of type `T` (named
// in the report as the member is spelled) the offset offsetof(T, member).
#define EXPECT_REPORTED_OFFSET(info, T, member) \
  EXPECT_EQ(Field(info, #member).offset, offsetof(T, member)) << #member

// ---- pagevec
// ---------------------------------------------------------------------------------

TEST(Pagevec, SizesAreTheRealLp64Numbers) {
  EXPECT_EQ(sizeof(PagevecV269), 136u);
  EXPECT_EQ(sizeof(PagevecProposal2004), 128u);
  EXPECT_EQ(sizeof(Pagevec5x15), 128u);
  EXPECT_EQ(sizeof(Pagevec5x31), 256u);
  EXPECT_EQ(sizeof(PagevecV269Ilp32), 72u);
  EXPECT_EQ(sizeof(PagevecProposal2004Ilp32), 64u);
  EXPECT_STREQ(Pagevec5x15::kName, "pagevec_5x15");
  EXPECT_STREQ(Pagevec5x31::kName, "pagevec_5x31");
  EXPECT_STREQ(Pagevec5x<128>::kName, "pagevec_5x128");
  EXPECT_STREQ(Pagevec5x<1>::kName, "pagevec_5x1");
}

TEST(Pagevec, OffsetZeroSpansTwoLinesOffsetEightSpansThree) {
  for (const char* kind : {PagevecProposal2004::kName, Pagevec5x15::kName}) {
    const LayoutInfo* at0 = FindLayout(PagevecLayoutName(kind, 0, 64));
    const LayoutInfo* at8 = FindLayout(PagevecLayoutName(kind, 8, 64));
    ASSERT_NE(at0, nullptr) << kind;
    ASSERT_NE(at8, nullptr) << kind;
    EXPECT_EQ(LinesSpanned(*at0), 2) << kind;
    EXPECT_EQ(LinesSpanned(*at8), 3) << kind;
  }
  const LayoutInfo* v269 =
      FindLayout(PagevecLayoutName(PagevecV269::kName, 0, 64));
  ASSERT_NE(v269, nullptr);
  EXPECT_EQ(LinesSpanned(*v269), 3);
  EXPECT_EQ(LinesSpanned(0, sizeof(PagevecProposal2004), 64), 2);
  EXPECT_EQ(LinesSpanned(8, sizeof(PagevecProposal2004), 64), 3);
}

TEST(Pagevec, EveryOffsetOfALineIsReported) {
  for (std::size_t offset = 0; offset < 64; offset += 8) {
    for (const char* kind : {PagevecV269::kName, PagevecProposal2004::kName,
                             Pagevec5x15::kName, Pagevec5x31::kName}) {
      const LayoutInfo* info = FindLayout(PagevecLayoutName(kind, offset, 64));
      ASSERT_NE(info, nullptr) << kind << " " << offset;
      EXPECT_EQ(info->base_offset, offset);
      EXPECT_EQ(LinesSpanned(*info), LinesSpanned(offset, info->size, 64));
    }
  }
}

TEST(Placement, AlignedWithOffsetRejectsWhatDoesNotFit) {
  unsigned char buf[64];
  EXPECT_EQ(AlignedWithOffset(buf, sizeof(buf), 64, 8, 128),
            nullptr);  // does not fit
  EXPECT_EQ(AlignedWithOffset(buf, sizeof(buf), 64, 64, 8), nullptr);
  EXPECT_EQ(AlignedWithOffset(buf, sizeof(buf), 60, 0, 8), nullptr);
}

TEST(Pagevec, OperationsFollowLinux) {
  Page pages[16];
  PagevecV269 pv;
  pagevec_init(pv, 1);
  EXPECT_EQ(pv.cold, 1);
  EXPECT_EQ(pagevec_count(pv), 0);
  EXPECT_EQ(pagevec_space(pv), 16);
  for (int i = 0; i < 15; ++i)
    EXPECT_EQ(pagevec_add(pv, &pages[i]), 16 - i - 1);
  EXPECT_EQ(pagevec_add(pv, &pages[15]), 0);  // full: the caller drains now
  EXPECT_EQ(pv.pages[15], &pages[15]);
  pagevec_reinit(pv);
  EXPECT_EQ(pagevec_count(pv), 0);
  EXPECT_EQ(pv.cold, 1);

  Pagevec5x15 pv5;
  pagevec_init(pv5);
  EXPECT_FALSE(pv5.percpu_pvec_drained);
  EXPECT_EQ(pagevec_add(pv5, &pages[0]), 14);
}

TEST(Pagevec, RuntimeSweepViewMatchesTheStaticType) {
  for (int slots : {1, 15, 31, 64, 128, 255}) {
    const std::size_t line = 64;
    std::vector<unsigned char> buffer(Pagevec5xBytes(slots) + 2 * line);
    void* at = AlignedWithOffset(buffer.data(), buffer.size(), line, 8,
                                 Pagevec5xBytes(slots));
    ASSERT_NE(at, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(at) % line, 8u);
    PagevecView view = PlacePagevec5x(at, slots);
    ASSERT_EQ(view.slots, slots);
    Page page;
    for (int i = 0; i < slots; ++i)
      EXPECT_EQ(pagevec_add(view, &page), slots - i - 1);
    EXPECT_EQ(pagevec_count(view), slots);
    pagevec_reinit(view);
    EXPECT_EQ(pagevec_space(view), slots);

    const std::string name =
        PagevecLayoutName("pagevec_5x" + std::to_string(slots), 8, line);
    const LayoutInfo* info = FindLayout(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->size, Pagevec5xBytes(slots));
    EXPECT_EQ(FindLayout(name), info) << "sweep layouts are cached";
  }
  EXPECT_EQ(PlacePagevec5x(nullptr, 15).slots, 0);
  alignas(8) unsigned char small[16];
  EXPECT_EQ(PlacePagevec5x(small, 0).slots, 0);
  EXPECT_EQ(PlacePagevec5x(small, 256).slots, 0);
  EXPECT_EQ(FindLayout("pagevec_5x0/offset:0/line:64"), nullptr);
  EXPECT_EQ(FindLayout("pagevec_5x15/offset:4/line:64"), nullptr);
  EXPECT_EQ(FindLayout("pagevec_5x15/offset:0/line:48"), nullptr);
  EXPECT_EQ(FindLayout("no_such_layout"), nullptr);
}

// ---- struct page
// -----------------------------------------------------------------------------

TEST(Page, ReportOffsetsEqualOffsetof) {
  const LayoutInfo* info = FindLayout("page_v4_0");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->size, 64u);
  EXPECT_EQ(LinesSpanned(*info), 1);
  EXPECT_REPORTED_OFFSET(*info, Page, flags);
  EXPECT_REPORTED_OFFSET(*info, Page, _refcount);
  EXPECT_REPORTED_OFFSET(*info, Page, lru);
  EXPECT_REPORTED_OFFSET(*info, Page, mapping);
  EXPECT_REPORTED_OFFSET(*info, Page, index);
  EXPECT_REPORTED_OFFSET(*info, Page, private_);
}

TEST(Page, ListHelpersFollowListH) {
  ListHead head;
  ListInit(&head);
  EXPECT_TRUE(ListEmpty(&head));
  Page a, b, c;
  ListAdd(&a.lru, &head);      // head, a
  ListAdd(&b.lru, &head);      // head, b, a
  ListAddTail(&c.lru, &head);  // head, b, a, c
  EXPECT_EQ(PageFromLru(head.next), &b);
  EXPECT_EQ(PageFromLru(head.next->next), &a);
  EXPECT_EQ(PageFromLru(head.prev), &c);
  const ListHead* const_node = &a.lru;
  EXPECT_EQ(PageFromLru(const_node), &a);
  ListDel(&a.lru);
  EXPECT_EQ(a.lru.next, ListPoison1());
  EXPECT_EQ(a.lru.prev, ListPoison2());
  EXPECT_EQ(head.next->next, &c.lru);
  ListMove(&b.lru, &head);  // head, b, c
  EXPECT_EQ(head.next, &b.lru);
  ListDel(&c.lru);
  ListDel(&b.lru);
  EXPECT_TRUE(ListEmpty(&head));
}

TEST(Page, FlagsAndRefcount) {
  Page page;
  EXPECT_FALSE(PageLru(page));
  SetPageLru(page);
  EXPECT_TRUE(PageLru(page));
  EXPECT_EQ(page.flags.load(), PageFlagMask(kPgLru));
  EXPECT_TRUE(TestClearPageLru(page));
  EXPECT_FALSE(TestClearPageLru(page));
  SetPageActive(page);
  ClearPageActive(page);
  EXPECT_FALSE(PageActive(page));

  EXPECT_FALSE(get_page_unless_zero(page))
      << "a free page (count 0) cannot be pinned";
  set_page_count(page, 1);
  EXPECT_TRUE(get_page_unless_zero(page));
  EXPECT_EQ(page_count(page), 2);
  get_page(page);
  EXPECT_FALSE(put_page_testzero(page));
  EXPECT_FALSE(put_page_testzero(page));
  EXPECT_TRUE(put_page_testzero(page));
  EXPECT_EQ(page_count(page), 0);
}

// ---- struct zone
// -----------------------------------------------------------------------------

// One Zone<L, P, kLine, C>'s numbers, by offsetof and sizeof, and what its
// model did when used. The template only gathers them; CheckZoneFacts holds
// the checks once (as a template body they were ~130 copies: most of this
// file's compile time).
struct ZoneFacts {
  std::string name;
  ZoneLockPlacement placement;
  ZoneConfig config;
  std::size_t line, size, lock_size, lock, watermark, watermark_size,
      managed_pages, flags, flags_size, lru_lock, lru_lists, vm_stat, free_area,
      free_area_size, order0_head, order0_nr_free;
  bool aligned, lists_empty;
  unsigned long nr_free_after_lock;
};

// For one (lock, placement, line): the report's offsets are offsetof, and the
// lock shares a line with the hot order-0 list head and nr_free exactly as the
// placement's name says.
void CheckZoneFacts(const ZoneFacts& z) {
  SCOPED_TRACE(z.name);
  const LayoutInfo* info = FindLayout(z.name);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->size, z.size);
  EXPECT_EQ(info->align, z.line);
  EXPECT_EQ(z.size % z.line, 0u);
  for (const auto& [field, offset] :
       std::vector<std::pair<const char*, std::size_t>>{
           {"lock", z.lock},
           {"watermark", z.watermark},
           {"managed_pages", z.managed_pages},
           {"flags", z.flags},
           {"lru_lock", z.lru_lock},
           {"lru_lists", z.lru_lists},
           {"vm_stat", z.vm_stat}})
    EXPECT_EQ(Field(*info, field).offset, offset) << field;
  EXPECT_EQ(Field(*info, "lock").size, z.lock_size);
  const std::string head = "free_area[0].free_list[MIGRATE_UNMOVABLE]";
  EXPECT_EQ(Field(*info, head).offset, z.order0_head);
  EXPECT_EQ(Field(*info, "free_area[0].nr_free").offset, z.order0_nr_free);
  EXPECT_EQ(Field(*info, "free_area[1..9]").offset,
            z.free_area + z.free_area_size);
  EXPECT_EQ(Field(*info, "free_area[10].nr_free").offset,
            z.free_area + 11 * z.free_area_size - 8);
  EXPECT_EQ(z.free_area_size, z.config == ZoneConfig::kCma ? 104u : 88u);

  // Sections start on line boundaries (ZONE_PADDING).
  EXPECT_EQ(z.lru_lock % z.line, 0u);
  EXPECT_EQ(z.vm_stat % z.line, 0u);

  // Line arithmetic straight from offsetof, independent of the report code.
  auto line_of = [&](std::size_t off) { return off / z.line; };
  const std::size_t lock_first = line_of(z.lock);
  const std::size_t lock_last = line_of(z.lock + z.lock_size - 1);
  auto lock_line_has = [&](std::size_t off, std::size_t size) {
    return line_of(off) <= lock_last && line_of(off + size - 1) >= lock_first;
  };
  const bool shares_head = lock_line_has(z.order0_head, sizeof(ListHead));
  const bool shares_nr_free =
      lock_line_has(z.order0_nr_free, sizeof(unsigned long));
  const bool shares_watermark = lock_line_has(z.watermark, z.watermark_size);
  const bool shares_flags = lock_line_has(z.flags, z.flags_size);
  EXPECT_EQ(SharesLine(*info, "lock", "flags"), shares_flags);
  const auto sharing = FieldsSharingLine(*info, "lock");
  EXPECT_EQ(Contains(sharing, head), shares_head);
  EXPECT_EQ(Contains(sharing, "free_area[0].nr_free"), shares_nr_free);
  EXPECT_EQ(SharesLine(*info, "lock", head), shares_head);

  switch (z.placement) {
    case ZoneLockPlacement::kLockBeforeFreeArea:
      EXPECT_TRUE(shares_head);
      // nr_free of order 0 is 96 bytes into free_area[0]: it joins the lock's
      // line only when the line is 128 bytes and the lock small enough (lock +
      // padding + 104 <= 128).
      EXPECT_EQ(shares_nr_free, (z.lock % z.line) +
                                        (z.order0_nr_free - z.lock) +
                                        sizeof(unsigned long) <=
                                    z.line);
      EXPECT_FALSE(shares_watermark);
      break;
    case ZoneLockPlacement::kLockAfterFreeArea:
      EXPECT_FALSE(shares_head);
      EXPECT_FALSE(shares_nr_free);
      EXPECT_FALSE(shares_watermark);
      EXPECT_GT(z.lock, z.flags);
      // The fix gives the lock a line of its own only with CMA.
      EXPECT_EQ(shares_flags, z.config == ZoneConfig::kNoCma);
      break;
    case ZoneLockPlacement::kLockOwnLine:
      EXPECT_FALSE(shares_head);
      EXPECT_FALSE(shares_nr_free);
      EXPECT_TRUE(sharing.empty())
          << "own line shares with " << sharing.front();
      EXPECT_EQ(z.lock % z.line, 0u);
      break;
    case ZoneLockPlacement::kLockInReadmostlyLine:
      EXPECT_FALSE(shares_head);
      EXPECT_FALSE(shares_nr_free);
      EXPECT_TRUE(shares_watermark);
      EXPECT_TRUE(Contains(sharing, "watermark"));
      break;
  }

  // The model is usable: constructible, initializable, lockable.
  EXPECT_TRUE(z.aligned);
  EXPECT_TRUE(z.lists_empty);
  EXPECT_EQ(z.nr_free_after_lock, 1u);
}

template <class L, ZoneLockPlacement P, std::size_t kLine,
          ZoneConfig C = ZoneConfig::kCma>
void CheckZone() {
  using Z = Zone<L, P, kLine, C>;
  auto zone = std::make_unique<Z>();
  const bool aligned =
      reinterpret_cast<std::uintptr_t>(zone.get()) % kLine == 0;
  ZoneInit(*zone);
  const bool lists_empty =
      ListEmpty(&zone->free_area[0].free_list[kMigrateMovable]) &&
      ListEmpty(&zone->lru_lists[0]);
  zone->lock.lock();
  zone->free_area[0].nr_free++;
  zone->lock.unlock();
  CheckZoneFacts({.name = ZoneLayoutName<L, P, kLine, C>(),
                  .placement = P,
                  .config = C,
                  .line = kLine,
                  .size = sizeof(Z),
                  .lock_size = sizeof(L),
                  .lock = offsetof(Z, lock),
                  .watermark = offsetof(Z, watermark),
                  .watermark_size = sizeof(Z::watermark),
                  .managed_pages = offsetof(Z, managed_pages),
                  .flags = offsetof(Z, flags),
                  .flags_size = sizeof(Z::flags),
                  .lru_lock = offsetof(Z, lru_lock),
                  .lru_lists = offsetof(Z, lru_lists),
                  .vm_stat = offsetof(Z, vm_stat),
                  .free_area = offsetof(Z, free_area),
                  .free_area_size = sizeof(typename Z::FreeAreaT),
                  .order0_head = Order0ListHeadOffset<Z>(),
                  .order0_nr_free = Order0NrFreeOffset<Z>(),
                  .aligned = aligned,
                  .lists_empty = lists_empty,
                  .nr_free_after_lock = zone->free_area[0].nr_free});
}

template <class L, std::size_t kLine>
void CheckAllPlacements() {
  CheckZone<L, ZoneLockPlacement::kLockBeforeFreeArea, kLine>();
  CheckZone<L, ZoneLockPlacement::kLockAfterFreeArea, kLine>();
  CheckZone<L, ZoneLockPlacement::kLockOwnLine, kLine>();
  CheckZone<L, ZoneLockPlacement::kLockInReadmostlyLine, kLine>();
  constexpr ZoneConfig kNo = ZoneConfig::kNoCma;
  CheckZone<L, ZoneLockPlacement::kLockBeforeFreeArea, kLine, kNo>();
  CheckZone<L, ZoneLockPlacement::kLockAfterFreeArea, kLine, kNo>();
  CheckZone<L, ZoneLockPlacement::kLockOwnLine, kLine, kNo>();
  CheckZone<L, ZoneLockPlacement::kLockInReadmostlyLine, kLine, kNo>();
}

TEST(Zone, EveryPlacementEveryLockBothLines) {
  int locks = 0;
  ForEachLock([&]<class L>() {
    SCOPED_TRACE(L::kName);
    CheckAllPlacements<L, kCacheLine64>();
    CheckAllPlacements<L, kCacheLine128>();
    ++locks;
  });
  EXPECT_EQ(locks, static_cast<int>(LockNames().size()));
  EXPECT_GE(locks, 7);
}

TEST(Zone, KnownOffsetsOfThe2015Thread) {
  // 4-byte ticket lock, 64-byte lines: the 3484b2de9499 layout puts the lock 8
  // bytes before free_area[0]; the fix puts it 1152 bytes (11 * 104 + 8) after
  // the section start.
  using Before = Zone<TicketLock, ZoneLockPlacement::kLockBeforeFreeArea, 64>;
  using After = Zone<TicketLock, ZoneLockPlacement::kLockAfterFreeArea, 64>;
  static_assert(sizeof(TicketLock) == 4, "the issue's 4-byte ticket lock");
  static_assert(offsetof(Before, lock) == 192,
                "read-mostly section is 3 lines");
  static_assert(Order0ListHeadOffset<Before>() == 200,
                "lock word + 4 bytes of alignment");
  static_assert(Order0NrFreeOffset<Before>() == 296,
                "order-0 nr_free in the next line");
  static_assert(offsetof(After, free_area) == 192,
                "free_area opens the section");
  static_assert(offsetof(After, lock) == 192 + 1152,
                "11 * 104 + flags: a line boundary");
  static_assert(sizeof(Before) == 1920 && sizeof(After) == 1920,
                "30 lines either way");
  EXPECT_TRUE(CheckZoneLayout<Before>());
  // A 40-byte pthread mutex pushes free_area[0] to 40 bytes into the lock's
  // line.
  using BeforeMutex =
      Zone<PthreadMutexLock, ZoneLockPlacement::kLockBeforeFreeArea, 64>;
  EXPECT_EQ(Order0ListHeadOffset<BeforeMutex>() - offsetof(BeforeMutex, lock),
            sizeof(PthreadMutexLock));
}

TEST(Zone, ConfigVariantOffsets) {
  // Without CMA (MIGRATE_TYPES 5) a free_area is 88 bytes: flags at allocator
  // offset 968 and the fixed lock at 976, both in line 15 of the section.
  using AfterNoCma = Zone<TicketLock, ZoneLockPlacement::kLockAfterFreeArea, 64,
                          ZoneConfig::kNoCma>;
  using BeforeNoCma = Zone<TicketLock, ZoneLockPlacement::kLockBeforeFreeArea,
                           64, ZoneConfig::kNoCma>;
  static_assert(offsetof(AfterNoCma, free_area) == 192);
  static_assert(offsetof(AfterNoCma, flags) == 192 + 968);
  static_assert(offsetof(AfterNoCma, lock) == 192 + 976);
  static_assert(offsetof(AfterNoCma, flags) / 64 ==
                offsetof(AfterNoCma, lock) / 64);
  static_assert(offsetof(BeforeNoCma, lock) == 192);
  static_assert(Order0ListHeadOffset<BeforeNoCma>() == 200);
  static_assert(Order0NrFreeOffset<BeforeNoCma>() == 280);
  EXPECT_EQ(MigrateTypesOf(ZoneConfig::kNoCma), 5);
  EXPECT_STREQ(MigrateTypeName(ZoneConfig::kNoCma, 4), "MIGRATE_ISOLATE");
  EXPECT_STREQ(MigrateTypeName(ZoneConfig::kCma, 4), "MIGRATE_CMA");
  EXPECT_STREQ(MigrateTypeName(ZoneConfig::kNoCma, 5), "?");
  // Both configs are in the layout report, and the text explains them.
  const LayoutInfo* no_cma = FindLayout(
      "zone_v4_0/lock_after_free_area/lock:ticket/line:64/config:no_cma");
  ASSERT_NE(no_cma, nullptr);
  EXPECT_TRUE(SharesLine(*no_cma, "lock", "flags"));
  EXPECT_NE(no_cma->kernel.find("MIGRATE_TYPES 5"), std::string::npos);
  const LayoutInfo* cma =
      FindLayout("zone_v4_0/lock_after_free_area/lock:ticket/line:64");
  ASSERT_NE(cma, nullptr);
  EXPECT_FALSE(SharesLine(*cma, "lock", "flags"));
  const std::string text = FormatAllLayouts();
  EXPECT_NE(
      text.find("allocator offset 976, in the line of flags (offset 968)"),
      std::string::npos);
  EXPECT_NE(text.find("a368ab67aa55 (v4.0)"), std::string::npos);
  EXPECT_NE(text.find("v3.16-v3.19"), std::string::npos);
}

// ---- report
// ----------------------------------------------------------------------------------

TEST(Report, AllLayoutsAreUniqueAndConsistent) {
  const auto& all = AllLayouts();
  std::set<std::string> names;
  for (const LayoutInfo& info : all) {
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate " << info.name;
    std::size_t end = 0;
    for (const FieldInfo& f : info.fields) {
      EXPECT_GE(f.offset, end)
          << info.name << ": " << f.name << " overlaps or is out of order";
      end = f.offset + f.size;
    }
    EXPECT_LE(end, info.size) << info.name;
    EXPECT_EQ(FindLayout(info.name), &info);
  }
  // page + 5 pagevecs (2.6.9, the 2004 proposal, 2.6.10, 5.x 15 and 31 slots)
  // x 8 offsets + 2 ILP32 + 4 placements x locks x 2 lines.
  EXPECT_EQ(all.size(), 1 + 40 + 2 + 2 * 8 * LockNames().size());
}

TEST(Report, PaholeTextHasBoundariesHolesAndSharing) {
  const LayoutInfo* v269 =
      FindLayout(PagevecLayoutName(PagevecV269::kName, 0, 64));
  ASSERT_NE(v269, nullptr);
  const std::string text = FormatPahole(*v269);
  EXPECT_NE(text.find("size: 136, cachelines: 3"), std::string::npos) << text;
  const LayoutInfo* p2004 =
      FindLayout(PagevecLayoutName(PagevecProposal2004::kName, 0, 64));
  const std::string text2004 = FormatPahole(*p2004);
  EXPECT_NE(text2004.find("XXX 4 bytes hole"), std::string::npos) << text2004;

  const LayoutInfo* zone =
      FindLayout("zone_v4_0/lock_before_free_area/lock:ticket/line:64");
  ASSERT_NE(zone, nullptr);
  const std::string ztext = FormatPahole(*zone);
  EXPECT_NE(ztext.find("--- cacheline 3 boundary (192 bytes) ---"),
            std::string::npos)
      << ztext;
  EXPECT_NE(
      ztext.find(
          "lock line shares with: free_area[0].free_list[MIGRATE_UNMOVABLE]"),
      std::string::npos)
      << ztext;

  const std::string all = FormatAllLayouts();
  EXPECT_NE(all.find("140 -> 124"), std::string::npos);
  EXPECT_NE(all.find("136 -> 128 is purely 16 -> 15 slots"), std::string::npos);
}

TEST(Report, JsonCarriesTheSameNumbers) {
  const LayoutInfo* zone =
      FindLayout("zone_v4_0/lock_after_free_area/lock:pthread_mutex/line:128");
  ASSERT_NE(zone, nullptr);
  const auto j = LayoutToJson(*zone);
  EXPECT_EQ(j["size"].get<std::size_t>(), zone->size);
  EXPECT_EQ(j["lines_spanned"].get<int>(), LinesSpanned(*zone));
  EXPECT_EQ(j["fields"].size(), zone->fields.size());
  EXPECT_EQ(j["lock_field"], "lock");
  EXPECT_TRUE(j["lock_shares_line_with"].is_array());
  EXPECT_TRUE(j["holes"].is_array());
}

}  // namespace
}  // namespace lockline
