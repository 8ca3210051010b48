#include "harness/family.h"

#include <algorithm>

#include "harness/machine/cpu.h"
#include "harness/measure/shared_calibration.h"

namespace lockline {
namespace {

std::vector<Family>& Registry() {
  static std::vector<Family> families;
  return families;
}

// One unit of ThinkNs work: a dependent multiply-add chain the compiler cannot
// fold or vectorize (the asm barrier makes each step observable).
inline uint64_t ThinkStep(uint64_t x) {
  x = x * 6364136223846793005ull + 1442695040888963407ull;
  asm volatile("" : "+r"(x));
  return x;
}

// Steps per ns, calibrated once per process over ~5 ms with the clock (min of 5
// trials, so a preempted trial does not inflate the rate).
double StepsPerNs() {
  // One value for both processes of a build duet
  // (harness/measure/shared_calibration.h).
  static const double rate = SharedCalibration("think_steps_per_ns", [] {
    double best = 0;
    for (int trial = 0; trial < 5; ++trial) {
      const uint64_t steps = 1 << 18;
      uint64_t x = trial;
      const uint64_t t0 = NowNs();
      for (uint64_t i = 0; i < steps; ++i) x = ThinkStep(x);
      const uint64_t t1 = NowNs();
      asm volatile("" : : "r"(x));
      best = std::max(
          best, static_cast<double>(steps) / static_cast<double>(t1 - t0 + 1));
    }
    return best;
  });
  return rate;
}

}  // namespace

bool RegisterFamily(Family family) {
  auto& reg = Registry();
  reg.push_back(std::move(family));
  std::sort(reg.begin(), reg.end(),
            [](const Family& a, const Family& b) { return a.name < b.name; });
  return true;
}

const std::vector<Family>& Families() { return Registry(); }

std::string RowKey(const std::string& family, const Params& params,
                   int threads) {
  std::string key = family;
  for (const auto& [k, v] : params) key += "/" + k + ":" + v;
  key += "/threads:" + std::to_string(threads);
  return key;
}

std::string ParamOf(const Params& p, const std::string& k,
                    const std::string& absent) {
  for (const auto& [pk, pv] : p)
    if (pk == k) return pv;
  return absent;
}

void ThinkNs(uint64_t ns) {
  if (ns == 0) return;
  const uint64_t steps =
      static_cast<uint64_t>(static_cast<double>(ns) * StepsPerNs());
  uint64_t x = ns;
  for (uint64_t i = 0; i < steps; ++i) x = ThinkStep(x);
  asm volatile("" : : "r"(x));
}

}  // namespace lockline
