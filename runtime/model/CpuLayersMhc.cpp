// mHC mixes, collapse and post step (docs/ops.md §8). The epilogue runs in the accumulation
// type (fp32, or fp64 when measuring flips); results are stored as fp32.
#include <algorithm>
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
  // The RMS factor is applied after the GEMM (docs/ops.md §8).
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

void runMhcBlock(const CpuExec& ex, const ModelConfig& cfg, const CpuLayerWeights& lw, int64_t T,
                 std::vector<float>& X, std::vector<float>& pre, const CpuSublayer& attention,
                 const CpuSublayer& moe) {
  const int64_t C = cfg.hiddenSize;
  std::vector<CpuMhcMix> mixA(static_cast<size_t>(T)), mixF(static_cast<size_t>(T));
  std::vector<float> u(size_t(T * C)), y;
  auto collapseNorm = [&](const std::vector<float>& weightsNorm, auto preOf) {
    ex.pool->parallelFor(T, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        float* ut = &u[size_t(t * C)];
        mhcCollapse(ex, &X[size_t(t * kStreams * C)], C, preOf(t), ut);
        rmsNorm(ex, ut, C, weightsNorm.data(), cfg.rmsNormEps, ut);
      }
    });
  };
  auto mixes = [&](const CpuMhcWeights& hw, std::vector<CpuMhcMix>& out) {
    ex.pool->parallelFor(T, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t)
        out[size_t(t)] = mhcMixes(ex, &X[size_t(t * kStreams * C)], C, hw, cfg.rmsNormEps, cfg.hcEps,
                                  cfg.hcSinkhornIters);
    });
  };
  auto post = [&](const std::vector<CpuMhcMix>& mix) {
    ex.pool->parallelFor(T, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) mhcPost(ex, &X[size_t(t * kStreams * C)], C, mix[size_t(t)], &y[size_t(t * C)]);
    });
  };
  // Delayed mHC (docs/ops.md §8): the attention collapses with the previous sublayer's pre-mix.
  mixes(lw.hcAttn, mixA);
  collapseNorm(lw.attnNorm, [&](int64_t t) { return &pre[size_t(t * kStreams)]; });
  attention(u, y);
  post(mixA);
  mixes(lw.hcFfn, mixF);
  collapseNorm(lw.ffnNorm, [&](int64_t t) { return mixA[size_t(t)].pre; });
  moe(u, y);
  post(mixF);
  for (int64_t t = 0; t < T; ++t) std::copy_n(mixF[size_t(t)].pre, kStreams, &pre[size_t(t * kStreams)]);
}

void collapseAndNorm(const CpuExec& ex, const ModelConfig& cfg, int64_t T, const std::vector<float>& X,
                     const std::vector<float>& pre, const std::vector<float>& norm, std::vector<float>& out) {
  const int64_t C = cfg.hiddenSize;
  out.resize(size_t(T * C));
  ex.pool->parallelFor(T, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      float* ot = &out[size_t(t * C)];
      mhcCollapse(ex, &X[size_t(t * kStreams * C)], C, &pre[size_t(t * kStreams)], ot);
      rmsNorm(ex, ot, C, norm.data(), cfg.rmsNormEps, ot);
    }
  });
}

}  // namespace deepinfer
