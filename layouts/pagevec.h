// `struct pagevec` as the kernel defined it over time (include/linux/
// pagevec.h), the 2004 shrink proposal, and the pagevec operations. LP64:
//
//   variant             header (bytes)                slots sizeof lines@0 @8
//   2.6.9               unsigned nr; int cold (8)        16    136       3  3
//   2.6.10-4.x          unsigned long nr, cold (16)      14    128       2  3
//   2004 proposal       unsigned short nr, cold (4+4)    15    128       2  3
//   5.x (PAGEVEC_SIZE)  unsigned char nr; bool (2+6)     15    128       2  3
//   5.x, 31 slots 2020  same header                      31    256       4  5
//
// The proposal's 4 saved header bytes return as padding before the 8-byte
// aligned array: on LP64 136 -> 128 is purely 16 -> 15 slots, and the quoted
// 140 -> 124 cannot occur; on ILP32 the shrink is real, 72 -> 64. At offset 8
// the 128 bytes straddle three lines.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "layouts/page.h"

namespace lockline {

/// Standard layout (offsetof defined), size and the array's offset.
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

/// Linux 2.6.10 `struct pagevec` (PAGEVEC_SIZE 14, 2.6.10 to 4.x), 128 bytes
/// on LP64 (include/linux/pagevec.h@v2.6.11:9-17): what shipped after 2004.
struct PagevecV2610 {
  static constexpr int kSlots = 14;
  static constexpr const char* kName = "pagevec_v2_6_10";
  unsigned long nr;
  unsigned long cold;  ///< as in 2.6.9: free to the cold end of the pcp list
  Page* pages[kSlots];
};
static_assert(Lp64Layout<PagevecV2610>(128, 16),
              "two unsigned longs, then 14 pointers (LP64)");

/// The September 2004 proposal: 4 header bytes + 4 of padding + 120 on LP64.
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
/// "pagevec_5x" followed by the decimal slot count (1..255), at compile time.
constexpr std::array<char, 16> Pagevec5xName(int slots) {
  std::array<char, 16> out{};
  const char prefix[] = "pagevec_5x";
  std::size_t i = 0;
  for (; prefix[i] != '\0'; ++i) out[i] = prefix[i];
  if (slots >= 100) out[i++] = static_cast<char>('0' + slots / 100);
  if (slots >= 10) out[i++] = static_cast<char>('0' + slots / 10 % 10);
  out[i] = static_cast<char>('0' + slots % 10);
  return out;
}
}  // namespace detail

/// Linux 5.x `struct pagevec` with N slots (PAGEVEC_SIZE 15 in 5.0-5.15; the
/// June 2020 proposal 31).
template <int N>
struct Pagevec5x {
  static_assert(N >= 1 && N <= 255, "nr is an unsigned char: 1..255 slots");
  static constexpr int kSlots = N;
  static constexpr std::array<char, 16> kNameStorage = detail::Pagevec5xName(N);
  static constexpr const char* kName = kNameStorage.data();
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

/// ILP32 mirrors of the 2004 pair (the quoted Pentium III), for the report.
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

// ---- operations (include/linux/pagevec.h) ----

template <class PV>
concept StaticPagevec = requires(PV& pv) {
  { PV::kSlots } -> std::convertible_to<int>;
  pv.nr;
  pv.pages[0];
};

/// pagevec_init: empty, `cold` as given, percpu_pvec_drained cleared.
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
template <StaticPagevec PV>
inline int pagevec_count(const PV& pv) {
  return static_cast<int>(pv.nr);
}
template <StaticPagevec PV>
inline int pagevec_space(const PV& pv) {
  return PV::kSlots - static_cast<int>(pv.nr);
}
/// pagevec_add: append; returns the space left (0: drain now).
template <StaticPagevec PV>
inline int pagevec_add(PV& pv, Page* page) {
  pv.pages[pv.nr] = page;
  pv.nr = static_cast<decltype(pv.nr)>(pv.nr + 1);
  return pagevec_space(pv);
}

/// A handle on a runtime-sized 5.x pagevec (1..255 slots) in caller storage of
/// Pagevec5xBytes(slots), 8-byte aligned: the bytes of Pagevec5x<N>.
struct PagevecView {
  unsigned char* nr = nullptr;
  bool* percpu_pvec_drained = nullptr;
  Page** pages = nullptr;
  int slots = 0;
};
constexpr std::size_t Pagevec5xBytes(int slots) {
  return offsetof(Pagevec5x<1>, pages) +
         static_cast<std::size_t>(slots) * sizeof(Page*);
}
static_assert(Pagevec5xBytes(15) == sizeof(Pagevec5x15),
              "runtime view matches the 5.x struct");
static_assert(Pagevec5xBytes(31) == sizeof(Pagevec5x31),
              "runtime view matches the 5.x struct");

/// An empty 5.x pagevec of `slots` at `at`; slots == 0 for bad arguments.
inline PagevecView PlacePagevec5x(void* at, int slots) {
  if (at == nullptr || slots < 1 || slots > 255 ||
      reinterpret_cast<std::uintptr_t>(at) % alignof(Page*) != 0) {
    return {};
  }
  auto* bytes = static_cast<unsigned char*>(at);
  std::memset(bytes, 0, Pagevec5xBytes(slots));
  return {bytes + offsetof(Pagevec5x<1>, nr),
          reinterpret_cast<bool*>(bytes +
                                  offsetof(Pagevec5x<1>, percpu_pvec_drained)),
          reinterpret_cast<Page**>(bytes + offsetof(Pagevec5x<1>, pages)),
          slots};
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
