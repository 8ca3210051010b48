#include "harness/measure/shared_calibration.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
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
  // Another process's file is input: a regular file (a FIFO would block the
  // open) holding a finite value in (0, 1e7] (every calibration is well
  // inside it); anything else is said and measured here instead.
  const auto read_value = [&](double* out) {
    const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st {};
    char buf[64] = {};
    const bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    const ssize_t n = regular ? read(fd, buf, sizeof buf - 1) : -1;
    close(fd);
    char* end = buf;
    const double v = n > 0 ? std::strtod(buf, &end) : 0;
    if (end == buf || !std::isfinite(v) || v <= 0 || v > 1e7) return false;
    *out = v;
    return true;
  };
  double value = 0;
  if (access(path.c_str(), F_OK) == 0) {
    if (read_value(&value)) return value;
    std::fprintf(stderr,
                 "lockline: warning: shared calibration %s holds no valid "
                 "value; this process measures its own\n",
                 path.c_str());
  }
  value = measure();
  // Written to a temporary name, then linked into place: no reader sees half
  // a value, and when both processes measured, the first link wins.
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
