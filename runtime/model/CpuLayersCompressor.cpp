// The compressor of kv source layers (docs/model.md §6): one latent per `ratio` tokens, stored
// RoPE'd at position j * ratio in the compressed KV cache, and its index key in the index-key
// cache. Ratio 2 pools token pairs with a per-channel softmax of the gate; the first token of
// an incomplete pair is carried in the request state until its partner arrives.
#include <algorithm>
#include <cmath>

#include "CpuForwardLayers.h"

namespace deepinfer {

void CpuForwardPass::compress(int layer, const std::vector<float>& u) {
  const LayerRole& role = cfg.role(layer);
  const CpuAttentionWeights& aw = w.layers[size_t(layer)].attn;
  const RopeTable& rope = m.rope_[size_t(layer)];
  CpuKvSourceState& src = st.sources_[size_t(layer)];
  const int64_t D = cfg.headDim, R = cfg.qkRopeHeadDim, Di = cfg.indexHeadDim;
  const int ratio = role.ratio;

  std::vector<float> kv(size_t(T * D)), gate;
  gemm(ex, u.data(), T, aw.compWkv, kv.data());
  if (ratio == 2) {
    gate.resize(size_t(T * D));
    gemm(ex, u.data(), T, aw.compWgate, gate.data());
  }

  // Entries completed by this call, in order: latent_j = rmsnorm(pooled, compressor.norm).
  std::vector<float> latents;
  std::vector<int64_t> entryIds;
  std::vector<float> pooled(static_cast<size_t>(D));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = pos0 + t;
    const float* kvT = &kv[size_t(t * D)];
    if (ratio == 1) {
      std::copy_n(kvT, D, pooled.data());
    } else {
      const float* gT = &gate[size_t(t * D)];
      if (pos % 2 == 0) {
        src.tailKv.assign(kvT, kvT + D);
        src.tailGate.assign(gT, gT + D);
        src.tailPos = pos;
        src.hasTail = true;
        if (st.speculative_) src.callTails.push_back({true, pos, src.tailKv, src.tailGate});
        continue;
      }
      // pos is odd: its partner pos - 1 is the tail (written earlier in this call or carried).
      if (src.tailPos < pos0) ++st.counters_.oddTailsCarried;
      for (int64_t c = 0; c < D; ++c) {
        const float s0 = src.tailGate[size_t(c)], s1 = gT[c];
        const float mx = std::max(s0, s1);
        const float e0 = std::exp(s0 - mx), e1 = std::exp(s1 - mx);
        const float sum = e0 + e1;
        pooled[size_t(c)] = roundBf16(e0 / sum * src.tailKv[size_t(c)] + e1 / sum * kvT[c]);
      }
      src.hasTail = false;
    }
    const size_t at = latents.size();
    latents.resize(at + size_t(D));
    rmsNorm(ex, pooled.data(), D, aw.compNorm.data(), cfg.rmsNormEps, &latents[at]);
    entryIds.push_back(pos / ratio);
  }
  const int64_t n = int64_t(entryIds.size());
  if (n == 0) return;

  // Index keys: rope(rmsnorm(indexer.wk latent_j, k_norm), j * ratio).
  std::vector<float> keys(size_t(n * Di));
  gemm(ex, latents.data(), n, aw.idxWk, keys.data());
  std::vector<float> row(static_cast<size_t>(D));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = entryIds[size_t(i)];
    float* k = &keys[size_t(i * Di)];
    rmsNorm(ex, k, Di, aw.idxKNorm.data(), cfg.rmsNormEps, k);
    rope.rotate(k + Di - R, j * ratio, false);
    roundBf16InPlace(k, Di);
    std::copy_n(&latents[size_t(i * D)], D, row.data());
    rope.rotate(row.data() + D - R, j * ratio, false);
    roundBf16InPlace(row.data(), D);
    src.compressed.append(row.data());
    src.indexKeys.append(k);
    ++st.counters_.compressedEntries;
  }
}

}  // namespace deepinfer
