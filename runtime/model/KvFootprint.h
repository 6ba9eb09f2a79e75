// The KV cache's geometry as the GPU runtime allocates it (docs/model.md §11), for the host-side
// planners that size memory without a device: the multi-GPU split (parallel/ShardPlan.cpp) and
// the long-context bench (benchmarks/ModelLongContext.cpp). GpuForward.h's kGpuPageTokens is
// asserted equal to kKvPageTokens; GpuModel sizes its pools with these functions.
#pragma once
#include <algorithm>
#include <cstdint>

#include "deepinfer/OpShapes.h"
#include "model/ModelConfig.h"

namespace deepinfer {

constexpr int64_t kKvPageTokens = 64;  // tokens per page of every cache (window, compressed, index)

inline int64_t kvPageBytes() { return mlaPageBytes(kKvPageTokens); }
inline int64_t indexKeyPageBytes(const ModelConfig& cfg) {
  return kKvPageTokens * (std::max<int64_t>(cfg.indexHeadDim, 1) + 4);
}
// A window ring holds sliding_window - 1 + one chunk rows, in whole pages (a chunk never
// overwrites a row one of its own tokens still reads).
inline int64_t windowRingRows(const ModelConfig& cfg, int64_t chunkTokens) {
  return (cfg.slidingWindow - 1 + chunkTokens + kKvPageTokens - 1) / kKvPageTokens * kKvPageTokens;
}
// A DSpark draft ring: sliding_window + block rows, in whole pages.
inline int64_t draftRingRows(const ModelConfig& cfg) {
  return (cfg.slidingWindow + cfg.dsparkBlockSize + kKvPageTokens - 1) / kKvPageTokens * kKvPageTokens;
}
// Compressed-cache plus index-key bytes per context token of kv source `layer` (ratio > 0).
inline double kvSourceBytesPerToken(const ModelConfig& cfg, int layer) {
  return double(kvPageBytes() + indexKeyPageBytes(cfg)) / double(kKvPageTokens * cfg.role(layer).ratio);
}

}  // namespace deepinfer
