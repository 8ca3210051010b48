#include "harness/machine/memory.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <random>
#include <set>
#include <stdexcept>

#include "harness/machine/cpu.h"

namespace lockline {
namespace {

// "the <what> limit (RLIMIT_X, ulimit -y) is N<unit>" or "... is unlimited".
std::string Limit(int resource, const char* what, const char* unit) {
  struct rlimit rl {};
  std::string v = "unknown";
  if (getrlimit(resource, &rl) == 0)
    v = rl.rlim_cur == RLIM_INFINITY ? "unlimited"
                                     : std::to_string(rl.rlim_cur) + unit;
  return std::string(what) + " is " + v;
}

std::string ErrnoText(int err) {
  const char* name = strerrorname_np(err);
  return std::string(name ? name : "error") + " (" + std::strerror(err) + ")";
}

// hwloc object of logical NUMA node `logical`.
hwloc_obj_t NumaNode(const PointEnv& env, int logical) {
  if (!env.topology) return nullptr;
  return hwloc_get_obj_by_type(env.topology->raw(), HWLOC_OBJ_NUMANODE,
                               logical);
}

// A live AllocShared allocation (SharedRegionsJson's entry).
struct Region {
  std::size_t bytes = 0;
  std::string policy;
  std::vector<int> requested;  // hwloc logical NUMA nodes
  std::size_t offset = 0;      // sampled placement past the page start
};

// The live LayoutSampling's state (at most one): its generator and draws.
struct Sampler {
  std::mutex mu;
  bool active = false;
  bool sample = true;
  uint64_t seed = 0;
  std::mt19937_64 rng;
  nlohmann::json draws = nlohmann::json::array();
};
Sampler& TheSampler() {
  static Sampler s;
  return s;
}
struct Regions {
  std::mutex mu;
  std::map<const void*, Region> live;  // by address
};
Regions& TheRegions() {
  static Regions r;
  return r;
}

// Logical indices of the NUMA nodes in `set` (a nodeset).
std::vector<int> LogicalNodes(hwloc_topology_t topo, hwloc_const_bitmap_t set) {
  std::vector<int> out;
  hwloc_obj_t node = nullptr;
  while ((node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node)))
    if (hwloc_bitmap_isincluded(node->nodeset, set))
      out.push_back(static_cast<int>(node->logical_index));
  return out;
}

// SampleLayoutOffset with s.mu held; `record` (unless nullptr) gets its entry
// in the draws, valid while s.mu is held (nullptr: no draw).
std::size_t DrawOffset(Sampler& s, std::size_t step, std::size_t bytes,
                       nlohmann::json** record = nullptr) {
  if (!s.active || !s.sample || step == 0 || step >= LayoutSampling::kSpanBytes)
    return 0;
  // A structure that fits in a page stays inside its page (the offsets move
  // its lines' cache sets, not the number of pages it touches); a larger one
  // may start anywhere on the page.
  const std::size_t span = LayoutSampling::kSpanBytes;
  const std::size_t lines = (bytes + step - 1) / step * step;
  const std::size_t slots =
      lines <= span ? (span - lines) / step + 1 : span / step;
  const std::size_t offset =
      std::uniform_int_distribution<std::size_t>(0, slots - 1)(s.rng) * step;
  s.draws.push_back(
      {{"bytes", bytes}, {"step_bytes", step}, {"offset_bytes", offset}});
  if (record != nullptr) *record = &s.draws.back();
  return offset;
}

// A fresh anonymous mapping holding `bytes` at DrawOffset(step, bytes) past its
// start: base, length, offset, and the structure's address `at`.
struct SampledMapping {
  void* base = nullptr;
  std::size_t len = 0, offset = 0;
  void* at = nullptr;
  int skip_pages = 0;  // for FaultFirstPage
};

// Pages SkipFreePages may skip: 0 to 31.
constexpr uint64_t kSkipPagesSpan = 32;

// Draw `index` of the stream `stream` of the live sampler's seed (SplitMix64):
// apart from s.rng, so a build that draws more of these draws the same
// structure offsets as one that does not.
uint64_t SeededDraw(const Sampler& s, uint64_t stream, uint64_t index) {
  uint64_t z = s.seed ^ (stream * 0xd1b54a32d192ed03ULL);
  z += 0x9e3779b97f4a7c15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
constexpr uint64_t kStackStream = 1, kPageStream = 2;

// Faults in m's first page (the structure's, or its start) after skipping
// m.skip_pages free pages: by the calling thread, after any binding.
void FaultFirstPage(const SampledMapping& m) {
  if (m.skip_pages == 0) return;
  SkipFreePages skip(m.skip_pages);
  *static_cast<volatile char*>(m.base) = 0;
}

// Maps it and records the draw (and `what` unless nullptr) for the row's
// address_layout. Throws std::bad_alloc.
SampledMapping MapSampled(std::size_t bytes, std::size_t step,
                          const char* what) {
  Sampler& s = TheSampler();
  std::lock_guard<std::mutex> lk(s.mu);
  nlohmann::json* draw = nullptr;
  SampledMapping m;
  m.offset = DrawOffset(s, step, bytes, &draw);
  if (draw != nullptr) {
    m.skip_pages = static_cast<int>(SeededDraw(s, kPageStream, s.draws.size()) %
                                    kSkipPagesSpan);
    (*draw)["skip_pages"] = m.skip_pages;
  }
  m.len = RoundUpToPage((bytes == 0 ? 1 : bytes) + m.offset);
  m.base = mmap(nullptr, m.len, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m.base == MAP_FAILED) throw MapFailed(m.len, errno);
  m.at = static_cast<char*>(m.base) + m.offset;
  if (draw != nullptr) {
    char buf[32];
    std::snprintf(
        buf, sizeof buf, "0x%llx",
        static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(m.at)));
    (*draw)["address"] = buf;
    if (what != nullptr) (*draw)["what"] = what;
  }
  return m;
}

// Live AllocSampledObject allocations (address -> mapping base, length),
// leaked: static destruction may free.
struct Objects {
  std::mutex mu;
  std::map<const void*, std::pair<void*, std::size_t>> live;
};
Objects& TheObjects() {
  static auto* objects = new Objects;
  return *objects;
}

}  // namespace

void SharedDeleter::operator()(void* p) const {
  if (!p) return;
  {
    std::lock_guard<std::mutex> lk(TheRegions().mu);
    TheRegions().live.erase(p);
  }
  munmap(static_cast<char*>(p) - offset, bytes);
}

LayoutSampling::LayoutSampling(uint64_t seed, bool sample) {
  Sampler& s = TheSampler();
  std::lock_guard<std::mutex> lk(s.mu);
  if (s.active)
    throw std::logic_error("LayoutSampling: another one is already alive");
  s.active = true;
  s.sample = sample;
  s.seed = seed;
  s.rng.seed(seed);
  s.draws = nlohmann::json::array();
}

LayoutSampling::~LayoutSampling() {
  std::lock_guard<std::mutex> lk(TheSampler().mu);
  TheSampler().active = false;
}

nlohmann::json LayoutSampling::Json() const {
  Sampler& s = TheSampler();
  std::lock_guard<std::mutex> lk(s.mu);
  return {{"seed", s.seed},
          {"sampled", s.sample},
          {"span_bytes", kSpanBytes},
          {"allocations", s.draws}};
}

StackPlacement SampleStackPlacement(int index) {
  Sampler& s = TheSampler();
  std::lock_guard<std::mutex> lk(s.mu);
  if (!s.active || !s.sample) return {};
  const uint64_t z = SeededDraw(s, kStackStream, static_cast<uint64_t>(index));
  constexpr uint64_t kSlots = LayoutSampling::kSpanBytes / kDestructiveLine;
  const StackPlacement at{(z % kSlots) * kDestructiveLine,
                          static_cast<int>((z >> 32) % kSkipPagesSpan)};
  s.draws.push_back({{"what", "thread " + std::to_string(index) + " stack"},
                     {"step_bytes", kDestructiveLine},
                     {"offset_bytes", at.top_offset},
                     {"offset_from", "page end"},
                     {"skip_pages", at.skip_pages}});
  return at;
}

SkipFreePages::SkipFreePages(int pages) {
  if (pages <= 0) return;
  const std::size_t bytes = static_cast<std::size_t>(pages) * 4096;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return;
  for (std::size_t at = 0; at < bytes; at += 4096)
    static_cast<volatile char*>(p)[at] = 1;
  base_ = p;
  bytes_ = bytes;
}

SkipFreePages::~SkipFreePages() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

bool LiveLayoutSeed(uint64_t* seed) {
  Sampler& s = TheSampler();
  std::lock_guard<std::mutex> lk(s.mu);
  if (!s.active || !s.sample) return false;
  *seed = s.seed;
  return true;
}

std::size_t SampleLayoutOffset(std::size_t step, std::size_t bytes) {
  std::lock_guard<std::mutex> lk(TheSampler().mu);
  return DrawOffset(TheSampler(), step, bytes);
}

std::vector<int> NodesOfRange(const void* ptr, std::size_t bytes) {
  const long page = sysconf(_SC_PAGESIZE);
  if (!ptr || bytes == 0 || page <= 0) return {};
  const uintptr_t first = reinterpret_cast<uintptr_t>(ptr) /
                          static_cast<uintptr_t>(page) *
                          static_cast<uintptr_t>(page);
  const uintptr_t end = reinterpret_cast<uintptr_t>(ptr) + bytes;
  const std::size_t pages = (end - first + page - 1) / page;
  const std::size_t asked = std::min<std::size_t>(pages, 1024);
  std::vector<void*> addrs(asked);
  for (std::size_t i = 0; i < asked; ++i)
    addrs[i] = reinterpret_cast<void*>(first + (i * pages / asked) * page);
  std::vector<int> status(asked, -1);
  if (syscall(SYS_move_pages, 0, static_cast<unsigned long>(asked),
              addrs.data(), nullptr, status.data(), 0) != 0)
    return {};
  std::set<int> nodes;
  for (int s : status)
    if (s >= 0) nodes.insert(s);
  return {nodes.begin(), nodes.end()};
}

nlohmann::json SharedRegionsJson(const Topology* topo) {
  nlohmann::json out = nlohmann::json::array();
  std::lock_guard<std::mutex> lk(TheRegions().mu);
  for (const auto& [ptr, r] : TheRegions().live) {
    const std::vector<int> os = NodesOfRange(ptr, r.bytes - r.offset);
    std::vector<int> logical;
    for (int n : os) {
      hwloc_obj_t obj = topo ? hwloc_get_numanode_obj_by_os_index(
                                   topo->raw(), static_cast<unsigned>(n))
                             : nullptr;
      logical.push_back(obj ? static_cast<int>(obj->logical_index) : n);
    }
    out.push_back({{"bytes", r.bytes},
                   {"offset_bytes", r.offset},
                   {"policy", r.policy},
                   {"requested", r.requested},
                   {"nodes", logical},
                   {"os_nodes", os}});
  }
  return out;
}

void* AllocSampledObject(std::size_t bytes, std::size_t align,
                         const char* what) {
  const SampledMapping m = MapSampled(bytes, LayoutStep(align), what);
  FaultFirstPage(m);
  std::lock_guard<std::mutex> lk(TheObjects().mu);
  TheObjects().live[m.at] = {m.base, m.len};
  return m.at;
}

void FreeSampledObject(void* p) noexcept {
  std::unique_lock<std::mutex> lk(TheObjects().mu);
  const auto node = TheObjects().live.extract(p);
  lk.unlock();
  if (!node.empty()) munmap(node.mapped().first, node.mapped().second);
}

void* Workload::operator new(std::size_t bytes) {
  return AllocSampledObject(bytes, alignof(std::max_align_t));
}

void* Workload::operator new(std::size_t bytes, std::align_val_t align) {
  return AllocSampledObject(bytes, static_cast<std::size_t>(align));
}

void Workload::operator delete(void* p) noexcept { FreeSampledObject(p); }

void Workload::operator delete(void* p, std::align_val_t) noexcept {
  FreeSampledObject(p);
}

std::string AddressSpaceLimit() {
  return Limit(RLIMIT_AS, "the address-space limit (RLIMIT_AS, ulimit -v)",
               " bytes");
}

std::string MapFailure(std::size_t bytes, int err) {
  return "mmap of " + std::to_string(bytes) +
         " bytes failed: " + ErrnoText(err) + "; " + AddressSpaceLimit();
}

std::string ThreadFailure(const std::string& what, int err) {
  return "cannot create thread " + what + ": " + ErrnoText(err) + "; limits: " +
         Limit(RLIMIT_AS, "address space (RLIMIT_AS, ulimit -v)", " bytes") +
         ", " +
         Limit(RLIMIT_STACK, "each thread's stack (RLIMIT_STACK, ulimit -s)",
               " bytes") +
         ", " +
         Limit(RLIMIT_NPROC, "processes of this user (RLIMIT_NPROC, ulimit -u)",
               "") +
         " (the cgroup's pids.max and kernel.pid_max bound them too)";
}

void CheckMemPolicy(const std::string& policy) {
  if (policy == "first-touch" || policy == "local" || policy == "interleave")
    return;
  if (policy.rfind("node:", 0) == 0) {
    const std::string n = policy.substr(5);
    if (!n.empty() && n.size() < 6 &&
        n.find_first_not_of("0123456789") == std::string::npos)
      return;
  }
  throw std::invalid_argument(
      "bad --mem value '" + policy +
      "': accepted are first-touch, local, node:N (N a NUMA node "
      "logical index), interleave");
}

SharedPtr AllocShared(std::size_t bytes, const PointEnv& env,
                      std::size_t sample_step) {
  const SampledMapping m = MapSampled(bytes, sample_step, nullptr);
  SharedPtr mem(m.at, SharedDeleter{m.len, m.offset});
  const std::string& policy = env.mem_policy;
  Region region{m.len, policy.empty() ? "first-touch" : policy, {}, m.offset};
  if (!policy.empty() && policy != "first-touch" && env.topology &&
      env.topology->is_host()) {
    std::vector<int> nodes;  // logical; a PU of unknown node (-1): node 0
    if (policy == "local") {
      nodes = {env.plan && !env.plan->pus.empty() ? env.plan->pus[0].numa : 0};
    } else if (policy == "interleave") {
      if (env.plan)
        for (const PuInfo& pu : env.plan->pus) nodes.push_back(pu.numa);
    } else {  // node:N
      nodes = {std::stoi(policy.substr(5))};
      if (!NumaNode(env, nodes[0]))
        throw std::invalid_argument(
            "--mem=" + policy + ": this machine has NUMA nodes 0-" +
            std::to_string(env.topology->summary().numa_nodes - 1));
    }
    hwloc_topology_t topo = env.topology->raw();
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    for (int n : nodes)
      if (hwloc_obj_t obj = NumaNode(env, n < 0 ? 0 : n))
        hwloc_bitmap_or(set, set, obj->nodeset);
    region.requested = LogicalNodes(topo, set);
    static std::atomic<bool> warned{false};
    if (!hwloc_bitmap_iszero(set) &&
        hwloc_set_area_membind(
            topo, m.base, m.len, set,
            policy == "interleave" ? HWLOC_MEMBIND_INTERLEAVE
                                   : HWLOC_MEMBIND_BIND,
            HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_MIGRATE) != 0 &&
        !warned.exchange(true))
      std::fprintf(stderr,
                   "lockline: warning: --mem=%s not supported here (%s); "
                   "shared memory falls back to first-touch\n",
                   policy.c_str(), std::strerror(errno));
    hwloc_bitmap_free(set);
  }
  // First touch by the caller (or fault in on the bound node).
  FaultFirstPage(m);
  std::memset(m.base, 0, m.len);
  std::lock_guard<std::mutex> lk(TheRegions().mu);
  TheRegions().live[m.at] = std::move(region);
  return mem;
}

double TimeAnonymousFaultInNs(std::size_t bytes, int attempts,
                              bool with_unmap) {
  double best = 0;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 0;
    madvise(p, bytes, MADV_NOHUGEPAGE);
    auto* bytes_p = static_cast<volatile char*>(p);
    const uint64_t t0 = NowNs();
    for (std::size_t off = 0; off < bytes; off += 4096) bytes_p[off] = 1;
    if (with_unmap) munmap(p, bytes);
    const double ns = static_cast<double>(NowNs() - t0);
    if (!with_unmap) munmap(p, bytes);
    if (attempt == 0 || ns < best) best = ns;
  }
  return best;
}

double MeasureFaultInSecondsPerMiB(std::size_t mib) {
  return TimeAnonymousFaultInNs(mib << 20, 2, false) / 1e9 /
         static_cast<double>(mib);
}

}  // namespace lockline
