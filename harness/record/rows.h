// Google Benchmark's time fields on lockline's rows (per operation;
// aggregates computed by lockline), so Google's tools/compare.py works.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lockline {

/// A repetition row's `iterations` = `ops`, `real_time` / `cpu_time` = wall /
/// worker CPU ns per op (all 0 for ops == 0).
void SetPerOpTimes(nlohmann::json& row, double wall_seconds, double cpu_seconds,
                   uint64_t ops);

/// Replaces `key`'s aggregate rows in doc["benchmarks"] (in place, new ones
/// appended) with Google Benchmark 1.7.1's (mean, median, sample stddev, cv as
/// a ratio) of the times and every numeric flat metric over its error-free
/// iteration rows, none for fewer than 2; returns the indices overwritten.
std::vector<size_t> UpdateAggregates(nlohmann::json& doc,
                                     const std::string& key);

}  // namespace lockline
