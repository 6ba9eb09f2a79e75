// Reference of weight_gemm: y = x . dequant(w)^T (QuantGemmRef.h), the weights dequantized to
// bf16 exactly as the checkpoint format defines them, the products summed exactly (fp64), then
// the epilogue: f32 y, bf16 y, or the SwiGLU of w (gate) and w_up (up) with the CPU forward
// pass's rounding points (weight 1, as the shared expert).
#include <cmath>
#include <vector>

#include "deepinfer/Formats.h"
#include "deepinfer/OpSignature.h"
#include "reference/QuantEpilogueRef.h"
#include "reference/QuantGemmRef.h"
#include "reference/RefOps.h"

namespace deepinfer::ref {
namespace {

// Runs the op; with `bound`, also the per-element tolerance of QuantGemmRef.h.
Status run(RefArgs& a, HostTensor* bound) {
  REF_ASSIGN(bits, a.intAttr("weight_bits", 4, 8));
  if (bits != 4 && bits != 8)
    return a.fail("attribute 'weight_bits' = {} must be 8 (e4m3) or 4 (e2m1)", bits);
  REF_ASSIGN(G, a.intAttr("groups", 1, kMaxRowEntries));
  REF_ASSIGN(epi, a.intAttr("epilogue", 0, 2));
  REF_ASSIGN(limitD, a.floatAttr("swiglu_limit", 0));
  if (!(limitD > 0)) return a.fail("attribute 'swiglu_limit' = {} must be positive", limitD);
  const float limit = float(limitD);
  REF_ASSIGN(x, a.in("x", {anyDim("M"), anyDim("K")}));
  const int64_t M = x->dim(0), K = x->dim(1);
  if (K % G != 0) return a.fail("x has {} columns, not a multiple of groups = {}", K, G);
  const int64_t Kg = K / G;
  if (bits == 4 && Kg % 32 != 0)
    return a.fail("e2m1 weights need K per group = {} to be a multiple of 32 (one scale per 32 columns)", Kg);
  const Dim wcols = dimOf(bits == 8 ? "K/groups" : "K/groups/2", bits == 8 ? Kg : Kg / 2);
  REF_ASSIGN(w, a.in("w", {anyDim("N"), wcols}));
  const int64_t N = w->dim(0);
  if (N % G != 0) return a.fail("w has {} rows, not a multiple of groups = {}", N, G);
  const int64_t Ng = N / G;
  const std::vector<Dim> sdims = bits == 8 ? std::vector<Dim>{dimOf("ceil(N/32)", (N + 31) / 32),
                                                              dimOf("ceil(K/groups/32)", (Kg + 31) / 32)}
                                           : std::vector<Dim>{dimOf("N", N), dimOf("K/groups/32", Kg / 32)};
  REF_ASSIGN(ws, a.in("w_scale", sdims));
  const HostTensor* up = nullptr;
  const HostTensor* ups = nullptr;
  if (epi == 2) {
    if (!a.has("w_up") || !a.has("w_up_scale"))
      return a.fail("epilogue = 2 (SwiGLU) needs the up projection 'w_up' and 'w_up_scale'");
    REF_ASSIGN(u, a.in("w_up", {dimOf("N", N), wcols}));
    REF_ASSIGN(us, a.in("w_up_scale", sdims));
    up = u;
    ups = us;
  } else if (a.has("w_up") || a.has("w_up_scale")) {
    return a.fail("'w_up'/'w_up_scale' are read only by epilogue = 2 (SwiGLU); epilogue = {}", epi);
  }

  std::vector<float> xf(size_t(M * K));
  for (int64_t i = 0; i < M * K; ++i) xf[size_t(i)] = bf16ToFloat(x->ptr<uint16_t>()[i]);
  const QuantMatrix gate{int(bits), w->ptr<uint8_t>(), ws->ptr<uint8_t>(), N, Kg};
  const QuantMatrix upm{int(bits), up ? up->ptr<uint8_t>() : nullptr, ups ? ups->ptr<uint8_t>() : nullptr, N, Kg};
  const double tau = accumulationTolerance(Kg);

  HostTensor& y = a.out("y", {M, N}, epi == 0 ? DType::F32 : DType::BF16);
  float* yb = bound ? (*bound = HostTensor(DType::F32, {M, N})).ptr<float>() : nullptr;
  std::vector<float> wr(static_cast<size_t>(Kg)), ur(static_cast<size_t>(Kg));
  for (int64_t n = 0; n < N; ++n) {
    gate.row(n, wr.data());
    if (epi == 2) upm.row(n, ur.data());
    const int64_t col0 = (n / Ng) * Kg;
    for (int64_t m = 0; m < M; ++m) {
      const float* xr = &xf[size_t(m * K + col0)];
      double g = 0, v = 0, ag = 0, av = 0;
      for (int64_t k = 0; k < Kg; ++k) {
        const double pg = double(xr[k]) * wr[size_t(k)];
        g += pg;
        ag += std::fabs(pg);
        if (epi == 2) {
          const double pv = double(xr[k]) * ur[size_t(k)];
          v += pv;
          av += std::fabs(pv);
        }
      }
      const int64_t i = m * N + n;
      if (epi == 0) {
        y.ptr<float>()[i] = float(g);
        if (yb) yb[i] = float(tau * ag + std::ldexp(std::fabs(g), -23));
      } else if (epi == 1) {
        y.ptr<uint16_t>()[i] = floatToBf16(float(bf16Of(g)));
        if (yb) yb[i] = float(bf16TieSpan(g, tau * ag + std::ldexp(std::fabs(g), -24)));
      } else {
        const float gf = float(g), vf = float(v);
        const float F = swigluRef(gf, vf, limit, 1.f);
        y.ptr<uint16_t>()[i] = floatToBf16(F);
        if (yb) {
          const double dg = tau * ag + std::ldexp(std::fabs(g), -24), dv = tau * av + std::ldexp(std::fabs(v), -24);
          yb[i] = float(bf16TieSpan(F, swigluSlack(gf, vf, limit, 1.f, dg, dv)));
        }
      }
    }
  }
  return {};
}

}  // namespace

Status weightGemm(RefArgs& a) { return run(a, nullptr); }

Result<HostTensor> weightGemmErrorBound(RefArgs& a) {
  HostTensor bound;
  DI_TRY(run(a, &bound));
  return bound;
}

}  // namespace deepinfer::ref
