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
  /// Creates `dir` (and parents) and claims it: the initial file is written to
  /// an exclusive temporary file and hard-linked to lockline.json (link(2)
  /// fails on any existing name), so of two runs given one directory one gets
  /// it, and lockline.json never exists empty. Throws RunDirTaken when it
  /// exists, std::runtime_error (naming the directory and errno) otherwise.
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
  /// Runs `edit`, which returns the indices of the rows it changed in place
  /// (appended rows need not be listed): the others keep their serialized
  /// text, so a rewrite costs the new and changed rows, not the whole file.
  void EditRows(
      const std::function<std::vector<size_t>(nlohmann::json&)>& edit);

  /// Atomically replaces the file (the context indented, one row per line).
  /// On failure the run stops: one `lockline: error:` line naming the file,
  /// errno and the rows it keeps, RestoreAll(), exit kExitWriteFailed.
  void Flush();

 private:
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

/// Async-signal-safe: unlinks WriteFileAtomically's temporary file, if any;
/// when rename() already put it in place, KeptRows() becomes its rows.
void RemovePendingTemp();

/// Async-signal-safe: the last lockline.json written ("" before the first)
/// and the measured rows (run_type iteration) it holds.
const char* KeptResultPath();
long KeptRows();

}  // namespace lockline
