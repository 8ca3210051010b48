// Tests of harness/machine/padded_slots.h (issue 27: --padding=BYTES): the
// stride is round_up(max(sizeof(T), padding), padding), the block is
// padding-aligned, neighbouring slots of a small T are exactly `padding` bytes
// apart (so no two threads' slots share a line), every T is constructed and
// destroyed exactly once, and --padding accepts only powers of two from 64 to
// 4096.
#include "harness/machine/padded_slots.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "harness/run/options.h"

namespace lockline {
namespace {

constexpr std::size_t kPaddings[] = {64, 128, 256, 512, 1024, 2048, 4096};

struct Small {
  uint64_t v = 0;
};

struct alignas(kCacheLine) Big {  // 200 bytes of payload, 256 with alignment
  unsigned char bytes[200] = {};
};

std::uintptr_t Addr(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

TEST(PaddedSlots, StrideIsSizeRoundedUpToThePadding) {
  EXPECT_EQ(PaddedSlots<Small>::StrideFor(64), 64u);
  EXPECT_EQ(PaddedSlots<Small>::StrideFor(128), 128u);
  EXPECT_EQ(PaddedSlots<Small>::StrideFor(4096), 4096u);
  ASSERT_EQ(sizeof(Big), 256u);
  EXPECT_EQ(PaddedSlots<Big>::StrideFor(64), 256u);
  EXPECT_EQ(PaddedSlots<Big>::StrideFor(128), 256u);
  EXPECT_EQ(PaddedSlots<Big>::StrideFor(256), 256u);
  EXPECT_EQ(PaddedSlots<Big>::StrideFor(512), 512u);
  for (std::size_t pad : kPaddings) {
    PaddedSlots<Big> slots(3, pad);
    EXPECT_EQ(slots.padding(), pad);
    EXPECT_EQ(slots.stride(), PaddedSlots<Big>::StrideFor(pad));
    EXPECT_EQ(slots.stride() % pad, 0u);
    EXPECT_GE(slots.stride(), sizeof(Big));
    EXPECT_EQ(Addr(&slots[2]) - Addr(&slots[1]), slots.stride());
  }
}

TEST(PaddedSlots, BlockAndEverySlotArePaddingAligned) {
  for (std::size_t pad : kPaddings) {
    PaddedSlots<Small> slots(9, pad);
    ASSERT_EQ(slots.size(), 9u);
    for (std::size_t i = 0; i < slots.size(); ++i)
      EXPECT_EQ(Addr(&slots[i]) % pad, 0u)
          << "padding " << pad << " slot " << i;
  }
}

TEST(PaddedSlots, NeighbouringSmallSlotsArePaddingBytesApartOnDistinctLines) {
  for (std::size_t pad : kPaddings) {
    PaddedSlots<Small> slots(16, pad);
    std::set<std::uintptr_t> lines, pairs;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (i + 1 < slots.size()) {
        EXPECT_EQ(Addr(&slots[i + 1]) - Addr(&slots[i]), pad)
            << "padding " << pad << " slot " << i;
      }
      // Distinct 64-byte lines always; distinct adjacent-line pairs (128
      // bytes, Intel's spatial prefetcher) from --padding=128 up.
      EXPECT_TRUE(lines.insert(Addr(&slots[i]) / 64).second);
      if (pad >= 128) {
        EXPECT_TRUE(pairs.insert(Addr(&slots[i]) / 128).second);
      }
    }
  }
}

TEST(PaddedSlots, TheDefaultFollowsSetSlotPadding) {
  EXPECT_EQ(SlotPadding(), kDefaultSlotPadding);
  EXPECT_EQ(kDefaultSlotPadding, 128u);
  EXPECT_EQ(PaddedSlots<Small>(2).stride(), 128u);
  SetSlotPadding(256);
  EXPECT_EQ(PaddedSlots<Small>(2).stride(), 256u);
  EXPECT_THROW(SetSlotPadding(96), std::invalid_argument);
  EXPECT_EQ(SlotPadding(), 256u) << "a refused value must not stick";
  SetSlotPadding(kDefaultSlotPadding);
  EXPECT_EQ(PaddedSlots<Small>(2).stride(), 128u);
}

TEST(PaddedSlots, RefusesPaddingsThatAreNotAPowerOfTwoFrom64To4096) {
  for (std::size_t bad : {0ul, 1ul, 32ul, 63ul, 96ul, 100ul, 192ul, 8192ul})
    EXPECT_THROW(PaddedSlots<Small>(2, bad), std::invalid_argument) << bad;
  for (std::size_t pad : kPaddings) EXPECT_TRUE(IsValidSlotPadding(pad));
}

struct Counted {
  static inline int constructed = 0, destroyed = 0, throw_at = -1;
  explicit Counted(int tag = 0) : tag(tag) {
    if (constructed == throw_at) throw std::runtime_error("ctor");
    ++constructed;
  }
  ~Counted() { ++destroyed; }
  static void Reset() {
    constructed = 0;
    destroyed = 0;
    throw_at = -1;
  }
  int tag;
};

TEST(PaddedSlots, EveryElementIsConstructedAndDestroyedOnce) {
  Counted::Reset();
  {
    PaddedSlots<Counted> slots(5, 128);
    EXPECT_EQ(Counted::constructed, 5);
    EXPECT_EQ(Counted::destroyed, 0);
    for (std::size_t i = 0; i < 5; ++i) EXPECT_NE(slots.get(i), nullptr);
    // Moved: the new owner destroys them, the moved-from one nothing.
    PaddedSlots<Counted> moved(std::move(slots));
    EXPECT_EQ(slots.size(), 0u);
    EXPECT_EQ(moved.size(), 5u);
    PaddedSlots<Counted> assigned;
    assigned = std::move(moved);
    EXPECT_EQ(Counted::destroyed, 0);
  }
  EXPECT_EQ(Counted::constructed, 5);
  EXPECT_EQ(Counted::destroyed, 5);
}

TEST(PaddedSlots, DeferredSlotsAreBuiltByEmplaceOnTheirOwnThreads) {
  Counted::Reset();
  {
    PaddedSlots<Counted> slots(4, kDeferConstruction, 256);
    EXPECT_EQ(Counted::constructed, 0);
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(slots.get(i), nullptr);
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i)  // slot 3 is never set up
      threads.emplace_back([&slots, i] { slots.Emplace(i, 10 + i); });
    for (auto& t : threads) t.join();
    EXPECT_EQ(Counted::constructed, 3);
    for (int i = 0; i < 3; ++i) {
      ASSERT_NE(slots.get(i), nullptr);
      EXPECT_EQ(slots[i].tag, 10 + i);
      EXPECT_EQ(slots.get(i), &slots[i]);
    }
    EXPECT_EQ(slots.get(3), nullptr);
    // Emplace on a built slot replaces its element.
    slots.Emplace(1, 99);
    EXPECT_EQ(Counted::constructed, 4);
    EXPECT_EQ(Counted::destroyed, 1);
    EXPECT_EQ(slots[1].tag, 99);
  }
  EXPECT_EQ(Counted::destroyed, 4) << "only the built slots are destroyed";
}

TEST(PaddedSlots, AThrowingConstructorLeavesNothingBuilt) {
  Counted::Reset();
  Counted::throw_at = 3;
  EXPECT_THROW(PaddedSlots<Counted>(6, 64), std::runtime_error);
  EXPECT_EQ(Counted::constructed, 3);
  EXPECT_EQ(Counted::destroyed, 3);
  Counted::Reset();
}

TEST(PaddedSlots, EmptyHasNoSlots) {
  PaddedSlots<Small> none;
  EXPECT_TRUE(none.empty());
  PaddedSlots<Small> zero(0, 4096);
  EXPECT_EQ(zero.size(), 0u);
}

// ---- --padding=BYTES -------------------------------------------------------

std::string PaddingError(const std::string& arg, Options* out = nullptr) {
  std::vector<std::string> args = {"lockline", arg};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  try {
    Options o = ParseOptions(static_cast<int>(argv.size()), argv.data());
    if (out) *out = o;
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(PaddingFlag, AcceptsPowersOfTwoFrom64To4096) {
  Options o;
  EXPECT_EQ(PaddingError("--quick", &o), "");
  EXPECT_EQ(o.padding, 128u);
  EXPECT_FALSE(o.padding_given);
  for (std::size_t pad : kPaddings) {
    EXPECT_EQ(PaddingError("--padding=" + std::to_string(pad), &o), "");
    EXPECT_EQ(o.padding, pad);
    EXPECT_TRUE(o.padding_given);
  }
}

TEST(PaddingFlag, RefusesEverythingElseNamingValueAndRange) {
  for (const char* bad : {"96", "32", "8192", "abc", "0", "-128", "128k",
                          "0x80", "1e3", "99999999999999999999"}) {
    const std::string e = PaddingError(std::string("--padding=") + bad);
    EXPECT_EQ(e.rfind(std::string("--padding=") + bad + ": ", 0), 0u) << e;
    EXPECT_NE(e.find("accepted: a power of two from 64 to 4096 bytes"),
              std::string::npos)
        << e;
  }
  EXPECT_NE(PaddingError("--padding=").find("needs a value"),
            std::string::npos);
}

}  // namespace
}  // namespace lockline
