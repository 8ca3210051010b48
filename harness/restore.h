// System state a run changed (a sysctl a family sweeps, ...) and how to put it
// back: families register the old value before changing a file, and the
// harness writes every registered value back at the end of the run and from
// its SIGINT / SIGTERM handler.
#pragma once

#include <string>

namespace lockline {

/// Remembers that `path` (a procfs / sysfs file) held `old_value` before the
/// run changed it; RestoreAll writes it back. At most 64 registrations of up to
/// 255-byte paths and 255-byte values (longer ones are ignored with a warning
/// on stderr). Not async-signal-safe: call from normal code only.
void RegisterRestore(const std::string& path, const std::string& old_value);

/// Writes every registered old value back (open / write / close only, latest
/// registration first), once: later calls do nothing. Async-signal-safe, so the
/// signal handler may call it.
void RestoreAll();

}  // namespace lockline
