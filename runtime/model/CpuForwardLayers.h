// Internals of the CPU forward pass: one forward call over a chunk of tokens of one request,
// with its sublayers implemented in CpuLayers*.cpp. Not part of the public API.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "CpuForward.h"
#include "CpuForwardMath.h"
#include "CpuForwardWeights.h"

namespace deepinfer {

// --- mHC (docs/ops.md §8), n = 4 streams; CpuLayersMhc.cpp ---
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

// A sublayer: u [T, C] (bf16 values) -> y [T, C].
using CpuSublayer = std::function<void(const std::vector<float>& u, std::vector<float>& y)>;

// One block with delayed mHC (docs/model.md §5) over T rows: X [T, 4, C] in place; `pre` [T, 4] holds
// the pre-mix the attention collapses with and returns this block's FFN pre-mix. Shared by the
// backbone layers and the DSpark draft stages.
void runMhcBlock(const CpuExec& ex, const ModelConfig& cfg, const CpuLayerWeights& lw, int64_t T,
                 std::vector<float>& X, std::vector<float>& pre, const CpuSublayer& attention,
                 const CpuSublayer& moe);
// out[t] = rmsnorm(bf16(sum_m pre[t, m] * X[t, m]), norm) for T rows (the final collapse).
void collapseAndNorm(const CpuExec& ex, const ModelConfig& cfg, int64_t T, const std::vector<float>& X,
                     const std::vector<float>& pre, const std::vector<float>& norm, std::vector<float>& out);

// --- attention building blocks (CpuLayersAttention.cpp) ---
// out = softmax over `rows` of q . row * scale (the sink joins the denominator only, docs/ops.md §5)
// applied to the rows, for one head; rounded to bf16.
void attendHead(const CpuExec& ex, const float* q, const std::vector<const float*>& rows, float sink, float scale,
                float* out);
// z[g] = o[g] @ wo_a[g]^T over groups of H/G heads (rounded), y = bf16(wo_b z). o [T, H*D].
void attentionOutput(const CpuExec& ex, const ModelConfig& cfg, const CpuAttentionWeights& aw,
                     const std::vector<float>& o, int64_t T, std::vector<float>& y);
// The window row format's quantize-dequantize of one 512-wide row (docs/ops.md §2), in place: what a
// cache write followed by a read gives.
void windowRowRoundTrip(float* row);

// --- MoE (CpuLayersMoe.cpp) ---
// The MoE sublayer over T rows with E routed experts, top-k (docs/model.md §7); `onRoute(t, ids)`
// sees every row's chosen experts (nullptr: nobody listens).
void moeForward(const CpuExec& ex, const ModelConfig& cfg, const CpuMoeWeights& mw, int64_t E, int64_t k,
                const std::vector<float>& u, int64_t T, std::vector<float>& y,
                const std::function<void(int64_t, const std::vector<int32_t>&)>& onRoute);

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

  // Decisions shared with later layers of the same call (YOCO, docs/model.md §2).
  std::vector<std::vector<std::vector<int32_t>>> selections;  // [layer][t]: compressed entries
  std::vector<std::vector<int32_t>> candidateBlocks;          // [t]: blocks the candidate source kept

  CpuForwardPass(CpuModel& model, CpuRequestState& state, int64_t tokens);

  // DSpark target features (docs/dspark.md §2): when set, the mean of the four streams entering
  // each tapped layer, [T, taps * C] (bf16 values), taps in ascending layer order.
  std::vector<float>* tapFeatures = nullptr;

  // The whole call: embedding, layers, final collapse, norm and head. ids were validated.
  Result<HostTensor> run(const std::vector<int32_t>& ids);
  void captureTap(const std::vector<float>& X, size_t tap, size_t taps);

  // Sublayers. Activations are [T, width] row-major fp32 holding bf16 values where docs/model.md
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
