// The attention sublayer on the GPU (docs/model.md §6), following CpuLayersAttention.cpp:
// projections through weight_gemm (fp8 weights as stored; the bf16 compressor and indexer
// weights through cuBLAS), RMSNorm/RoPE kernels, the window write (kv_quant_insert), the
// compressor and indexer of source layers, then the prefill-form sparse attention over a
// gathered workspace (gather_kcache + combine_topk_swa + sparse_mla_prefill), inverse RoPE and
// the grouped output projection.
//
// Workspace per kv source (YOCO, docs/ops.md §9), [R, M] rows: sequence b's rows [0, N) hold its
// compressed cache, gathered once per forward at the source layer; rows [N, M) hold the current
// layer's window (every layer has its own ring). Combined index rows are built once per index
// source and reused by every layer that reads its selection.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "GpuForward.h"
#include "deepinfer/DeviceCopy.h"
#include "deepinfer/OpShapes.h"

namespace deepinfer {

template <class PagesOf, class PageOf>
Result<uint64_t> GpuForwardPass::pageTable(const std::string& name, int64_t width, PagesOf pagesOf, PageOf pageOf) {
  std::vector<int32_t> table(size_t(R * width), 0);
  for (int64_t b = 0; b < R; ++b) {
    const int64_t n = std::min<int64_t>(pagesOf(b), width);
    for (int64_t p = 0; p < width; ++p) table[size_t(b * width + p)] = pageOf(b, p < n ? p : 0);
  }
  return upload(name, table.data(), table.size() * 4);
}

Result<uint64_t> GpuForwardPass::cachePageTable(const std::string& name, int64_t width, PageLists lists, int layer) {
  auto pagesOf = [&](int64_t b) -> const std::vector<int32_t>& { return ((*seqs[size_t(b)].rq).*lists)[size_t(layer)]; };
  return pageTable(
      name, width, [&](int64_t b) { return int64_t(pagesOf(b).size()); },
      [&](int64_t b, int64_t p) { return pagesOf(b).empty() ? 0 : pagesOf(b)[size_t(p)]; });
}

Status GpuForwardPass::attnProject(const GpuAttentionWeights& aw, uint64_t invFreq, uint64_t u, uint64_t* qOut,
                                   uint64_t* qrOut, uint64_t* kvOut) {
  const int64_t C = cfg.hiddenSize, H = cfg.numAttentionHeads, D = cfg.headDim;
  const int64_t Rd = cfg.qkRopeHeadDim, qL = cfg.qLoraRank;
  const double eps = cfg.rmsNormEps;
  const ModelKernels::RopePositions perHead{H, 0, 1, positionsDev}, perToken{1, 0, 1, positionsDev};

  // qr = rmsnorm(wq_a u); q = rope(wq_b qr) rounded once per vector.
  DI_ASSIGN(qrF, buf("qrF", size_t(T * qL * 4)));
  DI_ASSIGN(qr, buf("qr", size_t(T * qL * 2)));
  DI_TRY(project(u, aw.wqA, qrF, T));
  DI_LAUNCH(mk.rmsNormF32(qrF, qL, aw.qNorm.addr(), T, qL, eps, qr, qL, stream));
  DI_ASSIGN(qF, buf("qF", size_t(T * H * D * 4)));
  DI_ASSIGN(q, buf("q", size_t(T * H * D * 2)));
  DI_TRY(project(qr, aw.wqB, qF, T));
  DI_LAUNCH(mk.ropeF32ToBf16(qF, D, T * H, D, Rd, invFreq, perHead, q, D, stream));

  // kv = rope(rmsnorm(wkv u)): key and value of each row.
  DI_ASSIGN(kvF, buf("kvF", size_t(T * D * 4)));
  DI_ASSIGN(kvN, buf("kvN", size_t(T * D * 4)));
  DI_ASSIGN(kv, buf("kv", size_t(T * D * 2)));
  DI_TRY(project(u, aw.wkv, kvF, T));
  DI_LAUNCH(mk.rmsNormF32ToF32(kvF, D, aw.kvNorm.addr(), T, D, eps, kvN, D, stream));
  DI_LAUNCH(mk.ropeF32ToBf16(kvN, D, T, D, Rd, invFreq, perToken, kv, D, stream));
  *qOut = q;
  *qrOut = qr;
  *kvOut = kv;
  return {};
}

Status GpuForwardPass::attnOutput(const GpuAttentionWeights& aw, uint64_t invFreq, uint64_t o, uint64_t fOut) {
  const int64_t H = cfg.numAttentionHeads, D = cfg.headDim;
  const int64_t Rd = cfg.qkRopeHeadDim, G = cfg.oGroups, oL = cfg.oLoraRank;
  const ModelKernels::RopePositions perHead{H, 0, 1, positionsDev};
  DI_LAUNCH(mk.ropeBf16InPlace(o, D, T * H, D, Rd, invFreq, perHead, /*inverse=*/true, stream));
  // z[g] = o[g] @ wo_a[g]^T (groups of H/G heads, one grouped launch), rounded once; y = wo_b z,
  // rounded once.
  DI_ASSIGN(z, buf("z", size_t(T * G * oL * 2)));
  DI_TRY(project(o, aw.woA, z, T, GemmEpilogue::Bf16, G));
  const int64_t C = cfg.hiddenSize;
  if (m.tp == 1) {
    DI_TRY(project(z, aw.woB, fOut, T, GemmEpilogue::Bf16));
    // One rank over NCCL: its output is the whole sum, rounded as without a collective; the
    // all-reduce of one rank moves it unchanged.
    if (tensorParallel()) DI_TRY(tpAllReduce(fOut, T * C, DType::BF16));
    return {};
  }
  // Tensor ranks: this rank's groups' share of y (f32), summed over the ranks, then rounded once.
  DI_ASSIGN(yPart, buf("attnPartial", size_t(T * C * 4)));
  DI_TRY(project(z, aw.woB, yPart, T));
  DI_TRY(tpAllReduce(yPart, T * C, DType::F32));
  DI_LAUNCH(mk.roundToBf16(yPart, fOut, T * C, stream));
  return {};
}

Status GpuForwardPass::attention(int layer, uint64_t u, uint64_t fOut) {
  const LayerRole& role = cfg.role(layer);
  const GpuAttentionWeights& aw = w.layers[size_t(layer)].attn;
  const int64_t H = cfg.numAttentionHeads, D = cfg.headDim;
  const uint64_t invFreq = m.invFreq[size_t(layer)].addr();
  uint64_t q = 0, qr = 0, kv = 0;
  DI_TRY(attnProject(aw, invFreq, u, &q, &qr, &kv));

  // This layer's window rings get the rows of this call.
  std::vector<int64_t> slots;
  for (const GpuSeq& sq : seqs)
    for (int64_t t = 0; t < sq.T; ++t) slots.push_back(windowSlot(*sq.rq, layer, sq.pos0 + t));
  DI_ASSIGN(slotDev, upload("winSlots", slots.data(), slots.size() * 8));
  const int64_t pageBytes = mlaPageBytes(kGpuPageTokens);
  const std::vector<int64_t> winCacheShape{m.windowPool->numPages(), pageBytes};
  OpAttrs insAttrs;
  insAttrs.setInt("block_size", kGpuPageTokens);
  DI_TRY(runOp("kv_quant_insert", insAttrs,
                 {{"k", {kv, {T, kGpuKvDim}}}, {"slot_mapping", {slotDev, {T}}},
                  {"k_cache", {m.windowPool->baseAddr(), winCacheShape}}},
                 stream));

  if (role.isKvSource) DI_TRY(compress(layer, u));
  if (role.isIndexSource) DI_TRY(index(layer, u, qr));

  DI_ASSIGN(o, buf("o", size_t(T * H * D * 2)));
  DI_ASSIGN(lse, buf("lse", size_t(T * H * 4)));
  if (rowWise) {
    DI_TRY(attendDecode(layer, q, o, lse));
  } else {
    DI_TRY(attendPrefill(layer, q, o, lse));
  }
  ++m.counters.attentionLayers;
  return attnOutput(aw, invFreq, o, fOut);
}

// Row-wise passes (decode steps, verify chunks): every row is its own query of
// sparse_mla_decode, reading both fp8 caches directly: the window rows of its position by their
// ring slots (rows of this call were written above) and its selected compressed entries through
// the page table, so each row sees exactly what a one-row decode step at its position would.
Status GpuForwardPass::attendDecode(int layer, uint64_t q, uint64_t o, uint64_t lse) {
  const LayerRole& role = cfg.role(layer);
  const GpuAttentionWeights& aw = w.layers[size_t(layer)].attn;
  const int64_t H = cfg.numAttentionHeads, D = cfg.headDim, W = cfg.slidingWindow;
  const int64_t K = std::max<int64_t>(cfg.indexTopk, 1);
  const int64_t pageBytes = mlaPageBytes(kGpuPageTokens);
  std::vector<int32_t> swa(size_t(T * W), -1), swaLens(static_cast<size_t>(T));
  for (int64_t b = 0; b < R; ++b) {
    const GpuSeq& sq = seqs[size_t(b)];
    for (int64_t t = 0; t < sq.T; ++t) {
      const int64_t row = sq.offset + t, pos = sq.pos0 + t, first = std::max<int64_t>(0, pos - W + 1);
      for (int64_t p = first; p <= pos; ++p) swa[size_t(row * W + p - first)] = int32_t(windowSlot(*sq.rq, layer, p));
      swaLens[size_t(row)] = int32_t(pos - first + 1);
    }
  }
  DI_ASSIGN(swaDev, upload("decSwa", swa.data(), swa.size() * 4));
  DI_ASSIGN(swaLensDev, upload("decSwaLens", swaLens.data(), swaLens.size() * 4));
  std::map<std::string, DiTensor> t = {
      {"q", {q, {T, 1, H, D}}},
      {"swa_cache", {m.windowPool->baseAddr(), {m.windowPool->numPages(), pageBytes}}},
      {"swa_indices", {swaDev, {T, 1, W}}},
      {"swa_lens", {swaLensDev, {T}}},
      {"attn_sink", {aw.attnSink.addr(), {H}}},
      {"out", {o, {T, 1, H, D}}},
      {"lse", {lse, {T, 1, H}}}};
  if (role.ratio > 0) {
    // Built once per forward per kv source (YOCO) and once per reading index source.
    const int src = role.kvSourceLayer;
    SourceWorkspace& sw = sources[src];
    if (sw.decTable == 0) {
      int64_t maxPages = 1;
      for (const GpuSeq& sq : seqs)
        maxPages = std::max<int64_t>(maxPages, int64_t(sq.rq->compPages[size_t(src)].size()));
      sw.decWidth = bucketUp(maxPages, 1);
      auto bt = cachePageTable(fmt::format("decCompTable.{}", src), sw.decWidth, &GpuRequest::compPages, src);
      if (!bt.ok()) return bt.error();
      sw.decTable = *bt;
      std::vector<int32_t> req(static_cast<size_t>(T)), lens(static_cast<size_t>(T), int32_t(K));
      for (int64_t b = 0; b < R; ++b)
        for (int64_t t = 0; t < seqs[size_t(b)].T; ++t) req[size_t(seqs[size_t(b)].offset + t)] = int32_t(b);
      DI_ASSIGN(reqDev, upload(fmt::format("decReq.{}", src), req.data(), req.size() * 4));
      DI_ASSIGN(lensDev, upload(fmt::format("decExtraLens.{}", src), lens.data(), lens.size() * 4));
      sw.decReq = reqDev;
      sw.decLens = lensDev;
      ++m.counters.kvMetadataBuilds;
    }
    if (sw.slotsFor != role.indexSourceLayer) {
      DI_ASSIGN(slots, buf(fmt::format("decExtra.{}", src), size_t(T * K * 4)));
      DI_LAUNCH(mk.selectionToSlots(selection.at(role.indexSourceLayer), T, K, sw.decTable, sw.decWidth, sw.decReq,
                                 kGpuPageTokens, slots, stream));
      sw.decSlots = slots;
      sw.slotsFor = role.indexSourceLayer;
      ++m.counters.indexRowBuilds;
    }
    t["extra_cache"] = {m.compPool->baseAddr(), {m.compPool->numPages(), pageBytes}};
    t["extra_indices"] = {sw.decSlots, {T, 1, K}};
    t["extra_lens"] = {sw.decLens, {T}};
  }
  OpAttrs da;
  da.setFloat("sm_scale", 1.0 / std::sqrt(double(D)));
  da.setInt("swa_block_size", kGpuPageTokens);
  da.setInt("extra_block_size", kGpuPageTokens);
  return runOp("sparse_mla_decode", da, t, stream);
}

// Prefill chunks: the rows a token reads are gathered (dequantized) into a workspace, indexed by
// combine_topk_swa rows, and attended by sparse_mla_prefill.
Status GpuForwardPass::attendPrefill(int layer, uint64_t q, uint64_t o, uint64_t lse) {
  const LayerRole& role = cfg.role(layer);
  const GpuAttentionWeights& aw = w.layers[size_t(layer)].attn;
  const int64_t H = cfg.numAttentionHeads, D = cfg.headDim;
  const int64_t W = cfg.slidingWindow, K = std::max<int64_t>(cfg.indexTopk, 1);
  const int64_t pageBytes = mlaPageBytes(kGpuPageTokens);
  const std::vector<int64_t> winCacheShape{m.windowPool->numPages(), pageBytes};

  // The workspace of this layer's kv source (ratio 0: a window-only workspace, key -1).
  // Its gathers and the index rows run as one op sequence through the fusion passes
  // (deepinfer/OpSequence.h): when the rows are rebuilt, di-fuse-gather-combine folds them into
  // the window gather, whose rows they index.
  std::vector<DiOpCall> calls;
  const int src = role.ratio > 0 ? role.kvSourceLayer : -1;
  SourceWorkspace& sw = sources[src];
  if (sw.ws == 0) {
    int64_t maxEntries = 0;
    std::vector<int32_t> counts;
    for (const GpuSeq& sq : seqs) {
      counts.push_back(int32_t(src >= 0 ? sq.rq->compCount[size_t(src)] : 0));
      maxEntries = std::max<int64_t>(maxEntries, counts.back());
    }
    sw.N = src >= 0 ? bucketUp(maxEntries, kGpuPageTokens) : 0;
    sw.M = sw.N + m.ringRows;
    DI_ASSIGN(ws, buf(fmt::format("ws.{}", src), size_t(R * sw.M * kGpuKvDim * 2)));
    sw.ws = ws;
    if (src >= 0 && maxEntries > 0) {
      // Every sequence's compressed rows [0, count) of the source's cache, once per forward.
      const int64_t width = bucketUp((maxEntries + kGpuPageTokens - 1) / kGpuPageTokens, 1);
      auto bt = cachePageTable(fmt::format("compTable.{}", src), width, &GpuRequest::compPages, src);
      if (!bt.ok()) return bt.error();
      DI_ASSIGN(lens, upload(fmt::format("compLens.{}", src), counts.data(), counts.size() * 4));
      OpAttrs ga;
      ga.setInt("block_size", kGpuPageTokens);
      ga.setInt("offset", 0);
      calls.push_back({"gather_kcache", ga,
                       {{"k_cache", {m.compPool->baseAddr(), {m.compPool->numPages(), pageBytes}}},
                        {"seq_lens", {lens, {R}}}, {"gather_lens", {lens, {R}}},
                        {"block_table", {*bt, {R, width}}}, {"out", {sw.ws, {R, sw.M, kGpuKvDim}}}}});
      ++m.counters.kvMetadataBuilds;
    }
  }

  // This layer's window rows: sequence b's positions end - g .. end - 1 into its rows [N, N + g).
  // One upload of query_start_loc [R + 1], seq_lens [R] (the ends) and gather_lens [R]: the
  // gather and the index rows read the same lengths (what lets the passes fuse them).
  std::vector<int32_t> meta;
  int64_t maxEnd = 0;
  for (const GpuSeq& sq : seqs) meta.push_back(int32_t(sq.offset));
  meta.push_back(int32_t(T));
  for (const GpuSeq& sq : seqs) {
    meta.push_back(int32_t(sq.end()));
    maxEnd = std::max(maxEnd, sq.end());
  }
  for (const GpuSeq& sq : seqs) meta.push_back(int32_t(std::min(sq.end(), W - 1 + sq.T)));
  DI_ASSIGN(metaDev, upload("winMeta", meta.data(), meta.size() * 4));
  const DiTensor qslDev{metaDev, {R + 1}}, endsDev{metaDev + uint64_t(4 * (R + 1)), {R}},
      gatheredDev{metaDev + uint64_t(4 * (2 * R + 1)), {R}};
  {
    const int64_t width = bucketUp((maxEnd - 1) / kGpuPageTokens + 1, 1);
    auto bt = pageTable("winTable", width,
                        [&](int64_t b) { return (seqs[size_t(b)].end() - 1) / kGpuPageTokens + 1; },
                        [&](int64_t b, int64_t p) {
                          return seqs[size_t(b)].rq->windowPages[size_t(layer)][size_t(p % m.ringPages)];
                        });
    if (!bt.ok()) return bt.error();
    OpAttrs ga;
    ga.setInt("block_size", kGpuPageTokens);
    ga.setInt("offset", sw.N);
    calls.push_back({"gather_kcache", ga,
                     {{"k_cache", {m.windowPool->baseAddr(), winCacheShape}}, {"seq_lens", endsDev},
                      {"gather_lens", gatheredDev}, {"block_table", {*bt, {R, width}}},
                      {"out", {sw.ws, {R, sw.M, kGpuKvDim}}}}});
  }

  // Combined index rows (top-k entries + window rows) per reading index source.
  const int idxSrc = role.ratio > 0 ? role.indexSourceLayer : -1;
  const int64_t rowW = (K + W + 127) / 128 * 128;
  if (sw.rows == 0 || sw.rowsFor != idxSrc) {
    DI_ASSIGN(rows, buf(fmt::format("rows.{}", src), size_t(T * rowW * 4)));
    DI_ASSIGN(lens, buf(fmt::format("rowLens.{}", src), size_t(T * 4)));
    uint64_t topk = 0;
    if (idxSrc >= 0) {
      topk = selection.at(idxSrc);
    } else {
      DI_ASSIGN(none, buf("noTopk", size_t(T * K * 4)));
      DI_LAUNCH(fillDevice8(none, 0xFF, size_t(T * K * 4), stream));
      topk = none;
    }
    OpAttrs ca;
    ca.setInt("window", W);
    ca.setInt("ratio", std::max(role.ratio, 0));
    ca.setInt("topk", K);
    ca.setInt("M", sw.M);
    ca.setInt("N", sw.N);
    calls.push_back({"combine_topk_swa", ca,
                     {{"topk_indices", {topk, {T, K}}}, {"query_start_loc", qslDev}, {"seq_lens", endsDev},
                      {"gather_lens", gatheredDev}, {"rows", {rows, {T, rowW}}}, {"lens", {lens, {T}}}}});
    sw.rows = rows;
    sw.lens = lens;
    sw.rowsFor = idxSrc;
    ++m.counters.indexRowBuilds;
  }
  DI_TRY(runOps(calls, stream));

  // One softmax over window rows and selected compressed rows, sink in the denominator.
  OpAttrs pa;
  pa.setFloat("sm_scale", 1.0 / std::sqrt(double(D)));
  DI_TRY(runOp("sparse_mla_prefill", pa,
                 {{"q", {q, {T, H, D}}}, {"kv", {sw.ws, {R * sw.M, kGpuKvDim}}}, {"indices", {sw.rows, {T, rowW}}},
                  {"lens", {sw.lens, {T}}}, {"attn_sink", {aw.attnSink.addr(), {H}}},
                  {"out", {o, {T, H, D}}}, {"lse", {lse, {T, H}}}},
                 stream));
  return {};
}

Status GpuForwardPass::compress(int layer, uint64_t u) {
  const LayerRole& role = cfg.role(layer);
  const GpuAttentionWeights& aw = w.layers[size_t(layer)].attn;
  const int64_t C = cfg.hiddenSize, D = cfg.headDim, Rd = cfg.qkRopeHeadDim, Di = cfg.indexHeadDim;
  const int ratio = role.ratio;
  const uint64_t invFreq = m.invFreq[size_t(layer)].addr();
  const double eps = cfg.rmsNormEps;

  DI_ASSIGN(ckv, buf("ckv", size_t(T * D * 4)));
  DI_LAUNCH(gemm(u, C, aw.compWkv, ckv, T));
  // Entries completed by this call, over all sequences: (sequence, entry id); `pooled` holds
  // their pre-norm vectors in that order.
  std::vector<std::pair<int64_t, int64_t>> entries;
  uint64_t pooled = ckv;
  if (ratio == 1) {
    for (int64_t b = 0; b < R; ++b)
      for (int64_t t = 0; t < seqs[size_t(b)].T; ++t) entries.emplace_back(b, seqs[size_t(b)].pos0 + t);
  } else {
    DI_ASSIGN(cgate, buf("cgate", size_t(T * D * 4)));
    DI_LAUNCH(gemm(u, C, aw.compWgate, cgate, T));
    DI_ASSIGN(cpool, buf("cpool", size_t(T * D * 4)));
    pooled = cpool;
    // The tails live in the model's pools (one region of tailRegionRows rows per request): the
    // tails this call reads are gathered into ctail (one row per sequence), this call's rows are
    // saved into the regions afterwards; both through uploaded row indices, so a captured graph
    // serves any requests of the same shapes.
    const int64_t regionRows = m.tailRegionRows, poolRows = int64_t(m.opts.maxRequests) * regionRows;
    std::vector<int32_t> gatherIdx(static_cast<size_t>(poolRows), -1), saveIdx(static_cast<size_t>(T), -1);
    bool carried = false;
    std::vector<int64_t> firstOdds(static_cast<size_t>(R)), counts(static_cast<size_t>(R));
    for (int64_t b = 0; b < R; ++b) {
      const GpuSeq& sq = seqs[size_t(b)];
      GpuRequest& rq = *sq.rq;
      const int64_t firstOdd = sq.pos0 % 2 == 1 ? sq.pos0 : sq.pos0 + 1;
      const int64_t n = firstOdd < sq.end() ? (sq.end() - firstOdd + 1) / 2 : 0;
      firstOdds[size_t(b)] = firstOdd;
      counts[size_t(b)] = n;
      const int64_t region = int64_t(rq.slot) * regionRows;
      if (firstOdd - 1 < sq.pos0 && n > 0) {  // the pair's first token is the carried tail
        if (!rq.hasTail[size_t(layer)])
          return Error{fmt::format("layer {}: compressor pair at position {} has no carried first token", layer,
                                   firstOdd - 1)};
        gatherIdx[size_t(region + rq.tailRow[size_t(layer)])] = int32_t(b);
        carried = true;
      }
      // Short calls keep every row (a speculative rollback may reopen the pair at any even
      // position); long ones only the last, when it opens a pair.
      if (sq.T <= regionRows) {
        for (int64_t t = 0; t < sq.T; ++t) saveIdx[size_t(sq.offset + t)] = int32_t(region + t);
      } else if ((sq.end() - 1) % 2 == 0) {
        saveIdx[size_t(sq.offset + sq.T - 1)] = int32_t(region);
      }
    }
    const uint64_t kvPool = m.tailKvPool[size_t(layer)].addr(), gatePool = m.tailGatePool[size_t(layer)].addr();
    uint64_t ctailKv = 0, ctailGate = 0;
    if (carried) {
      DI_ASSIGN(gidx, upload("cTailGather", gatherIdx.data(), gatherIdx.size() * 4));
      DI_ASSIGN(tk, buf("ctailKv", size_t(R * D * 4)));
      DI_ASSIGN(tg, buf("ctailGate", size_t(R * D * 4)));
      DI_LAUNCH(mk.scatterRowsF32(kvPool, gidx, poolRows, D, tk, stream));
      DI_LAUNCH(mk.scatterRowsF32(gatePool, gidx, poolRows, D, tg, stream));
      ctailKv = tk;
      ctailGate = tg;
    }
    for (int64_t b = 0; b < R; ++b) {
      const GpuSeq& sq = seqs[size_t(b)];
      const int64_t n = counts[size_t(b)], firstOdd = firstOdds[size_t(b)];
      const int64_t r0 = firstOdd - 1 - sq.pos0;  // -1: the pair's first token is the carried tail
      const uint64_t rowsAt = uint64_t(sq.offset * D * 4);
      if (n > 0) {
        // Sequence b's rows, its carried tail and its pair count are baked into the launch.
        hostArgs(fmt::format("pairPool,b{},r{},n{}", b, r0, n));
        const uint64_t tk = r0 < 0 ? ctailKv + uint64_t(b * D * 4) : 0, tg = r0 < 0 ? ctailGate + uint64_t(b * D * 4) : 0;
        DI_LAUNCH(mk.pairPool(ckv + rowsAt, cgate + rowsAt, tk, tg, r0, n, D,
                           cpool + uint64_t(int64_t(entries.size()) * D * 4), stream));
        for (int64_t i = 0; i < n; ++i) entries.emplace_back(b, firstOdd / 2 + i);
      }
      // The last token opens a pair: the next call reads it from the region.
      GpuRequest& rq = *sq.rq;
      rq.hasTail[size_t(layer)] = (sq.end() - 1) % 2 == 0 ? 1 : 0;
      if (rq.hasTail[size_t(layer)]) rq.tailRow[size_t(layer)] = sq.T <= regionRows ? sq.T - 1 : 0;
    }
    DI_ASSIGN(sidx, upload("cTailSave", saveIdx.data(), saveIdx.size() * 4));
    DI_LAUNCH(mk.scatterRowsF32(ckv, sidx, T, D, kvPool, stream));
    DI_LAUNCH(mk.scatterRowsF32(cgate, sidx, T, D, gatePool, stream));
  }
  const int64_t n = int64_t(entries.size());
  if (n == 0) return {};

  // latent = rmsnorm(pooled, compressor.norm) (bf16 values).
  DI_ASSIGN(lat, buf("clat", size_t(n * D * 4)));
  DI_ASSIGN(latB, buf("clatB", size_t(n * D * 2)));
  DI_LAUNCH(mk.rmsNormF32ToF32(pooled, D, aw.compNorm.addr(), n, D, eps, lat, D, stream));
  DI_LAUNCH(mk.roundToBf16(lat, latB, n * D, stream));
  std::vector<int64_t> entryPos;
  for (const auto& [b, j] : entries) entryPos.push_back(j * ratio);
  DI_ASSIGN(entryPosDev, upload("cEntryPos", entryPos.data(), entryPos.size() * 8));
  const ModelKernels::RopePositions atEntry{1, 0, 1, entryPosDev};
  auto slotsIn = [&](const std::vector<std::vector<int32_t>> GpuRequest::*pages) {
    std::vector<int64_t> slots;
    for (const auto& [b, j] : entries)
      slots.push_back(int64_t(((*seqs[size_t(b)].rq).*pages)[size_t(layer)][size_t(j / kGpuPageTokens)]) *
                          kGpuPageTokens + j % kGpuPageTokens);
    return slots;
  };

  // Index keys: rope(rmsnorm(indexer.wk latent, k_norm), j * ratio) -> the index-key cache.
  DI_ASSIGN(keyF, buf("ckeyF", size_t(n * Di * 4)));
  DI_ASSIGN(keyN, buf("ckeyN", size_t(n * Di * 4)));
  DI_ASSIGN(key, buf("ckey", size_t(n * Di * 2)));
  DI_LAUNCH(gemm(latB, D, aw.idxWk, keyF, n));
  DI_LAUNCH(mk.rmsNormF32ToF32(keyF, Di, aw.idxKNorm.addr(), n, Di, eps, keyN, Di, stream));
  DI_LAUNCH(mk.ropeF32ToBf16(keyN, Di, n, Di, Rd, invFreq, atEntry, key, Di, stream));
  const auto idxSlots = slotsIn(&GpuRequest::indexPages);
  DI_ASSIGN(idxSlotsDev, upload("cIdxSlots", idxSlots.data(), idxSlots.size() * 8));
  DI_LAUNCH(mk.indexKeyInsert(key, idxSlotsDev, n, Di, m.indexPool->baseAddr(), kGpuPageTokens, stream));

  // Compressed entries: rope(latent, j * ratio) -> the compressed cache.
  DI_ASSIGN(row, buf("crow", size_t(n * D * 2)));
  DI_LAUNCH(mk.ropeF32ToBf16(lat, D, n, D, Rd, invFreq, atEntry, row, D, stream));
  const auto compSlots = slotsIn(&GpuRequest::compPages);
  DI_ASSIGN(compSlotsDev, upload("cCompSlots", compSlots.data(), compSlots.size() * 8));
  OpAttrs insAttrs;
  insAttrs.setInt("block_size", kGpuPageTokens);
  DI_TRY(runOp("kv_quant_insert", insAttrs,
                 {{"k", {row, {n, kGpuKvDim}}}, {"slot_mapping", {compSlotsDev, {n}}},
                  {"k_cache", {m.compPool->baseAddr(), {m.compPool->numPages(), mlaPageBytes(kGpuPageTokens)}}}},
                 stream));
  for (const auto& [b, j] : entries) ++seqs[size_t(b)].rq->compCount[size_t(layer)];
  return {};
}

Status GpuForwardPass::index(int layer, uint64_t u, uint64_t qr) {
  const LayerRole& role = cfg.role(layer);
  const GpuAttentionWeights& aw = w.layers[size_t(layer)].attn;
  const int keyLayer = role.indexKeyLayer;
  const int ratio = cfg.role(keyLayer).ratio;
  const int64_t C = cfg.hiddenSize, Hi = cfg.indexNHeads, Di = cfg.indexHeadDim, Rd = cfg.qkRopeHeadDim;
  const int64_t qL = cfg.qLoraRank, K = cfg.indexTopk, bsz = cfg.candidateBlockSize;
  const int64_t KB = cfg.candidateTopkBlocks;
  const uint64_t invFreq = m.invFreq[size_t(layer)].addr();

  DI_ASSIGN(sel, buf(fmt::format("sel.{}", layer), size_t(T * K * 4)));
  selection[layer] = sel;
  std::vector<int32_t> visible, tokenReq;
  int64_t maxVisible = 0;
  for (int64_t b = 0; b < R; ++b) {
    const GpuSeq& sq = seqs[size_t(b)];
    const int64_t nKeys = sq.rq->compCount[size_t(keyLayer)];
    for (int64_t t = 0; t < sq.T; ++t) {
      visible.push_back(int32_t(std::min<int64_t>((sq.pos0 + t + 1) / ratio, nKeys)));
      tokenReq.push_back(int32_t(b));
      maxVisible = std::max<int64_t>(maxVisible, visible.back());
    }
  }
  if (role.isCandidateSource || role.candidateRestricted) {
    int64_t filtered = 0;  // more visible blocks than the source keeps: some are dropped
    for (int32_t v : visible) filtered += (v + bsz - 1) / bsz > KB;
    (role.isCandidateSource ? m.counters.candidateBlocksDropped : m.counters.candidateEntriesMasked) += filtered;
  }
  if (maxVisible == 0) {
    DI_LAUNCH(fillDevice8(sel, 0xFF, size_t(T * K * 4), stream));  // nothing visible: all -1
    if (role.isCandidateSource) {
      DI_ASSIGN(kept, buf("keptBlocks", size_t(T * KB * 4)));
      DI_LAUNCH(fillDevice8(kept, 0xFF, size_t(T * KB * 4), stream));
      keptBlocks = kept;
    }
    return {};
  }

  // Queries: rope(wq_b qr) per head, bf16, e4m3 per (token, head) with the scale folded into
  // the head weight.
  DI_ASSIGN(qiF, buf("qiF", size_t(T * Hi * Di * 4)));
  DI_ASSIGN(qi, buf("qi", size_t(T * Hi * Di * 2)));
  DI_ASSIGN(wts, buf("iw", size_t(T * Hi * 4)));
  DI_TRY(project(qr, aw.idxWqB, qiF, T));
  DI_LAUNCH(gemm(u, C, aw.idxWeightsProj, wts, T));
  const ModelKernels::RopePositions perHead{Hi, 0, 1, positionsDev};
  DI_LAUNCH(mk.ropeF32ToBf16(qiF, Di, T * Hi, Di, Rd, invFreq, perHead, qi, Di, stream));
  DI_LAUNCH(mk.indexQueryQuant(qi, T * Hi, Di, wts, 1.0 / std::sqrt(double(Di)) / std::sqrt(double(Hi)), stream));

  // Scores of every visible entry (-inf beyond), width bucketed.
  const int64_t pagesNeeded = (maxVisible + kGpuPageTokens - 1) / kGpuPageTokens;
  const int64_t width = bucketUp(std::max(pagesNeeded, (K + kGpuPageTokens - 1) / kGpuPageTokens), 1);
  const int64_t N = width * kGpuPageTokens;
  auto bt = cachePageTable("idxTable", width, &GpuRequest::indexPages, keyLayer);
  if (!bt.ok()) return bt.error();
  DI_ASSIGN(vis, upload("idxVisible", visible.data(), visible.size() * 4));
  DI_ASSIGN(tokReq, upload("idxTokReq", tokenReq.data(), tokenReq.size() * 4));
  DI_ASSIGN(scores, buf("idxScores", size_t(T * N * 4)));
  OpAttrs ia;
  ia.setInt("block_size", kGpuPageTokens);
  DI_TRY(runOp("indexer_logits", ia,
                 {{"q", {qi, {T, Hi, Di}}}, {"weights", {wts, {T, Hi}}},
                  {"k_cache", {m.indexPool->baseAddr(), {m.indexPool->numPages(), kGpuPageTokens * (Di + 4)}}},
                  {"block_table", {*bt, {R, width}}}, {"token_to_req", {tokReq, {T}}}, {"visible", {vis, {T}}},
                  {"scores", {scores, {T, N}}}},
                 stream));

  if (role.isCandidateSource) {
    // Blocks ranked by their best entry, the newest pinned; the top KB kept.
    const int64_t nb = bucketUp(std::max((N + bsz - 1) / bsz, KB), 1);
    DI_ASSIGN(blockScores, buf("blockScores", size_t(T * nb * 4)));
    DI_ASSIGN(blockLens, buf("blockLens", size_t(T * 4)));
    DI_ASSIGN(kept, buf("keptBlocks", size_t(T * KB * 4)));
    DI_LAUNCH(mk.candidateBlockScores(scores, N, vis, T, bsz, blockScores, nb, blockLens, stream));
    OpAttrs ta;
    ta.setInt("k", KB);
    DI_TRY(runOp("topk", ta,
                   {{"scores", {blockScores, {T, nb}}}, {"lens", {blockLens, {T}}}, {"indices", {kept, {T, KB}}}},
                   stream));
    keptBlocks = kept;
  }
  if (role.candidateRestricted) {
    if (keptBlocks == 0)
      return Error{fmt::format("layer {}: candidate-restricted but no candidate source ran before it", layer)};
    DI_LAUNCH(mk.maskToBlocks(scores, N, vis, T, keptBlocks, KB, bsz, stream));
  }
  OpAttrs ta;
  ta.setInt("k", K);
  DI_TRY(runOp("topk", ta, {{"scores", {scores, {T, N}}}, {"lens", {vis, {T}}}, {"indices", {sel, {T, K}}}},
                 stream));
  if (role.candidateRestricted) DI_LAUNCH(mk.dropNegInf(sel, T, K, scores, N, stream));
  return {};
}

}  // namespace deepinfer
