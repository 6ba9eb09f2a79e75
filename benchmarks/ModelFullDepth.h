// deepinfer-model-bench's full-depth mode (--synthetic flash): V4.1-Flash's real depth (40
// layers) and widths with synthetic weights in the checkpoint's formats, built on the GPU without
// a checkpoint (GpuModel::loadSynthetic), with as many routed experts per layer as fit next to a
// reserve for the KV cache and workspaces, and the DSpark draft stages (mtp.0-2 with their own
// 128-expert MoE, main_proj, the Markov and confidence heads) when they fit too. A token reads
// num_experts_per_tok experts either way, so per-token bytes and FLOPs are the real model's.
// Pure arithmetic: no GPU, unit-tested.
#pragma once
#include <cstdint>
#include <string>

#include "deepinfer/Error.h"
#include "model/ModelConfig.h"

namespace deepinfer::bench {

// What the bench keeps free next to the weights unless told otherwise: a KV budget far above the
// measured contexts' needs (~1.8 KB per token; a 64K context and 12 decode streams fit many times
// over, window and draft rings of 16 requests included) and room for prefill workspaces (chunk
// activations, gathered attention rows, logits), kernels and the CUDA context.
constexpr int64_t kFullDepthKvBytes = int64_t(4) << 30;
constexpr int64_t kFullDepthWorkspaceBytes = int64_t(10) << 30;

// V4.1-Flash (v41FlashDefaults) with `experts` routed experts per layer (the draft MoE keeps at
// most as many); everything else as the model card, the DSpark fields included. Fails for
// experts outside [num_experts_per_tok, 384].
Result<ModelConfig> fullDepthConfig(int experts);

// Device bytes of the DSpark draft of `cfg`: every mtp.* tensor in the format the config's
// weight table gives it (gpuWeightBytes with the draft minus without; 0 without DSpark fields).
Result<int64_t> draftWeightBytes(const ModelConfig& cfg);
// draftWeightBytes(fullDepthConfig(experts)).
Result<int64_t> fullDepthDraftBytes(int experts);

struct FullDepthPlan {
  int experts = 0;                 // routed experts per layer
  int64_t weightBytes = 0;         // gpuWeightBytes of fullDepthConfig(experts), without the DSpark draft
  int64_t bytesPerExpert = 0;      // one more routed expert in every layer (fp4 codes + scales, router row)
  int64_t fixedBytes = 0;          // the rest (weightBytes - experts * bytesPerExpert)
  int64_t reserveBytes = 0;        // kept free for the KV cache, workspaces, kernels and the CUDA context
  int64_t freeBytes = 0;           // device memory free before loading
  bool draft = false;              // the DSpark draft is built (asked for and it fits)
  int64_t draftBytes = 0;          // fullDepthDraftBytes(experts), also when it is left out
  std::string draftLeftOut;        // why a draft that was asked for is not built (empty otherwise)
  int64_t totalBytes() const { return weightBytes + (draft ? draftBytes : 0); }
};

// The plan for `freeBytes` of free device memory and `reserveBytes` kept for everything but the
// weights. requestedExperts > 0: that many, refused (naming the bytes) when they do not fit;
// 0: the most that fit, a multiple of 16 up to 384, refused when not even 16 fit. With
// `wantDraft` the draft's bytes are planned too: the automatic count leaves room for it (fewer
// experts); when it cannot fit (next to the requested experts, or next to 16) the plan keeps the
// experts, leaves the draft out and says why in draftLeftOut.
Result<FullDepthPlan> planFullDepth(int64_t freeBytes, int64_t reserveBytes, int requestedExperts, bool wantDraft);

// The synthetic models of --synthetic: "flash" (fullDepthConfig, as many experts as fit) and
// "proxy" (make-model's proxy preset: 7 layers at V4.1-Flash widths, 128 experts, without a
// checkpoint on disk). Unknown names are an error listing both.
Result<ModelConfig> syntheticModelConfig(const std::string& name, int experts);
// The plan of --synthetic `name`: planFullDepth for "flash"; for "proxy" its fixed expert count,
// refused with the bytes when it does not fit (the draft left out, saying why, when only it does not).
Result<FullDepthPlan> planSynthetic(const std::string& name, int64_t freeBytes, int64_t reserveBytes,
                                    int requestedExperts, bool wantDraft);

}  // namespace deepinfer::bench
