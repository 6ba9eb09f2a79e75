// deepinfer-model-bench's full-depth mode (--synthetic flash): V4.1-Flash's real depth (40
// layers) and widths with synthetic weights in the checkpoint's formats, built on the GPU without
// a checkpoint (GpuModel::loadSynthetic), with as many routed experts per layer as fit next to a
// reserve for the KV cache and workspaces. A token reads num_experts_per_tok experts either way,
// so per-token bytes and FLOPs are the real model's. Pure arithmetic: no GPU, unit-tested.
#pragma once
#include <cstdint>

#include "deepinfer/Error.h"
#include "model/ModelConfig.h"

namespace deepinfer::bench {

// V4.1-Flash (v41FlashDefaults) with `experts` routed experts per layer (the draft MoE keeps at
// most as many); everything else as the model card. Fails for experts outside
// [num_experts_per_tok, 384].
Result<ModelConfig> fullDepthConfig(int experts);

struct FullDepthPlan {
  int experts = 0;                 // routed experts per layer
  int64_t weightBytes = 0;         // gpuWeightBytes of fullDepthConfig(experts), without the DSpark draft
  int64_t bytesPerExpert = 0;      // one more routed expert in every layer (fp4 codes + scales, router row)
  int64_t fixedBytes = 0;          // the rest (weightBytes - experts * bytesPerExpert)
  int64_t reserveBytes = 0;        // kept free for the KV cache, workspaces, kernels and the CUDA context
  int64_t freeBytes = 0;           // device memory free before loading
};

// The plan for `freeBytes` of free device memory and `reserveBytes` kept for everything but the
// weights. requestedExperts > 0: that many, refused (naming the bytes) when they do not fit;
// 0: the most that fit, a multiple of 16 up to 384, refused when not even 16 fit.
Result<FullDepthPlan> planFullDepth(int64_t freeBytes, int64_t reserveBytes, int requestedExperts);

}  // namespace deepinfer::bench
