// mHC references (docs/ops.md §8, §11): hand-worked mixes, Sinkhorn, collapse (rounded once,
// ties to even), RMSNorm, the post step's column (transposed) use of comb, the delayed
// layer_input, fused == post then pre, and doubly stochastic comb on the generated cases.
#include <gtest/gtest.h>

#include <cmath>

#include "RefTestUtil.h"

namespace deepinfer::testing {
namespace {

OpAttrs preAttrs(double rmsEps, double hcEps, int64_t iters, double normEps) {
  OpAttrs a;
  a.setFloat("rms_eps", rmsEps);
  a.setFloat("hc_eps", hcEps);
  a.setInt("sinkhorn_iters", iters);
  a.setFloat("norm_eps", normEps);
  return a;
}

// T = 1, C = 2: streams (1, 2), (3, 4), (-1, -2), (0.5, 0.5).
const std::vector<float> kX = {1, 2, 3, 4, -1, -2, 0.5f, 0.5f};

TEST(MhcPreRef, HandWorkedMixes) {
  // fn row 0 reads x[0] = 1 only, row 4 reads x[6] = 0.5: mix = value * rsqrt(35.5 / 8).
  std::vector<float> fn(24 * 8, 0.f), base(24, 0.f);
  fn[0 * 8 + 0] = 1.f;
  fn[4 * 8 + 6] = 1.f;
  base[1] = std::log(3.f);   // pre[1] = sigmoid(ln 3) = 0.75
  base[6] = -std::log(3.f);  // post[2] = 2 * 0.25
  // comb logits: log of a doubly stochastic matrix (softmax gives it back, sums stay 1).
  const float P[16] = {.5f,   .25f,  .125f, .125f, .25f,  .5f,   .125f, .125f,
                       .125f, .125f, .5f,   .25f,  .125f, .125f, .25f,  .5f};
  for (int i = 0; i < 16; ++i) base[8 + i] = std::log(P[i]) + float(i / 4);  // + a per-row constant
  TensorMap m;
  m["x"] = bf16Of({1, 4, 2}, kX);
  m["fn"] = f32Of({24, 8}, fn);
  m["scale"] = f32Of({3}, {2.f, 3.f, 1.f});
  m["base"] = f32Of({24}, base);
  m["pre_in"] = f32Of({1, 4}, {1, 0, 0, 0});
  m["norm_weight"] = bf16Of({2}, {1.f, 0.5f});
  ASSERT_EQ(runError("mhc_pre", preAttrs(0, 0, 20, 0), m), "");

  const double r = 1.0 / std::sqrt(35.5 / 8.0);
  auto sig = [](double z) { return 1.0 / (1.0 + std::exp(-z)); };
  const float* pre = m["pre"].ptr<float>();
  const float* post = m["post"].ptr<float>();
  EXPECT_NEAR(pre[0], sig(1.0 * r * 2.0), 1e-7);
  EXPECT_NEAR(pre[1], 0.75, 1e-7);
  EXPECT_NEAR(pre[2], 0.5, 1e-7);
  EXPECT_NEAR(post[0], 2 * sig(0.5 * r * 3.0), 1e-7);
  EXPECT_NEAR(post[1], 1.0, 1e-7);
  EXPECT_NEAR(post[2], 0.5, 1e-7);
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(m["comb"].ptr<float>()[i], P[i], 1e-6) << "comb " << i;
  // layer_input: stream 0 = (1, 2), mean square 2.5 -> (1, 2) * (1, 0.5) / sqrt(2.5) = 0.63246 each,
  // correctly rounded to bf16: 162/256.
  EXPECT_EQ(bf16At(m["layer_input"], 0), 0.6328125f);
  EXPECT_EQ(bf16At(m["layer_input"], 1), 0.6328125f);
}

TEST(MhcPreRef, HcEpsEntersEverySinkhornStep) {
  // All-equal comb logits: uniform 0.25 + eps, then / (column sum + eps) each round.
  TensorMap m;
  m["x"] = bf16Of({1, 4, 2}, kX);
  m["fn"] = f32Of({24, 8}, std::vector<float>(24 * 8, 0.f));
  m["scale"] = f32Of({3}, {1, 1, 1});
  m["base"] = f32Of({24}, std::vector<float>(24, 0.f));
  m["pre_in"] = f32Of({1, 4}, {1, 0, 0, 0});
  m["norm_weight"] = bf16Of({2}, {1, 1});
  const double eps = 0.01;
  ASSERT_EQ(runError("mhc_pre", preAttrs(0, eps, 2, 0), m), "");
  double c = 0.25 + eps;
  c = c / (4 * c + eps);  // round 1 columns
  c = c / (4 * c + eps);  // round 2 rows
  c = c / (4 * c + eps);  // round 2 columns
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(m["comb"].ptr<float>()[i], c, 1e-7);
  EXPECT_NEAR(m["pre"].ptr<float>()[0], 0.5 + eps, 1e-7);
}

TEST(MhcPreRef, DelayedLayerInputUsesPreIn) {
  // pre_in (0.5, 0.25, 1, 0): collapse = (0.5 + 0.75 - 1, 1 + 1 - 2) = (0.25, 0); RMSNorm with
  // mean square 0.03125 -> (0.25 / sqrt(0.03125), 0) = (1.41421, 0) -> bf16 181/128.
  TensorMap m;
  m["x"] = bf16Of({1, 4, 2}, kX);
  Rng rng(1);
  m["fn"] = f32Normal(rng, {24, 8});
  m["scale"] = f32Of({3}, {1, 1, 1});
  m["base"] = f32Normal(rng, {24});
  m["pre_in"] = f32Of({1, 4}, {0.5f, 0.25f, 1.f, 0.f});
  m["norm_weight"] = bf16Of({2}, {1, 1});
  ASSERT_EQ(runError("mhc_pre", preAttrs(1e-20, 1e-6, 20, 1e-20), m), "");
  EXPECT_EQ(bf16At(m["layer_input"], 0), 1.4140625f);
  EXPECT_EQ(m["layer_input"].ptr<uint16_t>()[1], 0);
}

TEST(MhcCollapseRef, RoundsOnceToNearestEven) {
  TensorMap m;
  // Token 0: pre (0.5, 0.25, 0.125, 1) -> (1+1+1+1, 2+2-2+1) = (4, 3).
  // Token 1: pre (1, 2^-8, 0, 0), x0 = (1, 1), x1 = (1, 3): 1 + 2^-8 is a tie -> 1 (even);
  // 1 + 3*2^-8 lies between 1 + 2^-7 and 1 + 2^-6 at the midpoint -> 1 + 2^-6 (even).
  m["x"] = bf16Of({2, 4, 2}, {2, 4, 4, 8, 8, -16, 1, 1, /**/ 1, 1, 1, 3, 5, 5, 7, 7});
  m["pre"] = f32Of({2, 4}, {0.5f, 0.25f, 0.125f, 1.f, /**/ 1.f, std::ldexp(1.f, -8), 0.f, 0.f});
  ASSERT_EQ(runError("mhc_collapse", OpAttrs{}, m), "");
  EXPECT_EQ(bf16At(m["h"], 0), 4.f);
  EXPECT_EQ(bf16At(m["h"], 1), 3.f);
  EXPECT_EQ(bf16At(m["h"], 2), 1.f);
  EXPECT_EQ(bf16At(m["h"], 3), 1.015625f);
}

TEST(MhcPostRef, StreamJTakesColumnJOfComb) {
  // C = 1, residual (1, 2, 3, 4), F = 10, post (0.5, 1, 0, 2); comb a permutation
  // m -> j: 0 -> 0, 1 -> 2, 2 -> 3, 3 -> 1. x[j] = sum_m comb[m][j] x[m] + post[j] F.
  TensorMap m;
  m["f_out"] = bf16Of({1, 1}, {10});
  m["residual"] = bf16Of({1, 4, 1}, {1, 2, 3, 4});
  m["post"] = f32Of({1, 4}, {0.5f, 1.f, 0.f, 2.f});
  m["comb"] = f32Of({1, 4, 4}, {1, 0, 0, 0, /**/ 0, 0, 1, 0, /**/ 0, 0, 0, 1, /**/ 0, 1, 0, 0});
  ASSERT_EQ(runError("mhc_post", OpAttrs{}, m), "");
  EXPECT_EQ(bf16At(m["x"], 0), 6.f);   // 1 + 5
  EXPECT_EQ(bf16At(m["x"], 1), 14.f);  // 4 + 10 (the row-major misreading gives 13)
  EXPECT_EQ(bf16At(m["x"], 2), 2.f);   // 2 + 0
  EXPECT_EQ(bf16At(m["x"], 3), 23.f);  // 3 + 20
  EXPECT_EQ(m["sqrsum"].ptr<float>()[0], 36.f + 196.f + 4.f + 529.f);
}

TEST(MhcPostRef, RoundsOnceAndSqrsumUsesTheRoundedValues) {
  // x = 0.3 * 1 + 0 + post 1 * F(1) = 1.3 exactly in fp64 -> bf16 1.296875 (1 + 38/128).
  TensorMap m;
  m["f_out"] = bf16Of({1, 1}, {1});
  m["residual"] = bf16Of({1, 4, 1}, {1, 1, 1, 1});
  m["post"] = f32Of({1, 4}, {1, 1, 1, 1});
  std::vector<float> comb(16, 0.f);
  comb[0] = comb[5] = comb[10] = comb[15] = 0.3f;
  m["comb"] = f32Of({1, 4, 4}, comb);
  ASSERT_EQ(runError("mhc_post", OpAttrs{}, m), "");
  for (int j = 0; j < 4; ++j) EXPECT_EQ(bf16At(m["x"], j), 1.296875f);
  EXPECT_EQ(m["sqrsum"].ptr<float>()[0], float(4 * 1.296875 * 1.296875));
}

TEST(MhcFusedPostPreRef, EqualsPostThenPreOnTheBf16Residual) {
  for (OpCase& c : casesFor("mhc_fused_post_pre", 3, false)) {
    if (c.inputs["residual"].dim(2) != 256) continue;  // the small-C cases keep this test quick
    TensorMap fused = c.inputs;
    ASSERT_EQ(runError(c.op, c.attrs, fused), "") << c.name;
    TensorMap post = c.inputs;
    ASSERT_EQ(runError("mhc_post", OpAttrs{}, post), "") << c.name;
    TensorMap pre;
    pre["x"] = post["x"];
    for (const char* n : {"fn", "scale", "base", "pre_in", "norm_weight"}) pre[n] = c.inputs[n];
    ASSERT_EQ(runError("mhc_pre", c.attrs, pre), "") << c.name;
    EXPECT_EQ(fused["x"].bytes, post["x"].bytes) << c.name;
    for (const char* n : {"layer_input", "pre", "post", "comb"})
      EXPECT_EQ(fused[n].bytes, pre[n].bytes) << c.name << " " << n;
  }
}

TEST(MhcPreRef, GeneratedCombIsDoublyStochastic) {
  for (OpCase& c : casesFor("mhc_pre", 8, false)) {
    if (c.attrs.getInt("sinkhorn_iters", 0) != 20) continue;  // fewer rounds need not converge
    TensorMap m = c.inputs;
    ASSERT_EQ(runError(c.op, c.attrs, m), "") << c.name;
    const int64_t T = m["comb"].dim(0);
    for (int64_t t = 0; t < T; ++t) {
      const float* cb = m["comb"].ptr<float>() + t * 16;
      for (int i = 0; i < 4; ++i) {
        double row = 0, col = 0;
        for (int j = 0; j < 4; ++j) row += cb[i * 4 + j], col += cb[j * 4 + i];
        EXPECT_NEAR(row, 1.0, 1e-3) << c.name << " token " << t << " row " << i;
        EXPECT_NEAR(col, 1.0, 1e-3) << c.name << " token " << t << " column " << i;
      }
      for (int i = 0; i < 4; ++i) {
        const float pre = m["pre"].ptr<float>()[t * 4 + i], post = m["post"].ptr<float>()[t * 4 + i];
        EXPECT_GT(pre, 0.f);
        EXPECT_LE(pre, 1.f + 1e-6f);
        EXPECT_GT(post, 0.f);
        EXPECT_LT(post, 2.f);
      }
    }
  }
}

TEST(MhcRef, ShapeErrorsNameTheTensor) {
  Rng rng(6);
  TensorMap m;
  m["x"] = bf16Normal(rng, {2, 3, 8});
  m["pre"] = f32Normal(rng, {2, 4});
  EXPECT_EQ(runError("mhc_collapse", OpAttrs{}, m),
            "mhc_collapse: tensor 'x' has shape [2, 3, 8], expected [T, 4, C]");
  m["x"] = bf16Normal(rng, {2, 4, 8});
  m["pre"] = f32Normal(rng, {3, 4});
  EXPECT_EQ(runError("mhc_collapse", OpAttrs{}, m),
            "mhc_collapse: tensor 'pre' has shape [3, 4], expected [T=2, 4]");
  TensorMap p;
  p["x"] = bf16Normal(rng, {1, 4, 8});
  p["fn"] = f32Normal(rng, {24, 16});
  p["scale"] = f32Normal(rng, {3});
  p["base"] = f32Normal(rng, {24});
  p["pre_in"] = f32Normal(rng, {1, 4});
  p["norm_weight"] = bf16Normal(rng, {8});
  EXPECT_EQ(runError("mhc_pre", OpAttrs{}, p),
            "mhc_pre: tensor 'fn' has shape [24, 16], expected [24, 4C=32]");
  p["fn"] = f32Normal(rng, {24, 32});
  EXPECT_EQ(runError("mhc_pre", OpAttrs{}, p), "");
  EXPECT_EQ(runError("mhc_pre", preAttrs(1e-6, 1e-6, 0, 1e-6), p),
            "mhc_pre: attribute 'sinkhorn_iters' = 0 must be at least 1");
}

}  // namespace
}  // namespace deepinfer::testing
