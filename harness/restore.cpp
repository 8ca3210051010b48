#include "harness/restore.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace lockline {
namespace {

constexpr int kMaxEntries = 16;
constexpr std::size_t kMaxPath = 256, kMaxValue = 64;

// One registered setting. `state` is the publication flag: 0 free, 1 being
// written by RegisterRestore, 2 ready, 3 being restored (claimed by one
// RestoreAll). Lock-free, so a handler interrupting RegisterRestore neither
// deadlocks nor sees a half-written entry.
struct Entry {
  std::atomic<int> state{0};
  char path[kMaxPath];
  char value[kMaxValue];
  std::size_t value_len;
};

Entry g_entries[kMaxEntries];
std::mutex g_register_mu;  // RegisterRestore callers among themselves only

}  // namespace

void RegisterRestore(const std::string& path, const std::string& old_value) {
  if (path.size() >= kMaxPath || old_value.size() >= kMaxValue)
    throw std::length_error("RegisterRestore: path or value too long: " + path);
  std::lock_guard<std::mutex> lock(g_register_mu);
  for (Entry& e : g_entries)
    if (e.state.load(std::memory_order_acquire) == 2 &&
        path == std::string(e.path))
      return;  // keep the original value
  for (Entry& e : g_entries) {
    int expected = 0;
    if (!e.state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(e.path, path.c_str(), path.size() + 1);
    std::memcpy(e.value, old_value.data(), old_value.size());
    e.value_len = old_value.size();
    e.state.store(2, std::memory_order_release);
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
}

int RestorePending() {
  int n = 0;
  for (Entry& e : g_entries)
    if (e.state.load(std::memory_order_acquire) == 2) ++n;
  return n;
}

}  // namespace lockline
