// The CPU quota of the cgroup lockline runs in (cgroup v2 cpu.max, v1
// cpu.cfs_quota_us / cpu.cfs_period_us) and its throttling counters (cpu.stat
// nr_throttled, throttled_usec / throttled_time). A quota below the thread
// count makes a point measure the CFS bandwidth controller, not the lock: the
// run context records the quota and every row the throttling during the point.
//
// Source: Documentation/admin-guide/cgroup-v2.rst ("cpu.max", "cpu.stat") and
// Documentation/scheduler/sched-bwc.rst (v1 cfs_quota_us, cpu.stat
// throttled_time in ns) of the Linux kernel.
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
  /// How `dir` was found when `path` is not visible under the mount; "" when
  /// it is.
  std::string dir_note;
};

/// Reads the quota of the cgroup named in `proc_self_cgroup` (the text of
/// /proc/self/cgroup) under the mount `root`: v2 ROOT/PATH/cpu.max, v1
/// ROOT/<controllers>/PATH/cpu.cfs_quota_us / cfs_period_us, each up to ROOT;
/// the smallest quota wins; unreadable files mean no quota. `dir` is the
/// process's path under the mount, relative to the mount's root in the
/// hierarchy from `proc_self_mountinfo` ("" skips it: a container without a
/// cgroup namespace shows the host's path but mounts its own cgroup); when
/// still missing, the mount root itself (said in `dir_note`). Never throws.
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

/// Parses the text of a cpu.stat file: v2 "nr_throttled N" and
/// "throttled_usec N"; v1 "nr_throttled N" and "throttled_time NS".
CpuThrottle ParseCpuStat(const std::string& text);

/// Reads `cg.dir`/cpu.stat (ok false without a cgroup).
CpuThrottle ReadCpuThrottle(const CgroupCpu& cg);

/// The run-context object: {"version", "path", "cpu_quota_cpus" (null when
/// unlimited), "limited_by"}.
nlohmann::json CgroupJson(const CgroupCpu& cg);

}  // namespace lockline
