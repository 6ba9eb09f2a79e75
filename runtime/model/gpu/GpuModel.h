// DeepSeek-V4.1 on the GPU (spec/model.md) through generated kernels: the `di` ops for the
// KV-cache writer, gather, index combine, sparse attention, lightning indexer, top-k and mHC;
// cuBLAS for the dense projections and experts (bf16 weights dequantized exactly at load); the
// model kernels of templates/model/ for the small ops. Numerics follow the CPU reference
// (runtime/model/CpuForward.h) rounding point for rounding point.
//
//   auto model = GpuModel::load(dir, device, {});       // target: the local GPU (cubin)
//   auto req = model->newRequest();                      // KV pages reserved as it grows
//   auto logits = model->prefill(*req, ids);             // [n, V] F32, chunked
//   auto next = model->decode(*req, token);              // [V]
//   model->releaseRequest(*req);
//
// One call at a time per model; calls are ordered on one stream (setStream; default: legacy).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/Device.h"
#include "deepinfer/Error.h"
#include "deepinfer/Jit.h"
#include "deepinfer/Tensor.h"
#include "model/ModelConfig.h"

namespace deepinfer {

struct GpuModelOptions {
  std::string target;               // "" = the local GPU's arch (cubin); "sm_80", "sm_86": their PTX
  int64_t maxChunkTokens = 256;     // prefill runs in chunks of at most this many tokens
  int64_t kvCacheBytes = 0;         // device bytes for the KV caches; 0 = kvMemoryFraction of free
  double kvMemoryFraction = 0.5;
  int maxRequests = 16;             // requests that may hold caches at once
  bool cudaGraphs = true;           // decode steps replay CUDA graphs captured per step shape
  JitOptions jit;
};

// What the runtime did, for tests and reports.
struct GpuForwardCounters {
  int64_t forwards = 0;             // forward calls (prefill chunks + decode steps)
  int64_t tokens = 0;
  int64_t kvMetadataBuilds = 0;     // compressed-cache gathers + page tables (once per kv source per forward)
  int64_t indexRowBuilds = 0;       // combined index rows (once per index source per forward)
  int64_t attentionLayers = 0;      // layers that attended (they reuse the metadata above)
  int64_t engramLookups = 0;
  int64_t graphCaptures = 0;        // decode-step graphs captured
  int64_t graphLaunches = 0;        // decode steps run by replaying a graph
};

struct GpuKvCapacity {
  int64_t tokens = 0;               // context tokens the compressed/index caches can hold
  int64_t bytesPerToken = 0;        // compressed KV + index keys of every kv source, per token
  int64_t windowBytesPerRequest = 0;
  int64_t totalBytes = 0;
};

class GpuModelImpl;

class GpuModel {
 public:
  static Result<std::unique_ptr<GpuModel>> load(const std::string& modelDir, std::shared_ptr<Device> dev,
                                                const GpuModelOptions& opts = {});
  ~GpuModel();

  const ModelConfig& config() const;
  const GpuKvCapacity& capacity() const;
  const GpuForwardCounters& counters() const;
  int64_t pagesInUse() const;       // KV pages held by live requests (0 after all are released)
  std::string targetName() const;

  Result<int64_t> newRequest();
  Status releaseRequest(int64_t request);
  Result<int64_t> position(int64_t request) const;

  // Runs `ids` at the request's next positions in chunks of maxChunkTokens; fp32 logits
  // [ids.size(), V] (or [1, V], the last position's, with lastOnly). Bad ids or a full cache are
  // rejected before anything changes; a failure half-way makes the request unusable.
  Result<HostTensor> prefill(int64_t request, const std::vector<int32_t>& ids, bool lastOnly = false);
  Result<std::vector<float>> decode(int64_t request, int32_t token);
  // One forward call over several requests at once (continuous batching): each brings up to
  // maxChunkTokens tokens (a prefill chunk or one decode token). Logits per request, in order:
  // [n, V], or [1, V] with lastOnly.
  Result<std::vector<HostTensor>> forward(const std::vector<std::pair<int64_t, std::vector<int32_t>>>& work,
                                          bool lastOnly = false);

  // The stream later calls enqueue their work on (a CUstream; nullptr = the legacy default
  // stream). Calls still return only once their logits are on the host.
  void setStream(void* stream);

 private:
  GpuModel() = default;
  std::unique_ptr<GpuModelImpl> impl_;
};

}  // namespace deepinfer
