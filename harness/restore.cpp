#include "harness/restore.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

namespace lockline {
namespace {

constexpr int kMaxEntries = 64;
constexpr size_t kMaxText = 256;

// A fixed-size table: the signal handler reads it without allocating.
struct Entry {
  char path[kMaxText];
  char value[kMaxText];
  size_t value_len;
};
Entry g_entries[kMaxEntries];
std::atomic<int> g_count{0};
std::atomic<bool> g_restored{false};

}  // namespace

void RegisterRestore(const std::string& path, const std::string& old_value) {
  const int i = g_count.load();
  if (i >= kMaxEntries || path.size() >= kMaxText ||
      old_value.size() >= kMaxText) {
    std::fprintf(stderr,
                 "lockline: warning: cannot register the restore of %s (table "
                 "full or value too long); restore it by hand to '%s'\n",
                 path.c_str(), old_value.c_str());
    return;
  }
  Entry& e = g_entries[i];
  std::memcpy(e.path, path.c_str(), path.size() + 1);
  std::memcpy(e.value, old_value.data(), old_value.size());
  e.value_len = old_value.size();
  g_count.store(i + 1);  // publish after the entry is complete
}

void RestoreAll() {
  if (g_restored.exchange(true)) return;
  for (int i = g_count.load() - 1; i >= 0; --i) {
    const Entry& e = g_entries[i];
    const int fd = open(e.path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) continue;
    [[maybe_unused]] ssize_t n = write(fd, e.value, e.value_len);
    close(fd);
  }
}

}  // namespace lockline
