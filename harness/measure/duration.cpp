// ParseDuration: the one parser of "90s" / "500ms" durations (duration.h).
#include "harness/measure/duration.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <stdexcept>

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
  double scale = -1;
  if (unit.empty() || unit == "s")
    scale = 1;
  else if (unit == "ms")
    scale = 1e-3;
  else if (unit == "us")
    scale = 1e-6;
  else if (unit == "m" || unit == "min")
    scale = 60;
  else if (unit == "h")
    scale = 3600;
  if (scale < 0) throw bad(" (unknown unit '" + unit + "')");
  const double s = v * scale;
  if (!std::isfinite(s) || s < min_s || s > max_s) throw bad(" (out of range)");
  return s;
}

}  // namespace lockline
