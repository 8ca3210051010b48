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

/// Frees memory from AllocShared: unmaps the `bytes` long mapping that starts
/// `offset` bytes before the pointer (the sampled placement, LayoutSampling).
struct SharedDeleter {
  std::size_t bytes = 0;
  std::size_t offset = 0;
  void operator()(void* p) const;
};
using SharedPtr = std::unique_ptr<void, SharedDeleter>;

/// "mmap of N bytes failed: ENOMEM (Cannot allocate memory); " and
/// AddressSpaceLimit(): "the address-space limit (RLIMIT_AS, ulimit -v) is M
/// bytes" (or "is unlimited"). `err`: the errno.
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

/// "cannot create thread <what>: EAGAIN (...)" and the limits that bound it
/// (address space, stack size, processes: pthread_create says EAGAIN for each).
std::string ThreadFailure(const std::string& what, int err);

/// std::thread running `f`; a creation failure throws std::runtime_error with
/// ThreadFailure(what, errno), not a bare "Resource temporarily unavailable".
template <class F>
std::thread StartThread(const std::string& what, F&& f) {
  try {
    return std::thread(std::forward<F>(f));
  } catch (const std::system_error& e) {
    throw std::runtime_error(ThreadFailure(what, e.code().value()));
  }
}

/// Validates a --mem value: first-touch | local | node:N | interleave. Throws
/// std::invalid_argument naming the value and the accepted forms.
void CheckMemPolicy(const std::string& policy);

/// Address-layout sampling (after Stabilizer, Curtsinger and Berger, ASPLOS
/// 2013, and Mytkowicz et al., "Producing wrong data", ASPLOS 2009): while one
/// is alive, every MakeShared structure under test is placed at a random
/// offset of its mapping's first page, a multiple of LayoutStep (every
/// cache-line offset a model's layout names is kept), drawn from a generator
/// seeded with `seed`. Repetitions so sample the page-offset bits (L1 set
/// index, 4 KiB aliasing) instead of sharing the placement mmap gave the
/// process. The runner opens one per repetition (the row's `address_layout`).
/// One at a time per process; thread-safe draws. Without one, offsets are 0.
class LayoutSampling {
 public:
  /// The span offsets are drawn from: [0, kSpanBytes), one 4 KiB page.
  static constexpr std::size_t kSpanBytes = 4096;
  /// Starts sampling with `seed`; throws std::logic_error when another
  /// LayoutSampling is alive. `sample` false: every structure stays at offset
  /// 0 (a build duet whose old build cannot sample: both sides then share the
  /// page-start layout) and Json() says "sampled": false.
  explicit LayoutSampling(uint64_t seed, bool sample = true);
  ~LayoutSampling();
  LayoutSampling(const LayoutSampling&) = delete;
  LayoutSampling& operator=(const LayoutSampling&) = delete;
  /// The row's `address_layout`: {"seed", "span_bytes", "allocations": [
  /// {"bytes", "step_bytes", "offset_bytes", "address"}]} for every sampled
  /// allocation so far (address: hex string of the structure's first byte).
  nlohmann::json Json() const;
};

/// The seed of the live LayoutSampling in `*seed`; false when none is alive.
/// The build duet sends it to the old build, which samples the same offsets.
bool LiveLayoutSeed(uint64_t* seed);

/// Offset (bytes) of a `bytes`-byte structure on `step`s: uniform over 0, step,
/// ... up to the last that keeps it in its page (one larger: any step) from the
/// LayoutSampling's generator, 0 without one (or for step 0 or a step of a
/// page or more). Records the draw for LayoutSampling::Json with `bytes`.
std::size_t SampleLayoutOffset(std::size_t step, std::size_t bytes);

/// Allocates `bytes` zeroed bytes aligned to at least 4096 (page), placed by
/// env.mem_policy: first-touch (plain mmap, zeroed by the calling main thread:
/// lands on its node), local (bound to the NUMA node of the point's first PU),
/// node:N (hwloc logical NUMA node N), interleave (across the NUMA nodes the
/// point spans). Falls back to first-touch, with a warning once per run, where
/// binding is not supported; the point records the policy that took effect.
/// Throws std::bad_alloc when the mapping fails. `sample_step` > 0: the
/// returned pointer is SampleLayoutOffset(sample_step, bytes) bytes past the
/// page start instead (aligned to sample_step; the mapping grows to hold it).
SharedPtr AllocShared(std::size_t bytes, const PointEnv& env,
                      std::size_t sample_step = 0);

/// Allocates `bytes` uninitialized bytes aligned to `align` (a power of two)
/// on pages of their own, at SampleLayoutOffset(LayoutStep(align), bytes) past
/// the first page's start (recorded as `what`). For Workload::operator new:
/// the object every timed loop reads lies at the same page offset in both
/// builds of a duet. Throws std::bad_alloc. Free with FreeSampledObject.
void* AllocSampledObject(std::size_t bytes, std::size_t align,
                         const char* what = "workload object");

/// Frees what AllocSampledObject returned (nullptr: nothing).
void FreeSampledObject(void* p) noexcept;

/// Step of a sampled structure's offset: max(alignof(T), kDestructiveLine).
inline constexpr std::size_t LayoutStep(std::size_t align) {
  return align > kDestructiveLine ? align : kDestructiveLine;
}

/// Constructs a T in shared memory placed by the policy, at a sampled offset
/// within its page while a LayoutSampling is alive (step LayoutStep(
/// alignof(T))); destroyed and freed by the returned handle.
template <class T, class... Args>
std::shared_ptr<T> MakeShared(const PointEnv& env, Args&&... args) {
  SharedPtr mem = AllocShared(sizeof(T), env, LayoutStep(alignof(T)));
  T* obj = new (mem.get()) T(std::forward<Args>(args)...);
  auto holder = std::make_shared<SharedPtr>(std::move(mem));
  return std::shared_ptr<T>(obj, [holder](T* t) { t->~T(); });
}

/// OS NUMA node numbers (sorted, distinct) holding the resident pages of
/// [ptr, ptr + bytes), asked of the kernel with move_pages(2) and a null node
/// list (query only; at most 1024 pages, evenly spaced, are asked). Empty when
/// the kernel cannot say (no NUMA support: ENOSYS) or no page is resident.
/// Never throws. Source: move_pages(2), "status" without "nodes".
std::vector<int> NodesOfRange(const void* ptr, std::size_t bytes);

/// Where the live AllocShared allocations are, for the row's
/// details.mem_nodes: one object per allocation with "bytes", "policy" (the
/// --mem value it was allocated under), "requested" (hwloc logical NUMA nodes
/// the policy asked for; empty for first-touch) and "nodes" (hwloc logical
/// NUMA nodes its pages are on, from NodesOfRange; OS numbers in "os_nodes").
/// `topo` maps OS to logical numbers (null: logical = OS). Never throws.
nlohmann::json SharedRegionsJson(const Topology* topo);

/// The shortest of `attempts` timings, ns, of faulting in `bytes` of private
/// anonymous memory mapped with MADV_NOHUGEPAGE, one write per 4 KiB page
/// (the fault, the page's allocation and zeroing); `with_unmap`: the munmap
/// (the pages' release and free) is timed too. 0 when a mapping fails. Never
/// throws. Shared by the budget's probe (MeasureFaultInSecondsPerMiB) and the
/// work calibration (harness/measure/page_work.h MeasureFaultNsPerPage).
double TimeAnonymousFaultInNs(std::size_t bytes, int attempts, bool with_unmap);

/// Seconds one MiB takes to fault in now (TimeAnonymousFaultInNs of `mib` MiB
/// with the unmap, the faster of two), for pricing Variant::cost_mib at plan
/// time. 0 when the mapping fails. Never throws.
double MeasureFaultInSecondsPerMiB(std::size_t mib = 16);

}  // namespace lockline
