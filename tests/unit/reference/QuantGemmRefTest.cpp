// References of weight_gemm and moe_experts: hand-computed products, groups, the SwiGLU epilogue,
// moe_experts as the composition of weight_gemm references (g, v, h, y) with -1 ids, duplicate
// experts and rank order, errors that name the tensor, and the error bounds' shape (bit-exact bf16
// outputs away from rounding near-ties).
#include <gtest/gtest.h>

#include <cmath>

#include "RefTestUtil.h"
#include "cases/OpCases.h"
#include "deepinfer/Formats.h"
#include "deepinfer/Reference.h"
#include "reference/QuantEpilogueRef.h"
#include "reference/QuantGemmRef.h"

namespace deepinfer::testing {
namespace {

HostTensor bf16Tensor(std::vector<int64_t> shape, const std::vector<float>& v) {
  HostTensor t(DType::BF16, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.ptr<uint16_t>()[i] = floatToBf16(v[i]);
  return t;
}
HostTensor u8Tensor(std::vector<int64_t> shape, uint8_t fill) {
  HostTensor t(DType::U8, std::move(shape));
  std::fill(t.bytes.begin(), t.bytes.end(), fill);
  return t;
}

// x [1, 32] = 1, 2, ..., 32; weights constant per row.
TensorMap fp8Case() {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = float(i + 1);
  TensorMap m;
  m["x"] = bf16Tensor({1, 32}, x);
  m["w"] = u8Tensor({2, 32}, 0x38);     // e4m3 1.0
  for (int k = 0; k < 32; ++k) m["w"].ptr<uint8_t>()[32 + k] = 0x40;  // row 1: 2.0
  m["w_scale"] = u8Tensor({1, 1}, 126);  // one 32x32 block: x 0.5
  return m;
}

TEST(WeightGemmRef, HandComputedE4m3) {
  TensorMap m = fp8Case();
  OpAttrs a;
  a.setInt("weight_bits", 8);
  ASSERT_EQ(runError("weight_gemm", a, m), "");
  const HostTensor& y = m.at("y");
  ASSERT_EQ(y.dtype, DType::F32);
  EXPECT_EQ(y.ptr<float>()[0], 0.5f * 528);  // sum 1..32 = 528
  EXPECT_EQ(y.ptr<float>()[1], 528.f);
}

TEST(WeightGemmRef, HandComputedE2m1WithBf16Out) {
  TensorMap m;
  std::vector<float> x(64, 1.f);
  x[0] = 3.f;
  m["x"] = bf16Tensor({1, 64}, x);
  m["w"] = u8Tensor({1, 32}, 0x23);  // nibbles: even column code 3 (1.5), odd column code 2 (1.0)
  m["w_scale"] = u8Tensor({1, 2}, 128);  // x 2
  m["w_scale"].ptr<uint8_t>()[1] = 125;  // second 32 columns x 0.25
  OpAttrs a;
  a.setInt("weight_bits", 4);
  a.setInt("epilogue", 1);
  ASSERT_EQ(runError("weight_gemm", a, m), "");
  // First block: 16 even columns of 3 (x[0] = 3 once) and 16 odd of 2; second: 16 * 0.375 + 16 * 0.25.
  const double want = (3.0 * 3 + 15 * 3.0 + 16 * 2.0) + (16 * 0.375 + 16 * 0.25);
  EXPECT_EQ(m.at("y").dtype, DType::BF16);
  EXPECT_EQ(bf16ToFloat(m.at("y").ptr<uint16_t>()[0]), float(want));
}

TEST(WeightGemmRef, GroupsReadTheirOwnColumns) {
  TensorMap m;
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[size_t(i)] = i < 32 ? 1.f : 2.f;
  m["x"] = bf16Tensor({1, 64}, x);
  m["w"] = u8Tensor({16, 32}, 0x38);  // 2 groups of 8 rows, each row 1.0
  m["w_scale"] = u8Tensor({1, 1}, 127);
  OpAttrs a;
  a.setInt("weight_bits", 8);
  a.setInt("groups", 2);
  ASSERT_EQ(runError("weight_gemm", a, m), "");
  for (int n = 0; n < 16; ++n) EXPECT_EQ(m.at("y").ptr<float>()[n], n < 8 ? 32.f : 64.f) << n;
}

TEST(WeightGemmRef, SwigluEpilogue) {
  TensorMap m = fp8Case();
  m["w_up"] = m["w"];
  m["w_up_scale"] = u8Tensor({1, 1}, 110);  // v = 528 * 2^-17 * {1, 2}
  OpAttrs a;
  a.setInt("weight_bits", 8);
  a.setInt("epilogue", 2);
  ASSERT_EQ(runError("weight_gemm", a, m), "");
  for (int n = 0; n < 2; ++n) {
    const float g = 264.f * float(n + 1), v = float(528.0 * (n + 1) * std::ldexp(1.0, -17));
    const float want = ref::swigluRef(g, v, 10.f, 1.f);  // g clamps at 10: silu(10) * v
    EXPECT_EQ(m.at("y").ptr<uint16_t>()[n], floatToBf16(want)) << n;
    EXPECT_NEAR(want, 9.9995459f * v, 1e-6);
  }
}

TEST(WeightGemmRef, ErrorsNameTheTensor) {
  OpAttrs a;
  a.setInt("weight_bits", 8);
  TensorMap m = fp8Case();
  m["w_scale"] = u8Tensor({2, 1}, 127);
  EXPECT_NE(runError("weight_gemm", a, m).find("'w_scale'"), std::string::npos);
  m = fp8Case();
  a.setInt("epilogue", 2);
  EXPECT_NE(runError("weight_gemm", a, m).find("'w_up'"), std::string::npos);
  a.setInt("epilogue", 0);
  a.setInt("weight_bits", 5);
  EXPECT_NE(runError("weight_gemm", a, m).find("weight_bits"), std::string::npos);
}

// The bound is positive for f32 outputs; for bf16 outputs it is zero (bit-exact) except at
// rounding near-ties (where it spans the roundings reachable within the accumulation bound). That
// bound grows with K, so near-ties are most elements at K = 5120 and a minority at K <= 512.
TEST(WeightGemmRef, BoundsFollowTheRule) {
  int bf16Cases = 0;
  for (const OpCase& c : casesFor("weight_gemm", 7, false)) {
    if (c.inputs.at("x").dim(0) * c.inputs.at("w").dim(0) > 20000) continue;
    auto b = referenceErrorBound("weight_gemm", c.attrs, c.inputs);
    ASSERT_TRUE(b.ok()) << c.name << ": " << b.error().message;
    const bool bf16 = c.attrs.getInt("epilogue", 0) != 0;
    const int64_t K = c.inputs.at("x").dim(1) / c.attrs.getInt("groups", 1);
    int64_t zero = 0, finite = 0;
    for (int64_t i = 0; i < b->numel(); ++i) {
      const float v = b->ptr<float>()[i];
      ASSERT_FALSE(v < 0) << c.name;
      if (!std::isfinite(v)) continue;
      ++finite;
      if (v == 0) ++zero;
    }
    if (bf16 && K <= 512) {
      ++bf16Cases;
      EXPECT_GT(zero, finite / 2) << c.name << ": bf16 outputs must be bit-exact away from near-ties";
    } else if (!bf16 && c.name.find("edges") == std::string::npos) {
      EXPECT_EQ(zero, 0) << c.name;
    }
  }
  EXPECT_GE(bf16Cases, 3);
}

// moe_experts is, row by row, the weight_gemm references of w1, w3 (g, v), the SwiGLU with the
// routing weight (h) and w2.
TEST(MoeExpertsRef, EqualsTheComposedWeightGemms) {
  for (const OpCase& c : casesFor("moe_experts", 11, false)) {
    const int64_t T = c.inputs.at("x").dim(0), C = c.inputs.at("x").dim(1), k = c.inputs.at("ids").dim(1);
    const int64_t E = c.inputs.at("w1").dim(0), I = c.inputs.at("w1").dim(1);
    if (T * k > 60) continue;
    TensorMap m = c.inputs;
    ASSERT_EQ(runError("moe_experts", c.attrs, m), "") << c.name;
    const HostTensor& y = m.at("y");
    auto slice = [](const HostTensor& t, int64_t e) {
      HostTensor s(t.dtype, {t.dim(1), t.dim(2)});
      std::copy_n(t.bytes.begin() + e * int64_t(s.bytes.size()), s.bytes.size(), s.bytes.begin());
      return s;
    };
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < k; ++r) {
        const int32_t e = c.inputs.at("ids").ptr<int32_t>()[t * k + r];
        const float* yr = y.ptr<float>() + (t * k + r) * C;
        if (e < 0 || e >= E) {
          for (int64_t n = 0; n < C; ++n) ASSERT_EQ(yr[n], 0.f) << c.name << " a row with no expert";
          continue;
        }
        OpAttrs a;
        a.setInt("weight_bits", 4);
        TensorMap g, v;
        for (TensorMap* gv : {&g, &v}) {
          HostTensor xr(DType::BF16, {1, C});
          std::copy_n(c.inputs.at("x").bytes.begin() + t * C * 2, C * 2, xr.bytes.begin());
          (*gv)["x"] = xr;
        }
        g["w"] = slice(c.inputs.at("w1"), e);
        g["w_scale"] = slice(c.inputs.at("w1_scale"), e);
        v["w"] = slice(c.inputs.at("w3"), e);
        v["w_scale"] = slice(c.inputs.at("w3_scale"), e);
        ASSERT_EQ(runError("weight_gemm", a, g), "");
        ASSERT_EQ(runError("weight_gemm", a, v), "");
        TensorMap d;
        HostTensor h(DType::BF16, {1, I});
        const float wt = c.inputs.at("weights").ptr<float>()[t * k + r];
        for (int64_t i = 0; i < I; ++i)
          h.ptr<uint16_t>()[i] =
              floatToBf16(ref::swigluRef(g.at("y").ptr<float>()[i], v.at("y").ptr<float>()[i], 10.f, wt));
        d["x"] = h;
        d["w"] = slice(c.inputs.at("w2"), e);
        d["w_scale"] = slice(c.inputs.at("w2_scale"), e);
        ASSERT_EQ(runError("weight_gemm", a, d), "");
        for (int64_t n = 0; n < C; ++n)
          ASSERT_EQ(yr[n], d.at("y").ptr<float>()[n]) << c.name << " token " << t << " rank " << r << " column " << n;
      }
  }
}

TEST(MoeExpertsRef, ErrorsNameTheTensor) {
  const OpCase c = casesFor("moe_experts", 3, false).front();
  TensorMap m = c.inputs;
  m["w2_scale"] = u8Tensor({1, 2, 3}, 127);
  EXPECT_NE(runError("moe_experts", c.attrs, m).find("'w2_scale'"), std::string::npos);
  m = c.inputs;
  m.erase("w3");
  EXPECT_NE(runError("moe_experts", c.attrs, m).find("'w3'"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::testing
