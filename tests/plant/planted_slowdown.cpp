// A planted slowdown for testing the regression gate (issue 38), linked only
// into the test target lockline_planted (CMakeLists.txt), never into lockline.
//
// LOCKLINE_PLANT_SLOWDOWN=FAMILY:PCT (e.g. "locks:10") makes every timed
// window of FAMILY's points lose PCT % of its throughput: after the family's
// own RunWindow returns, the thread spins (no memory traffic, no lock) for
// its CPU time and its wall time in the window, each x PCT / (100 - PCT),
// inside the window the harness times, so ops per CPU-second and ops/s
// become at most (1 - PCT/100) of what the workload did (exactly, for a
// thread that spends its window on the CPU). Unset, empty or PCT 0: no
// change (the binary then measures what lockline measures). A malformed value
// is reported once on stderr and ignored.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>

#include "harness/family.h"
#include "harness/machine/cpu.h"
#include "harness/run/build_duet.h"

namespace lockline {
namespace {

struct Plant {
  std::string family;
  double pct = 0;
};

Plant ReadPlant() {
  Plant p;
  const char* env = std::getenv("LOCKLINE_PLANT_SLOWDOWN");
  if (env == nullptr || *env == '\0') return p;
  const std::string text = env;
  const size_t colon = text.rfind(':');
  char* end = nullptr;
  const double pct = colon == std::string::npos
                         ? -1
                         : std::strtod(text.c_str() + colon + 1, &end);
  if (colon == std::string::npos || colon == 0 || end == nullptr ||
      *end != '\0' || !(pct >= 0 && pct < 90)) {
    std::fprintf(
        stderr,
        "lockline_planted: LOCKLINE_PLANT_SLOWDOWN=%s ignored; accepted: "
        "FAMILY:PCT with 0 <= PCT < 90\n",
        env);
    return p;
  }
  p.family = text.substr(0, colon);
  p.pct = pct;
  return p;
}

/// FAMILY's workload, each window stretched by `factor` of its own length.
class Slowed : public HeapPlacedWorkload {
 public:
  Slowed(std::unique_ptr<Workload> inner, double factor)
      : inner_(std::move(inner)), factor_(factor) {}
  void Prepare(int threads) override { inner_->Prepare(threads); }
  void SetupThread(const ThreadCtx& ctx) override { inner_->SetupThread(ctx); }
  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    const uint64_t w0 = NowNs(), c0 = ThreadCpuNs();
    const uint64_t ops = inner_->RunWindow(ctx, stop);
    const uint64_t w1 = NowNs(), c1 = ThreadCpuNs();
    // In the thread's CPU time: the slowdown is then the same share of the
    // wall-clock rate on a quiet machine and of the CPU-time rate on a
    // loaded one (where the window's wall time is mostly waiting to run).
    // And in wall time: a thread that waits for work done elsewhere spends
    // less CPU than wall, and the wall-clock rate must lose PCT % too. (The
    // -4.5 to -4.7 % that fault's rows read at PCT 5 was the duet's role
    // offset, not this spin: ci/REGRESSION.md "Roles".)
    const auto stretch = [this](uint64_t from, uint64_t to) {
      return to +
             static_cast<uint64_t>(static_cast<double>(to - from) * factor_);
    };
    const uint64_t cpu_until = stretch(c0, c1), wall_until = stretch(w0, w1);
    while (ThreadCpuNs() < cpu_until || NowNs() < wall_until) CpuRelax();
    return ops;
  }
  void TeardownThread(const ThreadCtx& ctx) override {
    inner_->TeardownThread(ctx);
  }
  bool fixed_work() const override { return inner_->fixed_work(); }
  bool shares_lines() const override { return inner_->shares_lines(); }
  void Report(PointReport& out, double window_seconds, uint64_t ops) override {
    inner_->Report(out, window_seconds, ops);
  }
  std::string Verify() override { return inner_->Verify(); }

 private:
  std::unique_ptr<Workload> inner_;
  double factor_;
};

const bool kRegistered = RegisterWorkloadWrap(
    [](const std::string& family,
       std::unique_ptr<Workload> inner) -> std::unique_ptr<Workload> {
      static const Plant plant = ReadPlant();
      if (plant.pct <= 0 || family != plant.family) return inner;
      return std::make_unique<Slowed>(std::move(inner),
                                      plant.pct / (100.0 - plant.pct));
    });

}  // namespace
}  // namespace lockline
