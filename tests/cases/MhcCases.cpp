// mHC cases (mhc_pre, mhc_post, mhc_fused_post_pre, mhc_collapse): T on both sides of the
// tensor-core threshold 16 (1, 2, 6, 12, 15, 16, 17, 64), C = 5120 (the model), 256 and 16384, pre_in one-hot
// stream 0 (the first layer) and general, Sinkhorn rounds 20 and 7, eps 1e-20 and 1e-6.
// fn ~ N(0, 1/(4C)) keeps the mixes ~ N(0, 1) so sigmoids and softmaxes are not saturated;
// residual rows get per-token magnitudes from 0.5 to 4.
#include <fmt/format.h>

#include <cmath>

#include "cases/CaseGenerators.h"
#include "cases/CaseUtil.h"
#include "cases/OpCases.h"

namespace deepinfer::testing {
namespace {

struct MhcSpec {
  std::string name;
  int64_t T, C;
  bool oneHotPreIn = false;
  int64_t sinkhornIters = 20;
  double eps = 1e-20;  // rms_eps and norm_eps
};

const MhcSpec kSpecs[] = {
    {"t1_c5120_onehot", 1, 5120, true},
    {"t6_c5120", 6, 5120},
    {"t15_c256", 15, 256},
    {"t16_c5120", 16, 5120},
    {"t17_c256", 17, 256},
    {"t64_c5120", 64, 5120},
    {"t64_c256_iters7_eps1e-6", 64, 256, false, 7, 1e-6},
    // 512 chunks: more partial records than one batch of the finalize's loads (256 slots) and a
    // row longer than the finalize's registers hold (C > 8192). Last, so that the cases above keep
    // their random draws.
    {"t6_c16384", 6, 16384},
    // Decode sizes at C = 256, where every candidate runs (one-launch plans included): 1, 2, 6 and 12
    // tokens in one 16-token tile. Appended, so the cases above keep their random draws.
    {"t1_c256", 1, 256},
    {"t2_c256", 2, 256},
    {"t6_c256", 6, 256},
    {"t12_c256", 12, 256},
};

// Residual streams [T, 4, C]: N(0, s_t^2) with s_t in [0.5, 4] per token.
HostTensor residual(Rng& rng, int64_t T, int64_t C) {
  HostTensor x = bf16Normal(rng, {T, 4, C});
  for (int64_t t = 0; t < T; ++t) {
    const float s = float(0.5 + 3.5 * rng.uniform());
    uint16_t* p = x.ptr<uint16_t>() + t * 4 * C;
    for (int64_t i = 0; i < 4 * C; ++i) p[i] = floatToBf16(bf16ToFloat(p[i]) * s);
  }
  return x;
}

HostTensor preIn(Rng& rng, int64_t T, bool oneHot) {
  HostTensor p = f32Uniform(rng, {T, 4}, 0.1, 1.1);
  if (oneHot)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t m = 0; m < 4; ++m) p.ptr<float>()[t * 4 + m] = m == 0 ? 1.f : 0.f;
  return p;
}

// The pre step's parameters and attributes (mhc_pre, and the next sublayer's in the fused op).
void addPreParams(Rng& rng, OpCase& c, const MhcSpec& s) {
  c.attrs.setFloat("rms_eps", s.eps);
  c.attrs.setFloat("hc_eps", 1e-6);
  c.attrs.setInt("sinkhorn_iters", s.sinkhornIters);
  c.attrs.setFloat("norm_eps", s.eps);
  c.inputs["fn"] = f32Normal(rng, {24, 4 * s.C}, 1.0 / std::sqrt(4.0 * double(s.C)));
  c.inputs["scale"] = f32Uniform(rng, {3}, 0.5, 1.5);
  c.inputs["base"] = f32Normal(rng, {24}, 0.5);
  c.inputs["pre_in"] = preIn(rng, s.T, s.oneHotPreIn);
  c.inputs["norm_weight"] = bf16Normal(rng, {s.C}, 0.1, 1.0);
}

// The current sublayer's output, residual, post (0..2) and comb (positive, ~0.25) for a post step.
void addPostInputs(Rng& rng, OpCase& c, const MhcSpec& s) {
  c.inputs["f_out"] = bf16Normal(rng, {s.T, s.C});
  c.inputs["residual"] = residual(rng, s.T, s.C);
  c.inputs["post"] = f32Uniform(rng, {s.T, 4}, 0.05, 1.95);
  c.inputs["comb"] = f32Uniform(rng, {s.T, 4, 4}, 0.02, 0.5);
}

// Ops without a pre step are named by shape only (their cases have no Sinkhorn or eps).
OpCase emptyCase(const std::string& op, const MhcSpec& s, bool hasPreStep) {
  OpCase c;
  c.name = hasPreStep ? s.name : fmt::format("t{}_c{}{}", s.T, s.C, s.oneHotPreIn ? "_onehot" : "");
  c.op = op;
  return c;
}

}  // namespace

std::vector<OpCase> mhcPreCases(uint64_t seed, bool /*large*/) {
  Rng rng(seed ^ 0x6D686370ull);
  std::vector<OpCase> cases;
  for (const MhcSpec& s : kSpecs) {
    OpCase c = emptyCase("mhc_pre", s, true);
    c.inputs["x"] = residual(rng, s.T, s.C);
    addPreParams(rng, c, s);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<OpCase> mhcPostCases(uint64_t seed, bool /*large*/) {
  Rng rng(seed ^ 0x6D68636Full);
  std::vector<OpCase> cases;
  for (const MhcSpec& s : kSpecs) {
    OpCase c = emptyCase("mhc_post", s, false);
    addPostInputs(rng, c, s);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<OpCase> mhcFusedPostPreCases(uint64_t seed, bool /*large*/) {
  Rng rng(seed ^ 0x6D686366ull);
  std::vector<OpCase> cases;
  for (const MhcSpec& s : kSpecs) {
    OpCase c = emptyCase("mhc_fused_post_pre", s, true);
    addPostInputs(rng, c, s);
    addPreParams(rng, c, s);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<OpCase> mhcCollapseCases(uint64_t seed, bool /*large*/) {
  Rng rng(seed ^ 0x6D686363ull);
  std::vector<OpCase> cases;
  for (const MhcSpec& s : kSpecs) {
    OpCase c = emptyCase("mhc_collapse", s, false);
    c.inputs["x"] = residual(rng, s.T, s.C);
    c.inputs["pre"] = preIn(rng, s.T, s.oneHotPreIn);
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace deepinfer::testing
