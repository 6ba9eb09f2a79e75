// Temporary file + rename.
#include "AtomicFile.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace deepinfer {

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)), tmp_(fmt::format("{}.tmp.{}", path_, ::getpid())) {}

AtomicFile::~AtomicFile() {
  if (f_) std::fclose(f_);
  if (!committed_) std::remove(tmp_.c_str());
}

Status AtomicFile::open() {
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) return Error{fmt::format("{}: cannot create: {}", tmp_, std::strerror(errno))};
  std::setvbuf(f_, nullptr, _IOFBF, size_t(1) << 22);
  return {};
}

Status AtomicFile::write(const void* data, size_t n) {
  if (!f_) return Error{fmt::format("{}: write before open", tmp_)};
  if (n && std::fwrite(data, 1, n, f_) != n)
    return Error{fmt::format("{}: write failed: {}", tmp_, std::strerror(errno))};
  return {};
}

Status AtomicFile::commit() {
  if (!f_) return Error{fmt::format("{}: commit before open", tmp_)};
  const bool flushed = std::fflush(f_) == 0 && ::fsync(fileno(f_)) == 0;
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!flushed || !closed) return Error{fmt::format("{}: write failed: {}", tmp_, std::strerror(errno))};
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    return Error{fmt::format("{}: cannot rename into place: {}", path_, std::strerror(errno))};
  committed_ = true;
  return {};
}

Status writeFileAtomic(const std::string& path, const void* data, size_t n) {
  AtomicFile f(path);
  DI_TRY(f.open());
  DI_TRY(f.write(data, n));
  return f.commit();
}

}  // namespace deepinfer
