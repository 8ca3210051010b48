// Per-thread slots a runtime distance apart: the container behind --padding,
// the stride of every array indexed by thread (kSlotPaddingAppliesTo). Not a
// kernel layout knob: the models of kernel structures keep the kernel's
// padding (ZONE_PADDING, ____cacheline_aligned_in_smp), and singleton shared
// fields keep cpu.h's kDestructiveLine.
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

/// Accepted --padding values, bytes: powers of two from one 64-byte line to a
/// 4 KiB page (the block is page-aligned, so a slot never straddles less
/// alignment than it asks for). The default, 128, is kDestructiveLine: two
/// lines, because Intel's adjacent-line prefetcher moves lines in pairs.
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

/// True for a value --padding accepts (see kMinSlotPadding).
constexpr bool IsValidSlotPadding(std::size_t bytes) {
  return bytes >= kMinSlotPadding && bytes <= kMaxSlotPadding &&
         (bytes & (bytes - 1)) == 0;
}

namespace detail {
inline std::atomic<std::size_t>& SlotPaddingCell() {
  static std::atomic<std::size_t> cell{kDefaultSlotPadding};
  return cell;
}
}  // namespace detail

/// The process's distance between per-thread slots, bytes: kDefaultSlotPadding
/// until SetSlotPadding (main, from --padding) changes it.
inline std::size_t SlotPadding() {
  return detail::SlotPaddingCell().load(std::memory_order_relaxed);
}

/// Sets SlotPadding() for every PaddedSlots created afterwards (call before
/// any point is built). Throws std::invalid_argument for a value
/// IsValidSlotPadding refuses.
inline void SetSlotPadding(std::size_t bytes) {
  if (!IsValidSlotPadding(bytes))
    throw std::invalid_argument(
        "padding " + std::to_string(bytes) +
        " bytes: accepted: a power of two from 64 to 4096 bytes");
  detail::SlotPaddingCell().store(bytes, std::memory_order_relaxed);
}

/// Tag: PaddedSlots(n, kDeferConstruction) leaves every slot unconstructed;
/// each is built later by Emplace (typically by its own pinned thread in
/// SetupThread).
struct DeferConstruction {};
inline constexpr DeferConstruction kDeferConstruction{};

/// `n` objects of type T, slot i at base + i x stride() bytes (StrideFor), on
/// an anonymous mapping not touched until a slot is constructed (a slot built
/// by its own thread is first-touched there; slots sharing a page land on the
/// node of the first built). For a T of at most `padding` bytes, neighbours
/// are exactly `padding` apart: no two threads share a line (or, at 128, an
/// adjacent-line pair). Errors: std::invalid_argument for a refused padding,
/// std::bad_alloc when the mapping fails; T's constructor's exception
/// propagates. T may align to 64 at most, so --padding sets the distance.
/// Indexing multiplies by the runtime stride: take a slot's reference once per
/// thread, outside a timed loop. Not copyable, movable.
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
      : n_(n), padding_(CheckedPadding(padding)), stride_(StrideFor(padding)) {
    if (n_ == 0) return;
    built_ = std::make_unique<bool[]>(n_);  // all false
    bytes_ = MappedBytes(n_, stride_);
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

  /// Constructs slot i from `args` (destroying what it held first); safe to
  /// call concurrently for different i. Returns the slot.
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

  /// Slot i, or nullptr when it was never constructed (a thread whose set-up
  /// did not run).
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

  /// The stride of a T under `padding`: round_up(max(sizeof(T), padding),
  /// padding) bytes.
  static constexpr std::size_t StrideFor(std::size_t padding) {
    const std::size_t need = sizeof(T) > padding ? sizeof(T) : padding;
    return (need + padding - 1) / padding * padding;
  }

 private:
  static std::size_t CheckedPadding(std::size_t padding) {
    if (!IsValidSlotPadding(padding))
      throw std::invalid_argument(
          "PaddedSlots: padding " + std::to_string(padding) +
          " bytes: accepted: a power of two from 64 to 4096 bytes");
    return padding;
  }
  static std::size_t MappedBytes(std::size_t n, std::size_t stride) {
    constexpr std::size_t kPage = 4096;
    return (n * stride + kPage - 1) / kPage * kPage;
  }
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
