// mHC mixes, collapse and post step (spec/ops.md §8). The epilogue runs in the accumulation
// type (fp32, or fp64 when measuring flips); results are stored as fp32.
#include <cmath>

#include "CpuForwardLayers.h"

namespace deepinfer {
namespace {

template <class A>
A dotAcc(const float* a, const float* b, int64_t n) {
  if constexpr (sizeof(A) == sizeof(double)) return dotF64(a, b, n);
  else return dotF32(a, b, n);
}

template <class A>
A sigmoidAcc(A x) { return A(1) / (A(1) + std::exp(-x)); }

template <class A>
CpuMhcMix mixesImpl(const float* x, int64_t C, const CpuMhcWeights& w, double rmsEps,
                    double hcEps, int iters) {
  const int64_t K = kStreams * C;
  A mix[24];
  for (int r = 0; r < 24; ++r) mix[r] = dotAcc<A>(x, w.fn.row(r), K);
  // The RMS factor is applied after the GEMM (ops.md §8).
  const A rms = A(1) / std::sqrt(dotAcc<A>(x, x, K) / A(K) + A(rmsEps));
  for (A& v : mix) v *= rms;
  const A eps = A(hcEps);
  const float* sc = w.scale.data();
  const float* b = w.base.data();
  CpuMhcMix out;
  for (int i = 0; i < kStreams; ++i) {
    out.pre[i] = float(sigmoidAcc<A>(mix[i] * A(sc[0]) + A(b[i])) + eps);
    out.post[i] = float(sigmoidAcc<A>(mix[4 + i] * A(sc[1]) + A(b[4 + i])) * A(2));
  }
  A c[kStreams][kStreams];
  for (int m = 0; m < kStreams; ++m)
    for (int j = 0; j < kStreams; ++j) c[m][j] = mix[8 + m * 4 + j] * A(sc[2]) + A(b[8 + m * 4 + j]);
  auto normalizeColumns = [&] {
    for (int j = 0; j < kStreams; ++j) {
      A s = 0;
      for (int m = 0; m < kStreams; ++m) s += c[m][j];
      for (int m = 0; m < kStreams; ++m) c[m][j] /= s + eps;
    }
  };
  auto normalizeRows = [&] {
    for (int m = 0; m < kStreams; ++m) {
      A s = 0;
      for (int j = 0; j < kStreams; ++j) s += c[m][j];
      for (int j = 0; j < kStreams; ++j) c[m][j] /= s + eps;
    }
  };
  // Round 1: row softmax (+eps), then columns; the remaining rounds alternate rows, columns.
  for (int m = 0; m < kStreams; ++m) {
    A mx = c[m][0];
    for (int j = 1; j < kStreams; ++j) mx = std::max(mx, c[m][j]);
    A s = 0;
    for (int j = 0; j < kStreams; ++j) s += (c[m][j] = std::exp(c[m][j] - mx));
    for (int j = 0; j < kStreams; ++j) c[m][j] = c[m][j] / s + eps;
  }
  normalizeColumns();
  for (int it = 1; it < iters; ++it) {
    normalizeRows();
    normalizeColumns();
  }
  for (int m = 0; m < kStreams; ++m)
    for (int j = 0; j < kStreams; ++j) out.comb[m * 4 + j] = float(c[m][j]);
  return out;
}

}  // namespace

CpuMhcMix mhcMixes(const CpuExec& ex, const float* x, int64_t C, const CpuMhcWeights& w,
                   double rmsEps, double hcEps, int sinkhornIters) {
  return ex.fp64 ? mixesImpl<double>(x, C, w, rmsEps, hcEps, sinkhornIters)
                 : mixesImpl<float>(x, C, w, rmsEps, hcEps, sinkhornIters);
}

void mhcCollapse(const CpuExec& ex, const float* x, int64_t C, const float* pre, float* out) {
  for (int64_t d = 0; d < C; ++d) {
    if (ex.fp64) {
      double s = 0;
      for (int m = 0; m < kStreams; ++m) s += double(pre[m]) * double(x[m * C + d]);
      out[d] = roundBf16(float(s));
    } else {
      float s = 0;
      for (int m = 0; m < kStreams; ++m) s += pre[m] * x[m * C + d];
      out[d] = roundBf16(s);
    }
  }
}

void mhcPost(const CpuExec& ex, float* x, int64_t C, const CpuMhcMix& mix, const float* f) {
  float col[kStreams];
  for (int64_t d = 0; d < C; ++d) {
    for (int m = 0; m < kStreams; ++m) col[m] = x[m * C + d];
    for (int j = 0; j < kStreams; ++j) {
      if (ex.fp64) {
        double s = 0;
        for (int m = 0; m < kStreams; ++m) s += double(mix.comb[m * 4 + j]) * double(col[m]);
        x[j * C + d] = roundBf16(float(s + double(mix.post[j]) * double(f[d])));
      } else {
        float s = 0;
        for (int m = 0; m < kStreams; ++m) s += mix.comb[m * 4 + j] * col[m];
        x[j * C + d] = roundBf16(s + mix.post[j] * f[d]);
      }
    }
  }
}

}  // namespace deepinfer
