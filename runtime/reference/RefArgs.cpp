#include "reference/RefArgs.h"

#include <algorithm>
#include <cmath>

namespace deepinfer::ref {
namespace {

std::string expectedShape(const std::vector<Dim>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    const Dim& d = dims[i];
    if (i) s += ", ";
    if (d.size < 0)
      s += d.name;
    else if (d.name.empty())
      s += fmt::format("{}", d.size);
    else
      s += fmt::format("{}={}", d.name, d.size);
  }
  return s + "]";
}

}  // namespace

const TensorSig* RefArgs::findSig(const std::string& name) const {
  for (const auto& t : sig_.inputs)
    if (t.name == name) return &t;
  for (const auto& t : sig_.outputs)
    if (t.name == name) return &t;
  return nullptr;
}

Status RefArgs::checkSignature() const {
  for (const TensorSig& s : sig_.inputs) {
    auto it = tensors_.find(s.name);
    if (it == tensors_.end()) {
      if (s.optional) continue;
      return fail("missing required tensor '{}' ({})", s.name, dtypeName(s.dtype));
    }
    const HostTensor& t = it->second;
    if (t.dtype != s.dtype)
      return fail("tensor '{}' has dtype {}, expected {}", s.name, dtypeName(t.dtype), dtypeName(s.dtype));
    for (int64_t d : t.shape)
      if (d < 0) return fail("tensor '{}' has a negative dimension in shape {}", s.name, t.shapeString());
    const uint64_t want = uint64_t(t.numel()) * dtypeSize(t.dtype);
    if (t.bytes.size() != want)
      return fail("tensor '{}' of shape {} {} holds {} bytes, expected {}", s.name, t.shapeString(),
                  dtypeName(t.dtype), t.bytes.size(), want);
  }
  return {};
}

Status RefArgs::checkShape(const std::string& name, const HostTensor& t, const std::vector<Dim>& dims) const {
  bool ok = t.shape.size() == dims.size();
  for (size_t i = 0; ok && i < dims.size(); ++i) ok = dims[i].size < 0 || dims[i].size == t.shape[i];
  if (!ok) return fail("tensor '{}' has shape {}, expected {}", name, t.shapeString(), expectedShape(dims));
  return {};
}

Result<const HostTensor*> RefArgs::in(const std::string& name, const std::vector<Dim>& dims) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return fail("missing required tensor '{}'", name);
  DI_TRY(checkShape(name, it->second, dims));
  return &it->second;
}

Result<const HostTensor*> RefArgs::optionalIn(const std::string& name, const std::vector<Dim>& dims) const {
  if (!has(name)) return static_cast<const HostTensor*>(nullptr);
  return in(name, dims);
}

Result<HostTensor*> RefArgs::inOut(const std::string& name, const std::vector<Dim>& dims) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return fail("missing required tensor '{}'", name);
  DI_TRY(checkShape(name, it->second, dims));
  return &it->second;
}

HostTensor& RefArgs::out(const std::string& name, std::vector<int64_t> shape) {
  const TensorSig* s = findSig(name);
  return out(name, std::move(shape), s ? s->dtype : DType::U8);
}

HostTensor& RefArgs::out(const std::string& name, std::vector<int64_t> shape, DType dtype) {
  HostTensor t(dtype, std::move(shape));
  std::fill(t.bytes.begin(), t.bytes.end(), kOutputPoisonByte);
  HostTensor& slot = tensors_[name];
  slot = std::move(t);
  return slot;
}

Result<int64_t> RefArgs::intAttr(const std::string& name, int64_t min, int64_t max) const {
  if (!attrs_.has(name)) return fail("missing attribute '{}'", name);
  const AttrValue& v = attrs_.all().at(name);
  if (!v.isInt && v.f != std::floor(v.f)) return fail("attribute '{}' = {} must be an integer", name, v.f);
  const int64_t i = attrs_.getInt(name, 0);
  if (i < min || i > max) {
    if (max == INT64_MAX) return fail("attribute '{}' = {} must be at least {}", name, i, min);
    return fail("attribute '{}' = {} must lie in [{}, {}]", name, i, min, max);
  }
  return i;
}

Result<double> RefArgs::floatAttr(const std::string& name, double min) const {
  if (!attrs_.has(name)) return fail("missing attribute '{}'", name);
  const double f = attrs_.getFloat(name, 0);
  if (!std::isfinite(f)) return fail("attribute '{}' = {} must be finite", name, f);
  if (f < min) return fail("attribute '{}' = {} must be at least {}", name, f, min);
  return f;
}

}  // namespace deepinfer::ref
