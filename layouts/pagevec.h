// Userspace models of `struct pagevec` as the kernel defined it over time
// (include/linux/pagevec.h), plus the 2004 shrink proposal, and Linux's pagevec
// operations.
//
// LP64 sizes (pointer = 8 bytes, so every variant is padded to a multiple of
// 8):
//
//   variant             header (bytes)                slots sizeof lines@0 @8
//   2.6.9               unsigned nr; int cold (8)        16    136       3  3
//   2.6.10-4.x          unsigned long nr, cold (16)      14    128       2  3
//   2004 proposal       unsigned short nr, cold (4+4)    15    128       2  3
//   5.x (PAGEVEC_SIZE)  unsigned char nr; bool (2+6)     15    128       2  3
//   5.x, 31 slots 2020  same header                      31    256       4  5
//
// The 2004 proposal shrinks the header from 8 to 4 bytes, but the pointer array
// must start at an 8-byte offset, so the 4 bytes come back as padding: on LP64,
// 136 -> 128 is purely 16 -> 15 slots. The proposer's quoted 64-bit figures,
// 140 -> 124, cannot occur: a struct holding 8-byte pointers has a size that is
// a multiple of 8. On ILP32 (4-byte pointers) the header shrink is real: 72 ->
// 64 bytes (PagevecV269Ilp32 / PagevecProposal2004Ilp32 model that).
//
// Line diagram, 2.6.9 at offset 0 of a 64-byte line:
//   line 0 [nr cold | pages[0..6]]  line 1 [pages[7..14]]  line 2 [pages[15]]
// 2004 proposal / 5.x-15 at offset 0, exactly 2 lines:
//   line 0 [nr cold pad | pages[0..6]]  line 1 [pages[7..14]]
// At offset 8 the same 128 bytes straddle three lines: "fits in two lines"
// needs alignment.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "layouts/cacheline.h"
#include "layouts/page.h"

namespace lockline {

/// The LP64 facts checked of each struct: a standard layout (so offsetof is
/// well-defined), its size and where its pointer array starts.
template <class PV>
constexpr bool Lp64Layout(std::size_t size, std::size_t pages_at) {
  return std::is_standard_layout_v<PV> && sizeof(PV) == size &&
         offsetof(PV, pages) == pages_at;
}

/// Linux 2.6.9 `struct pagevec` (PAGEVEC_SIZE 16): 136 bytes on LP64.
struct PagevecV269 {
  static constexpr int kSlots = 16;
  static constexpr const char* kName = "pagevec_v2_6_9";
  unsigned nr;
  int cold;  ///< pages are cache-cold: free to the cold end of the per-CPU list
  Page* pages[kSlots];
};
static_assert(Lp64Layout<PagevecV269>(136, 8),
              "8-byte header + 16 pointers (LP64), the array right after it");

/// Linux 2.6.10 `struct pagevec` (PAGEVEC_SIZE 14, 2.6.10 to 4.x): `unsigned
/// long nr; unsigned long cold; struct page *pages[14];` = 128 bytes on LP64
/// (include/linux/pagevec.h@v2.6.11:9-17). The size the kernel shipped after
/// the 2004 thread: two lines, but by a 16-byte header and 14 slots, not the
/// proposal's 15.
struct PagevecV2610 {
  static constexpr int kSlots = 14;
  static constexpr const char* kName = "pagevec_v2_6_10";
  unsigned long nr;
  unsigned long cold;  ///< as in 2.6.9: free to the cold end of the pcp list
  Page* pages[kSlots];
};
static_assert(Lp64Layout<PagevecV2610>(128, 16),
              "two unsigned longs, then 14 pointers (LP64)");

/// The September 2004 proposal: `unsigned short nr, cold; struct page
/// *pages[15];` 128 bytes on LP64 (4 header bytes + 4 bytes of alignment
/// padding + 120).
struct PagevecProposal2004 {
  static constexpr int kSlots = 15;
  static constexpr const char* kName = "pagevec_2004_proposal";
  unsigned short nr;
  unsigned short cold;
  Page* pages[kSlots];
};
static_assert(Lp64Layout<PagevecProposal2004>(128, 8),
              "not 124: the 4-byte header is padded to 8 for the pointers");

namespace detail {
/// "pagevec_5x" followed by the decimal slot count, at compile time.
constexpr std::array<char, 16> Pagevec5xName(int slots) {
  std::array<char, 16> out{};
  const char prefix[] = "pagevec_5x";
  std::size_t i = 0;
  for (; prefix[i] != '\0'; ++i) out[i] = prefix[i];
  char digits[4] = {};
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + slots % 10);
    slots /= 10;
  } while (slots > 0 && n < 4);
  while (n > 0) out[i++] = digits[--n];
  return out;
}
}  // namespace detail

/// Linux 5.x `struct pagevec` with N slots (5.0-5.15: PAGEVEC_SIZE 15; the June
/// 2020 proposal used 31 on large systems). N from 1 to 255 (nr is an unsigned
/// char).
template <int N>
struct Pagevec5x {
  static_assert(N >= 1 && N <= 255, "nr is an unsigned char: 1..255 slots");
  static constexpr int kSlots = N;
  static constexpr std::array<char, 16> kNameStorage = detail::Pagevec5xName(N);
  static constexpr const char* kName =
      kNameStorage.data();  ///< "pagevec_5x" + N
  unsigned char nr;
  bool percpu_pvec_drained;
  Page* pages[N];
};
using Pagevec5x15 = Pagevec5x<15>;
using Pagevec5x31 = Pagevec5x<31>;
static_assert(Lp64Layout<Pagevec5x15>(128, 8),
              "2-byte header padded to 8 + 15 pointers");
static_assert(sizeof(Pagevec5x31) == 256,
              "doubling the slots doubles the stack cost (2020)");
static_assert(sizeof(Pagevec5x<128>) == 8 + 128 * 8,
              "sweep sizes: header + N pointers");

/// Mirrors of the 2004 structs with 4-byte pointers (ILP32, as on the quoted
/// Pentium III), for the report only: the header shrink is real there, 72 -> 64
/// bytes.
struct PagevecV269Ilp32 {
  std::uint32_t nr;
  std::int32_t cold;
  std::uint32_t pages[16];
};
struct PagevecProposal2004Ilp32 {
  std::uint16_t nr;
  std::uint16_t cold;
  std::uint32_t pages[15];
};
static_assert(sizeof(PagevecV269Ilp32) == 72,
              "32-bit 2.6.9 pagevec, as quoted in 2004");
static_assert(sizeof(PagevecProposal2004Ilp32) == 64,
              "32-bit proposal: one power of two");

// ---- operations (include/linux/pagevec.h)
// ----------------------------------------------------

/// Any pagevec model with a compile-time slot count.
template <class PV>
concept StaticPagevec = requires(PV& pv) {
  { PV::kSlots } -> std::convertible_to<int>;
  pv.nr;
  pv.pages[0];
};

/// pagevec_init: empty; `cold` (2.6.9, 2004) is set as given,
/// percpu_pvec_drained cleared.
template <StaticPagevec PV>
inline void pagevec_init(PV& pv, int cold = 0) {
  pv.nr = 0;
  if constexpr (requires { pv.cold; })
    pv.cold = static_cast<decltype(pv.cold)>(cold);
  if constexpr (requires { pv.percpu_pvec_drained; })
    pv.percpu_pvec_drained = false;
}
/// pagevec_reinit: empty, other header fields kept.
template <StaticPagevec PV>
inline void pagevec_reinit(PV& pv) {
  pv.nr = 0;
}
/// pagevec_count: pages held.
template <StaticPagevec PV>
inline int pagevec_count(const PV& pv) {
  return static_cast<int>(pv.nr);
}
/// pagevec_space: free slots.
template <StaticPagevec PV>
inline int pagevec_space(const PV& pv) {
  return PV::kSlots - static_cast<int>(pv.nr);
}
/// pagevec_add: append (caller guarantees space) and return the space left; 0
/// means "full, drain it now" (the caller then takes the lock once for the
/// whole batch).
template <StaticPagevec PV>
inline int pagevec_add(PV& pv, Page* page) {
  pv.pages[pv.nr] = page;
  pv.nr = static_cast<decltype(pv.nr)>(pv.nr + 1);
  return pagevec_space(pv);
}

/// Runtime-sized 5.x pagevec for batch-size sweeps (1..255 slots): the same
/// bytes as Pagevec5x<N> (nr at 0, percpu_pvec_drained at 1, pages at 8) in
/// caller-provided storage of Pagevec5xBytes(slots) bytes, 8-byte aligned
/// (place it with AlignedWithOffset to choose its line offset). The view itself
/// is a handle, not the pagevec.
struct PagevecView {
  unsigned char* nr = nullptr;
  bool* percpu_pvec_drained = nullptr;
  Page** pages = nullptr;
  int slots = 0;
};
/// Bytes of a 5.x pagevec with `slots` slots (8-byte header + pointers).
constexpr std::size_t Pagevec5xBytes(int slots) {
  return offsetof(Pagevec5x<1>, pages) +
         static_cast<std::size_t>(slots) * sizeof(Page*);
}
static_assert(Pagevec5xBytes(15) == sizeof(Pagevec5x15),
              "runtime view matches the 5.x struct");
static_assert(Pagevec5xBytes(31) == sizeof(Pagevec5x31),
              "runtime view matches the 5.x struct");

/// Initializes an empty 5.x pagevec of `slots` (1..255) slots at `at` (8-byte
/// aligned, at least Pagevec5xBytes(slots) bytes) and returns its view; a view
/// with slots == 0 for bad arguments.
inline PagevecView PlacePagevec5x(void* at, int slots) {
  if (at == nullptr || slots < 1 || slots > 255 ||
      reinterpret_cast<std::uintptr_t>(at) % alignof(Page*) != 0) {
    return {};
  }
  auto* bytes = static_cast<unsigned char*>(at);
  std::memset(bytes, 0, Pagevec5xBytes(slots));
  PagevecView v;
  v.nr = bytes + offsetof(Pagevec5x<1>, nr);
  v.percpu_pvec_drained = reinterpret_cast<bool*>(
      bytes + offsetof(Pagevec5x<1>, percpu_pvec_drained));
  v.pages = reinterpret_cast<Page**>(bytes + offsetof(Pagevec5x<1>, pages));
  v.slots = slots;
  return v;
}
inline void pagevec_init(PagevecView& pv) {
  *pv.nr = 0;
  *pv.percpu_pvec_drained = false;
}
inline void pagevec_reinit(PagevecView& pv) { *pv.nr = 0; }
inline int pagevec_count(const PagevecView& pv) { return *pv.nr; }
inline int pagevec_space(const PagevecView& pv) { return pv.slots - *pv.nr; }
inline int pagevec_add(PagevecView& pv, Page* page) {
  pv.pages[*pv.nr] = page;
  *pv.nr = static_cast<unsigned char>(*pv.nr + 1);
  return pagevec_space(pv);
}

}  // namespace lockline
