// expectedFromKernelOutputs (cases/OpCases.h): mhc_fused_post_pre's next-sublayer outputs are
// expected from the kernel's own residual `x` (docs/ops.md §8), not from the reference's.
#include <cmath>

#include <gtest/gtest.h>

#include "RefTestUtil.h"
#include "cases/OpCases.h"

namespace deepinfer::testing {
namespace {

TEST(ExpectedFromKernelOutputs, FusedNextSublayerOutputsFollowTheKernelResidual) {
  int checked = 0;
  for (OpCase& c : casesFor("mhc_fused_post_pre", 11, false)) {
    if (c.inputs["residual"].dim(2) != 256) continue;  // the small-C cases keep this test quick
    TensorMap fused = c.inputs;
    ASSERT_EQ(runError(c.op, c.attrs, fused), "") << c.name;
    // A kernel residual within the x tolerance but not the reference's: every 7th element one
    // bf16 ulp larger in magnitude (the generated residuals are finite and far below the max).
    TensorMap kernel;
    kernel["x"] = fused["x"];
    uint16_t* xb = kernel["x"].ptr<uint16_t>();
    for (int64_t i = 0; i < kernel["x"].numel(); i += 7) xb[i] = uint16_t(xb[i] + 1);
    TensorMap pre;
    pre["x"] = kernel["x"];
    for (const char* n : {"fn", "scale", "base", "pre_in", "norm_weight"}) pre[n] = c.inputs[n];
    ASSERT_EQ(runError("mhc_pre", c.attrs, pre), "") << c.name;

    auto got = expectedFromKernelOutputs(c.op, c.attrs, c.inputs, kernel);
    ASSERT_TRUE(got.ok()) << c.name << ": " << got.error().message;
    ASSERT_EQ(got->size(), 4u) << c.name;
    for (const char* n : {"layer_input", "pre", "post", "comb"}) {
      ASSERT_TRUE(got->count(n)) << c.name << " " << n;
      EXPECT_EQ(got->at(n).bytes, pre[n].bytes) << c.name << " " << n;
    }
    // The perturbation is visible, so the equality above does tell the two residuals apart.
    EXPECT_NE(got->at("layer_input").bytes, fused["layer_input"].bytes) << c.name;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(ExpectedFromKernelOutputs, OtherOpsKeepTheirReference) {
  for (const char* op : {"mhc_pre", "mhc_collapse", "topk"}) {
    auto got = expectedFromKernelOutputs(op, OpAttrs{}, TensorMap{}, TensorMap{});
    ASSERT_TRUE(got.ok()) << op << ": " << got.error().message;
    EXPECT_TRUE(got->empty()) << op;
  }
}

TEST(ExpectedFromKernelOutputs, MhcPostSqrsumIsTheSumOfSquaresOfTheKernelsResidual) {
  // A residual one bf16 step away from the reference's in one element: the expected sqrsum follows
  // the kernel's residual exactly, not the reference's.
  for (const auto& c : casesFor("mhc_post", 5, false)) {
    TensorMap ref = c.inputs;
    ASSERT_TRUE(runReference("mhc_post", c.attrs, ref).ok()) << c.name;
    TensorMap kernel;
    kernel["x"] = ref.at("x");
    uint16_t* x = kernel["x"].ptr<uint16_t>();
    const HostTensor& r = kernel["x"];
    const int64_t n = r.shape[1] * r.shape[2];
    int64_t big = 0;  // the largest element of token 0: its step moves the sum in fp32
    for (int64_t i = 1; i < n; ++i)
      if (std::fabs(bf16ToFloat(x[i])) > std::fabs(bf16ToFloat(x[big]))) big = i;
    x[big] = uint16_t(x[big] + 1);  // the next bf16 away from zero
    auto got = expectedFromKernelOutputs("mhc_post", c.attrs, c.inputs, kernel);
    ASSERT_TRUE(got.ok()) << got.error().message;
    double want = 0;
    for (int64_t i = 0; i < n; ++i) want += double(bf16ToFloat(x[i])) * bf16ToFloat(x[i]);
    EXPECT_EQ(got->at("sqrsum").ptr<float>()[0], float(want)) << c.name;
    EXPECT_NE(got->at("sqrsum").ptr<float>()[0], ref.at("sqrsum").ptr<float>()[0]) << c.name;
  }
  auto noX = expectedFromKernelOutputs("mhc_post", OpAttrs{}, TensorMap{}, TensorMap{});
  EXPECT_FALSE(noX.ok());
}

TEST(ExpectedFromKernelOutputs, MissingTensorsAreNamed) {
  OpCase c = casesFor("mhc_fused_post_pre", 12, false).at(0);
  TensorMap fused = c.inputs;
  ASSERT_EQ(runError(c.op, c.attrs, fused), "") << c.name;
  auto noX = expectedFromKernelOutputs(c.op, c.attrs, c.inputs, TensorMap{});
  ASSERT_FALSE(noX.ok());
  EXPECT_NE(noX.error().message.find("`x`"), std::string::npos) << noX.error().message;
  TensorMap inputs = c.inputs;
  inputs.erase("pre_in");
  TensorMap kernel;
  kernel["x"] = fused["x"];
  auto noPreIn = expectedFromKernelOutputs(c.op, c.attrs, inputs, kernel);
  ASSERT_FALSE(noPreIn.ok());
  EXPECT_NE(noPreIn.error().message.find("`pre_in`"), std::string::npos) << noPreIn.error().message;
}

}  // namespace
}  // namespace deepinfer::testing
