// The run's result file, lockline.json: Google Benchmark's JSON format plus
// lockline's row keys, parameters, placement, coherence, fairness, counters and
// run context (see results/SCHEMA.md). Rewritten through an exclusively created
// temporary file and rename after every point, so an interrupted run leaves
// valid JSON holding every point already measured.
#pragma once

#include <cstddef>
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

/// The run directory already holds a lockline.json (an earlier run, or another
/// lockline started with the same --out): the directory belongs to that run.
class RunDirTaken : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The result file of one run directory.
class ResultFile {
 public:
  /// Creates `dir` (and parents) and claims it: the initial file (an empty
  /// benchmark list) is written to an exclusively created temporary file and
  /// hard-linked to lockline.json (link(2) fails on any existing name, a
  /// symlink too), so of two runs given one directory exactly one gets it and
  /// lockline.json never exists empty, even when a signal lands mid-claim.
  /// Throws RunDirTaken when lockline.json exists, std::runtime_error naming
  /// the directory and errno when it cannot be created or written: call before
  /// any point runs.
  explicit ResultFile(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::string path() const { return dir_ + "/lockline.json"; }
  nlohmann::json& context() { return doc_["context"]; }
  nlohmann::json& lockline_context() { return doc_["context"]["lockline"]; }
  void AddRow(nlohmann::json row) {
    doc_["benchmarks"].push_back(std::move(row));
  }
  const nlohmann::json& doc() const { return doc_; }
  /// The document for changes anywhere: the next Flush serializes every row
  /// again. EditRows is cheaper when the changed rows are known.
  nlohmann::json& doc_mutable() {
    row_text_.clear();
    return doc_;
  }
  /// Runs `edit` on the document. `edit` returns the indices of the rows it
  /// changed in place (rows it appends need not be listed); the other rows
  /// keep the text the last Flush serialized for them, so the rewrite after
  /// every repetition costs the new and changed rows, not the whole file (a
  /// full rewrite of a large file after every repetition would dominate the
  /// run's time). The context is always serialized again.
  void EditRows(
      const std::function<std::vector<size_t>(nlohmann::json&)>& edit);

  /// Atomically replaces the file with the current document
  /// (WriteFileAtomically): the context indented, one row per line.
  /// On failure (full disk, read-only file system ...) the run stops: one
  /// `lockline: error:` line naming the file, errno and the rows the file
  /// keeps, RestoreAll(), exit status kExitWriteFailed. Never throws.
  void Flush();

 private:
  // The document as JSON text, rows from the cache (row_text_[i], when
  // row_fresh_[i]) and the rest serialized now.
  std::string Text();

  std::string dir_;
  nlohmann::json doc_;
  std::vector<std::string> row_text_;  ///< serialized rows[i] (cache)
  std::vector<char> row_fresh_;        ///< row_text_[i] is current
};

/// Writes `text` to `path` atomically: a temporary file created by mkstemp
/// (O_EXCL, so a planted symlink is never followed) in the same directory,
/// fsync, rename over `path`. The temporary file is removed on failure (and by
/// RemovePendingTemp from a signal handler). `measured_rows` >= 0 (the result
/// file's measured rows) becomes KeptRows() the moment the rename is done;
/// -1 for other files. Throws std::runtime_error naming the path and errno.
void WriteFileAtomically(const std::string& path, const std::string& text,
                         long measured_rows = -1);

/// Async-signal-safe: unlinks the temporary file WriteFileAtomically is
/// writing, if any; when it is already gone because rename() put it in
/// place, KeptRows() becomes the rows it held (a signal between rename() and
/// the count's update still reports what the file holds).
void RemovePendingTemp();

/// Async-signal-safe: the path of the last lockline.json written
/// (NUL-terminated,
/// "" before the first) and the number of measured rows (run_type iteration) it
/// holds.
const char* KeptResultPath();
long KeptRows();

}  // namespace lockline
