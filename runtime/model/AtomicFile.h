// Files written under a temporary name and renamed into place, so a crashed or failed writer
// never leaves a half-written model file behind.
#pragma once
#include <cstdio>
#include <string>

#include "deepinfer/Error.h"

namespace deepinfer {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();  // removes the temporary unless commit() succeeded
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  Status open();
  Status write(const void* data, size_t n);
  Status commit();  // flush, fsync, rename over `path`

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

// Whole-file convenience.
Status writeFileAtomic(const std::string& path, const void* data, size_t n);
inline Status writeFileAtomic(const std::string& path, const std::string& text) {
  return writeFileAtomic(path, text.data(), text.size());
}

}  // namespace deepinfer
