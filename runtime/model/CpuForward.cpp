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
  m->pool_ = std::make_unique<CpuThreadPool>(opts.threads);
  m->fp64_ = opts.fp64Accumulation;
  return m;
}

CpuRequestState CpuModel::newRequest() const {
  CpuRequestState st;
  const int64_t W = cfg_.slidingWindow;
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
  CpuForwardPass pass(*this, state, int64_t(ids.size()));
  auto logits = pass.run(ids);
  if (!logits.ok()) {
    // Caches may hold part of the call: the request cannot continue consistently.
    state.classes_.resize(classesBefore);
    state.unusable_ = true;
    return Error{fmt::format("{} (the request state is no longer usable)", logits.error().message)};
  }
  state.position_ = end;
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

  std::vector<CpuMhcMix> mixA(static_cast<size_t>(T)), mixF(static_cast<size_t>(T));
  std::vector<float> u(size_t(T * C)), y;
  auto collapseNorm = [&](const std::vector<float>& weightsNorm, auto preOf) {
    parallelFor(T, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        float* ut = &u[size_t(t * C)];
        mhcCollapse(ex, &X[size_t(t * kStreams * C)], C, preOf(t), ut);
        rmsNorm(ex, ut, C, weightsNorm.data(), cfg.rmsNormEps, ut);
      }
    });
  };
  auto mixes = [&](const CpuMhcWeights& hw, std::vector<CpuMhcMix>& out) {
    parallelFor(T, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t)
        out[size_t(t)] = mhcMixes(ex, &X[size_t(t * kStreams * C)], C, hw, cfg.rmsNormEps,
                                  cfg.hcEps, cfg.hcSinkhornIters);
    });
  };
  auto post = [&](const std::vector<CpuMhcMix>& mix) {
    parallelFor(T, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t)
        mhcPost(ex, &X[size_t(t * kStreams * C)], C, mix[size_t(t)], &y[size_t(t * C)]);
    });
  };

  for (int L = 0; L < cfg.numHiddenLayers; ++L) {
    const CpuLayerWeights& lw = w.layers[size_t(L)];
    if (lw.hasEngram) DI_TRY(engram(L, X));
    // Delayed mHC (ops.md §8): the attention collapses with the previous sublayer's pre-mix.
    mixes(lw.hcAttn, mixA);
    collapseNorm(lw.attnNorm, [&](int64_t t) { return &pre[size_t(t * kStreams)]; });
    attention(L, u, y);
    post(mixA);
    mixes(lw.hcFfn, mixF);
    collapseNorm(lw.ffnNorm, [&](int64_t t) { return mixA[size_t(t)].pre; });
    moe(L, u, y);
    post(mixF);
    for (int64_t t = 0; t < T; ++t)
      std::copy_n(mixF[size_t(t)].pre, kStreams, &pre[size_t(t * kStreams)]);
  }

  // Collapse with the last pre-mix, final norm, fp32 head.
  collapseNorm(w.norm, [&](int64_t t) { return &pre[size_t(t * kStreams)]; });
  HostTensor logits(DType::F32, {T, V});
  gemm(ex, u.data(), T, w.head, logits.ptr<float>());
  return logits;
}

}  // namespace deepinfer
