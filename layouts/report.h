// Layout reports: every model's fields from offsetof/sizeof, pahole-style
// (`--layouts`) or JSON (`--layouts=json`, and every result file's layouts).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lockline {

/// A member (or part, "free_area[0].nr_free"): offset and size, bytes.
struct FieldInfo {
  std::string name;
  std::size_t offset = 0;
  std::size_t size = 0;
};

/// A model's layout: fields in offset order, not overlapping; base_offset
/// past a line boundary; lines count from the struct's first byte's line.
struct LayoutInfo {
  std::string name;    ///< unique key
  std::string kernel;  ///< the kernel version and file it follows
  std::string note;    ///< what this variant is
  std::size_t size = 0;
  std::size_t align = 0;
  std::size_t line = 64;
  std::size_t base_offset = 0;
  std::vector<FieldInfo> fields;
  std::string lock_field;  ///< the lock member, if any
};

/// Sorts info.fields by offset (stable for equal offsets).
void SortFields(LayoutInfo& info);

/// Cache lines touched by the whole struct at its base_offset.
int LinesSpanned(const LayoutInfo& info);

/// The other fields with a byte in `field`'s lines (empty if absent).
std::vector<std::string> FieldsSharingLine(const LayoutInfo& info,
                                           const std::string& field);

/// Fields `a` and `b` share a line (false if either is absent).
bool SharesLine(const LayoutInfo& info, const std::string& a,
                const std::string& b);

/// pahole-style text, with the fields sharing the lock's line.
std::string FormatPahole(const LayoutInfo& info);

/// The JSON form (fields with their lines, holes, padding, lock sharing).
nlohmann::json LayoutToJson(const LayoutInfo& info);

/// Every model's layout in a stable order: struct page, each pagevec at
/// offsets 0..56, the ILP32 pair, each zone placement x lock x line x config.
const std::vector<LayoutInfo>& AllLayouts();

/// The layout `name` or nullptr; a sweep "pagevec_5x<N>/offset:<O>/line:<L>"
/// (N 1..255, O % 8 == 0, O < L, L a power of two 32..4096) is built on first
/// request (thread-safe).
const LayoutInfo* FindLayout(const std::string& name);

/// "<kName>/offset:<offset>/line:<line>".
std::string PagevecLayoutName(const std::string& kind, std::size_t offset,
                              std::size_t line);

/// The full `--layouts` text: the explanation, then every layout.
std::string FormatAllLayouts();

}  // namespace lockline
