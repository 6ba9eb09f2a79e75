// The CUDA templates (templates/**) compiled into the binary, so the installed tool needs no
// source tree and NVRTC sees exactly these bytes (hermetic headers, hashed into cache keys).
#pragma once
#include <string_view>
#include <vector>

namespace deepinfer {

struct EmbeddedFile {
  std::string_view path;      // relative to templates/, e.g. "common/Mma.cuh"
  std::string_view contents;
};

const std::vector<EmbeddedFile>& embeddedTemplates();

}  // namespace deepinfer
