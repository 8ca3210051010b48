// Kernel lock evidence for the kernel_* families (see kernel_probe.h).
#include "harness/measure/kernel_probe.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <tuple>

#include "harness/machine/restore.h"
#include "harness/measure/counters.h"

namespace lockline::kernel {
namespace {

constexpr std::size_t kRingDataPages = 16;  // 64 KiB of samples per task
constexpr uint16_t kMaxStack = 32;

int ReadIdFile(const std::string& path) {
  const std::string s = ReadSmallFile(path);
  int id = -1;  // kept when `s` does not start with a number that fits
  std::from_chars(s.data(), s.data() + s.size(), id);
  return id;
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Why a kernel-side software or tracepoint event did not open (errno `err`).
std::string ExplainOpenError(int err) {
  return ExplainPerfOpenError(err, false, true, KernelHasHardwarePmu(),
                              PerfEventParanoid());
}

// PERF_EVENT_IOC_ENABLE / _DISABLE on every open descriptor of `fds`.
void IoctlAll(std::initializer_list<int> fds, unsigned long request) {
  for (int fd : fds)
    if (fd >= 0) ioctl(fd, request, 0);
}

// A disabled event of `type` and `config` (a tracepoint id).
perf_event_attr EventAttr(uint32_t type, uint64_t config) {
  perf_event_attr a{};
  a.size = sizeof(a);
  a.type = type;
  a.config = config;
  a.disabled = 1;
  a.exclude_hv = 1;
  return a;
}

// Looks for events/lock/contention_{begin,end}/id under `dir`.
TracepointInfo FindTracepointsIn(const std::string& dir) {
  TracepointInfo t;
  t.tracefs = dir;
  const std::string base = dir + "/events/lock/";
  if (!IsDir(base + "contention_begin")) {
    t.reason = "no lock:contention_begin under " + dir +
               "/events (kernel before 5.19, or tracepoints compiled out)";
    return t;
  }
  t.begin_id = ReadIdFile(base + "contention_begin/id");
  t.end_id = ReadIdFile(base + "contention_end/id");
  if (!t.available()) {
    t.begin_id = t.end_id = -1;
    t.reason = "cannot read " + base + "contention_begin/id (tracefs is " +
               "readable by root only)";
  }
  return t;
}

constexpr const char* kMmapPrefix = "mmap of the sample ring: ";

void CloseRing(SampleRing& r) {
  if (r.map) munmap(r.map, r.bytes);
  r.map = nullptr;
  CloseFd(r.fd);
}

// Opens `a` for `pid` with a ring of `pages` data pages (a power of two),
// halved down to 8 on EPERM (TaskClockSampler::Config); "" or why not.
std::string OpenRing(perf_event_attr& a, pid_t pid, std::size_t pages,
                     SampleRing* r) {
  a.wakeup_events = 1u << 30;  // nobody polls: no wakeups
  r->sample_type = a.sample_type;
  r->fd = PerfEventOpen(&a, pid, -1);
  if (r->fd < 0) return ExplainOpenError(errno);
  int err = 0;
  for (pages = std::max<std::size_t>(pages, 8); pages >= 8; pages /= 2) {
    r->bytes = (pages + 1) * static_cast<std::size_t>(getpagesize());
    r->map =
        mmap(nullptr, r->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
    if (r->map != MAP_FAILED) return "";
    r->map = nullptr;
    err = errno;
    if (err != EPERM) break;
  }
  CloseRing(*r);
  return kMmapPrefix + std::string(std::strerror(err));
}

// Reads every record in the ring and frees its space: each sample (IP, TIME,
// READ of a group without times or ids, CALLCHAIN as r.sample_type says, in
// perf_event_open(2)'s order) goes to `on_sample` with its kernel frames
// resolved; lost records add to *lost.
template <typename F>
void DrainRing(SampleRing& r, uint64_t* lost, F on_sample) {
  if (!r.map) return;
  auto* meta = static_cast<perf_event_mmap_page*>(r.map);
  const uint64_t page = static_cast<uint64_t>(getpagesize());
  const uint64_t size = meta->data_size ? meta->data_size : r.bytes - page;
  const uint64_t off = meta->data_offset ? meta->data_offset : page;
  const char* data = static_cast<const char*>(r.map) + off;
  const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = meta->data_tail;
  const KernelSymbols& syms = KernelSymbols::Get();
  std::vector<char> rec;
  RingSample s;
  while (tail < head) {
    perf_event_header h{};
    for (std::size_t i = 0; i < sizeof h; ++i)
      reinterpret_cast<char*>(&h)[i] = data[(tail + i) % size];
    if (h.size < sizeof h) break;
    rec.resize(h.size);
    for (std::size_t i = 0; i < h.size; ++i) rec[i] = data[(tail + i) % size];
    tail += h.size;
    if (h.type == PERF_RECORD_LOST && h.size >= sizeof h + 16) {
      uint64_t n = 0;
      std::memcpy(&n, rec.data() + sizeof h + 8, 8);
      *lost += n;
      continue;
    }
    if (h.type != PERF_RECORD_SAMPLE) continue;
    std::size_t at = sizeof h;
    auto next = [&](uint64_t* v) {
      if (at + 8 > h.size) return false;
      std::memcpy(v, rec.data() + at, 8);
      at += 8;
      return true;
    };
    s.in_kernel =
        (h.misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL;
    s.ip = s.time_ns = 0;
    s.frames.clear();
    s.innermost.clear();
    if ((r.sample_type & PERF_SAMPLE_IP) && !next(&s.ip)) continue;
    if ((r.sample_type & PERF_SAMPLE_TIME) && !next(&s.time_ns)) continue;
    uint64_t nr = 0;
    s.group_marks = 0;
    if ((r.sample_type & PERF_SAMPLE_READ) && next(&nr))
      for (uint64_t i = 0, v = 0; i < nr && next(&v); ++i)
        if (i > 0) s.group_marks += v;
    if ((r.sample_type & PERF_SAMPLE_CALLCHAIN) && next(&nr)) {
      nr = std::min<uint64_t>(nr, (h.size - at) / 8);
      for (uint64_t i = 0; i < nr; ++i) {
        uint64_t ip = 0;
        next(&ip);
        if (ip >= PERF_CONTEXT_MAX) {
          if (ip == PERF_CONTEXT_USER) break;
          continue;
        }
        s.frames.push_back(syms.Lookup(ip));
      }
    }
    if (s.in_kernel) {
      if (r.sample_type & PERF_SAMPLE_IP)
        s.innermost = syms.Lookup(s.ip);
      else if (!s.frames.empty())
        s.innermost = s.frames.front();
    }
    on_sample(s);
  }
  __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
}

using nlohmann::json;

// The 8 most frequent callers of `m`, as {name: count}.
json TopCallers(const std::map<std::string, uint64_t>& m) {
  std::vector<std::pair<uint64_t, std::string>> v;
  for (const auto& [name, n] : m) v.emplace_back(n, name);
  std::sort(v.rbegin(), v.rend());
  json out = json::object();
  for (std::size_t i = 0; i < v.size() && i < 8; ++i)
    out[v[i].second] = v[i].first;
  return out;
}

// sources[name] = "measured", or "unavailable" with name:reason = why.
void PutSource(json& sources, const char* name, bool ok,
               const std::string& why) {
  sources[name] = ok ? "measured" : "unavailable";
  if (!ok) sources[std::string(name) + ":reason"] = why;
}

}  // namespace

const TracepointInfo& ContentionTracepoints() {
  static const TracepointInfo info = [] {
    TracepointInfo t;
    for (const char* d : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
      // A mounted tracefs has events/.
      if (IsDir(std::string(d) + "/events")) return FindTracepointsIn(d);
      if (errno == EACCES) {
        t.reason = std::string(d) +
                   " is not accessible: permission denied (tracefs is "
                   "root-only; run as root)";
        return t;
      }
    }
    if (geteuid() != 0) {
      t.reason =
          "tracefs is not mounted and mounting it needs root "
          "(mount -t tracefs nodev /sys/kernel/tracing)";
      return t;
    }
    // Recorded before the mount: a run killed outright leaves it for the next.
    if (const std::string why = RecordTracefsMount(); !why.empty()) {
      t.reason = "tracefs is not mounted and lockline did not mount it: " + why;
      // Said once on the console too: every kernel row of this run lacks it.
      std::fprintf(stderr,
                   "lockline: warning: %s; this run's kernel contention "
                   "evidence (kernel_contention_per_op, details.kernel "
                   "contention_begin/end, callchains) is off\n",
                   t.reason.c_str());
      return t;
    }
    if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) != 0) {
      t.reason =
          std::string("mounting tracefs at /sys/kernel/tracing failed: ") +
          std::strerror(errno);
      NoteTracefsMounted(false);
      return t;
    }
    NoteTracefsMounted(true);
    t = FindTracepointsIn("/sys/kernel/tracing");
    t.mounted_here = true;
    return t;
  }();
  return info;
}

LockClass ClassifyChain(const std::vector<std::string>& chain,
                        std::string* caller) {
  static const char* const kSkip[] = {
      // spinlock and rwlock primitives
      "_raw_spin", "_raw_read", "_raw_write", "queued_", "native_queued",
      "__pv_queued", "pv_queued", "do_raw_",
      // perf and tracing
      "perf_", "__perf", "trace_", "__trace", "__bpf_trace", "__traceiter",
      // sleeping locks and the rest of the lock code
      "rwsem_down", "__rwsem", "down_read", "down_write", "__down",
      "mutex_lock", "__mutex_lock", "mutex_spin_on_owner", "osq_lock",
      "rt_spin", "rwbase_", "lock_contended", "__lock_text", "preempt_schedule",
      "asm_", "spin_lock", "rt_mutex", "percpu_down"};
  // mm/page_alloc.c (6.x): the zone->lock holders.
  static const char* const kZone[] = {
      // allocation: the pcp refill and the buddy
      "rmqueue_bulk", "rmqueue_buddy", "__rmqueue_pcplist", "rmqueue_pcplist",
      // freeing: the pcp drain and the buddy
      "free_pcppages_bulk", "free_one_page", "__free_pages_ok",
      "free_unref_page", "free_frozen_page", "__free_one_page",
      "drain_zone_pages", "drain_pages_zone", "decay_pcp_high",
      // bulk allocation, highatomic reserves, fallback
      "alloc_pages_bulk", "__alloc_pages_bulk", "reserve_highatomic",
      "unreserve_highatomic", "steal_suitable", "move_freepages", "__rmqueue",
      "rmqueue"};
  // mm/swap.c, mm/memcontrol.c, mm/vmscan.c (6.x): lruvec->lru_lock holders.
  static const char* const kLru[] = {
      // the lruvec lock and folio batches
      "folio_lruvec_lock", "folio_lruvec_relock", "lruvec_lock", "lru_add",
      "folio_batch_move_lru", "folios_put_refs", "release_pages",
      "__page_cache_release", "page_cache_release", "lru_note_cost",
      // reclaim, LRU moves, mlock, MGLRU
      "isolate_lru_folios", "folio_isolate_lru", "move_folios_to_lru",
      "shrink_active_list", "shrink_inactive_list", "lru_move_tail",
      "lru_deactivate", "lru_activate", "lru_lazyfree", "__munlock",
      "mlock_folio", "lru_gen_", "__folio_put", "folio_activate"};
  std::size_t i = 0;
  while (i < chain.size() && StartsWithAny(chain[i], kSkip)) ++i;
  if (caller) *caller = i < chain.size() ? chain[i] : "";
  for (std::size_t j = i; j < chain.size(); ++j) {
    if (StartsWithAny(chain[j], kZone)) return LockClass::kZone;
    if (StartsWithAny(chain[j], kLru)) return LockClass::kLru;
  }
  return LockClass::kOther;
}

KernelSymbols::KernelSymbols(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::vector<std::pair<uint64_t, std::string>> syms;
  bool all_zero = true;
  while (std::getline(in, line)) {
    char type = 0;
    char name[256];
    unsigned long long addr = 0;
    if (std::sscanf(line.c_str(), "%llx %c %255s", &addr, &type, name) != 3)
      continue;
    if (addr != 0) all_zero = false;
    if (type != 't' && type != 'T' && type != 'W' && type != 'w') continue;
    syms.emplace_back(addr, name);
  }
  if (syms.empty() || all_zero) {
    reason_ = syms.empty() ? "no text symbols in /proc/kallsyms"
                           : "/proc/kallsyms shows 0 addresses "
                             "(kptr_restrict; readable as root)";
    return;
  }
  std::sort(syms.begin(), syms.end());
  for (auto& [a, n] : syms) {
    addrs_.push_back(a);
    names_.push_back(std::move(n));
  }
}

const KernelSymbols& KernelSymbols::Get() {
  static const KernelSymbols syms = [] {
    const std::string text = ReadSmallFile("/proc/kallsyms");
    KernelSymbols s(text);
    if (text.empty()) s.reason_ = "cannot read /proc/kallsyms";
    return s;
  }();
  return syms;
}

bool KernelSymbols::Contains(const std::string& name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

const std::string& KernelSymbols::Lookup(uint64_t addr) const {
  static const std::string unknown = "?";
  auto it = std::upper_bound(addrs_.begin(), addrs_.end(), addr);
  if (it == addrs_.begin()) return unknown;
  return names_[static_cast<std::size_t>(it - addrs_.begin()) - 1];
}

void ContentionTally::Add(const ContentionTally& o) {
  using T = ContentionTally;
  AddFields(*this, o, &T::begin, &T::end, &T::samples, &T::lost, &T::zone,
            &T::lru, &T::other, &T::clock_samples, &T::clock_kernel,
            &T::spin_zone, &T::spin_lru, &T::spin_other);
  for (const auto& [k, v] : o.callers) callers[k] += v;
  for (const auto& [k, v] : o.spin_callers) spin_callers[k] += v;
}

bool IsSpinChain(const std::vector<std::string>& chain) {
  static const char* const kSpin[] = {
      // qspinlock (native, paravirt) and its x86 guest fallback
      "native_queued_spin_lock_slowpath", "__pv_queued_spin_lock_slowpath",
      "queued_spin_lock_slowpath", "pv_queued_spin_lock_slowpath",
      "virt_spin_lock",
      // qrwlock
      "queued_read_lock_slowpath", "queued_write_lock_slowpath"};
  for (std::size_t i = 0; i < chain.size() && i < 3; ++i)
    if (StartsWithAny(chain[i], kSpin)) return true;
  return false;
}

TaskClockSampler::~TaskClockSampler() { Close(); }

void TaskClockSampler::Close() {
  CloseRing(ring_);
  ring_pages_ = 0;
}

std::string TaskClockSampler::Open(pid_t pid, const Config& config) {
  Close();
  const KernelSymbols& syms = KernelSymbols::Get();
  if (!syms.usable()) return syms.reason();
  perf_event_attr c = EventAttr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK);
  c.sample_period = config.period_ns;
  c.sample_type = PERF_SAMPLE_CALLCHAIN;
  if (config.ip_and_time) {
    c.sample_type |= PERF_SAMPLE_IP | PERF_SAMPLE_TIME;
    c.use_clockid = 1;
    c.clockid = CLOCK_MONOTONIC;
  }
  c.exclude_callchain_user = 1;
  c.sample_max_stack = config.max_stack;
  const std::string e = OpenRing(c, pid, config.ring_pages, &ring_);
  if (!e.empty()) return "perf_event_open(task-clock sampling): " + e;
  ring_pages_ = ring_.bytes / static_cast<std::size_t>(getpagesize()) - 1;
  return "";
}

void TaskClockSampler::Enable() { IoctlAll({ring_.fd}, PERF_EVENT_IOC_ENABLE); }

void TaskClockSampler::Disable() {
  IoctlAll({ring_.fd}, PERF_EVENT_IOC_DISABLE);
}

void TaskClockSampler::Drain(
    uint64_t* lost, const std::function<void(const RingSample&)>& on_sample) {
  DrainRing(ring_, lost, on_sample);
}

const std::vector<std::string>& ClearPageSymbolNames() {
  static const std::vector<std::string> names = {
      "clear_page_erms",  "clear_page_rep",  "clear_page_orig",
      "clear_pages_erms", "clear_pages_rep", "clear_pages_orig",
      "clear_page_c",     "clear_page_c_e",  "clear_page"};
  return names;
}

bool IsClearPageSymbol(const std::string& fn) {
  const auto& names = ClearPageSymbolNames();
  return std::find(names.begin(), names.end(), fn) != names.end();
}

Proportion95 Wilson95(uint64_t k, uint64_t n) {
  if (n == 0) return {};
  constexpr double z = 1.959963984540054;
  const double nn = static_cast<double>(n);
  const double p = static_cast<double>(std::min(k, n)) / nn;
  const double denom = 1 + z * z / nn;
  const double center = (p + z * z / (2 * nn)) / denom;
  const double half =
      z * std::sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / denom;
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

TaskContention::~TaskContention() { Close(); }

void TaskContention::Close() {
  CloseRing(sample_);
  clock_.Close();
  CloseFd(begin_fd_);
  CloseFd(end_fd_);
}

std::string TaskContention::Open(pid_t pid, uint64_t sample_period,
                                 uint64_t spin_period_ns) {
  Close();
  last_begin_ = last_end_ = 0;
  const KernelSymbols& syms = KernelSymbols::Get();
  // The spin profile does not need tracefs.
  if (spin_period_ns == 0) {
    spin_reason_ = "spin profile off";
  } else {
    TaskClockSampler::Config c;
    c.period_ns = spin_period_ns;
    c.ring_pages = 4 * kRingDataPages;
    c.max_stack = kMaxStack;
    spin_reason_ = clock_.Open(pid, c);
  }
  const TracepointInfo& tp = ContentionTracepoints();
  if (!tp.available()) {
    sampling_reason_ = tp.reason;
    return tp.reason;
  }
  for (const auto& [fd, id, name] :
       {std::tuple{&begin_fd_, tp.begin_id, "lock:contention_begin"},
        std::tuple{&end_fd_, tp.end_id, "lock:contention_end"}}) {
    perf_event_attr a = EventAttr(PERF_TYPE_TRACEPOINT, id);
    *fd = PerfEventOpen(&a, pid, -1);
    if (*fd < 0) {
      const int err = errno;
      sampling_reason_ = std::string("perf_event_open(") + name +
                         "): " + ExplainOpenError(err);
      CloseFd(begin_fd_);
      return sampling_reason_;
    }
  }
  if (sample_period == 0) {
    sampling_reason_ = "sampling off";
  } else if (!syms.usable()) {
    sampling_reason_ = syms.reason();
  } else {
    perf_event_attr a = EventAttr(PERF_TYPE_TRACEPOINT, tp.begin_id);
    a.sample_period = sample_period;
    a.sample_type = PERF_SAMPLE_CALLCHAIN;
    a.exclude_callchain_user = 1;
    a.sample_max_stack = kMaxStack;
    const std::string e = OpenRing(a, pid, kRingDataPages, &sample_);
    sampling_reason_ = e.empty() ? "" : "perf_event_open(sampling): " + e;
  }
  return "";
}

void TaskContention::Enable() {
  IoctlAll({begin_fd_, end_fd_, sample_.fd}, PERF_EVENT_IOC_ENABLE);
  clock_.Enable();
}

void TaskContention::Disable() {
  IoctlAll({begin_fd_, end_fd_, sample_.fd}, PERF_EVENT_IOC_DISABLE);
  clock_.Disable();
}

void TaskContention::Collect(ContentionTally& tally) {
  for (const auto& [fd, last, sum] :
       {std::tuple{begin_fd_, &last_begin_, &tally.begin},
        std::tuple{end_fd_, &last_end_, &tally.end}}) {
    uint64_t v = 0;
    if (fd < 0 || read(fd, &v, sizeof v) != sizeof v) continue;
    *sum += v - *last;
    *last = v;
  }
  // The tally field of a lock class, of three.
  auto by_class = [](LockClass c, uint64_t& zone, uint64_t& lru,
                     uint64_t& other) -> uint64_t& {
    return c == LockClass::kZone ? zone : c == LockClass::kLru ? lru : other;
  };
  std::string caller;
  DrainRing(sample_, &tally.lost, [&](const RingSample& s) {
    ++by_class(ClassifyChain(s.frames, &caller), tally.zone, tally.lru,
               tally.other);
    ++tally.samples;
    ++tally.callers[caller.empty() ? "?" : caller];
  });
  clock_.Drain(&tally.lost, [&](const RingSample& s) {
    ++tally.clock_samples;
    if (!s.in_kernel || s.frames.empty()) return;
    ++tally.clock_kernel;
    if (!IsSpinChain(s.frames)) return;
    ++by_class(ClassifyChain(s.frames, &caller), tally.spin_zone,
               tally.spin_lru, tally.spin_other);
    ++tally.spin_callers[caller.empty() ? "?" : caller];
  });
}

void ZoneLockTally::Add(const ZoneLockTally& o) {
  using T = ZoneLockTally;
  AddFields(*this, o, &T::alloc_pages, &T::drain_pages, &T::refills, &T::drains,
            &T::lost);
}

std::size_t ZoneRingPages(uint64_t pages) {
  const uint64_t bytes = 2 * pages * kZoneRecordBytes;
  std::size_t n = 64;
  while (n < kMaxZoneRingPages &&
         n * static_cast<uint64_t>(getpagesize()) < bytes)
    n *= 2;
  return n;
}

ZoneLockCounter::~ZoneLockCounter() { Close(); }

void ZoneLockCounter::Close() {
  for (Kind* k : {&alloc_, &drain_}) {
    for (int& fd : k->marks) CloseFd(fd);
    CloseRing(k->ring);
    k->seen = false;
  }
}

std::string ZoneLockCounter::Open(pid_t pid, std::size_t ring_pages) {
  Close();
  const TracepointInfo& tp = ContentionTracepoints();
  if (tp.tracefs.empty()) return tp.reason.empty() ? "no tracefs" : tp.reason;
  const std::string base = tp.tracefs + "/events/kmem/";
  const auto fail = [&](std::string why) {
    Close();
    return why;
  };
  const auto id_of = [&](const char* name, std::string* why) {
    const int id = ReadIdFile(base + name + "/id");
    if (id < 0)
      *why = "cannot read " + base + name + "/id (tracepoint missing)";
    return id;
  };
  struct Want {
    const char* name;
    Kind* kind;
    std::vector<const char*> marks;  // counted in the sample's group
  };
  for (const Want& w :
       {Want{"mm_page_alloc_zone_locked", &alloc_, {"mm_page_alloc"}},
        Want{"mm_page_pcpu_drain",
             &drain_,
             {"mm_page_free_batched", "mm_page_free"}}}) {
    std::string why;
    const int id = id_of(w.name, &why);
    if (id < 0) return fail(why);
    perf_event_attr a = EventAttr(PERF_TYPE_TRACEPOINT, id);
    a.sample_period = 1;
    a.sample_type = PERF_SAMPLE_READ;
    a.read_format = PERF_FORMAT_GROUP;
    const std::string e = OpenRing(a, pid, ring_pages, &w.kind->ring);
    if (!e.empty())
      return fail(std::string("perf_event_open(kmem:") + w.name + "): " + e);
    for (std::size_t i = 0; i < w.marks.size(); ++i) {
      const int mid = id_of(w.marks[i], &why);
      if (mid < 0) return fail(why);
      perf_event_attr m = EventAttr(PERF_TYPE_TRACEPOINT, mid);
      m.disabled = 0;  // counts while its leader is enabled
      w.kind->marks[i] = PerfEventOpen(&m, pid, w.kind->ring.fd);
      if (w.kind->marks[i] < 0)
        return fail(std::string("perf_event_open(kmem:") + w.marks[i] +
                    "): " + ExplainOpenError(errno));
    }
  }
  return "";
}

void ZoneLockCounter::Enable() {
  IoctlAll({alloc_.ring.fd, drain_.ring.fd}, PERF_EVENT_IOC_ENABLE);
}

void ZoneLockCounter::Disable() {
  IoctlAll({alloc_.ring.fd, drain_.ring.fd}, PERF_EVENT_IOC_DISABLE);
}

void ZoneLockCounter::Drain(ZoneLockTally& t) {
  const auto count = [&](Kind& k, uint64_t* pages, uint64_t* holds) {
    DrainRing(k.ring, &t.lost, [&](const RingSample& s) {
      ++*pages;
      if (ZoneHoldStarts(s.group_marks, &k.last, &k.seen)) ++*holds;
    });
  };
  count(alloc_, &t.alloc_pages, &t.refills);
  count(drain_, &t.drain_pages, &t.drains);
}

KernelEvidence::KernelEvidence(int tasks, uint64_t sample_period,
                               uint64_t spin_period_ns)
    : tasks_(static_cast<std::size_t>(tasks)),
      sample_period_(sample_period),
      spin_period_ns_(spin_period_ns) {
  pcp_ = ReadZonePcp();
}

void KernelEvidence::OpenTask(int index, pid_t pid, uint64_t zone_pages) {
  Task& t = tasks_[static_cast<std::size_t>(index)];
  Sources& o = t.opened;
  if (zone_lock_) {
    o.zone_reason = t.zl.Open(pid, ZoneRingPages(zone_pages));
    o.zone = t.zl.open();
  }
  o.tp_reason = t.tc.Open(pid, sample_period_, spin_period_ns_);
  o.counted = t.tc.counting();
  o.sampled = t.tc.sampling();
  o.spun = t.tc.spin_profiling();
  o.sample_reason = t.tc.sampling_reason();
  o.spin_reason = t.tc.spin_reason();
}

void KernelEvidence::Begin(int index) {
  tasks_[static_cast<std::size_t>(index)].zl.Enable();
  tasks_[static_cast<std::size_t>(index)].tc.Enable();
}

void KernelEvidence::End(int index) {
  Task& t = tasks_[static_cast<std::size_t>(index)];
  t.tc.Disable();
  t.zl.Disable();
  t.tc.Collect(t.tally);
}

void KernelEvidence::DrainLive() {
  for (Task& t : tasks_) t.zl.Drain(t.ztally);
}

void KernelEvidence::CloseTask(int index) {
  tasks_[static_cast<std::size_t>(index)].tc.Close();
  tasks_[static_cast<std::size_t>(index)].zl.Close();
}

bool KernelEvidence::TaskOpen(int index) const {
  const Task& t = tasks_[static_cast<std::size_t>(index)];
  return t.zl.open() || t.tc.counting() || t.tc.sampling() ||
         t.tc.spin_profiling();
}

void KernelEvidence::VmstatBegin() {
  vm_before_ = ReadVmstat();
  if (vm_before_.empty()) vm_ok_ = false;
}

void KernelEvidence::VmstatEnd() {
  const auto after = ReadVmstat();
  if (after.empty() || vm_before_.empty()) {
    vm_ok_ = false;
    return;
  }
  for (const auto& [k, v] : after) {
    auto it = vm_before_.find(k);
    if (it != vm_before_.end()) vm_sum_[k] += v - it->second;
  }
  vm_before_.clear();
}

nlohmann::json ZoneLockJson(const ZoneLockTally& z, uint64_t ops) {
  const uint64_t holds = z.refills + z.drains;
  const auto per = [](uint64_t a, uint64_t b) -> nlohmann::json {
    if (a == 0 || b == 0) return "not observed";
    return static_cast<double>(a) / static_cast<double>(b);
  };
  return {
      {"observed", holds > 0},
      {"acquisitions", holds},
      {"refill_acquisitions", z.refills},
      {"refill_pages", z.alloc_pages},
      {"drain_acquisitions", z.drains},
      {"drain_pages", z.drain_pages},
      {"acquisitions_per_op",
       holds > 0 && ops > 0
           ? per(holds, ops)
           : nlohmann::json("not observed: no zone->lock event in the "
                            "evidence windows (" +
                            std::to_string(ops) + " ops)")},
      {"pages_per_refill", per(z.alloc_pages, z.refills)},
      {"pages_per_drain", per(z.drain_pages, z.drains)},
      {"events_lost", z.lost},
      {"method",
       "kmem:mm_page_alloc_zone_locked (a page taken off the buddy lists "
       "under zone->lock) and kmem:mm_page_pcpu_drain (a page "
       "free_pcppages_bulk returns under zone->lock) sampled on every event "
       "in the evidence windows, each reading the task's count of "
       "kmem:mm_page_alloc (refills) or kmem:mm_page_free_batched + "
       "kmem:mm_page_free (drains), events that lie between two holds and "
       "never inside one: an event whose count moved since the previous "
       "event of its kind starts an acquisition; a count with no event is "
       "'not observed', never 0"}};
}

KernelEvidence::Sources KernelEvidence::OpenedSources() const {
  Sources o;
  o.counted = o.sampled = o.spun = o.zone = !tasks_.empty();
  // The first task's reason stands for all.
  auto first = [](std::string& keep, const std::string& r) {
    if (keep.empty()) keep = r.empty() ? "task not started" : r;
  };
  for (const Task& t : tasks_) {
    const Sources& s = t.opened;
    if (!s.counted) o.counted = false, first(o.tp_reason, s.tp_reason);
    if (!s.sampled) o.sampled = false, first(o.sample_reason, s.sample_reason);
    if (!s.spun) o.spun = false, first(o.spin_reason, s.spin_reason);
    if (!s.zone) o.zone = false, first(o.zone_reason, s.zone_reason);
  }
  return o;
}

namespace {

/// details.kernel.spin from the task-clock samples, and the spin shares.
json SpinJson(const ContentionTally& total, uint64_t period_ns,
              KernelEvidence::Metrics& metrics) {
  const uint64_t spin = total.spin_zone + total.spin_lru + total.spin_other;
  json j = {{"period_ns", period_ns},
            {"samples", total.clock_samples},
            {"kernel_samples", total.clock_kernel},
            {"spinning", spin},
            {"zone_lock", total.spin_zone},
            {"lru_lock", total.spin_lru},
            {"other", total.spin_other},
            {"top_callers", TopCallers(total.spin_callers)},
            {"note",
             "task-clock samples of the point's tasks with kernel "
             "callchains; a sample inside a spinlock slow path is "
             "attributed by the function that asked for the lock"}};
  if (total.clock_samples > 0) {
    const double n = static_cast<double>(total.clock_samples);
    metrics.emplace_back("kernel_spin_share", static_cast<double>(spin) / n);
    metrics.emplace_back("kernel_spin_zone_share",
                         static_cast<double>(total.spin_zone) / n);
    metrics.emplace_back("kernel_spin_lru_share",
                         static_cast<double>(total.spin_lru) / n);
  }
  return j;
}

}  // namespace

void KernelEvidence::Report(json& details, Metrics& metrics,
                            uint64_t ops) const {
  if (!off_reason_.empty()) {
    json sources = json::object();
    for (const char* name : {"tracepoints", "callchains", "spin_profile",
                             "vmstat", "lock_stat", "zone_lock"}) {
      if (name == std::string("zone_lock") && !zone_lock_) continue;
      sources[name] = "off";
      sources[std::string(name) + ":reason"] = off_reason_;
    }
    sources["pcp"] = pcp_.empty() ? "unavailable" : "measured";
    details["kernel"] = {{"sources", sources}, {"pcp", ZonePcpJson(pcp_)}};
    return;
  }
  const Sources o = OpenedSources();
  ContentionTally total;
  for (const Task& t : tasks_) total.Add(t.tally);
  json sources = json::object();
  PutSource(sources, "tracepoints", o.counted, o.tp_reason);
  PutSource(sources, "callchains", o.sampled, o.sample_reason);
  PutSource(sources, "spin_profile", o.spun, o.spin_reason);
  const bool vm = vm_ok_ && !vm_sum_.empty();
  PutSource(sources, "vmstat", vm, "/proc/vmstat unreadable");
  std::string ls_reason;
  PutSource(sources, "lock_stat", LockStatStatus(&ls_reason) == "measured",
            ls_reason);
  PutSource(sources, "pcp", !pcp_.empty(), "/proc/zoneinfo unreadable");
  json k = json::object();
  const TracepointInfo& tp = ContentionTracepoints();
  if (tp.mounted_here) k["tracefs_mounted_by_lockline"] = tp.tracefs;
  if (o.counted) {
    k["contention_begin"] = total.begin;
    k["contention_end"] = total.end;
    metrics.emplace_back(
        "kernel_contention_per_op",
        ops ? static_cast<double>(total.begin) / static_cast<double>(ops)
            : 0.0);
    k["tracepoint_note"] =
        "qspinlock fires lock:contention_begin only when a waiter joins the "
        "MCS queue (kernel/locking/qspinlock.c since 5.19): a single spinning "
        "waiter (pending bit) and every waiter of a guest without paravirt "
        "spinlocks (virt_spin_lock, test-and-set) are not traced; the spin "
        "profile sees them";
  }
  if (o.sampled) {
    k["attribution"] = {{"zone_lock", total.zone},
                        {"lru_lock", total.lru},
                        {"other", total.other}};
    k["samples"] = total.samples;
    k["sample_period"] = sample_period_;
    k["top_callers"] = TopCallers(total.callers);
    if (total.samples > 0) {
      const double n = static_cast<double>(total.samples);
      metrics.emplace_back("kernel_contention_zone_share",
                           static_cast<double>(total.zone) / n);
      metrics.emplace_back("kernel_contention_lru_share",
                           static_cast<double>(total.lru) / n);
    }
  }
  if (o.sampled || o.spun) k["samples_lost"] = total.lost;
  if (o.spun) k["spin"] = SpinJson(total, spin_period_ns_, metrics);
  if (vm) {
    std::map<std::string, uint64_t> zero;
    for (const auto& [key, v] : vm_sum_) zero[key] = 0;
    k["vmstat_delta"] = VmstatDelta(zero, vm_sum_);
    k["vmstat_note"] =
        "system-wide counters over the windows: other processes' activity is "
        "included";
  }
  if (zone_lock_) PutSource(sources, "zone_lock", o.zone, o.zone_reason);
  if (zone_lock_ && o.zone) {
    ZoneLockTally z;
    for (const Task& t : tasks_) z.Add(t.ztally);
    const json& j = k["zone_lock"] = ZoneLockJson(z, ops);
    // No event at all: "not observed" (no metric), never 0.0 per op.
    if (j["acquisitions_per_op"].is_number()) {
      metrics.emplace_back("zone_lock_acquisitions_per_op",
                           j["acquisitions_per_op"].get<double>());
      metrics.emplace_back("zone_lock_pages_per_acquisition",
                           static_cast<double>(z.alloc_pages + z.drain_pages) /
                               j["acquisitions"].get<double>());
    }
  }
  k["sources"] = sources;
  k["pcp"] = ZonePcpJson(pcp_);
  details["kernel"] = k;
}

}  // namespace lockline::kernel
