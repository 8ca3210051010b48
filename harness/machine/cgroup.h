// The CPU quota of lockline's cgroup (v2 cpu.max, v1 cpu.cfs_quota_us /
// cfs_period_us) and its throttling (cpu.stat), per
// Documentation/admin-guide/cgroup-v2.rst and scheduler/sched-bwc.rst: a quota
// below the thread count measures the CFS bandwidth controller, not the lock.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace lockline {

/// The effective CPU quota of a cgroup path.
struct CgroupCpu {
  int version = 0;   ///< 2, 1, or 0 when no cgroup cpu controller was found
  std::string path;  ///< the process's cgroup path (/proc/self/cgroup)
  std::string dir;   ///< its directory under the cgroup mount (cpu.stat)
  double quota_cpus = 0;   ///< quota / period, in CPUs; 0 = no quota
  std::string limited_by;  ///< the cpu.max / cfs_quota_us file that sets it
  /// How `dir` was found when `path` is not under the mount; "" when it is.
  std::string dir_note;
};

/// The quota of the cgroup in `proc_self_cgroup` under the mount `root` (v2
/// cpu.max or v1 cfs files, each level up to ROOT; the smallest wins;
/// unreadable means none). `dir` is resolved against `proc_self_mountinfo`
/// ("" skips it), else the mount root (said in `dir_note`). Never throws.
CgroupCpu ReadCgroupCpu(const std::string& proc_self_cgroup,
                        const std::string& root = "/sys/fs/cgroup",
                        const std::string& proc_self_mountinfo = "");

/// This process's quota, read once (thread-safe).
const CgroupCpu& ProcessCgroupCpu();

/// Throttling counters of a cgroup directory.
struct CpuThrottle {
  bool ok = false;  ///< false when cpu.stat is missing or has no such fields
  uint64_t nr_throttled = 0;    ///< periods in which the group was throttled
  uint64_t throttled_usec = 0;  ///< time throttled, microseconds
};

/// Parses cpu.stat: nr_throttled and v2 throttled_usec / v1 throttled_time.
CpuThrottle ParseCpuStat(const std::string& text);

/// Reads `cg.dir`/cpu.stat (ok false without a cgroup).
CpuThrottle ReadCpuThrottle(const CgroupCpu& cg);

/// The run context's {"version", "path", "cpu_quota_cpus", "limited_by"}.
nlohmann::json CgroupJson(const CgroupCpu& cg);

}  // namespace lockline
