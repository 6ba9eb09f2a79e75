// Numeric building blocks of the CPU reference forward pass: bf16 rounding points, dot
// products and GEMMs whose accumulation precision is chosen at run time (fp32 as the model
// runs, fp64 to measure how often fp32 rounding flips a discrete decision, docs/model.md §9),
// RMSNorm and top-k with the project's tie rule.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "CpuForwardThreads.h"
#include "deepinfer/Tensor.h"

namespace deepinfer {

// A dense row-major fp32 matrix [rows, cols] (weights dequantized at load).
struct CpuMatrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> data;
  const float* row(int64_t r) const { return data.data() + r * cols; }
  bool empty() const { return data.empty(); }
};

// Where a computation runs and how it accumulates.
struct CpuExec {
  CpuThreadPool* pool = nullptr;
  bool fp64 = false;  // accumulate dot products, norms and softmax sums in fp64
};

inline float roundBf16(float x) { return bf16ToFloat(floatToBf16(x)); }
inline void roundBf16InPlace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = roundBf16(x[i]);
}

// sum_i a[i]*b[i] with a fixed summation order (so results never depend on threading).
float dotF32(const float* a, const float* b, int64_t n);
double dotF64(const float* a, const float* b, int64_t n);
inline float dot(const CpuExec& ex, const float* a, const float* b, int64_t n) {
  return ex.fp64 ? float(dotF64(a, b, n)) : dotF32(a, b, n);
}
// sum_i x[i]^2.
float sumSquares(const CpuExec& ex, const float* x, int64_t n);

// y[t, o] = sum_k x[t, k] * W[o, k] for t < T, o < W.rows; x is [T, W.cols] row-major.
void gemm(const CpuExec& ex, const float* x, int64_t T, const CpuMatrix& W, float* y);
// The same over rows [rowBegin, rowBegin + rowCount) of W, written as y[t, 0..rowCount).
void gemmRows(const CpuExec& ex, const float* x, int64_t T, const CpuMatrix& W, int64_t rowBegin,
              int64_t rowCount, float* y);

// out = bf16(w * x * rsqrt(mean(x^2) + eps)), computed in fp32 and rounded once. out may be x.
void rmsNorm(const CpuExec& ex, const float* x, int64_t n, const float* w, double eps, float* out);

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
// log(1 + e^x) without overflow for large x.
inline float softplus(float x) { return x > 20.f ? x : std::log1p(std::exp(x)); }

// The indices of the k largest values among `candidates` (indices into `values`), exact ties
// to the lower index, values of -inf (and NaN) never chosen; returned sorted ascending.
std::vector<int32_t> topkAscending(const float* values, const std::vector<int32_t>& candidates,
                                   int64_t k);
// Same over all indices [0, n).
std::vector<int32_t> topkAscending(const float* values, int64_t n, int64_t k);

}  // namespace deepinfer
