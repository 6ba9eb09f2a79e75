// The MoE sublayer (docs/model.md §7, CpuLayersMoe.cpp) and the engram module (§8,
// CpuLayersEngram.cpp) on the GPU. The routed experts of a MoE run as one moe_experts launch
// sequence for prefill and decode alike: the tokens are grouped by expert on the device (no host
// round trip, graph-capturable) and every expert reads its fp4 weights as the checkpoint stores
// them; the shared expert runs through weight_gemm (w1/w3 with the SwiGLU epilogue, then w2).
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "GpuForward.h"
#include "deepinfer/DeviceCopy.h"

namespace deepinfer {

Status GpuForwardPass::moe(int layer, uint64_t u, uint64_t fOut) {
  return moeBlock(w.layers[size_t(layer)].ffn, cfg.numExpertsPerTok, u, fOut);
}

Status GpuForwardPass::moeBlock(const GpuMoeWeights& mw, int64_t k, uint64_t u, uint64_t fOut) {
  const int64_t C = cfg.hiddenSize, E = mw.routed.experts;

  // Router (over every expert, also on a tensor rank holding a range of them).
  DI_ASSIGN(logits, buf("routerLogits", size_t(T * mw.gate.rows * 4)));
  DI_ASSIGN(ids, buf("routerIds", size_t(T * k * 4)));
  DI_ASSIGN(wts, buf("routerWeights", size_t(T * k * 4)));
  DI_LAUNCH(gemm(u, C, mw.gate, logits, T));
  const int64_t Eall = mw.gate.rows;  // every expert (a tensor rank holds E of them)
  DI_LAUNCH(mk.routerTopk(logits, mw.gateBias.addr(), T, Eall, k, cfg.normTopkProb, cfg.routedScalingFactor, ids, wts,
                       stream));
  // Expert parallelism: the routing is every rank's (replicated router); this rank runs only its
  // experts, the others' slots give zero rows here.
  if (tensorParallel()) DI_LAUNCH(mk.localExpertIds(ids, T * k, m.rank.expertBegin, m.rank.expertEnd, stream));
  // Routed experts: row t * k + r holds rank r's output, which moeSum adds in rank order.
  DI_ASSIGN(routed, buf("moeRouted", size_t(T * k * C * 4)));
  DI_TRY(routedExperts(mw.routed, u, ids, wts, k, routed));

  uint64_t shared = 0;
  if (cfg.nSharedExperts > 0) {
    const int64_t Is = mw.shared.w1.rows;
    DI_ASSIGN(sh, buf("moeSH", size_t(T * Is * 2)));
    DI_ASSIGN(sy, buf("moeSY", size_t(T * C * 4)));
    DI_TRY(project(u, mw.shared.w1, sh, T, GemmEpilogue::Swiglu, 1, &mw.shared.w3));  // h = bf16(swiglu(g, v))
    DI_TRY(project(sh, mw.shared.w2, sy, T));
    shared = sy;
  }
  if (m.tp == 1) {
    DI_LAUNCH(mk.moeSum(shared, routed, T, k, C, fOut, stream));
    // One rank over NCCL: the whole sum, rounded as without a collective, moved unchanged.
    if (tensorParallel()) DI_TRY(tpAllReduce(fOut, T * C, DType::BF16));
    return {};
  }
  // Tensor ranks: this rank's shared-expert slice and experts (f32), summed over the ranks,
  // then rounded once.
  DI_ASSIGN(part, buf("moePartial", size_t(T * C * 4)));
  DI_LAUNCH(mk.moeSum(shared, routed, T, k, C, part, stream, /*f32Out=*/true));
  DI_TRY(tpAllReduce(part, T * C, DType::F32));
  DI_LAUNCH(mk.roundToBf16(part, fOut, T * C, stream));
  return {};
}

Status GpuForwardPass::tpAllReduce(uint64_t x, int64_t n, DType dtype) {
  return tpCollective({TpOp::AllReduceSum, x, x, size_t(n), dtype});
}

Status GpuForwardPass::tpCollective(const GpuCollectiveCall& c) {
  sig += fmt::format("tp_{}:{};", tpOpName(c.op), c.count);
  if (!m.collective || !launching()) return {};
  if (!segments) return m.runCollective(c);
  auto seg = DeviceGraph::endCapture(stream);
  if (!seg.ok()) return seg.error();
  DI_TRY(seg->launch(stream));
  segments->segments.push_back(std::move(*seg));
  DI_TRY(m.runCollective(c));
  segments->collectives.push_back(c);
  return DeviceGraph::beginCapture(stream);
}

Status GpuForwardPass::engram(int layer, uint64_t X) {
  const LayerRole& role = cfg.role(layer);
  const GpuEngramWeights& ew = w.layers[size_t(layer)].engram;
  const EngramHashParams& hp = *m.engramHash;
  const int64_t C = cfg.hiddenSize;
  const int64_t lookups = hp.lookupsPerToken(), width = cfg.engramHeadDim;
  const int maxN = hp.maxNgram;

  // Row ids from the class history (pad before the first token), rows gathered on the host
  // from the checkpoint's mapping (or made up, for synthetic weights), rounded to bf16 (GEMM inputs), uploaded.
  std::vector<int64_t> rowIds(size_t(T * lookups));
  std::vector<int64_t> window(static_cast<size_t>(maxN));
  for (const GpuSeq& sq : seqs)
    for (int64_t t = 0; t < sq.T; ++t) {
      const int64_t pos = sq.pos0 + t;
      for (int kk = 0; kk < maxN; ++kk)
        window[size_t(kk)] = pos - kk >= 0 ? sq.rq->classes[size_t(pos - kk)] : m.padClass;
      engramRowIds(hp, role.engramIndex, window.data(), &rowIds[size_t((sq.offset + t) * lookups)]);
    }
  std::vector<float> rows(size_t(T * lookups * width));
  Status read = m.engramRows(ew.tableName, rowIds.data(), rowIds.size(), width, rows.data());
  if (!read.ok()) return Error{fmt::format("engram layer {}: {}", layer, read.error().message)};
  std::vector<uint16_t> rowsBf16(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) rowsBf16[i] = floatToBf16(rows[i]);
  DI_ASSIGN(e, upload("engramRows", rowsBf16.data(), rowsBf16.size() * 2));
  m.counters.engramLookups += T;

  DI_ASSIGN(kvF, buf("engramKv", size_t(T * 5 * C * 4)));
  DI_TRY(project(e, ew.wkv, kvF, T));
  DI_LAUNCH(mk.roundF32InPlace(kvF, T * 5 * C, stream));  // the wkv output is rounded to bf16
  DI_LAUNCH(mk.engramGate(X, kvF, ew.qWeight.addr(), ew.kWeight.addr(), T, C, cfg.rmsNormEps, stream));
  return {};
}

}  // namespace deepinfer
