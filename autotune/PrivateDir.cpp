#include "PrivateDir.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace deepinfer {

Result<std::string> openPrivateDir(const std::string& dir, bool create) {
  if (dir.empty()) return Error{"the cache directory is empty"};
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return Error{fmt::format("{}: {}", dir, std::strerror(errno))};
    if (!create) return Error{fmt::format("{} does not exist (nothing there; created only by commands that write)", dir)};
    for (size_t p = dir.find('/', 1); p != std::string::npos; p = dir.find('/', p + 1)) {
      const std::string parent = dir.substr(0, p);
      if (::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST)
        return Error{fmt::format("cannot create {}: {}", parent, std::strerror(errno))};
    }
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return Error{fmt::format("cannot create the cache directory {}: {}", dir, std::strerror(errno))};
    if (::lstat(dir.c_str(), &st) != 0) return Error{fmt::format("{}: {}", dir, std::strerror(errno))};
  }
  std::string path = dir;
  if (S_ISLNK(st.st_mode)) {
    if (st.st_uid != ::geteuid())
      return Error{fmt::format("{} is a symlink owned by uid {}, not by this user; refusing it", dir, st.st_uid)};
    char resolved[PATH_MAX];
    if (!::realpath(dir.c_str(), resolved))
      return Error{fmt::format("{} is a symlink that does not resolve: {}", dir, std::strerror(errno))};
    path = resolved;
    if (::lstat(path.c_str(), &st) != 0) return Error{fmt::format("{}: {}", path, std::strerror(errno))};
  }
  const std::string shown = path == dir ? dir : fmt::format("{} (the target of symlink {})", path, dir);
  if (!S_ISDIR(st.st_mode)) return Error{fmt::format("{} is not a directory; refusing it", shown)};
  if (st.st_uid != ::geteuid())
    return Error{fmt::format("{} is owned by uid {}, not by this user (uid {}); refusing it", shown, st.st_uid,
                             ::geteuid())};
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return Error{fmt::format("{} is writable by group or others (mode {:o}); refusing it", shown, st.st_mode & 0777)};
  return path;
}

}  // namespace deepinfer
