// Layout reports: every model's fields with offsets and sizes taken from
// offsetof/sizeof on the real types, printed pahole-style (`lockline
// --layouts`) or as JSON (`--layouts=json`, and the layout section of every
// result file), so each result names the layout it measured.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lockline {

/// One member (or a named part of one, e.g. "free_area[0].nr_free"): byte
/// offset from the start of the struct and size in bytes.
struct FieldInfo {
  std::string name;
  std::size_t offset = 0;
  std::size_t size = 0;
};

/// A model's layout. `base_offset` is where the struct starts relative to a
/// line boundary (a pagevec placed 8 bytes into a line has base_offset 8);
/// cache-line numbers count from the line holding the struct's first byte.
/// `lock_field` names the lock member, if any. Fields are in offset order and
/// do not overlap.
struct LayoutInfo {
  std::string name;  ///< unique key, e.g.
                     ///< "zone_v4_0/lock_before_free_area/lock:ticket/line:64"
  std::string kernel;  ///< kernel version / source file the model follows
  std::string note;    ///< what this variant is
  std::size_t size = 0;
  std::size_t align = 0;
  std::size_t line = 64;
  std::size_t base_offset = 0;
  std::vector<FieldInfo> fields;
  std::string lock_field;
};

/// Sorts info.fields by offset (stable for equal offsets).
void SortFields(LayoutInfo& info);

/// Cache lines touched by the whole struct at its base_offset.
int LinesSpanned(const LayoutInfo& info);

/// First and last line index (counted from the struct's first line) of bytes
/// [offset, offset + size) of the struct; a zero-size range counts as its first
/// byte.
std::pair<int, int> LineRange(const LayoutInfo& info, std::size_t offset,
                              std::size_t size);

/// Names of the other fields with at least one byte in a line that `field`
/// occupies (the lines its waiters and holder bounce). Empty when `field` is
/// absent.
std::vector<std::string> FieldsSharingLine(const LayoutInfo& info,
                                           const std::string& field);

/// True when fields `a` and `b` have bytes in a common line (false if either is
/// absent).
bool SharesLine(const LayoutInfo& info, const std::string& a,
                const std::string& b);

/// pahole-style text: one member per line with its offset and size, cacheline
/// boundary and hole markers, then size / cachelines / members, padding, and
/// for a lock-carrying layout the fields sharing the lock's line.
std::string FormatPahole(const LayoutInfo& info);

/// Machine-readable form: name, kernel, note, size, align, line, base_offset,
/// lines_spanned, fields [{name, offset, size, first_line, last_line}], holes
/// [{offset, size}], padding, and lock_field with lock_shares_line_with when
/// set.
nlohmann::json LayoutToJson(const LayoutInfo& info);

/// Every model's report: struct page; each pagevec (2.6.9, 2004
/// proposal, 5.x-15, 5.x-31) at offsets 0, 8, ..., 56 of a 64-byte line; the
/// ILP32 mirrors of the 2004 pair; each zone placement x every lock of
/// all_locks.h x lines 64 and 128 x config cma, no_cma. Built once, in a stable
/// order.
const std::vector<LayoutInfo>& AllLayouts();

/// The layout called `name`, or nullptr. Besides AllLayouts(), any sweep
/// pagevec "pagevec_5x<N>/offset:<O>/line:<L>" (N 1..255, O a multiple of 8
/// below L, L a power of two 32..4096) is built on first request and kept for
/// the process lifetime (thread-safe).
const LayoutInfo* FindLayout(const std::string& name);

/// Name of a pagevec layout at a placement:
/// "<kName>/offset:<offset>/line:<line>".
std::string PagevecLayoutName(const std::string& kind, std::size_t offset,
                              std::size_t line);

/// The full `--layouts` text: an explanatory paragraph (136 -> 128 bytes on
/// LP64 is purely 16 -> 15 slots; the quoted 140 -> 124 cannot occur), then
/// every layout pahole-style.
std::string FormatAllLayouts();

/// JSON array of LayoutToJson for every layout in AllLayouts().
nlohmann::json AllLayoutsJson();

/// JSON object {name: LayoutToJson} for the given names (for a result file's
/// context); unknown names map to null.
nlohmann::json LayoutsJson(const std::vector<std::string>& names);

}  // namespace lockline
