#include "AtomicPublish.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace deepinfer {

Status publishAtomically(const std::string& tmp, const std::string& finalPath, const std::string& body) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return Error{fmt::format("cannot stage {}: {}", tmp, std::strerror(errno))};
  size_t done = 0;
  while (done < body.size()) {
    const ssize_t n = ::write(fd, body.data() + done, body.size() - done);
    if (n <= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      return Error{fmt::format("writing {}: {}", tmp, std::strerror(errno))};
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Error{fmt::format("flushing {}: {}", tmp, std::strerror(errno))};
  }
  if (::rename(tmp.c_str(), finalPath.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Error{fmt::format("publishing {}: {}", finalPath, std::strerror(errno))};
  }
  return {};
}

}  // namespace deepinfer
