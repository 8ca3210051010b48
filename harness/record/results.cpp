#include "harness/record/results.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "harness/machine/cpu.h"
#include "harness/machine/restore.h"

namespace lockline {
namespace {

// Read by the signal handler: fixed buffers, no allocation.
char g_pending_temp[PATH_MAX];  // temporary file being written ("" if none)
char g_kept_path[PATH_MAX];     // last lockline.json written
std::atomic<long> g_kept_rows{0};
// Measured rows of the temporary being renamed (-1: none), for a signal
// between rename() and g_kept_rows's update.
std::atomic<long> g_rows_in_temp{-1};

void CopyPath(char* to, const std::string& from) {
  const size_t n = std::min(from.size(), static_cast<size_t>(PATH_MAX - 1));
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

long MeasuredRows(const nlohmann::json& doc) {
  long n = 0;
  for (const auto& row : doc["benchmarks"])
    if (row.value("run_type", "") == "iteration") ++n;
  return n;
}

}  // namespace

bool WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    // send: no SIGPIPE when the other side is gone; write for a file or a
    // pipe (a window server run by hand).
    ssize_t n = send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK)
      n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void WriteFileAtomically(const std::string& path, const std::string& text,
                         long measured_rows, bool sync) {
  g_rows_in_temp.store(-1);
  // A dot name beside the result: a temporary file a SIGKILL leaves behind
  // (no handler runs to remove it) is hidden and never taken for a result by
  // a reader (no *.json, no lockline.json prefix).
  const std::filesystem::path p(path);
  const std::string templ =
      (p.has_parent_path() ? p.parent_path().string() + "/" : std::string()) +
      "." + p.filename().string() + ".tmp.XXXXXX";
  if (templ.size() >= PATH_MAX)
    throw std::runtime_error("cannot write " + path + ": path too long");
  // mkstemp fills g_pending_temp in place, so a signal arriving at any point
  // finds the name to remove.
  CopyPath(g_pending_temp, templ);
  const int fd = mkostemp(g_pending_temp, O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    g_pending_temp[0] = '\0';
    throw std::runtime_error("cannot write " + path + " (creating " + templ +
                             "): " + std::strerror(err));
  }
  const std::string tmp = g_pending_temp;
  const auto fail = [&](const std::string& what, int err) {
    unlink(tmp.c_str());
    g_pending_temp[0] = '\0';
    return std::runtime_error("cannot write " + path + " (" + what + " " + tmp +
                              "): " + std::strerror(err));
  };
  if (fchmod(fd, 0644) != 0 || !WriteAll(fd, text) ||
      (sync && fsync(fd) != 0)) {
    const int err = errno;
    close(fd);
    throw fail("writing", err);
  }
  if (close(fd) != 0) throw fail("closing", errno);
  g_rows_in_temp.store(measured_rows);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    g_rows_in_temp.store(-1);
    throw fail("renaming", errno);
  }
  // Order matters to the signal handler: the count first, then the name.
  if (measured_rows >= 0) g_kept_rows.store(measured_rows);
  g_pending_temp[0] = '\0';
  g_rows_in_temp.store(-1);
}

void RemovePendingTemp() {
  if (g_pending_temp[0] == '\0') return;
  const int saved = errno;
  // Gone already: rename() has put it in place, so the result file holds
  // its rows even if g_kept_rows was not updated yet.
  if (unlink(g_pending_temp) != 0 && errno == ENOENT) {
    const long rows = g_rows_in_temp.load();
    if (rows >= 0) g_kept_rows.store(rows);
  }
  errno = saved;
}

const char* KeptResultPath() { return g_kept_path; }
long KeptRows() { return g_kept_rows.load(); }

ResultFile::ResultFile(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(dir).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec)
    throw std::runtime_error("cannot create run directory " + dir + ": " +
                             ec.message());
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw std::runtime_error("cannot create run directory " + dir + ": " +
                             std::strerror(errno));
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw std::runtime_error("cannot create run directory " + dir +
                             ": it exists and is not a directory");
  doc_ = {{"context",
           {{"lockline",
             {{"schema_version", kSchemaVersion}, {"finished", false}}}}},
          {"benchmarks", nlohmann::json::array()}};
  // The claim (results.h); an empty lockline.json would block a rerun with
  // the same --out.
  const std::string text = doc_.dump(1) + "\n";
  const std::string templ = dir + "/.lockline.json.claim.XXXXXX";
  if (templ.size() >= PATH_MAX)
    throw std::runtime_error("cannot create " + path() + ": path too long");
  CopyPath(g_pending_temp, templ);  // the signal handler removes it
  const int fd = mkostemp(g_pending_temp, O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    g_pending_temp[0] = '\0';
    throw std::runtime_error("cannot create " + path() + ": " +
                             std::strerror(err));
  }
  const std::string tmp = g_pending_temp;
  const auto drop_tmp = [&] {
    unlink(tmp.c_str());
    g_pending_temp[0] = '\0';
  };
  if (fchmod(fd, 0644) != 0 || !WriteAll(fd, text) || fsync(fd) != 0) {
    const int err = errno;
    close(fd);
    drop_tmp();
    throw std::runtime_error("cannot write " + path() + ": " +
                             std::strerror(err));
  }
  close(fd);
  if (link(tmp.c_str(), path().c_str()) != 0) {
    const int err = errno;
    drop_tmp();
    if (err == EEXIST)
      throw RunDirTaken("run directory " + dir +
                        " already holds a lockline.json (an earlier run, or "
                        "another lockline running now); pass another --out or "
                        "remove that file");
    throw std::runtime_error("cannot create " + path() + ": " +
                             std::strerror(err));
  }
  drop_tmp();
  CopyPath(g_kept_path, path());
  g_kept_rows.store(0);
}

void ResultFile::EditRows(
    const std::function<std::vector<size_t>(nlohmann::json&)>& edit) {
  for (size_t i : edit(doc_))
    if (i < row_fresh_.size()) row_fresh_[i] = 0;
}

const std::string& ResultFile::Text() {
  const nlohmann::json& rows = doc_["benchmarks"];
  if (row_text_.empty()) row_fresh_.clear();
  row_text_.resize(rows.size());
  row_fresh_.resize(rows.size(), 0);
  size_t bytes = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!row_fresh_[i]) {
      row_text_[i] = rows[i].dump();
      row_fresh_[i] = 1;
    }
    bytes += row_text_[i].size() + 2;
  }
  // One buffer for the whole run: a fresh 12 MB string per repetition is a
  // fresh mapping, ~3000 page faults (14 us each on the PVM guest).
  std::string& text = text_;
  text.clear();
  text.reserve(bytes + 4096);
  text += "{\n";
  bool first = true;
  for (const auto& [key, value] : doc_.items()) {
    text += first ? " " : ",\n ";
    first = false;
    text += nlohmann::json(key).dump() + ": ";
    if (key != "benchmarks") {
      text += value.dump(1);
      continue;
    }
    text += "[";
    for (size_t i = 0; i < row_text_.size(); ++i) {
      text += i ? ",\n  " : "\n  ";
      text += row_text_[i];
    }
    text += "\n ]";
  }
  text += "\n}\n";
  return text;
}

void ResultFile::Flush() {
  try {
    const uint64_t now = NowNs();
    const bool sync = lockline_context().value("finished", false) ||
                      now - last_sync_ns_ >= kSyncIntervalNs;
    WriteFileAtomically(path(), Text(), MeasuredRows(doc_), sync);
    if (sync) last_sync_ns_ = now;
  } catch (const std::exception& e) {
    int err = errno;
    // errno may have moved since the throw: the message names it too.
    if (std::strstr(e.what(), std::strerror(EMFILE)) != nullptr) err = EMFILE;
    if (std::strstr(e.what(), std::strerror(ENFILE)) != nullptr) err = ENFILE;
    std::fflush(stdout);
    // Out of descriptors is not a disk problem: say so.
    std::string why;
    if (err == EMFILE || err == ENFILE) {
      rlimit lim{};
      getrlimit(RLIMIT_NOFILE, &lim);
      why = err == EMFILE
                ? " (EMFILE: this process has its " +
                      std::to_string(lim.rlim_cur) +
                      " file descriptors open (ulimit -n), not a disk "
                      "problem; raise the limit)"
                : " (ENFILE: the system's file table is full, not a disk "
                  "problem)";
    }
    std::fprintf(stderr,
                 "lockline: error: %s%s; stopping the run: %s keeps the %ld "
                 "measured rows written before\n",
                 e.what(), why.c_str(), path().c_str(), g_kept_rows.load());
    std::fflush(stderr);
    RestoreAll();
    UnmountWhatLocklineMounted();
    _exit(kExitWriteFailed);
  }
}

}  // namespace lockline
