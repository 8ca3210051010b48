// Per-thread slots a runtime distance apart (--padding): the stride of every
// array indexed by thread. Kernel-structure models keep the kernel's padding.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "harness/machine/cpu.h"

namespace lockline {

/// --padding: powers of two from a line to a page (bytes); default 128, as
/// Intel's adjacent-line prefetcher moves lines in pairs.
inline constexpr std::size_t kMinSlotPadding = 64;
inline constexpr std::size_t kMaxSlotPadding = 4096;
inline constexpr std::size_t kDefaultSlotPadding = kDestructiveLine;

/// What --padding applies to, for the run context (padding.applies_to).
inline constexpr const char* kSlotPaddingAppliesTo =
    "per-thread slots: the thread team's window records; locks, zone_lock, "
    "pagevec, page_free and prezero per-thread state and counters; "
    "calibration's private words; duet window logs. Not the kernel-structure "
    "layouts, singleton shared fields, or the fault / kernel_* per-task "
    "records (written once per window)";

/// True for a value --padding accepts.
constexpr bool IsValidSlotPadding(std::size_t bytes) {
  return bytes >= kMinSlotPadding && bytes <= kMaxSlotPadding &&
         (bytes & (bytes - 1)) == 0;
}

namespace detail {
inline std::atomic<std::size_t> slot_padding{kDefaultSlotPadding};
}  // namespace detail

/// The process's distance between per-thread slots, bytes (--padding).
inline std::size_t SlotPadding() {
  return detail::slot_padding.load(std::memory_order_relaxed);
}

/// `bytes` if --padding accepts it, else throws std::invalid_argument.
inline std::size_t CheckedPadding(std::size_t bytes, const char* who = "") {
  if (!IsValidSlotPadding(bytes))
    throw std::invalid_argument(
        std::string(who) + "padding " + std::to_string(bytes) +
        " bytes: accepted: a power of two from 64 to 4096 bytes");
  return bytes;
}

/// Sets SlotPadding() for PaddedSlots created afterwards; throws like
/// CheckedPadding.
inline void SetSlotPadding(std::size_t bytes) {
  detail::slot_padding.store(CheckedPadding(bytes), std::memory_order_relaxed);
}

/// Tag: leaves every slot for Emplace (by its own thread, in SetupThread).
struct DeferConstruction {};
inline constexpr DeferConstruction kDeferConstruction{};

/// `n` T's, slot i at base + i x stride() on an anonymous mapping first
/// touched by whoever constructs the slot; a T of at most `padding` bytes is
/// exactly `padding` from its neighbours. Throws std::invalid_argument or
/// std::bad_alloc. Indexing multiplies by the runtime stride: take a slot's
/// reference once, outside a timed loop. Movable, not copyable.
template <class T>
class PaddedSlots {
  static_assert(alignof(T) <= kMinSlotPadding,
                "a per-thread slot type may align to one cache line at most: "
                "its distance to the next slot is --padding");

 public:
  PaddedSlots() noexcept = default;

  /// `n` slots, each default-constructed (on the calling thread).
  explicit PaddedSlots(std::size_t n, std::size_t padding = SlotPadding())
      : PaddedSlots(n, kDeferConstruction, padding) {
    for (std::size_t i = 0; i < n_; ++i) Emplace(i);
  }

  /// `n` slots, none constructed yet: Emplace builds them.
  PaddedSlots(std::size_t n, DeferConstruction,
              std::size_t padding = SlotPadding())
      : n_(n),
        padding_(CheckedPadding(padding, "PaddedSlots: ")),
        stride_(StrideFor(padding)) {
    if (n_ == 0) return;
    built_ = std::make_unique<bool[]>(n_);  // all false
    bytes_ = RoundUpToPage(n_ * stride_);
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<unsigned char*>(p);
  }

  ~PaddedSlots() { Release(); }

  PaddedSlots(const PaddedSlots&) = delete;
  PaddedSlots& operator=(const PaddedSlots&) = delete;
  PaddedSlots(PaddedSlots&& o) noexcept { Steal(o); }
  PaddedSlots& operator=(PaddedSlots&& o) noexcept {
    if (this != &o) {
      Release();
      Steal(o);
    }
    return *this;
  }

  /// (Re)constructs slot i from `args`; concurrent for different i.
  template <class... A>
  T& Emplace(std::size_t i, A&&... args) {
    if (built_[i]) {
      Slot(i)->~T();
      built_[i] = false;
    }
    T* t = new (Address(i)) T(std::forward<A>(args)...);
    built_[i] = true;
    return *t;
  }

  /// Slot i (it must be constructed).
  T& operator[](std::size_t i) noexcept { return *Slot(i); }
  const T& operator[](std::size_t i) const noexcept { return *Slot(i); }

  /// Slot i, or nullptr when it was never constructed.
  T* get(std::size_t i) noexcept { return built_[i] ? Slot(i) : nullptr; }
  const T* get(std::size_t i) const noexcept {
    return built_[i] ? Slot(i) : nullptr;
  }

  std::size_t size() const noexcept { return n_; }
  bool empty() const noexcept { return n_ == 0; }
  /// Bytes from one slot to the next.
  std::size_t stride() const noexcept { return stride_; }
  /// The padding the slots were laid out with, bytes.
  std::size_t padding() const noexcept { return padding_; }

  /// round_up(max(sizeof(T), padding), padding) bytes.
  static constexpr std::size_t StrideFor(std::size_t padding) {
    const std::size_t need = sizeof(T) > padding ? sizeof(T) : padding;
    return (need + padding - 1) / padding * padding;
  }

 private:
  void* Address(std::size_t i) const noexcept { return base_ + i * stride_; }
  T* Slot(std::size_t i) const noexcept {
    return std::launder(reinterpret_cast<T*>(Address(i)));
  }
  void Release() noexcept {
    if (base_ == nullptr) return;
    for (std::size_t i = 0; i < n_; ++i)
      if (built_[i]) Slot(i)->~T();
    munmap(base_, bytes_);
    base_ = nullptr;
    built_.reset();
    n_ = bytes_ = 0;
  }
  void Steal(PaddedSlots& o) noexcept {
    base_ = std::exchange(o.base_, nullptr);
    built_ = std::move(o.built_);
    n_ = std::exchange(o.n_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
    padding_ = o.padding_;
    stride_ = o.stride_;
  }

  unsigned char* base_ = nullptr;
  std::unique_ptr<bool[]> built_;
  std::size_t n_ = 0;
  std::size_t bytes_ = 0;
  std::size_t padding_ = kDefaultSlotPadding;
  std::size_t stride_ = StrideFor(kDefaultSlotPadding);
};

}  // namespace lockline
