// The CPU reference forward pass of DeepSeek-V4.1 (docs/model.md): plain fp32 loops with bf16
// rounding exactly at the points of docs/model.md §9, caches in the byte formats of docs/ops.md §2/§7.
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
#include "CpuSpeculative.h"
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
  bool fp64Accumulation = false;  // accumulate in fp64 (flip-rate measurement, docs/model.md §9)
};

// What a kv source layer keeps per request: the compressed KV cache, the index keys and, for
// ratio 2, the first token of an incomplete pair (its compressor projections, fp32).
struct CpuKvSourceState {
  CompressedKvCache compressed;
  IndexKeyCache indexKeys;
  bool hasTail = false;
  int64_t tailPos = -1;
  std::vector<float> tailKv, tailGate;
  // Speculative requests: the tail as it was before the last call and the (kv, gate) of every
  // even position of that call, so a rollback inside the call can restore it (docs/dspark.md §5).
  struct Tail {
    bool has = false;
    int64_t pos = -1;
    std::vector<float> kv, gate;
  };
  Tail beforeCall;
  std::vector<Tail> callTails;
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
  // Tests poison rows a rollback made invisible, to prove nothing reads them again.
  PagedKvCache& mutableWindowCache(int layer) { return windows_.at(size_t(layer)); }
  const CpuKvSourceState& kvSource(int layer) const { return sources_.at(size_t(layer)); }
  // Slots of every window ring: sliding_window, plus the draft block size for speculative
  // requests (a verify chunk must not overwrite rows its rollback still needs, docs/dspark.md §5).
  int64_t windowRingRows() const { return ringRows_; }
  bool speculative() const { return speculative_; }
  // DSpark draft stage `s`'s ring (sliding_window rows, slot p mod W; docs/dspark.md §3).
  const PagedKvCache& draftRing(int stage) const { return draftRings_.at(size_t(stage)); }
  const std::vector<int64_t>& tokenClasses() const { return classes_; }

 private:
  friend class CpuModel;
  friend struct CpuForwardPass;
  friend struct CpuDraftPass;
  int64_t position_ = 0;
  int64_t ringRows_ = 0;
  bool speculative_ = false;
  int64_t lastCallStart_ = 0;             // position where the last forward call started
  std::vector<PagedKvCache> draftRings_;  // per draft stage (speculative requests)
  std::vector<PagedKvCache> windows_;     // per layer, ring of `ringRows_` rows
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

  // --- DSpark speculative decoding (docs/dspark.md; types in CpuSpeculative.h) ---
  // Whether the model can speculate: DSpark configured and its mtp.* tensors loaded.
  bool hasDraft() const;
  int draftBlockSize() const { return cfg_.dsparkBlockSize; }
  // A request that keeps what speculation needs: draft rings (filled by every prefill), window
  // rings with room for a rejected block, and the call's compressor tails. Fails without a draft.
  Result<CpuRequestState> newSpeculativeRequest() const;
  // One draft pass for several requests at once (their rows side by side; each attends only to
  // its own ring and block). Does not change the states.
  Result<std::vector<CpuDraftBlock>> draft(const std::vector<CpuDraftInput>& inputs);
  // One speculative step per request: draft, one target forward over [next, d_1 .. d_m], accept,
  // roll the target caches back to the last accepted token and commit its features to the draft
  // rings. m = min(maxDrafts, B), 0 when the block would pass max_position_embeddings (a plain
  // decode step then). A failure makes the failing request's state unusable.
  Result<std::vector<CpuSpecOutcome>> speculativeStep(std::vector<CpuSpecStep>& steps);
  // Forgets positions >= newPosition: window rows past it become invisible, compressed and
  // index-key entries built from them are dropped, the ratio-2 tail and the engram history are
  // restored. Only inside the last call, by at most the ring's spare rows, on a speculative
  // request.
  Status rollback(CpuRequestState& state, int64_t newPosition) const;

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
  friend struct CpuDraftPass;

  ModelConfig cfg_;
  std::unique_ptr<Checkpoint> ckpt_;
  std::unique_ptr<CpuWeights> weights_;
  std::vector<RopeTable> rope_;          // per layer
  std::unique_ptr<EngramHashParams> engramHash_;
  std::vector<int32_t> tokenMap_;
  int64_t padClass_ = 0;
  std::unique_ptr<CpuThreadPool> pool_;
  bool fp64_ = false;
  RopeTable draftRope_;                  // the draft stages' (ratio 0) table

  // One target forward over `ids` with the checks of prefill; with `mainX`, also the DSpark
  // features main_x [ids.size(), C] of rows [firstFeatureRow, ids.size()) (others 0).
  Result<HostTensor> forward(CpuRequestState& state, const std::vector<int32_t>& ids, std::vector<float>* mainX,
                             int64_t firstFeatureRow);
  // Writes commit(p) (docs/dspark.md §3) for p = pos0 + i, i < n, into every draft ring.
  void commitDraftRows(CpuRequestState& state, int64_t pos0, const float* mainX, int64_t n);
};

// The structure the forward passes (CPU and GPU) rely on beyond what finalizeModelConfig
// checks; errors start with `who` ("cpu forward", "gpu forward").
Status checkForwardSupported(const ModelConfig& cfg, const std::string& who);

// Greedy choice: the index of the largest logit, ties to the lower index.
int32_t argmaxToken(const float* logits, int64_t n);

}  // namespace deepinfer
