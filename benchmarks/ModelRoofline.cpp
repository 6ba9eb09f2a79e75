#include "ModelRoofline.h"

#include <algorithm>
#include <cmath>

#include "deepinfer/OpShapes.h"

namespace deepinfer::bench {
namespace {

// The checkpoint format of a tensor (docs/model.md §3).
enum class Fmt { Bf16, F32, Fp8, Fp4 };

// Bytes of a [rows, cols] tensor stored as `f` (WeightStorage::Checkpoint) or as the runtime
// holds it (WeightStorage::Bf16: quantized matrices become bf16, fp32 vectors stay fp32).
double tensorBytes(double rows, double cols, Fmt f, WeightStorage s) {
  const double n = rows * cols;
  if (s == WeightStorage::Bf16 && (f == Fmt::Fp8 || f == Fmt::Fp4)) return 2 * n;
  switch (f) {
    case Fmt::Bf16: return 2 * n;
    case Fmt::F32: return 4 * n;
    // e4m3 data + one UE8M0 byte per 32x32 block.
    case Fmt::Fp8: return n + std::ceil(rows / 32) * std::ceil(cols / 32);
    // two e2m1 codes per byte + one UE8M0 byte per 32 input columns.
    case Fmt::Fp4: return n / 2 + rows * std::ceil(cols / 32);
  }
  return 0;
}

// Operands of one SwiGLU expert: w1, w3 [I, C] and w2 [C, I].
double expertParams(const ModelConfig& c) { return 3.0 * double(c.moeIntermediateSize) * double(c.hiddenSize); }

double expertBytes(const ModelConfig& c, Fmt f, WeightStorage s) {
  const double I = double(c.moeIntermediateSize), C = double(c.hiddenSize);
  return 2 * tensorBytes(I, C, f, s) + tensorBytes(C, I, f, s);
}

// hc_*_fn is [(2 + hc) * hc, hc * C]: pre (hc) + post (hc) + comb (hc * hc) mixes from the
// flattened streams (24 x 4C in V4.1).
double mhcMixes(const ModelConfig& c) { return double((2 + c.hcMult) * c.hcMult); }

// Engram lookups per token: (max n-gram - 1) sizes x heads (24 in V4.1), each headDim wide.
double engramInputs(const ModelConfig& c) {
  return double(std::max(0, c.engramMaxNgramSize - 1)) * c.engramNHeads * c.engramHeadDim;
}

// Compressed entries visible to the token at `pos` for a kv source of `ratio` (docs/model.md §6).
int64_t visibleEntries(int64_t pos, int ratio) { return ratio > 0 ? (pos + 1) / ratio : 0; }

// Index keys an index source scores for the token at `pos`.
int64_t scoredKeys(const ModelConfig& c, const LayerRole& r, int64_t pos) {
  if (!r.isIndexSource || r.indexKeyLayer < 0) return 0;
  int64_t n = visibleEntries(pos, c.role(r.indexKeyLayer).ratio);
  if (r.candidateRestricted) n = std::min<int64_t>(n, int64_t(c.candidateTopkBlocks) * c.candidateBlockSize);
  return n;
}

// Keys the sparse attention of layer `r` reads for the token at `pos`: the window plus the
// selected compressed rows.
int64_t attentionKeys(const ModelConfig& c, const LayerRole& r, int64_t pos) {
  int64_t keys = std::min<int64_t>(pos + 1, c.slidingWindow);
  if (r.ratio > 0 && r.kvSourceLayer >= 0)
    keys += std::min<int64_t>(c.indexTopk, visibleEntries(pos, c.role(r.kvSourceLayer).ratio));
  return keys;
}

}  // namespace

TokenWeightBytes tokenWeightBytes(const ModelConfig& c, WeightStorage s, double routedExperts) {
  TokenWeightBytes b;
  const double C = double(c.hiddenSize), H = c.numAttentionHeads, D = c.headDim;
  const double qL = double(c.qLoraRank), oL = double(c.oLoraRank), G = c.oGroups;
  const double Hi = c.indexNHeads, Di = c.indexHeadDim, E = c.nRoutedExperts, V = double(c.vocabSize);
  for (int L = 0; L < c.numHiddenLayers; ++L) {
    const LayerRole& r = c.role(L);
    b.attention += tensorBytes(qL, C, Fmt::Fp8, s) + tensorBytes(1, qL, Fmt::Bf16, s)  // wq_a, q_norm
                   + tensorBytes(H * D, qL, Fmt::Fp8, s)                                // wq_b
                   + tensorBytes(D, C, Fmt::Fp8, s) + tensorBytes(1, D, Fmt::Bf16, s)   // wkv, kv_norm
                   + tensorBytes(G * oL, H / G * D, Fmt::Fp8, s)                        // wo_a (G groups)
                   + tensorBytes(C, G * oL, Fmt::Fp8, s)                                // wo_b
                   + tensorBytes(1, H, Fmt::F32, s);                                    // attn_sink
    if (r.isKvSource) {
      b.compressor += tensorBytes(D, C, Fmt::Bf16, s) + tensorBytes(1, D, Fmt::Bf16, s);  // wkv, norm
      if (r.ratio == 2) b.compressor += tensorBytes(D, C, Fmt::Bf16, s);                   // wgate
      b.compressor += tensorBytes(Di, D, Fmt::Bf16, s) + tensorBytes(1, Di, Fmt::Bf16, s); // indexer wk, k_norm
    }
    if (r.isIndexSource)
      b.indexer += tensorBytes(Hi * Di, qL, Fmt::Fp8, s) + tensorBytes(Hi, C, Fmt::Bf16, s);  // wq_b, weights_proj
    // Two sublayers: fn [mixes, hc*C], base [mixes], scale [3] (fp32); attn_norm and ffn_norm.
    b.mhc += 2 * (tensorBytes(mhcMixes(c), c.hcMult * C, Fmt::F32, s) + tensorBytes(1, mhcMixes(c), Fmt::F32, s) +
                  tensorBytes(1, 3, Fmt::F32, s) + tensorBytes(1, C, Fmt::Bf16, s));
    b.router += tensorBytes(E, C, Fmt::Bf16, s) + tensorBytes(1, E, Fmt::F32, s);
    b.shared += c.nSharedExperts * expertBytes(c, Fmt::Fp8, s);
    b.routed += routedExperts * expertBytes(c, Fmt::Fp4, s);
    if (r.isEngram)  // wkv [(hc + 1) * C, lookups * headDim]: hc keys and one value; q/k weights [hc, C]
      b.engram += tensorBytes((c.hcMult + 1) * C, engramInputs(c), Fmt::Fp8, s) +
                  2 * tensorBytes(c.hcMult, C, Fmt::Bf16, s);
  }
  b.head = tensorBytes(V, C, Fmt::Bf16, s) + tensorBytes(1, C, Fmt::Bf16, s);
  b.embedRow = tensorBytes(1, C, Fmt::Bf16, s);
  return b;
}

double expectedDistinctExperts(int E, int k, int streams) {
  if (E <= 0 || k <= 0 || streams <= 0) return 0;
  return double(E) * (1.0 - std::pow(1.0 - double(k) / double(E), double(streams)));
}

double tokenMatmulParams(const ModelConfig& c, bool withHead) {
  const double C = double(c.hiddenSize), H = c.numAttentionHeads, D = c.headDim;
  const double qL = double(c.qLoraRank), oL = double(c.oLoraRank), G = c.oGroups;
  const double Hi = c.indexNHeads, Di = c.indexHeadDim;
  double p = 0;
  for (int L = 0; L < c.numHiddenLayers; ++L) {
    const LayerRole& r = c.role(L);
    p += qL * C + H * D * qL + D * C + G * oL * (H / G * D) + C * G * oL;
    if (r.isKvSource) {
      p += D * C * (r.ratio == 2 ? 2 : 1);  // compressor wkv (+ wgate) on every token
      p += Di * D / std::max(1, r.ratio);   // index key of each compressed entry
    }
    if (r.isIndexSource) p += Hi * Di * qL + Hi * C;
    p += 2 * mhcMixes(c) * c.hcMult * C;    // the two sublayers' mixes
    p += double(c.nRoutedExperts) * C;      // router
    p += (c.nSharedExperts + c.numExpertsPerTok) * expertParams(c);
    if (r.isEngram) p += (c.hcMult + 1) * C * engramInputs(c);
  }
  if (withHead) p += double(c.vocabSize) * C;
  return p;
}

DecodeKvBytes decodeKvBytes(const ModelConfig& c, int64_t position) {
  DecodeKvBytes b;
  const double indexKeyBytes = double(c.indexHeadDim) + 4;  // e4m3 key + fp32 scale (docs/model.md §9)
  for (int L = 0; L < c.numHiddenLayers; ++L) {
    const LayerRole& r = c.role(L);
    b.window += kMlaRowBytes * double(std::min<int64_t>(position + 1, c.slidingWindow));
    if (r.ratio > 0 && r.kvSourceLayer >= 0)
      b.compressed +=
          kMlaRowBytes * double(std::min<int64_t>(c.indexTopk, visibleEntries(position, c.role(r.kvSourceLayer).ratio)));
    b.indexKeys += indexKeyBytes * double(scoredKeys(c, r, position));
  }
  return b;
}

PrefillFlops prefillFlops(const ModelConfig& c, int64_t ctx) {
  PrefillFlops f;
  const double C = double(c.hiddenSize);
  f.linear = 2 * tokenMatmulParams(c, false) * double(ctx);
  f.head = ctx > 0 ? 2 * double(c.vocabSize) * C : 0;
  const double perKey = 2.0 * 2.0 * c.numAttentionHeads * c.headDim;
  const double perScored = 2.0 * c.indexNHeads * c.indexHeadDim + 2.0 * c.indexNHeads;
  for (int L = 0; L < c.numHiddenLayers; ++L) {
    const LayerRole& r = c.role(L);
    double keys = 0, scored = 0;
    for (int64_t pos = 0; pos < ctx; ++pos) {
      keys += double(attentionKeys(c, r, pos));
      scored += double(scoredKeys(c, r, pos));
    }
    f.attention += perKey * keys;
    f.indexer += perScored * scored;
  }
  return f;
}

double kvCacheBytesPerToken(const ModelConfig& c, int64_t pageTokens) {
  const double indexKeyBytes = double(c.indexHeadDim) + 4;
  double perToken = 0;
  for (int L = 0; L < c.numHiddenLayers; ++L) {
    const LayerRole& r = c.role(L);
    if (!r.isKvSource || r.ratio <= 0) continue;
    const double rows = pageTokens > 0 ? double(mlaPageBytes(pageTokens)) / double(pageTokens) : kMlaRowBytes;
    perToken += (rows + indexKeyBytes) / r.ratio;
  }
  return perToken;
}

double minWindowBytesPerRequest(const ModelConfig& c) {
  return double(c.numHiddenLayers) * c.slidingWindow * kMlaRowBytes;
}

}  // namespace deepinfer::bench
