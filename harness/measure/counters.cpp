// Each measured thread opens its own counters (pid 0, cpu -1, disabled);
// hardware events share a group (DecideGrouping), software ones are
// singletons. Reset() snapshots raw, time_enabled and time_running and Read()
// reports deltas: PERF_EVENT_IOC_RESET would zero the count but not the times.
#include "harness/measure/counters.h"

#include <dlfcn.h>
#include <perfmon/pfmlib_perf_event.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

namespace lockline {
namespace {

constexpr const char* kSysPmuDir = "/sys/bus/event_source/devices";

std::string LowerAscii(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string ErrnoName(int err) {
  static const std::pair<int, const char*> kNames[] = {
      {ENOENT, "ENOENT"}, {EOPNOTSUPP, "EOPNOTSUPP"}, {ENODEV, "ENODEV"},
      {EACCES, "EACCES"}, {EPERM, "EPERM"},           {EINVAL, "EINVAL"},
      {ENOSPC, "ENOSPC"}, {EBUSY, "EBUSY"},           {EMFILE, "EMFILE"},
      {ENFILE, "ENFILE"}, {E2BIG, "E2BIG"},           {ESRCH, "ESRCH"},
      {ENOSYS, "ENOSYS"}};
  for (const auto& [code, name] : kNames)
    if (err == code) return name;
  return "errno " + std::to_string(err);
}

// Where the event name starts: after a "pmu::" prefix, else 0.
size_t EventStart(const std::string& name) {
  const size_t sep = name.find("::");
  return sep == std::string::npos ? 0 : sep + 2;
}

std::string ParanoidText(int paranoid) {
  return paranoid == kParanoidUnreadable ? std::string("unreadable")
                                         : std::to_string(paranoid);
}

// "Privileged" for perf: euid 0, or CAP_PERFMON (38, Linux 5.8) or
// CAP_SYS_ADMIN (21) in /proc/self/status CapEff, which the kernel's
// perfmon_capable() accepts in place of perf_event_paranoid.
bool PerfPrivileged() {
  constexpr int kCapSysAdmin = 21, kCapPerfmon = 38;
  std::ifstream in("/proc/self/status");
  uint64_t caps = 0;
  for (std::string line; caps == 0 && std::getline(in, line);)
    if (line.rfind("CapEff:", 0) == 0)
      caps = std::strtoull(line.c_str() + 7, nullptr, 16);
  return geteuid() == 0 || (caps >> kCapPerfmon & 1) ||
         (caps >> kCapSysAdmin & 1);
}

// Opens `attr` on this thread with times (and ids: `group`) read: the leader,
// disabled, when `fds` is empty, else a member of fds[0]'s group; fd or -1.
int OpenInGroup(perf_event_attr attr, const std::vector<int>& fds, bool group) {
  attr.disabled = fds.empty() ? 1 : 0;
  attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED |
                     PERF_FORMAT_TOTAL_TIME_RUNNING |
                     (group ? PERF_FORMAT_GROUP : 0);
  return PerfEventOpen(&attr, 0, fds.empty() ? -1 : fds[0]);
}

// True when `attr` is of `type` with one of `configs`.
bool IsEvent(const perf_event_attr& attr, uint32_t type,
             std::initializer_list<uint64_t> configs) {
  return attr.type == type && std::find(configs.begin(), configs.end(),
                                        attr.config) != configs.end();
}

// task-clock and cpu-clock add up the thread's whole run time, whatever
// exclude_user / exclude_kernel say (kernel/events/core.c
// task_clock_event_update / cpu_clock_event_update).
bool IsSoftwareClock(const perf_event_attr& attr) {
  return IsEvent(attr, PERF_TYPE_SOFTWARE,
                 {PERF_COUNT_SW_TASK_CLOCK, PERF_COUNT_SW_CPU_CLOCK});
}

// cycles and instructions cannot be 0 over a window that counted user mode
// (the return from the enabling ioctl runs): a 0 is a broken (virtual) PMU.
// The portable names (`base` of a `portable` event) are checked alike.
bool MustBeNonZero(const perf_event_attr& attr, bool portable,
                   const std::string& base) {
  return !attr.exclude_user &&
         (IsEvent(attr, PERF_TYPE_HARDWARE,
                  {PERF_COUNT_HW_INSTRUCTIONS, PERF_COUNT_HW_CPU_CYCLES}) ||
          (portable && (base == "cycles" || base == "cpu-cycles" ||
                        base == "instructions")));
}

// The shim's exported functions (tests/fake_pmu), or nullptr in a normal run.
template <typename Fn>
Fn FakePmuFunction(const char* symbol) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, symbol));
}

int EnsurePfmInitialized() {
  static const int status = pfm_initialize();
  return status;
}

// A libpfm4 argument or info struct, zeroed, with its size set.
template <typename T>
T PfmStruct() {
  T t;
  std::memset(&t, 0, sizeof(t));
  t.size = sizeof(t);
  return t;
}

// Present libpfm4 PMUs of `type` joined by '/' (all: by ", ").
std::string PresentPmus(int type) {
  std::string out;
  int i;
  pfm_for_all_pmus(i) {
    auto info = PfmStruct<pfm_pmu_info_t>();
    if (pfm_get_pmu_info(static_cast<pfm_pmu_t>(i), &info) != PFM_SUCCESS)
      continue;
    if (!info.is_present || (type >= 0 && info.type != type)) continue;
    if (!out.empty()) out += type >= 0 ? "/" : ", ";
    out += info.name;
  }
  return out;
}

// Encodes `name` for perf_event at default privilege levels `dfl_plm`: the
// libpfm4 error; on success attr, the PMU, the fully qualified encoding and
// (when described) *event filled.
int Encode(const std::string& name, int dfl_plm, perf_event_attr* attr,
           std::string* pmu, std::string* fstr_out,
           pfm_event_info_t* event = nullptr) {
  std::memset(attr, 0, sizeof(*attr));
  char* fstr = nullptr;
  auto arg = PfmStruct<pfm_perf_encode_arg_t>();
  arg.attr = attr;
  arg.fstr = &fstr;
  const int ret = pfm_get_os_event_encoding(name.c_str(), dfl_plm,
                                            PFM_OS_PERF_EVENT_EXT, &arg);
  if (ret != PFM_SUCCESS) return ret;
  *fstr_out = fstr != nullptr ? fstr : "";
  std::free(fstr);
  auto info = PfmStruct<pfm_event_info_t>();
  auto pinfo = PfmStruct<pfm_pmu_info_t>();
  if (pfm_get_event_info(arg.idx, PFM_OS_PERF_EVENT_EXT, &info) ==
      PFM_SUCCESS) {
    if (event != nullptr) *event = info;
    if (pfm_get_pmu_info(info.pmu, &pinfo) == PFM_SUCCESS) *pmu = pinfo.name;
  }
  attr->size = sizeof(*attr);
  return PFM_SUCCESS;
}

// Modifiers libpfm4 accepts for `base_name`'s event, for error messages.
std::string AcceptedModifiers(const std::string& base_name) {
  perf_event_attr attr;
  std::string pmu, fstr;
  auto info = PfmStruct<pfm_event_info_t>();
  if (Encode(base_name, PFM_PLM0 | PFM_PLM3, &attr, &pmu, &fstr, &info) !=
          PFM_SUCCESS ||
      info.name == nullptr)
    return "u, k";
  std::string out;
  for (int a = 0; a < info.nattrs; ++a) {
    auto ai = PfmStruct<pfm_event_attr_info_t>();
    if (pfm_get_event_attr_info(info.idx, a, PFM_OS_PERF_EVENT_EXT, &ai) !=
        PFM_SUCCESS)
      continue;
    if (!out.empty()) out += ", ";
    out += ai.name;
    if (ai.type != PFM_ATTR_UMASK && ai.type != PFM_ATTR_MOD_BOOL) out += "=N";
  }
  return out;
}

// One requested event, decided at Create().
struct EventPlan {
  EventAvailability avail;
  perf_event_attr attr{};  // ready to open; only meaningful if available
  bool available = false;
  bool software = true;
  bool must_be_nonzero = false;
  bool grouped = false;  // member of the hardware group (DecideGrouping)
};

// State shared by the session and every thread's counters (which outlive it).
struct SessionState {
  std::vector<EventPlan> events;
  // Available hardware events grouped (EventPlan::grouped; DecideGrouping).
  bool group_hardware = false;
  std::string group_note;  // why they are not (all) grouped, if so
  std::string fake_pmu;    // the test shim's description, if it is loaded
  bool kernel_has_hw_pmu = false;
  int paranoid = kParanoidUnreadable;
  bool privileged = false;
  std::string cpu_pmu;  // libpfm4's CPU PMU model (from CPUID)

  mutable std::mutex mu;
  mutable std::set<std::string> reported;  // "event: cause" already reported
  mutable std::vector<nlohmann::json> problems;

  // Reports a run-time problem once per (event, cause) for the whole run.
  void ReportOnce(const std::string& event, const std::string& cause) const {
    std::lock_guard<std::mutex> lock(mu);
    if (!reported.insert(event + ": " + cause).second) return;
    problems.push_back({{"event", event}, {"cause", cause}});
    std::fprintf(stderr, "lockline: counters: %s: %s\n", event.c_str(),
                 cause.c_str());
  }
};

struct Baseline {
  uint64_t raw = 0, enabled = 0, running = 0;
};

// A leader fd with its members (one for a singleton), indexing events.
struct Unit {
  bool grouped = false;
  std::vector<int> fds;  // fds[0] is the leader
  std::vector<size_t> events;
  std::vector<Baseline> base;
};

class ThreadCountersImpl final : public ThreadCounters {
 public:
  /// `left_out_page_faults`: "" opens every available event, else the reason
  /// the page-fault software events read unavailable (not opened).
  explicit ThreadCountersImpl(std::shared_ptr<const SessionState> state,
                              std::string left_out_page_faults = "")
      : state_(std::move(state)),
        open_error_(state_->events.size()),
        left_out_(state_->events.size(), false),
        left_out_reason_(std::move(left_out_page_faults)) {
    std::vector<size_t> hardware;
    for (size_t i = 0; i < state_->events.size(); ++i) {
      const EventPlan& e = state_->events[i];
      if (!e.available) continue;
      // The page-fault software events (any name, any modifiers).
      if (!left_out_reason_.empty() && e.software &&
          IsEvent(e.attr, PERF_TYPE_SOFTWARE,
                  {PERF_COUNT_SW_PAGE_FAULTS, PERF_COUNT_SW_PAGE_FAULTS_MIN,
                   PERF_COUNT_SW_PAGE_FAULTS_MAJ})) {
        left_out_[i] = true;
        continue;
      }
      if (!e.software && e.grouped)
        hardware.push_back(i);
      else
        OpenUnit({i}, false);
    }
    if (!hardware.empty()) OpenUnit(hardware, true);
    // Hardware last on Start and first on Stop: the tightest window.
    std::stable_partition(units_.begin(), units_.end(), [&](const Unit& u) {
      return state_->events[u.events[0]].software;
    });
    Reset();
  }

  ~ThreadCountersImpl() override {
    for (Unit& u : units_) {
      // Members before the leader: closing a leader first turns its
      // enabled members into singletons that count until closed.
      for (auto it = u.fds.rbegin(); it != u.fds.rend(); ++it) close(*it);
    }
  }

  void Start() override {
    for (Unit& u : units_)
      ioctl(u.fds[0], PERF_EVENT_IOC_ENABLE,
            u.grouped ? PERF_IOC_FLAG_GROUP : 0);
  }

  void Stop() override {
    for (auto it = units_.rbegin(); it != units_.rend(); ++it)
      ioctl(it->fds[0], PERF_EVENT_IOC_DISABLE,
            it->grouped ? PERF_IOC_FLAG_GROUP : 0);
  }

  void Reset() override {
    for (Unit& u : units_) {
      std::string error;
      std::vector<Baseline> now = ReadUnit(u, &error);
      if (error.empty()) u.base = now;
    }
  }

  std::vector<CounterReading> Read() override {
    std::vector<CounterReading> out(state_->events.size());
    for (size_t i = 0; i < state_->events.size(); ++i) {
      const EventPlan& e = state_->events[i];
      out[i].name = e.avail.name;
      out[i].status = "unavailable";
      out[i].reason = left_out_[i]  ? left_out_reason_
                      : e.available ? open_error_[i]
                                    : e.avail.reason;
    }
    for (Unit& u : units_) {
      std::string error;
      std::vector<Baseline> now = ReadUnit(u, &error);
      for (size_t m = 0; m < u.events.size(); ++m) {
        const size_t i = u.events[m];
        const EventPlan& e = state_->events[i];
        if (!error.empty()) {
          out[i].reason = error;
          state_->ReportOnce(e.avail.name, error);
          continue;
        }
        const Baseline& b = u.base[m];
        CounterReading r = ClassifyReading(
            e.avail.name, now[m].raw - b.raw, now[m].enabled - b.enabled,
            now[m].running - b.running, e.must_be_nonzero);
        // A window that ran uncounted is a problem; no window yet is not.
        if (r.status == "unavailable" && r.time_enabled_ns > 0)
          state_->ReportOnce(e.avail.name, r.reason);
        out[i] = r;
      }
    }
    return out;
  }

 private:
  void OpenFailed(size_t i, int err) {
    const EventPlan& e = state_->events[i];
    open_error_[i] =
        "per-thread open failed: " +
        ExplainPerfOpenError(err, !e.software, !e.attr.exclude_kernel,
                             state_->kernel_has_hw_pmu, state_->paranoid);
    state_->ReportOnce(e.avail.name, open_error_[i]);
  }

  // A singleton or a group: leader disabled, members enabled (under it).
  void OpenUnit(const std::vector<size_t>& members, bool grouped) {
    Unit u;
    u.grouped = grouped;
    for (size_t i : members) {
      const int fd = OpenInGroup(state_->events[i].attr, u.fds, grouped);
      if (fd < 0) {
        OpenFailed(i, errno);
        continue;
      }
      u.fds.push_back(fd);
      u.events.push_back(i);
      u.base.push_back(Baseline{});
    }
    if (!u.fds.empty()) units_.push_back(std::move(u));
  }

  // Current (raw, enabled, running) of each member, or *error set.
  std::vector<Baseline> ReadUnit(const Unit& u, std::string* error) {
    std::vector<Baseline> out(u.events.size());
    // PERF_FORMAT_GROUP layout: nr, time_enabled, time_running, value[nr]; a
    // singleton's: value, time_enabled, time_running.
    std::vector<uint64_t> buf(u.grouped ? 3 + u.fds.size() : 3);
    const ssize_t n = read(u.fds[0], buf.data(), buf.size() * sizeof(uint64_t));
    if (n != static_cast<ssize_t>(buf.size() * sizeof(uint64_t)) ||
        (u.grouped && buf[0] != u.fds.size())) {
      *error = (u.grouped ? "group read failed: " : "read failed: ") +
               std::string(n < 0 ? std::strerror(errno) : "short read");
      return out;
    }
    for (size_t m = 0; m < u.fds.size(); ++m)
      out[m] = {buf[u.grouped ? 3 + m : 0], buf[1], buf[2]};
    return out;
  }

  std::shared_ptr<const SessionState> state_;
  std::vector<std::string> open_error_;  // per event: why its open failed
  std::vector<bool> left_out_;           // per event: not opened here
  std::string left_out_reason_;
  std::vector<Unit> units_;
};

// Rewrites perf's combined privilege modifiers (":uk", ":ku") into libpfm4's
// ":u:k" and reports whether the user chose the privilege levels explicitly.
std::string NormalizeModifiers(const std::string& name, bool* explicit_plm) {
  *explicit_plm = false;
  const size_t event_start = EventStart(name);
  std::string out = name.substr(0, event_start);
  std::stringstream rest(name.substr(event_start));
  std::string tok;
  bool first = true;
  while (std::getline(rest, tok, ':')) {
    if (!first) {
      if (tok == "uk" || tok == "ku") tok = "u:k";
      if (tok == "u" || tok == "k" || tok == "u:k") *explicit_plm = true;
      out += ':';
    }
    out += tok;
    first = false;
  }
  return out;
}

// Opens `attrs` on this thread (`group`: as one, the first leading) and closes
// them again; 0 or the first failure's errno.
int ProbeOpen(const std::vector<perf_event_attr>& attrs, bool group = false) {
  std::vector<int> fds;
  int err = 0;
  for (const perf_event_attr& attr : attrs) {
    const int fd = OpenInGroup(attr, fds, group);
    if (fd < 0) {
      err = errno;
      break;
    }
    fds.push_back(fd);
  }
  for (auto it = fds.rbegin(); it != fds.rend(); ++it) close(*it);
  return err;
}

class CounterSessionImpl final : public CounterSession {
 public:
  explicit CounterSessionImpl(const std::vector<std::string>& names)
      : state_(std::make_shared<SessionState>()) {
    SessionState& s = *state_;
    s.kernel_has_hw_pmu = KernelHasHardwarePmu();
    s.fake_pmu = FakePmuDescription();
    s.paranoid = PerfEventParanoid();
    s.privileged = PerfPrivileged();
    const int pfm = names.empty() ? PFM_SUCCESS : EnsurePfmInitialized();
    if (pfm == PFM_SUCCESS) s.cpu_pmu = PresentPmus(PFM_PMU_TYPE_CORE);
    for (const std::string& name : names) {
      EventPlan e;
      e.avail.name = name;
      e.avail.status = "unavailable";
      if (pfm != PFM_SUCCESS) {
        e.avail.reason =
            std::string("libpfm4 initialization failed: ") + pfm_strerror(pfm);
      } else {
        Plan(&e);
      }
      if (e.available) e.avail.status = "available";
      s.events.push_back(std::move(e));
    }
    DecideGrouping();
    availability_.reserve(s.events.size());
    for (const EventPlan& e : s.events) availability_.push_back(e.avail);
  }

  const std::vector<EventAvailability>& availability() const override {
    return availability_;
  }

  std::unique_ptr<ThreadCounters> OpenForThisThread() override {
    return std::make_unique<ThreadCountersImpl>(state_);
  }
  std::unique_ptr<ThreadCounters> OpenForThisThreadWithoutPageFaults(
      const std::string& why) override {
    return std::make_unique<ThreadCountersImpl>(
        state_, why.empty() ? std::string("left out") : why);
  }

  std::string SummaryLine() const override {
    if (availability_.empty()) return "counters: none requested";
    // (label, names) in order: "available", "available user-only (why)",
    // then "unavailable (why)" grouped by reason.
    std::vector<std::pair<std::string, std::string>> groups;
    for (const EventAvailability& a : availability_) {
      std::string label = a.status;
      if (!a.reason.empty()) label += " (" + a.reason + ")";
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& g) { return g.first == label; });
      if (it == groups.end())
        groups.emplace_back(label, a.name);
      else
        it->second += " " + a.name;
    }
    std::stable_partition(groups.begin(), groups.end(), [](const auto& g) {
      return g.first.rfind("available", 0) == 0;
    });
    std::string line = "counters:";
    for (size_t i = 0; i < groups.size(); ++i)
      line += (i == 0 ? " " : "; ") + groups[i].second + " " + groups[i].first;
    if (!state_->group_note.empty()) line += "; " + state_->group_note;
    if (!state_->fake_pmu.empty())
      line += "; FAKE PMU (test shim, not this CPU): " + state_->fake_pmu;
    return line;
  }

  nlohmann::json AvailabilityJson() const override {
    const SessionState& s = *state_;
    nlohmann::json events = nlohmann::json::array();
    for (const EventPlan& e : s.events) {
      nlohmann::json j = {{"name", e.avail.name},
                          {"status", e.avail.status},
                          {"reason", e.avail.reason},
                          {"pmu", e.avail.pmu},
                          {"exclude_kernel", e.avail.exclude_kernel},
                          {"exclude_user", e.avail.exclude_user},
                          {"encoding", e.avail.encoding}};
      if (!e.avail.via.empty()) j["via"] = e.avail.via;
      if (e.available) j["grouped"] = e.grouped;
      events.push_back(std::move(j));
    }
    nlohmann::json out = {
        {"events", events},
        {"kernel_hardware_pmu", s.kernel_has_hw_pmu},
        {"libpfm4_cpu_pmu", s.cpu_pmu},
        {"perf_event_paranoid", s.paranoid == kParanoidUnreadable
                                    ? nlohmann::json()
                                    : nlohmann::json(s.paranoid)},
        {"perf_privileged", s.privileged},
        {"hardware_group", s.group_hardware},
    };
    if (!s.group_note.empty()) out["hardware_group_note"] = s.group_note;
    if (!s.fake_pmu.empty()) out["fake_pmu"] = s.fake_pmu;
    std::lock_guard<std::mutex> lock(s.mu);
    out["problems"] = s.problems;
    return out;
  }

 private:
  // Encodes and probes one event, filling e->avail, e->attr and e->available.
  void Plan(EventPlan* e) {
    SessionState& s = *state_;
    bool explicit_plm = false;
    const std::string name = NormalizeModifiers(e->avail.name, &explicit_plm);
    int ret = Encode(name, PFM_PLM0 | PFM_PLM3, &e->attr, &e->avail.pmu,
                     &e->avail.encoding);
    bool portable = false;
    if (ret == PFM_ERR_NOTFOUND) {
      ret = EncodePortable(name, PFM_PLM0 | PFM_PLM3, &e->attr, &e->avail.pmu,
                           &e->avail.encoding, &e->avail.via);
      portable = ret != PFM_ERR_NOTFOUND;
    }
    if (ret == PFM_ERR_NOTFOUND) {
      const size_t sep = name.find("::");
      const std::string pmu =
          sep == std::string::npos ? s.cpu_pmu : name.substr(0, sep);
      e->avail.reason =
          "unknown event " + e->avail.name + " for PMU " +
          (pmu.empty() ? std::string("(none detected)") : pmu) +
          " (libpfm4: event not found; PMUs detected: " + PresentPmus(-1) + ")";
      return;
    }
    if (ret == PFM_ERR_ATTR || ret == PFM_ERR_ATTR_VAL ||
        ret == PFM_ERR_ATTR_SET || ret == PFM_ERR_UMASK ||
        ret == PFM_ERR_FEATCOMB) {
      const std::string base = name.substr(0, name.find(':', EventStart(name)));
      throw CounterSpecError("--events: bad modifier in '" + e->avail.name +
                             "' (libpfm4: " + pfm_strerror(ret) +
                             "); accepted modifiers for " + base + ": " +
                             AcceptedModifiers(base) +
                             " (u = user only, k = kernel only, u:k = both)");
    }
    if (ret != PFM_SUCCESS) {
      e->avail.reason =
          std::string("libpfm4 cannot encode it: ") + pfm_strerror(ret);
      return;
    }
    e->software = e->attr.type == PERF_TYPE_SOFTWARE ||
                  e->attr.type == PERF_TYPE_TRACEPOINT;
    // A clock cannot be split into user and kernel time: refuse the half.
    if (IsSoftwareClock(e->attr) && explicit_plm &&
        e->attr.exclude_user != e->attr.exclude_kernel) {
      const std::string base = name.substr(0, name.find(':'));
      throw CounterSpecError(
          "--events: '" + e->avail.name + "': " + base +
          " is a software clock: the kernel adds up the thread's whole run "
          "time (user and kernel) whatever :u / :k say, so it cannot count "
          "one mode only; accepted: " +
          base + " or " + base + ":u:k (user + kernel)");
    }
    int err = ProbeOpen({e->attr});
    std::string refused;  // kernel counting refused: fell back to user only
    if (err == EACCES && !explicit_plm && !e->attr.exclude_kernel) {
      std::string pmu, via;
      if ((portable ? EncodePortable(name, PFM_PLM3, &e->attr, &pmu,
                                     &e->avail.encoding, &via)
                    : Encode(name, PFM_PLM3, &e->attr, &pmu,
                             &e->avail.encoding)) == PFM_SUCCESS) {
        refused = ExplainPerfOpenError(EACCES, !e->software, true,
                                       s.kernel_has_hw_pmu, s.paranoid);
        err = ProbeOpen({e->attr});
      }
    }
    e->avail.exclude_kernel = e->attr.exclude_kernel;
    e->avail.exclude_user = e->attr.exclude_user;
    if (err != 0) {
      e->avail.reason =
          ExplainPerfOpenError(err, !e->software, !e->attr.exclude_kernel,
                               s.kernel_has_hw_pmu, s.paranoid);
      return;
    }
    // context-switches and cpu-migrations are counted from kernel context
    // (the scheduler), so with exclude_kernel they open fine and always read 0.
    if (e->attr.exclude_kernel && IsEvent(e->attr, PERF_TYPE_SOFTWARE,
                                          {PERF_COUNT_SW_CONTEXT_SWITCHES,
                                           PERF_COUNT_SW_CPU_MIGRATIONS})) {
      e->avail.reason =
          (refused.empty() ? std::string("user mode only (:u)") : refused) +
          "; user-only it opens but always reads 0 (the scheduler counts it in "
          "kernel mode)";
      return;
    }
    e->available = true;
    e->must_be_nonzero = MustBeNonZero(
        e->attr, portable, LowerAscii(name.substr(0, name.find(':'))));
    if (!refused.empty())
      e->avail.reason =
          IsSoftwareClock(e->attr)
              ? "counts user + kernel time all the same (a software clock "
                "ignores exclude_kernel, set only to pass the permission "
                "check): " +
                    refused
              : "user mode only: " + refused;
  }

  // Second chance for a name libpfm4 did not find: perf's generic software
  // events and the portable hardware names on the core PMU; else
  // PFM_ERR_NOTFOUND.
  int EncodePortable(const std::string& name, int dfl_plm,
                     perf_event_attr* attr, std::string* pmu, std::string* fstr,
                     std::string* via) {
    if (name.find("::") != std::string::npos) return PFM_ERR_NOTFOUND;
    const size_t colon = name.find(':');
    const std::string base = name.substr(0, colon);
    const std::string mods =
        colon == std::string::npos ? "" : name.substr(colon + 1);
    const int sw = GenericSoftwareEvent(base);
    if (sw >= 0) {
      bool u = false, k = false;
      std::stringstream in(mods);
      std::string tok;
      while (!mods.empty() && std::getline(in, tok, ':')) {
        if (tok != "u" && tok != "k") return PFM_ERR_ATTR;
        (tok == "u" ? u : k) = true;
      }
      if (!u && !k) {
        u = (dfl_plm & PFM_PLM3) != 0;
        k = (dfl_plm & PFM_PLM0) != 0;
      }
      std::memset(attr, 0, sizeof(*attr));
      attr->size = sizeof(*attr);
      attr->type = PERF_TYPE_SOFTWARE;
      attr->config = static_cast<uint64_t>(sw);
      attr->exclude_user = !u;
      attr->exclude_kernel = !k;
      *pmu = "perf";
      *fstr =
          "perf::" + base + ":u=" + (u ? "1" : "0") + ":k=" + (k ? "1" : "0");
      *via =
          "generic software event encoded by lockline (PERF_TYPE_SOFTWARE "
          "config " +
          std::to_string(sw) + "): libpfm4's perf PMU is not active";
      return PFM_SUCCESS;
    }
    const std::string core =
        state_->cpu_pmu.substr(0, state_->cpu_pmu.find('/'));
    int first_error = PFM_ERR_NOTFOUND;
    for (const std::string& cand : PortableEventCandidates(base, core)) {
      std::string p;
      const int ret = Encode(cand + (mods.empty() ? "" : ":" + mods), dfl_plm,
                             attr, &p, fstr);
      if (ret == PFM_SUCCESS) {
        *pmu = p;
        *via = "portable name " + base + " = " + cand + " on PMU " + core;
        return PFM_SUCCESS;
      }
      // A candidate this PMU has, rejecting the user's modifier: say so.
      perf_event_attr probe;
      std::string ignore_pmu, ignore_fstr;
      if (first_error == PFM_ERR_NOTFOUND && !mods.empty() &&
          Encode(cand, dfl_plm, &probe, &ignore_pmu, &ignore_fstr) ==
              PFM_SUCCESS) {
        first_error = ret;
      }
    }
    return first_error;
  }

  // Groups the available hardware events if the PMU takes them as one group;
  // if it refuses (EINVAL / ENOSPC: more events than counters), cycles and
  // instructions stay a group (IPC over the same time), the rest singletons
  // the kernel multiplexes: reported, never dropped. Not the largest group
  // that fits: the kernel schedules flexible groups in list order and stops
  // at the first that does not fit (kernel/events/core.c group_can_go_on), so
  // such a group runs only while it heads the rotated list (docs/counters.md).
  void DecideGrouping() {
    SessionState& s = *state_;
    std::vector<EventPlan*> hw;
    for (EventPlan& e : s.events)
      if (e.available && !e.software) hw.push_back(&e);
    if (hw.empty()) return;
    const int err = hw.size() == 1 ? 0 : TryGroup(hw);
    if (err == 0) {
      for (EventPlan* e : hw) e->grouped = true;
      s.group_hardware = true;
      return;
    }
    const auto first = [&](std::initializer_list<const char*> names,
                           const std::string* mods) -> EventPlan* {
      for (EventPlan* e : hw)
        for (const char* n : names)
          if (EventBaseName(e->avail.name) == n &&
              (mods == nullptr || EventModifiers(e->avail.name) == *mods))
            return e;
      return nullptr;
    };
    EventPlan* instructions = first({"instructions"}, nullptr);
    EventPlan* cycles = nullptr;
    if (instructions != nullptr) {
      const std::string mods = EventModifiers(instructions->avail.name);
      cycles = first({"cycles", "cpu-cycles"}, &mods);
      if (cycles == nullptr) cycles = first({"cycles", "cpu-cycles"}, nullptr);
    }
    const std::string refused =
        "the PMU refused all " + std::to_string(hw.size()) +
        " hardware events as one group (" + ErrnoName(err) + ")";
    if (cycles != nullptr && TryGroup({cycles, instructions}) == 0) {
      cycles->grouped = instructions->grouped = true;
      s.group_hardware = true;
      s.group_note = refused + ": " + cycles->avail.name + " and " +
                     instructions->avail.name +
                     " are grouped (IPC over the same time), the others are "
                     "counted separately, so they may be multiplexed";
      return;
    }
    s.group_note = refused +
                   ": hardware events counted separately, so they may be "
                   "multiplexed";
  }

  // Opens `hw` (in order, the first as leader) as one group; 0 or errno.
  static int TryGroup(const std::vector<EventPlan*>& hw) {
    std::vector<perf_event_attr> attrs;
    for (const EventPlan* e : hw) attrs.push_back(e->attr);
    return ProbeOpen(attrs, true);
  }

  std::shared_ptr<SessionState> state_;
  std::vector<EventAvailability> availability_;
};

bool ValidNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
         c == ':' || c == '=' || c == '-';
}

}  // namespace

std::vector<std::string> ParseEventList(const std::string& spec) {
  const std::string accepted =
      "accepted: default, none, or a comma-separated list of libpfm4 / perf "
      "list event names with optional :u / :k modifiers (e.g. "
      "cycles,instructions:u,page-faults)";
  std::vector<std::string> items;
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t b = item.find_first_not_of(" \t");
    const size_t e = item.find_last_not_of(" \t");
    items.push_back(b == std::string::npos ? "" : item.substr(b, e - b + 1));
  }
  if (spec.empty() || spec.back() == ',') items.push_back("");
  std::vector<std::string> out;
  const auto add = [&](const std::string& name) {
    if (std::find(out.begin(), out.end(), name) != out.end())
      throw CounterSpecError("--events='" + spec + "': event '" + name +
                             "' listed twice; " + accepted);
    out.push_back(name);
  };
  for (const std::string& name : items) {
    if (name.empty())
      throw CounterSpecError("--events='" + spec + "': empty event name; " +
                             accepted);
    if (name == "none") {
      if (items.size() != 1)
        throw CounterSpecError("--events='" + spec +
                               "': 'none' cannot be combined with events; " +
                               accepted);
      return {};
    }
    if (name == "default") {
      for (const char* d : kDefaultEvents) add(d);
      continue;
    }
    for (char c : name)
      if (!ValidNameChar(c))
        throw CounterSpecError("--events: bad character '" + std::string(1, c) +
                               "' in '" + name + "'; " + accepted);
    // "pmu::" is libpfm4's PMU prefix; any other empty ':' field is a typo.
    const std::string event = name.substr(EventStart(name));
    if (name.rfind("::", 0) == 0 || event.empty() || event.front() == ':' ||
        event.back() == ':' || event.find("::") != std::string::npos) {
      throw CounterSpecError("--events: empty event name or modifier in '" +
                             name + "'; " + accepted);
    }
    add(name);
  }
  return out;
}

std::string EventBaseName(const std::string& name) {
  const size_t start = EventStart(name);
  return LowerAscii(name.substr(start, name.find(':', start) - start));
}

std::string EventModifiers(const std::string& name) {
  const size_t colon = name.find(':', EventStart(name));
  return colon == std::string::npos ? "" : name.substr(colon);
}

std::string FakePmuDescription() {
  using Fn = const char* (*)();
  const Fn fn = FakePmuFunction<Fn>("lockline_fake_pmu_description");
  const char* d = fn != nullptr ? fn() : nullptr;
  return d != nullptr ? d : "";
}

int GenericSoftwareEvent(const std::string& base) {
  static const std::map<std::string, int> kSoftware = {
      {"cpu-clock", PERF_COUNT_SW_CPU_CLOCK},
      {"task-clock", PERF_COUNT_SW_TASK_CLOCK},
      {"page-faults", PERF_COUNT_SW_PAGE_FAULTS},
      {"faults", PERF_COUNT_SW_PAGE_FAULTS},
      {"context-switches", PERF_COUNT_SW_CONTEXT_SWITCHES},
      {"cs", PERF_COUNT_SW_CONTEXT_SWITCHES},
      {"cpu-migrations", PERF_COUNT_SW_CPU_MIGRATIONS},
      {"migrations", PERF_COUNT_SW_CPU_MIGRATIONS},
      {"minor-faults", PERF_COUNT_SW_PAGE_FAULTS_MIN},
      {"major-faults", PERF_COUNT_SW_PAGE_FAULTS_MAJ},
      {"alignment-faults", PERF_COUNT_SW_ALIGNMENT_FAULTS},
      {"emulation-faults", PERF_COUNT_SW_EMULATION_FAULTS}};
  const auto it = kSoftware.find(LowerAscii(base));
  return it == kSoftware.end() ? -1 : it->second;
}

std::vector<std::string> PortableEventCandidates(const std::string& base,
                                                 const std::string& pmu) {
  if (pmu.empty()) return {};
  std::string b = LowerAscii(base);
  if (b == "cpu-cycles") b = "cycles";
  if (b == "branch-instructions") b = "branches";
  const bool amd = pmu.rfind("amd64_fam17h", 0) == 0 ||
                   pmu.rfind("amd64_fam19h", 0) == 0 ||
                   pmu.rfind("amd64_fam1ah", 0) == 0;
  // Intel: the kernel's intel_perfmon_event_map (linux
  // arch/x86/events/intel/core.c): cycles 0x003c, instructions 0x00c0,
  // cache-references 0x4f2e, cache-misses 0x412e, branches 0x00c4,
  // branch-misses 0x00c5; the architectural names (LLC_MISSES ...) last.
  static const std::map<std::string, std::vector<std::string>> kIntel = {
      {"cycles", {"UNHALTED_CORE_CYCLES"}},
      {"instructions", {"INSTRUCTION_RETIRED"}},
      {"cache-references", {"LONGEST_LAT_CACHE:REFERENCE", "LLC_REFERENCES"}},
      {"cache-misses", {"LONGEST_LAT_CACHE:MISS", "LLC_MISSES"}},
      {"branches",
       {"BR_INST_RETIRED:ALL_BRANCHES", "BRANCH_INSTRUCTIONS_RETIRED"}},
      {"branch-misses",
       {"BR_MISP_RETIRED:ALL_BRANCHES", "MISPREDICTED_BRANCH_RETIRED"}},
      {"llc-load-misses",
       {"MEM_LOAD_RETIRED:L3_MISS", "MEM_LOAD_UOPS_RETIRED:L3_MISS",
        "LONGEST_LAT_CACHE:MISS"}},
      // Loads that hit a modified line in another core's cache: named
      // XSNP_HITM up to Ice Lake (MEM_LOAD_UOPS_* before Skylake), XSNP_FWD
      // from Sapphire Rapids on.
      {"hitm",
       {"MEM_LOAD_L3_HIT_RETIRED:XSNP_HITM", "MEM_LOAD_L3_HIT_RETIRED:XSNP_FWD",
        "MEM_LOAD_UOPS_L3_HIT_RETIRED:XSNP_HITM",
        "MEM_LOAD_UOPS_LLC_HIT_RETIRED:XSNP_HITM"}},
  };
  // AMD Zen: amd_zen2_perfmon_event_map (linux arch/x86/events/amd/core.c):
  // cycles 0x0076, instructions 0x00c0, cache-references 0xff60,
  // cache-misses 0x0964, branches 0x00c2, branch-misses 0x00c3. Zen has no
  // HITM event in the core PMU: `hitm` is the demand fills from another CCX's
  // cache (cache-to-cache, clean or modified).
  static const std::map<std::string, std::vector<std::string>> kAmd = {
      {"cycles", {"CYCLES_NOT_IN_HALT"}},
      {"instructions", {"RETIRED_INSTRUCTIONS"}},
      {"cache-references",
       {"REQUESTS_TO_L2_GROUP1:RD_BLK_L:RD_BLK_X:LS_RD_BLK_C_S:CACHEABLE_IC_"
        "READ:CHANGE_TO_X:PREFETCH_L2_CMD:L2_HW_PF:MISC"}},
      {"cache-misses",
       {"CORE_TO_L2_CACHEABLE_REQUEST_ACCESS_STATUS:LS_RD_BLK_C:IC_FILL_MISS"}},
      {"branches", {"RETIRED_BRANCH_INSTRUCTIONS"}},
      {"branch-misses", {"RETIRED_BRANCH_INSTRUCTIONS_MISPREDICTED"}},
      {"llc-load-misses",
       {"DEMAND_DATA_CACHE_FILLS_FROM_SYSTEM:NEAR_CACHE_NEAR_FAR:DRAM_IO_NEAR:"
        "FAR_CACHE_NEAR_FAR:DRAM_IO_FAR",
        "DEMAND_DATA_CACHE_FILLS_FROM_SYSTEM:EXT_CACHE_LCL:MEM_IO_LCL:EXT_"
        "CACHE_RMT:MEM_IO_RMT",
        "DATA_CACHE_REFILLS_FROM_SYSTEM:LS_MABRESP_LCL_CACHE:LS_MABRESP_LCL_"
        "DRAM:LS_MABRESP_RMT_CACHE:LS_MABRESP_RMT_DRAM"}},
      {"hitm",
       {"DEMAND_DATA_CACHE_FILLS_FROM_SYSTEM:NEAR_CACHE_NEAR_FAR:FAR_CACHE_"
        "NEAR_FAR",
        "DEMAND_DATA_CACHE_FILLS_FROM_SYSTEM:EXT_CACHE_LCL:EXT_CACHE_RMT",
        // Zen 2 (fam17h): data-cache refills from another CCX's cache.
        "DATA_CACHE_REFILLS_FROM_SYSTEM:LS_MABRESP_LCL_CACHE:LS_MABRESP_RMT_"
        "CACHE"}},
  };
  const auto& table = amd ? kAmd : kIntel;
  const auto it = table.find(b);
  if (it == table.end()) return {};
  std::vector<std::string> out;
  for (const std::string& c : it->second) out.push_back(pmu + "::" + c);
  return out;
}

bool KernelHasHardwarePmu() {
  using Fn = int (*)();
  if (const Fn fake = FakePmuFunction<Fn>("lockline_fake_pmu_present"))
    return fake() != 0;
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator(kSysPmuDir, ec)) {
    const std::string n = entry.path().filename().string();
    if (n == "cpu" || n.rfind("cpu_", 0) == 0 || n.rfind("armv8_", 0) == 0 ||
        n.rfind("armv7_", 0) == 0 || n == "cpum_cf")
      return true;
  }
  return false;
}

int PerfEventOpen(perf_event_attr* attr, pid_t pid, int group_fd) {
  return static_cast<int>(
      perf_event_open(attr, pid, -1, group_fd, PERF_FLAG_FD_CLOEXEC));
}

int PerfEventParanoid() {
  std::ifstream in("/proc/sys/kernel/perf_event_paranoid");
  int value;
  if (in >> value) return value;
  return kParanoidUnreadable;
}

std::string ExplainPerfOpenError(int err, bool hardware, bool kernel_counting,
                                 bool kernel_has_hw_pmu, int paranoid) {
  const std::string code = ErrnoName(err);
  switch (err) {
    case ENOENT:
    case EOPNOTSUPP:
    case ENODEV:
      if (hardware && !kernel_has_hw_pmu)
        return "no hardware PMU exposed by the kernel (VM without vPMU?): "
               "perf_event_open " +
               code + " and no " + std::string(kSysPmuDir) + "/cpu";
      return "the kernel does not support this event on this machine "
             "(perf_event_open " +
             code + ")";
    case EACCES:
      if (kernel_counting)
        return "kernel counting refused (EACCES): perf_event_paranoid=" +
               ParanoidText(paranoid) +
               "; counting the kernel needs perf_event_paranoid <= 1 or "
               "CAP_PERFMON";
      return "perf_event_open refused even user-only (EACCES): "
             "perf_event_paranoid=" +
             ParanoidText(paranoid) +
             " (3 forbids unprivileged perf on Debian kernels; needs <= 2 "
             "or CAP_PERFMON)";
    case EPERM:
      return "perf_event_open refused (EPERM): seccomp filter (a container's "
             "default profile blocks it) or missing CAP_PERFMON / "
             "CAP_SYS_ADMIN in a container";
    case EMFILE:
    case ENFILE:
      return "out of file descriptors (" + code +
             "): raise ulimit -n (one fd per event per thread)";
    case EBUSY:
      return "PMU busy (EBUSY): another user holds the counters exclusively";
    case ENOSYS:
      return "perf_event_open not implemented by this kernel (ENOSYS)";
    default:
      return "perf_event_open failed (" + code + ": " + std::strerror(err) +
             ")";
  }
}

std::unique_ptr<CounterSession> CounterSession::Create(
    const std::string& spec) {
  return std::make_unique<CounterSessionImpl>(ParseEventList(spec));
}

}  // namespace lockline
