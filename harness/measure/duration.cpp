// ParseDuration: the one parser of "90s" / "500ms" durations (duration.h).
#include "harness/measure/duration.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <stdexcept>
#include <utility>

namespace lockline {

double ParseDuration(const std::string& text, const std::string& flag,
                     double min_s, double max_s) {
  const auto bad = [&](const std::string& why) {
    char range[96];
    std::snprintf(range, sizeof range, "%g s to %g s", min_s, max_s);
    return std::invalid_argument(
        "bad " + flag + " value '" + text + "'" + why +
        ": accepted is a duration from " + range +
        " like 90s, 500ms, 20m, 1h (a bare number is seconds)");
  };
  // Decimal only: strtod alone would take hex ("0x10"), inf and nan.
  static const std::regex kNumber(
      R"(([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?([a-z]*))");
  std::smatch m;
  if (!std::regex_match(text, m, kNumber)) throw bad("");
  const double v = std::strtod(text.c_str(), nullptr);
  const std::string unit = m[4].str();
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},   {"s", 1},    {"ms", 1e-3}, {"us", 1e-6},
      {"m", 60}, {"min", 60}, {"h", 3600}};
  double scale = -1;
  for (const auto& [name, seconds] : kUnits)
    if (unit == name) scale = seconds;
  if (scale < 0) throw bad(" (unknown unit '" + unit + "')");
  const double s = v * scale;
  if (!std::isfinite(s) || s < min_s || s > max_s) throw bad(" (out of range)");
  return s;
}

}  // namespace lockline
