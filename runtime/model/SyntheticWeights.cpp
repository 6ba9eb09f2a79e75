// Synthetic weight values; the shaping is described in SyntheticWeights.h.
#include "SyntheticWeights.h"

#include <fmt/format.h>

#include <cmath>
#include <numeric>

#include "DetRandom.h"
#include "deepinfer/Tensor.h"

namespace deepinfer {
namespace {

// Splits "layers.12.attn.wq_a.weight" into 12 and "attn.wq_a.weight", and a DSpark stage's
// "mtp.1.attn.wq_a.weight" into numHiddenLayers + 1 (the stage's layer index) and the rest; -1
// for global tensors.
int splitLayerName(const std::string& name, int numHiddenLayers, std::string* rest) {
  for (const auto& [prefix, base] : {std::pair<std::string, int>{"layers.", 0}, {"mtp.", numHiddenLayers}}) {
    if (name.rfind(prefix, 0) != 0) continue;
    const size_t dot = name.find('.', prefix.size());
    *rest = name.substr(dot + 1);
    return base + std::stoi(name.substr(prefix.size(), dot - prefix.size()));
  }
  *rest = name;
  return -1;
}

bool startsWith(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }
bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The value a bf16 checkpoint actually holds (directions are computed from stored weights).
float roundBf16(float x) { return bf16ToFloat(floatToBf16(x)); }

std::vector<float> unitDirection(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> d(a.size());
  double n2 = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d[i] = a[i] * b[i];
    n2 += double(d[i]) * d[i];
  }
  const float inv = float(1.0 / std::sqrt(n2));
  for (float& x : d) x *= inv;
  return d;
}

std::vector<int> permutation(int n, DetRandom& rng) {
  std::vector<int> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  for (int i = n - 1; i > 0; --i) std::swap(p[size_t(i)], p[rng.below(uint64_t(i) + 1)]);
  return p;
}

std::vector<float> randomSigns(size_t n, DetRandom& rng) {
  std::vector<float> s(n);
  for (float& x : s) x = (rng.next() >> 63) ? -1.f : 1.f;
  return s;
}

// Router levels of a token's chosen experts: 1.0 for the first down to 0.6 for the k-th.
float routeLevel(int i, int k) { return k > 1 ? 1.0f - 0.4f * float(i) / float(k - 1) : 1.0f; }

}  // namespace

Result<SyntheticWeights> SyntheticWeights::create(const ModelConfig& cfg, uint64_t seed, WeightShaping shaping) {
  if (cfg.hiddenSize < int64_t(cfg.nRoutedExperts) + 3)
    return Error{fmt::format("make-model: hidden_size {} leaves no room for the anchor, {} routing and one "
                             "importance dimension of the weight shaping (needs at least n_routed_experts + 3)",
                             cfg.hiddenSize, cfg.nRoutedExperts)};
  if (cfg.dsparkConfigured() && cfg.draftRoutedExperts() > cfg.nRoutedExperts)
    return Error{fmt::format("make-model: the draft MoE's {} experts exceed the backbone's {}: the routing shaping "
                             "has one residual dimension per backbone expert",
                             cfg.draftRoutedExperts(), cfg.nRoutedExperts)};
  if (cfg.headDim < 2 * kBlock || cfg.indexHeadDim - cfg.qkRopeHeadDim < 2 * kKeyHalf)
    return Error{fmt::format("make-model: head_dim {} / index NoPE dims {} are too small for the index shaping",
                             cfg.headDim, cfg.indexHeadDim - cfg.qkRopeHeadDim)};
  SyntheticWeights w(cfg, seed, shaping);
  w.buildLayerShapes();
  return w;
}

SyntheticWeights::SyntheticWeights(const ModelConfig& cfg, uint64_t seed, WeightShaping sh)
    : cfg_(cfg), seed_(seed), sh_(sh) {}

float SyntheticWeights::anchorInNormedInput() const {
  // Expected mean square of an embedding row: anchor, a token's k routing levels, the other
  // routing dims near 0, a typical importance level, unit variance elsewhere. Later layers add
  // to the unprotected dims; the factor 1.2 accounts for that growth on average.
  const int k = cfg_.numExpertsPerTok, e = cfg_.nRoutedExperts;
  double sq = double(sh_.anchor) * sh_.anchor + double(sh_.levelAmp) * sh_.levelAmp;
  for (int i = 0; i < k; ++i) sq += std::pow(double(sh_.routeAmp) * routeLevel(i, k), 2);
  sq += double(e - k) * std::pow(0.05 * sh_.routeAmp, 2);
  sq += double(cfg_.hiddenSize - 2 - e);
  const double rms = std::sqrt(sq / double(cfg_.hiddenSize)) * 1.2;
  return float(sh_.anchor / rms);
}

// The random part of compressor.wkv row `row` before the S_A / S_L projection is removed.
void SyntheticWeights::compressorRandomRow(int layer, int64_t row, float* out) const {
  DetRandom rng(seed_, layerTensorName(layer, "attn.compressor.wkv.weight"), uint64_t(row));
  const float sd = 1.f / std::sqrt(float(cfg_.hiddenSize));
  for (int64_t c = 0; c < cfg_.hiddenSize; ++c) out[c] = sd * rng.normal();
}

void SyntheticWeights::buildLayerShapes() {
  const int64_t C = cfg_.hiddenSize;
  // Draft stages (window-only layers after the backbone's) are shaped like backbone layers.
  layers_.resize(size_t(cfg_.numLayersTotal()));
  for (int l = 0; l < cfg_.numLayersTotal(); ++l) {
    LayerShape& s = layers_[size_t(l)];
    DetRandom rng(seed_, "layer-shape", uint64_t(l));
    auto draw = [&](size_t n, float mean, float sd) {
      std::vector<float> v(n);
      for (float& x : v) x = roundBf16(mean + sd * rng.normal());
      return v;
    };
    s.qrA = draw(size_t(cfg_.qLoraRank), 0.f, 1.f);
    s.qNorm = draw(size_t(cfg_.qLoraRank), 1.f, 0.05f);
    s.qDir = unitDirection(s.qrA, s.qNorm);
    s.latSign = randomSigns(2 * kBlock, rng);
    s.keySign = randomSigns(2 * kKeyHalf, rng);
    s.headGain.resize(size_t(cfg_.indexNHeads));
    for (float& g : s.headGain) g = 0.7f + 0.6f * rng.uniform();
    s.perm = permutation(cfg_.nRoutedExperts, rng);
    s.inversePerm.assign(s.perm.size(), 0);
    for (size_t e = 0; e < s.perm.size(); ++e) s.inversePerm[size_t(s.perm[e])] = int(e);
    if (cfg_.role(l).isKvSource) {
      // projA[c] = (unit S_A direction) . (random column c): removed from the rows so the random
      // part of the compressor cannot leak into the two shaped latent directions.
      s.projA.assign(size_t(C), 0.f);
      s.projL.assign(size_t(C), 0.f);
      std::vector<float> row(static_cast<size_t>(C));
      const float unit = 1.f / std::sqrt(float(kBlock));
      for (int r = 0; r < 2 * kBlock; ++r) {
        compressorRandomRow(l, r, row.data());
        std::vector<float>& p = r < kBlock ? s.projA : s.projL;
        const float d = s.latSign[size_t(r)] * unit;
        for (int64_t c = 0; c < C; ++c) p[size_t(c)] += d * row[size_t(c)];
      }
    }
  }
}

std::vector<int> SyntheticWeights::tokenRoutingDims(int64_t token) const {
  DetRandom rng(seed_, "routing", uint64_t(token));
  std::vector<int> dims = permutation(cfg_.nRoutedExperts, rng);
  dims.resize(size_t(cfg_.numExpertsPerTok));
  return dims;
}

int SyntheticWeights::expertOfRoutingDim(int layer, int routingDim) const {
  return layers_.at(size_t(layer)).inversePerm.at(size_t(routingDim));
}

int SyntheticWeights::tokenLevel(int64_t token) const {
  DetRandom rng(seed_, "importance", uint64_t(token));
  const uint64_t r = rng.below(8);  // 4/8 level 1, 3/8 level 2, 1/8 level 3
  return r < 4 ? 1 : r < 7 ? 2 : 3;
}

std::vector<int32_t> SyntheticWeights::tokenMap() const {
  const int64_t V = cfg_.vocabSize, Vc = cfg_.engramCompressedVocabSize;
  std::vector<int32_t> map(static_cast<size_t>(V));
  DetRandom rng(seed_, "token-map", 0);
  std::vector<int> perm = permutation(int(Vc), rng);
  for (int64_t v = 0; v < V; ++v) map[size_t(v)] = v < Vc ? perm[size_t(v)] : int32_t(rng.below(uint64_t(Vc)));
  return map;
}

void SyntheticWeights::fillEmbedRow(int64_t token, float* out) const {
  const int64_t C = cfg_.hiddenSize;
  const int E = cfg_.nRoutedExperts, K = cfg_.numExpertsPerTok;
  DetRandom rng(seed_, "embed.weight", uint64_t(token));
  for (int64_t d = 0; d < C; ++d) out[d] = rng.normal();
  out[0] = sh_.anchor;
  for (int e = 0; e < E; ++e) out[1 + e] *= 0.05f * sh_.routeAmp;
  const std::vector<int> dims = tokenRoutingDims(token);
  for (int i = 0; i < K; ++i) out[1 + dims[size_t(i)]] = sh_.routeAmp * routeLevel(i, K);
  out[levelDim()] = sh_.levelAmp * float(tokenLevel(token));
}

void SyntheticWeights::fillRows(const ModelTensorSpec& spec, int64_t r0, int64_t r1, float* out) const {
  const int64_t cols = spec.shape.size() == 2 ? spec.shape[1] : spec.shape[0];
  std::string rest;
  const int layer = splitLayerName(spec.name, cfg_.numHiddenLayers, &rest);
  for (int64_t r = r0; r < r1; ++r) {
    float* row = out + (r - r0) * cols;
    if (layer >= 0) {
      fillLayerRow(layer, rest, spec, r, row);
    } else if (rest == "embed.weight") {
      fillEmbedRow(r, row);
    } else {
      DetRandom rng(seed_, spec.name, uint64_t(r));
      const bool head = rest == "head.weight";
      const float sd = head ? 2.f / std::sqrt(float(cfg_.hiddenSize)) : 0.05f;
      for (int64_t c = 0; c < cols; ++c) row[c] = (head ? 0.f : 1.f) + sd * rng.normal();
    }
  }
}

void SyntheticWeights::fillLayerRow(int layer, const std::string& rest, const ModelTensorSpec& spec, int64_t row,
                                    float* out) const {
  const int64_t cols = spec.shape.size() == 2 ? spec.shape[1] : spec.shape[0];
  const int64_t C = cfg_.hiddenSize, lvl = levelDim();
  const LayerShape& ls = layers_[size_t(layer)];
  const LayerRole& role = cfg_.role(layer);
  DetRandom rng(seed_, spec.name, uint64_t(row));
  auto gaussian = [&](float mean, float sd) {
    for (int64_t c = 0; c < cols; ++c) out[c] = mean + sd * rng.normal();
  };
  auto zero = [&] { std::fill(out, out + cols, 0.f); };
  const float fanIn = 1.f / std::sqrt(float(cols));
  const float u0 = anchorInNormedInput();
  const float unit = 1.f / std::sqrt(float(kBlock));

  if (endsWith(rest, "norm.weight")) {
    if (rest == "attn.q_norm.weight") {
      std::copy(ls.qNorm.begin(), ls.qNorm.end(), out);
    } else if (rest == "attn.indexer.k_norm.weight") {
      std::fill(out, out + cols, 1.f);  // exact: keeps the key levels on their e4m3 codes
    } else {
      gaussian(1.f, 0.05f);
      if (rest == "attn_norm.weight" || rest == "ffn_norm.weight")
        for (int64_t d = 0; d <= lvl; ++d) out[d] = 1.f;  // protected dims pass unscaled
      if (rest == "attn.compressor.norm.weight")
        for (int c = 0; c < 2 * kBlock; ++c) out[c] = 1.f;  // the shaped latent blocks
    }
    return;
  }
  if (startsWith(rest, "hc_")) {
    if (endsWith(rest, "_fn")) {
      gaussian(0.f, 0.5f * fanIn);  // mixes ~ N(0, 0.25) after the RMS factor
    } else if (endsWith(rest, "_scale")) {
      gaussian(1.f, 0.1f);
    } else {  // base: pre(4) | post(4) | comb(4x4); comb favours the identity mix
      gaussian(0.f, 0.1f);
      const int n = cfg_.hcMult;
      for (int m = 0; m < n; ++m) out[2 * n + m * n + m] += 1.5f;
    }
    return;
  }
  if (rest == "attn.attn_sink") return gaussian(-1.f, 0.5f);
  if (rest == "ffn.gate.bias") return gaussian(0.f, 0.05f);
  if (rest == "ffn.gate.weight") {
    gaussian(0.f, 0.3f * fanIn);
    out[1 + ls.perm[size_t(row)]] = sh_.routeGain;
    return;
  }
  if (rest == "attn.wq_a.weight") {
    gaussian(0.f, fanIn);
    out[0] = ls.qrA[size_t(row)] / u0;
    return;
  }
  if (rest == "attn.compressor.wkv.weight") {
    compressorRandomRow(layer, row, out);
    if (row < 2 * kBlock) {
      const bool isA = row < kBlock;
      const float sign = ls.latSign[size_t(row)];
      const std::vector<float>& proj = isA ? ls.projA : ls.projL;
      for (int64_t c = 0; c < C; ++c) out[c] -= sign * unit * proj[size_t(c)];
      // Anchor block: +-1 per unit of the normed anchor; level block: +-1 per level (a level-1
      // token's two blocks have equal weight).
      if (isA) out[0] += sign / u0;
      else out[lvl] += sign * sh_.anchor / (u0 * sh_.levelAmp);
    }
    return;
  }
  if (rest == "attn.compressor.wgate.weight") {
    if (row < 2 * kBlock) {  // one gate for both shaped blocks: the pair's higher level wins
      zero();
      out[lvl] = sh_.pairGateGain;
    } else {
      gaussian(0.f, fanIn);
    }
    return;
  }
  if (rest == "attn.indexer.weights_proj.weight") {
    gaussian(0.f, 0.2f * fanIn);
    out[0] = 1.f / u0;
    return;
  }
  if (rest == "attn.indexer.wk.weight") {
    // Key dims 0..31 read the anchor block, 32..63 the level block (x indexLevelRatio); RoPE
    // dims stay zero.
    zero();
    if (row < 2 * kKeyHalf) {
      const bool isA = row < kKeyHalf;
      const float g = ls.keySign[size_t(row)] * (isA ? 1.f : sh_.indexLevelRatio);
      for (int c = 0; c < kBlock; ++c) {
        const int ch = isA ? c : kBlock + c;
        out[ch] = g * ls.latSign[size_t(ch)] * unit;
      }
    }
    return;
  }
  if (rest == "attn.indexer.wq_b.weight") {
    const LayerShape& keys = layers_[size_t(role.indexKeyLayer)];
    const int64_t h = row / cfg_.indexHeadDim, i = row % cfg_.indexHeadDim;
    gaussian(0.f, sh_.indexQueryNoise * fanIn);
    if (i < 2 * kKeyHalf) {
      const float target = ls.headGain[size_t(h)] * keys.keySign[size_t(i)] *
                           (i < kKeyHalf ? 1.f : sh_.indexQueryLevelWeight);
      // The normed q latent's projection on qDir is ~sqrt(q_lora / 2).
      const float g = target / std::sqrt(float(cols) / 2.f);
      for (int64_t c = 0; c < cols; ++c) out[c] += g * ls.qDir[size_t(c)];
    }
    return;
  }
  // Projections back into the residual: smaller, and exactly zero on the protected dims.
  const bool toResidual = rest == "attn.wo_b.weight" || endsWith(rest, ".w2.weight");
  if (toResidual) {
    if (isProtectedDim(row)) return zero();
    return gaussian(0.f, (rest == "attn.wo_b.weight" ? 1.f : 0.5f) * fanIn);
  }
  if (rest == "engram.embed.weight") return gaussian(0.f, 1.f);
  // DSpark's Markov factors: embed rows of unit scale, so the transition bias head . e has about
  // unit spread, comparable to the head's logits; the other draft extras (main_proj, the
  // confidence head) are plain projections and the norms fall under the norm rule above.
  if (rest == "markov_head.embed.weight") return gaussian(0.f, 1.f);
  if (rest == "engram.wkv.weight") {
    const int64_t valueRow = row - 4 * C;  // rows [4C, 5C) are the value
    if (valueRow >= 0 && isProtectedDim(valueRow)) return zero();
    return gaussian(0.f, (valueRow >= 0 ? 0.5f : 1.f) * fanIn);
  }
  if (rest == "engram.q_weight" || rest == "engram.k_weight") return gaussian(1.f, 0.1f);
  // Remaining projections (wq_b, wkv, wo_a, w1/w3): plain 1/sqrt(fan-in).
  gaussian(0.f, fanIn);
}

}  // namespace deepinfer
