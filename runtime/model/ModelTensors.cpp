// Tensor list of docs/model.md §3, derived from the config's sizes and layer roles.
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
std::string draftTensorName(int stage, const std::string& rest) { return fmt::format("mtp.{}.{}", stage, rest); }

bool checkpointHasDraft(const Checkpoint& ckpt) {
  for (const std::string& n : ckpt.names())
    if (n.rfind("mtp.", 0) == 0) return true;
  return false;
}

int64_t engramConcatWidth(const ModelConfig& cfg) {
  return int64_t(cfg.engramMaxNgramSize - 1) * cfg.engramNHeads * cfg.engramHeadDim;
}

namespace {

struct SpecList {
  std::vector<ModelTensorSpec>& out;
  void bf16(std::string n, std::vector<int64_t> s) { out.push_back({std::move(n), "BF16", std::move(s)}); }
  void f32(std::string n, std::vector<int64_t> s) { out.push_back({std::move(n), "F32", std::move(s)}); }
  void fp8(std::string n, std::vector<int64_t> s) {
    out.push_back({std::move(n), "F8_E4M3", std::move(s), WeightFormat::Fp8Block});
  }
  void fp4(std::string n, std::vector<int64_t> s) { out.push_back({std::move(n), "I8", std::move(s), WeightFormat::Fp4}); }
};

// Norms, mHC, the window attention projections and the MoE of one block; `n` prefixes names,
// `E` is the routed expert count. Compressor/indexer/engram tensors are the caller's.
template <class Name, class Between>
void blockSpecs(const ModelConfig& cfg, SpecList& l, Name n, int64_t E, Between attnExtras) {
  const int64_t C = cfg.hiddenSize, H = cfg.numAttentionHeads, D = cfg.headDim;
  const int64_t Q = cfg.qLoraRank, G = cfg.oGroups, O = cfg.oLoraRank, I = cfg.moeIntermediateSize;
  const int64_t mixes = int64_t(2 + cfg.hcMult) * cfg.hcMult;  // pre | post | comb = 24
  l.bf16(n("attn_norm.weight"), {C});
  l.bf16(n("ffn_norm.weight"), {C});
  for (const char* sub : {"attn", "ffn"}) {
    l.f32(n(fmt::format("hc_{}_fn", sub)), {mixes, cfg.hcMult * C});
    l.f32(n(fmt::format("hc_{}_base", sub)), {mixes});
    l.f32(n(fmt::format("hc_{}_scale", sub)), {3});
  }
  l.fp8(n("attn.wq_a.weight"), {Q, C});
  l.bf16(n("attn.q_norm.weight"), {Q});
  l.fp8(n("attn.wq_b.weight"), {H * D, Q});
  l.fp8(n("attn.wkv.weight"), {D, C});
  l.bf16(n("attn.kv_norm.weight"), {D});
  l.fp8(n("attn.wo_a.weight"), {G * O, (H / G) * D});
  l.fp8(n("attn.wo_b.weight"), {C, G * O});
  l.f32(n("attn.attn_sink"), {H});
  attnExtras();
  l.bf16(n("ffn.gate.weight"), {E, C});
  l.f32(n("ffn.gate.bias"), {E});
  for (int64_t e = 0; e < E; ++e) {
    l.fp4(n(fmt::format("ffn.experts.{}.w1.weight", e)), {I, C});
    l.fp4(n(fmt::format("ffn.experts.{}.w3.weight", e)), {I, C});
    l.fp4(n(fmt::format("ffn.experts.{}.w2.weight", e)), {C, I});
  }
  if (cfg.nSharedExperts > 0) {
    const int64_t Is = I * cfg.nSharedExperts;  // shared experts concatenated into one
    l.fp8(n("ffn.shared_experts.w1.weight"), {Is, C});
    l.fp8(n("ffn.shared_experts.w3.weight"), {Is, C});
    l.fp8(n("ffn.shared_experts.w2.weight"), {C, Is});
  }
}

}  // namespace

std::vector<ModelTensorSpec> modelTensorSpecs(const ModelConfig& cfg) {
  const int64_t C = cfg.hiddenSize, V = cfg.vocabSize, D = cfg.headDim, Q = cfg.qLoraRank;
  const int64_t Hi = cfg.indexNHeads, Di = cfg.indexHeadDim;
  std::vector<ModelTensorSpec> out;
  SpecList l{out};
  l.bf16("embed.weight", {V, C});
  for (int layer = 0; layer < cfg.numHiddenLayers; ++layer) {
    const LayerRole& r = cfg.role(layer);
    auto n = [&](const std::string& rest) { return layerTensorName(layer, rest); };
    if (r.isEngram) {
      out.push_back({n("engram.embed.weight"), "F8_E4M3",
                     {cfg.engramNumEmbeddings[size_t(r.engramIndex)], cfg.engramHeadDim}, WeightFormat::Fp8Row});
      l.fp8(n("engram.wkv.weight"), {5 * C, engramConcatWidth(cfg)});  // 4 keys + 1 value
      l.bf16(n("engram.q_weight"), {cfg.hcMult, C});
      l.bf16(n("engram.k_weight"), {cfg.hcMult, C});
    }
    blockSpecs(cfg, l, n, cfg.nRoutedExperts, [&] {
      if (r.isKvSource) {
        l.bf16(n("attn.compressor.wkv.weight"), {D, C});
        if (r.ratio == 2) l.bf16(n("attn.compressor.wgate.weight"), {D, C});
        l.bf16(n("attn.compressor.norm.weight"), {D});
        l.bf16(n("attn.indexer.wk.weight"), {Di, D});
        l.bf16(n("attn.indexer.k_norm.weight"), {Di});
      }
      if (r.isIndexSource) {
        l.fp8(n("attn.indexer.wq_b.weight"), {Hi * Di, Q});
        l.bf16(n("attn.indexer.weights_proj.weight"), {Hi, C});
      }
    });
  }
  l.bf16("norm.weight", {C});
  l.bf16("head.weight", {V, C});
  for (ModelTensorSpec& d : dsparkTensorSpecs(cfg)) out.push_back(std::move(d));
  return out;
}

std::vector<ModelTensorSpec> dsparkTensorSpecs(const ModelConfig& cfg) {
  std::vector<ModelTensorSpec> out;
  if (!cfg.dsparkConfigured()) return out;
  const int64_t C = cfg.hiddenSize, V = cfg.vocabSize, r = cfg.dspark.markovRank;
  const int64_t taps = int64_t(cfg.dsparkTargetLayerIds.size());
  const int S = cfg.numNextnPredictLayers;
  SpecList l{out};
  for (int s = 0; s < S; ++s) {
    auto n = [&](const std::string& rest) { return draftTensorName(s, rest); };
    if (s == 0) {
      l.fp8(n("main_proj.weight"), {C, taps * C});
      l.bf16(n("main_norm.weight"), {C});
    }
    blockSpecs(cfg, l, n, cfg.draftRoutedExperts(), [] {});
    if (s == S - 1) {
      l.bf16(n("norm.weight"), {C});
      l.bf16(n("markov_head.embed.weight"), {V, r});
      l.bf16(n("markov_head.head.weight"), {V, r});
      l.bf16(n("confidence_head.proj.weight"), {1, C + r});
    }
  }
  return out;
}

}  // namespace deepinfer
