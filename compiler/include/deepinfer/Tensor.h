// Host tensors and op attributes by canonical name (docs/ops.md §11). No CUDA, no MLIR.
#pragma once
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "deepinfer/Error.h"

namespace deepinfer {

enum class DType { BF16, F32, I32, I64, U8 };

inline size_t dtypeSize(DType t) {
  switch (t) {
    case DType::BF16: return 2;
    case DType::F32: case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::U8: return 1;
  }
  return 0;
}
const char* dtypeName(DType t);                 // "BF16", "F32", ... (safetensors spelling)
bool parseDType(const std::string& s, DType* out);

// A dense row-major host tensor. Raw bytes; typed access through ptr<T>().
struct HostTensor {
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  HostTensor(DType t, std::vector<int64_t> s) : dtype(t), shape(std::move(s)) {
    bytes.assign(numel() * dtypeSize(dtype), 0);
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int64_t dim(size_t i) const { return shape.at(i); }
  template <class T> T* ptr() { return reinterpret_cast<T*>(bytes.data()); }
  template <class T> const T* ptr() const { return reinterpret_cast<const T*>(bytes.data()); }
  std::string shapeString() const;              // "[2, 64, 512]"
};

using TensorMap = std::map<std::string, HostTensor>;

// Scalar attributes of an op (`--attr name=value`): integers and floats.
struct AttrValue {
  bool isInt = true;
  int64_t i = 0;
  double f = 0;
};

class OpAttrs {
 public:
  void setInt(const std::string& k, int64_t v) { m_[k] = AttrValue{true, v, double(v)}; }
  void setFloat(const std::string& k, double v) { m_[k] = AttrValue{false, int64_t(v), v}; }
  bool has(const std::string& k) const { return m_.count(k) != 0; }
  int64_t getInt(const std::string& k, int64_t dflt) const {
    auto it = m_.find(k);
    return it == m_.end() ? dflt : (it->second.isInt ? it->second.i : int64_t(it->second.f));
  }
  double getFloat(const std::string& k, double dflt) const {
    auto it = m_.find(k);
    return it == m_.end() ? dflt : (it->second.isInt ? double(it->second.i) : it->second.f);
  }
  const std::map<std::string, AttrValue>& all() const { return m_; }

 private:
  std::map<std::string, AttrValue> m_;
};

// bf16 <-> fp32 on the host, round to nearest even; NaN stays NaN.
inline float bf16ToFloat(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

}  // namespace deepinfer
