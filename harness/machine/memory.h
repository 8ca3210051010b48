// Placement of shared structures (the lock, the zone, the LRU) by --mem policy,
// through hwloc memory binding. Thread-private memory is not allocated here:
// its thread first-touches it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "harness/family.h"
#include "harness/machine/cpu.h"

namespace lockline {

/// Unmaps AllocShared's mapping: `bytes` long, `offset` before the pointer.
struct SharedDeleter {
  std::size_t bytes = 0;
  std::size_t offset = 0;
  void operator()(void* p) const;
};
using SharedPtr = std::unique_ptr<void, SharedDeleter>;

/// "mmap of N bytes failed: ENOMEM (...); " and the RLIMIT_AS limit's text.
std::string MapFailure(std::size_t bytes, int err);
std::string AddressSpaceLimit();

/// A failed mapping, as std::bad_alloc with MapFailure's text as what().
class MapFailed : public std::bad_alloc {
 public:
  MapFailed(std::size_t bytes, int err) : what_(MapFailure(bytes, err)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

/// "cannot create thread <what>: EAGAIN (...)" and the limits that bound it.
std::string ThreadFailure(const std::string& what, int err);

/// std::thread running `f`; a failure throws ThreadFailure's text.
template <class F>
std::thread StartThread(const std::string& what, F&& f) {
  try {
    return std::thread(std::forward<F>(f));
  } catch (const std::system_error& e) {
    throw std::runtime_error(ThreadFailure(what, e.code().value()));
  }
}

/// Validates --mem (first-touch | local | node:N | interleave); throws
/// std::invalid_argument.
void CheckMemPolicy(const std::string& policy);

/// Address-layout sampling (after Stabilizer, ASPLOS 2013): while one is alive
/// (one per repetition and process), every MakeShared structure lies at a
/// seeded random multiple of LayoutStep within its first page, so repetitions
/// sample the L1 set and 4 KiB aliasing bits. Without one, offsets are 0.
class LayoutSampling {
 public:
  /// Offsets are drawn from [0, kSpanBytes), one 4 KiB page.
  static constexpr std::size_t kSpanBytes = 4096;
  /// Throws std::logic_error when another is alive. `sample` false: offsets
  /// stay 0 and Json() says "sampled": false.
  explicit LayoutSampling(uint64_t seed, bool sample = true);
  ~LayoutSampling();
  LayoutSampling(const LayoutSampling&) = delete;
  LayoutSampling& operator=(const LayoutSampling&) = delete;
  /// The row's `address_layout` (results/SCHEMA.md).
  nlohmann::json Json() const;
};

/// The live LayoutSampling's seed (for the build duet); false when none.
bool LiveLayoutSeed(uint64_t* seed);

/// A uniform multiple of `step` that keeps `bytes` in its page (bytes), drawn
/// and recorded by the live LayoutSampling; 0 without one or for step 0.
std::size_t SampleLayoutOffset(std::size_t step, std::size_t bytes);

/// Where a ThreadTeam thread's stack lies (after Stabilizer's stack
/// randomization, ASPLOS 2013). Its top is `top_offset` bytes (a multiple of
/// kDestructiveLine under 4 KiB) below the end of a fresh mapping, so its
/// frames and its static TLS (the MCS and qspin nodes) sample the L1 set and
/// 4 KiB aliasing bits per repetition; `skip_pages` pages are faulted around
/// the fault of its top page (SkipFreePages), so that page is not the one the
/// last repetition freed. Drawn from the live LayoutSampling's seed and
/// `index` by a stream of their own (the structures' offsets are a build's
/// without it) and recorded as "thread N stack"; {0, 0} without one.
struct StackPlacement {
  std::size_t top_offset = 0;  ///< bytes
  int skip_pages = 0;          ///< pages
};
StackPlacement SampleStackPlacement(int index);

/// Faults in `pages` private 4 KiB pages on construction and unmaps them on
/// destruction. A page faulted meanwhile on this CPU takes another physical
/// page than the first of its per-CPU free list (the page freed last, which
/// a mapping made afresh each repetition may well get back), so physical
/// placement (the L2/L3 set, the L3 slice, the coherence home) is sampled
/// too. Never throws: a failed mapping skips none.
class SkipFreePages {
 public:
  explicit SkipFreePages(int pages);
  ~SkipFreePages();
  SkipFreePages(const SkipFreePages&) = delete;
  SkipFreePages& operator=(const SkipFreePages&) = delete;

 private:
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
};

/// `bytes` zeroed, page-aligned bytes placed by env.mem_policy (first-touch by
/// the main thread, local: the first PU's node, node:N, interleave: the
/// point's nodes); falls back to first-touch with one warning where binding
/// is unsupported. `sample_step` > 0: at SampleLayoutOffset past the page
/// start. Throws std::bad_alloc.
SharedPtr AllocShared(std::size_t bytes, const PointEnv& env,
                      std::size_t sample_step = 0);

/// `bytes` uninitialized bytes on pages of their own at a sampled offset
/// (recorded as `what`), for Workload::operator new. Throws std::bad_alloc;
/// free with FreeSampledObject.
void* AllocSampledObject(std::size_t bytes, std::size_t align,
                         const char* what = "workload object");

/// Frees what AllocSampledObject returned (nullptr: nothing).
void FreeSampledObject(void* p) noexcept;

/// Step of a sampled structure's offset: max(alignof(T), kDestructiveLine).
inline constexpr std::size_t LayoutStep(std::size_t align) {
  return align > kDestructiveLine ? align : kDestructiveLine;
}

/// Constructs a T in AllocShared memory at a sampled offset.
template <class T, class... Args>
std::shared_ptr<T> MakeShared(const PointEnv& env, Args&&... args) {
  SharedPtr mem = AllocShared(sizeof(T), env, LayoutStep(alignof(T)));
  T* obj = new (mem.get()) T(std::forward<Args>(args)...);
  auto holder = std::make_shared<SharedPtr>(std::move(mem));
  return std::shared_ptr<T>(obj, [holder](T* t) { t->~T(); });
}

/// OS NUMA nodes (sorted) holding the resident pages of [ptr, ptr + bytes), by
/// move_pages(2) with null nodes (at most 1024 pages asked); empty when
/// unknown. Never throws.
std::vector<int> NodesOfRange(const void* ptr, std::size_t bytes);

/// The live AllocShared allocations for the row's details.mem_nodes
/// (results/SCHEMA.md); `topo` maps OS to logical nodes (null: same).
nlohmann::json SharedRegionsJson(const Topology* topo);

/// The shortest of `attempts` timings (ns) of faulting in `bytes` of
/// MADV_NOHUGEPAGE anonymous memory, one write per 4 KiB page (`with_unmap`:
/// and the munmap). 0 when a mapping fails.
double TimeAnonymousFaultInNs(std::size_t bytes, int attempts, bool with_unmap);

/// Seconds one MiB takes to fault in and unmap now (Variant::cost_mib's
/// price); 0 when the mapping fails.
double MeasureFaultInSecondsPerMiB(std::size_t mib = 16);

}  // namespace lockline
