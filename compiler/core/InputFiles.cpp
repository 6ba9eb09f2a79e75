#include "deepinfer/InputFiles.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace deepinfer {

Result<std::string> readFileBounded(const std::string& path, uint64_t maxBytes, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{fmt::format("{} {}: cannot open: {}", what, path, std::strerror(errno))};
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
    return Error{fmt::format("{} {}: is a directory, not a file", what, path)};
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error{fmt::format("{} {}: read error: {}", what, path, std::strerror(errno))};
    }
    if (n == 0) break;
    if (uint64_t(text.size()) + uint64_t(n) > maxBytes)
      return Error{fmt::format("{} {}: larger than its {}-byte limit (a device, a runaway file or the wrong "
                               "file?)",
                               what, path, maxBytes)};
    text.append(buf, size_t(n));
  }
  return text;
}

}  // namespace deepinfer
