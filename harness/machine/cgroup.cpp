#include "harness/machine/cgroup.h"

#include <cstdlib>
#include <sstream>
#include <vector>

#include "harness/machine/restore.h"

namespace lockline {
namespace {

// PATH, then its ancestors up to "/" ("/a/b" -> "/a/b", "/a", "/").
std::vector<std::string> SelfAndAncestors(std::string path) {
  std::vector<std::string> out;
  if (path.empty() || path[0] != '/') path = "/" + path;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  for (;;) {
    out.push_back(path);
    if (path == "/") break;
    const size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  return out;
}

std::string Join(const std::string& a, const std::string& b) {
  return b == "/" ? a : a + b;
}

// The mount's root in its hierarchy (mountinfo field 4 where field 5 is
// `mount_point`; "" if absent; octal escapes kept, so they fall back).
std::string MountRoot(const std::string& mountinfo,
                      const std::string& mount_point) {
  std::istringstream lines(mountinfo);
  std::string line;
  std::string found;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string id, parent, devno, mroot, point;
    if (!(f >> id >> parent >> devno >> mroot >> point)) continue;
    if (point == mount_point) found = mroot;  // the last mount there wins
  }
  return found;
}

// `path` relative to the mount whose hierarchy root is `mount_root` ("/a/b"
// under "/a" -> "/b"); `path` itself when it is not under it.
std::string UnderMountRoot(const std::string& path,
                           const std::string& mount_root) {
  if (mount_root.empty() || mount_root == "/") return path;
  if (path == mount_root) return "/";
  if (path.size() > mount_root.size() &&
      path.compare(0, mount_root.size(), mount_root) == 0 &&
      path[mount_root.size()] == '/')
    return path.substr(mount_root.size());
  return path;
}

// The process's cgroup dir under `mount` (relative to its root), else `mount`.
std::string ProcessDir(const std::string& mount, const std::string& path,
                       const std::string& mount_root, std::string* rel,
                       std::string* note) {
  *rel = UnderMountRoot(SelfAndAncestors(path)[0], mount_root);
  const std::string dir = Join(mount, *rel);
  if (IsDir(dir) || !IsDir(mount)) return dir;
  // Piece by piece: GCC 12's -Wrestrict misreads an inlined operator+ chain.
  note->assign("cgroup path ").append(path).append(" is not visible under ");
  note->append(mount).append(
      " (no cgroup namespace): counters read from the mount root, the cgroup "
      "that holds the process");
  *rel = "/";
  return mount;
}

}  // namespace

CgroupCpu ReadCgroupCpu(const std::string& proc_self_cgroup,
                        const std::string& root,
                        const std::string& proc_self_mountinfo) {
  CgroupCpu cg;
  std::istringstream lines(proc_self_cgroup);
  std::string line;
  std::string v2_path, v1_path, v1_controllers;
  while (std::getline(lines, line)) {
    // hierarchy-ID:controller-list:cgroup-path
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a);
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (id == "0" && controllers.empty()) {
      v2_path = path;
      continue;
    }
    std::istringstream names(controllers);
    std::string name;
    while (std::getline(names, name, ','))
      if (name == "cpu") {
        v1_path = path;
        v1_controllers = controllers;
      }
  }
  // v1's cpu hierarchy is mounted at ROOT/CONTROLLERS, v2's at ROOT.
  cg.version = !v1_path.empty() ? 1 : !v2_path.empty() ? 2 : 0;
  if (cg.version == 0) return cg;
  cg.path = cg.version == 1 ? v1_path : v2_path;
  const std::string mount =
      cg.version == 1 ? root + "/" + v1_controllers : root;
  std::string rel;
  cg.dir = ProcessDir(mount, cg.path, MountRoot(proc_self_mountinfo, mount),
                      &rel, &cg.dir_note);
  for (const std::string& p : SelfAndAncestors(rel)) {
    const std::string dir = Join(mount, p);
    double cpus = 0;
    std::string file = dir + "/cpu.max";
    if (cg.version == 1) {
      file = dir + "/cpu.cfs_quota_us";
      const long long quota = std::atoll(ReadSmallFile(file).c_str());
      const long long period =
          std::atoll(ReadSmallFile(dir + "/cpu.cfs_period_us").c_str());
      if (quota > 0 && period > 0)
        cpus = static_cast<double>(quota) / static_cast<double>(period);
    } else {
      // "max 100000" (no limit) or "QUOTA PERIOD", microseconds.
      std::istringstream in(ReadSmallFile(file));
      std::string quota;
      long long period = 0;
      if (in >> quota >> period && quota != "max" && period > 0)
        cpus = std::atof(quota.c_str()) / static_cast<double>(period);
    }
    // The tightest quota on the way up limits the process.
    if (cpus > 0 && (cg.quota_cpus == 0 || cpus < cg.quota_cpus)) {
      cg.quota_cpus = cpus;
      cg.limited_by = file;
    }
  }
  return cg;
}

const CgroupCpu& ProcessCgroupCpu() {
  static const CgroupCpu cg =
      ReadCgroupCpu(ReadSmallFile("/proc/self/cgroup"), "/sys/fs/cgroup",
                    ReadSmallFile("/proc/self/mountinfo"));
  return cg;
}

CpuThrottle ParseCpuStat(const std::string& text) {
  CpuThrottle t;
  std::istringstream in(text);
  std::string key;
  unsigned long long value = 0;
  bool have_nr = false, have_time = false;
  while (in >> key >> value) {
    if (key == "nr_throttled") {
      t.nr_throttled = value;
      have_nr = true;
    } else if (key == "throttled_usec") {
      t.throttled_usec = value;
      have_time = true;
    } else if (key == "throttled_time") {  // v1: nanoseconds
      t.throttled_usec = value / 1000;
      have_time = true;
    }
  }
  t.ok = have_nr && have_time;
  return t;
}

CpuThrottle ReadCpuThrottle(const CgroupCpu& cg) {
  if (cg.version == 0) return {};
  return ParseCpuStat(ReadSmallFile(cg.dir + "/cpu.stat"));
}

nlohmann::json CgroupJson(const CgroupCpu& cg) {
  using nlohmann::json;
  return {{"version", cg.version},
          {"path", cg.path},
          {"cpu_quota_cpus",
           cg.quota_cpus > 0 ? json(cg.quota_cpus) : json(nullptr)},
          {"limited_by", cg.limited_by},
          {"stat_dir", cg.dir},
          {"dir_note", cg.dir_note}};
}

}  // namespace lockline
