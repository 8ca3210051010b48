// zone_lock's layouts of placement lock_after_free_area (bench/zone_lock.h).
#include <mutex>
#include <optional>

#include "bench/zone_lock.h"

namespace lockline::zone_lock {

template LOCKLINE_ZONE_LOCK_FACTORY(kLockAfterFreeArea);

// work_ns:cal's calibration (bench/zone_lock.h): here because this unit
// already instantiates the layout it times (ticket, lock_after_free_area,
// 64-byte lines, cma), so no other unit compiles that layout again.
double MeasureModelNsPerPage(bool quick) {
  PointEnv env;
  env.threads = 1;
  env.quick = quick;
  env.mem_policy = "first-touch";
  ZoneLockWorkload<TicketLock, ZoneLockPlacement::kLockAfterFreeArea,
                   kCacheLine64, ZoneConfig::kCma>
      w(env, kDefaultBatch);
  ThreadCtx ctx;
  w.SetupThread(ctx);
  // One whole burst cycle: burst allocations, then as many frees.
  const uint64_t cycle = 2 * static_cast<uint64_t>(w.burst_pages());
  double best = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const uint64_t t0 = NowNs();
    w.RunSteps(ctx, cycle);
    const double ns =
        static_cast<double>(NowNs() - t0) / static_cast<double>(cycle / 2);
    if (attempt == 0 || ns < best) best = ns;
  }
  w.TeardownThread(ctx);
  return best;
}

WorkCalibration CalibratedWork(bool quick) {
  static std::mutex mu;
  static std::optional<WorkCalibration> cache[2];
  std::lock_guard<std::mutex> g(mu);
  std::optional<WorkCalibration>& c = cache[quick ? 1 : 0];
  if (!c) {
    c = CalibrateWork(MeasureModelNsPerPage(quick),
                      quick ? "zone_lock:quick" : "zone_lock");
    // The split of the work (SplitWork), shared in a build duet as the
    // fault cost is, and kept in the run's calibration directory.
    c->unmap_fault_ratio =
        SharedCalibration("unmap_fault_ratio", MeasureUnmapFaultRatio);
  }
  return *c;
}

}  // namespace lockline::zone_lock
