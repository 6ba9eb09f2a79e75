// The CPU reference forward pass of DeepSeek-V4.1 (spec/model.md): plain fp32 loops with bf16
// rounding exactly at the points of model.md §9, caches in the byte formats of ops.md §2/§7.
// It is the oracle the GPU runtime is compared against and the `run --backend cpu` engine.
//
//   auto model = CpuModel::load(dir);            // config + weights dequantized to fp32
//   CpuRequestState req = (*model)->newRequest();
//   auto logits = (*model)->prefill(req, ids);   // [n, V] F32, one row per prompt position
//   auto next = (*model)->decode(req, token);    // [V] for the token after the prompt
//
// Results are deterministic and independent of the thread count. Prefill of n tokens and
// prefill of n - k tokens followed by k decode steps give identical logits (every per-token
// computation is the same whatever the batch).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "Checkpoint.h"
#include "CpuForwardCaches.h"
#include "CpuForwardTrace.h"
#include "EngramHash.h"
#include "ModelConfig.h"
#include "Rope.h"
#include "deepinfer/Error.h"
#include "deepinfer/Tensor.h"

namespace deepinfer {

struct CpuWeights;
class CpuThreadPool;

struct CpuModelOptions {
  int threads = 0;                // 0: the hardware thread count
  bool fp64Accumulation = false;  // accumulate in fp64 (flip-rate measurement, model.md §9)
};

// What a kv source layer keeps per request: the compressed KV cache, the index keys and, for
// ratio 2, the first token of an incomplete pair (its compressor projections, fp32).
struct CpuKvSourceState {
  CompressedKvCache compressed;
  IndexKeyCache indexKeys;
  bool hasTail = false;
  int64_t tailPos = -1;
  std::vector<float> tailKv, tailGate;
};

// One request: caches of every layer, its position, the token classes engram n-grams read.
class CpuRequestState {
 public:
  int64_t position() const { return position_; }  // tokens processed so far
  const CpuMechanismCounters& counters() const { return counters_; }
  // Records every discrete decision into `trace` from now on (nullptr stops recording).
  void setTrace(CpuDecisionTrace* trace) { trace_ = trace; }

  // Inspection (tests): a layer's window ring and a kv source's compressed state.
  const PagedKvCache& windowCache(int layer) const { return windows_.at(size_t(layer)); }
  const CpuKvSourceState& kvSource(int layer) const { return sources_.at(size_t(layer)); }

 private:
  friend class CpuModel;
  friend struct CpuForwardPass;
  int64_t position_ = 0;
  std::vector<PagedKvCache> windows_;     // per layer, ring of `sliding_window` rows
  std::vector<CpuKvSourceState> sources_; // per layer (used by kv sources only)
  std::vector<int64_t> classes_;          // engram class of every processed token
  CpuMechanismCounters counters_;
  CpuDecisionTrace* trace_ = nullptr;
  bool unusable_ = false;                 // a call failed half-way: caches are inconsistent
};

class CpuModel {
 public:
  // Reads config.json, the checkpoint (weights dequantized to fp32) and, with engram layers,
  // token_map.i32 and the engram hash constants. Errors name the file or tensor.
  static Result<std::unique_ptr<CpuModel>> load(const std::string& modelDir,
                                                const CpuModelOptions& opts = {});
  ~CpuModel();

  const ModelConfig& config() const { return cfg_; }
  int threads() const;
  void setFp64Accumulation(bool on) { fp64_ = on; }

  CpuRequestState newRequest() const;

  // Runs `ids` at the next positions of `state`; returns fp32 logits [ids.size(), V], one row
  // per position. Not thread-safe (one call at a time per model). Bad input (ids outside the
  // vocabulary, too many positions) is rejected before anything changes; a failure half-way
  // (an engram table read) leaves the state unusable, and later calls on it fail.
  Result<HostTensor> prefill(CpuRequestState& state, const std::vector<int32_t>& ids);
  // One token: prefill of a single id; returns its logits [V].
  Result<std::vector<float>> decode(CpuRequestState& state, int32_t token);

 private:
  CpuModel();
  friend struct CpuForwardPass;

  ModelConfig cfg_;
  std::unique_ptr<Checkpoint> ckpt_;
  std::unique_ptr<CpuWeights> weights_;
  std::vector<RopeTable> rope_;          // per layer
  std::unique_ptr<EngramHashParams> engramHash_;
  std::vector<int32_t> tokenMap_;
  int64_t padClass_ = 0;
  std::unique_ptr<CpuThreadPool> pool_;
  bool fp64_ = false;
};

// The structure the forward passes (CPU and GPU) rely on beyond what finalizeModelConfig
// checks; errors start with `who` ("cpu forward", "gpu forward").
Status checkForwardSupported(const ModelConfig& cfg, const std::string& who);

// Greedy choice: the index of the largest logit, ties to the lower index.
int32_t argmaxToken(const float* logits, int64_t n);

}  // namespace deepinfer
