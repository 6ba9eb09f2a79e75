// The DSpark draft pass on the GPU (docs/dspark.md §4, CpuDraft.cpp) through the backbone's
// kernels: per stage the delayed-mHC block (mhc_pre / mhc_fused_post_pre), the window attention
// as sparse_mla_decode over the stage's ring (committed context rows) plus the block's own rows
// (written through kv_quant_insert into a scratch cache: the fp8 round trip the spec asks for),
// the draft MoE through the backbone's MoE path (moe_experts), then the shared head, the
// Markov head's picks and the confidence head.
//
// Rows are in k-major order (row i * R + b is block row i of request b, at position n_b + i), so
// the Markov step k reads and writes R contiguous rows: z_k = Ubase rows + Markov bias (cuBLAS
// with beta = 1 into the Ubase rows), argmax into the token table.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "GpuForward.h"
#include "deepinfer/OpShapes.h"

namespace deepinfer {

Status GpuForwardPass::runDraft(const std::vector<int32_t>& anchors, bool deviceMarkov) {
  const int64_t C = cfg.hiddenSize, V = cfg.vocabSize, B = cfg.dsparkBlockSize;
  const GpuDsparkWeights& dw = w.draft;
  const int32_t noise = int32_t(cfg.dspark.noiseTokenId);
  // k-major rows (the constructor laid the rows out per sequence; the draft re-lays them).
  std::vector<int32_t> ids(static_cast<size_t>(T));
  for (int64_t i = 0; i < B; ++i)
    for (int64_t b = 0; b < R; ++b) {
      const int64_t row = i * R + b;
      positions[size_t(row)] = seqs[size_t(b)].pos0 + i;
      ids[size_t(row)] = i == 0 ? anchors[size_t(b)] : noise;
    }
  DI_TRY(allocStreams(T));
  DI_ASSIGN(idsDev, upload("dIds", ids.data(), ids.size() * 4));
  DI_ASSIGN(posDev, upload("dPositions", positions.data(), positions.size() * 8));
  positionsDev = posDev;
  DI_LAUNCH(mk.embedStreams(idsDev, w.embed.addr(), st.X, T, C, stream));
  std::vector<float> oneHot(size_t(T * 4), 0.f);
  for (int64_t t = 0; t < T; ++t) oneHot[size_t(t * 4)] = 1.f;
  DI_TRY(upload("preF", oneHot.data(), oneHot.size() * 4));

  const int S = int(dw.stages.size());
  const int64_t k = cfg.draftExpertsPerTok();
  for (int s = 0; s < S; ++s) {
    const GpuLayerWeights& lw = dw.stages[size_t(s)];
    if (s == 0) DI_TRY(mhcPre(lw.hcAttn, st.preF, lw.attnNorm.addr(), st.preA));
    DI_TRY(draftAttention(s, st.u, st.f));
    DI_TRY(mhcFusedPostPre(lw.hcFfn, st.preA, lw.ffnNorm.addr(), st.preF));
    DI_TRY(moeBlock(lw.ffn, k, st.u, st.f));
    if (s + 1 < S) {
      const GpuLayerWeights& nw = dw.stages[size_t(s + 1)];
      DI_TRY(mhcFusedPostPre(nw.hcAttn, st.preF, nw.attnNorm.addr(), st.preA));
    } else {
      // rmsnorm(bf16(collapse with the last FFN pre-mix), norm) into u (no hc_head); the mixes
      // of this fused step's pre half are unused, preF keeps the last pre-mix.
      DI_TRY(mhcFusedPostPre(lw.hcFfn, st.preF, dw.norm.addr(), st.preA));
    }
  }
  // h: the same collapse before the norm (the confidence head reads it).
  DI_ASSIGN(h, buf("dH", size_t(T * C * 2)));
  DI_TRY(runOp("mhc_collapse", {}, {{"x", {st.X, {T, kGpuStreams, C}}}, {"pre", {st.preF, {T, 4}}}, {"h", {h, {T, C}}}},
               stream));
  DI_ASSIGN(z, buf("dZ", size_t(T * V * 4)));
  DI_LAUNCH(gemm(st.u, C, w.head, z, T));  // Ubase, fp32
  std::vector<int32_t> toks(size_t((B + 1) * R), 0);
  std::copy(anchors.begin(), anchors.end(), toks.begin());
  DI_ASSIGN(toksDev, upload("dToks", toks.data(), toks.size() * 4));
  DI_ASSIGN(conf, buf("dConf", size_t(T * 4)));
  DI_ASSIGN(e, buf("dE", size_t(R * cfg.dspark.markovRank * 2)));
  outputs = {toksDev, z, conf, h, e};
  logitsRows = T;
  if (deviceMarkov)
    for (int64_t kk = 1; kk <= B; ++kk) DI_TRY(markovStep(kk, true));
  return {};
}

// Markov step k for all R requests (rows (k-1) * R ..): e = markov_embed[tok_{k-1}], z_k +=
// markov_head . e (fp32, into the Ubase rows), the pick (argmax on the device when asked; else
// the caller samples and writes the token row), c_k = conf . [h | e] in fp32.
Status GpuForwardPass::markovStep(int64_t k, bool deviceArgmax) {
  const int64_t C = cfg.hiddenSize, V = cfg.vocabSize, r = cfg.dspark.markovRank;
  const GpuDsparkWeights& dw = w.draft;
  const uint64_t toks = outputs.at(0), z = outputs.at(1), conf = outputs.at(2), h = outputs.at(3), e = outputs.at(4);
  const uint64_t prev = toks + uint64_t((k - 1) * R * 4), zk = z + uint64_t((k - 1) * R * V * 4);
  const uint64_t ck = conf + uint64_t((k - 1) * R * 4);
  DI_LAUNCH(mk.gatherRowsBf16(dw.markovEmbed.addr(), prev, R, r, e, stream));
  DI_LAUNCH(blas.gemmBf16F32(e, r, dw.markovHead.addr(), r, zk, V, R, V, r, stream, 1.f, 1.f));
  if (deviceArgmax) DI_LAUNCH(mk.argmax(zk, R, V, toks + uint64_t(k * R * 4), stream));
  DI_LAUNCH(blas.gemmBf16F32(h + uint64_t((k - 1) * R * C * 2), C, dw.confidence.addr(), C + r, ck, 1, R, 1, C, stream));
  DI_LAUNCH(blas.gemmBf16F32(e, r, dw.confidence.addr() + uint64_t(C * 2), C + r, ck, 1, R, 1, r, stream, 1.f, 1.f));
  return {};
}

// dattn_s (§4): queries of the block rows; keys = the stage ring's committed rows at
// max(0, n - W) .. n - 1 plus the request's B block rows, the same list for every row of the
// block (bidirectional, block-anchored), one softmax with the sink.
Status GpuForwardPass::draftAttention(int stage, uint64_t u, uint64_t fOut) {
  const GpuAttentionWeights& aw = w.draft.stages[size_t(stage)].attn;
  const int64_t H = cfg.numAttentionHeads, D = cfg.headDim, W = cfg.slidingWindow, B = cfg.dsparkBlockSize;
  const uint64_t invFreq = m.draftInvFreq.addr();
  uint64_t q = 0, qr = 0, kv = 0;
  DI_TRY(attnProject(aw, invFreq, u, &q, &qr, &kv));

  // The block rows through the window format into a scratch cache (row t at slot t).
  const int64_t pageBytes = mlaPageBytes(kGpuPageTokens);
  const int64_t blockPages = (T + kGpuPageTokens - 1) / kGpuPageTokens;
  DI_ASSIGN(blockCache, buf("dBlockCache", size_t(blockPages * pageBytes)));
  std::vector<int64_t> rowSlots(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) rowSlots[size_t(t)] = t;
  DI_ASSIGN(rowSlotsDev, upload("dBlockSlots", rowSlots.data(), rowSlots.size() * 8));
  OpAttrs insAttrs;
  insAttrs.setInt("block_size", kGpuPageTokens);
  DI_TRY(runOp("kv_quant_insert", insAttrs,
               {{"k", {kv, {T, kGpuKvDim}}}, {"slot_mapping", {rowSlotsDev, {T}}},
                {"k_cache", {blockCache, {blockPages, pageBytes}}}},
               stream));

  std::vector<int32_t> swa(size_t(T * W), -1), swaLens(static_cast<size_t>(T)), extra(size_t(T * B)),
      extraLens(static_cast<size_t>(T), int32_t(B));
  for (int64_t b = 0; b < R; ++b) {
    const GpuRequest& rq = *seqs[size_t(b)].rq;
    const int64_t n = seqs[size_t(b)].pos0, first = std::max<int64_t>(0, n - W);
    for (int64_t i = 0; i < B; ++i) {
      const int64_t row = i * R + b;
      for (int64_t p = first; p < n; ++p) {
        const int64_t ringRow = p % m.draftRingRows;
        swa[size_t(row * W + p - first)] =
            int32_t(int64_t(rq.draftPages[size_t(stage)][size_t(ringRow / kGpuPageTokens)]) * kGpuPageTokens +
                    ringRow % kGpuPageTokens);
      }
      swaLens[size_t(row)] = int32_t(n - first);
      for (int64_t j = 0; j < B; ++j) extra[size_t(row * B + j)] = int32_t(j * R + b);
    }
  }
  DI_ASSIGN(swaDev, upload("dSwa", swa.data(), swa.size() * 4));
  DI_ASSIGN(swaLensDev, upload("dSwaLens", swaLens.data(), swaLens.size() * 4));
  DI_ASSIGN(extraDev, upload("dExtra", extra.data(), extra.size() * 4));
  DI_ASSIGN(extraLensDev, upload("dExtraLens", extraLens.data(), extraLens.size() * 4));
  DI_ASSIGN(o, buf("o", size_t(T * H * D * 2)));
  DI_ASSIGN(lse, buf("lse", size_t(T * H * 4)));
  OpAttrs da;
  da.setFloat("sm_scale", 1.0 / std::sqrt(double(D)));
  da.setInt("swa_block_size", kGpuPageTokens);
  da.setInt("extra_block_size", kGpuPageTokens);
  DI_TRY(runOp("sparse_mla_decode", da,
               {{"q", {q, {T, 1, H, D}}},
                {"swa_cache", {m.windowPool->baseAddr(), {m.windowPool->numPages(), pageBytes}}},
                {"swa_indices", {swaDev, {T, 1, W}}},
                {"swa_lens", {swaLensDev, {T}}},
                {"extra_cache", {blockCache, {blockPages, pageBytes}}},
                {"extra_indices", {extraDev, {T, 1, B}}},
                {"extra_lens", {extraLensDev, {T}}},
                {"attn_sink", {aw.attnSink.addr(), {H}}},
                {"out", {o, {T, 1, H, D}}},
                {"lse", {lse, {T, 1, H}}}},
               stream));
  return attnOutput(aw, invFreq, o, fOut);
}

}  // namespace deepinfer
