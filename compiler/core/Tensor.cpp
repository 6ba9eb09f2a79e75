#include "deepinfer/Tensor.h"

#include <fmt/format.h>

namespace deepinfer {

const char* dtypeName(DType t) {
  switch (t) {
    case DType::BF16: return "BF16";
    case DType::F32: return "F32";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
  }
  return "?";
}

bool parseDType(const std::string& s, DType* out) {
  for (DType t : {DType::BF16, DType::F32, DType::I32, DType::I64, DType::U8})
    if (s == dtypeName(t)) { *out = t; return true; }
  return false;
}

std::string HostTensor::shapeString() const {
  std::string r = "[";
  for (size_t i = 0; i < shape.size(); ++i) r += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return r + "]";
}

}  // namespace deepinfer
