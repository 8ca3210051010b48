// kernel_zone: order-0 page allocation and free through the running kernel's
// pcp lists and zone->lock (the real-kernel side of question 001, beside the
// `zone_lock` model). One op = one 4 KiB page faulted in (allocated: Linux
// 6.x mm/page_alloc.c rmqueue() -> rmqueue_pcplist() -> __rmqueue_pcplist(),
// which refills an empty pcp list with rmqueue_bulk(): `batch` pages under
// spin_lock_irqsave(&zone->lock)) and unmapped again (freed:
// free_unref_folios() -> free_unref_page_commit(), which sends pages above
// pcp->high back with free_pcppages_bulk() under zone->lock). Each task maps
// batches of 2 x the zone's pcp high (read from /proc/zoneinfo when the point
// is prepared; on 6.7+ 2 x high_max, the bound pcp high auto-tunes towards
// while a task allocates and frees in bulk: decay_pcp_high() /
// increase_pcp_high(), mm/page_alloc.c), so every batch drains its CPU's pcp
// list on the way in and overflows it on the way out. How many pages one
// zone->lock hold moves is not fixed: up to 6.6 a refill takes `batch` pages
// and a drain frees `batch` (more at high); from 6.7 a refill takes `batch`
// scaled by pcp->alloc_factor (nr_pcp_alloc()) and a drain frees a count that
// grows with pcp->free_count (nr_pcp_free()). So the rows count the holds: the
// evidence windows sample kmem:mm_page_alloc_zone_locked and
// kmem:mm_page_pcpu_drain (harness/measure/kernel_probe.h ZoneLockCounter) and
// report zone_lock_acquisitions_per_op; a hold starts where the task's count
// of the events between two holds (mm_page_alloc for refills,
// mm_page_free_batched / mm_page_free for drains) moved, the kernel's own call
// boundary; no metric ("not observed") where no event was seen. Every window,
// timed or evidence, is fixed work: one whole alloc/free cycle of the batch
// per task (kCyclesPerWindow), so a row times the cycle its key names, not its
// pcp-only start. Tasks as threads also share one mm (mmap_lock, page-table
// locks); as processes only the allocator.
//
// high_fraction: vm.percpu_pagelist_high_fraction (Linux 5.14+), "default"
// leaves it alone (0: the kernel sizes and, 6.7+, auto-tunes pcp high between
// high_min and high_max); a number sets it for the point (root only; the old
// value is registered with harness/machine/restore.h before the write and
// restored when the point ends, and by the signal handler on SIGINT / SIGTERM).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/kernel_tasks.h"
#include "harness/family.h"
#include "harness/machine/memory.h"
#include "harness/machine/restore.h"
#include "harness/measure/kernel_probe.h"

namespace lockline::kernel_zone {

using kernel_tasks::kPage;
using kernel_tasks::Tasks;
using kernel_tasks::TaskWindow;

inline constexpr const char* kFractionPath =
    "/proc/sys/vm/percpu_pagelist_high_fraction";
/// Batch when /proc/zoneinfo is unreadable: 2 x a typical high of 4 MiB.
inline constexpr std::size_t kFallbackBatchPages = 2048;
/// Whole alloc/free cycles of the batch per task and window (timed and
/// evidence windows): every window holds whole cycles.
inline constexpr int kCyclesPerWindow = 1;
/// Evidence windows per repetition at most (the harness's default is 2): each
/// is a whole cycle of a batch of up to ~1.8 GiB with ~100-1000 zone->lock
/// acquisitions, so one is enough. It runs after the timed window
/// (evidence_after_timed), so it starts with the pcp lists a cycle leaves, as
/// in page_fault1's loop, not lists decay_pcp_high() emptied during the
/// point's preparation (docs/validation.md).
inline constexpr int kMaxEvidenceWindows = 1;

/// Writes `value` to a procfs file; "" or the error.
inline std::string WriteProc(const std::string& path,
                             const std::string& value) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return path + ": " + std::strerror(errno);
  const ssize_t n = write(fd, value.data(), value.size());
  const int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(value.size()))
    return "writing " + value + " to " + path + ": " + std::strerror(err);
  return "";
}

/// The pcp high a batch must overflow: the largest current high over CPUs,
/// or on 6.7+ (high_max in /proc/zoneinfo) high_max when larger, since high
/// auto-tunes up to it while the tasks run.
inline uint64_t SizingHigh(const kernel::ZonePcp& z) {
  return std::max<uint64_t>(
      z.high_max_cpu, z.high_max > 0 ? static_cast<uint64_t>(z.high_max) : 0);
}

/// Pages per batch: 2 x SizingHigh of the main zone (the one anonymous faults
/// are served from), at least 2 x batch. No fixed upper bound (high can be
/// hundreds of MiB per CPU, and a smaller batch would not overflow the pcp
/// list); ZoneWorkload caps all tasks' batches at a quarter of MemAvailable.
inline std::size_t BatchPages(const std::vector<kernel::ZonePcp>& zones) {
  const kernel::ZonePcp* z = kernel::MainZone(zones);
  if (!z) return kFallbackBatchPages;
  const uint64_t high = SizingHigh(*z);
  if (high == 0) return kFallbackBatchPages;
  return std::max<std::size_t>(2 * high, 2 * z->batch);
}

struct Config {
  std::string high_fraction = "default";
  Tasks tasks = Tasks::kThreads;
};

/// The point's workload: see the file comment.
class ZoneWorkload : public kernel_tasks::KernelFamilyWorkload {
 public:
  ZoneWorkload(Config cfg, int threads)
      : KernelFamilyWorkload(cfg.tasks, threads), cfg_(std::move(cfg)) {
    CountZoneLock();
    LiveLayoutSeed(&phase_seed_);
  }
  ~ZoneWorkload() override {
    // Normal end of the point: put the sysctl back (the signal handler does
    // the same on SIGINT / SIGTERM).
    RestoreAll();
    for (auto& p : phase_)
      kernel_tasks::ReleasePhasedBatch(p.batch, batch_pages_);
  }

  void PrepareTasks(int threads) override {
    // Sized before any child is forked: a child's RunOps writes its own copy
    // of its element and allocates nothing.
    phase_.assign(static_cast<std::size_t>(std::max(threads, 1)), {});
    // Every point, default too, holds the settings lock until its end
    // (RestoreAll in the destructor), so no other lockline run changes the
    // value under its windows. (Without root, a default point cannot.)
    if (geteuid() == 0 || cfg_.high_fraction != "default")
      AcquireSettingsLock(kFractionPath);
    if (cfg_.high_fraction != "default") {
      old_fraction_ = ReadSmallFile(kFractionPath);
      if (old_fraction_.empty()) {
        setup_error_ = std::string(kFractionPath) +
                       " is missing or unreadable (Linux 5.14+ has it)";
        return;
      }
      if (geteuid() != 0) {
        setup_error_ = "high_fraction:" + cfg_.high_fraction +
                       " needs root to write " + kFractionPath +
                       " (run as root, or use high_fraction:default)";
        return;
      }
      RegisterRestore(kFractionPath, old_fraction_);
      const std::string e = WriteProc(kFractionPath, cfg_.high_fraction);
      if (!e.empty()) {
        setup_error_ = e;
        return;
      }
      set_here_ = true;
    }
    // The value the windows are meant to run at, to check after them that no
    // other process (another lockline run, a tuning daemon) moved it.
    fraction_in_windows_ = ReadSmallFile(kFractionPath);
    zones_ = kernel::ReadZonePcp();
    batch_pages_ = BatchPages(zones_);
    // All tasks' batches together stay under a quarter of MemAvailable (a
    // many-PU machine at 256 MiB per task would otherwise swap or OOM).
    const uint64_t avail = child_task::MemAvailableBytes() / kPage;
    const uint64_t cap =
        avail / 4 / static_cast<uint64_t>(std::max(threads_, 1));
    if (avail > 0 && batch_pages_ > cap) {
      batch_pages_ = std::max<std::size_t>(cap, 64);
      size_note_ =
          "batch capped at a quarter of MemAvailable over the tasks: " +
          std::to_string(batch_pages_) + " pages";
      const kernel::ZonePcp* z = kernel::MainZone(zones_);
      if (z && batch_pages_ <= SizingHigh(*z))
        size_note_ += "; that is not above pcp high (" +
                      std::to_string(SizingHigh(*z)) +
                      " pages), so frees do not overflow the pcp list every "
                      "batch and zone->lock is taken less often than the "
                      "family intends";
    }
    DrawPhases();
  }

  // One whole alloc/free cycle of the batch per window (fixed_work(); `stop`
  // is not read inside a cycle), task i PhaseOffset(i) pages out of phase
  // (kernel_tasks::PhasedAnonFaultCycle), so the tasks' munmaps fall where the
  // repetition's draw puts them.
  TaskWindow RunOps(int index, const std::atomic<bool>& /*stop*/) override {
    TaskWindow r;
    if (static_cast<std::size_t>(index) >= phase_.size()) return r;
    for (int c = 0; c < kCyclesPerWindow; ++c) {
      const uint64_t n = kernel_tasks::PhasedAnonFaultCycle(
          phase_[index].batch, batch_pages_, PhaseOffset(index), r.error,
          sizeof r.error);
      if (n == 0) break;
      r.ops += n;
      r.pages += n;
    }
    return r;
  }

  /// Pages task `index` runs into its cycle (DrawPhases).
  std::size_t PhaseOffset(int index) const {
    return static_cast<std::size_t>(index) < phase_.size()
               ? phase_[index].offset
               : 0;
  }

  /// Each task's phase (64-page steps; 0 for one task): will-it-scale starts
  /// page_fault1's tasks in phase (main.c's pipe) and lets them drift, so it
  /// is drawn per repetition from the layout seed; without one, i/n.
  void DrawPhases() {
    std::mt19937_64 draw(phase_seed_);
    for (std::size_t i = 0; i < phase_.size() && threads_ > 1; ++i) {
      const std::size_t off = phase_seed_ != 0
                                  ? draw() % batch_pages_
                                  : batch_pages_ * i / phase_.size();
      phase_[i].offset = off / 64 * 64;
    }
  }

  bool primes_tasks() const override { return threads_ > 1; }
  bool evidence_after_timed() const override { return true; }
  void PrimeTask(int index, char* err, std::size_t errlen) override {
    if (static_cast<std::size_t>(index) < phase_.size())
      kernel_tasks::PrimePhasedBatch(phase_[index].batch, batch_pages_,
                                     PhaseOffset(index), err, errlen);
  }
  void ReleaseTask(int index) override {
    if (static_cast<std::size_t>(index) < phase_.size())
      kernel_tasks::ReleasePhasedBatch(phase_[index].batch, batch_pages_);
  }

  bool fixed_work() const override { return true; }
  uint64_t PagesPerWindow() const override {
    return batch_pages_ * kCyclesPerWindow;
  }

  /// Why the page-faults event is off in the timed windows
  /// (docs/validation.md).
  std::string page_fault_counters_left_out() const override {
    return "left out of kernel_zone's timed windows: every op is a page fault, "
           "counted by getrusage (minor_faults); the software event's "
           "per-fault hook would slow the cycle it counts";
  }

  /// A window's whole cycles at 50 us a page (many times a loaded machine's
  /// rate): a tasks:processes child slower than that counts as hung.
  uint64_t FixedWorkLimitNs() const override {
    return static_cast<uint64_t>(batch_pages_) * kCyclesPerWindow * 50'000;
  }

  void ReportFamily(PointReport& out, const TaskWindow& total,
                    double window_seconds) override {
    ReportPagesPerSecond(out, total, window_seconds);
    out.Metric("batch_pages", static_cast<double>(batch_pages_));
    auto& d = out.details;
    d["op"] = "one 4 KiB page faulted in and unmapped, in batches of " +
              std::to_string(batch_pages_) +
              " pages (2 x pcp high of the main zone; 2 x high_max on 6.7+)";
    d["window"] = "fixed work: " + std::to_string(kCyclesPerWindow) +
                  " whole alloc/free cycle(s) of the batch per task and "
                  "window, timed and evidence windows alike";
    d["cycles_per_window"] = kCyclesPerWindow;
    nlohmann::json offsets = nlohmann::json::array();
    for (int i = 0; i < threads_; ++i) offsets.push_back(PhaseOffset(i));
    d["task_phase_pages"] = offsets;
    d["task_phase_seed"] = phase_seed_;
    d["task_phase"] =
        "a window faults in the rest of the batch the task opened in its last "
        "window, unmaps it, maps the next and faults in its first "
        "task_phase_pages, drawn per repetition from task_phase_seed (0: none, "
        "task i at i/n): where will-it-scale's tasks have drifted to";
    d["evidence_windows_note"] =
        "at most " + std::to_string(kMaxEvidenceWindows) +
        " evidence window per repetition (each a whole cycle of the batch)";
    d["high_fraction"] = cfg_.high_fraction;
    // The value in force during the windows, read under the settings lock:
    // what a default row was measured at.
    d["high_fraction_in_windows"] = fraction_in_windows_;
    if (!size_note_.empty()) d["size_note"] = size_note_;
    if (set_here_) d["high_fraction_restored_to"] = old_fraction_;
    const std::string after = ReadSmallFile(kFractionPath);
    if (!fraction_in_windows_.empty() && after != fraction_in_windows_)
      d["high_fraction_moved"] =
          "vm.percpu_pagelist_high_fraction was " + fraction_in_windows_ +
          " when the windows started and " +
          (after.empty() ? std::string("unreadable") : after) +
          " after them: another process changed it, so this row was not "
          "measured at one setting";
    if (const kernel::ZonePcp* z = kernel::MainZone(zones_))
      d["main_zone"] = z->zone;
    d["pcp_at_prepare"] = kernel::ZonePcpJson(zones_);
    d["left_out"] =
        "the batch is sized from pcp high / high_max at prepare time; how "
        "many pages each zone->lock hold moves is measured in the evidence "
        "windows (details.kernel.zone_lock), not assumed to be `batch`";
  }

  /// Exact op accounting: minor faults (getrusage) == pages faulted in
  /// (+ kFaultSlackPerWindow per task window).
  std::string VerifyTask(int index, const TaskWindow& task) override {
    return CheckFaultsPerPage(index, task);
  }

  std::size_t batch_pages() const { return batch_pages_; }

 private:
  Config cfg_;
  std::vector<kernel::ZonePcp> zones_;
  std::size_t batch_pages_ = kFallbackBatchPages;
  std::string old_fraction_, size_note_;
  std::string fraction_in_windows_;  ///< read before the windows
  bool set_here_ = false;
  /// Each task's open batch, a cache line apiece (team threads write their
  /// own at window boundaries).
  struct alignas(64) TaskPhase {
    kernel_tasks::PhasedBatch batch;
    std::size_t offset = 0;  ///< PhaseOffset
  };
  std::vector<TaskPhase> phase_;
  uint64_t phase_seed_ = 0;  ///< the repetition's layout seed, or 0
};

Variant MakeVariant(const std::string& fraction, Tasks tasks, Suite suite,
                    std::vector<int> threads) {
  Variant v = kernel_tasks::KernelVariant(
      {{"batch", "2xhigh"},
       {"high_fraction", fraction},
       {"tasks", kernel_tasks::TasksName(tasks)}},
      suite, std::move(threads),
      "order-0 alloc/free through pcp and zone->lock: fault in and munmap "
      "batches of 2 x pcp high (high_max on 6.7+) of private anon memory, "
      "one whole batch cycle per task and window (the tasks' phases drawn "
      "per repetition), zone->lock holds counted per whole cycle; "
      "vm.percpu_pagelist_high_fraction " +
          (fraction == "default" ? std::string("untouched")
                                 : fraction + " (root; restored)") +
          "; tasks as " + kernel_tasks::TasksName(tasks),
      [=](int n) {
        return std::make_unique<ZoneWorkload>(Config{fraction, tasks}, n);
      },
      kMaxEvidenceWindows);
  // Fixed work, 1 timed window a repetition; the budget adds the timed and
  // evidence windows' batches as first-touched memory, priced from
  // /proc/zoneinfo now.
  v.fixed_work = true;
  v.windows = 1;
  v.cost_mib = static_cast<double>(BatchPages(kernel::ReadZonePcp())) * kPage /
               (1 << 20) * (1 + kMaxEvidenceWindows);
  return v;
}

/// Default: high_fraction untouched, threads, at 1 and all usable PUs. Full:
/// processes too, and vm.percpu_pagelist_high_fraction swept over 8 (the
/// kernel's minimum: the largest pcp high), 64 and 1024 (small pcp lists).
std::vector<Variant> PlannedVariants(const std::vector<PuInfo>& order) {
  std::vector<Variant> v;
  v.push_back(MakeVariant("default", Tasks::kThreads, Suite::kDefault,
                          kernel_tasks::OneAndAll(order)));
  v.push_back(MakeVariant("default", Tasks::kProcesses, Suite::kFull, {}));
  for (const char* f : {"8", "64", "1024"})
    for (Tasks t : {Tasks::kThreads, Tasks::kProcesses})
      v.push_back(MakeVariant(f, t, Suite::kFull, {}));
  return v;
}

LOCKLINE_REGISTER_FAMILY(lockline::Family{
    "kernel_zone",
    "The running kernel's order-0 allocation and free through pcp lists and "
    "zone->lock: anonymous fault + munmap in batches of 2 x pcp high, "
    "vm.percpu_pagelist_high_fraction swept (root), contention attributed",
    {},
    PlannedVariants});

}  // namespace lockline::kernel_zone
