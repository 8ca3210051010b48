#include "harness/results.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace lockline {

void WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd =
      open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot write " + tmp + ": " +
                             std::strerror(errno));
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = write(fd, text.data() + off, text.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      close(fd);
      unlink(tmp.c_str());
      throw std::runtime_error("cannot write " + tmp + ": " +
                               std::strerror(err));
    }
    off += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(err));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " +
                             std::strerror(err));
  }
}

ResultFile::ResultFile(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  if (std::filesystem::exists(path(), ec))
    throw std::runtime_error(
        "run directory " + dir +
        " already holds a lockline.json from an earlier run; pass another "
        "--out or remove that file");
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw std::runtime_error("cannot create run directory " + dir + ": " +
                             ec.message());
  doc_ = {{"context",
           {{"lockline",
             {{"schema_version", kSchemaVersion}, {"finished", false}}}}},
          {"benchmarks", nlohmann::json::array()}};
  Flush();
}

void ResultFile::Flush() { WriteFileAtomically(path(), doc_.dump(1) + "\n"); }

}  // namespace lockline
