// The run's result file, lockline.json (results/SCHEMA.md), rewritten
// atomically after every point so an interrupted run leaves valid JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace lockline {

/// Schema version of lockline.json (bump on incompatible changes).
inline constexpr int kSchemaVersion = 1;

/// Exit status when a result cannot be written mid-run (disk full, read-only).
inline constexpr int kExitWriteFailed = 4;

/// The run directory already holds a lockline.json (another run's).
class RunDirTaken : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The result file of one run directory.
class ResultFile {
 public:
  /// Creates `dir` and claims it: an exclusive temporary file hard-linked to
  /// lockline.json (link(2) fails on an existing name, and the file never
  /// exists empty). Throws RunDirTaken or std::runtime_error.
  explicit ResultFile(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::string path() const { return dir_ + "/lockline.json"; }
  nlohmann::json& context() { return doc_["context"]; }
  nlohmann::json& lockline_context() { return doc_["context"]["lockline"]; }
  void AddRow(nlohmann::json row) {
    doc_["benchmarks"].push_back(std::move(row));
  }
  const nlohmann::json& doc() const { return doc_; }
  /// The document for any change: the next Flush serializes every row.
  nlohmann::json& doc_mutable() {
    row_text_.clear();
    return doc_;
  }
  /// Runs `edit`, which returns the indices of rows changed in place; the
  /// others keep their serialized text.
  void EditRows(
      const std::function<std::vector<size_t>(nlohmann::json&)>& edit);

  /// Atomically replaces the file; on failure one error line, RestoreAll(),
  /// exit kExitWriteFailed. fsync'd when the run is finished or
  /// kSyncIntervalNs after the last fsync: the rename alone keeps the file
  /// whole for a killed or crashed lockline, and an fsync took ~14 ms after
  /// each of a default run's ~1200 repetitions (2-vCPU VM, a 12 MB file).
  void Flush();
  static constexpr uint64_t kSyncIntervalNs = 10'000'000'000ull;

 private:
  /// The document's text, in text_ (valid until the next call).
  const std::string& Text();

  std::string dir_;
  nlohmann::json doc_;
  std::vector<std::string> row_text_;  ///< serialized rows[i] (cache)
  std::vector<char> row_fresh_;        ///< row_text_[i] is current
  uint64_t last_sync_ns_ = 0;          ///< NowNs() of the last fsync
  std::string text_;                   ///< Text()'s buffer, kept between writes
};

/// Writes `text` to `path` atomically (a temporary beside it, fsync unless
/// !`sync`, rename; removed on failure); `measured_rows` >= 0 becomes
/// KeptRows() at the rename. Throws std::runtime_error naming the path and
/// errno.
void WriteFileAtomically(const std::string& path, const std::string& text,
                         long measured_rows = -1, bool sync = true);

/// Writes all of `text` to `fd` (a socket: without SIGPIPE); false with errno
/// set on failure.
bool WriteAll(int fd, const std::string& text);

/// Async-signal-safe: unlinks a pending temporary file.
void RemovePendingTemp();

/// Async-signal-safe: the last lockline.json written and its measured rows.
const char* KeptResultPath();
long KeptRows();

}  // namespace lockline
