// Restoring system settings a family changed for a sweep (a sysctl such as
// vm.percpu_pagelist_high_fraction): the family registers the file and its old
// value before writing the new one; RestoreAll() writes every old value back,
// at the workload's end and from main.cpp's signal handler, so it is
// async-signal-safe (a fixed static table; open / write / close / unlink).
// Exits no handler sees (SIGKILL, the OOM killer, a power cut) are covered by
// STATE_DIR/restore.state, written before the change, removed by RestoreAll,
// acted on by RecoverPreviousRun() at the next start. An exclusive flock(2) on
// STATE_DIR/sysctl.lock, held from the first registration to RestoreAll, makes
// a second run refuse (SettingBusy) rather than measure at the other's value.
// STATE_DIR is $LOCKLINE_STATE_DIR, else /run/lockline.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace lockline {

/// Another lockline process holds the settings lock; what() names the lock
/// file, the holder's pid when known, and what to do.
class SettingBusy : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Reads a whole small file (procfs / sysfs), trailing newline stripped; "" if
/// unreadable.
std::string ReadSmallFile(const std::string& path);

/// STATE_DIR (see above).
std::string RestoreStateDir();

/// Records that `path` held `old_value`; call before writing the new value.
/// The first registration takes the settings lock (non-blocking); each
/// rewrites the state file (atomically, fsynced); a path registered again
/// keeps its first value. Throws SettingBusy (lock held elsewhere),
/// std::runtime_error (state file unwritable, naming it and errno),
/// std::length_error (over 16 paths of 255 bytes / values of 63, or a newline):
/// the caller must then not change the setting. Not async-signal-safe.
void RegisterRestore(const std::string& path, const std::string& old_value);

/// Takes the settings lock without registering anything, so no other run
/// changes a setting a point read until RestoreAll. Throws SettingBusy (naming
/// `path`) or std::runtime_error (lock file unopenable).
void AcquireSettingsLock(const std::string& path);

/// Writes every registered old value back and forgets it (a second call does
/// nothing), removes the state file, releases the lock. Async-signal-safe,
/// also while RegisterRestore runs on another thread (an entry is used only
/// once fully written). Errors are ignored (a handler cannot report them).
void RestoreAll();

/// Number of registered entries not yet restored (for tests and reports).
int RestorePending();

/// The settings lockline itself changes, the only paths start-up recovery
/// writes (the state file is data, never a list of targets).
inline constexpr const char* kRecoverablePaths[] = {
    "/proc/sys/vm/percpu_pagelist_high_fraction"};

/// True when `path` is one of kRecoverablePaths (or was added by
/// AddRecoverablePathForTests).
bool RecoverablePath(const std::string& path);

/// Tests only: lets recovery also write `path` (a stand-in file for a sysctl,
/// so recovery is tested without changing the machine). Not thread-safe.
void AddRecoverablePathForTests(const std::string& path);

/// True when `value` is a setting value recovery may write back: 1 to 10
/// decimal digits (every kRecoverablePaths setting is a number).
bool RecoverableValue(const std::string& value);

/// At start-up: when a previous run died with settings changed (its state
/// file is there and its lock is free), writes the original values back and
/// removes the state file. Returns one warning per setting it found changed
/// ("a previous lockline run (pid N) ended without restoring PATH: it was
/// CUR, restored to OLD", or why it could not be restored); empty when there
/// was nothing to do or another run holds the lock (that run restores its
/// own). Only kRecoverablePaths with RecoverableValue values are written
/// (O_NOFOLLOW, never created); a state directory or file not owned by root
/// (or this user), writable by group or others, or a symlink is not acted on
/// (one warning); a missing lock file is recreated. An entry refused (path,
/// value, or by the kernel) warns once and the file goes; one not written for
/// want of permission is kept for a run as root. Never throws.
std::vector<std::string> RecoverPreviousRun();

/// Call once at start-up: notes whether tracefs is mounted at
/// /sys/kernel/tracing; if not, a mount found there at the end is lockline's
/// (kernel_probe.cpp) and UnmountWhatLocklineMounted removes it.
void WatchTracefsMount();

/// Before lockline mounts tracefs: records the mount in
/// STATE_DIR/tracefs.state ("pid N", "mount tracefs /sys/kernel/tracing"),
/// held with flock until the unmount, so a run that dies outright (SIGKILL)
/// leaves a record the next run acts on (RecoverTracefsMount). Returns "" or
/// why it could not (then lockline does not mount).
std::string RecordTracefsMount();

/// After the mount attempt: `mounted` marks tracefs as this process's own
/// (unmounted at the end whatever WatchTracefsMount saw); false drops the
/// record. Async-signal-safe.
void NoteTracefsMounted(bool mounted);

/// At start-up: when STATE_DIR/tracefs.state records a mount by a run that is
/// gone (its lock is free), unmounts tracefs at /sys/kernel/tracing (root)
/// and removes the record; one warning per action. Refuses (one warning) a
/// state directory or file not root's or writable by others. Never throws.
std::vector<std::string> RecoverTracefsMount();

/// Unmounts (umount2 MNT_DETACH) tracefs at /sys/kernel/tracing when
/// WatchTracefsMount found it unmounted and it is mounted now; once.
/// Async-signal-safe (statfs, umount2): called at the run's end and from the
/// signal handler. Returns true when it unmounted something.
bool UnmountWhatLocklineMounted();

}  // namespace lockline
