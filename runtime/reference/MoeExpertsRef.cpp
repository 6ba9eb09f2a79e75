// Reference of moe_experts (docs/model.md §7, CpuLayersMoe.cpp): for every (token t, rank r) whose
// id e lies in [0, E): g = x[t] . w1[e]^T, v = x[t] . w3[e]^T (fp32 values of exact sums),
// h = bf16(weights[t, r] * (silu(min(g, limit)) * clamp(v, -limit, limit))), y[t, r] = h . w2[e]^T
// (the fp32 value of the exact sum); any other id (the router's -1) selects no expert and its y row
// is 0. Expert weights are e2m1 with UE8M0 scales per 1x32, dequantized as QuantGemmRef.h says.
#include <cmath>
#include <vector>

#include "deepinfer/Formats.h"
#include "deepinfer/OpSignature.h"
#include "reference/QuantEpilogueRef.h"
#include "reference/QuantGemmRef.h"
#include "reference/RefOps.h"

namespace deepinfer::ref {
namespace {

Status run(RefArgs& a, HostTensor* bound) {
  REF_ASSIGN(limitD, a.floatAttr("swiglu_limit", 0));
  if (!(limitD > 0)) return a.fail("attribute 'swiglu_limit' = {} must be positive", limitD);
  const float limit = float(limitD);
  REF_ASSIGN(x, a.in("x", {anyDim("T"), anyDim("C")}));
  const int64_t T = x->dim(0), C = x->dim(1);
  if (C % 32 != 0) return a.fail("x has {} columns; e2m1 experts need the hidden size to be a multiple of 32", C);
  REF_ASSIGN(ids, a.in("ids", {dimOf("T", T), anyDim("k")}));
  const int64_t k = ids->dim(1);
  REF_ASSIGN(wts, a.in("weights", {dimOf("T", T), dimOf("k", k)}));
  REF_ASSIGN(w1, a.in("w1", {anyDim("E"), anyDim("I"), dimOf("C/2", C / 2)}));
  const int64_t E = w1->dim(0), I = w1->dim(1);
  if (I % 32 != 0) return a.fail("w1 has {} rows per expert; the intermediate size must be a multiple of 32", I);
  REF_ASSIGN(w1s, a.in("w1_scale", {dimOf("E", E), dimOf("I", I), dimOf("C/32", C / 32)}));
  REF_ASSIGN(w3, a.in("w3", {dimOf("E", E), dimOf("I", I), dimOf("C/2", C / 2)}));
  REF_ASSIGN(w3s, a.in("w3_scale", {dimOf("E", E), dimOf("I", I), dimOf("C/32", C / 32)}));
  REF_ASSIGN(w2, a.in("w2", {dimOf("E", E), dimOf("C", C), dimOf("I/2", I / 2)}));
  REF_ASSIGN(w2s, a.in("w2_scale", {dimOf("E", E), dimOf("C", C), dimOf("I/32", I / 32)}));

  std::vector<float> xf(size_t(T * C));
  for (int64_t i = 0; i < T * C; ++i) xf[size_t(i)] = bf16ToFloat(x->ptr<uint16_t>()[i]);
  const int32_t* id = ids->ptr<int32_t>();
  const float* wt = wts->ptr<float>();
  HostTensor& y = a.out("y", {T, k, C});
  float* yo = y.ptr<float>();
  float* yb = bound ? (*bound = HostTensor(DType::F32, {T, k, C})).ptr<float>() : nullptr;
  for (int64_t i = 0; i < T * k * C; ++i) {
    yo[i] = 0.f;
    if (yb) yb[i] = 0.f;
  }
  const double tauC = accumulationTolerance(C), tauI = accumulationTolerance(I);

  // Expert by expert, so each expert's weights are dequantized once.
  std::vector<float> g1(size_t(I * C)), g3(size_t(I * C)), d2(size_t(C * I));
  std::vector<float> h(static_cast<size_t>(I)), dh(static_cast<size_t>(I));
  for (int64_t e = 0; e < E; ++e) {
    bool used = false;
    for (int64_t i = 0; i < T * k && !used; ++i) used = id[i] == e;
    if (!used) continue;
    const QuantMatrix m1{4, w1->ptr<uint8_t>() + e * I * (C / 2), w1s->ptr<uint8_t>() + e * I * (C / 32), I, C};
    const QuantMatrix m3{4, w3->ptr<uint8_t>() + e * I * (C / 2), w3s->ptr<uint8_t>() + e * I * (C / 32), I, C};
    const QuantMatrix m2{4, w2->ptr<uint8_t>() + e * C * (I / 2), w2s->ptr<uint8_t>() + e * C * (I / 32), C, I};
    for (int64_t r = 0; r < I; ++r) {
      m1.row(r, &g1[size_t(r * C)]);
      m3.row(r, &g3[size_t(r * C)]);
    }
    for (int64_t r = 0; r < C; ++r) m2.row(r, &d2[size_t(r * I)]);
    for (int64_t i = 0; i < T * k; ++i) {
      if (id[i] != e) continue;
      const float* xr = &xf[size_t((i / k) * C)];
      for (int64_t j = 0; j < I; ++j) {
        double g = 0, v = 0, ag = 0, av = 0;
        for (int64_t c = 0; c < C; ++c) {
          const double pg = double(xr[c]) * g1[size_t(j * C + c)];
          const double pv = double(xr[c]) * g3[size_t(j * C + c)];
          g += pg;
          v += pv;
          ag += std::fabs(pg);
          av += std::fabs(pv);
        }
        const float gf = float(g), vf = float(v);
        const float F = swigluRef(gf, vf, limit, wt[i]);
        h[size_t(j)] = bf16ToFloat(floatToBf16(F));
        if (yb) {
          const double dg = tauC * ag + std::ldexp(std::fabs(g), -24), dv = tauC * av + std::ldexp(std::fabs(v), -24);
          dh[size_t(j)] = float(bf16TieSpan(F, swigluSlack(gf, vf, limit, wt[i], dg, dv)));
        }
      }
      for (int64_t n = 0; n < C; ++n) {
        const float* wr = &d2[size_t(n * I)];
        double s = 0, as = 0, tie = 0;
        for (int64_t j = 0; j < I; ++j) {
          s += double(h[size_t(j)]) * wr[j];
          if (yb) {
            as += std::fabs(double(h[size_t(j)]) * wr[j]) + double(dh[size_t(j)]) * std::fabs(wr[j]);
            tie += double(dh[size_t(j)]) * std::fabs(wr[j]);
          }
        }
        yo[i * C + n] = float(s);
        if (yb) yb[i * C + n] = float(tie + tauI * as + std::ldexp(std::fabs(s), -23));
      }
    }
  }
  return {};
}

}  // namespace

Status moeExperts(RefArgs& a) { return run(a, nullptr); }

Result<HostTensor> moeExpertsErrorBound(RefArgs& a) {
  HostTensor bound;
  DI_TRY(run(a, &bound));
  return bound;
}

}  // namespace deepinfer::ref
