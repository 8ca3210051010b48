// The run's result file, lockline.json: Google Benchmark's JSON format plus
// lockline's row keys, parameters, placement, coherence, fairness, counters and
// run context (see results/SCHEMA.md). Rewritten through a temporary file and
// rename after every point, so an interrupted run leaves valid JSON holding
// every point already measured.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace lockline {

/// Schema version of lockline.json (bump on incompatible changes).
inline constexpr int kSchemaVersion = 1;

/// The result file of one run directory.
class ResultFile {
 public:
  /// Creates `dir` (and parents) and writes an initial file with an empty
  /// benchmark list. Throws std::runtime_error naming the directory and errno
  /// when it cannot be created or written: call before any point runs.
  explicit ResultFile(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::string path() const { return dir_ + "/lockline.json"; }
  nlohmann::json& context() { return doc_["context"]; }
  nlohmann::json& lockline_context() { return doc_["context"]["lockline"]; }
  void AddRow(nlohmann::json row) {
    doc_["benchmarks"].push_back(std::move(row));
  }
  const nlohmann::json& doc() const { return doc_; }
  nlohmann::json& doc_mutable() { return doc_; }

  /// Atomically replaces the file with the current document (write to a
  /// temporary file in the same directory, fsync, rename). Throws
  /// std::runtime_error on I/O failure (full disk ...).
  void Flush();

 private:
  std::string dir_;
  nlohmann::json doc_;
};

/// Writes `text` to `path` atomically (temporary file + fsync + rename). Throws
/// std::runtime_error naming the path and errno.
void WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace lockline
