// Small helpers for the reference unit tests: tensors from literal values, running an op and
// getting its error message.
#pragma once
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cases/CaseUtil.h"
#include "cases/OpCases.h"
#include "deepinfer/Reference.h"

namespace deepinfer::testing {

// A bf16 tensor of values that must be exactly representable (the test's hand values).
inline HostTensor bf16Of(std::vector<int64_t> shape, const std::vector<float>& v) {
  HostTensor t(DType::BF16, std::move(shape));
  EXPECT_EQ(size_t(t.numel()), v.size());
  for (size_t i = 0; i < v.size() && i < size_t(t.numel()); ++i) {
    t.ptr<uint16_t>()[i] = floatToBf16(v[i]);
    EXPECT_EQ(bf16ToFloat(t.ptr<uint16_t>()[i]), v[i]) << "hand value " << v[i] << " is not a bf16";
  }
  return t;
}

inline HostTensor f32Of(std::vector<int64_t> shape, const std::vector<float>& v) {
  HostTensor t(DType::F32, std::move(shape));
  EXPECT_EQ(size_t(t.numel()), v.size());
  for (size_t i = 0; i < v.size() && i < size_t(t.numel()); ++i) t.ptr<float>()[i] = v[i];
  return t;
}

inline float bf16At(const HostTensor& t, int64_t i) { return bf16ToFloat(t.ptr<uint16_t>()[i]); }

// Runs the reference and returns "" on success, else the error message.
inline std::string runError(const std::string& op, const OpAttrs& attrs, TensorMap& m) {
  Status s = runReference(op, attrs, m);
  return s.ok() ? std::string() : s.error().message;
}

}  // namespace deepinfer::testing
