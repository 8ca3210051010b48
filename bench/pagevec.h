// pagevec's lock x layout workloads, one group of locks per unit in
// bench/pagevec/*.cpp so the build compiles them in parallel.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "bench/pagevec/model.h"

namespace lockline {
namespace pagevec_bench {

struct NamedLayout {
  const char* name;
  int slots;
};
/// The named kernel structs (layouts/pagevec.h) at their native sizes.
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

/// The workload for lock L x `layout` ("" = the generic 5.x header);
/// std::invalid_argument for an unknown layout. Instantiated in
/// bench/pagevec/*.cpp.
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

/// pagevec's lock axis, in the grid's order: the eras' locks, ticket, mcs,
/// pthread_mutex (tas and pthread_spin not compiled).
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

/// The workload for `lock` x `layout`; std::invalid_argument if unknown.
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
