// Paired ("duet") windows: one thread team on one placement alternates two
// variants A and B window by window, so each window pair samples the ratio B/A
// within milliseconds, and a change of coherence regime or clock (a cloud VM,
// a CI runner) hits both sides of a pair: after duet benchmarking (Bulej et
// al., ICPE 2020), inside one process, so both share threads, PUs and NUMA
// node. A repetition (DuetSchedule) runs discarded warm-up pairs, then pairs
// in a seeded random order; both workloads are set up before the first window
// and torn down after the last. The row records per window which side ran and
// per pair both sides' ops/s; plots/stats.py computes the paired effect
// (median log pair ratio, paired bootstrap interval).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/family.h"
#include "harness/machine/padded_slots.h"

namespace lockline {

/// Discarded warm-up window pairs before each repetition's measured pairs.
inline constexpr int kDuetWarmupPairs = 1;
/// Measured pairs per repetition: at least enough for a usable median; at
/// most 64 (64 pairs of 5 ms windows, ~0.7 s, are short against the seconds
/// between a VM's regime changes, so few repetitions are `mixed`).
inline constexpr int kDuetMinPairs = 12;
inline constexpr int kDuetMaxPairs = 64;

/// Prior spread of one window pair's log ratio ln(B/A), by thread count: the
/// scaled MAD of default-suite duet rows on a 2-vCPU KVM guest (5 ms windows)
/// is ~0.1 at 1 thread and up to 0.6 at 2; the plan uses 0.10 and 0.25
/// (--until-resolved continues a noisier machine's pairs).
double PriorPairSpread(int threads);

/// How many window pairs a paired point plans per repetition to reach
/// `precision` (half-width of the 95 % interval of the median log ratio,
/// fraction of the effect: 0.03 = +-3 %) over `repetitions` repetitions:
///   pairs needed  n = (1.96 x 1.2533 x spread / ln(1 + precision))^2 / 0.7
/// (1.2533: the median's standard error over the mean's for normal data;
/// 0.7: the share of pairs expected in the majority coherence regime), per
/// repetition ceil(n / repetitions) clamped to [kDuetMinPairs,
/// kDuetMaxPairs]. `expected_half_width` is the half-width those pairs give
/// at the prior spread (above `precision` when the cap binds).
/// Throws std::invalid_argument for precision <= 0, threads < 1 or
/// repetitions < 1.
struct PairPlan {
  int pairs_per_repetition = kDuetMinPairs;
  int pairs_needed = 0;            ///< n above, over all repetitions
  double spread = 0;               ///< PriorPairSpread(threads)
  double expected_half_width = 0;  ///< fraction
};
PairPlan PlanPairs(double precision, int threads, int repetitions);

/// Which variant a window runs: kA, kB, or a discarded warm-up window of one.
enum class DuetSide : uint8_t { kA = 0, kB = 1, kWarmupA = 2, kWarmupB = 3 };

/// The window order of one repetition: `warmup_pairs` (A, B) warm-up pairs,
/// then `pairs` pairs, each (A, B) or (B, A) with probability 1/2, seeded.
std::vector<DuetSide> DuetSchedule(int warmup_pairs, int pairs, uint64_t seed);

/// One measured window pair: each side's ops per second of wall time.
struct DuetPair {
  double a_ops_per_s = 0;
  double b_ops_per_s = 0;
  bool b_first = false;
};

/// Pairs of a schedule from per-window (operations, seconds), warm-ups
/// skipped; an empty window gives a zero side (plots/stats.py drops it).
std::vector<DuetPair> DuetPairs(const std::vector<DuetSide>& schedule,
                                const std::vector<uint64_t>& ops,
                                const std::vector<double>& seconds);

/// A Workload that runs `a` and `b` alternately, one window each, in the
/// order of `schedule`. Report() adds both sides' throughput and the pairs
/// (details.duet, each side's own report under .a / .b); Verify() checks both.
class DuetWorkload : public Workload {
 public:
  /// `a_key` / `b_key`: the variants' row keys without threads. Throws
  /// std::invalid_argument when the sides disagree on fixed_work().
  DuetWorkload(std::unique_ptr<Workload> a, std::unique_ptr<Workload> b,
               std::vector<DuetSide> schedule, std::string a_key,
               std::string b_key);

  void Prepare(int threads) override;
  void SetupThread(const ThreadCtx& ctx) override;
  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override;
  void TeardownThread(const ThreadCtx& ctx) override;
  bool fixed_work() const override { return a_->fixed_work(); }
  /// Both sides' rule, or none (a duet's two sides count alike).
  std::string page_fault_counters_left_out() const override {
    const std::string a = a_->page_fault_counters_left_out();
    return a == b_->page_fault_counters_left_out() ? a : "";
  }
  bool shares_lines() const override {
    return a_->shares_lines() || b_->shares_lines();
  }
  void Report(PointReport& out, double window_seconds, uint64_t ops) override;
  std::string Verify() override;

 private:
  /// Per thread, written only by it: its window counter and per window its
  /// operations, start and end (ns).
  struct ThreadLog {
    int next = 0;
    std::vector<uint64_t> ops, start_ns, end_ns;
  };
  Workload& Side(DuetSide s) {
    return (s == DuetSide::kA || s == DuetSide::kWarmupA) ? *a_ : *b_;
  }
  std::unique_ptr<Workload> a_, b_;
  std::vector<DuetSide> schedule_;
  std::string a_key_, b_key_;
  PaddedSlots<ThreadLog> logs_;
};

}  // namespace lockline
