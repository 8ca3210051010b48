// What the running kernel says about its memory state and build (declared in
// kernel_probe.h), for the kernel families' rows and the run's provenance.
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "harness/machine/restore.h"
#include "harness/measure/kernel_probe.h"

namespace lockline::kernel {

std::string SelectedChoice(const std::string& text) {
  const auto l = text.find('['), r = text.find(']');
  if (l == std::string::npos || r == std::string::npos || r < l) return text;
  return text.substr(l + 1, r - l - 1);
}

std::map<std::string, uint64_t> ReadVmstat() {
  std::map<std::string, uint64_t> m;
  std::ifstream in("/proc/vmstat");
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v) m[k] = v;
  return m;
}

nlohmann::json VmstatDelta(const std::map<std::string, uint64_t>& a,
                           const std::map<std::string, uint64_t>& b) {
  static const char* const kPrefixes[] = {
      // allocation, freeing, faults, reclaim
      "pgalloc_", "pgfree", "pgfault", "pgmajfault", "pgactivate",
      "pgdeactivate", "pglazyfree", "pgrefill", "pgsteal_", "pgscan_",
      // THP, tiering, compaction, refaults
      "thp_fault_alloc", "thp_fault_fallback", "pgpromote_", "pgdemote_",
      "compact_stall", "allocstall_", "pgskip_", "workingset_refault_anon",
      "workingset_refault_file"};
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, vb] : b) {
    if (!StartsWithAny(k, kPrefixes)) continue;
    auto it = a.find(k);
    if (it == a.end()) continue;
    if (vb != it->second) out[k] = static_cast<int64_t>(vb - it->second);
  }
  return out;
}

std::vector<ZonePcp> ParseZonePcp(const std::string& text) {
  std::vector<ZonePcp> zones;
  std::istringstream in(text);
  std::string line;
  ZonePcp cur;
  bool have = false, first_cpu = false;
  auto flush = [&] {
    if (have && cur.managed > 0) zones.push_back(cur);
    have = false;
  };
  while (std::getline(in, line)) {
    int node = 0;
    char zname[32];
    if (std::sscanf(line.c_str(), "Node %d, zone %31s", &node, zname) == 2) {
      flush();
      cur = ZonePcp{};
      cur.node = node;
      cur.zone = zname;
      have = true;
      first_cpu = false;
      continue;
    }
    if (!have) continue;
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    uint64_t v = 0;
    if (key == "managed") {
      ls >> cur.managed;
    } else if (key == "pages") {
      std::string w;
      ls >> w >> v;
      if (w == "free") cur.free = v;
    } else if (key == "cpu:") {
      int cpu = -1;
      ls >> cpu;
      first_cpu = cpu == 0;
    } else if (key == "high:" && ls >> v) {
      if (first_cpu) cur.high = v;
      cur.high_max_cpu = std::max(cur.high_max_cpu, v);
    } else if (first_cpu && ls >> v) {  // CPU 0's pageset
      if (key == "batch:") cur.batch = v;
      if (key == "high_min:") cur.high_min = static_cast<int64_t>(v);
      if (key == "high_max:") cur.high_max = static_cast<int64_t>(v);
    }
  }
  flush();
  return zones;
}

std::vector<ZonePcp> ReadZonePcp() {
  return ParseZonePcp(ReadSmallFile("/proc/zoneinfo"));
}

const ZonePcp* MainZone(const std::vector<ZonePcp>& zones) {
  const ZonePcp* best = nullptr;
  for (const auto& z : zones)
    if (!best || z.managed > best->managed) best = &z;
  return best;
}

nlohmann::json ZonePcpJson(const std::vector<ZonePcp>& zones) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& z : zones) {
    nlohmann::json j = {
        {"node", z.node},       {"managed_pages", z.managed},
        {"free_pages", z.free}, {"high", z.high},
        {"batch", z.batch},     {"high_max_over_cpus", z.high_max_cpu}};
    if (z.high_min >= 0) j["high_min"] = z.high_min;
    if (z.high_max >= 0) j["high_max"] = z.high_max;
    out[z.node == 0 ? z.zone : std::to_string(z.node) + ":" + z.zone] = j;
  }
  return out;
}

std::string LockStatStatus(std::string* reason) {
  *reason = access("/proc/lock_stat", F_OK) != 0
                ? "no /proc/lock_stat (kernel built without CONFIG_LOCK_STAT)"
            : access("/proc/lock_stat", R_OK) != 0
                ? "/proc/lock_stat is not readable (root only)"
                : "";
  return reason->empty() ? "measured" : "unavailable";
}

nlohmann::json KernelConfigFromText(const std::string& text) {
  static const char* const kKeys[] = {
      // memory
      "CONFIG_NR_CPUS", "CONFIG_CMA", "CONFIG_MEMCG",
      "CONFIG_TRANSPARENT_HUGEPAGE", "CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS",
      "CONFIG_TRANSPARENT_HUGEPAGE_MADVISE", "CONFIG_NUMA", "CONFIG_LRU_GEN",
      // locking and preemption
      "CONFIG_LOCK_STAT", "CONFIG_LOCKDEP", "CONFIG_PREEMPT",
      "CONFIG_PREEMPT_DYNAMIC", "CONFIG_PARAVIRT_SPINLOCKS"};
  nlohmann::json out = nlohmann::json::object();
  for (const char* k : kKeys) out[k] = "n";
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    for (const char* k : kKeys) {
      const std::string key(k);
      if (line.rfind(key + "=", 0) == 0) {
        std::string v = line.substr(key.size() + 1);
        if (v.size() >= 2 && v.front() == '"' && v.back() == '"')
          v = v.substr(1, v.size() - 2);
        out[k] = v;
      }
    }
  }
  return out;
}

int64_t BtfArrayMember(const std::string& btf, const std::string& strct,
                       const std::string& member) {
  struct Hdr {
    uint16_t magic;
    uint8_t version, flags;
    uint32_t hdr_len, type_off, type_len, str_off, str_len;
  } h{};
  if (btf.size() < sizeof h) return -1;
  std::memcpy(&h, btf.data(), sizeof h);
  if (h.magic != 0xeB9F) return -1;
  const std::size_t types = h.hdr_len + h.type_off;
  const std::size_t strs = h.hdr_len + h.str_off;
  if (types + h.type_len > btf.size() || strs + h.str_len > btf.size())
    return -1;
  auto u32 = [&](std::size_t at) {
    uint32_t v = 0;
    std::memcpy(&v, btf.data() + at, 4);
    return v;
  };
  auto name = [&](uint32_t off) -> std::string {
    if (off >= h.str_len) return "";
    return std::string(btf.c_str() + strs + off);
  };
  // Type ids start at 1: offsets of each type record, then look-ups.
  std::vector<std::size_t> at(1, 0);
  std::size_t p = types;
  const std::size_t end = types + h.type_len;
  while (p + 12 <= end) {
    at.push_back(p);
    const uint32_t info = u32(p + 4);
    const uint32_t vlen = info & 0xffff, kind = (info >> 24) & 0x1f;
    // Bytes after the 12-byte btf_type, by kind (include/uapi/linux/btf.h):
    // INT, VAR, DECL_TAG 4; ARRAY 12; STRUCT, UNION, DATASEC, ENUM64 12 a
    // member; ENUM, FUNC_PROTO 8 a member.
    p += 12 + (kind == 1 || kind == 14 || kind == 17                ? 4u
               : kind == 3                                          ? 12u
               : kind == 4 || kind == 5 || kind == 15 || kind == 19 ? 12u * vlen
               : kind == 6 || kind == 13                            ? 8u * vlen
                                                                    : 0u);
  }
  for (std::size_t id = 1; id < at.size(); ++id) {
    const std::size_t t = at[id];
    const uint32_t info = u32(t + 4);
    if (((info >> 24) & 0x1f) != 4 || name(u32(t)) != strct) continue;
    const uint32_t vlen = info & 0xffff;
    for (uint32_t m = 0; m < vlen; ++m) {
      const std::size_t mm = t + 12 + 12u * m;
      if (name(u32(mm)) != member) continue;
      uint32_t ty = u32(mm + 4);
      for (int hops = 0; hops < 8 && ty > 0 && ty < at.size(); ++hops) {
        const std::size_t a = at[ty];
        const uint32_t k = (u32(a + 4) >> 24) & 0x1f;
        if (k == 3) return u32(a + 20);  // btf_array.nelems
        if (k < 8 || k > 11) break;      // through typedef / qualifiers only
        ty = u32(a + 8);
      }
      return -1;
    }
  }
  return -1;
}

nlohmann::json FolioBatchSize(const std::string& release) {
  nlohmann::json j;
  std::ifstream in("/sys/kernel/btf/vmlinux", std::ios::binary);
  const std::string btf{std::istreambuf_iterator<char>(in), {}};
  for (const auto& [strct, member] :
       {std::pair<const char*, const char*>{"folio_batch", "folios"},
        {"pagevec", "pages"}}) {
    const int64_t n = BtfArrayMember(btf, strct, member);
    if (n > 0) {
      j["value"] = n;
      j["source"] = std::string("/sys/kernel/btf/vmlinux: struct ") + strct +
                    "." + member + "[]";
      return j;
    }
  }
  // Mainline by version: PAGEVEC_SIZE 14 from 2.6.10, 15 from 4.15
  // (include/linux/pagevec.h), FOLIO_BATCH_SIZE 15, then 31 from 6.9
  // (include/linux/pagevec.h@6.9: "mm: increase folio batch size").
  int major = 0, minor = 0;
  std::sscanf(release.c_str(), "%d.%d", &major, &minor);
  const int v = major * 1000 + minor;
  j["value"] = v >= 6009   ? nlohmann::json(31)
               : v >= 4015 ? nlohmann::json(15)
               : v >= 2006 ? nlohmann::json(14)
                           : nlohmann::json(nullptr);
  j["source"] =
      "mainline value for the release (no BTF with struct folio_batch): a "
      "distribution kernel may differ";
  return j;
}

nlohmann::json KernelConfig() {
  nlohmann::json out;
  utsname u{};
  const std::string release = uname(&u) == 0 ? u.release : "";
  out["release"] = release;
  std::string text, source;
  if (!release.empty()) {
    text = ReadSmallFile("/boot/config-" + release);
    if (!text.empty()) source = "/boot/config-" + release;
  }
  if (text.empty() && access("/proc/config.gz", R_OK) == 0) {
    if (FILE* f = popen("gzip -dc /proc/config.gz 2>/dev/null", "r")) {
      char buf[65536];
      std::size_t n = 0;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
      pclose(f);
      if (!text.empty()) source = "/proc/config.gz";
    }
  }
  if (text.empty()) {
    out["source"] = nullptr;
    out["reason"] = "no /boot/config-" + release +
                    " and no readable /proc/config.gz (CONFIG_IKCONFIG_PROC)";
  } else {
    const nlohmann::json cfg = KernelConfigFromText(text);
    for (auto it = cfg.begin(); it != cfg.end(); ++it) out[it.key()] = *it;
    out["source"] = source;
  }
  const std::string thp =
      ReadSmallFile("/sys/kernel/mm/transparent_hugepage/enabled");
  const std::string defrag =
      ReadSmallFile("/sys/kernel/mm/transparent_hugepage/defrag");
  out["thp_enabled"] = thp.empty() ? "unavailable" : SelectedChoice(thp);
  out["thp_defrag"] = defrag.empty() ? "unavailable" : SelectedChoice(defrag);
  const std::string frac =
      ReadSmallFile("/proc/sys/vm/percpu_pagelist_high_fraction");
  out["percpu_pagelist_high_fraction"] = frac.empty() ? "unavailable" : frac;
  out["folio_batch_size"] = FolioBatchSize(release);
  return out;
}

}  // namespace lockline::kernel
