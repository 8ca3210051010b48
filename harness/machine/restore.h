// Restoring system settings a family changed for a sweep (a sysctl such as
// vm.percpu_pagelist_high_fraction): the family registers the file and its old
// value before writing the new one; RestoreAll() writes every old value back.
// It runs at the workload's normal end (its destructor) and from the signal
// handler of harness/run/main.cpp (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
// SIGUSR2, SIGPIPE, SIGALRM), so it is async-signal-safe: a fixed-size static
// table filled before the change, and only open / write / close / unlink at
// restore time.
//
// Exits no handler sees (SIGKILL, the OOM killer, a power cut) are covered by
// a state file: RegisterRestore writes the original values to
// STATE_DIR/restore.state before the change, RestoreAll removes it, and
// RecoverPreviousRun() at the next start writes back what a dead run left
// changed. Two runs at once are kept apart by an exclusive flock(2) on
// STATE_DIR/sysctl.lock, held from the first registration to RestoreAll: a
// second run's RegisterRestore refuses (SettingBusy) instead of measuring at
// the other run's value. STATE_DIR is $LOCKLINE_STATE_DIR, else /run/lockline.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace lockline {

/// Another lockline process holds the settings lock (it is changing a setting
/// now); what() names the lock file, the holder's pid when known, and what to
/// do.
class SettingBusy : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Reads a whole small file (procfs / sysfs), trailing newline stripped; "" if
/// unreadable.
std::string ReadSmallFile(const std::string& path);

/// The directory of the state and lock files: $LOCKLINE_STATE_DIR when set
/// and not empty, else /run/lockline.
std::string RestoreStateDir();

/// Records that `path` (e.g. "/proc/sys/vm/percpu_pagelist_high_fraction")
/// held `old_value` before this process changed it. Call before writing the
/// new value. The first registration takes the settings lock (non-blocking)
/// and every registration rewrites the state file (atomically, fsynced).
/// Registering a path again keeps the first (original) value. Throws
/// SettingBusy when another run holds the lock, std::runtime_error when the
/// state file cannot be written (naming it and errno), std::length_error
/// beyond 16 paths of up to 255 bytes / values of up to 63 bytes or a value
/// with a newline; the caller must then not change the setting. Not
/// async-signal-safe (call from normal code).
void RegisterRestore(const std::string& path, const std::string& old_value);

/// Takes the settings lock (as RegisterRestore does, non-blocking) without
/// registering anything: a point reads a setting's value under it, so no other
/// lockline run changes it between the read and the end of the point's
/// windows. Released by RestoreAll. Throws SettingBusy (naming `path`) when
/// another run holds it, std::runtime_error when the lock file cannot be
/// opened. Not async-signal-safe.
void AcquireSettingsLock(const std::string& path);

/// Writes every registered old value back to its path (open O_WRONLY, write,
/// close) and forgets it, so a second call does nothing; then removes the
/// state file and releases the lock. Async-signal-safe: safe to call from a
/// signal handler, also while RegisterRestore runs on another thread (an
/// entry is used only once fully written). Errors are ignored (nothing can be
/// reported from a handler); RestorePending() says whether anything is still
/// registered.
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
/// /sys/kernel/tracing. When it is not (and lockline runs as root, so a
/// kernel family may mount it: harness/measure/kernel_probe.cpp), the mount
/// found there at the end is lockline's own and UnmountWhatLocklineMounted
/// removes it (the machine is left as found).
void WatchTracefsMount();

/// Before lockline mounts tracefs: records the mount in
/// STATE_DIR/tracefs.state ("pid N", "mount tracefs /sys/kernel/tracing"),
/// held with flock until the unmount, so a run that dies outright (SIGKILL)
/// leaves a record the next run acts on (RecoverTracefsMount). Returns "" or
/// why it could not (then lockline does not mount).
std::string RecordTracefsMount();

/// After the mount attempt: `mounted` true marks tracefs as this process's
/// own (UnmountWhatLocklineMounted removes it, whatever WatchTracefsMount saw
/// at start: a second run that mounts it after the first unmounted it no
/// longer leaves it); false drops the record. Async-signal-safe.
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
