#include "CpuForwardWeights.h"

#include <cstring>
#include <fmt/format.h>

#include "ModelTensors.h"

namespace deepinfer {
namespace {

std::vector<float> toVector(const HostTensor& t) {
  std::vector<float> v(size_t(t.numel()));
  std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(float));
  return v;
}

class Loader {
 public:
  explicit Loader(const Checkpoint& ckpt) : ckpt_(ckpt) {}

  Result<CpuMatrix> matrix(const std::string& name, int64_t rows, int64_t cols) const {
    auto t = ckpt_.loadF32(name, {rows, cols});
    if (!t.ok()) return t.error();
    CpuMatrix m;
    m.rows = rows;
    m.cols = cols;
    m.data = toVector(*t);
    return m;
  }
  Result<std::vector<float>> vector(const std::string& name, std::vector<int64_t> shape) const {
    auto t = ckpt_.loadF32(name, shape);
    if (!t.ok()) return t.error();
    return toVector(*t);
  }
  // The row count of a 2-D tensor whose column count is known (shared experts' width).
  Result<int64_t> rowsOf(const std::string& name) const {
    auto info = ckpt_.info(name);
    if (!info.ok()) return info.error();
    if (info->logicalShape.size() != 2)
      return Error{fmt::format("checkpoint: tensor '{}' has rank {}, expected 2", name,
                               info->logicalShape.size())};
    return info->logicalShape[0];
  }

 private:
  const Checkpoint& ckpt_;
};

#define DI_ASSIGN(lhs, expr)                  \
  do {                                        \
    auto di_assign_ = (expr);                 \
    if (!di_assign_.ok()) return di_assign_.error(); \
    lhs = std::move(di_assign_.value());      \
  } while (0)

Status loadMhc(const Loader& ld, const std::string& p, const std::string& which, int64_t C,
               CpuMhcWeights& w) {
  DI_ASSIGN(w.fn, ld.matrix(p + "hc_" + which + "_fn", 24, 4 * C));
  DI_ASSIGN(w.base, ld.vector(p + "hc_" + which + "_base", {24}));
  DI_ASSIGN(w.scale, ld.vector(p + "hc_" + which + "_scale", {3}));
  return {};
}

// The attention tensors under `p` ("layers.L.attn." or "mtp.s.attn."); `role` says which
// compressor/indexer tensors the layer owns (none for draft stages).
Status loadAttention(const Loader& ld, const ModelConfig& cfg, const std::string& p, const LayerRole& role,
                     CpuAttentionWeights& w) {
  const int64_t C = cfg.hiddenSize, H = cfg.numAttentionHeads, D = cfg.headDim;
  const int64_t G = cfg.oGroups, qL = cfg.qLoraRank, oL = cfg.oLoraRank;
  DI_ASSIGN(w.wqA, ld.matrix(p + "wq_a.weight", qL, C));
  DI_ASSIGN(w.qNorm, ld.vector(p + "q_norm.weight", {qL}));
  DI_ASSIGN(w.wqB, ld.matrix(p + "wq_b.weight", H * D, qL));
  DI_ASSIGN(w.wkv, ld.matrix(p + "wkv.weight", D, C));
  DI_ASSIGN(w.kvNorm, ld.vector(p + "kv_norm.weight", {D}));
  DI_ASSIGN(w.woA, ld.matrix(p + "wo_a.weight", G * oL, (H / G) * D));
  DI_ASSIGN(w.woB, ld.matrix(p + "wo_b.weight", C, G * oL));
  DI_ASSIGN(w.attnSink, ld.vector(p + "attn_sink", {H}));
  const int64_t Hi = cfg.indexNHeads, Di = cfg.indexHeadDim;
  if (role.isKvSource) {
    DI_ASSIGN(w.compWkv, ld.matrix(p + "compressor.wkv.weight", D, C));
    DI_ASSIGN(w.compNorm, ld.vector(p + "compressor.norm.weight", {D}));
    if (role.ratio == 2) DI_ASSIGN(w.compWgate, ld.matrix(p + "compressor.wgate.weight", D, C));
    DI_ASSIGN(w.idxWk, ld.matrix(p + "indexer.wk.weight", Di, D));
    DI_ASSIGN(w.idxKNorm, ld.vector(p + "indexer.k_norm.weight", {Di}));
  }
  if (role.isIndexSource) {
    DI_ASSIGN(w.idxWqB, ld.matrix(p + "indexer.wq_b.weight", Hi * Di, qL));
    DI_ASSIGN(w.idxWeightsProj, ld.matrix(p + "indexer.weights_proj.weight", Hi, C));
  }
  return {};
}

Status loadExpert(const Loader& ld, const std::string& p, int64_t C, int64_t I,
                  CpuExpertWeights& w) {
  DI_ASSIGN(w.w1, ld.matrix(p + "w1.weight", I, C));
  DI_ASSIGN(w.w3, ld.matrix(p + "w3.weight", I, C));
  DI_ASSIGN(w.w2, ld.matrix(p + "w2.weight", C, I));
  return {};
}

// The MoE tensors under `p` ("layers.L.ffn." or "mtp.s.ffn.") with E routed experts.
Status loadMoe(const Loader& ld, const ModelConfig& cfg, const std::string& p, int64_t E, CpuMoeWeights& w) {
  const int64_t C = cfg.hiddenSize, I = cfg.moeIntermediateSize;
  DI_ASSIGN(w.gate, ld.matrix(p + "gate.weight", E, C));
  DI_ASSIGN(w.gateBias, ld.vector(p + "gate.bias", {E}));
  w.experts.resize(size_t(E));
  for (int64_t e = 0; e < E; ++e)
    DI_TRY(loadExpert(ld, fmt::format("{}experts.{}.", p, e), C, I, w.experts[size_t(e)]));
  if (cfg.nSharedExperts > 0) {
    int64_t Is = 0;
    DI_ASSIGN(Is, ld.rowsOf(p + "shared_experts.w1.weight"));
    DI_TRY(loadExpert(ld, p + "shared_experts.", C, Is, w.shared));
  }
  return {};
}

Status loadEngram(const Loader& ld, const ModelConfig& cfg, int layer, CpuEngramWeights& w) {
  const std::string p = fmt::format("layers.{}.engram.", layer);
  const int64_t C = cfg.hiddenSize;
  const int64_t lookups = int64_t(cfg.engramMaxNgramSize - 1) * cfg.engramNHeads;
  w.tableName = p + "embed.weight";
  DI_ASSIGN(w.wkv, ld.matrix(p + "wkv.weight", 5 * C, lookups * cfg.engramHeadDim));
  DI_ASSIGN(w.qWeight, ld.vector(p + "q_weight", {4, C}));
  DI_ASSIGN(w.kWeight, ld.vector(p + "k_weight", {4, C}));
  return {};
}

// Norms, mHC, attention and MoE of one block under `p` ("layers.L." or "mtp.s.").
Status loadBlock(const Loader& ld, const ModelConfig& cfg, const std::string& p, const LayerRole& role, int64_t E,
                 CpuLayerWeights& lw) {
  const int64_t C = cfg.hiddenSize;
  DI_ASSIGN(lw.attnNorm, ld.vector(p + "attn_norm.weight", {C}));
  DI_ASSIGN(lw.ffnNorm, ld.vector(p + "ffn_norm.weight", {C}));
  DI_TRY(loadMhc(ld, p, "attn", C, lw.hcAttn));
  DI_TRY(loadMhc(ld, p, "ffn", C, lw.hcFfn));
  DI_TRY(loadAttention(ld, cfg, p + "attn.", role, lw.attn));
  DI_TRY(loadMoe(ld, cfg, p + "ffn.", E, lw.ffn));
  return {};
}

// The DSpark tensors (docs/dspark.md §1); the stage-specific extras sit on stage 0 (input side)
// and the last stage (output side).
Status loadDspark(const Loader& ld, const ModelConfig& cfg, CpuDsparkWeights& w) {
  const int64_t C = cfg.hiddenSize, V = cfg.vocabSize, r = cfg.dspark.markovRank;
  const int64_t taps = int64_t(cfg.dsparkTargetLayerIds.size());
  const int S = cfg.numNextnPredictLayers;
  w.stages.resize(size_t(S));
  for (int s = 0; s < S; ++s)
    DI_TRY(loadBlock(ld, cfg, draftTensorName(s, ""), cfg.role(cfg.numHiddenLayers + s), cfg.draftRoutedExperts(),
                     w.stages[size_t(s)]));
  DI_ASSIGN(w.mainProj, ld.matrix(draftTensorName(0, "main_proj.weight"), C, taps * C));
  DI_ASSIGN(w.mainNorm, ld.vector(draftTensorName(0, "main_norm.weight"), {C}));
  DI_ASSIGN(w.norm, ld.vector(draftTensorName(S - 1, "norm.weight"), {C}));
  DI_ASSIGN(w.markovEmbed, ld.matrix(draftTensorName(S - 1, "markov_head.embed.weight"), V, r));
  DI_ASSIGN(w.markovHead, ld.matrix(draftTensorName(S - 1, "markov_head.head.weight"), V, r));
  DI_ASSIGN(w.confidence, ld.vector(draftTensorName(S - 1, "confidence_head.proj.weight"), {1, C + r}));
  return {};
}

#undef DI_ASSIGN

}  // namespace

Result<CpuWeights> loadCpuWeights(const ModelConfig& cfg, const Checkpoint& ckpt) {
  Loader ld(ckpt);
  CpuWeights w;
  const int64_t V = cfg.vocabSize, C = cfg.hiddenSize;
  auto embed = ld.matrix("embed.weight", V, C);
  if (!embed.ok()) return embed.error();
  w.embed = std::move(*embed);
  auto head = ld.matrix("head.weight", V, C);
  if (!head.ok()) return head.error();
  w.head = std::move(*head);
  auto norm = ld.vector("norm.weight", {C});
  if (!norm.ok()) return norm.error();
  w.norm = std::move(*norm);
  w.layers.resize(size_t(cfg.numHiddenLayers));
  for (int L = 0; L < cfg.numHiddenLayers; ++L) {
    CpuLayerWeights& lw = w.layers[size_t(L)];
    DI_TRY(loadBlock(ld, cfg, fmt::format("layers.{}.", L), cfg.role(L), cfg.nRoutedExperts, lw));
    lw.hasEngram = cfg.role(L).isEngram;
    if (lw.hasEngram) DI_TRY(loadEngram(ld, cfg, L, lw.engram));
  }
  w.hasDraft = cfg.dsparkConfigured() && checkpointHasDraft(ckpt);
  if (w.hasDraft) DI_TRY(loadDspark(ld, cfg, w.draft));
  return w;
}

}  // namespace deepinfer
