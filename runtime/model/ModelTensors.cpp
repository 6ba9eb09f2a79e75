// Tensor list of spec/model.md §3, derived from the config's sizes and layer roles.
#include "ModelTensors.h"

#include <fmt/format.h>

namespace deepinfer {

std::vector<int64_t> ModelTensorSpec::storedShape() const {
  if (format == WeightFormat::Fp4) return {shape[0], shape[1] / 2};
  return shape;
}

std::vector<int64_t> ModelTensorSpec::scaleShape() const {
  switch (format) {
    case WeightFormat::Plain: return {};
    case WeightFormat::Fp8Block: return {(shape[0] + 31) / 32, (shape[1] + 31) / 32};
    case WeightFormat::Fp8Row:
    case WeightFormat::Fp4: return {shape[0], (shape[1] + 31) / 32};
  }
  return {};
}

std::string layerTensorName(int layer, const std::string& rest) { return fmt::format("layers.{}.{}", layer, rest); }

int64_t engramConcatWidth(const ModelConfig& cfg) {
  return int64_t(cfg.engramMaxNgramSize - 1) * cfg.engramNHeads * cfg.engramHeadDim;
}

std::vector<ModelTensorSpec> modelTensorSpecs(const ModelConfig& cfg) {
  const int64_t C = cfg.hiddenSize, V = cfg.vocabSize, H = cfg.numAttentionHeads, D = cfg.headDim;
  const int64_t Q = cfg.qLoraRank, G = cfg.oGroups, O = cfg.oLoraRank, I = cfg.moeIntermediateSize;
  const int64_t Hi = cfg.indexNHeads, Di = cfg.indexHeadDim, E = cfg.nRoutedExperts;
  const int64_t mixes = int64_t(2 + cfg.hcMult) * cfg.hcMult;  // pre | post | comb = 24
  std::vector<ModelTensorSpec> out;
  auto bf16 = [&](std::string n, std::vector<int64_t> s) { out.push_back({std::move(n), "BF16", std::move(s)}); };
  auto f32 = [&](std::string n, std::vector<int64_t> s) { out.push_back({std::move(n), "F32", std::move(s)}); };
  auto fp8 = [&](std::string n, std::vector<int64_t> s) {
    out.push_back({std::move(n), "F8_E4M3", std::move(s), WeightFormat::Fp8Block});
  };
  auto fp4 = [&](std::string n, std::vector<int64_t> s) {
    out.push_back({std::move(n), "I8", std::move(s), WeightFormat::Fp4});
  };

  bf16("embed.weight", {V, C});
  for (int l = 0; l < cfg.numHiddenLayers; ++l) {
    const LayerRole& r = cfg.role(l);
    auto n = [&](const std::string& rest) { return layerTensorName(l, rest); };
    if (r.isEngram) {
      out.push_back({n("engram.embed.weight"), "F8_E4M3",
                     {cfg.engramNumEmbeddings[size_t(r.engramIndex)], cfg.engramHeadDim}, WeightFormat::Fp8Row});
      fp8(n("engram.wkv.weight"), {5 * C, engramConcatWidth(cfg)});  // 4 keys + 1 value
      bf16(n("engram.q_weight"), {cfg.hcMult, C});
      bf16(n("engram.k_weight"), {cfg.hcMult, C});
    }
    bf16(n("attn_norm.weight"), {C});
    bf16(n("ffn_norm.weight"), {C});
    for (const char* sub : {"attn", "ffn"}) {
      f32(n(fmt::format("hc_{}_fn", sub)), {mixes, cfg.hcMult * C});
      f32(n(fmt::format("hc_{}_base", sub)), {mixes});
      f32(n(fmt::format("hc_{}_scale", sub)), {3});
    }
    fp8(n("attn.wq_a.weight"), {Q, C});
    bf16(n("attn.q_norm.weight"), {Q});
    fp8(n("attn.wq_b.weight"), {H * D, Q});
    fp8(n("attn.wkv.weight"), {D, C});
    bf16(n("attn.kv_norm.weight"), {D});
    fp8(n("attn.wo_a.weight"), {G * O, (H / G) * D});
    fp8(n("attn.wo_b.weight"), {C, G * O});
    f32(n("attn.attn_sink"), {H});
    if (r.isKvSource) {
      bf16(n("attn.compressor.wkv.weight"), {D, C});
      if (r.ratio == 2) bf16(n("attn.compressor.wgate.weight"), {D, C});
      bf16(n("attn.compressor.norm.weight"), {D});
      bf16(n("attn.indexer.wk.weight"), {Di, D});
      bf16(n("attn.indexer.k_norm.weight"), {Di});
    }
    if (r.isIndexSource) {
      fp8(n("attn.indexer.wq_b.weight"), {Hi * Di, Q});
      bf16(n("attn.indexer.weights_proj.weight"), {Hi, C});
    }
    bf16(n("ffn.gate.weight"), {E, C});
    f32(n("ffn.gate.bias"), {E});
    for (int64_t e = 0; e < E; ++e) {
      fp4(n(fmt::format("ffn.experts.{}.w1.weight", e)), {I, C});
      fp4(n(fmt::format("ffn.experts.{}.w3.weight", e)), {I, C});
      fp4(n(fmt::format("ffn.experts.{}.w2.weight", e)), {C, I});
    }
    if (cfg.nSharedExperts > 0) {
      const int64_t Is = I * cfg.nSharedExperts;  // shared experts concatenated into one
      fp8(n("ffn.shared_experts.w1.weight"), {Is, C});
      fp8(n("ffn.shared_experts.w3.weight"), {Is, C});
      fp8(n("ffn.shared_experts.w2.weight"), {C, Is});
    }
  }
  bf16("norm.weight", {C});
  bf16("head.weight", {V, C});
  return out;
}

}  // namespace deepinfer
