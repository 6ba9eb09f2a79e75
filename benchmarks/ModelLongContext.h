// deepinfer-model-bench --long-context N: the device memory a request of N tokens needs beside
// the weights, from the config alone, so a run that cannot fit is refused before loading with
// the shortfall named. Mirrors how GpuModel sizes its KV pools (finishLoad) and which scratch
// buffers its prefill grows with the context (GpuForwardAttention.cpp: the indexer's scores, the
// gathered attention workspaces, the candidate block scores). Pure arithmetic: unit-tested.
#pragma once
#include <cstdint>
#include <string>

#include "deepinfer/Error.h"
#include "model/ModelConfig.h"

namespace deepinfer::bench {

struct LongContextMemory {
  int64_t context = 0, chunk = 0;
  int maxRequests = 0;
  double kvBytesPerToken = 0;    // compressed + index-key cache bytes per context token (64-token pages)
  int64_t windowBytes = 0;       // window rings of maxRequests requests (sliding_window - 1 + chunk rows per layer)
  int64_t kvBytes = 0;           // the KV budget handed to the runtime: window rings + context + one chunk of tokens
  int64_t scoresBytes = 0;       // the indexer's scores [chunk, N] f32 at the context (one buffer, reused per layer)
  int64_t workspaceBytes = 0;    // gathered attention rows, bf16 [M, 512] per kv source (+ the window-only one)
  int64_t blockScoresBytes = 0;  // the candidate source's block scores [chunk, blocks] f32
  int64_t reserveBytes = 0;      // one chunk's activations, cuBLAS's workspace, kernels, the CUDA context
  // The scratch buffers above, as the runtime allocates them (25% headroom on each).
  int64_t scratchBytes() const { return scoresBytes + workspaceBytes + blockScoresBytes; }
  int64_t total() const { return kvBytes + scratchBytes() + reserveBytes; }
};

// Fixed room for what does not grow with the context: activations of one chunk (well under 1 GB at
// chunk 1024 and V4.1-Flash widths), cuBLAS's 32 MiB workspace, loaded kernels, the CUDA context.
inline constexpr int64_t kLongContextReserveBytes = int64_t(4) << 30;

// The memory for one request of `context` tokens prefilled in chunks of `chunk`, with room for
// `maxRequests` requests' window rings. Fails when the context exceeds max_position_embeddings.
Result<LongContextMemory> longContextMemory(const ModelConfig& cfg, int64_t context, int64_t chunk, int maxRequests);

// weights + memory.total() <= freeBytes, else an error naming every part and the shortfall.
Status checkLongContextFits(const LongContextMemory& m, int64_t weightBytes, int64_t freeBytes);

// "weights 28.95 GB + KV cache 1.14 GB (...) + prefill scratch ... = ... GB of ... GB free".
std::string describeLongContextMemory(const LongContextMemory& m, int64_t weightBytes, int64_t freeBytes);

}  // namespace deepinfer::bench
