#include "harness/measure/duet.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <stdexcept>
#include <utility>

#include "harness/machine/cpu.h"

namespace lockline {

PairPrior PriorPairSpread(int threads, bool work_between_holds) {
  if (threads <= 1) return {0.03, 0.02, 1};
  // Two threads on the development VM, 2026-12-07 (docs/measurement.md): with
  // calibrated work between holds within 0.011-0.023, between 0.002-0.018;
  // saturated within 0.026-0.17, between 0.03-0.18.
  return work_between_holds ? PairPrior{0.02, 0.01, 0.6}
                            : PairPrior{0.05, 0.03, 0.6};
}

double PairedHalfWidth(int units, int pairs, const PairPrior& prior) {
  if (units < 2 || pairs < 1) return HUGE_VAL;
  // Student's t at 98.5 % by its Cornish-Fisher expansion in 1/nu (Abramowitz
  // and Stegun 26.7.5; within 1 % of the exact quantile from nu = 2).
  constexpr double z = 2.170090, z2 = z * z;
  const double nu = units - 1;
  const double t =
      z + z * (z2 + 1) / 4 / nu +
      z * ((5 * z2 + 16) * z2 + 3) / 96 / (nu * nu) +
      z * (((3 * z2 + 19) * z2 + 17) * z2 - 15) / 384 / (nu * nu * nu) +
      z * ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) / 92160 /
          (nu * nu * nu * nu);
  const double var = prior.between * prior.between +
                     std::numbers::pi * prior.within * prior.within / pairs;
  return std::expm1(std::max(0.01, std::sqrt(2 * var / units) * t));
}

PairPlan PlanPairs(double precision, int threads, int min_repetitions,
                   bool work_between_holds) {
  if (!(precision > 0) || threads < 1 || min_repetitions < 1)
    throw std::invalid_argument(
        "PlanPairs: precision must be > 0, threads and repetitions >= 1");
  PairPlan p;
  p.prior = PriorPairSpread(threads, work_between_holds);
  const double w = p.prior.within, b = std::max(p.prior.between, 1e-3);
  p.pairs_per_repetition = std::clamp(
      static_cast<int>(std::lround(std::sqrt(
          std::numbers::pi * w * w * (kDuetOverheadPairs + 1) / (b * b)))),
      kDuetMinPairs, kDuetMaxPairs);
  for (p.repetitions = min_repetitions;; ++p.repetitions) {
    const int units =
        static_cast<int>(p.prior.regime_share * p.repetitions + 1e-9);
    p.expected_half_width =
        PairedHalfWidth(units, p.pairs_per_repetition, p.prior);
    if (p.expected_half_width <= precision ||
        p.repetitions >= kDuetMaxRepetitionFactor * min_repetitions)
      return p;
  }
}

std::vector<DuetSide> DuetSchedule(int warmup_pairs, int pairs, uint64_t seed) {
  std::vector<DuetSide> out;
  out.reserve(2 * static_cast<size_t>(std::max(0, warmup_pairs + pairs)));
  for (int i = 0; i < warmup_pairs; ++i) {
    out.push_back(DuetSide::kWarmupA);
    out.push_back(DuetSide::kWarmupB);
  }
  std::mt19937_64 rng(seed);
  for (int i = 0; i < pairs; ++i) {
    const bool b_first = (rng() >> 63) != 0;
    out.push_back(b_first ? DuetSide::kB : DuetSide::kA);
    out.push_back(b_first ? DuetSide::kA : DuetSide::kB);
  }
  return out;
}

std::vector<DuetPair> DuetPairs(const std::vector<DuetSide>& schedule,
                                const std::vector<uint64_t>& ops,
                                const std::vector<double>& seconds) {
  std::vector<DuetPair> out;
  const size_t n = std::min({schedule.size(), ops.size(), seconds.size()});
  const auto rate = [&](size_t i) {
    return seconds[i] > 0 ? static_cast<double>(ops[i]) / seconds[i] : 0.0;
  };
  for (size_t i = 0; i + 1 < n; i += 2) {
    const DuetSide first = schedule[i], second = schedule[i + 1];
    if (first == DuetSide::kA && second == DuetSide::kB)
      out.push_back({rate(i), rate(i + 1), false});
    else if (first == DuetSide::kB && second == DuetSide::kA)
      out.push_back({rate(i + 1), rate(i), true});
  }
  return out;
}

DuetWorkload::DuetWorkload(std::unique_ptr<Workload> a,
                           std::unique_ptr<Workload> b,
                           std::vector<DuetSide> schedule, std::string a_key,
                           std::string b_key)
    : a_(std::move(a)),
      b_(std::move(b)),
      schedule_(std::move(schedule)),
      a_key_(std::move(a_key)),
      b_key_(std::move(b_key)) {
  if (a_->fixed_work() != b_->fixed_work())
    throw std::invalid_argument(
        "duet: " + a_key_ + " and " + b_key_ +
        " cannot be paired: one is fixed work, the other a timed window");
}

void DuetWorkload::Prepare(int threads) {
  a_->Prepare(threads);
  b_->Prepare(threads);
  logs_ = PaddedSlots<ThreadLog>(static_cast<size_t>(threads));
  for (size_t i = 0; i < logs_.size(); ++i)
    logs_[i].windows.assign(schedule_.size(), {});
}

void DuetWorkload::SetupThread(const ThreadCtx& ctx) {
  a_->SetupThread(ctx);
  b_->SetupThread(ctx);
}

uint64_t DuetWorkload::RunWindow(const ThreadCtx& ctx,
                                 const std::atomic<bool>& stop) {
  ThreadLog& log = logs_[static_cast<size_t>(ctx.index)];
  const size_t w = static_cast<size_t>(log.next++);
  // Windows past the schedule (extra iterations): alternate, unrecorded.
  const DuetSide side = w < schedule_.size()
                            ? schedule_[w]
                            : (w % 2 ? DuetSide::kB : DuetSide::kA);
  // The clock is read outside both workloads' operations, never in a hold.
  const uint64_t t0 = NowNs();
  const uint64_t ops = Side(side).RunWindow(ctx, stop);
  const uint64_t t1 = NowNs();
  if (w < schedule_.size()) log.windows[w] = {ops, t0, t1};
  return ops;
}

void DuetWorkload::TeardownThread(const ThreadCtx& ctx) {
  a_->TeardownThread(ctx);
  b_->TeardownThread(ctx);
}

void DuetWorkload::Report(PointReport& out, double /*window_seconds*/,
                          uint64_t /*ops*/) {
  // Per window: all threads' operations over its wall time (first start to
  // last end), as the harness measures a window.
  const size_t n = schedule_.size();
  std::vector<uint64_t> ops(n, 0);
  std::vector<double> seconds(n, 0);
  size_t ran = 0;
  for (size_t w = 0; w < n; ++w) {
    uint64_t first = UINT64_MAX, last = 0;
    for (size_t i = 0; i < logs_.size(); ++i) {
      const ThreadLog::Window& win = logs_[i].windows[w];
      ops[w] += win.ops;
      if (win.end_ns == 0) continue;
      first = std::min(first, win.start_ns);
      last = std::max(last, win.end_ns);
    }
    seconds[w] = SecondsBetween(first, last);
    if (seconds[w] > 0) ran = w + 1;
  }
  std::vector<DuetSide> schedule(schedule_.begin(), schedule_.begin() + ran);
  const std::vector<DuetPair> pairs = DuetPairs(schedule, ops, seconds);
  // Per side (kA / kB): all windows for its report, measured for throughput.
  double sec[2] = {0, 0}, meas_sec[2] = {0, 0};
  uint64_t side_ops[2] = {0, 0}, meas_ops[2] = {0, 0};
  nlohmann::json sides = nlohmann::json::array();
  for (size_t w = 0; w < ran; ++w) {
    static const char* kNames[] = {"a", "b", "warmup_a", "warmup_b"};
    const int k = static_cast<int>(schedule_[w]), s = k & 1;
    sides.push_back(kNames[k]);
    sec[s] += seconds[w];
    side_ops[s] += ops[w];
    if (k < 2) {
      meas_sec[s] += seconds[w];
      meas_ops[s] += ops[w];
    }
  }
  PointReport ra, rb;
  a_->Report(ra, sec[0], side_ops[0]);
  b_->Report(rb, sec[1], side_ops[1]);
  const auto rate = [](uint64_t o, double s) {
    return s > 0 ? static_cast<double>(o) / s : 0.0;
  };
  out.Metric("a_ops_per_s", rate(meas_ops[0], meas_sec[0]));
  out.Metric("b_ops_per_s", rate(meas_ops[1], meas_sec[1]));
  std::vector<double> log_ratios;
  nlohmann::json pair_rows = nlohmann::json::array();
  for (const DuetPair& p : pairs) {
    pair_rows.push_back({{"a_ops_per_s", p.a_ops_per_s},
                         {"b_ops_per_s", p.b_ops_per_s},
                         {"order", p.b_first ? "ba" : "ab"}});
    if (p.a_ops_per_s > 0 && p.b_ops_per_s > 0)
      log_ratios.push_back(std::log(p.b_ops_per_s / p.a_ops_per_s));
  }
  // This repetition's median pair ratio (the verdict pools a regime's pairs).
  double median_ratio = 0;
  if (!log_ratios.empty()) {
    std::sort(log_ratios.begin(), log_ratios.end());
    const size_t m = log_ratios.size() / 2;
    const double med = log_ratios.size() % 2
                           ? log_ratios[m]
                           : 0.5 * (log_ratios[m - 1] + log_ratios[m]);
    median_ratio = std::exp(med);
  }
  out.Metric("pair_ratio", median_ratio);
  const auto side_json = [](const PointReport& r) {
    nlohmann::json metrics = nlohmann::json::object();
    for (const auto& [k, v] : r.metrics) metrics[k] = std::isfinite(v) ? v : 0;
    return nlohmann::json{{"metrics", metrics}, {"details", r.details}};
  };
  out.details["duet"] = {{"a_key", a_key_},    {"b_key", b_key_},
                         {"sides", sides},     {"pairs", pair_rows},
                         {"a", side_json(ra)}, {"b", side_json(rb)}};
  for (const auto& l : ra.layouts) out.layouts.push_back(l);
  for (const auto& l : rb.layouts)
    if (std::find(out.layouts.begin(), out.layouts.end(), l) ==
        out.layouts.end())
      out.layouts.push_back(l);
}

std::string DuetWorkload::Verify() {
  std::string a = a_->Verify(), b = b_->Verify();
  if (!a.empty()) a = "side a (" + a_key_ + "): " + a;
  if (!b.empty()) b = "side b (" + b_key_ + "): " + b;
  if (!a.empty() && !b.empty()) return a + "; " + b;
  return a.empty() ? b : a;
}

}  // namespace lockline
