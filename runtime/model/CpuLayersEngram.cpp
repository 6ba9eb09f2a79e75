// The engram module (docs/model.md §8), run before the block of an engram layer on all four
// residual streams: hashed n-gram rows of the token's class history are gathered from the
// table (row by row from the checkpoint's mapping), projected to 4 keys and one value, and
// each stream adds the value scaled by its own sigmoid gate.
#include <cmath>
#include <fmt/format.h>

#include "CpuForwardLayers.h"

namespace deepinfer {

Status CpuForwardPass::engram(int layer, std::vector<float>& X) {
  const LayerRole& role = cfg.role(layer);
  const CpuEngramWeights& ew = w.layers[size_t(layer)].engram;
  const EngramHashParams& hp = *m.engramHash_;
  const int64_t C = cfg.hiddenSize;
  const int64_t lookups = hp.lookupsPerToken(), width = cfg.engramHeadDim;
  const int maxN = hp.maxNgram;

  // Row ids of every token: window[k] is the class k tokens back (pad before the first).
  std::vector<int64_t> rowIds(size_t(T * lookups));
  std::vector<int64_t> window(static_cast<size_t>(maxN));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = pos0 + t;
    for (int k = 0; k < maxN; ++k) window[size_t(k)] = pos - k >= 0 ? classes[size_t(pos - k)] : m.padClass_;
    engramRowIds(hp, role.engramIndex, window.data(), &rowIds[size_t(t * lookups)]);
  }
  std::vector<float> rows(size_t(T * lookups * width));
  Status read = m.ckpt_->readEngramRows(ew.tableName, rowIds.data(), rowIds.size(), rows.data());
  if (!read.ok())
    return Error{fmt::format("engram layer {}: {}", layer, read.error().message)};
  roundBf16InPlace(rows.data(), int64_t(rows.size()));  // GEMM input activations are bf16
  st.counters_.engramLookups += T;

  std::vector<float> kv(size_t(T * 5 * C));
  gemm(ex, rows.data(), T, ew.wkv, kv.data());
  roundBf16InPlace(kv.data(), int64_t(kv.size()));

  const double eps = cfg.rmsNormEps;
  const double invSqrtC = 1.0 / std::sqrt(double(C));
  parallelFor(T * kStreams, [&](int64_t b, int64_t e) {
    std::vector<float> prod(static_cast<size_t>(C));
    for (int64_t i = b; i < e; ++i) {
      const int64_t t = i / kStreams, s = i % kStreams;
      float* x = &X[size_t((t * kStreams + s) * C)];
      const float* key = &kv[size_t(t * 5 * C + s * C)];
      const float* value = &kv[size_t(t * 5 * C + 4 * C)];
      const float* qw = &ew.qWeight[size_t(s * C)];
      const float* kw = &ew.kWeight[size_t(s * C)];
      for (int64_t d = 0; d < C; ++d) prod[size_t(d)] = x[d] * qw[d] * kw[d];
      float dotv;
      if (ex.fp64) {
        const double raw = dotF64(prod.data(), key, C);
        dotv = float(raw / std::sqrt(dotF64(x, x, C) / double(C) + eps) /
                     std::sqrt(dotF64(key, key, C) / double(C) + eps) * invSqrtC);
      } else {
        const float rx = 1.0f / std::sqrt(dotF32(x, x, C) / float(C) + float(eps));
        const float rk = 1.0f / std::sqrt(dotF32(key, key, C) / float(C) + float(eps));
        dotv = dotF32(prod.data(), key, C) * rx * rk * float(invSqrtC);
      }
      // sign(0) counts as +1 (docs/model.md §9).
      const float signedRoot = (dotv < 0 ? -1.f : 1.f) * std::sqrt(std::max(std::fabs(dotv), 1e-6f));
      const float g = sigmoid(signedRoot);
      for (int64_t d = 0; d < C; ++d) x[d] = roundBf16(x[d] + g * value[d]);
    }
  });
  return {};
}

}  // namespace deepinfer
