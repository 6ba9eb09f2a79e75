// The MoE sublayer (spec/model.md §7, CpuLayersMoe.cpp) and the engram module (§8,
// CpuLayersEngram.cpp) on the GPU. Routing decisions come back to the host (T x k ids) to
// group tokens per expert; each expert then runs as three cuBLAS GEMMs over its rows.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "GpuForward.h"
#include "deepinfer/DeviceCopy.h"

namespace deepinfer {

Status GpuForwardPass::moe(int layer, uint64_t u, uint64_t fOut) {
  return moeBlock(w.layers[size_t(layer)].ffn, m.expertTables[size_t(layer)], cfg.nRoutedExperts,
                  cfg.numExpertsPerTok, u, fOut);
}

Status GpuForwardPass::moeBlock(const GpuMoeWeights& mw, const GpuModelImpl::ExpertTables& tables, int64_t E,
                                int64_t k, uint64_t u, uint64_t fOut) {
  const int64_t C = cfg.hiddenSize;
  const double limit = cfg.swigluLimit;

  // Router.
  DI_ASSIGN(logits, buf("routerLogits", size_t(T * E * 4)));
  DI_ASSIGN(ids, buf("routerIds", size_t(T * k * 4)));
  DI_ASSIGN(wts, buf("routerWeights", size_t(T * k * 4)));
  DI_LAUNCH(gemm(u, C, mw.gate, logits, T));
  DI_LAUNCH(mk.routerTopk(logits, mw.gateBias.addr(), T, E, k, cfg.normTopkProb, cfg.routedScalingFactor, ids, wts,
                       stream));
  // Routed experts: on the device for row-wise passes (graph-capturable), else grouped per
  // expert on the host.
  uint64_t routed = 0;
  if (rowWise) {
    DI_ASSIGN(r, buf("moeRouted", size_t(T * k * C * 4)));
    DI_TRY(moeRoutedOnDevice(tables, E, k, u, ids, wts, r));
    routed = r;
  } else {
    auto r = moeRoutedOnHost(mw, E, k, u, ids, wts);
    if (!r.ok()) return r.error();
    routed = *r;
  }

  uint64_t shared = 0;
  if (cfg.nSharedExperts > 0) {
    const int64_t Is = mw.shared.w1.rows;
    DI_ASSIGN(sg, buf("moeSG", size_t(T * Is * 4)));
    DI_ASSIGN(sv, buf("moeSV", size_t(T * Is * 4)));
    DI_ASSIGN(sh, buf("moeSH", size_t(T * Is * 2)));
    DI_ASSIGN(sy, buf("moeSY", size_t(T * C * 4)));
    DI_LAUNCH(gemm(u, C, mw.shared.w1, sg, T));
    DI_LAUNCH(gemm(u, C, mw.shared.w3, sv, T));
    DI_LAUNCH(mk.swiglu(sg, sv, 0, T, Is, limit, sh, stream));
    DI_LAUNCH(gemm(sh, Is, mw.shared.w2, sy, T));
    shared = sy;
  }
  DI_LAUNCH(mk.moeSum(shared, routed, T, k, C, fOut, stream));
  return {};
}

// Prefill: routing decisions come back to the host, rows are grouped per expert (token order
// inside a group) and each expert runs as cuBLAS GEMMs over its rows; outputs are scattered to
// routed[t * k + r]. Returns the routed buffer (f32 [T, k, C]).
Result<uint64_t> GpuForwardPass::moeRoutedOnHost(const GpuMoeWeights& mw, int64_t E, int64_t k, uint64_t u,
                                                 uint64_t ids, uint64_t wts) {
  const int64_t C = cfg.hiddenSize, I = cfg.moeIntermediateSize;
  const double limit = cfg.swigluLimit;
  std::vector<int32_t> hostIds(size_t(T * k));
  DI_TRY(copyDeviceToHost(hostIds.data(), ids, hostIds.size() * 4, stream));

  // Rows grouped by expert (token order inside a group): row i reads token perm[i], carries
  // routing weight (t, r) and lands in routed[t * k + r].
  std::vector<int64_t> count(size_t(E), 0);
  for (int32_t e : hostIds) {
    if (e < 0 || e >= E) return Error{fmt::format("MoE: the router chose expert {} of {}", e, E)};
    ++count[size_t(e)];
  }
  std::vector<int64_t> offset(size_t(E) + 1, 0);
  for (int64_t e = 0; e < E; ++e) offset[size_t(e) + 1] = offset[size_t(e)] + count[size_t(e)];
  const int64_t n = T * k;
  std::vector<int32_t> tokenOf(static_cast<size_t>(n)), target(static_cast<size_t>(n));
  std::vector<int64_t> fill(offset.begin(), offset.end() - 1);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t r = 0; r < k; ++r) {
      const int64_t i = fill[size_t(hostIds[size_t(t * k + r)])]++;
      tokenOf[size_t(i)] = int32_t(t);
      target[size_t(i)] = int32_t(t * k + r);
    }
  DI_ASSIGN(tokDev, upload("moeTok", tokenOf.data(), tokenOf.size() * 4));
  DI_ASSIGN(tgtDev, upload("moeTgt", target.data(), target.size() * 4));
  DI_ASSIGN(xs, buf("moeX", size_t(n * C * 2)));
  DI_ASSIGN(permW, buf("moeW", size_t(n * 4)));
  DI_LAUNCH(mk.gatherRowsBf16(u, tokDev, n, C, xs, stream));
  // Routing weights follow the same permutation: gather them as 1-wide f32 rows through the
  // f32 scatter's inverse (weights[t * k + r] -> permW[i]).
  {
    std::vector<float> hostW(static_cast<size_t>(n)), perm(static_cast<size_t>(n));
    DI_TRY(copyDeviceToHost(hostW.data(), wts, hostW.size() * 4, stream));
    for (int64_t i = 0; i < n; ++i) perm[size_t(i)] = hostW[size_t(target[size_t(i)])];
    DI_TRY(copyHostToDevice(permW, perm.data(), perm.size() * 4, stream));
  }

  DI_ASSIGN(g, buf("moeG", size_t(std::max(n, T) * I * 4)));
  DI_ASSIGN(v, buf("moeV", size_t(std::max(n, T) * I * 4)));
  DI_ASSIGN(h, buf("moeH", size_t(std::max(n, T) * I * 2)));
  DI_ASSIGN(ys, buf("moeY", size_t(n * C * 4)));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t rows = count[size_t(e)];
    if (rows == 0) continue;
    const GpuExpertWeights& ew = mw.experts[size_t(e)];
    const uint64_t x = xs + uint64_t(offset[size_t(e)] * C * 2);
    DI_LAUNCH(gemm(x, C, ew.w1, g + uint64_t(offset[size_t(e)] * I * 4), rows));
    DI_LAUNCH(gemm(x, C, ew.w3, v + uint64_t(offset[size_t(e)] * I * 4), rows));
  }
  DI_LAUNCH(mk.swiglu(g, v, permW, n, I, limit, h, stream));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t rows = count[size_t(e)];
    if (rows == 0) continue;
    DI_LAUNCH(gemm(h + uint64_t(offset[size_t(e)] * I * 2), I, mw.experts[size_t(e)].w2,
                ys + uint64_t(offset[size_t(e)] * C * 4), rows));
  }
  DI_ASSIGN(routed, buf("moeRouted", size_t(n * C * 4)));
  DI_LAUNCH(mk.scatterRowsF32(ys, tgtDev, n, C, routed, stream));

  return routed;
}

// Rows in (token, rank) order, so the routing weights need no permutation and the outputs land
// where moeSum reads them. Each row is a 1-row GEMM against its expert (rows sharing an expert
// read its weights again: decode batches are small).
Status GpuForwardPass::moeRoutedOnDevice(const GpuModelImpl::ExpertTables& tab, int64_t E, int64_t k, uint64_t u,
                                         uint64_t ids, uint64_t wts, uint64_t routed) {
  const int64_t C = cfg.hiddenSize, I = cfg.moeIntermediateSize;
  const int64_t n = T * k;
  DI_ASSIGN(g, buf("moeG", size_t(n * I * 4)));
  DI_ASSIGN(v, buf("moeV", size_t(n * I * 4)));
  DI_ASSIGN(h, buf("moeH", size_t(n * I * 2)));
  DI_ASSIGN(ptrs, buf("moePtrs", size_t(8 * n * 8)));
  DI_LAUNCH(mk.moeRowPointers(ids, n, k, E, tab.w1.addr(), tab.w3.addr(), tab.w2.addr(), u, C, g, v, h, routed, I, ptrs,
                           stream));
  auto at = [&](int slot) { return ptrs + uint64_t(slot * n * 8); };
  DI_LAUNCH(blas.gemmBf16F32Pointers(at(0), C, at(1), C, at(3), I, 1, I, C, n, stream));
  DI_LAUNCH(blas.gemmBf16F32Pointers(at(0), C, at(2), C, at(4), I, 1, I, C, n, stream));
  DI_LAUNCH(mk.swiglu(g, v, wts, n, I, cfg.swigluLimit, h, stream));
  DI_LAUNCH(blas.gemmBf16F32Pointers(at(5), I, at(6), I, at(7), C, 1, C, I, n, stream));
  return {};
}

Status GpuForwardPass::engram(int layer, uint64_t X) {
  const LayerRole& role = cfg.role(layer);
  const GpuEngramWeights& ew = w.layers[size_t(layer)].engram;
  const EngramHashParams& hp = *m.engramHash;
  const int64_t C = cfg.hiddenSize;
  const int64_t lookups = hp.lookupsPerToken(), width = cfg.engramHeadDim;
  const int maxN = hp.maxNgram;

  // Row ids from the class history (pad before the first token), rows gathered on the host
  // from the checkpoint's mapping, rounded to bf16 (GEMM inputs), uploaded.
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
  Status read = m.ckpt->readEngramRows(ew.tableName, rowIds.data(), rowIds.size(), rows.data());
  if (!read.ok()) return Error{fmt::format("engram layer {}: {}", layer, read.error().message)};
  std::vector<uint16_t> rowsBf16(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) rowsBf16[i] = floatToBf16(rows[i]);
  DI_ASSIGN(e, upload("engramRows", rowsBf16.data(), rowsBf16.size() * 2));
  m.counters.engramLookups += T;

  DI_ASSIGN(kvF, buf("engramKv", size_t(T * 5 * C * 4)));
  DI_LAUNCH(gemm(e, lookups * width, ew.wkv, kvF, T));
  DI_LAUNCH(mk.roundF32InPlace(kvF, T * 5 * C, stream));  // the wkv output is rounded to bf16
  DI_LAUNCH(mk.engramGate(X, kvF, ew.qWeight.addr(), ew.kWeight.addr(), T, C, cfg.rmsNormEps, stream));
  return {};
}

}  // namespace deepinfer
