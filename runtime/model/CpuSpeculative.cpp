// A speculative step of the CPU reference (docs/dspark.md §5, §6): the draft pass for every
// request that drafts, one target forward per request over [next, d_1 .. d_m] that also yields
// the DSpark features of those rows, acceptance (SpecAccept.h), the rollback of the target caches
// to the last accepted token and the commit of the accepted rows into the draft rings.
#include <algorithm>
#include <fmt/format.h>

#include "CpuForwardLayers.h"
#include "SpecAccept.h"

namespace deepinfer {

void CpuModel::commitDraftRows(CpuRequestState& state, int64_t pos0, const float* mainX, int64_t n) {
  if (n <= 0) return;
  const CpuDsparkWeights& dw = weights_->draft;
  const int64_t C = cfg_.hiddenSize, D = cfg_.headDim, Rd = cfg_.qkRopeHeadDim, W = cfg_.slidingWindow;
  CpuExec ex{pool_.get(), fp64_};
  std::vector<float> kv(size_t(n * D));
  for (size_t s = 0; s < dw.stages.size(); ++s) {
    // ring_s[p mod W] = fq(rope0(rmsnorm(wkv_s . main_x[p], kv_norm_s), p)): each stage its own
    // projection of the shared features; the ring write is the fq.
    const CpuAttentionWeights& aw = dw.stages[s].attn;
    gemm(ex, mainX, n, aw.wkv, kv.data());
    for (int64_t i = 0; i < n; ++i) {
      float* v = &kv[size_t(i * D)];
      rmsNorm(ex, v, D, aw.kvNorm.data(), cfg_.rmsNormEps, v);
      draftRope_.rotate(v + D - Rd, pos0 + i, false);
      roundBf16InPlace(v, D);
      state.draftRings_[s].write((pos0 + i) % W, v);
    }
  }
  (void)C;
}

Status CpuModel::rollback(CpuRequestState& st, int64_t newPosition) const {
  if (!st.speculative_) return Error{"rollback: only speculative requests keep what a rollback needs"};
  if (st.unusable_) return Error{"rollback: the request state is unusable after an earlier failed call"};
  if (newPosition > st.position_ || newPosition < st.lastCallStart_)
    return Error{fmt::format("rollback to position {}: only positions of the last call ({} .. {}) can be dropped",
                             newPosition, st.lastCallStart_, st.position_)};
  const int64_t spare = st.ringRows_ - cfg_.slidingWindow;
  if (st.position_ - newPosition > spare)
    return Error{fmt::format("rollback to position {}: drops {} positions, the window rings have {} spare rows",
                             newPosition, st.position_ - newPosition, spare)};
  if (newPosition == st.position_) return {};
  if (int64_t(st.classes_.size()) > newPosition) st.classes_.resize(size_t(newPosition));
  for (int L = 0; L < cfg_.numHiddenLayers; ++L) {
    const LayerRole& role = cfg_.role(L);
    if (!role.isKvSource) continue;
    CpuKvSourceState& src = st.sources_[size_t(L)];
    // Entry j exists once token (j + 1) * ratio - 1 is processed.
    src.compressed.truncate(newPosition / role.ratio);
    src.indexKeys.truncate(newPosition / role.ratio);
    if (role.ratio != 2) continue;
    // The tail after position P = newPosition - 1 is what a plain run leaves: P's own (kv, gate)
    // when P is even, none when P is odd (the values of P - 1 stay, unused). Positions before the
    // call are the tail as the call found it.
    if (newPosition == st.lastCallStart_) {
      src.hasTail = src.beforeCall.has;
      src.tailPos = src.beforeCall.pos;
      src.tailKv = src.beforeCall.kv;
      src.tailGate = src.beforeCall.gate;
      continue;
    }
    const int64_t P = newPosition - 1, lastEven = P % 2 == 0 ? P : P - 1;
    const CpuKvSourceState::Tail* t = &src.beforeCall;
    if (lastEven >= st.lastCallStart_) {
      t = nullptr;
      for (const CpuKvSourceState::Tail& c : src.callTails)
        if (c.pos == lastEven) t = &c;
      if (!t) return Error{fmt::format("rollback: layer {} kept no compressor state for position {}", L, lastEven)};
    }
    src.tailPos = t->pos;
    src.tailKv = t->kv;
    src.tailGate = t->gate;
    src.hasTail = P % 2 == 0;
  }
  st.position_ = newPosition;
  return {};
}

Result<std::vector<CpuSpecOutcome>> CpuModel::speculativeStep(std::vector<CpuSpecStep>& steps) {
  const int64_t V = cfg_.vocabSize, C = cfg_.hiddenSize, B = cfg_.dsparkBlockSize;
  if (!hasDraft()) return Error{"speculative step: the model has no DSpark draft"};
  // Everything is checked before anything runs.
  std::vector<int64_t> m(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    const CpuSpecStep& s = steps[i];
    if (!s.state || !s.state->speculative_)
      return Error{fmt::format("speculative step: request {} is not a speculative request (newSpeculativeRequest)", i)};
    for (size_t j = 0; j < i; ++j)
      if (steps[j].state == s.state) return Error{fmt::format("speculative step: request {} appears twice", i)};
    if (s.state->unusable_) return Error{fmt::format("speculative step: request {} is unusable", i)};
    if (s.state->position_ < 1)
      return Error{fmt::format("speculative step: request {} has no prompt yet (prefill it first)", i)};
    if (s.next < 0 || s.next >= V)
      return Error{fmt::format("speculative step: request {}: anchor token {} is outside the vocabulary [0, {})", i,
                               s.next, V)};
    DI_TRY(validateSampling(s.sampling));
    for (size_t j = 0; j < s.draftOverride.size(); ++j)
      if (s.draftOverride[j] < 0 || s.draftOverride[j] >= V)
        return Error{fmt::format("speculative step: request {}: override draft {} ({}) is outside the vocabulary", i,
                                 j, s.draftOverride[j])};
    if (!s.qOverride.empty() && s.qOverride.size() != s.draftOverride.size())
      return Error{fmt::format("speculative step: request {}: {} q rows for {} override drafts", i,
                               s.qOverride.size(), s.draftOverride.size())};
    for (const auto& row : s.qOverride)
      if (!row.empty() && int64_t(row.size()) != V)
        return Error{fmt::format("speculative step: request {}: a q row has {} entries, not the vocabulary's {}", i,
                                 row.size(), V)};
    const int64_t n = s.state->position_;
    const bool useOverride = !s.draftOverride.empty();
    int64_t mi = s.maxDrafts < 0 ? B : std::min<int64_t>(s.maxDrafts, B);
    if (useOverride) mi = std::min<int64_t>(mi, int64_t(s.draftOverride.size()));
    // The block needs positions n .. n+B-1, verification n .. n+m (docs/dspark.md §6.2).
    const int64_t maxPos = cfg_.maxPositionEmbeddings;
    if (maxPos > 0) {
      if (!useOverride && n + B > maxPos - 1) mi = 0;
      mi = std::min<int64_t>(mi, std::max<int64_t>(maxPos - 1 - n, 0));
    }
    if (maxPos > 0 && n + 1 > maxPos)
      return Error{fmt::format("speculative step: request {} is at position {}, max_position_embeddings is {}", i, n,
                               maxPos)};
    m[i] = mi;
  }

  std::vector<CpuDraftInput> inputs;
  std::vector<size_t> drafted;
  for (size_t i = 0; i < steps.size(); ++i)
    if (m[i] > 0 && steps[i].draftOverride.empty()) {
      inputs.push_back({steps[i].state, steps[i].next, steps[i].sampling});
      drafted.push_back(i);
    }
  auto blocks = draft(inputs);
  if (!blocks.ok()) return blocks.error();

  std::vector<CpuSpecOutcome> out(steps.size());
  // A failure past this point leaves the earlier requests advanced with their outcomes lost and
  // the failing one mid-verify: every request of the call is unusable (as on the GPU).
  auto fail = [&](std::string message) -> Error {
    for (CpuSpecStep& s : steps) s.state->unusable_ = true;
    return Error{fmt::format("{} (the requests of this call are no longer usable)", message)};
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    CpuSpecStep& s = steps[i];
    CpuSpecOutcome& o = out[i];
    std::vector<std::vector<double>> q;
    if (!s.draftOverride.empty()) {
      o.drafts.assign(s.draftOverride.begin(), s.draftOverride.begin() + m[i]);
      if (!s.qOverride.empty()) q.assign(s.qOverride.begin(), s.qOverride.begin() + m[i]);
    } else if (m[i] > 0) {
      const size_t b = size_t(std::find(drafted.begin(), drafted.end(), i) - drafted.begin());
      CpuDraftBlock& blk = (*blocks)[b];
      o.drafts.assign(blk.tokens.begin(), blk.tokens.begin() + m[i]);
      o.confidence = blk.confidence;
      if (!blk.q.empty()) q.assign(blk.q.begin(), blk.q.begin() + m[i]);
    }
    CpuRequestState& st = *s.state;
    const int64_t n = st.position_;
    std::vector<int32_t> ids{s.next};
    ids.insert(ids.end(), o.drafts.begin(), o.drafts.end());
    std::vector<float> mainX;
    auto logits = forward(st, ids, &mainX, 0);
    if (!logits.ok()) return fail(fmt::format("speculative step: request {}: {}", i, logits.error().message));
    for (size_t j = 0; j < ids.size(); ++j)
      if (Status f = checkFiniteLogits(logits->ptr<float>() + j * size_t(V), V,
                                       fmt::format("speculative step: request {}, position {}", i, n + int64_t(j)));
          !f.ok())
        return fail(f.error().message);
    const SpecAcceptance acc = acceptDrafts(logits->ptr<float>(), V, o.drafts, q, s.sampling, n);
    o.accepted = acc.accepted;
    o.emitted.assign(o.drafts.begin(), o.drafts.begin() + acc.accepted);
    o.emitted.push_back(acc.bonus);
    if (Status r = rollback(st, n + acc.accepted + 1); !r.ok())
      return fail(fmt::format("speculative step: request {}: {}", i, r.error().message));
    commitDraftRows(st, n, mainX.data(), acc.accepted + 1);
    o.logits = HostTensor(DType::F32, {acc.accepted + 1, V});
    std::copy_n(logits->ptr<float>(), size_t((acc.accepted + 1) * V), o.logits.ptr<float>());
  }
  (void)C;
  return out;
}

}  // namespace deepinfer
