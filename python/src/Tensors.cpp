#include "Tensors.h"

#include <fmt/format.h>

#include <cstring>
#include <map>

#include "deepinfer/OpSignature.h"

namespace deepinfer::py {
namespace {

using Code = nb::dlpack::dtype_code;

bool is(nb::dlpack::dtype t, Code c, int bits) { return t.code == uint8_t(c) && t.bits == bits && t.lanes == 1; }

// The package's dtype of a DLPack dtype, given the one the signature expects.
std::optional<DType> toDType(nb::dlpack::dtype t, DType expected) {
  if (is(t, Code::Bfloat, 16)) return DType::BF16;
  if (is(t, Code::UInt, 16) && expected == DType::BF16) return DType::BF16;  // bf16 bit patterns
  if (is(t, Code::Float, 32)) return DType::F32;
  if (is(t, Code::Int, 32)) return DType::I32;
  if (is(t, Code::Int, 64)) return DType::I64;
  if (is(t, Code::UInt, 8)) return DType::U8;
  return std::nullopt;
}

const char* expectedSpelling(DType t) {
  switch (t) {
    case DType::BF16: return "bfloat16 (or uint16 holding bf16 bits)";
    case DType::F32: return "float32";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::U8: return "uint8";
  }
  return "?";
}

std::string deviceTypeName(int type) {
  switch (type) {
    case 1: return "cpu";
    case 2: return "cuda";
    case 3: return "cuda pinned host memory";
    case 13: return "cuda managed memory";
    default: return fmt::format("DLPack device type {}", type);
  }
}

template <class Array>
ImportedTensor fromArray(const std::string& op, const std::string& name, const Array& a, DType expected) {
  ImportedTensor t;
  t.deviceType = a.device_type();
  t.deviceId = a.device_id();
  if (t.deviceType != kDlCpu && t.deviceType != kDlCuda)
    throw DiError(fmt::format("{}: tensor '{}' lives in {}; deepinfer takes CPU tensors (the C++ reference) or CUDA "
                              "device tensors (the generated kernel)",
                              op, name, deviceTypeName(t.deviceType)));
  auto dt = toDType(a.dtype(), expected);
  if (!dt || *dt != expected)
    throw DiError(fmt::format("{}: tensor '{}' is {}, expected {}", op, name, dlpackDtypeName(a.dtype()),
                              expectedSpelling(expected)));
  std::vector<int64_t> shape(a.ndim()), strides(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) {
    shape[i] = int64_t(a.shape(i));
    strides[i] = a.stride(i);
  }
  auto v = TensorView::strided(uint64_t(reinterpret_cast<uintptr_t>(a.data())), *dt, shape, strides);
  if (!v.ok()) throw DiError(fmt::format("{}: tensor '{}': {}", op, name, v.error().message));
  t.view = std::move(v.value());
  return t;
}

}  // namespace

std::string ImportedTensor::deviceName() const {
  return deviceType == kDlCuda ? fmt::format("cuda:{}", deviceId) : deviceTypeName(deviceType);
}

std::string dlpackDtypeName(nb::dlpack::dtype t) {
  const char* base = "?";
  switch (Code(t.code)) {
    case Code::Int: base = "int"; break;
    case Code::UInt: base = "uint"; break;
    case Code::Float: base = "float"; break;
    case Code::Bfloat: base = "bfloat"; break;
    case Code::Complex: base = "complex"; break;
    case Code::Bool: return "bool";
    default: return fmt::format("DLPack dtype code {} ({} bits)", int(t.code), int(t.bits));
  }
  return t.lanes == 1 ? fmt::format("{}{}", base, int(t.bits)) : fmt::format("{}{}x{}", base, int(t.bits), int(t.lanes));
}

ImportedTensor importTensor(const std::string& op, const std::string& name, nb::handle capsule, DType expected,
                            bool writable) {
  if (writable) {
    nb::ndarray<> a;
    if (!nb::try_cast(capsule, a, false))
      throw DiError(fmt::format("{}: tensor '{}' could not be imported writable through DLPack (read-only, or not a "
                                "tensor)", op, name));
    ImportedTensor t = fromArray(op, name, a, expected);
    t.keep = nb::ndarray<nb::ro>(a);
    return t;
  }
  nb::ndarray<nb::ro> a;
  if (!nb::try_cast(capsule, a, false))
    throw DiError(fmt::format("{}: tensor '{}' could not be imported through DLPack", op, name));
  ImportedTensor t = fromArray(op, name, a, expected);
  t.keep = a;
  return t;
}

}  // namespace deepinfer::py

namespace deepinfer::py {

HostTensor hostTensorFromArray(const std::string& op, const std::string& name, nb::handle array) {
  const OpSignature* sig = findOpSignature(op);
  const TensorSig* ts = nullptr;
  if (sig)
    for (const auto* list : {&sig->inputs, &sig->outputs})
      for (const auto& t : *list)
        if (t.name == name) ts = &t;
  if (!ts) throw DiError(fmt::format("{}: no tensor '{}'", op, name));
  return hostTensorFromArray(op, name, array, ts->dtype);
}

HostTensor hostTensorFromArray(const std::string& op, const std::string& name, nb::handle array, DType expected) {
  ImportedTensor t = importTensor(op, name, array, expected, false);
  if (t.deviceType != kDlCpu || !t.view.isContiguous())
    throw DiError(fmt::format("{}: tensor '{}' must be a contiguous CPU array here (it is {} on {})", op, name,
                              t.view.toString(), t.deviceName()));
  HostTensor h(t.view.dtype, t.view.shape);
  if (!h.bytes.empty()) std::memcpy(h.bytes.data(), reinterpret_cast<const void*>(t.view.addr), h.bytes.size());
  return h;
}

nb::object hostTensorToArray(HostTensor t) {
  static const std::map<DType, nb::dlpack::dtype> kDtypes = {
      {DType::BF16, nb::dtype<uint16_t>()}, {DType::F32, nb::dtype<float>()}, {DType::I32, nb::dtype<int32_t>()},
      {DType::I64, nb::dtype<int64_t>()},   {DType::U8, nb::dtype<uint8_t>()}};
  auto* owned = new HostTensor(std::move(t));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<HostTensor*>(p); });
  return exportArray(owned->bytes.data(), owned->shape, owner, kDtypes.at(owned->dtype), kDlCpu, 0);
}

nb::object exportArray(void* data, const std::vector<int64_t>& shape, nb::handle owner, nb::dlpack::dtype dtype,
                       int deviceType, int deviceId) {
  std::vector<size_t> dims(shape.begin(), shape.end());
  nb::ndarray<nb::array_api> a(data, dims.size(), dims.data(), owner, nullptr, dtype, deviceType, deviceId);
  return nb::cast(a);
}

}  // namespace deepinfer::py
