// Internals of the CPU forward pass: one forward call over a chunk of tokens of one request,
// with its sublayers implemented in CpuLayers*.cpp. Not part of the public API.
#pragma once
#include <cstdint>
#include <vector>

#include "CpuForward.h"
#include "CpuForwardMath.h"
#include "CpuForwardWeights.h"

namespace deepinfer {

// --- mHC (ops.md §8), n = 4 streams; CpuLayersMhc.cpp ---
constexpr int kStreams = 4;

// The 24 mixing values of one token after the sigmoid / Sinkhorn epilogue.
struct CpuMhcMix {
  float pre[kStreams];
  float post[kStreams];
  float comb[kStreams * kStreams];  // comb[m * 4 + j]: stream m's share of new stream j
};
// Mixes of one token's residual x[4 * C] (bf16 values).
CpuMhcMix mhcMixes(const CpuExec& ex, const float* x, int64_t C, const CpuMhcWeights& w,
                   double rmsEps, double hcEps, int sinkhornIters);
// out[C] = bf16(sum_m pre[m] * x[m]).
void mhcCollapse(const CpuExec& ex, const float* x, int64_t C, const float* pre, float* out);
// x[j] = bf16(sum_m comb[m, j] * x[m] + post[j] * f), in place over x[4 * C].
void mhcPost(const CpuExec& ex, float* x, int64_t C, const CpuMhcMix& mix, const float* f);

// One prefill/decode call: `T` tokens at positions pos0 .. pos0 + T - 1 of `st`.
struct CpuForwardPass {
  CpuModel& m;
  CpuRequestState& st;
  const ModelConfig& cfg;
  const CpuWeights& w;
  CpuExec ex;
  int64_t T = 0, pos0 = 0;
  // Engram classes of every token so far, this call's included (the request's own list).
  std::vector<int64_t>& classes;

  // Decisions shared with later layers of the same call (YOCO, model.md §2).
  std::vector<std::vector<std::vector<int32_t>>> selections;  // [layer][t]: compressed entries
  std::vector<std::vector<int32_t>> candidateBlocks;          // [t]: blocks the candidate source kept

  CpuForwardPass(CpuModel& model, CpuRequestState& state, int64_t tokens);

  // The whole call: embedding, layers, final collapse, norm and head. ids were validated.
  Result<HostTensor> run(const std::vector<int32_t>& ids);

  // Sublayers. Activations are [T, width] row-major fp32 holding bf16 values where model.md
  // §9 rounds.
  Status engram(int layer, std::vector<float>& X);                                 // CpuLayersEngram.cpp
  void attention(int layer, const std::vector<float>& u, std::vector<float>& y);   // CpuLayersAttention.cpp
  void compress(int layer, const std::vector<float>& u);                           // CpuLayersCompressor.cpp
  void index(int layer, const std::vector<float>& u, const std::vector<float>& qr); // CpuLayersIndexer.cpp
  void moe(int layer, const std::vector<float>& u, std::vector<float>& y);         // CpuLayersMoe.cpp

  void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    ex.pool->parallelFor(n, fn);
  }
  void record(CpuDecisionKind kind, int layer, int64_t pos, const std::vector<int32_t>& chosen) {
    if (st.trace_) st.trace_->record(kind, layer, pos, chosen);
  }
};

}  // namespace deepinfer
