// Layout reports: pahole-style text and JSON for every model in layouts/.
#include "layouts/report.h"

#include <algorithm>
#include <deque>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <string_view>
#include <utility>

#include "harness/locks/all_locks.h"
#include "layouts/cacheline.h"
#include "layouts/page.h"
#include "layouts/pagevec.h"
#include "layouts/zone.h"

namespace lockline {

void SortFields(LayoutInfo& info) {
  std::stable_sort(info.fields.begin(), info.fields.end(),
                   [](const FieldInfo& a, const FieldInfo& b) {
                     return a.offset < b.offset;
                   });
}

int LinesSpanned(const LayoutInfo& info) {
  return LinesSpanned(info.base_offset, info.size, info.line);
}

namespace {

// First and last line of bytes [offset, offset + size) (size 0: one byte).
std::pair<int, int> LineRange(const LayoutInfo& info, std::size_t offset,
                              std::size_t size) {
  const std::size_t first = info.base_offset % info.line + offset;
  const std::size_t last = first + (size == 0 ? 0 : size - 1);
  return {static_cast<int>(first / info.line),
          static_cast<int>(last / info.line)};
}

const FieldInfo* FindField(const LayoutInfo& info, const std::string& name) {
  const auto it =
      std::find_if(info.fields.begin(), info.fields.end(),
                   [&](const FieldInfo& f) { return f.name == name; });
  return it == info.fields.end() ? nullptr : &*it;
}

bool RangesOverlap(std::pair<int, int> a, std::pair<int, int> b) {
  return a.first <= b.second && b.first <= a.second;
}

struct Hole {
  std::size_t offset;
  std::size_t size;
};

// Gaps between consecutive fields (alignment holes and ZONE_PADDING), not the
// tail padding.
std::vector<Hole> Holes(const LayoutInfo& info) {
  std::vector<Hole> holes;
  std::size_t end = 0;
  for (const FieldInfo& f : info.fields) {
    if (f.offset > end) holes.push_back({end, f.offset - end});
    end = std::max(end, f.offset + f.size);
  }
  return holes;
}

std::size_t TailPadding(const LayoutInfo& info) {
  std::size_t end = 0;
  for (const FieldInfo& f : info.fields) end = std::max(end, f.offset + f.size);
  return info.size > end ? info.size - end : 0;
}

}  // namespace

std::vector<std::string> FieldsSharingLine(const LayoutInfo& info,
                                           const std::string& field) {
  std::vector<std::string> out;
  const FieldInfo* target = FindField(info, field);
  if (target == nullptr) return out;
  const auto lines = LineRange(info, target->offset, target->size);
  for (const FieldInfo& f : info.fields) {
    if (&f != target && RangesOverlap(lines, LineRange(info, f.offset, f.size)))
      out.push_back(f.name);
  }
  return out;
}

bool SharesLine(const LayoutInfo& info, const std::string& a,
                const std::string& b) {
  const FieldInfo* fa = FindField(info, a);
  const FieldInfo* fb = FindField(info, b);
  if (fa == nullptr || fb == nullptr) return false;
  return RangesOverlap(LineRange(info, fa->offset, fa->size),
                       LineRange(info, fb->offset, fb->size));
}

std::string FormatPahole(const LayoutInfo& info) {
  std::ostringstream os;
  os << "struct " << info.name << " {";
  if (!info.kernel.empty()) os << "  /* " << info.kernel << " */";
  os << "\n";
  if (!info.note.empty()) os << "\t/* " << info.note << " */\n";
  if (info.base_offset % info.line != 0) {
    os << "\t/* placed " << info.base_offset % info.line << " bytes past a "
       << info.line << "-byte line boundary */\n";
  }
  const std::size_t start = info.base_offset % info.line;
  int next_boundary = 1;  // index of the next line boundary to announce
  std::size_t end = 0;
  for (const FieldInfo& f : info.fields) {
    if (f.offset > end)
      os << "\n\t/* XXX " << f.offset - end << " bytes hole */\n\n";
    // Announce every boundary at or before this field's start (pahole: "was N
    // bytes ago" when the boundary fell inside the previous member or a hole).
    while (next_boundary * info.line <= start + f.offset) {
      const std::size_t boundary =
          next_boundary * info.line - start;  // struct-relative
      os << "\t/* --- cacheline " << next_boundary << " boundary (" << boundary
         << " bytes) ";
      if (boundary != f.offset)
        os << "was " << f.offset - boundary << " bytes ago ";
      os << "--- */\n";
      ++next_boundary;
    }
    os << '\t' << std::left << std::setw(48) << f.name << std::right << " /* "
       << std::setw(5) << f.offset << ' ' << std::setw(5) << f.size << " */\n";
    // Boundaries inside this member (an array straddling lines): one or two are
    // named with their byte offset into the member, longer runs are summarized.
    const std::size_t f_end = f.offset + f.size;
    const int first_inside = next_boundary;
    while (next_boundary * info.line < start + f_end) ++next_boundary;
    if (next_boundary - first_inside > 2) {
      os << "\t/* --- cachelines " << first_inside << ".." << next_boundary - 1
         << " boundaries inside " << f.name << " --- */\n";
    } else {
      for (int k = first_inside; k < next_boundary; ++k) {
        const std::size_t boundary = k * info.line - start;
        os << "\t/* --- cacheline " << k << " boundary (" << boundary
           << " bytes) inside " << f.name << ", +" << boundary - f.offset
           << " --- */\n";
      }
    }
    end = std::max(end, f_end);
  }
  os << "\n\t/* size: " << info.size << ", cachelines: " << LinesSpanned(info)
     << ", members: " << info.fields.size() << " */\n";
  const auto holes = Holes(info);
  if (!holes.empty()) {
    std::size_t sum = 0;
    for (const Hole& h : holes) sum += h.size;
    os << "\t/* sum members: " << info.size - sum - TailPadding(info)
       << ", holes: " << holes.size() << ", sum holes: " << sum << " */\n";
  }
  if (const std::size_t pad = TailPadding(info); pad > 0)
    os << "\t/* padding: " << pad << " */\n";
  os << "\t/* line size: " << info.line << ", align: " << info.align << " */\n";
  if (!info.lock_field.empty()) {
    std::string sharing;
    for (const std::string& f : FieldsSharingLine(info, info.lock_field))
      sharing += (sharing.empty() ? "" : ", ") + f;
    os << "\t/* " << info.lock_field
       << " line shares with: " << (sharing.empty() ? "(nothing)" : sharing)
       << " */\n";
  }
  os << "};\n";
  return os.str();
}

nlohmann::json LayoutToJson(const LayoutInfo& info) {
  nlohmann::json j = {{"name", info.name},
                      {"kernel", info.kernel},
                      {"note", info.note},
                      {"size", info.size},
                      {"align", info.align},
                      {"line", info.line},
                      {"base_offset", info.base_offset},
                      {"lines_spanned", LinesSpanned(info)}};
  nlohmann::json fields = nlohmann::json::array();
  for (const FieldInfo& f : info.fields) {
    const auto lines = LineRange(info, f.offset, f.size);
    fields.push_back({{"name", f.name},
                      {"offset", f.offset},
                      {"size", f.size},
                      {"first_line", lines.first},
                      {"last_line", lines.second}});
  }
  j["fields"] = std::move(fields);
  nlohmann::json holes = nlohmann::json::array();
  for (const Hole& h : Holes(info))
    holes.push_back({{"offset", h.offset}, {"size", h.size}});
  j["holes"] = std::move(holes);
  j["padding"] = TailPadding(info);
  if (!info.lock_field.empty()) {
    j["lock_field"] = info.lock_field;
    j["lock_shares_line_with"] = FieldsSharingLine(info, info.lock_field);
  }
  return j;
}

std::string PagevecLayoutName(const std::string& kind, std::size_t offset,
                              std::size_t line) {
  return kind + "/offset:" + std::to_string(offset) +
         "/line:" + std::to_string(line);
}

namespace {

constexpr const char* kPagevecKernel269 =
    "Linux 2.6.9 include/linux/pagevec.h (PAGEVEC_SIZE 16)";
constexpr const char* kPagevecKernel2004 =
    "LKML September 2004 proposal against 2.6.9 (PAGEVEC_SIZE 15)";
constexpr const char* kPagevecKernel2610 =
    "Linux 2.6.10 include/linux/pagevec.h (PAGEVEC_SIZE 14, 2.6.10 to 4.x; "
    "checked in 2.6.11)";
constexpr const char* kPagevecKernel5x = "Linux 5.x include/linux/pagevec.h";

LayoutInfo DescribePage() {
  LayoutInfo info;
  info.name = "page_v4_0";
  info.kernel = "Linux 4.0 include/linux/mm_types.h struct page (x86_64)";
  info.note = "unions reduced to the members the experiments use";
  info.size = sizeof(Page);
  info.align = alignof(Page);
  info.line = kCacheLine64;
#define LOCKLINE_PAGE_FIELD(member) \
  FieldInfo{#member, offsetof(Page, member), sizeof(Page::member)}
  info.fields = {LOCKLINE_PAGE_FIELD(flags),     LOCKLINE_PAGE_FIELD(mapping),
                 LOCKLINE_PAGE_FIELD(index),     LOCKLINE_PAGE_FIELD(_mapcount),
                 LOCKLINE_PAGE_FIELD(_refcount), LOCKLINE_PAGE_FIELD(lru),
                 LOCKLINE_PAGE_FIELD(private_)};
#undef LOCKLINE_PAGE_FIELD
  SortFields(info);
  return info;
}

// A pagevec-like struct: nr, its second header field, pages[].
template <class PV>
LayoutInfo DescribePagevec(const char* kernel, const char* note,
                           std::size_t offset, std::size_t line,
                           const std::string& kind = PV::kName) {
  LayoutInfo info;
  info.name = PagevecLayoutName(kind, offset, line);
  info.kernel = kernel;
  info.note = note;
  info.size = sizeof(PV);
  info.align = alignof(PV);
  info.line = line;
  info.base_offset = offset;
  info.fields.push_back({"nr", offsetof(PV, nr), sizeof(PV::nr)});
  if constexpr (requires(PV & pv) { pv.cold; }) {
    info.fields.push_back({"cold", offsetof(PV, cold), sizeof(PV::cold)});
  } else {
    info.fields.push_back({"percpu_pvec_drained",
                           offsetof(PV, percpu_pvec_drained),
                           sizeof(PV::percpu_pvec_drained)});
  }
  constexpr std::size_t slots = sizeof(PV::pages) / sizeof(PV::pages[0]);
  info.fields.push_back({"pages[" + std::to_string(slots) + "]",
                         offsetof(PV, pages), sizeof(PV::pages)});
  SortFields(info);
  return info;
}

constexpr const char* kNote5x =
    "unsigned char nr; bool percpu_pvec_drained; struct page *pages[N]";
constexpr const char* kNoteIlp32 =
    "ILP32 mirror (4-byte pointers), as on the quoted Pentium III with 32-byte "
    "lines";

// Runtime slot count: same bytes as Pagevec5x<N> (checked in pagevec.h).
LayoutInfo DescribePagevec5xSweep(int slots, std::size_t offset,
                                  std::size_t line) {
  LayoutInfo info =
      DescribePagevec<Pagevec5x<1>>(kPagevecKernel5x, kNote5x, offset, line);
  info.name =
      PagevecLayoutName("pagevec_5x" + std::to_string(slots), offset, line);
  info.size = Pagevec5xBytes(slots);
  info.fields.back() = {"pages[" + std::to_string(slots) + "]",
                        offsetof(Pagevec5x<1>, pages), slots * sizeof(Page*)};
  return info;
}

std::vector<LayoutInfo> BuildAllLayouts() {
  std::vector<LayoutInfo> all;
  all.push_back(DescribePage());
  for (std::size_t off = 0; off < kCacheLine64; off += 8) {
    constexpr std::size_t kLine = kCacheLine64;
    all.push_back(DescribePagevec<PagevecV269>(
        kPagevecKernel269, "unsigned nr; int cold; struct page *pages[16]", off,
        kLine));
    all.push_back(DescribePagevec<PagevecProposal2004>(
        kPagevecKernel2004,
        "unsigned short nr, cold; struct page *pages[15]: the 4 header bytes "
        "saved are pointer-alignment padding on LP64",
        off, kLine));
    all.push_back(DescribePagevec<PagevecV2610>(
        kPagevecKernel2610,
        "unsigned long nr; unsigned long cold; struct page *pages[14]: the "
        "size shipped after the 2004 thread (128 bytes on LP64)",
        off, kLine));
    all.push_back(
        DescribePagevec<Pagevec5x15>(kPagevecKernel5x, kNote5x, off, kLine));
    all.push_back(
        DescribePagevec<Pagevec5x31>(kPagevecKernel5x, kNote5x, off, kLine));
  }
  all.push_back(DescribePagevec<PagevecV269Ilp32>(
      kPagevecKernel269, kNoteIlp32, 0, 32, "pagevec_v2_6_9_ilp32"));
  all.push_back(DescribePagevec<PagevecProposal2004Ilp32>(
      kPagevecKernel2004, kNoteIlp32, 0, 32, "pagevec_2004_proposal_ilp32"));
  // Every lock x placement x line for the CMA config first (the names the
  // zone_lock rows of earlier runs use), then the same for no_cma.
  const auto zones = [&]<ZoneConfig C>() {
    ForEachLock([&]<class L>() {
      const auto placements = [&]<std::size_t kLine>() {
        using enum ZoneLockPlacement;
        all.push_back(DescribeZone<L, kLockBeforeFreeArea, kLine, C>());
        all.push_back(DescribeZone<L, kLockAfterFreeArea, kLine, C>());
        all.push_back(DescribeZone<L, kLockOwnLine, kLine, C>());
        all.push_back(DescribeZone<L, kLockInReadmostlyLine, kLine, C>());
      };
      placements.template operator()<kCacheLine64>();
      placements.template operator()<kCacheLine128>();
    });
  };
  zones.template operator()<ZoneConfig::kCma>();
  zones.template operator()<ZoneConfig::kNoCma>();
  return all;
}

}  // namespace

const std::vector<LayoutInfo>& AllLayouts() {
  static const std::vector<LayoutInfo> all = BuildAllLayouts();
  return all;
}

namespace {

// Removes `prefix` from the front of `s`; false (s untouched) if it is not
// there.
bool TakePrefix(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// Takes 1..max_digits decimal digits from the front of `s` into *out; false
// (s untouched) if there are none or more than max_digits.
bool TakeDigits(std::string_view& s, std::size_t max_digits, std::size_t* out) {
  std::size_t n = 0, value = 0;
  while (n < s.size() && s[n] >= '0' && s[n] <= '9') {
    value = value * 10 + static_cast<std::size_t>(s[n] - '0');
    if (++n > max_digits) return false;
  }
  if (n == 0) return false;
  *out = value;
  s.remove_prefix(n);
  return true;
}

}  // namespace

const LayoutInfo* FindLayout(const std::string& name) {
  for (const LayoutInfo& info : AllLayouts())
    if (info.name == name) return &info;
  // Sweep pagevecs are built on demand; a deque keeps earlier addresses valid.
  static std::mutex mu;
  static std::deque<LayoutInfo> sweeps;
  // pagevec_5x(\d{1,3})/offset:(\d{1,4})/line:(\d{1,4}), parsed by hand:
  // <regex> alone was a third of this file's compile time.
  std::string_view rest = name;
  std::size_t slots = 0, offset = 0, line = 0;
  if (!TakePrefix(rest, "pagevec_5x") || !TakeDigits(rest, 3, &slots) ||
      !TakePrefix(rest, "/offset:") || !TakeDigits(rest, 4, &offset) ||
      !TakePrefix(rest, "/line:") || !TakeDigits(rest, 4, &line) ||
      !rest.empty()) {
    return nullptr;
  }
  if (slots < 1 || slots > 255 || line < 32 || (line & (line - 1)) != 0 ||
      offset >= line || offset % alignof(Page*) != 0) {
    return nullptr;
  }
  std::lock_guard<std::mutex> guard(mu);
  for (const LayoutInfo& info : sweeps)
    if (info.name == name) return &info;
  sweeps.push_back(
      DescribePagevec5xSweep(static_cast<int>(slots), offset, line));
  return &sweeps.back();
}

std::string FormatAllLayouts() {
  using FixedCma =
      Zone<TicketLock, ZoneLockPlacement::kLockAfterFreeArea, kCacheLine64>;
  using FixedNoCma = Zone<TicketLock, ZoneLockPlacement::kLockAfterFreeArea,
                          kCacheLine64, ZoneConfig::kNoCma>;
  std::ostringstream os;
  const LayoutInfo* v269 =
      FindLayout(PagevecLayoutName(PagevecV269::kName, 0, kCacheLine64));
  const LayoutInfo* p2004 = FindLayout(
      PagevecLayoutName(PagevecProposal2004::kName, 0, kCacheLine64));
  const LayoutInfo* p2004_8 = FindLayout(
      PagevecLayoutName(PagevecProposal2004::kName, 8, kCacheLine64));
  os << "lockline layouts: offsets and sizes are offsetof/sizeof of the "
        "compiled models (LP64).\n"
     << "\n"
     << "pagevec sizes (LP64): 2.6.9 is " << sizeof(PagevecV269) << " bytes ("
     << LinesSpanned(*v269)
     << " lines of 64 at offset 0); the 2004 proposal is "
     << sizeof(PagevecProposal2004) << " bytes\n(" << LinesSpanned(*p2004)
     << " lines at offset 0, " << LinesSpanned(*p2004_8)
     << " at offset 8). On LP64, " << sizeof(PagevecV269) << " -> "
     << sizeof(PagevecProposal2004)
     << " is purely 16 -> 15 slots: the 4 header bytes\n"
     << "saved by `unsigned short nr, cold` are eaten by the padding that "
        "aligns pages[] to 8 bytes.\n"
     << "The proposer's quoted 64-bit figures, 140 -> 124, cannot occur: a "
        "struct holding 8-byte\n"
     << "pointers has a size that is a multiple of 8. On ILP32 the header "
        "shrink is real: "
     << sizeof(PagevecV269Ilp32) << " -> " << sizeof(PagevecProposal2004Ilp32)
     << " bytes.\n"
     << "What shipped after the 2004 thread (2.6.10 to 4.x) is "
     << sizeof(PagevecV2610)
     << " bytes too, but as `unsigned long nr, cold` and 14 slots.\n"
     << "5.x pagevecs are " << sizeof(Pagevec5x15)
     << " bytes with 15 slots and " << sizeof(Pagevec5x31)
     << " with 31 (the 2020 proposal doubles the on-stack cost).\n"
     << "\n"
     << "zone variants (Linux 4.0 struct zone): lock_before_free_area puts the "
        "lock in the line\n"
     << "of the order-0 free-list heads (3484b2de9499, v3.16-v3.19); "
        "lock_after_free_area is the\n"
     << "2015 fix a368ab67aa55 (v4.0); lock_own_line pads it to a line of its "
        "own; lock_in_readmostly_line\n"
     << "puts it with the watermarks every allocation reads. Each zone report "
        "ends with the fields\n"
     << "sharing the lock's line(s). Two configs: cma (MIGRATE_TYPES 6, "
        "free_area 104 bytes; names\n"
     << "without a config suffix) and no_cma (MIGRATE_TYPES 5, free_area 88 "
        "bytes; \"/config:no_cma\").\n"
     << "With a 4-byte ticket lock and 64-byte lines the cma zone is\n"
     << sizeof(Zone<TicketLock, ZoneLockPlacement::kLockBeforeFreeArea,
                    kCacheLine64>)
     << " bytes before the fix, "
     << sizeof(Zone<TicketLock, ZoneLockPlacement::kLockAfterFreeArea,
                    kCacheLine64>)
     << " after it and "
     << sizeof(Zone<TicketLock, ZoneLockPlacement::kLockOwnLine, kCacheLine64>)
     << " with the lock\n"
     << "on its own line: with CMA free_area[11] + flags end exactly on a line "
        "boundary (allocator\n"
     << "offset " << offsetof(FixedCma, lock) - offsetof(FixedCma, free_area)
     << "), so the fix's lock starts a line of its own. Without CMA the fixed "
        "lock sits at\n"
     << "allocator offset "
     << offsetof(FixedNoCma, lock) - offsetof(FixedNoCma, free_area)
     << ", in the line of flags (offset "
     << offsetof(FixedNoCma, flags) - offsetof(FixedNoCma, free_area)
     << "), which every allocation tests lock-free.\n\n";
  for (const LayoutInfo& info : AllLayouts()) os << FormatPahole(info) << "\n";
  return os.str();
}

}  // namespace lockline
