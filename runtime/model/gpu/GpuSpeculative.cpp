// DSpark speculative decoding on the GPU (docs/dspark.md §2-§6; the CPU reference is
// CpuSpeculative.cpp): the target features every forward captures for speculative requests
// (taps, main_x, draft-ring rows), the draft pass driver (a CUDA graph; the Markov picks on the
// device for greedy batches, on the host for sampled ones), the verify step (one row-wise target
// forward over every request's [next, d_1 .. d_m], a graph like a decode step), acceptance on
// the host (SpecAccept.h) and the rollback of the rejected positions.
//
// Draft rings on the GPU have draftRingRows >= W + B slots and a forward writes the ring row of
// every position it computed, rejected verify rows included: a draft at anchor n reads positions
// n - W .. n - 1 only, which the verify of n - 1 or earlier committed, and a rejected row's slot is
// rewritten by the verify that next computes that position. The rows read are the CPU
// reference's (which writes accepted rows only, into a W-slot ring).
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "GpuForward.h"
#include "deepinfer/DeviceCopy.h"
#include "deepinfer/OpShapes.h"
#include "model/CpuForward.h"
#include "model/SpecAccept.h"

namespace deepinfer {

Status GpuForwardPass::captureTap(int layer, uint64_t X) {
  const std::vector<int> taps = cfg.dsparkTapLayers();
  const int64_t C = cfg.hiddenSize, n = int64_t(taps.size());
  for (int64_t i = 0; i < n; ++i)
    if (taps[size_t(i)] == layer) DI_LAUNCH(mk.streamMean(X, T, C, tapFeatures + uint64_t(i * C * 2), n * C, stream));
  return {};
}

// main_x = rmsnorm(main_proj . G, main_norm) (fp32 GEMM output straight into the norm, §8) and,
// per stage, ring[p] = fq(rope0(rmsnorm(wkv_s . main_x[p], kv_norm_s), p)) for the positions of
// speculative sequences that the ring keeps (the last draftRingRows of each sequence).
Status GpuForwardPass::commitFeatures() {
  const int64_t C = cfg.hiddenSize, D = cfg.headDim, Rd = cfg.qkRopeHeadDim;
  const int64_t taps = int64_t(cfg.dsparkTargetLayerIds.size());
  const GpuDsparkWeights& dw = w.draft;
  const int S = int(dw.stages.size());
  std::vector<int64_t> slots(size_t(S * T), -1);
  bool any = false;
  for (const GpuSeq& sq : seqs) {
    if (!sq.rq->speculative) continue;
    for (int64_t t = 0; t < sq.T; ++t) {
      const int64_t p = sq.pos0 + t;
      if (p < sq.end() - m.draftRingRows) continue;
      const int64_t ringRow = p % m.draftRingRows;
      for (int s = 0; s < S; ++s)
        slots[size_t(s * T + sq.offset + t)] =
            int64_t(sq.rq->draftPages[size_t(s)][size_t(ringRow / kGpuPageTokens)]) * kGpuPageTokens +
            ringRow % kGpuPageTokens;
      any = true;
    }
  }
  if (!any) return {};
  DI_ASSIGN(mainF, buf("dsparkMainF", size_t(T * C * 4)));
  DI_ASSIGN(mainX, buf("dsparkMainX", size_t(T * C * 2)));
  DI_TRY(project(tapFeatures, dw.mainProj, mainF, T));
  DI_LAUNCH(mk.rmsNormF32(mainF, C, dw.mainNorm.addr(), T, C, cfg.rmsNormEps, mainX, C, stream));
  DI_ASSIGN(slotsDev, upload("dsparkSlots", slots.data(), slots.size() * 8));
  DI_ASSIGN(kvF, buf("dsparkKvF", size_t(T * D * 4)));
  DI_ASSIGN(kvN, buf("dsparkKvN", size_t(T * D * 4)));
  DI_ASSIGN(kv, buf("dsparkKv", size_t(T * D * 2)));
  const ModelKernels::RopePositions perToken{1, 0, 1, positionsDev};
  const int64_t pageBytes = mlaPageBytes(kGpuPageTokens);
  OpAttrs insAttrs;
  insAttrs.setInt("block_size", kGpuPageTokens);
  for (int s = 0; s < S; ++s) {
    const GpuAttentionWeights& aw = dw.stages[size_t(s)].attn;
    DI_TRY(project(mainX, aw.wkv, kvF, T));
    DI_LAUNCH(mk.rmsNormF32ToF32(kvF, D, aw.kvNorm.addr(), T, D, cfg.rmsNormEps, kvN, D, stream));
    DI_LAUNCH(mk.ropeF32ToBf16(kvN, D, T, D, Rd, m.draftInvFreq.addr(), perToken, kv, D, stream));
    DI_TRY(runOp("kv_quant_insert", insAttrs,
                 {{"k", {kv, {T, kGpuKvDim}}},
                  {"slot_mapping", {slotsDev + uint64_t(s * T * 8), {T}}},
                  {"k_cache", {m.windowPool->baseAddr(), {m.windowPool->numPages(), pageBytes}}}},
                 stream));
  }
  return {};
}

Status GpuModelImpl::rollback(GpuRequest& rq, int64_t newPosition) {
  if (!rq.speculative) return Error{"rollback: only speculative requests keep what a rollback needs"};
  if (newPosition == rq.position) return {};
  if (newPosition > rq.position || newPosition <= rq.lastCallStart)
    return Error{fmt::format("rollback to position {}: only positions after the first of the last call ({} .. {}) "
                             "can be dropped",
                             newPosition, rq.lastCallStart + 1, rq.position)};
  const int64_t spare = ringRows - cfg.slidingWindow;
  if (rq.position - newPosition > spare)
    return Error{fmt::format("rollback to position {}: drops {} positions, the window rings have {} spare rows",
                             newPosition, rq.position - newPosition, spare)};
  if (int64_t(rq.classes.size()) > newPosition) rq.classes.resize(size_t(newPosition));
  for (int L = 0; L < cfg.numHiddenLayers; ++L) {
    const LayerRole& role = cfg.role(L);
    if (!role.isKvSource) continue;
    // Entries built from dropped positions become invisible (visibility is bounded by the count).
    rq.compCount[size_t(L)] = std::min(rq.compCount[size_t(L)], newPosition / role.ratio);
    if (role.ratio != 2) continue;
    // After P = newPosition - 1: P's own (kv, gate) opens a pair when P is even (its row in the
    // region, saved by the call), else no pair is open.
    const int64_t P = newPosition - 1, row = P - rq.lastCallStart;
    if (P % 2 == 0) {
      if (row >= rq.lastCallRows)
        return Error{fmt::format("rollback: layer {} kept no compressor state for position {}", L, P)};
      rq.tailRow[size_t(L)] = row;
      rq.hasTail[size_t(L)] = 1;
    } else {
      rq.hasTail[size_t(L)] = 0;
    }
  }
  rq.position = newPosition;
  return {};
}

namespace {

struct DraftResult {
  std::vector<std::vector<int32_t>> tokens;             // [R][B]
  std::vector<std::vector<float>> confidence;           // [R][B]
  std::vector<std::vector<std::vector<double>>> q;      // [R][B][V] for sampled requests
  std::vector<float> z;                                  // [B * R, V] k-major, when asked
};

// One draft pass over `reqs` (anchors at their positions) through a CUDA graph when possible.
Result<DraftResult> runDraftPass(GpuModelImpl& m, const std::vector<GpuRequest*>& reqs,
                                 const std::vector<int32_t>& anchors, const std::vector<SamplingOptions>& sampling,
                                 bool wantZ) {
  const int64_t B = m.cfg.dsparkBlockSize, V = m.cfg.vocabSize, R = int64_t(reqs.size());
  std::vector<GpuSeq> seqs;
  for (GpuRequest* rq : reqs) {
    GpuSeq sq;
    sq.rq = rq;
    sq.pos0 = rq->position;
    sq.T = B;
    seqs.push_back(sq);
  }
  const bool deviceMarkov =
      std::all_of(sampling.begin(), sampling.end(), [](const SamplingOptions& s) { return s.temperature == 0; });
  std::vector<uint64_t> outputs;
  bool viaGraph = false;
  if (m.opts.cudaGraphs && m.stream) {
    const GpuForwardCounters before = m.counters;
    auto g = m.runGraph(
        fmt::format("draft|device{}", deviceMarkov), seqs,
        [&](GpuForwardPass& p) { return p.runDraft(anchors, deviceMarkov); }, [&] { m.counters = before; },
        &viaGraph);
    if (!g.ok()) return g.error();
    if (viaGraph) outputs = (*g)->outputs;
  }
  GpuForwardPass pass(m, seqs);  // eager: the whole pass, or the host-sampled Markov steps after a graph
  if (!viaGraph) {
    DI_TRY(pass.runDraft(anchors, deviceMarkov));
    outputs = pass.outputs;
  }
  pass.outputs = outputs;
  ++m.counters.draftPasses;
  DraftResult out;
  out.tokens.assign(size_t(R), std::vector<int32_t>(size_t(B)));
  out.confidence.assign(size_t(R), std::vector<float>(size_t(B)));
  out.q.resize(size_t(R));
  const uint64_t toks = outputs.at(0), z = outputs.at(1), conf = outputs.at(2);
  if (!deviceMarkov) {
    // Sampled requests draw d_k ~ softmax(z_k / T) with their keyed streams (§8); z_k depends on
    // d_{k-1}, so each step's rows come to the host.
    std::vector<float> zk(size_t(R * V));
    std::vector<int32_t> row(static_cast<size_t>(R));
    for (int64_t k = 1; k <= B; ++k) {
      DI_TRY(pass.markovStep(k, false));
      DI_TRY(copyDeviceToHost(zk.data(), z + uint64_t((k - 1) * R * V * 4), zk.size() * 4, m.stream));
      for (int64_t b = 0; b < R; ++b) {
        const float* zb = zk.data() + b * V;
        const SamplingOptions& s = sampling[size_t(b)];
        if (s.temperature > 0) {
          out.q[size_t(b)].push_back(softmaxDistribution(zb, V, s.temperature));
          row[size_t(b)] = drawFrom(out.q[size_t(b)].back(),
                                    keyedUniform(s.seed, uint64_t(seqs[size_t(b)].pos0 + k), SpecDraw::Draft));
        } else {
          row[size_t(b)] = argmaxToken(zb, V);
        }
      }
      DI_TRY(copyHostToDevice(toks + uint64_t(k * R * 4), row.data(), row.size() * 4, m.stream));
    }
  }
  std::vector<int32_t> t(size_t(B * R));
  std::vector<float> c(size_t(B * R));
  DI_TRY(copyDeviceToHost(t.data(), toks + uint64_t(R * 4), t.size() * 4, m.stream));
  DI_TRY(copyDeviceToHost(c.data(), conf, c.size() * 4, m.stream));
  for (int64_t k = 0; k < B; ++k)
    for (int64_t b = 0; b < R; ++b) {
      out.tokens[size_t(b)][size_t(k)] = t[size_t(k * R + b)];
      out.confidence[size_t(b)][size_t(k)] = c[size_t(k * R + b)];
    }
  if (wantZ) {
    out.z.resize(size_t(B * R * V));
    DI_TRY(copyDeviceToHost(out.z.data(), z, out.z.size() * 4, m.stream));
  }
  return out;
}

}  // namespace

bool GpuModel::speculation() const { return impl_->speculation; }
int GpuModel::draftBlockSize() const { return impl_->cfg.dsparkBlockSize; }

Result<std::vector<GpuDraftBlock>> GpuModel::draft(const std::vector<std::pair<int64_t, int32_t>>& anchors,
                                                   bool wantZ) {
  GpuModelImpl& m = *impl_;
  if (!m.speculation) return Error{"draft: speculation is off for this model"};
  std::vector<GpuRequest*> reqs;
  std::vector<int32_t> ids;
  for (const auto& [request, next] : anchors) {
    auto rq = m.checkedRequest(request, {next}, "draft");
    if (!rq.ok()) return rq.error();
    if (!(*rq)->speculative || (*rq)->position < 1)
      return Error{fmt::format("draft: request {} is not a speculative request with a prompt", request)};
    reqs.push_back(*rq);
    ids.push_back(next);
  }
  if (reqs.empty()) return std::vector<GpuDraftBlock>{};
  DI_TRY(m.dev->use());
  auto d = runDraftPass(m, reqs, ids, std::vector<SamplingOptions>(reqs.size()), wantZ);
  if (!d.ok()) return d.error();
  const int64_t B = m.cfg.dsparkBlockSize, V = m.cfg.vocabSize, R = int64_t(reqs.size());
  std::vector<GpuDraftBlock> out(reqs.size());
  for (int64_t b = 0; b < R; ++b) {
    out[size_t(b)].tokens = d->tokens[size_t(b)];
    out[size_t(b)].confidence = d->confidence[size_t(b)];
    if (!wantZ) continue;
    out[size_t(b)].z.resize(size_t(B * V));
    for (int64_t k = 0; k < B; ++k)
      std::copy_n(d->z.data() + (k * R + b) * V, V, out[size_t(b)].z.data() + k * V);
  }
  return out;
}

Result<std::vector<GpuSpecOutcome>> GpuModel::speculativeStep(const std::vector<GpuSpecStep>& steps) {
  GpuModelImpl& m = *impl_;
  const int64_t V = m.cfg.vocabSize, B = m.cfg.dsparkBlockSize;
  if (!m.speculation) return Error{"speculative step: speculation is off for this model"};
  // Everything is checked before anything runs.
  std::vector<GpuRequest*> rqs;
  std::vector<int64_t> drafts(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    const GpuSpecStep& s = steps[i];
    auto rq = m.checkedRequest(s.request, {s.next}, "speculative step");
    if (!rq.ok()) return rq.error();
    if (!(*rq)->speculative)
      return Error{fmt::format("speculative step: request {} is not a speculative request (newSpeculativeRequest)",
                               s.request)};
    if ((*rq)->position < 1)
      return Error{fmt::format("speculative step: request {} has no prompt yet (prefill it first)", s.request)};
    for (GpuRequest* other : rqs)
      if (other == *rq) return Error{fmt::format("speculative step: request {} appears twice", s.request)};
    DI_TRY(validateSampling(s.sampling));
    for (size_t j = 0; j < s.draftOverride.size(); ++j)
      if (s.draftOverride[j] < 0 || s.draftOverride[j] >= V)
        return Error{fmt::format("speculative step: request {}: override draft {} ({}) is outside the vocabulary",
                                 s.request, j, s.draftOverride[j])};
    if (!s.qOverride.empty() && s.qOverride.size() != s.draftOverride.size())
      return Error{fmt::format("speculative step: request {}: {} q rows for {} override drafts", s.request,
                               s.qOverride.size(), s.draftOverride.size())};
    for (const auto& row : s.qOverride)
      if (!row.empty() && int64_t(row.size()) != V)
        return Error{fmt::format("speculative step: request {}: a q row has {} entries, not the vocabulary's {}",
                                 s.request, row.size(), V)};
    const int64_t n = (*rq)->position;
    const bool useOverride = !s.draftOverride.empty();
    int64_t mi = s.maxDrafts < 0 ? B : std::min<int64_t>(s.maxDrafts, B);
    if (useOverride) mi = std::min<int64_t>(mi, int64_t(s.draftOverride.size()));
    const int64_t maxPos = m.cfg.maxPositionEmbeddings;
    if (maxPos > 0) {
      if (!useOverride && n + B > maxPos - 1) mi = 0;  // the block must fit (§6.2)
      mi = std::min<int64_t>(mi, std::max<int64_t>(maxPos - 1 - n, 0));
    }
    rqs.push_back(*rq);
    drafts[i] = mi;
  }
  std::vector<GpuSpecOutcome> out(steps.size());
  if (steps.empty()) return out;
  DI_TRY(m.dev->use());

  // One draft pass over the requests that draft with the model.
  std::vector<GpuRequest*> drafting;
  std::vector<int32_t> anchors;
  std::vector<SamplingOptions> sampling;
  std::vector<size_t> draftOf(steps.size(), SIZE_MAX);
  for (size_t i = 0; i < steps.size(); ++i)
    if (drafts[i] > 0 && steps[i].draftOverride.empty()) {
      draftOf[i] = drafting.size();
      drafting.push_back(rqs[i]);
      anchors.push_back(steps[i].next);
      sampling.push_back(steps[i].sampling);
    }
  DraftResult blocks;
  if (!drafting.empty()) {
    auto d = runDraftPass(m, drafting, anchors, sampling, false);
    if (!d.ok()) return d.error();
    blocks = std::move(*d);
  }
  std::vector<std::vector<std::vector<double>>> q(steps.size());
  GpuModelImpl::Work work;
  for (size_t i = 0; i < steps.size(); ++i) {
    const GpuSpecStep& s = steps[i];
    GpuSpecOutcome& o = out[i];
    if (!s.draftOverride.empty()) {
      o.drafts.assign(s.draftOverride.begin(), s.draftOverride.begin() + drafts[i]);
      if (!s.qOverride.empty()) q[i].assign(s.qOverride.begin(), s.qOverride.begin() + drafts[i]);
    } else if (drafts[i] > 0) {
      const size_t b = draftOf[i];
      o.drafts.assign(blocks.tokens[b].begin(), blocks.tokens[b].begin() + drafts[i]);
      o.confidence = blocks.confidence[b];
      if (!blocks.q[b].empty()) q[i].assign(blocks.q[b].begin(), blocks.q[b].begin() + drafts[i]);
    }
    std::vector<int32_t> ids{s.next};
    ids.insert(ids.end(), o.drafts.begin(), o.drafts.end());
    DI_TRY(m.reserve(*rqs[i], rqs[i]->position + int64_t(ids.size())));
    work.emplace_back(rqs[i], std::move(ids));
  }

  // The verify forward: every row like a one-row decode step; logits stay on the device.
  std::vector<int64_t> n0;
  for (GpuRequest* rq : rqs) n0.push_back(rq->position);
  uint64_t logitsDev = 0;
  int64_t rows = 0;
  DI_TRY(m.forwardOnDevice(work, /*lastOnly=*/false, /*rowWise=*/true, &logitsDev, &rows));
  ++m.counters.verifySteps;
  auto markUnusable = [&] {
    for (GpuRequest* rq : rqs) rq->unusable = true;
  };
  auto argmaxDev = m.scratch.get("specArgmax", size_t(rows * 4));
  if (!argmaxDev.ok()) return argmaxDev.error();
  auto finiteDev = m.scratch.get("specFinite", size_t(rows * 4));
  if (!finiteDev.ok()) return finiteDev.error();
  std::vector<int32_t> best(static_cast<size_t>(rows)), finite(static_cast<size_t>(rows));
  Status st = m.mk->argmax(logitsDev, rows, V, *argmaxDev, m.stream, *finiteDev);
  if (st.ok()) st = copyDeviceToHost(best.data(), *argmaxDev, best.size() * 4, m.stream);
  if (st.ok()) st = copyDeviceToHost(finite.data(), *finiteDev, finite.size() * 4, m.stream);
  if (!st.ok()) {
    markUnusable();
    return Error{fmt::format("speculative step: {} (the requests of this call are no longer usable)", st.error().message)};
  }
  int64_t offset = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const GpuSpecStep& s = steps[i];
    GpuSpecOutcome& o = out[i];
    const int64_t nRows = int64_t(work[i].second.size());
    std::vector<float> hostRows;
    const bool needRows = s.sampling.temperature > 0 || s.keepLogits;
    if (needRows) {
      hostRows.resize(size_t(nRows * V));
      if (Status c = copyDeviceToHost(hostRows.data(), logitsDev + uint64_t(offset * V * 4), hostRows.size() * 4,
                                      m.stream);
          !c.ok()) {
        markUnusable();
        return c.error();
      }
    }
    // Every verified row, greedy ones included (their logits stay on the device): a NaN or
    // infinite logit is an error, never a token.
    for (int64_t j = 0; j < nRows; ++j) {
      if (finite[size_t(offset + j)] != 0) continue;
      const std::string where = fmt::format("speculative step: request {}, position {}", s.request, n0[i] + j);
      Status f = needRows ? checkFiniteLogits(hostRows.data() + j * V, V, where) : Status{};
      markUnusable();
      if (!f.ok()) return f.error();  // the host copy names the first bad id
      return Error{fmt::format("{}: logits are not finite (NaN or infinity); generation stopped", where)};
    }
    SpecAcceptance acc;
    if (s.sampling.temperature == 0) {
      acc = acceptGreedy(best.data() + offset, o.drafts);
    } else {
      acc = acceptDrafts(hostRows.data(), V, o.drafts, q[i], s.sampling, n0[i]);
    }
    o.accepted = acc.accepted;
    o.emitted.assign(o.drafts.begin(), o.drafts.begin() + acc.accepted);
    o.emitted.push_back(acc.bonus);
    if (Status r = m.rollback(*rqs[i], n0[i] + acc.accepted + 1); !r.ok()) {
      markUnusable();
      return Error{fmt::format("speculative step: request {}: {}", s.request, r.error().message)};
    }
    if (s.keepLogits) {
      o.logits = HostTensor(DType::F32, {acc.accepted + 1, V});
      std::copy_n(hostRows.data(), size_t((acc.accepted + 1) * V), o.logits.ptr<float>());
    }
    m.counters.draftsVerified += int64_t(o.drafts.size());
    m.counters.draftsAccepted += acc.accepted;
    offset += nRows;
  }
  return out;
}

}  // namespace deepinfer
