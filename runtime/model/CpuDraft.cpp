// The DSpark draft pass (docs/dspark.md §4) for several requests at once: B rows per request
// (the anchor and B - 1 noise rows at positions n .. n+B-1) through the draft stages, each a
// window-only block whose attention reads the stage's ring (committed context rows) plus the
// block's own rows, bidirectionally; then the shared head, the Markov head's sequential picks and
// the confidence head. Rows of different requests only meet in row-wise work.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "CpuForwardLayers.h"

namespace deepinfer {

struct CpuDraftPass {
  CpuModel& m;
  const ModelConfig& cfg;
  const CpuWeights& w;
  const CpuDsparkWeights& dw;
  const std::vector<CpuDraftInput>& in;
  CpuExec ex;
  int64_t B = 0, R = 0, N = 0;

  CpuDraftPass(CpuModel& model, const std::vector<CpuDraftInput>& inputs)
      : m(model), cfg(model.cfg_), w(*model.weights_), dw(model.weights_->draft), in(inputs) {
    ex.pool = model.pool_.get();
    ex.fp64 = model.fp64_;
    B = cfg.dsparkBlockSize;
    R = int64_t(in.size());
    N = R * B;
  }
  int64_t anchor(int64_t r) const { return in[size_t(r)].state->position_; }
  int64_t positionOfRow(int64_t row) const { return anchor(row / B) + row % B; }

  std::vector<CpuDraftBlock> run();
  void attention(int stage, const std::vector<float>& u, std::vector<float>& y);
  void markov(int64_t r, const std::vector<float>& h, const std::vector<float>& ubase, CpuDraftBlock& out);
};

void CpuDraftPass::attention(int stage, const std::vector<float>& u, std::vector<float>& y) {
  const CpuAttentionWeights& aw = dw.stages[size_t(stage)].attn;
  const RopeTable& rope = m.draftRope_;
  const int64_t H = cfg.numAttentionHeads, D = cfg.headDim, Rd = cfg.qkRopeHeadDim, qL = cfg.qLoraRank;
  const int64_t W = cfg.slidingWindow;

  // Queries and the block's own keys exactly as a backbone window layer computes them.
  std::vector<float> qr(size_t(N * qL)), q(size_t(N * H * D)), kb(size_t(N * D));
  gemm(ex, u.data(), N, aw.wqA, qr.data());
  for (int64_t t = 0; t < N; ++t) rmsNorm(ex, &qr[size_t(t * qL)], qL, aw.qNorm.data(), cfg.rmsNormEps, &qr[size_t(t * qL)]);
  gemm(ex, qr.data(), N, aw.wqB, q.data());
  ex.pool->parallelFor(N * H, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float* v = &q[size_t(i * D)];
      rope.rotate(v + D - Rd, positionOfRow(i / H), false);
      roundBf16InPlace(v, D);
    }
  });
  gemm(ex, u.data(), N, aw.wkv, kb.data());
  for (int64_t t = 0; t < N; ++t) {
    float* v = &kb[size_t(t * D)];
    rmsNorm(ex, v, D, aw.kvNorm.data(), cfg.rmsNormEps, v);
    rope.rotate(v + D - Rd, positionOfRow(t), false);
    roundBf16InPlace(v, D);
    windowRowRoundTrip(v);  // block rows pass through the window format like ring rows
  }

  // Per request: the ring's committed rows at max(0, n - W) .. n - 1, then its B block rows. The
  // list is the same for every query of the block (block-anchored, bidirectional).
  std::vector<std::vector<float>> ringRows(static_cast<size_t>(R));
  std::vector<std::vector<const float*>> keys(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) {
    const int64_t n = anchor(r), first = std::max<int64_t>(0, n - W);
    const PagedKvCache& ring = in[size_t(r)].state->draftRings_[size_t(stage)];
    ringRows[size_t(r)].resize(size_t((n - first) * D));
    for (int64_t p = first; p < n; ++p) ring.read(p % W, &ringRows[size_t(r)][size_t((p - first) * D)]);
    for (int64_t p = first; p < n; ++p) keys[size_t(r)].push_back(&ringRows[size_t(r)][size_t((p - first) * D)]);
    for (int64_t i = 0; i < B; ++i) keys[size_t(r)].push_back(&kb[size_t((r * B + i) * D)]);
  }
  const float scale = float(1.0 / std::sqrt(double(D)));
  std::vector<float> o(size_t(N * H * D));
  ex.pool->parallelFor(N * H, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t row = i / H, h = i % H;
      float* out = &o[size_t(i * D)];
      attendHead(ex, &q[size_t(i * D)], keys[size_t(row / B)], aw.attnSink[size_t(h)], scale, out);
      rope.rotate(out + D - Rd, positionOfRow(row), true);
      roundBf16InPlace(out + D - Rd, Rd);
    }
  });
  attentionOutput(ex, cfg, aw, o, N, y);
}

// The Markov head's B sequential picks for request r and the confidence logits (§4, §8).
void CpuDraftPass::markov(int64_t r, const std::vector<float>& h, const std::vector<float>& ubase,
                          CpuDraftBlock& out) {
  const int64_t C = cfg.hiddenSize, V = cfg.vocabSize, rank = cfg.dspark.markovRank;
  const CpuDraftInput& input = in[size_t(r)];
  const int64_t n = anchor(r);
  const bool sampled = input.sampling.temperature > 0;
  out.tokens.resize(size_t(B));
  out.z.resize(size_t(B * V));
  out.confidence.resize(size_t(B));
  out.h.assign(h.begin() + r * B * C, h.begin() + (r + 1) * B * C);
  std::vector<float> bias(static_cast<size_t>(V)), joined(size_t(C + rank));
  int32_t prev = input.next;
  for (int64_t k = 1; k <= B; ++k) {
    const int64_t row = r * B + k - 1;
    const float* e = dw.markovEmbed.row(prev);
    gemm(ex, e, 1, dw.markovHead, bias.data());
    float* z = &out.z[size_t((k - 1) * V)];
    const float* u = &ubase[size_t(row * V)];
    for (int64_t v = 0; v < V; ++v) z[v] = u[v] + bias[size_t(v)];
    int32_t tok;
    if (sampled) {
      out.q.push_back(softmaxDistribution(z, V, input.sampling.temperature));
      tok = drawFrom(out.q.back(), keyedUniform(input.sampling.seed, uint64_t(n + k), SpecDraw::Draft));
    } else {
      tok = argmaxToken(z, V);
    }
    std::copy_n(&h[size_t(row * C)], C, joined.data());
    std::copy_n(e, rank, joined.data() + C);
    out.confidence[size_t(k - 1)] = dot(ex, dw.confidence.data(), joined.data(), C + rank);
    out.tokens[size_t(k - 1)] = tok;
    prev = tok;
  }
}

std::vector<CpuDraftBlock> CpuDraftPass::run() {
  const int64_t C = cfg.hiddenSize, V = cfg.vocabSize;
  const int32_t noise = int32_t(cfg.dspark.noiseTokenId);
  // ids = [next, noise, ...] per request; 4 identical streams; the first collapse takes stream 0.
  std::vector<float> X(size_t(N * kStreams * C));
  for (int64_t row = 0; row < N; ++row) {
    const int32_t id = row % B == 0 ? in[size_t(row / B)].next : noise;
    for (int s = 0; s < kStreams; ++s)
      for (int64_t d = 0; d < C; ++d) X[size_t((row * kStreams + s) * C + d)] = roundBf16(w.embed.row(id)[d]);
  }
  std::vector<float> pre(size_t(N * kStreams), 0.f);
  for (int64_t row = 0; row < N; ++row) pre[size_t(row * kStreams)] = 1.f;
  const int64_t E = cfg.draftRoutedExperts(), k = cfg.draftExpertsPerTok();
  for (int s = 0; s < int(dw.stages.size()); ++s) {
    runMhcBlock(
        ex, cfg, dw.stages[size_t(s)], N, X, pre,
        [&](const std::vector<float>& u, std::vector<float>& y) { attention(s, u, y); },
        [&](const std::vector<float>& u, std::vector<float>& y) {
          moeForward(ex, cfg, dw.stages[size_t(s)].ffn, E, k, u, N, y, nullptr);
        });
  }
  // h = bf16(collapse with the last FFN pre-mix) (no hc_head); Ubase = head . rmsnorm(h, norm).
  std::vector<float> h(size_t(N * C)), hn(size_t(N * C)), ubase(size_t(N * V));
  for (int64_t row = 0; row < N; ++row) {
    mhcCollapse(ex, &X[size_t(row * kStreams * C)], C, &pre[size_t(row * kStreams)], &h[size_t(row * C)]);
    rmsNorm(ex, &h[size_t(row * C)], C, dw.norm.data(), cfg.rmsNormEps, &hn[size_t(row * C)]);
  }
  gemm(ex, hn.data(), N, w.head, ubase.data());
  std::vector<CpuDraftBlock> out(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) markov(r, h, ubase, out[size_t(r)]);
  return out;
}

Result<std::vector<CpuDraftBlock>> CpuModel::draft(const std::vector<CpuDraftInput>& inputs) {
  if (!hasDraft()) return Error{"draft: the model has no DSpark draft"};
  for (size_t i = 0; i < inputs.size(); ++i) {
    const CpuDraftInput& d = inputs[i];
    if (!d.state || !d.state->speculative_ || d.state->draftRings_.size() != size_t(cfg_.numNextnPredictLayers))
      return Error{fmt::format("draft: input {} is not a speculative request of this model (newSpeculativeRequest)", i)};
    if (d.state->unusable_) return Error{fmt::format("draft: input {}: the request state is unusable", i)};
    if (d.state->position_ < 1)
      return Error{fmt::format("draft: input {}: the request has no committed token yet (prefill its prompt first)", i)};
    if (d.next < 0 || d.next >= cfg_.vocabSize)
      return Error{fmt::format("draft: input {}: anchor token {} is outside the vocabulary [0, {})", i, d.next,
                               cfg_.vocabSize)};
    DI_TRY(validateSampling(d.sampling));
  }
  if (inputs.empty()) return std::vector<CpuDraftBlock>{};
  CpuDraftPass pass(*this, inputs);
  return pass.run();
}

}  // namespace deepinfer
