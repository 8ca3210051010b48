#include "harness/locks/lock_stat.h"

#include <algorithm>

namespace lockline {
namespace {

double Ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

/// Upper edge (ns) of bucket b: bucket 0 holds only 0, bucket b < 2^b.
uint64_t BucketUpperNs(int b) { return b == 0 ? 0 : (uint64_t{1} << b) - 1; }

/// Upper edge of the bucket holding quantile q, capped at `max_ns`.
uint64_t Quantile(const uint64_t (&hist)[kWaitBuckets], uint64_t total,
                  double q, uint64_t max_ns) {
  if (total == 0) return 0;
  const double rank = q * static_cast<double>(total);
  uint64_t seen = 0;
  for (int b = 0; b < kWaitBuckets; ++b) {
    seen += hist[b];
    if (static_cast<double>(seen) >= rank && hist[b] > 0)
      return std::min(BucketUpperNs(b), max_ns);
  }
  return max_ns;
}

}  // namespace

nlohmann::json SummarizeLockStats(
    const std::vector<const LockStatThread*>& threads, double thread_seconds,
    uint64_t ops) {
  LockStatThread sum;
  nlohmann::json per_thread = nlohmann::json::array();
  double acq_sum = 0, acq_sq_sum = 0;
  int n = 0;
  for (const LockStatThread* t : threads) {
    if (t == nullptr) continue;
    ++n;
    sum.acquisitions += t->acquisitions;
    sum.contended += t->contended;
    sum.wait_ns += t->wait_ns;
    sum.max_wait_ns = std::max(sum.max_wait_ns, t->max_wait_ns);
    sum.hold_ns += t->hold_ns;
    sum.hold_samples += t->hold_samples;
    sum.handoffs += t->handoffs;
    for (int b = 0; b < kWaitBuckets; ++b) sum.wait_hist[b] += t->wait_hist[b];
    const double a = static_cast<double>(t->acquisitions);
    acq_sum += a;
    acq_sq_sum += a * a;
    per_thread.push_back(
        {{"acquisitions", t->acquisitions},
         {"contended", t->contended},
         {"wait_ns", t->wait_ns},
         {"max_wait_ns", t->max_wait_ns},
         {"hold_ns", Ratio(static_cast<double>(t->hold_ns),
                           static_cast<double>(t->hold_samples))},
         {"handoffs", t->handoffs}});
  }
  nlohmann::json hist = nlohmann::json::array();
  for (int b = 0; b < kWaitBuckets; ++b) {
    if (sum.wait_hist[b] > 0)
      hist.push_back(
          {{"le_ns", BucketUpperNs(b)}, {"count", sum.wait_hist[b]}});
  }
  const auto acq = static_cast<double>(sum.acquisitions);
  nlohmann::json j;
  j["acquisitions"] = sum.acquisitions;
  j["contended"] = sum.contended;
  j["handoffs"] = sum.handoffs;
  j["wait_ns"] = sum.wait_ns;
  j["hold_samples"] = sum.hold_samples;
  j["contended_share"] = Ratio(static_cast<double>(sum.contended), acq);
  j["handoff_share"] = Ratio(static_cast<double>(sum.handoffs), acq);
  j["wait_share"] =
      Ratio(static_cast<double>(sum.wait_ns), thread_seconds * 1e9);
  j["wait_mean_ns"] = Ratio(static_cast<double>(sum.wait_ns),
                            static_cast<double>(sum.contended));
  j["wait_p50_ns"] =
      Quantile(sum.wait_hist, sum.contended, 0.50, sum.max_wait_ns);
  j["wait_p99_ns"] =
      Quantile(sum.wait_hist, sum.contended, 0.99, sum.max_wait_ns);
  j["wait_max_ns"] = sum.max_wait_ns;
  j["hold_ns"] = Ratio(static_cast<double>(sum.hold_ns),
                       static_cast<double>(sum.hold_samples));
  j["acquisitions_per_op"] = Ratio(acq, static_cast<double>(ops));
  j["jain_fairness"] = Ratio(acq_sum * acq_sum, n * acq_sq_sum);
  j["wait_histogram"] = std::move(hist);
  j["per_thread"] = std::move(per_thread);
  return j;
}

void AddLockStatMetrics(PointReport& out, const nlohmann::json& summary) {
  for (const char* key : {"wait_share", "handoff_share", "contended_share",
                          "wait_p50_ns", "wait_p99_ns", "wait_max_ns",
                          "hold_ns", "acquisitions_per_op", "jain_fairness"}) {
    out.Metric(key, summary.value(key, 0.0));
  }
  out.details["lock_stat"] = summary;
}

}  // namespace lockline
