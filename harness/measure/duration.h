// Durations as lockline's flags and LOCKLINE_SETUP_TIMEOUT write them ("90s",
// "500ms"): one parser for run/options.cpp and the team's set-up limit.
#pragma once

#include <string>

namespace lockline {

/// Parses "90" or "90s", "500ms", "20m", "1h" (decimal, optional fraction and
/// exponent). Throws std::invalid_argument naming `flag` and the accepted
/// range when malformed or outside [min_s, max_s] seconds.
double ParseDuration(const std::string& text, const std::string& flag,
                     double min_s, double max_s);

}  // namespace lockline
