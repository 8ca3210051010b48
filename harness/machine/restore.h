// Puts back system settings a family changed (a sysctl): RestoreAll() writes
// every registered old value back, at the workload's end and from the signal
// handler (async-signal-safe: a static table, open / write / close / unlink).
// STATE_DIR/restore.state (written before a change) covers exits no handler
// sees; an flock on STATE_DIR/sysctl.lock makes a second run refuse.
// STATE_DIR is $LOCKLINE_STATE_DIR, else /run/lockline.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace lockline {

/// Another lockline process holds the settings lock (what(): file, pid).
class SettingBusy : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A small file (procfs / sysfs) without its trailing newline; "" if none.
std::string ReadSmallFile(const std::string& path);
/// True when `path` is a directory (stat; errno says why not).
bool IsDir(const std::string& path);

std::string RestoreStateDir();  ///< STATE_DIR (see above)

/// Records that `path` held `old_value` before the change (takes the lock,
/// rewrites the state file; the first value is kept). Throws SettingBusy,
/// std::runtime_error (state file unwritable) or std::length_error (over 16
/// paths, 255 / 63 bytes, a newline): then the setting must not change.
void RegisterRestore(const std::string& path, const std::string& old_value);

/// Takes the settings lock only; throws SettingBusy (naming `path`) or
/// std::runtime_error.
void AcquireSettingsLock(const std::string& path);

/// Writes every old value back once, removes the state file, releases the
/// lock. Async-signal-safe, also during a RegisterRestore; errors ignored.
void RestoreAll();

int RestorePending();  ///< registered entries not yet restored

/// The only paths start-up recovery writes (the state file is data).
inline constexpr const char* kRecoverablePaths[] = {
    "/proc/sys/vm/percpu_pagelist_high_fraction"};

/// True for kRecoverablePaths (and AddRecoverablePathForTests').
bool RecoverablePath(const std::string& path);

/// Tests only: lets recovery write a stand-in file `path`. Not thread-safe.
void AddRecoverablePathForTests(const std::string& path);

/// True for 1 to 10 decimal digits (what recovery may write back).
bool RecoverableValue(const std::string& value);

/// At start-up, a dead run's state file (lock free): writes the original
/// values back (kRecoverablePaths, RecoverableValue, O_NOFOLLOW), removes it;
/// one warning per setting. Not acted on when the dir or file is not ours or
/// root's, group/other-writable or a symlink; an entry refused for want of
/// permission is kept for root. Never throws.
std::vector<std::string> RecoverPreviousRun();

/// At start-up: notes whether tracefs is mounted at /sys/kernel/tracing (if
/// not, one there at the end is lockline's).
void WatchTracefsMount();

/// Before mounting tracefs: records it in STATE_DIR/tracefs.state (flocked
/// until the unmount); "" or why not (then lockline does not mount).
std::string RecordTracefsMount();

/// After the mount attempt: `mounted` marks tracefs as ours; false drops the
/// record. Async-signal-safe.
void NoteTracefsMounted(bool mounted);

/// At start-up: unmounts tracefs a gone run recorded, removes the record (the
/// same ownership checks); one warning per action.
std::vector<std::string> RecoverTracefsMount();

/// Unmounts (MNT_DETACH) the tracefs lockline mounted, once. Async-signal-safe.
/// True when it unmounted something.
bool UnmountWhatLocklineMounted();

}  // namespace lockline
