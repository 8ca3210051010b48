// Restoring system settings a family changed for a sweep (a sysctl such as
// vm.percpu_pagelist_high_fraction): the family registers the file and its old
// value before writing the new one; RestoreAll() writes every old value back.
// It runs at the workload's normal end (its destructor) and from the signal
// handler of harness/main.cpp (SIGINT / SIGTERM), so it is async-signal-safe:
// a fixed-size static table filled before the change, and only open / write /
// close at restore time.
#pragma once

#include <string>

namespace lockline {

/// Records that `path` (e.g. "/proc/sys/vm/percpu_pagelist_high_fraction")
/// held `old_value` before this process changed it. Call before writing the
/// new value. Registering a path again keeps the first (original) value.
/// Capacity: 16 paths of up to 255 bytes, values of up to 63 bytes; beyond
/// that the call throws std::length_error (the caller must then not change
/// the setting). Not async-signal-safe (call from normal code).
void RegisterRestore(const std::string& path, const std::string& old_value);

/// Writes every registered old value back to its path (open O_WRONLY, write,
/// close) and forgets it, so a second call does nothing. Async-signal-safe:
/// safe to call from a signal handler, also while RegisterRestore runs on
/// another thread (an entry is used only once fully written). Errors are
/// ignored (nothing can be reported from a handler); RestorePending() says
/// whether anything is still registered.
void RestoreAll();

/// Number of registered entries not yet restored (for tests and reports).
int RestorePending();

}  // namespace lockline
