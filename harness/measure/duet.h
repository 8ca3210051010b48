// Paired ("duet") windows: one thread team on one placement alternates
// variants A and B window by window, so each pair samples the ratio B/A within
// milliseconds and a change of coherence regime or clock hits both sides
// (duet benchmarking, Bulej et al., ICPE 2020, inside one process). The row
// records which side ran per window and both sides' ops/s per pair;
// plots/stats.py computes the paired effect.
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
/// Measured pairs per repetition: enough for a usable median; at most 64 (of
/// 5 ms windows, ~0.7 s: short against the seconds between a VM's regime
/// changes, so few repetitions are `mixed`).
inline constexpr int kDuetMinPairs = 12;
inline constexpr int kDuetMaxPairs = 64;
/// A paired point plans at most this many times the run's repetitions.
inline constexpr int kDuetMaxRepetitionFactor = 4;
/// A repetition's cost besides its windows (threads, probes, the file
/// rewrite: ~0.1 s) in window pairs of 5 ms (~16 ms with their edges).
inline constexpr double kDuetOverheadPairs = 6;

/// Prior spreads of ln(B/A) by thread count and load (docs/measurement.md):
/// `within` a repetition (scaled MAD of its pairs), `between` repetitions of
/// one regime (SD of their medians), and the share of a point's repetitions
/// expected in its majority coherence regime (1 at one thread: no regime).
/// `work_between_holds`: the threads do work outside the lock (work_ns:cal),
/// so they contend at the rate of the era; false (work_ns:0, saturated, or a
/// point without the parameter) takes the wider spreads of a saturated lock.
struct PairPrior {
  double within = 0, between = 0, regime_share = 1;
};
PairPrior PriorPairSpread(int threads, bool work_between_holds = false);

/// Half-width (fraction) of the verdict's interval on `units` repetitions of
/// one regime with `pairs` pairs each (plots/stats.py's bootstrap widened by
/// small_sample_expansion and for_rerun): sqrt(2) t(units-1) sqrt((between^2
/// + pi within^2 / pairs) / units), the median's variance counted twice by
/// the two-level bootstrap, t at 98.5 % (--until-resolved's first look at
/// 97 %), at least 1 % (the rerun floor); infinite under 2 units.
double PairedHalfWidth(int units, int pairs, const PairPrior& prior);

/// A paired point's plan for the verdict's interval (`precision`: the
/// half-width aimed at, 0.03 = +-3 %). Pairs per repetition (the interval's
/// unit): the cost-optimal two-stage allocation (Cochran, Sampling
/// Techniques, 1977, 10.6) sqrt(pi within^2 (c + 1) / between^2), c =
/// kDuetOverheadPairs, clamped to [kDuetMinPairs, kDuetMaxPairs];
/// repetitions: the fewest from `min_repetitions` to kDuetMaxRepetitionFactor
/// x it whose expected units (regime_share x repetitions) reach the
/// precision, else the most. `work_between_holds`: PriorPairSpread's. Throws
/// std::invalid_argument for precision <= 0, threads < 1 or min_repetitions
/// < 1.
struct PairPlan {
  int pairs_per_repetition = kDuetMinPairs;
  int repetitions = 0;
  PairPrior prior;
  double expected_half_width = 0;  ///< fraction, PairedHalfWidth at the plan
};
PairPlan PlanPairs(double precision, int threads, int min_repetitions,
                   bool work_between_holds = false);

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

/// A Workload running `a` and `b` one window each in `schedule`'s order;
/// Report() adds both sides' throughput and pairs (details.duet, .a / .b).
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
  /// Per thread (its own): window counter, per window ops, start, end (ns).
  struct ThreadLog {
    int next = 0;
    struct Window {
      uint64_t ops = 0, start_ns = 0, end_ns = 0;
    };
    std::vector<Window> windows;
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
