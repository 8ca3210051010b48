#include "harness/measure/shared_calibration.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace lockline {

double SharedCalibration(const std::string& name,
                         const std::function<double()>& measure) {
  const char* dir = std::getenv(kSharedCalibrationEnv);
  if (dir == nullptr || *dir == '\0') return measure();
  std::string file = name;
  for (char& c : file)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
          c == ':' || c == '-'))
      c = '_';
  const std::string path = std::string(dir) + "/" + file;
  const auto read_value = [&](double* out) {
    FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) return false;
    const bool ok = std::fscanf(f, "%lf", out) == 1;
    std::fclose(f);
    return ok;
  };
  double value = 0;
  if (read_value(&value)) return value;
  value = measure();
  // Written to a temporary name, then linked into place: a reader never sees
  // a half-written value, and when both processes measured, the first link
  // wins and the second takes the first's value.
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return value;
  std::fprintf(f, "%.17g\n", value);
  const bool written = std::fclose(f) == 0;
  const bool linked = written && link(tmp.c_str(), path.c_str()) == 0;
  unlink(tmp.c_str());
  double theirs = 0;
  if (!linked && read_value(&theirs)) return theirs;
  return value;
}

}  // namespace lockline
