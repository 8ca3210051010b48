#include "harness/memory.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>

namespace lockline {
namespace {

std::size_t RoundUp(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

void WarnOnce(const std::string& what) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    std::fprintf(stderr, "lockline: warning: %s\n", what.c_str());
}

// hwloc object of the point's first PU's NUMA node, or of logical node `n`.
hwloc_obj_t NumaNode(const PointEnv& env, int logical) {
  if (!env.topology) return nullptr;
  return hwloc_get_obj_by_type(env.topology->raw(), HWLOC_OBJ_NUMANODE,
                               logical);
}

}  // namespace

void SharedDeleter::operator()(void* p) const {
  if (p) munmap(p, bytes);
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

SharedPtr AllocShared(std::size_t bytes, const PointEnv& env) {
  const std::size_t len = RoundUp(bytes == 0 ? 1 : bytes, 4096);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  SharedPtr mem(p, SharedDeleter{len});
  const std::string& policy = env.mem_policy;
  if (!policy.empty() && policy != "first-touch" && env.topology &&
      env.topology->is_host()) {
    hwloc_topology_t topo = env.topology->raw();
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    hwloc_membind_policy_t mp = HWLOC_MEMBIND_BIND;
    if (policy == "local") {
      int node =
          (env.plan && !env.plan->pus.empty()) ? env.plan->pus[0].numa : 0;
      if (hwloc_obj_t obj = NumaNode(env, node < 0 ? 0 : node))
        hwloc_bitmap_copy(set, obj->nodeset);
    } else if (policy == "interleave") {
      mp = HWLOC_MEMBIND_INTERLEAVE;
      if (env.plan)
        for (const PuInfo& pu : env.plan->pus)
          if (hwloc_obj_t obj = NumaNode(env, pu.numa < 0 ? 0 : pu.numa))
            hwloc_bitmap_or(set, set, obj->nodeset);
    } else {  // node:N
      const int n = std::stoi(policy.substr(5));
      hwloc_obj_t obj = NumaNode(env, n);
      if (!obj) {
        hwloc_bitmap_free(set);
        throw std::invalid_argument(
            "--mem=" + policy + ": this machine has NUMA nodes 0-" +
            std::to_string(env.topology->summary().numa_nodes - 1));
      }
      hwloc_bitmap_copy(set, obj->nodeset);
    }
    if (!hwloc_bitmap_iszero(set) &&
        hwloc_set_area_membind(
            topo, p, len, set, mp,
            HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_MIGRATE) != 0) {
      WarnOnce("--mem=" + policy + " not supported here (" +
               std::strerror(errno) +
               "); shared memory falls back to first-touch");
    }
    hwloc_bitmap_free(set);
  }
  std::memset(
      p, 0, len);  // first touch by the caller (or fault in on the bound node)
  return mem;
}

}  // namespace lockline
