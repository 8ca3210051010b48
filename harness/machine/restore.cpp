// Settings lockline changes, put back on every exit (restore.h).
#include "harness/machine/restore.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

namespace lockline {
namespace {

constexpr int kMaxEntries = 16;
constexpr std::size_t kMaxPath = 256, kMaxValue = 64;

// One registered setting; `state` publishes it lock-free (0 free, 1 being
// written, 2 ready, 3 being restored), safe from a signal handler.
struct Entry {
  std::atomic<int> state{0};
  char path[kMaxPath];
  char value[kMaxValue];
  std::size_t value_len;
};

Entry g_entries[kMaxEntries];
std::mutex g_register_mu;  // RegisterRestore callers among themselves only
// The settings lock (flock held) and the state file, for the handler: the
// descriptor is published only once locked, the path before the first write.
std::atomic<int> g_lock_fd{-1};
char g_state_path[4096];

// The state file's text: "pid N" then "path P" / "value V" per entry.
std::string StateText() {
  std::string text = "pid " + std::to_string(getpid()) + "\n";
  for (Entry& e : g_entries)
    if (e.state.load(std::memory_order_acquire) == 2)
      text += std::string("path ") + e.path + "\nvalue " +
              std::string(e.value, e.value_len) + "\n";
  return text;
}

void WriteStateFile(const std::string& state) {
  const std::string tmp = state + ".tmp";
  const std::string text = StateText();
  const int fd = open(
      tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  const auto fail = [&](int err) {
    if (fd >= 0) unlink(tmp.c_str());  // written in part, or not renamed
    throw std::runtime_error("cannot write the settings state file " + state +
                             ": " + std::strerror(err) +
                             " (the setting is not changed)");
  };
  if (fd < 0) fail(errno);
  const bool written = write(fd, text.data(), text.size()) ==
                           static_cast<ssize_t>(text.size()) &&
                       fsync(fd) == 0;
  const int err = errno;
  close(fd);
  if (!written) fail(err);
  if (rename(tmp.c_str(), state.c_str()) != 0) fail(errno);
}

// Opens (creating it and `dir`) dir/name; -1 with errno on failure.
int OpenInDir(const std::string& dir, const char* name = "sysctl.lock") {
  mkdir(dir.c_str(), 0755);
  return open((dir + "/" + name).c_str(),
              O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
}

// flock(LOCK_EX | LOCK_NB); false, and `fd` closed, if another holds it.
bool TryLock(int fd) {
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
  close(fd);
  return false;
}

std::string HolderPid(const std::string& file) {
  std::istringstream in(ReadSmallFile(file));
  std::string word, pid;
  if (in >> word >> pid && word == "pid") return pid;
  return "";
}

// AcquireSettingsLock with g_register_mu held.
void LockSettingsLocked(const std::string& path) {
  if (g_lock_fd.load() >= 0) return;
  const std::string dir = RestoreStateDir();
  const std::string state = dir + "/restore.state";
  const int fd = OpenInDir(dir);
  if (fd < 0)
    throw std::runtime_error("cannot open the settings lock " + dir +
                             "/sysctl.lock: " + std::strerror(errno) +
                             " (the setting is not changed)");
  if (!TryLock(fd)) {
    const std::string pid = HolderPid(state);
    throw SettingBusy(
        "another lockline run" + (pid.empty() ? "" : " (pid " + pid + ")") +
        " holds " + dir +
        "/sysctl.lock and is changing a setting now: " + path +
        " not changed, this point not measured (run one lockline at "
        "a time, or this point's default setting)");
  }
  if (state.size() >= sizeof g_state_path)
    throw std::length_error("RegisterRestore: state path too long");
  std::memcpy(g_state_path, state.c_str(), state.size() + 1);
  g_lock_fd.store(fd);
}

std::vector<std::string>& TestPaths() {
  static std::vector<std::string> paths;
  return paths;
}

// "" when `st` is owned by root or this user and writable by no one else
// (safe to act on as root); else why not.
std::string UnsafeOwner(const struct stat& st, const std::string& what) {
  if (st.st_uid != 0 && st.st_uid != geteuid())
    return what + " is owned by uid " + std::to_string(st.st_uid) +
           " (not root)";
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return what + " is writable by group or others";
  return "";
}

// Whether the state file `path` in `dir` is there and safe to act on (both
// UnsafeOwner "", it regular); if not safe, warns "<what> recovery skipped: ".
bool SafeStateFile(const std::string& dir, const std::string& path,
                   const std::string& what, const std::string& hint,
                   std::vector<std::string>& warnings) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return false;
  struct stat dst {};
  std::string unsafe = lstat(dir.c_str(), &dst) != 0 || !S_ISDIR(dst.st_mode)
                           ? dir + " is not a directory"
                           : UnsafeOwner(dst, "the state directory " + dir);
  if (unsafe.empty())
    unsafe = S_ISREG(st.st_mode) ? UnsafeOwner(st, path)
                                 : path + " is not a regular file";
  if (!unsafe.empty())
    warnings.push_back(what + " recovery skipped: " + unsafe + hint);
  return unsafe.empty();
}

// Writes `value` to a registered path (O_NOFOLLOW, no O_CREAT); "" or why not.
std::string WriteSetting(const std::string& path, const std::string& value) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::strerror(errno);
  const std::string text = value + "\n";
  const ssize_t n = write(fd, text.data(), text.size());
  const int err = errno;
  close(fd);
  return n == static_cast<ssize_t>(text.size()) ? "" : std::strerror(err);
}

constexpr const char* kTracefsPath = "/sys/kernel/tracing";
constexpr long kTracefsMagic = 0x74726163;  // TRACEFS_MAGIC, linux/magic.h
std::atomic<bool> g_unmount_tracefs{false};
// The held record of a tracefs mount (RecordTracefsMount), for the handler.
std::atomic<int> g_tracefs_fd{-1};
char g_tracefs_state_path[4096];

bool TracefsMounted() {
  struct statfs fs {};
  return statfs(kTracefsPath, &fs) == 0 &&
         static_cast<long>(fs.f_type) == kTracefsMagic;
}

}  // namespace

std::string RestoreStateDir() {
  const char* env = std::getenv("LOCKLINE_STATE_DIR");
  return env != nullptr && *env != '\0' ? env : "/run/lockline";
}

void AcquireSettingsLock(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_register_mu);
  LockSettingsLocked(path);
}

void RegisterRestore(const std::string& path, const std::string& value) {
  // Kept without /proc's trailing newline (one line per setting).
  std::string old_value = value;
  while (!old_value.empty() && old_value.back() == '\n') old_value.pop_back();
  if (path.size() >= kMaxPath || old_value.size() >= kMaxValue ||
      path.find('\n') != std::string::npos ||
      old_value.find('\n') != std::string::npos)
    throw std::length_error(
        "RegisterRestore: path or value too long or multi-line: " + path);
  std::lock_guard<std::mutex> lock(g_register_mu);
  for (Entry& e : g_entries)
    if (e.state.load(std::memory_order_acquire) == 2 &&
        path == std::string(e.path))
      return;  // keep the original value
  const std::string state = RestoreStateDir() + "/restore.state";
  LockSettingsLocked(path);
  for (Entry& e : g_entries) {
    int expected = 0;
    if (!e.state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(e.path, path.c_str(), path.size() + 1);
    std::memcpy(e.value, old_value.data(), old_value.size());
    e.value_len = old_value.size();
    e.state.store(2, std::memory_order_release);
    try {
      WriteStateFile(state);
    } catch (...) {
      e.state.store(0, std::memory_order_release);
      throw;
    }
    return;
  }
  throw std::length_error("RegisterRestore: more than 16 settings registered");
}

void RestoreAll() {
  for (Entry& e : g_entries) {
    int expected = 2;
    if (!e.state.compare_exchange_strong(expected, 3)) continue;
    const int fd = open(e.path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd >= 0) {
      [[maybe_unused]] ssize_t n = write(fd, e.value, e.value_len);
      close(fd);
    }
    e.state.store(0, std::memory_order_release);
  }
  // Everything is back: the state file goes, then the lock.
  const int fd = g_lock_fd.exchange(-1);
  if (fd >= 0) {
    unlink(g_state_path);
    close(fd);
  }
}

int RestorePending() {
  int n = 0;
  for (Entry& e : g_entries)
    if (e.state.load(std::memory_order_acquire) == 2) ++n;
  return n;
}

void AddRecoverablePathForTests(const std::string& path) {
  TestPaths().push_back(path);
}

bool RecoverablePath(const std::string& path) {
  for (const char* p : kRecoverablePaths)
    if (path == p) return true;
  for (const std::string& p : TestPaths())
    if (path == p) return true;
  return false;
}

bool RecoverableValue(const std::string& value) {
  return !value.empty() && value.size() <= 10 &&
         value.find_first_not_of("0123456789") == std::string::npos;
}

std::vector<std::string> RecoverPreviousRun() {
  std::vector<std::string> warnings;
  const std::string dir = RestoreStateDir();
  const std::string state = dir + "/restore.state";
  if (!SafeStateFile(dir, state, "settings",
                     "; nothing restored (check " + dir +
                         ", or set LOCKLINE_STATE_DIR to a directory only "
                         "root can write)",
                     warnings))
    return warnings;
  // The lock is recreated when missing: a dead run's state is still recovered.
  const int fd = OpenInDir(dir);
  if (fd < 0) {
    warnings.push_back("settings recovery skipped: cannot open " + dir +
                       "/sysctl.lock: " + std::strerror(errno));
    return warnings;
  }
  if (!TryLock(fd)) return warnings;  // a live run: it restores its own
  const int sfd = open(state.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  std::string text;
  if (sfd >= 0) {
    char buf[4096];
    ssize_t n;
    while (text.size() < 65536 && (n = read(sfd, buf, sizeof buf)) > 0)
      text.append(buf, static_cast<std::size_t>(n));
    close(sfd);
  }
  std::istringstream in(text);
  std::string line, pid = "?", path;
  // Kept only when a value could not be written for want of permission (a
  // later run as root restores it); a refused entry warns once and goes.
  bool keep = false;
  while (std::getline(in, line)) {
    if (line.rfind("pid ", 0) == 0) {
      pid = line.substr(4);
      if (!RecoverableValue(pid)) pid = "?";
    } else if (line.rfind("path ", 0) == 0) {
      path = line.substr(5);
    } else if (line.rfind("value ", 0) == 0 && !path.empty()) {
      const std::string old = line.substr(6);
      const std::string head = "a previous lockline run (pid " + pid +
                               ") ended without restoring " + path;
      if (!RecoverablePath(path)) {
        warnings.push_back("the settings state file " + state + " names " +
                           path +
                           ", which is not a setting lockline changes: not "
                           "written (the file is removed)");
      } else if (!RecoverableValue(old)) {
        warnings.push_back(head + ": its recorded value is not a number (" +
                           std::to_string(old.size()) +
                           " bytes): not written (the file is removed)");
      } else if (const std::string now = ReadSmallFile(path); now != old) {
        const std::string err = WriteSetting(path, old);
        if (err.empty() && ReadSmallFile(path) == old) {
          warnings.push_back(head + ": it was " + now + ", restored to " + old);
        } else {
          const bool permission =
              err == std::strerror(EACCES) || err == std::strerror(EPERM);
          keep |= permission;
          warnings.push_back(
              head + ": it is " + now + " and could not be restored to " + old +
              " (" + (err.empty() ? "the value did not stay" : err) +
              (permission ? "; as root: echo " + old + " > " + path + ")"
                          : "; the kernel refused it: not retried)"));
        }
      }
      path.clear();
    }
  }
  if (!keep) unlink(state.c_str());
  close(fd);
  return warnings;
}

void WatchTracefsMount() {
  g_unmount_tracefs.store(geteuid() == 0 && !TracefsMounted());
}

std::string RecordTracefsMount() {
  const std::string dir = RestoreStateDir();
  const std::string path = dir + "/tracefs.state";
  const int fd = OpenInDir(dir, "tracefs.state");
  if (fd < 0)
    return "cannot record the mount in " + path + ": " + std::strerror(errno);
  // Held until the unmount: a run that finds it free knows its writer died.
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    // Who holds it and since when: its "pid N" line, the file's mtime.
    struct stat st {};
    char since[32] = "an unknown time";
    if (fstat(fd, &st) == 0)
      std::strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ",
                    gmtime(&st.st_mtime));
    close(fd);
    const std::string pid = HolderPid(path);
    return "another lockline run (pid " + (pid.empty() ? "?" : pid) +
           ") has held " + path + " since " + since + " (it mounts tracefs)";
  }
  const std::string text = "pid " + std::to_string(getpid()) +
                           "\nmount tracefs " + kTracefsPath + "\n";
  if (ftruncate(fd, 0) != 0 ||
      write(fd, text.data(), text.size()) !=
          static_cast<ssize_t>(text.size()) ||
      fsync(fd) != 0) {
    const std::string err = std::strerror(errno);
    unlink(path.c_str());
    close(fd);
    return "cannot record the mount in " + path + ": " + err;
  }
  if (path.size() < sizeof g_tracefs_state_path)
    std::memcpy(g_tracefs_state_path, path.c_str(), path.size() + 1);
  g_tracefs_fd.store(fd);
  return "";
}

void NoteTracefsMounted(bool mounted) {
  if (mounted) {
    g_unmount_tracefs.store(true);
    return;
  }
  const int fd = g_tracefs_fd.exchange(-1);
  if (fd >= 0) {
    unlink(g_tracefs_state_path);
    close(fd);
  }
}

bool UnmountWhatLocklineMounted() {
  bool done = false;
  if (g_unmount_tracefs.exchange(false))
    done = TracefsMounted() && umount2(kTracefsPath, MNT_DETACH) == 0;
  NoteTracefsMounted(false);  // the record goes with the mount
  return done;
}

std::vector<std::string> RecoverTracefsMount() {
  std::vector<std::string> warnings;
  const std::string dir = RestoreStateDir();
  const std::string path = dir + "/tracefs.state";
  if (!SafeStateFile(dir, path, "tracefs", "", warnings)) return warnings;
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 || !TryLock(fd)) return warnings;  // else its run is alive
  std::string pid = HolderPid(path);
  if (!RecoverableValue(pid)) pid = "?";
  if (geteuid() == 0 && TracefsMounted()) {
    if (umount2(kTracefsPath, MNT_DETACH) == 0)
      warnings.push_back("a previous lockline run (pid " + pid +
                         ") ended without unmounting the tracefs it mounted "
                         "at " +
                         kTracefsPath + ": unmounted");
    else
      warnings.push_back(
          "a previous lockline run (pid " + pid + ") left tracefs mounted at " +
          kTracefsPath +
          " and it could not be unmounted: " + std::strerror(errno));
  }
  unlink(path.c_str());
  close(fd);
  return warnings;
}

bool IsDir(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::string s{std::istreambuf_iterator<char>(in), {}};
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace lockline
