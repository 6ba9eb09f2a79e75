#include "CpuForward.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "CpuForwardLayers.h"
#include "CpuForwardThreads.h"
#include "CpuForwardWeights.h"
#include "QuantizationCheck.h"
#include "deepinfer/InputFiles.h"

namespace deepinfer {

Status checkForwardSupported(const ModelConfig& cfg, const std::string& who) {
  auto bad = [&](const std::string& what) {
    return Error{fmt::format("{}: unsupported config: {}", who, what)};
  };
  if (cfg.headDim != kKvDim || cfg.nopeDim() != kKvNopeDim)
    return bad(fmt::format("head_dim {} with qk_rope_head_dim {} (the fp8_ds_mla cache format "
                           "needs 512 = 448 + 64)", cfg.headDim, cfg.qkRopeHeadDim));
  if (cfg.hcMult != kStreams) return bad(fmt::format("hc_mult {} (must be 4)", cfg.hcMult));
  if (cfg.numAttentionHeads <= 0 || cfg.oGroups <= 0 || cfg.numAttentionHeads % cfg.oGroups != 0)
    return bad(fmt::format("num_attention_heads {} not a multiple of o_groups {}",
                           cfg.numAttentionHeads, cfg.oGroups));
  if (cfg.slidingWindow <= 0) return bad(fmt::format("sliding_window {}", cfg.slidingWindow));
  if (cfg.scoringFunc != "sqrtsoftplus")
    return bad(fmt::format("scoring_func '{}' (only 'sqrtsoftplus')", cfg.scoringFunc));
  if (cfg.numExpertsPerTok <= 0 || cfg.numExpertsPerTok > cfg.nRoutedExperts)
    return bad(fmt::format("num_experts_per_tok {} with {} routed experts", cfg.numExpertsPerTok,
                           cfg.nRoutedExperts));
  bool anyIndex = false;
  for (int L = 0; L < cfg.numHiddenLayers; ++L) {
    const LayerRole& r = cfg.role(L);
    if (r.ratio != 0 && r.ratio != 1 && r.ratio != 2)
      return bad(fmt::format("layer {}: compress ratio {} (only 0, 1, 2)", L, r.ratio));
    anyIndex = anyIndex || r.isIndexSource;
    if (r.candidateRestricted && r.indexKeyLayer != cfg.candidateSourceLayerId)
      return bad(fmt::format("layer {}: candidate-restricted but scores against layer {}'s keys, "
                             "not the candidate source {}", L, r.indexKeyLayer,
                             cfg.candidateSourceLayerId));
    if (r.isCandidateSource && !r.isIndexSource)
      return bad(fmt::format("layer {}: candidate source without an indexer", L));
  }
  if (anyIndex && (cfg.indexTopk <= 0 || cfg.indexHeadDim < cfg.qkRopeHeadDim))
    return bad(fmt::format("index_topk {} / index_head_dim {}", cfg.indexTopk, cfg.indexHeadDim));
  if (cfg.candidateSourceLayerId >= 0 && (cfg.candidateBlockSize <= 0 || cfg.candidateTopkBlocks <= 0))
    return bad(fmt::format("candidate_block_size {} / candidate_topk_blocks {}",
                           cfg.candidateBlockSize, cfg.candidateTopkBlocks));
  return {};
}

CpuModel::CpuModel() = default;
CpuModel::~CpuModel() = default;

int CpuModel::threads() const { return pool_->threads(); }

Result<std::unique_ptr<CpuModel>> CpuModel::load(const std::string& modelDir,
                                                 const CpuModelOptions& opts) {
  if (opts.threads < 0 || opts.threads > kMaxThreads)
    return Error{fmt::format("cpu forward: {} threads is not a thread count (0..{}; 0 = all hardware threads)",
                             opts.threads, kMaxThreads)};
  std::unique_ptr<CpuModel> m(new CpuModel());
  auto cfg = loadModelConfig(modelDir);
  if (!cfg.ok()) return cfg.error();
  m->cfg_ = std::move(*cfg);
  DI_TRY(checkForwardSupported(m->cfg_, "cpu forward"));
  auto ckpt = Checkpoint::open(modelDir);
  if (!ckpt.ok()) return ckpt.error();
  m->ckpt_ = std::make_unique<Checkpoint>(std::move(*ckpt));
  DI_TRY(checkQuantizationMatchesCheckpoint(m->cfg_, *m->ckpt_, modelDir + "/config.json"));
  auto weights = loadCpuWeights(m->cfg_, *m->ckpt_);
  if (!weights.ok()) return weights.error();
  m->weights_ = std::make_unique<CpuWeights>(std::move(*weights));
  for (int L = 0; L < m->cfg_.numHiddenLayers; ++L) {
    auto table = RopeTable::forLayer(m->cfg_, L);
    if (!table.ok()) return table.error();
    m->rope_.push_back(std::move(*table));
  }
  if (m->cfg_.numEngramLayers() > 0) {
    auto hash = loadEngramHash(modelDir, m->cfg_);
    if (!hash.ok()) return hash.error();
    m->engramHash_ = std::make_unique<EngramHashParams>(std::move(*hash));
    auto map = loadTokenMap(modelDir, m->cfg_);
    if (!map.ok()) return map.error();
    m->tokenMap_ = std::move(*map);
    m->padClass_ = engramPadClass(m->tokenMap_, m->cfg_);
  }
  if (m->weights_->hasDraft) {
    auto table = RopeTable::forLayer(m->cfg_, m->cfg_.numHiddenLayers);  // draft stages: ratio 0
    if (!table.ok()) return table.error();
    m->draftRope_ = std::move(*table);
  }
  m->pool_ = std::make_unique<CpuThreadPool>(opts.threads);
  m->fp64_ = opts.fp64Accumulation;
  return m;
}

bool CpuModel::hasDraft() const { return weights_->hasDraft; }

Result<CpuRequestState> CpuModel::newSpeculativeRequest() const {
  if (!hasDraft())
    return Error{cfg_.dsparkConfigured()
                     ? std::string("speculative request: the checkpoint has no mtp.* (DSpark) tensors")
                     : fmt::format("speculative request: the model has no DSpark draft (num_nextn_predict_layers {}, "
                                   "dspark_block_size {})",
                                   cfg_.numNextnPredictLayers, cfg_.dsparkBlockSize)};
  CpuRequestState st = newRequest();
  st.speculative_ = true;
  st.ringRows_ = cfg_.slidingWindow + cfg_.dsparkBlockSize;
  const int64_t W = cfg_.slidingWindow;
  st.draftRings_.assign(size_t(cfg_.numNextnPredictLayers), PagedKvCache(W % 64 == 0 ? 64 : W));
  return st;
}

CpuRequestState CpuModel::newRequest() const {
  CpuRequestState st;
  const int64_t W = cfg_.slidingWindow;
  st.ringRows_ = W;
  // The ring holds exactly `sliding_window` rows; pages of 64 when that divides it.
  const int64_t ringBlock = W % 64 == 0 ? 64 : W;
  for (int L = 0; L < cfg_.numHiddenLayers; ++L) {
    st.windows_.emplace_back(ringBlock);
    CpuKvSourceState src;
    src.indexKeys = IndexKeyCache(std::max(cfg_.indexHeadDim, 1), 64);
    st.sources_.push_back(std::move(src));
  }
  return st;
}

Result<HostTensor> CpuModel::prefill(CpuRequestState& state, const std::vector<int32_t>& ids) {
  if (!state.speculative_) return forward(state, ids, nullptr, 0);
  // Speculative requests commit every processed position to the draft rings; only the last
  // sliding_window positions survive there, so only their features are computed.
  const int64_t n = int64_t(ids.size()), first = std::max<int64_t>(0, n - cfg_.slidingWindow);
  std::vector<float> mainX;
  auto logits = forward(state, ids, &mainX, first);
  if (!logits.ok()) return logits;
  commitDraftRows(state, state.position_ - n + first, mainX.data() + first * cfg_.hiddenSize, n - first);
  return logits;
}

Result<HostTensor> CpuModel::forward(CpuRequestState& state, const std::vector<int32_t>& ids,
                                     std::vector<float>* mainX, int64_t firstFeatureRow) {
  if (ids.empty()) return Error{"prefill: no tokens"};
  if (int64_t(state.windows_.size()) != cfg_.numHiddenLayers)
    return Error{"prefill: the request state was not created by this model (newRequest)"};
  if (state.unusable_)
    return Error{"prefill: the request state is unusable after an earlier failed call"};
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= cfg_.vocabSize)
      return Error{fmt::format("prefill: token {} (at index {}) is outside the vocabulary [0, {})",
                               ids[i], i, cfg_.vocabSize)};
  const int64_t end = state.position_ + int64_t(ids.size());
  if (cfg_.maxPositionEmbeddings > 0 && end > cfg_.maxPositionEmbeddings)
    return Error{fmt::format("prefill: positions up to {} exceed max_position_embeddings {}", end,
                             cfg_.maxPositionEmbeddings)};
  const size_t classesBefore = state.classes_.size();
  if (!tokenMap_.empty())
    for (int32_t id : ids) state.classes_.push_back(tokenMap_[size_t(id)]);
  if (state.speculative_) {
    state.lastCallStart_ = state.position_;
    for (CpuKvSourceState& src : state.sources_) {
      src.beforeCall = {src.hasTail, src.tailPos, src.tailKv, src.tailGate};
      src.callTails.clear();
    }
  }
  CpuForwardPass pass(*this, state, int64_t(ids.size()));
  std::vector<float> taps;
  if (mainX) pass.tapFeatures = &taps;
  auto logits = pass.run(ids);
  if (!logits.ok()) {
    // Caches may hold part of the call: the request cannot continue consistently.
    state.classes_.resize(classesBefore);
    state.unusable_ = true;
    return Error{fmt::format("{} (the request state is no longer usable)", logits.error().message)};
  }
  state.position_ = end;
  if (mainX) {
    // main_x = rmsnorm(main_proj . G, main_norm): fp32 GEMM output straight into the norm (§8).
    const CpuDsparkWeights& dw = weights_->draft;
    const int64_t C = cfg_.hiddenSize, T = int64_t(ids.size()), n = T - firstFeatureRow;
    const int64_t width = dw.mainProj.cols;
    CpuExec ex{pool_.get(), fp64_};
    mainX->assign(size_t(T * C), 0.f);
    gemm(ex, taps.data() + firstFeatureRow * width, n, dw.mainProj, mainX->data() + firstFeatureRow * C);
    for (int64_t t = firstFeatureRow; t < T; ++t) {
      float* x = mainX->data() + t * C;
      rmsNorm(ex, x, C, dw.mainNorm.data(), cfg_.rmsNormEps, x);
    }
  }
  return logits;
}

Result<std::vector<float>> CpuModel::decode(CpuRequestState& state, int32_t token) {
  auto logits = prefill(state, {token});
  if (!logits.ok()) return logits.error();
  std::vector<float> row(size_t(cfg_.vocabSize));
  std::copy_n(logits->ptr<float>(), row.size(), row.data());
  return row;
}

int32_t argmaxToken(const float* logits, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = int32_t(i);
  return best;
}

CpuForwardPass::CpuForwardPass(CpuModel& model, CpuRequestState& state, int64_t tokens)
    : m(model), st(state), cfg(model.cfg_), w(*model.weights_), T(tokens), pos0(state.position_),
      classes(state.classes_) {
  ex.pool = model.pool_.get();
  ex.fp64 = model.fp64_;
  selections.resize(size_t(cfg.numHiddenLayers));
}

Result<HostTensor> CpuForwardPass::run(const std::vector<int32_t>& ids) {
  const int64_t C = cfg.hiddenSize, V = cfg.vocabSize;
  // Embedding broadcast to the 4 streams; the first collapse selects stream 0.
  std::vector<float> X(size_t(T * kStreams * C));
  for (int64_t t = 0; t < T; ++t)
    for (int s = 0; s < kStreams; ++s)
      for (int64_t d = 0; d < C; ++d)
        X[size_t((t * kStreams + s) * C + d)] = roundBf16(w.embed.row(ids[size_t(t)])[d]);
  std::vector<float> pre(size_t(T * kStreams), 0.f);
  for (int64_t t = 0; t < T; ++t) pre[size_t(t * kStreams)] = 1.f;

  const std::vector<int> taps = tapFeatures ? cfg.dsparkTapLayers() : std::vector<int>{};
  if (tapFeatures) tapFeatures->assign(size_t(T) * taps.size() * size_t(C), 0.f);
  for (int L = 0; L < cfg.numHiddenLayers; ++L) {
    const CpuLayerWeights& lw = w.layers[size_t(L)];
    if (lw.hasEngram) DI_TRY(engram(L, X));
    // DSpark taps the streams entering the block, after an engram injection (docs/dspark.md §2, R).
    for (size_t i = 0; i < taps.size(); ++i)
      if (taps[i] == L) captureTap(X, i, taps.size());
    runMhcBlock(
        ex, cfg, lw, T, X, pre, [&](const std::vector<float>& u, std::vector<float>& y) { attention(L, u, y); },
        [&](const std::vector<float>& u, std::vector<float>& y) { moe(L, u, y); });
  }

  // Collapse with the last pre-mix, final norm, fp32 head.
  std::vector<float> u;
  collapseAndNorm(ex, cfg, T, X, pre, w.norm, u);
  HostTensor logits(DType::F32, {T, V});
  gemm(ex, u.data(), T, w.head, logits.ptr<float>());
  return logits;
}

void CpuForwardPass::captureTap(const std::vector<float>& X, size_t tap, size_t taps) {
  const int64_t C = cfg.hiddenSize;
  // g[t] = bf16((x0 + x1 + x2 + x3) * 0.25): an fp32 sum in stream order, one rounding.
  for (int64_t t = 0; t < T; ++t) {
    const float* x = &X[size_t(t * kStreams * C)];
    float* g = &(*tapFeatures)[size_t(t) * taps * size_t(C) + tap * size_t(C)];
    for (int64_t d = 0; d < C; ++d) g[d] = roundBf16((((x[d] + x[C + d]) + x[2 * C + d]) + x[3 * C + d]) * 0.25f);
  }
}

}  // namespace deepinfer
