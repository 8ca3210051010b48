// Google Benchmark's time fields on lockline's rows, so Google's own tools
// (tools/compare.py, anything reading its JSON) compare throughput: one
// repetition row reports iterations = operations and real_time / cpu_time per
// operation; aggregate rows (mean, median, stddev, cv) are computed by
// lockline from its repetition rows, with cv as a ratio the way Google
// Benchmark writes it and cpu_time the worker threads'.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lockline {

/// Sets a repetition row's Google Benchmark time fields: `iterations` = `ops`
/// (all threads'), `real_time` = wall time / ops, `cpu_time` = the workers'
/// CPU time / ops, in ns: real_time is 1e9 / ops_per_s. ops == 0: all 0.
void SetPerOpTimes(nlohmann::json& row, double wall_seconds, double cpu_seconds,
                   uint64_t ops);

/// The aggregate rows of `key` (rows with lockline_key == key, run_type
/// iteration, no error) in Google Benchmark 1.7.1's shape: mean, median,
/// stddev (sample, n-1) and cv (stddev / mean as a ratio, aggregate_unit
/// "percentage") of real_time, cpu_time and every numeric flat metric the
/// rows carry (ops_per_s, ns_per_op, family metrics, <event>/op). iterations
/// is the mean operations per repetition; repetitions the number of rows
/// aggregated. Empty when fewer than 2 rows qualify.
std::vector<nlohmann::json> AggregateRows(const nlohmann::json& doc,
                                          const std::string& key);

/// Replaces the aggregate rows of `key` in doc["benchmarks"] by
/// AggregateRows(doc, key): existing ones are overwritten in place (row
/// positions of other rows never move), new ones appended. Returns the
/// indices of the rows overwritten in place (for ResultFile::EditRows).
std::vector<size_t> UpdateAggregates(nlohmann::json& doc,
                                     const std::string& key);

}  // namespace lockline
