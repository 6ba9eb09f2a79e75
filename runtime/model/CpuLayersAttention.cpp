// The attention sublayer (docs/model.md §6): Q and KV projections, the window cache, the
// compressor and indexer of source layers, one softmax over window rows and selected
// compressed rows with the sink in the denominator, inverse RoPE and the grouped output
// projection.
#include <algorithm>
#include <cmath>

#include "CpuForwardLayers.h"

namespace deepinfer {
namespace {

// out = sum_k softmax_k * rows[k] with the sink joining the denominator only (docs/ops.md §5).
template <class A>
void attendOneHead(const float* q, const std::vector<const float*>& rows, float sink, float scale,
                   float* out) {
  const size_t n = rows.size();
  std::vector<A> p(n);
  A mx = A(sink);
  for (size_t k = 0; k < n; ++k) {
    if constexpr (sizeof(A) == sizeof(double)) p[k] = A(scale) * dotF64(q, rows[k], kKvDim);
    else p[k] = scale * dotF32(q, rows[k], kKvDim);
    mx = std::max(mx, p[k]);
  }
  A denom = std::exp(A(sink) - mx);
  for (size_t k = 0; k < n; ++k) denom += (p[k] = std::exp(p[k] - mx));
  std::vector<A> acc(kKvDim, A(0));
  for (size_t k = 0; k < n; ++k) {
    const A pk = p[k] / denom;
    for (int d = 0; d < kKvDim; ++d) acc[size_t(d)] += pk * A(rows[k][d]);
  }
  for (int d = 0; d < kKvDim; ++d) out[d] = float(acc[size_t(d)]);
}

}  // namespace

void attendHead(const CpuExec& ex, const float* q, const std::vector<const float*>& rows, float sink, float scale,
                float* out) {
  if (ex.fp64) attendOneHead<double>(q, rows, sink, scale, out);
  else attendOneHead<float>(q, rows, sink, scale, out);
  roundBf16InPlace(out, kKvDim);
}

void attentionOutput(const CpuExec& ex, const ModelConfig& cfg, const CpuAttentionWeights& aw,
                     const std::vector<float>& o, int64_t T, std::vector<float>& y) {
  const int64_t C = cfg.hiddenSize, H = cfg.numAttentionHeads, D = cfg.headDim;
  const int64_t G = cfg.oGroups, oL = cfg.oLoraRank;
  const int64_t groupWidth = (H / G) * D;
  std::vector<float> og(size_t(T * groupWidth)), zg(size_t(T * oL)), z(size_t(T * G * oL));
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t t = 0; t < T; ++t)
      std::copy_n(&o[size_t(t * H * D + g * groupWidth)], groupWidth, &og[size_t(t * groupWidth)]);
    gemmRows(ex, og.data(), T, aw.woA, g * oL, oL, zg.data());
    for (int64_t t = 0; t < T; ++t) std::copy_n(&zg[size_t(t * oL)], oL, &z[size_t(t * G * oL + g * oL)]);
  }
  roundBf16InPlace(z.data(), int64_t(z.size()));
  y.assign(size_t(T * C), 0.f);
  gemm(ex, z.data(), T, aw.woB, y.data());
  roundBf16InPlace(y.data(), int64_t(y.size()));
}

void windowRowRoundTrip(float* row) {
  std::vector<uint8_t> page(size_t(kvPageBytes(1)), 0);
  encodeKvRow(row, page.data(), 1, 0);
  decodeKvRow(page.data(), 1, 0, row);
}

void CpuForwardPass::attention(int layer, const std::vector<float>& u, std::vector<float>& y) {
  const LayerRole& role = cfg.role(layer);
  const CpuAttentionWeights& aw = w.layers[size_t(layer)].attn;
  const RopeTable& rope = m.rope_[size_t(layer)];
  const int64_t H = cfg.numAttentionHeads, D = cfg.headDim;
  const int64_t R = cfg.qkRopeHeadDim, qL = cfg.qLoraRank;
  const int64_t W = cfg.slidingWindow, ring = st.ringRows_;

  // qr = rmsnorm(wq_a u); q = rope(wq_b qr), rounded once per vector.
  std::vector<float> qr(size_t(T * qL));
  gemm(ex, u.data(), T, aw.wqA, qr.data());
  for (int64_t t = 0; t < T; ++t)
    rmsNorm(ex, &qr[size_t(t * qL)], qL, aw.qNorm.data(), cfg.rmsNormEps, &qr[size_t(t * qL)]);
  std::vector<float> q(size_t(T * H * D));
  gemm(ex, qr.data(), T, aw.wqB, q.data());
  parallelFor(T * H, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float* v = &q[size_t(i * D)];
      rope.rotate(v + D - R, pos0 + i / H, false);
      roundBf16InPlace(v, D);
    }
  });

  // kv = rope(rmsnorm(wkv u)): key and value of this token.
  std::vector<float> kv(size_t(T * D));
  gemm(ex, u.data(), T, aw.wkv, kv.data());
  for (int64_t t = 0; t < T; ++t) {
    float* v = &kv[size_t(t * D)];
    rmsNorm(ex, v, D, aw.kvNorm.data(), cfg.rmsNormEps, v);
    rope.rotate(v + D - R, pos0 + t, false);
    roundBf16InPlace(v, D);
  }

  // Window rows as the cache holds them: older positions decoded from the ring, this call's
  // written (quantized) and read back one after another, so a ring shorter than the chunk
  // never loses a row a token still needs. The ring has `ringRows` >= W slots (more for
  // speculative requests, whose rollback must find the rows a rejected draft overwrote).
  PagedKvCache& cache = st.windows_[size_t(layer)];
  const int64_t first = std::max<int64_t>(0, pos0 - W + 1);
  std::vector<float> view(size_t((pos0 + T - first) * D));
  for (int64_t p = first; p < pos0; ++p) cache.read(p % ring, &view[size_t((p - first) * D)]);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t p = pos0 + t;
    cache.write(p % ring, &kv[size_t(t * D)]);
    cache.read(p % ring, &view[size_t((p - first) * D)]);
    if (p - W + 1 > 0) ++st.counters_.windowSlides;
  }

  if (role.isKvSource) compress(layer, u);
  if (role.isIndexSource) index(layer, u, qr);

  const std::vector<std::vector<int32_t>>* sel =
      role.ratio > 0 ? &selections[size_t(role.indexSourceLayer)] : nullptr;
  const CompressedKvCache* comp =
      role.ratio > 0 ? &st.sources_[size_t(role.kvSourceLayer)].compressed : nullptr;
  const float scale = float(1.0 / std::sqrt(double(D)));
  std::vector<float> o(size_t(T * H * D));
  parallelFor(T * H, [&](int64_t b, int64_t e) {
    std::vector<const float*> rows;
    for (int64_t i = b; i < e; ++i) {
      const int64_t t = i / H, h = i % H, pos = pos0 + t;
      rows.clear();
      for (int64_t p = std::max<int64_t>(0, pos - W + 1); p <= pos; ++p)
        rows.push_back(&view[size_t((p - first) * D)]);
      if (sel)
        for (int32_t j : (*sel)[size_t(t)]) rows.push_back(comp->row(j));
      float* out = &o[size_t(i * D)];
      attendHead(ex, &q[size_t(i * D)], rows, aw.attnSink[size_t(h)], scale, out);
      rope.rotate(out + D - R, pos, true);  // un-rotate the RoPE dims of the output
      roundBf16InPlace(out + D - R, R);
    }
  });
  attentionOutput(ex, cfg, aw, o, T, y);
}

}  // namespace deepinfer
