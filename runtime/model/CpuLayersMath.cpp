#include <algorithm>
#include <cmath>
#include <numeric>

#include "CpuForwardMath.h"

namespace deepinfer {

// Eight independent partial sums (vectorizable without reassociation), combined in a fixed
// tree, then the tail.
float dotF32(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

double dotF64(const float* a, const float* b, int64_t n) {
  double acc[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int l = 0; l < 4; ++l) acc[l] += double(a[i + l]) * double(b[i + l]);
  double s = (acc[0] + acc[2]) + (acc[1] + acc[3]);
  for (; i < n; ++i) s += double(a[i]) * double(b[i]);
  return s;
}

float sumSquares(const CpuExec& ex, const float* x, int64_t n) { return dot(ex, x, x, n); }

void gemmRows(const CpuExec& ex, const float* x, int64_t T, const CpuMatrix& W, int64_t rowBegin,
              int64_t rowCount, float* y) {
  const int64_t K = W.cols;
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      const float* w = W.row(rowBegin + o);
      for (int64_t t = 0; t < T; ++t) y[t * rowCount + o] = dot(ex, x + t * K, w, K);
    }
  };
  // Small products are not worth waking the pool.
  if (ex.pool == nullptr || T * rowCount * K < (int64_t(1) << 15))
    body(0, rowCount);
  else
    ex.pool->parallelFor(rowCount, body);
}

void gemm(const CpuExec& ex, const float* x, int64_t T, const CpuMatrix& W, float* y) {
  gemmRows(ex, x, T, W, 0, W.rows, y);
}

void rmsNorm(const CpuExec& ex, const float* x, int64_t n, const float* w, double eps, float* out) {
  float r;
  if (ex.fp64) {
    r = float(1.0 / std::sqrt(dotF64(x, x, n) / double(n) + eps));
  } else {
    r = 1.0f / std::sqrt(dotF32(x, x, n) / float(n) + float(eps));
  }
  for (int64_t i = 0; i < n; ++i) out[i] = roundBf16(w[i] * x[i] * r);
}

std::vector<int32_t> topkAscending(const float* values, const std::vector<int32_t>& candidates,
                                   int64_t k) {
  std::vector<int32_t> c;
  c.reserve(candidates.size());
  for (int32_t i : candidates)
    if (!std::isnan(values[i]) && values[i] != -INFINITY) c.push_back(i);
  if (int64_t(c.size()) > k) {
    auto better = [&](int32_t a, int32_t b) {
      return values[a] > values[b] || (values[a] == values[b] && a < b);
    };
    std::nth_element(c.begin(), c.begin() + k, c.end(), better);
    c.resize(size_t(k));
  }
  std::sort(c.begin(), c.end());
  return c;
}

std::vector<int32_t> topkAscending(const float* values, int64_t n, int64_t k) {
  std::vector<int32_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  return topkAscending(values, all, k);
}

}  // namespace deepinfer
