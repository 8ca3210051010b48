// pagevec's lock x layout axis: the workloads of the model (bench/pagevec/
// model.h) the grid (bench/pagevec.cpp) runs, one group of locks per unit in
// bench/pagevec/*.cpp so a small CI runner's cores compile them in parallel.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "bench/pagevec/model.h"

namespace lockline {
namespace pagevec_bench {

/// A named layout: param value and native slot count.
struct NamedLayout {
  const char* name;
  int slots;
};
/// The named kernel structs (layouts/pagevec.h), each at its native size.
template <class... PV>
struct NamedPagevecs {
  static constexpr NamedLayout kLayouts[] = {{PV::kName, PV::kSlots}...};
  /// The workload of lock L x the struct named `layout`, or nullptr.
  template <LockAlgorithm L>
  static std::unique_ptr<Workload> Make(const PointEnv& env,
                                        const std::string& layout,
                                        const Config& cfg) {
    std::unique_ptr<Workload> w;
    ((layout == PV::kName &&
      (w = std::make_unique<PagevecWorkload<L, NamedPv<PV>>>(env, cfg))) ||
     ...);
    return w;
  }
};
using PagevecLayouts =
    NamedPagevecs<PagevecV269, PagevecV2610, PagevecProposal2004, Pagevec5x15,
                  Pagevec5x31>;
inline constexpr const auto& kNamedLayouts = PagevecLayouts::kLayouts;

/// Creates the workload for lock L x `layout` ("" = the generic 5.x header).
/// Throws std::invalid_argument for an unknown layout. Explicitly instantiated
/// once per lock in bench/pagevec/*.cpp, so the 30 lock x layout workloads
/// compile in three units in parallel instead of one.
template <LockAlgorithm L>
std::unique_ptr<Workload> MakePagevecWorkloadFor(const PointEnv& env,
                                                 const std::string& layout,
                                                 Config cfg) {
  if (layout.empty())
    return std::make_unique<PagevecWorkload<L, GenericPv>>(env, cfg);
  if (auto w = PagevecLayouts::Make<L>(env, layout, cfg)) return w;
  std::string accepted;
  for (const NamedLayout& nl : kNamedLayouts)
    accepted += (accepted.empty() ? "" : ", ") + std::string(nl.name);
  throw std::invalid_argument("pagevec: unknown layout '" + layout +
                              "': accepted are " + accepted);
}

/// pagevec's lock axis: the eras' locks (ttas for 2.6.9, qspinlock for 5.8),
/// ticket, mcs and pthread_mutex; kLocks in bench/pagevec.cpp names the same
/// five (static_assert there). tas and pthread_spin are not on it, so their 12
/// workloads are not compiled (they would only lengthen the build).
using PagevecLocks =
    LockList<TtasLock, TicketLock, QspinLock, McsLock, PthreadMutexLock>;

#define LOCKLINE_PAGEVEC_FACTORY(L)                    \
  std::unique_ptr<Workload> MakePagevecWorkloadFor<L>( \
      const PointEnv& env, const std::string& layout, Config cfg)
extern template LOCKLINE_PAGEVEC_FACTORY(TtasLock);
extern template LOCKLINE_PAGEVEC_FACTORY(TicketLock);
extern template LOCKLINE_PAGEVEC_FACTORY(McsLock);
extern template LOCKLINE_PAGEVEC_FACTORY(QspinLock);
extern template LOCKLINE_PAGEVEC_FACTORY(PthreadMutexLock);

/// Creates the workload for `lock` x `layout` ("" = generic 5.x header).
/// Throws std::invalid_argument for an unknown lock or layout.
inline std::unique_ptr<Workload> MakePagevecWorkload(const PointEnv& env,
                                                     const std::string& lock,
                                                     const std::string& layout,
                                                     Config cfg) {
  std::unique_ptr<Workload> w;
  auto make = [&]<class L>() {
    w = MakePagevecWorkloadFor<L>(env, layout, cfg);
  };
  if (!WithLockIn<PagevecLocks>(lock, make)) {
    std::string accepted;
    for (const std::string& name : LockNamesOf(PagevecLocks{}))
      accepted += (accepted.empty() ? "" : ", ") + name;
    throw std::invalid_argument(
        "pagevec: lock '" + lock +
        "' is not on pagevec's lock axis; accepted: " + accepted);
  }
  return w;
}

}  // namespace pagevec_bench
}  // namespace lockline
