// References of the mHC ops (docs/ops.md §8, §11): mhc_pre, mhc_post, mhc_fused_post_pre,
// mhc_collapse. Computed in fp64 because the spec states their tolerances against an fp64
// reference; every bf16 output is the correctly rounded value of the fp64 result.
//
// Reading of the delayed form (§8 "Delayed pre-mix", §11 and docs/model.md §5):
// - mhc_pre: pre/post/comb are the mixes of `x`; layer_input = rmsnorm(bf16(sum_m pre_in[m] *
//   x[m]), norm_weight), i.e. the collapse uses the carried pre-mix `pre_in` (from the previous
//   sublayer's pre step), not the `pre` computed here, which the caller carries on.
// - mhc_fused_post_pre is exactly mhc_post followed by mhc_pre on its bf16 output: x = post
//   step (rounded once to bf16); the next sublayer's pre/post/comb are the mixes of that bf16
//   x under the next fn/scale/base; layer_input = rmsnorm(bf16(sum_m pre_in[m] * x[m]),
//   norm_weight) with the carried `pre_in`. Its outputs `post` and `comb` replace the inputs of
//   those names (the current sublayer's), which are read first.
#include <algorithm>
#include <cmath>
#include <vector>

#include "deepinfer/Formats.h"
#include "reference/RefOps.h"

namespace deepinfer::ref {
namespace {

constexpr int64_t kStreams = 4;
constexpr int64_t kMixes = 24;  // pre(4) | post(4) | comb(16, row-major)

// fp64 -> bf16 correctly rounded (nearest even). Rounding to fp32 with round-to-odd first keeps
// the information the second rounding needs (fp32 has 16 more bits than bf16).
uint16_t doubleToBf16(double d) {
  float f = float(d);
  if (std::isfinite(f) && double(f) != d) {
    if (std::fabs(double(f)) > std::fabs(d)) f = std::nextafter(f, 0.f);  // truncate
    f = bitsToFloat(floatToBits(f) | 1u);                                 // sticky bit
  }
  return floatToBf16(f);
}

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

struct MixParams {
  int64_t C = 0;
  const float* fn = nullptr;     // [24, 4C]
  const float* scale = nullptr;  // [3]
  const float* base = nullptr;   // [24]
  double rmsEps = 0, hcEps = 0;
  int64_t sinkhornIters = 0;  // total rounds, the first one included
};

struct Mixes {
  double pre[kStreams], post[kStreams], comb[kStreams * kStreams];
};

// The mixes of one token's residual x[4, C] (bf16), docs/ops.md §8.
Mixes computeMixes(const uint16_t* x, const MixParams& p) {
  const int64_t K = kStreams * p.C;
  std::vector<double> xf(static_cast<size_t>(K));
  double sqrsum = 0;
  for (int64_t k = 0; k < K; ++k) {
    xf[size_t(k)] = bf16ToFloat(x[k]);
    sqrsum += xf[size_t(k)] * xf[size_t(k)];
  }
  double mix[kMixes];
  const double rms = 1.0 / std::sqrt(sqrsum / double(K) + p.rmsEps);  // applied after the GEMM
  for (int64_t j = 0; j < kMixes; ++j) {
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) acc += xf[size_t(k)] * double(p.fn[j * K + k]);
    mix[j] = acc * rms;
  }
  Mixes m;
  for (int64_t i = 0; i < kStreams; ++i) {
    m.pre[i] = sigmoid(mix[i] * p.scale[0] + p.base[i]) + p.hcEps;
    m.post[i] = sigmoid(mix[kStreams + i] * p.scale[1] + p.base[kStreams + i]) * 2.0;
  }
  double c[kStreams][kStreams];
  for (int64_t i = 0; i < kStreams; ++i)
    for (int64_t j = 0; j < kStreams; ++j)
      c[i][j] = mix[8 + i * kStreams + j] * p.scale[2] + p.base[8 + i * kStreams + j];
  auto normalizeColumns = [&] {
    for (int64_t j = 0; j < kStreams; ++j) {
      double s = 0;
      for (int64_t i = 0; i < kStreams; ++i) s += c[i][j];
      for (int64_t i = 0; i < kStreams; ++i) c[i][j] /= s + p.hcEps;
    }
  };
  // Round 1: row softmax + eps, then the column normalization.
  for (int64_t i = 0; i < kStreams; ++i) {
    double mx = c[i][0];
    for (int64_t j = 1; j < kStreams; ++j) mx = std::max(mx, c[i][j]);
    double s = 0;
    for (int64_t j = 0; j < kStreams; ++j) s += (c[i][j] = std::exp(c[i][j] - mx));
    for (int64_t j = 0; j < kStreams; ++j) c[i][j] = c[i][j] / s + p.hcEps;
  }
  normalizeColumns();
  for (int64_t round = 1; round < p.sinkhornIters; ++round) {
    for (int64_t i = 0; i < kStreams; ++i) {
      double s = 0;
      for (int64_t j = 0; j < kStreams; ++j) s += c[i][j];
      for (int64_t j = 0; j < kStreams; ++j) c[i][j] /= s + p.hcEps;
    }
    normalizeColumns();
  }
  for (int64_t i = 0; i < kStreams; ++i)
    for (int64_t j = 0; j < kStreams; ++j) m.comb[i * kStreams + j] = c[i][j];
  return m;
}

// out[c] = bf16(sum_m pre[m] * x[m, c]), rounded once.
void collapse(const uint16_t* x, const double* pre, int64_t C, uint16_t* out) {
  for (int64_t c = 0; c < C; ++c) {
    double acc = 0;
    for (int64_t m = 0; m < kStreams; ++m) acc += pre[m] * double(bf16ToFloat(x[m * C + c]));
    out[c] = doubleToBf16(acc);
  }
}

// out = bf16(w * v * rsqrt(mean(v^2) + eps)), rounded once (not before the weight multiply).
void rmsNorm(const uint16_t* v, const uint16_t* w, int64_t C, double eps, uint16_t* out) {
  double sq = 0;
  for (int64_t c = 0; c < C; ++c) sq += double(bf16ToFloat(v[c])) * bf16ToFloat(v[c]);
  const double r = 1.0 / std::sqrt(sq / double(C) + eps);
  for (int64_t c = 0; c < C; ++c) out[c] = doubleToBf16(double(bf16ToFloat(w[c])) * bf16ToFloat(v[c]) * r);
}

// x[j, c] = bf16(sum_m comb[m, j] * res[m, c] + post[j] * f[c]): stream j takes column j.
// Returns the sum of squares of the rounded result (the next pre step's sqrsum).
double postStep(const uint16_t* f, const uint16_t* res, const double* post, const double* comb, int64_t C,
                uint16_t* x) {
  double sq = 0;
  for (int64_t j = 0; j < kStreams; ++j) {
    for (int64_t c = 0; c < C; ++c) {
      double acc = 0;
      for (int64_t m = 0; m < kStreams; ++m)
        acc += comb[m * kStreams + j] * double(bf16ToFloat(res[m * C + c]));
      acc += post[j] * double(bf16ToFloat(f[c]));
      x[j * C + c] = doubleToBf16(acc);
      const double r = bf16ToFloat(x[j * C + c]);
      sq += r * r;
    }
  }
  return sq;
}

std::vector<double> toDouble(const float* p, int64_t n) { return std::vector<double>(p, p + n); }

// Attributes and parameter tensors of a pre step (mhc_pre and the pre half of the fused op).
Result<MixParams> readMixParams(const RefArgs& a, int64_t C) {
  MixParams p;
  p.C = C;
  REF_ASSIGN(rmsEps, a.floatAttr("rms_eps", 0));
  REF_ASSIGN(hcEps, a.floatAttr("hc_eps", 0));
  REF_ASSIGN(iters, a.intAttr("sinkhorn_iters", 1));
  REF_ASSIGN(fn, a.in("fn", {exactDim(kMixes), dimOf("4C", kStreams * C)}));
  REF_ASSIGN(scale, a.in("scale", {exactDim(3)}));
  REF_ASSIGN(base, a.in("base", {exactDim(kMixes)}));
  p.rmsEps = rmsEps;
  p.hcEps = hcEps;
  p.sinkhornIters = iters;
  p.fn = fn->ptr<float>();
  p.scale = scale->ptr<float>();
  p.base = base->ptr<float>();
  return p;
}

// The residual [T, 4, C] under `name`, with C >= 1.
Result<const HostTensor*> readResidual(const RefArgs& a, const std::string& name) {
  REF_ASSIGN(x, a.in(name, {anyDim("T"), exactDim(kStreams), anyDim("C")}));
  if (x->dim(2) < 1) return a.fail("tensor '{}' has shape {}: C must be at least 1", name, x->shapeString());
  return x;
}

// Writes pre/post/comb of token t from `m` into the three output arrays.
void storeMixes(const Mixes& m, int64_t t, float* pre, float* post, float* comb) {
  for (int64_t i = 0; i < kStreams; ++i) {
    pre[t * kStreams + i] = float(m.pre[i]);
    post[t * kStreams + i] = float(m.post[i]);
  }
  for (int64_t i = 0; i < kStreams * kStreams; ++i) comb[t * kStreams * kStreams + i] = float(m.comb[i]);
}

// layer_input[t] = rmsnorm(bf16(sum_m preIn[m] * x[m]), w).
void layerInput(const uint16_t* x, const float* preIn, const uint16_t* w, int64_t C, double eps,
                uint16_t* out) {
  const std::vector<double> pre = toDouble(preIn, kStreams);
  std::vector<uint16_t> h(static_cast<size_t>(C));
  collapse(x, pre.data(), C, h.data());
  rmsNorm(h.data(), w, C, eps, out);
}

}  // namespace

Status mhcPre(RefArgs& a) {
  REF_ASSIGN(x, readResidual(a, "x"));
  const int64_t T = x->dim(0), C = x->dim(2);
  REF_ASSIGN(params, readMixParams(a, C));
  REF_ASSIGN(preIn, a.in("pre_in", {dimOf("T", T), exactDim(kStreams)}));
  REF_ASSIGN(normWeight, a.in("norm_weight", {dimOf("C", C)}));
  REF_ASSIGN(normEps, a.floatAttr("norm_eps", 0));

  const uint16_t* xb = x->ptr<uint16_t>();
  uint16_t* li = a.out("layer_input", {T, C}).ptr<uint16_t>();
  float* pre = a.out("pre", {T, kStreams}).ptr<float>();
  float* post = a.out("post", {T, kStreams}).ptr<float>();
  float* comb = a.out("comb", {T, kStreams, kStreams}).ptr<float>();
  for (int64_t t = 0; t < T; ++t) {
    const uint16_t* xt = xb + t * kStreams * C;
    storeMixes(computeMixes(xt, params), t, pre, post, comb);
    layerInput(xt, preIn->ptr<float>() + t * kStreams, normWeight->ptr<uint16_t>(), C, normEps, li + t * C);
  }
  return {};
}

Status mhcPost(RefArgs& a) {
  REF_ASSIGN(res, readResidual(a, "residual"));
  const int64_t T = res->dim(0), C = res->dim(2);
  REF_ASSIGN(f, a.in("f_out", {dimOf("T", T), dimOf("C", C)}));
  REF_ASSIGN(post, a.in("post", {dimOf("T", T), exactDim(kStreams)}));
  REF_ASSIGN(comb, a.in("comb", {dimOf("T", T), exactDim(kStreams), exactDim(kStreams)}));

  uint16_t* x = a.out("x", {T, kStreams, C}).ptr<uint16_t>();
  float* sqrsum = a.out("sqrsum", {T}).ptr<float>();
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<double> p = toDouble(post->ptr<float>() + t * kStreams, kStreams);
    const std::vector<double> c = toDouble(comb->ptr<float>() + t * kStreams * kStreams, kStreams * kStreams);
    sqrsum[t] = float(postStep(f->ptr<uint16_t>() + t * C, res->ptr<uint16_t>() + t * kStreams * C, p.data(),
                               c.data(), C, x + t * kStreams * C));
  }
  return {};
}

Status mhcFusedPostPre(RefArgs& a) {
  REF_ASSIGN(res, readResidual(a, "residual"));
  const int64_t T = res->dim(0), C = res->dim(2);
  REF_ASSIGN(f, a.in("f_out", {dimOf("T", T), dimOf("C", C)}));
  REF_ASSIGN(postIn, a.in("post", {dimOf("T", T), exactDim(kStreams)}));
  REF_ASSIGN(combIn, a.in("comb", {dimOf("T", T), exactDim(kStreams), exactDim(kStreams)}));
  REF_ASSIGN(params, readMixParams(a, C));
  REF_ASSIGN(preIn, a.in("pre_in", {dimOf("T", T), exactDim(kStreams)}));
  REF_ASSIGN(normWeight, a.in("norm_weight", {dimOf("C", C)}));
  REF_ASSIGN(normEps, a.floatAttr("norm_eps", 0));

  // `post` and `comb` are about to be replaced by the next sublayer's: keep this one's.
  const std::vector<double> postCur = toDouble(postIn->ptr<float>(), T * kStreams);
  const std::vector<double> combCur = toDouble(combIn->ptr<float>(), T * kStreams * kStreams);
  uint16_t* x = a.out("x", {T, kStreams, C}).ptr<uint16_t>();
  uint16_t* li = a.out("layer_input", {T, C}).ptr<uint16_t>();
  float* pre = a.out("pre", {T, kStreams}).ptr<float>();
  float* post = a.out("post", {T, kStreams}).ptr<float>();
  float* comb = a.out("comb", {T, kStreams, kStreams}).ptr<float>();
  for (int64_t t = 0; t < T; ++t) {
    uint16_t* xt = x + t * kStreams * C;
    postStep(f->ptr<uint16_t>() + t * C, res->ptr<uint16_t>() + t * kStreams * C,
             postCur.data() + t * kStreams, combCur.data() + t * kStreams * kStreams, C, xt);
    storeMixes(computeMixes(xt, params), t, pre, post, comb);  // from the bf16 residual
    layerInput(xt, preIn->ptr<float>() + t * kStreams, normWeight->ptr<uint16_t>(), C, normEps, li + t * C);
  }
  return {};
}

Status mhcCollapse(RefArgs& a) {
  REF_ASSIGN(x, readResidual(a, "x"));
  const int64_t T = x->dim(0), C = x->dim(2);
  REF_ASSIGN(preT, a.in("pre", {dimOf("T", T), exactDim(kStreams)}));
  uint16_t* h = a.out("h", {T, C}).ptr<uint16_t>();
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<double> pre = toDouble(preT->ptr<float>() + t * kStreams, kStreams);
    collapse(x->ptr<uint16_t>() + t * kStreams * C, pre.data(), C, h + t * C);
  }
  return {};
}

}  // namespace deepinfer::ref
