// kernel_lru: the running kernel's LRU add / release under the lruvec
// lru_lock (questions 000 / 003 beside `pagevec`; docs/kernel-ab.md). One op
// = one 4 KiB page added to an LRU and released:
// - case:anon_fault: will-it-scale's page_fault1 (128 MiB fault-in + munmap;
//   folio_add_lru -> folio_batch_move_lru under folio_lruvec_lock_irqsave,
//   release_pages on munmap, mm/swap.c); zone->lock is taken too.
// - case:file_truncate / file_punch: fallocate1-like: pwrite into a memfd,
//   then ftruncate or PUNCH_HOLE (shmem_undo_range -> folio_batch_release);
//   file:private a memfd per task, file:shared disjoint ranges of one.
// Not modelled: reclaim; memcg is the run's cgroup.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "bench/kernel_tasks.h"
#include "harness/family.h"

namespace lockline::kernel_lru {

using kernel_tasks::kPage;
using kernel_tasks::Tasks;
using kernel_tasks::TaskWindow;

enum class Case { kAnonFault, kFileTruncate, kFilePunch };
inline const char* CaseName(Case c) {
  static const char* const kNames[] = {"anon_fault", "file_truncate",
                                       "file_punch"};
  return kNames[static_cast<int>(c)];
}

/// Pages per batch: page_fault1's MEMSIZE (128 MiB), the file cases' 1 MiB.
inline constexpr std::size_t kAnonPages = 32768;
inline constexpr std::size_t kDefaultPages = 256;
inline std::size_t DefaultPages(Case c) {
  return c == Case::kAnonFault ? kAnonPages : kDefaultPages;
}

struct Config {
  Case kind = Case::kAnonFault;
  bool shared_file = false;
  std::size_t pages = kDefaultPages;
  Tasks tasks = Tasks::kThreads;
};

class LruWorkload : public kernel_tasks::KernelFamilyWorkload {
 public:
  LruWorkload(Config cfg, int threads)
      : KernelFamilyWorkload(cfg.tasks, threads), cfg_(cfg) {}
  ~LruWorkload() override {
    for (int fd : fds_)
      if (fd >= 0) close(fd);
    if (buf_) munmap(buf_, cfg_.pages * kPage);
  }

  void PrepareTasks(int threads) override {
    if (cfg_.kind == Case::kAnonFault) return;
    // One source buffer for every task's pwrite (read-only).
    buf_ = static_cast<char*>(MapAnon(cfg_.pages * kPage));
    if (buf_ == nullptr) {
      setup_error_ = "mmap of the write buffer failed";
      return;
    }
    std::memset(buf_, 0x5a, cfg_.pages * kPage);
    const int files = cfg_.shared_file ? 1 : threads;
    for (int i = 0; i < files; ++i) {
      const int fd = memfd_create("lockline-kernel_lru", MFD_CLOEXEC);
      if (fd < 0) {
        setup_error_ =
            std::string("memfd_create failed: ") + std::strerror(errno);
        return;
      }
      fds_.push_back(fd);
    }
  }

  TaskWindow RunOps(int index, const std::atomic<bool>& stop) override {
    TaskWindow r;
    if (cfg_.kind == Case::kAnonFault) {
      do {
        const uint64_t n = kernel_tasks::AnonFaultBatch(
            cfg_.pages, stop, r.error, sizeof r.error);
        if (n == 0) break;
        r.ops += n;
        r.pages += n;
      } while (!stop.load(std::memory_order_relaxed));
      return r;
    }
    const int fd = fds_[cfg_.shared_file ? 0 : index];
    const off_t base =
        cfg_.shared_file
            ? static_cast<off_t>(index) * static_cast<off_t>(cfg_.pages * kPage)
            : 0;
    const std::size_t chunk = 16;  // pages per pwrite; stop checked between
    do {
      std::size_t done = 0;
      while (done < cfg_.pages) {
        const std::size_t n = std::min(chunk, cfg_.pages - done);
        const ssize_t w = pwrite(fd, buf_ + done * kPage, n * kPage,
                                 base + static_cast<off_t>(done * kPage));
        if (w != static_cast<ssize_t>(n * kPage)) {
          std::snprintf(r.error, sizeof r.error,
                        "pwrite of %zu bytes returned %zd: %s", n * kPage, w,
                        std::strerror(errno));
          break;
        }
        done += n;
        if (stop.load(std::memory_order_relaxed)) break;
      }
      const int rc =
          cfg_.kind == Case::kFileTruncate
              ? ftruncate(fd, 0)
              : fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, base,
                          static_cast<off_t>(cfg_.pages * kPage));
      if (rc != 0 && r.error[0] == 0)
        std::snprintf(r.error, sizeof r.error, "%s failed: %s", ReleaseCall(),
                      std::strerror(errno));
      r.ops += done;
      r.pages += done;
      r.bytes_sent += done * kPage;  // bytes written
      if (r.error[0] != 0) break;
    } while (!stop.load(std::memory_order_relaxed));
    return r;
  }

  void ReportFamily(PointReport& out, const TaskWindow& total,
                    double window_seconds) override {
    ReportPagesPerSecond(out, total, window_seconds);
    auto& d = out.details;
    d["case"] = CaseName(cfg_.kind);
    d["file"] =
        cfg_.kind == Case::kAnonFault
            ? "none"
            : (cfg_.shared_file ? "shared memfd" : "one memfd per task");
    d["pages_per_batch"] = cfg_.pages;
    d["op"] = cfg_.kind == Case::kAnonFault
                  ? "one 4 KiB page faulted in and unmapped (page_fault1)"
                  : "one 4 KiB page written to tmpfs and released by " +
                        std::string(ReleaseCall());
    d["left_out"] = "reclaim (no memory pressure); memcg as the run's cgroup";
    if (cfg_.kind == Case::kAnonFault)
      d["note"] =
          "page_fault1's loop and size (128 MiB per batch): the time counts "
          "the munmap of each batch, as page_fault1's does";
  }

  /// anon_fault: minor faults == pages (CheckFaultsPerPage); files: bytes
  /// written == pages * 4096.
  std::string VerifyTask(int index, const TaskWindow& task) override {
    if (cfg_.kind == Case::kAnonFault) return CheckFaultsPerPage(index, task);
    if (task.bytes_sent != task.pages * kPage)
      return "task " + std::to_string(index) + ": wrote " +
             std::to_string(task.bytes_sent) + " bytes for " +
             std::to_string(task.pages) + " pages";
    return "";
  }

  /// File cases: every memfd holds 0 blocks afterwards.
  std::string VerifyPoint() override {
    for (int fd : fds_) {
      struct stat st {};
      if (fstat(fd, &st) != 0) return "fstat of a memfd failed";
      if (st.st_blocks != 0)
        return "memfd still holds " + std::to_string(st.st_blocks) +
               " blocks after truncate / punch";
    }
    return "";
  }

 private:
  // The file cases' release call, as rows and errors name it.
  const char* ReleaseCall() const {
    return cfg_.kind == Case::kFileTruncate ? "ftruncate"
                                            : "fallocate(PUNCH_HOLE)";
  }

  Config cfg_;
  std::vector<int> fds_;
  char* buf_ = nullptr;
};

Variant MakeVariant(Case kind, bool shared_file, Tasks tasks, Suite suite,
                    std::vector<int> threads) {
  return kernel_tasks::KernelVariant(
      {{"case", CaseName(kind)},
       {"file", kind == Case::kAnonFault
                    ? "none"
                    : (shared_file ? "shared" : "private")},
       {"pages", std::to_string(DefaultPages(kind))},
       {"tasks", kernel_tasks::TasksName(tasks)}},
      suite, std::move(threads),
      std::string(kind == Case::kAnonFault
                      ? "page_fault1: fault in and munmap 128 MiB of "
                        "private anon memory"
                      : "fallocate1-like: write 1 MiB to a memfd (tmpfs), "
                        "then " +
                            std::string(kind == Case::kFileTruncate
                                            ? "truncate it"
                                            : "punch a hole over it")) +
          (kind == Case::kAnonFault
               ? ""
               : (shared_file ? "; one memfd shared by tasks"
                              : "; one memfd per task")) +
          "; tasks as " + kernel_tasks::TasksName(tasks) +
          "; kernel lock contention counted and attributed",
      [=](int n) {
        return std::make_unique<LruWorkload>(
            Config{kind, shared_file, DefaultPages(kind), tasks}, n);
      });
}

/// Default: page_fault1 as threads at 1 and all PUs; full: every case.
std::vector<Variant> PlannedVariants(const std::vector<PuInfo>& order) {
  std::vector<Variant> v;
  v.push_back(MakeVariant(Case::kAnonFault, false, Tasks::kThreads,
                          Suite::kDefault, kernel_tasks::OneAndAll(order)));
  for (Tasks t : {Tasks::kThreads, Tasks::kProcesses}) {
    if (t == Tasks::kProcesses)
      v.push_back(MakeVariant(Case::kAnonFault, false, t, Suite::kFull, {}));
    v.push_back(MakeVariant(Case::kFileTruncate, false, t, Suite::kFull, {}));
    v.push_back(MakeVariant(Case::kFilePunch, false, t, Suite::kFull, {}));
    v.push_back(MakeVariant(Case::kFilePunch, true, t, Suite::kFull, {}));
  }
  return v;
}

LOCKLINE_REGISTER_FAMILY(lockline::Family{
    "kernel_lru",
    "The running kernel's LRU add/release batching under the lruvec lru_lock: "
    "page_fault1 and fallocate1-like tmpfs loops, tasks as threads or "
    "processes, with lock:contention_begin counts attributed by callchain",
    {},
    PlannedVariants});

}  // namespace lockline::kernel_lru
