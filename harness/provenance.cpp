#include "harness/provenance.h"

#include <gnu/libc-version.h>
#include <perfmon/pfmlib.h>
#include <sys/utsname.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "harness/kernel_probe.h"
#include "lockline_version.h"

namespace lockline {
namespace {

std::string CpuInfoField(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
    }
  }
  return "";
}

// The hypervisor's CPUID vendor signature (leaf 0x40000000: "KVMKVMKVM",
// "Microsoft Hv", "VMwareVMware", "XenVMMXenVMM", ...), or "" where there is
// none or the CPU is not x86.
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

// The bracketed choice in a sysfs "a [b] c" file.
std::string Selected(const std::string& text) {
  const auto l = text.find('['), r = text.find(']');
  if (l == std::string::npos || r == std::string::npos || r < l) return text;
  return text.substr(l + 1, r - l - 1);
}

std::string KernelCmdlineValue(const std::string& key) {
  std::istringstream in(ReadSmallFile("/proc/cmdline"));
  std::string tok;
  while (in >> tok)
    if (tok.rfind(key + "=", 0) == 0) return tok.substr(key.size() + 1);
  return "";
}

}  // namespace

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

nlohmann::json CollectProvenance(const Options& opts, const Topology& topo) {
  using nlohmann::json;
  json p;
  p["version"] = LOCKLINE_VERSION;
  p["git_commit"] = LOCKLINE_GIT_COMMIT;
  p["compiler"] = LOCKLINE_COMPILER;
  p["cxx_flags"] = LOCKLINE_CXX_FLAGS;
  p["build_type"] = LOCKLINE_BUILD_TYPE;
  p["command_line"] = opts.argv;
  const unsigned hw = hwloc_get_api_version();
  const int pfm = pfm_get_version();
  p["versions"] = {{"google_benchmark", LOCKLINE_GBENCH_VERSION},
                   {"hwloc", std::to_string(hw >> 16) + "." +
                                 std::to_string((hw >> 8) & 0xff) + "." +
                                 std::to_string(hw & 0xff)},
                   {"libpfm4", std::to_string(PFM_MAJ_VERSION(pfm)) + "." +
                                   std::to_string(PFM_MIN_VERSION(pfm))},
                   {"glibc", gnu_get_libc_version()}};
  utsname u{};
  if (uname(&u) == 0)
    p["kernel"] = std::string(u.sysname) + " " + u.release + " " + u.version +
                  " " + u.machine;
  p["kernel_config"] = kernel::KernelConfig();  // issue 18
  p["cpu_model"] = CpuInfoField("model name");
  p["microcode"] = CpuInfoField("microcode");
  const TopologySummary& t = topo.summary();
  p["topology"] = {
      {"source", t.source},         {"packages", t.packages},
      {"numa_nodes", t.numa_nodes}, {"l3s", t.l3s},
      {"cores", t.cores},           {"pus", t.pus},
      {"usable_pus", t.usable_pus}, {"cache_line_bytes", t.cache_line_bytes},
      {"cpukinds", t.cpukinds}};

  json env;
  json warnings = json::array();
  const std::string governor =
      ReadSmallFile("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  env["governor"] = governor.empty() ? "unknown (no cpufreq)" : governor;
  if (!governor.empty() && governor != "performance")
    warnings.push_back("CPU frequency governor is '" + governor +
                       "', not 'performance': clock changes move results");
  const std::string smt = ReadSmallFile("/sys/devices/system/cpu/smt/control");
  env["smt"] = smt.empty() ? "unknown" : smt;
  const std::string thp =
      Selected(ReadSmallFile("/sys/kernel/mm/transparent_hugepage/enabled"));
  env["thp"] = thp.empty() ? "unknown" : thp;
  if (thp == "always")
    warnings.push_back(
        "transparent huge pages are 'always': fault and zeroing results depend "
        "on huge page availability");
  const std::string aslr = ReadSmallFile("/proc/sys/kernel/randomize_va_space");
  env["aslr"] = aslr;
  if (aslr != "0")
    warnings.push_back("ASLR is on (randomize_va_space=" + aslr +
                       "): cache-set and alignment effects vary run to run");
  const std::string paranoid =
      ReadSmallFile("/proc/sys/kernel/perf_event_paranoid");
  env["perf_event_paranoid"] =
      paranoid.empty() ? json(nullptr) : json(std::stoi(paranoid));
  env["isolcpus"] = KernelCmdlineValue("isolcpus");
  env["nohz_full"] = KernelCmdlineValue("nohz_full");
  std::string hypervisor;
  if (CpuInfoField("flags").find(" hypervisor") != std::string::npos) {
    const std::string sig = HypervisorSignature();
    static const std::pair<const char*, const char*> kNames[] = {
        {"KVMKVMKVM", "KVM"},         {"Microsoft Hv", "Hyper-V"},
        {"VMwareVMware", "VMware"},   {"XenVMMXenVMM", "Xen"},
        {"TCGTCGTCGTCG", "QEMU TCG"}, {"bhyve bhyve", "bhyve"},
        {"ACRNACRNACRN", "ACRN"},     {"VBoxVBoxVBox", "VirtualBox"}};
    for (const auto& [cpuid, name] : kNames)
      if (sig == cpuid)
        hypervisor = std::string(name) + " (CPUID signature " + sig + ")";
    if (hypervisor.empty() && !sig.empty())
      hypervisor = "CPUID signature " + sig;
    if (hypervisor.empty()) hypervisor = ReadSmallFile("/sys/hypervisor/type");
    if (hypervisor.empty())
      hypervisor = ReadSmallFile("/sys/class/dmi/id/sys_vendor");
    if (hypervisor.empty()) hypervisor = "yes (unknown type)";
    warnings.push_back(
        "running under a hypervisor (" + hypervisor +
        "): vCPUs move between host cores; contended numbers carry coherence "
        "labels for this reason");
  }
  env["hypervisor"] = hypervisor.empty() ? json(nullptr) : json(hypervisor);
  if (t.usable_pus < t.pus)
    warnings.push_back("only " + std::to_string(t.usable_pus) + " of " +
                       std::to_string(t.pus) +
                       " PUs are usable (cpuset, container or offline CPUs)");
  p["environment"] = env;
  p["warnings"] = warnings;
  return p;
}

}  // namespace lockline
