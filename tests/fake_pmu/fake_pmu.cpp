// A fake hardware PMU for tests: an LD_PRELOAD shim that lets lockline's whole
// counter path (open groups, enable/disable per window, read with
// time_enabled / time_running, scale multiplexed counts, divide per op, write
// rows) run on a machine without a PMU. Built only for tests (tests/CMake).
//
// What it intercepts, and why there. lockline opens counters through
// libpfm4's perf_event_open(), an inline stub in <perfmon/perf_event.h> that
// calls glibc's syscall(__NR_perf_event_open, ...); so the shim interposes
// `syscall` itself (it reads six long arguments and forwards every other
// system call unchanged: the x86-64 and aarch64 ABIs pass them in registers,
// so reading unused ones is harmless) -- no test-only hook in lockline's
// production path. Hardware, hw-cache and raw events get a fake fd (a real
// eventfd, so numbers never collide with the process's other fds); software,
// tracepoint and breakpoint events go to the kernel. read / __read_chk /
// ioctl / close on a fake fd are served here; on any other fd they go to libc.
// lockline asks "does the kernel expose a hardware PMU" through
// dlsym(RTLD_DEFAULT, "lockline_fake_pmu_present"), so that answer comes from
// here too, and it records lockline_fake_pmu_description() in the run context
// (a result file made under the shim says so).
//
// The model (per thread, like the kernel's per-task perf context):
// - time is the owning thread's CPU time (CLOCK_THREAD_CPUTIME_ID of its tid);
// - an enabled event's count grows at rate R (events per ns of CPU time) times
//   a square-wave "phase" 1 +/- A (period 2 * WOBBLE_NS of CPU time), so a
//   multiplexed event's scaled estimate differs from the truth as on real
//   hardware; :u counts (1 - KERNEL_SHARE) of it, :k KERNEL_SHARE;
// - COUNTERS general counters, FIXED fixed ones (fixed 0 instructions, 1
//   cycles, 2 ref-cycles, as Intel); every MUX_NS of CPU time the kernel's
//   flexible-group scheduling is replayed: groups in list order go on while
//   they fit, the first that does not fit stops the pass (linux
//   kernel/events/core.c merge_sched_in sets can_add_hw = 0 and
//   group_can_go_on "try to add it if all previous groups were able to go on",
//   unchanged since 2.6.31's perf_counter.c), and the list rotates by one when
//   something was left off (rotate_ctx). So a group of as many events as
//   counters, among singletons, is on the PMU only when it heads the list;
//   lockline's rows show it as a large scaling factor;
// - time_enabled grows while enabled, time_running while on a counter, the
//   count only while running; the truth (what a dedicated counter would have
//   seen) is logged at close.
// Errors as the kernel gives them: EINVAL for a group needing more counters
// than exist (x86 validate_group), ENOENT for an event the PMU lacks, EACCES /
// EPERM for paranoid / seccomp refusals, ENOSPC for a short read buffer.
//
// Environment (all optional):
//   LOCKLINE_FAKE_PMU_PRESENT=0       no PMU: hardware events give ENOENT
//   LOCKLINE_FAKE_PMU_COUNTERS=4      general counters
//   LOCKLINE_FAKE_PMU_FIXED=0         fixed counters (0..3)
//   LOCKLINE_FAKE_PMU_MISSING=a,b     generic hardware events the PMU lacks
//                                     (cycles, instructions, cache-misses ...,
//                                     or hw_cache for every cache event)
//   LOCKLINE_FAKE_PMU_RAW=any|0x412e,0xc0   raw codes that exist (low 16 bits
//                                     plus AMD's bits 32-35); others ENOENT
//   LOCKLINE_FAKE_PMU_PARANOID=kernel|eacces|eperm   kernel: EACCES unless
//                                     exclude_kernel (perf_event_paranoid 2,
//                                     unprivileged); eacces / eperm: refuse all
//   LOCKLINE_FAKE_PMU_RATES=cycles=3,instructions=0,raw:0x412e=0.01,raw=0.002,
//                           cache=0.02   events per ns of CPU time
//   LOCKLINE_FAKE_PMU_WOBBLE=0.25, LOCKLINE_FAKE_PMU_WOBBLE_NS=700000
//   LOCKLINE_FAKE_PMU_MUX_NS=1000000, LOCKLINE_FAKE_PMU_KERNEL_SHARE=0.1
//   LOCKLINE_FAKE_PMU_LOG=FILE        JSON lines: every open (attr, result)
//                                     and every close (raw, times, truth)
#include <dlfcn.h>
#include <linux/perf_event.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using SyscallFn = long (*)(long, ...);
using ReadFn = ssize_t (*)(int, void*, size_t);
using ReadChkFn = ssize_t (*)(int, void*, size_t, size_t);
using IoctlFn = int (*)(int, unsigned long, ...);
using CloseFn = int (*)(int);

struct Real {
  SyscallFn syscall_fn;
  ReadFn read_fn;
  ReadChkFn read_chk_fn;
  IoctlFn ioctl_fn;
  CloseFn close_fn;
};

const Real& RealFns() {
  static const Real real = [] {
    Real r;
    r.syscall_fn = reinterpret_cast<SyscallFn>(dlsym(RTLD_NEXT, "syscall"));
    r.read_fn = reinterpret_cast<ReadFn>(dlsym(RTLD_NEXT, "read"));
    r.read_chk_fn = reinterpret_cast<ReadChkFn>(dlsym(RTLD_NEXT, "__read_chk"));
    r.ioctl_fn = reinterpret_cast<IoctlFn>(dlsym(RTLD_NEXT, "ioctl"));
    r.close_fn = reinterpret_cast<CloseFn>(dlsym(RTLD_NEXT, "close"));
    return r;
  }();
  return real;
}

// Generic hardware event names, indexed by PERF_COUNT_HW_* config.
const char* const kHwNames[] = {"cycles",
                                "instructions",
                                "cache-references",
                                "cache-misses",
                                "branches",
                                "branch-misses",
                                "bus-cycles",
                                "stalled-cycles-frontend",
                                "stalled-cycles-backend",
                                "ref-cycles"};
constexpr int kHwCount = sizeof(kHwNames) / sizeof(kHwNames[0]);
// Default rates (events per ns of CPU time): a 3 GHz core retiring 1.5
// instructions per cycle.
const double kHwRates[kHwCount] = {3.0,   4.5, 0.05, 0.01, 0.8,
                                   0.004, 0.1, 0.3,  0.6,  2.5};

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

double EnvDouble(const char* name, double dflt) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtod(v, nullptr) : dflt;
}

struct Config {
  bool present = true;
  int counters = 4;
  int fixed = 0;
  std::set<uint64_t> missing_hw;  // PERF_COUNT_HW_* configs
  bool missing_hw_cache = false;
  bool any_raw = true;
  std::set<uint64_t> raw;  // accepted raw codes (masked)
  std::string paranoid;
  std::map<std::string, double> rates;  // "cycles", "raw:0x412e", "raw", ...
  double wobble = 0.25;
  uint64_t wobble_ns = 700000;
  uint64_t mux_ns = 1000000;
  double kernel_share = 0.1;
  std::string log_path;
  std::string description;
};

uint64_t RawKey(uint64_t config) { return config & 0xf0000ffffull; }

const Config& Cfg() {
  static const Config cfg = [] {
    Config c;
    c.present = EnvDouble("LOCKLINE_FAKE_PMU_PRESENT", 1) != 0;
    c.counters = static_cast<int>(EnvDouble("LOCKLINE_FAKE_PMU_COUNTERS", 4));
    c.fixed = std::clamp(
        static_cast<int>(EnvDouble("LOCKLINE_FAKE_PMU_FIXED", 0)), 0, 3);
    if (const char* m = std::getenv("LOCKLINE_FAKE_PMU_MISSING")) {
      for (const std::string& name : Split(m)) {
        if (name == "hw_cache") c.missing_hw_cache = true;
        for (int i = 0; i < kHwCount; ++i)
          if (name == kHwNames[i]) c.missing_hw.insert(i);
      }
    }
    if (const char* r = std::getenv("LOCKLINE_FAKE_PMU_RAW")) {
      if (std::string(r) != "any") {
        c.any_raw = false;
        for (const std::string& code : Split(r))
          c.raw.insert(RawKey(std::strtoull(code.c_str(), nullptr, 0)));
      }
    }
    if (const char* p = std::getenv("LOCKLINE_FAKE_PMU_PARANOID"))
      c.paranoid = p;
    for (int i = 0; i < kHwCount; ++i) c.rates[kHwNames[i]] = kHwRates[i];
    c.rates["raw"] = 0.002;
    c.rates["cache"] = 0.02;
    // The raw codes the generic events have on Intel (cycles 0x3c,
    // instructions 0xc0, LONGEST_LAT_CACHE.MISS 0x412e, BR_MISP_RETIRED 0xc5,
    // MEM_LOAD_RETIRED.L3_MISS 0x20d1, MEM_LOAD_L3_HIT_RETIRED.XSNP_HITM 0x4d2)
    // and AMD Zen 4 (0x76, 0xc0, 0x964, 0xc3, demand fills from beyond the
    // CCX 0x5c43, from another CCX's cache 0x1443) count like them, so a run
    // under LIBPFM_FORCE_PMU gives the same per-op values.
    for (const auto& [code, rate] :
         std::vector<std::pair<const char*, double>>{{"raw:0x3c", 3.0},
                                                     {"raw:0x76", 3.0},
                                                     {"raw:0xc0", 4.5},
                                                     {"raw:0x412e", 0.01},
                                                     {"raw:0x964", 0.01},
                                                     {"raw:0xc5", 0.004},
                                                     {"raw:0xc3", 0.004},
                                                     {"raw:0x20d1", 0.005},
                                                     {"raw:0x5c43", 0.005},
                                                     {"raw:0x4d2", 0.001},
                                                     {"raw:0x1443", 0.001}})
      c.rates[code] = rate;
    if (const char* r = std::getenv("LOCKLINE_FAKE_PMU_RATES")) {
      for (const std::string& kv : Split(r)) {
        const size_t eq = kv.rfind('=');
        if (eq == std::string::npos) continue;
        std::string key = kv.substr(0, eq);
        if (key.rfind("raw:", 0) == 0 || key.rfind("cache:", 0) == 0) {
          const size_t colon = key.find(':');
          std::ostringstream k;
          k << key.substr(0, colon) << ":0x" << std::hex
            << std::strtoull(key.c_str() + colon + 1, nullptr, 0);
          key = k.str();
        }
        c.rates[key] = std::strtod(kv.c_str() + eq + 1, nullptr);
      }
    }
    c.wobble = EnvDouble("LOCKLINE_FAKE_PMU_WOBBLE", 0.25);
    c.wobble_ns = static_cast<uint64_t>(
        std::max(1.0, EnvDouble("LOCKLINE_FAKE_PMU_WOBBLE_NS", 700000)));
    c.mux_ns = static_cast<uint64_t>(
        std::max(1000.0, EnvDouble("LOCKLINE_FAKE_PMU_MUX_NS", 1000000)));
    c.kernel_share = EnvDouble("LOCKLINE_FAKE_PMU_KERNEL_SHARE", 0.1);
    if (const char* l = std::getenv("LOCKLINE_FAKE_PMU_LOG")) c.log_path = l;
    std::ostringstream d;
    if (!c.present) {
      d << "no PMU (hardware events ENOENT)";
    } else {
      d << c.counters << " general + " << c.fixed
        << " fixed counters, multiplexing every " << c.mux_ns
        << " ns of CPU time, counts = rate x thread CPU time x (1 +/- "
        << c.wobble << "), cycles " << c.rates["cycles"] << "/ns, instructions "
        << c.rates["instructions"] << "/ns";
      if (!c.paranoid.empty()) d << ", refusing " << c.paranoid;
    }
    c.description = d.str();
    return c;
  }();
  return cfg;
}

// ---- the fake PMU's state (one mutex: opens, enables and reads are rare)

struct Event {
  int fd = -1;
  uint64_t id = 0;
  pid_t tid = 0;
  perf_event_attr attr{};
  Event* leader = nullptr;       // nullptr: this is a leader
  std::vector<Event*> siblings;  // for a leader
  bool enabled = false;
  double rate = 0;  // per ns of CPU time, after the user / kernel share
  int fixed = -1;   // fixed counter it can use, or -1
  double count = 0, truth = 0;
  uint64_t time_enabled = 0, time_running = 0;
  bool scheduled = false;  // in the current slice
};

struct ThreadCtx {
  uint64_t t_last = 0;  // CPU ns up to which counts are computed
  bool started = false;
  std::vector<Event*> groups;  // leaders, in rotation order
};

std::mutex mu;
std::map<int, Event*> events;         // fake fd -> event
std::map<pid_t, ThreadCtx> contexts;  // tid -> context
std::atomic<int> live_fakes{0};
uint64_t next_id = 1;
FILE* log_file = nullptr;

void Log(const std::string& line) {
  const Config& c = Cfg();
  if (c.log_path.empty()) return;
  if (log_file == nullptr) log_file = std::fopen(c.log_path.c_str(), "ae");
  if (log_file == nullptr) return;
  std::fprintf(log_file, "%s\n", line.c_str());
  std::fflush(log_file);
}

uint64_t ThreadCpuNs(pid_t tid, bool* ok) {
  const clockid_t clk =
      static_cast<clockid_t>((~static_cast<unsigned>(tid)) << 3) | 6;
  timespec ts{};
  if (clock_gettime(clk, &ts) != 0) {
    *ok = false;
    return 0;
  }
  *ok = true;
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

// Integral of the square wave (+1 on even half-periods, -1 on odd) from 0.
double WaveIntegral(uint64_t x) {
  const uint64_t h = Cfg().wobble_ns;
  const uint64_t k = x / h, r = x % h;
  return static_cast<double>(k % 2 == 0 ? r : h - r);
}

// Counters one group needs: {general, fixed mask}.
bool Fits(const std::vector<Event*>& members, int* general_left,
          unsigned* fixed_used) {
  int g = *general_left;
  unsigned f = *fixed_used;
  for (Event* e : members) {
    if (e->fixed >= 0 && e->fixed < Cfg().fixed && !(f & (1u << e->fixed))) {
      f |= 1u << e->fixed;
    } else if (g > 0) {
      --g;
    } else {
      return false;
    }
  }
  *general_left = g;
  *fixed_used = f;
  return true;
}

std::vector<Event*> Members(Event* leader, bool only_enabled) {
  std::vector<Event*> out;
  if (!only_enabled || leader->enabled) out.push_back(leader);
  for (Event* s : leader->siblings)
    if (!only_enabled || s->enabled) out.push_back(s);
  return out;
}

// Replays the thread's PMU from t_last to now.
void Advance(pid_t tid) {
  ThreadCtx& ctx = contexts[tid];
  bool ok = false;
  const uint64_t now = ThreadCpuNs(tid, &ok);
  if (!ok) return;  // thread gone: nothing counts any more
  if (!ctx.started) {
    ctx.started = true;
    ctx.t_last = now;
    return;
  }
  const Config& c = Cfg();
  const bool any_enabled =
      std::any_of(ctx.groups.begin(), ctx.groups.end(),
                  [](const Event* l) { return l->enabled; });
  if (!any_enabled) ctx.t_last = std::max(ctx.t_last, now);
  while (ctx.t_last < now) {
    const uint64_t a = ctx.t_last;
    const uint64_t slice_end = (a / c.mux_ns + 1) * c.mux_ns;
    const uint64_t b = std::min(slice_end, now);
    int general = c.counters;
    unsigned fixed = 0;
    bool can_add = true, left_off = false;
    for (Event* l : ctx.groups) {
      const std::vector<Event*> m = Members(l, true);
      for (Event* e : Members(l, false)) e->scheduled = false;
      if (!l->enabled || m.empty()) continue;
      if (can_add && Fits(m, &general, &fixed)) {
        for (Event* e : m) e->scheduled = true;
      } else {
        can_add = false;
        left_off = true;
      }
    }
    const double dt = static_cast<double>(b - a);
    const double w = dt + c.wobble * (WaveIntegral(b) - WaveIntegral(a));
    for (Event* l : ctx.groups) {
      if (!l->enabled) continue;
      for (Event* e : Members(l, true)) {
        e->time_enabled += b - a;
        e->truth += e->rate * w;
        if (e->scheduled) {
          e->time_running += b - a;
          e->count += e->rate * w;
        }
      }
    }
    ctx.t_last = b;
    if (b == slice_end && left_off && ctx.groups.size() > 1)
      std::rotate(ctx.groups.begin(), ctx.groups.begin() + 1, ctx.groups.end());
  }
}

int NeededGeneral(const std::vector<Event*>& members) {
  int general = 1 << 30;
  unsigned fixed = 0;
  Fits(members, &general, &fixed);
  return (1 << 30) - general;
}

std::string ErrName(int err) {
  switch (err) {
    case ENOENT:
      return "ENOENT";
    case EINVAL:
      return "EINVAL";
    case EACCES:
      return "EACCES";
    case EPERM:
      return "EPERM";
    default:
      return std::to_string(err);
  }
}

std::string AttrJson(const perf_event_attr& a) {
  std::ostringstream o;
  o << "\"type\":" << a.type << ",\"config\":" << a.config
    << ",\"exclude_user\":" << a.exclude_user
    << ",\"exclude_kernel\":" << a.exclude_kernel
    << ",\"exclude_hv\":" << a.exclude_hv << ",\"disabled\":" << a.disabled
    << ",\"inherit\":" << a.inherit << ",\"read_format\":" << a.read_format;
  return o.str();
}

double RateFor(const perf_event_attr& a) {
  const Config& c = Cfg();
  auto get = [&](const std::string& key, const std::string& fallback) {
    const auto it = c.rates.find(key);
    if (it != c.rates.end()) return it->second;
    return c.rates.at(fallback);
  };
  double r;
  std::ostringstream key;
  if (a.type == PERF_TYPE_HARDWARE) {
    r = c.rates.at(kHwNames[a.config]);
  } else if (a.type == PERF_TYPE_HW_CACHE) {
    key << "cache:0x" << std::hex << a.config;
    r = get(key.str(), "cache");
  } else {
    key << "raw:0x" << std::hex << a.config;
    r = get(key.str(), "raw");
  }
  const double share = a.exclude_user && a.exclude_kernel ? 0
                       : a.exclude_user                   ? c.kernel_share
                       : a.exclude_kernel                 ? 1 - c.kernel_share
                                                          : 1;
  return r * share;
}

int FixedCounterOf(const perf_event_attr& a) {
  if (a.type == PERF_TYPE_HARDWARE) {
    if (a.config == PERF_COUNT_HW_INSTRUCTIONS) return 0;
    if (a.config == PERF_COUNT_HW_CPU_CYCLES) return 1;
    if (a.config == PERF_COUNT_HW_REF_CPU_CYCLES) return 2;
  }
  if (a.type == PERF_TYPE_RAW) {  // Intel's INST_RETIRED.ANY_P / cycles
    if ((a.config & 0xffff) == 0x00c0) return 0;
    if ((a.config & 0xffff) == 0x003c) return 1;
  }
  return -1;
}

bool IsFakeType(uint32_t type) {
  return type == PERF_TYPE_HARDWARE || type == PERF_TYPE_HW_CACHE ||
         type == PERF_TYPE_RAW;
}

// The fake perf_event_open: returns an fd or -errno.
long FakeOpen(perf_event_attr* uattr, pid_t pid, int cpu, int group_fd,
              unsigned long flags) {
  const Config& c = Cfg();
  perf_event_attr a{};
  std::memcpy(&a, uattr,
              std::min<size_t>(uattr->size ? uattr->size : 64, sizeof(a)));
  std::lock_guard<std::mutex> lock(mu);
  const pid_t tid = pid == 0 ? gettid() : pid;
  auto fail = [&](int err) -> long {
    std::ostringstream o;
    o << "{\"op\":\"open\",\"tid\":" << tid << "," << AttrJson(a)
      << ",\"group_fd\":" << group_fd << ",\"result\":\"" << ErrName(err)
      << "\"}";
    Log(o.str());
    return -err;
  };
  if (c.paranoid == "eperm") return fail(EPERM);
  if (c.paranoid == "eacces") return fail(EACCES);
  if (c.paranoid == "kernel" && !a.exclude_kernel) return fail(EACCES);
  if (!c.present) return fail(ENOENT);
  if (cpu != -1 || a.inherit) return fail(EINVAL);  // lockline never asks
  const uint64_t known_formats = PERF_FORMAT_TOTAL_TIME_ENABLED |
                                 PERF_FORMAT_TOTAL_TIME_RUNNING |
                                 PERF_FORMAT_ID | PERF_FORMAT_GROUP;
  if (a.read_format & ~known_formats) return fail(EINVAL);
  if (a.type == PERF_TYPE_HARDWARE) {
    if (a.config >= static_cast<uint64_t>(kHwCount)) return fail(EINVAL);
    if (c.missing_hw.count(a.config)) return fail(ENOENT);
  } else if (a.type == PERF_TYPE_HW_CACHE) {
    if (c.missing_hw_cache) return fail(ENOENT);
  } else if (!c.any_raw && !c.raw.count(RawKey(a.config))) {
    return fail(ENOENT);
  }
  Event* leader = nullptr;
  if (group_fd >= 0) {
    const auto it = events.find(group_fd);
    if (it == events.end() || it->second->leader != nullptr ||
        it->second->tid != tid)
      return fail(EINVAL);
    leader = it->second;
  }
  auto* e = new Event;
  e->attr = a;
  e->tid = tid;
  e->leader = leader;
  e->enabled = !a.disabled;
  e->rate = RateFor(a);
  e->fixed = FixedCounterOf(a);
  if (leader != nullptr) {
    std::vector<Event*> m = Members(leader, false);
    m.push_back(e);
    if (NeededGeneral(m) > c.counters) {  // x86 validate_group: -EINVAL
      delete e;
      return fail(EINVAL);
    }
  }
  const int fd = eventfd(0, (flags & PERF_FLAG_FD_CLOEXEC) ? EFD_CLOEXEC : 0);
  if (fd < 0) {
    const int err = errno;
    delete e;
    return fail(err);
  }
  Advance(tid);  // counts so far under the old set of events
  e->fd = fd;
  e->id = next_id++;
  events[fd] = e;
  ++live_fakes;
  if (leader != nullptr) {
    leader->siblings.push_back(e);
  } else {
    contexts[tid].groups.push_back(e);
  }
  std::ostringstream o;
  o << "{\"op\":\"open\",\"fd\":" << fd << ",\"id\":" << e->id
    << ",\"tid\":" << tid << "," << AttrJson(a) << ",\"group_leader_id\":"
    << (leader ? static_cast<int64_t>(leader->id) : -1)
    << ",\"result\":\"ok\"}";
  Log(o.str());
  return fd;
}

Event* FindFake(int fd) {
  if (live_fakes.load(std::memory_order_relaxed) == 0) return nullptr;
  const auto it = events.find(fd);
  return it == events.end() ? nullptr : it->second;
}

// perf_event_open(2)'s read layout for `e`; -errno on failure.
ssize_t FakeRead(Event* e, void* buf, size_t n) {
  Advance(e->tid);
  const uint64_t rf = e->attr.read_format;
  std::vector<uint64_t> out;
  auto times = [&](const Event* x) {
    if (rf & PERF_FORMAT_TOTAL_TIME_ENABLED) out.push_back(x->time_enabled);
    if (rf & PERF_FORMAT_TOTAL_TIME_RUNNING) out.push_back(x->time_running);
  };
  if (rf & PERF_FORMAT_GROUP) {
    Event* l = e->leader != nullptr ? e->leader : e;
    const std::vector<Event*> m = Members(l, false);
    out.push_back(m.size());
    times(l);
    for (const Event* x : m) {
      out.push_back(static_cast<uint64_t>(x->count));
      if (rf & PERF_FORMAT_ID) out.push_back(x->id);
    }
  } else {
    out.push_back(static_cast<uint64_t>(e->count));
    times(e);
    if (rf & PERF_FORMAT_ID) out.push_back(e->id);
  }
  const size_t bytes = out.size() * sizeof(uint64_t);
  if (n < bytes) return -ENOSPC;
  std::memcpy(buf, out.data(), bytes);
  return static_cast<ssize_t>(bytes);
}

int FakeIoctl(Event* e, unsigned long request, unsigned long arg) {
  Advance(e->tid);
  std::vector<Event*> targets = {e};
  if (arg & PERF_IOC_FLAG_GROUP) {
    Event* l = e->leader != nullptr ? e->leader : e;
    targets = Members(l, false);
  }
  switch (request) {
    case PERF_EVENT_IOC_ENABLE:
      for (Event* t : targets) t->enabled = true;
      return 0;
    case PERF_EVENT_IOC_DISABLE:
      for (Event* t : targets) t->enabled = false;
      return 0;
    case PERF_EVENT_IOC_RESET:
      for (Event* t : targets) t->count = t->truth = 0;
      return 0;
    case PERF_EVENT_IOC_ID:
      *reinterpret_cast<uint64_t*>(arg) = e->id;
      return 0;
    default:
      return -EINVAL;
  }
}

void FakeClose(Event* e) {
  Advance(e->tid);
  std::ostringstream o;
  o.precision(17);
  o << "{\"op\":\"close\",\"id\":" << e->id << ",\"tid\":" << e->tid << ","
    << AttrJson(e->attr) << ",\"raw\":" << static_cast<uint64_t>(e->count)
    << ",\"time_enabled\":" << e->time_enabled
    << ",\"time_running\":" << e->time_running << ",\"truth\":" << e->truth
    << "}";
  Log(o.str());
  std::vector<Event*>& groups = contexts[e->tid].groups;
  if (e->leader != nullptr) {
    auto& sib = e->leader->siblings;
    sib.erase(std::remove(sib.begin(), sib.end(), e), sib.end());
  } else {
    // The kernel turns the siblings of a closed leader into singletons.
    auto it = std::find(groups.begin(), groups.end(), e);
    if (it != groups.end()) it = groups.erase(it);
    for (Event* s : e->siblings) {
      s->leader = nullptr;
      it = groups.insert(it, s) + 1;
    }
  }
  events.erase(e->fd);
  --live_fakes;
  delete e;
}

}  // namespace

extern "C" {

/// lockline's KernelHasHardwarePmu() asks this instead of sysfs.
__attribute__((visibility("default"))) int lockline_fake_pmu_present() {
  return Cfg().present ? 1 : 0;
}

/// Recorded by lockline in context.lockline.counters.fake_pmu.
__attribute__((visibility("default"))) const char*
lockline_fake_pmu_description() {
  return Cfg().description.c_str();
}

__attribute__((visibility("default"))) long syscall(long number, ...) noexcept {
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (long& x : a) x = va_arg(ap, long);
  va_end(ap);
  if (number == SYS_perf_event_open) {
    auto* attr = reinterpret_cast<perf_event_attr*>(a[0]);
    if (attr != nullptr && IsFakeType(attr->type)) {
      const long r =
          FakeOpen(attr, static_cast<pid_t>(a[1]), static_cast<int>(a[2]),
                   static_cast<int>(a[3]), static_cast<unsigned long>(a[4]));
      if (r < 0) {
        errno = static_cast<int>(-r);
        return -1;
      }
      return r;
    }
    if (attr != nullptr && static_cast<int>(a[3]) >= 0) {
      std::lock_guard<std::mutex> lock(mu);
      if (FindFake(static_cast<int>(a[3])) != nullptr) {
        errno = EINVAL;  // a software event cannot join a fake group here
        return -1;
      }
    }
  }
  return RealFns().syscall_fn(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

__attribute__((visibility("default"))) ssize_t read(int fd, void* buf,
                                                    size_t n) {
  if (live_fakes.load(std::memory_order_relaxed) != 0) {
    std::lock_guard<std::mutex> lock(mu);
    if (Event* e = FindFake(fd)) {
      const ssize_t r = FakeRead(e, buf, n);
      if (r < 0) {
        errno = static_cast<int>(-r);
        return -1;
      }
      return r;
    }
  }
  return RealFns().read_fn(fd, buf, n);
}

__attribute__((visibility("default"))) ssize_t __read_chk(int fd, void* buf,
                                                          size_t n,
                                                          size_t buflen) {
  if (live_fakes.load(std::memory_order_relaxed) != 0) {
    std::lock_guard<std::mutex> lock(mu);
    if (Event* e = FindFake(fd)) {
      const ssize_t r = FakeRead(e, buf, std::min(n, buflen));
      if (r < 0) {
        errno = static_cast<int>(-r);
        return -1;
      }
      return r;
    }
  }
  return RealFns().read_chk_fn(fd, buf, n, buflen);
}

__attribute__((visibility("default"))) int ioctl(int fd, unsigned long request,
                                                 ...) noexcept {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  if (live_fakes.load(std::memory_order_relaxed) != 0) {
    std::lock_guard<std::mutex> lock(mu);
    if (Event* e = FindFake(fd)) {
      const int r = FakeIoctl(e, request, reinterpret_cast<unsigned long>(arg));
      if (r < 0) {
        errno = -r;
        return -1;
      }
      return r;
    }
  }
  return RealFns().ioctl_fn(fd, request, arg);
}

__attribute__((visibility("default"))) int close(int fd) {
  if (live_fakes.load(std::memory_order_relaxed) != 0) {
    std::lock_guard<std::mutex> lock(mu);
    if (Event* e = FindFake(fd)) FakeClose(e);
  }
  return RealFns().close_fn(fd);
}

}  // extern "C"
