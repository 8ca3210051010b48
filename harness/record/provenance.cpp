#include "harness/record/provenance.h"

#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <limits.h>
#include <perfmon/pfmlib.h>
#include <sys/klog.h>
#include <sys/personality.h>
#include <sys/utsname.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "harness/machine/cgroup.h"
#include "harness/measure/kernel_probe.h"
#include "lockline_version.h"

namespace lockline {
namespace {

std::string CpuInfoField(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (line.rfind(key, 0) != 0 || colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  }
  return "";
}

// The hypervisor's CPUID vendor signature (leaf 0x40000000), "" if none.
std::string HypervisorSignature() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0x40000000, b = 0, c = 0, d = 0;
  asm volatile("cpuid" : "+a"(a), "=b"(b), "=c"(c), "=d"(d));
  char sig[13] = {};
  std::memcpy(sig, &b, 4);
  std::memcpy(sig + 4, &c, 4);
  std::memcpy(sig + 8, &d, 4);
  std::string s(sig);
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
#else
  return "";
#endif
}

// The kernel log's "Hypervisor detected: <name>" (arch/x86/kernel/cpu/
// hypervisor.c init_hypervisor_platform) via klogctl; "" and `why` if unread.
std::string KernelLogHypervisor(std::string* why) {
  const int size = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, nullptr, 0);
  if (size <= 0) {
    *why = std::string("kernel log size unknown: ") + std::strerror(errno);
    return "";
  }
  std::string buf(static_cast<std::size_t>(size), '\0');
  const int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf.data(), size);
  if (n < 0) {
    *why = std::string(
               "kernel log not readable (kernel.dmesg_restrict needs "
               "CAP_SYSLOG): ") +
           std::strerror(errno);
    return "";
  }
  buf.resize(static_cast<std::size_t>(n));
  static const std::string kLine = "Hypervisor detected: ";
  const auto at = buf.find(kLine);
  if (at == std::string::npos) {
    *why = "the kernel log holds no \"" + kLine +
           "\" line (none detected, or the boot lines were overwritten)";
    return "";
  }
  const auto from = at + kLine.size();
  return buf.substr(from, buf.find('\n', from) - from);
}

std::string KernelCmdlineValue(const std::string& key) {
  std::istringstream in(ReadSmallFile("/proc/cmdline"));
  std::string tok;
  while (in >> tok)
    if (tok.rfind(key + "=", 0) == 0) return tok.substr(key.size() + 1);
  return "";
}

using nlohmann::json;

// The version in the file name of the library holding `symbol` ("4.13.0"),
// or "unknown (PATH)".
std::string LibraryFileVersion(void* symbol) {
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "unknown";
  char resolved[PATH_MAX];
  const char* path = realpath(info.dli_fname, resolved);
  const std::string file = path ? path : info.dli_fname;
  const size_t so = file.rfind(".so.");
  if (so == std::string::npos) return "unknown (" + file + ")";
  const std::string v = file.substr(so + 4);
  if (v.empty() || v.find_first_not_of("0123456789.") != std::string::npos)
    return "unknown (" + file + ")";
  return v;
}

// Library versions: hwloc's runtime API version beside the headers' (hwloc
// 2.9 has no runtime release number).
json LibraryVersions() {
  const auto dotted = [](unsigned v) {
    return std::to_string(v >> 16) + "." + std::to_string((v >> 8) & 0xff) +
           "." + std::to_string(v & 0xff);
  };
  const unsigned hw = hwloc_get_api_version();
  const int pfm = pfm_get_version();
  return {{"google_benchmark", LOCKLINE_GBENCH_VERSION},
          {"hwloc", HWLOC_VERSION},
          {"hwloc_api_runtime", dotted(hw)},
          {"hwloc_api_header", dotted(HWLOC_API_VERSION)},
          // pfm_get_version() is the API's (4.0 in every libpfm4); the package
          // version is the loaded file's (libpfm.so.4.13.0 -> 4.13.0).
          {"libpfm4_api", std::to_string(PFM_MAJ_VERSION(pfm)) + "." +
                              std::to_string(PFM_MIN_VERSION(pfm))},
          {"libpfm4",
           LibraryFileVersion(reinterpret_cast<void*>(&pfm_get_version))},
          {"glibc", gnu_get_libc_version()}};
}

// Per-kind facts (hybrid CPUs): efficiency rank, PUs and hwloc's infos
// (FrequencyMaxMHz, FrequencyBaseMHz, CoreType, ...).
json CpuKindsJson(const Topology& topo) {
  json kinds = json::array();
  const int nr_kinds = hwloc_cpukinds_get_nr(topo.raw(), 0);
  for (int k = 0; k < nr_kinds; ++k) {
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    int efficiency = -1;
    unsigned nr_infos = 0;
    hwloc_info_s* infos = nullptr;
    if (set != nullptr &&
        hwloc_cpukinds_get_info(topo.raw(), static_cast<unsigned>(k), set,
                                &efficiency, &nr_infos, &infos, 0) == 0) {
      char* list = nullptr;
      hwloc_bitmap_list_asprintf(&list, set);
      json info = json::object();
      for (unsigned i = 0; i < nr_infos; ++i)
        info[infos[i].name ? infos[i].name : "?"] =
            infos[i].value ? infos[i].value : "";
      kinds.push_back({{"index", k},
                       {"efficiency", efficiency},
                       {"pus", list ? list : ""},
                       {"infos", info}});
      std::free(list);
    }
    hwloc_bitmap_free(set);
  }
  return kinds;
}

json TopologyJson(const Topology& topo) {
  const TopologySummary& t = topo.summary();
  return {{"source", t.source},
          {"packages", t.packages},
          {"numa_nodes", t.numa_nodes},
          {"l3s", t.l3s},
          {"cores", t.cores},
          {"pus", t.pus},
          {"usable_pus", t.usable_pus},
          {"cache_line_bytes", t.cache_line_bytes},
          {"cache_line_known", t.cache_line_known},
          {"cpukinds", t.cpukinds},
          {"complete_pus", t.complete_pus},
          {"online_pus", t.online_pus},
          {"allowed_pus", t.allowed_pus},
          {"affinity_pus",
           t.affinity_pus < 0 ? json(nullptr) : json(t.affinity_pus)},
          {"restricted_by", t.restricted_by},
          {"usable", std::to_string(t.usable_pus) + " of " +
                         std::to_string(t.complete_pus) + " PUs usable"},
          {"cpukinds_info", CpuKindsJson(topo)}};
}

// Governor, SMT, THP, ASLR, perf_event_paranoid, isolcpus and nohz_full into
// `env`, with a warning for each setting that moves results.
void ReadSettings(json& env, json& warnings) {
  const std::string governor =
      ReadSmallFile("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  env["governor"] = governor.empty() ? "unknown (no cpufreq)" : governor;
  if (!governor.empty() && governor != "performance")
    warnings.push_back("CPU frequency governor is '" + governor +
                       "', not 'performance': clock changes move results");
  const std::string smt = ReadSmallFile("/sys/devices/system/cpu/smt/control");
  env["smt"] = smt.empty() ? "unknown" : smt;
  const std::string thp = kernel::SelectedChoice(
      ReadSmallFile("/sys/kernel/mm/transparent_hugepage/enabled"));
  env["thp"] = thp.empty() ? "unknown" : thp;
  if (thp == "always")
    warnings.push_back(
        "transparent huge pages are 'always': fault and zeroing results depend "
        "on huge page availability");
  const std::string aslr = ReadSmallFile("/proc/sys/kernel/randomize_va_space");
  env["aslr"] = aslr;
  // This process's personality (setarch -R, a build duet's re-exec) wins.
  const int persona = personality(0xffffffff);
  env["aslr_process"] =
      persona != -1 && (persona & ADDR_NO_RANDOMIZE) ? "off" : "on";
  if (aslr != "0" && env["aslr_process"] == "on")
    warnings.push_back("ASLR is on (randomize_va_space=" + aslr +
                       "): cache-set and alignment effects vary run to run");
  const std::string paranoid =
      ReadSmallFile("/proc/sys/kernel/perf_event_paranoid");
  env["perf_event_paranoid"] =
      paranoid.empty() ? json(nullptr) : json(std::stoi(paranoid));
  env["isolcpus"] = KernelCmdlineValue("isolcpus");
  env["nohz_full"] = KernelCmdlineValue("nohz_full");
}

// The hypervisor by every source (env["hypervisor_sources"]); they can
// disagree (CPUID "bhyve bhyve" on a PVM guest), so `hypervisor` names all.
void DetectHypervisor(json& env, json& warnings) {
  env["hypervisor"] = nullptr;
  env["hypervisor_sources"] = nullptr;
  if (CpuInfoField("flags").find(" hypervisor") == std::string::npos) return;
  const std::string sig = HypervisorSignature();
  static const std::pair<const char*, const char*> kNames[] = {
      {"KVMKVMKVM", "KVM"},         {"Microsoft Hv", "Hyper-V"},
      {"VMwareVMware", "VMware"},   {"XenVMMXenVMM", "Xen"},
      {"TCGTCGTCGTCG", "QEMU TCG"}, {"bhyve bhyve", "bhyve"},
      {"ACRNACRNACRN", "ACRN"},     {"VBoxVBoxVBox", "VirtualBox"}};
  std::string cpuid_name;
  for (const auto& [cpuid, name] : kNames)
    if (sig == cpuid) cpuid_name = name;
  std::string klog_why;
  const std::string klog = KernelLogHypervisor(&klog_why);
  const std::string sys_type = ReadSmallFile("/sys/hypervisor/type");
  const std::string dmi = ReadSmallFile("/sys/class/dmi/id/sys_vendor");
  const auto or_null = [](const std::string& v) {
    return v.empty() ? json(nullptr) : json(v);
  };
  json sources = {
      {"cpuid_signature", or_null(sig)},
      {"cpuid_name", or_null(cpuid_name)},
      {"kernel_log", or_null(klog)},
      {"sys_hypervisor_type", or_null(sys_type)},
      {"dmi_sys_vendor", or_null(dmi)},
      {"note",
       "cpuid_*: leaf 0x40000000 as the VM presents it to user space; "
       "kernel_log: the running kernel's \"Hypervisor detected:\" boot line "
       "(what it detected and runs paravirtualised for); "
       "sys_hypervisor_type: /sys/hypervisor/type; dmi_sys_vendor: "
       "/sys/class/dmi/id/sys_vendor; null: the source says nothing"}};
  if (!klog_why.empty()) sources["kernel_log_unavailable"] = klog_why;
  std::string hypervisor;
  if (!cpuid_name.empty())
    hypervisor = cpuid_name + " (CPUID signature " + sig + ")";
  if (hypervisor.empty() && !sig.empty()) hypervisor = "CPUID signature " + sig;
  if (!klog.empty() && klog != cpuid_name)
    hypervisor += (hypervisor.empty() ? "" : "; ") + std::string("kernel: ") +
                  klog + " (kernel log \"Hypervisor detected: " + klog + "\")";
  if (hypervisor.empty()) hypervisor = sys_type;
  if (hypervisor.empty()) hypervisor = dmi;
  if (hypervisor.empty()) hypervisor = "yes (unknown type)";
  warnings.push_back(
      "running under a hypervisor (" + hypervisor +
      "): vCPUs move between host cores; contended numbers carry coherence "
      "labels for this reason");
  env["hypervisor"] = hypervisor;
  env["hypervisor_sources"] = sources;
}

// Warnings about the PUs a run may use: fewer usable than present, CPU kinds
// hwloc cannot rank, a cgroup CPU quota below the usable PUs.
void PlacementWarnings(const TopologySummary& t, const CgroupCpu& cg,
                       json& warnings) {
  if (t.usable_pus < t.complete_pus) {
    std::string why;
    for (const auto& r : t.restricted_by) why += (why.empty() ? "" : ", ") + r;
    warnings.push_back("only " + std::to_string(t.usable_pus) + " of " +
                       std::to_string(t.complete_pus) +
                       " PUs are usable (restricted by " +
                       (why.empty() ? "unknown" : why) + ")");
  }
  if (const std::string kinds = UnrankedKindsWarning(t); !kinds.empty())
    warnings.push_back(kinds);
  if (cg.quota_cpus > 0 && cg.quota_cpus < t.usable_pus) {
    char q[32];
    std::snprintf(q, sizeof q, "%.2f", cg.quota_cpus);
    // The quota is the threshold, not ceil(quota): 2 threads at 1.5 CPUs.
    const int first = static_cast<int>(std::floor(cg.quota_cpus)) + 1;
    warnings.push_back(
        std::string("cgroup CPU quota is ") + q + " CPUs (" + cg.limited_by +
        ") for " + std::to_string(t.usable_pus) + " usable PUs: points of " +
        std::to_string(first) + " or more thread" + (first == 1 ? "" : "s") +
        " exceed it and measure throttling (each such row says so in "
        "cgroup.over_quota and its warning; rows carry cgroup.nr_throttled)");
  }
}

}  // namespace

bool RunningUnderTcg() {
  return CpuInfoField("flags").find(" hypervisor") != std::string::npos &&
         HypervisorSignature() == "TCGTCGTCGTCG";
}

nlohmann::json CollectProvenance(const Options& opts, const Topology& topo) {
  json p;
  p["version"] = LOCKLINE_VERSION;
  p["git_commit"] = LOCKLINE_GIT_COMMIT;
  p["compiler"] = LOCKLINE_COMPILER;
  p["cxx_flags"] = LOCKLINE_CXX_FLAGS;
  p["build_type"] = LOCKLINE_BUILD_TYPE;
  p["command_line"] = opts.argv;
  p["versions"] = LibraryVersions();
  utsname u{};
  if (uname(&u) == 0)
    p["kernel"] = std::string(u.sysname) + " " + u.release + " " + u.version +
                  " " + u.machine;
  p["kernel_config"] = kernel::KernelConfig();
  p["cpu_model"] = CpuInfoField("model name");
  p["microcode"] = CpuInfoField("microcode");
  p["topology"] = TopologyJson(topo);
  json env, warnings = json::array();
  ReadSettings(env, warnings);
  DetectHypervisor(env, warnings);
  const CgroupCpu& cg = ProcessCgroupCpu();
  p["cgroup"] = CgroupJson(cg);
  PlacementWarnings(topo.summary(), cg, warnings);
  p["environment"] = env;
  p["warnings"] = warnings;
  return p;
}

}  // namespace lockline
