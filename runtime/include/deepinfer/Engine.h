// The engine API: what an inference engine links to run DeepSeek-V4.1 through deepinfer-jit's
// generated kernels, or through the C++ reference on the CPU (no MLIR, CUDA or cuBLAS headers
// here; a C version is deepinfer.h). `deepinfer-jit run` is a thin loop over this API.
//
//   auto engine = deepinfer::Engine::create({/*device*/ 0});
//   engine->loadModel("/models/v41-tiny");
//   auto id = engine->addRequest({prompt, /*maxNewTokens*/ 32});
//   while (!engine->finished(*id)) engine->step(stream);      // prefill chunks, then decodes
//   auto tokens = engine->tokens(*id);  engine->removeRequest(*id);
//
// Requests join and leave between steps (continuous batching: each step is one forward call
// that advances every live request by one prefill chunk or one decode token). With speculative
// decoding (DSpark, on by default when the model has draft layers), a step in which every live
// request is past its prompt drafts up to dspark_block_size tokens per request and verifies them
// in one target forward: each request gains 1 .. block + 1 tokens (greedy output equals one
// token per step, exactly on the CPU and up to near-ties between top logits on the GPU; sampled output has the same distribution). Work is enqueued on the
// caller's stream (a CUstream; nullptr = the legacy default stream) and the step returns once
// its tokens are known. For engines that bring their own model code, runOp launches one `di`
// op (docs/ops.md §11 names) on caller-owned device buffers.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/Tensor.h"
#include "deepinfer/TensorView.h"

namespace deepinfer {

struct EngineOptions {
  // "cuda": the generated kernels on GPU `device`; "cpu": the C++ reference forward pass
  // (docs/model.md; fp32, slow, no GPU needed: tests and small models). The cpu backend has no
  // paged KV budget (its caches grow in host memory) and no device logits.
  std::string backend = "cuda";
  int threads = 0;                // cpu: worker threads (0 = all hardware threads)
  int device = 0;
  std::string target;             // "" = the GPU's own arch; "sm_80" / "sm_86" run their PTX
  int64_t kvCacheBytes = 0;       // 0 = half of the free device memory after the weights
  int maxRequests = 16;
  int64_t maxChunkTokens = 256;   // prefill chunk
  bool speculative = true;        // DSpark speculative decoding when the model has draft layers
  // Several GPUs (cuda only; docs/parallelism.md): pp pipeline stages over contiguous layer
  // ranges, stageLayers layers each (empty: as even as possible), stage s on GPU gpus[s] (empty:
  // one GPU per stage from `device` on when that many are visible, else every stage on `device`).
  // Speculation needs pp = 1. tp > 1 (tensor parallelism) is not built yet: an error.
  int pp = 1;
  int tp = 1;
  std::vector<int> stageLayers;
  std::vector<int> gpus;
};

// The checks Engine::create makes of the parallel options (pp, tp, stageLayers, gpus) that need
// no model: counts >= 1, one GPU per stage, non-negative ordinals, tp 1, cuda backend for pp > 1.
Status checkParallelOptions(const EngineOptions& opts);

struct RequestParams {
  std::vector<int32_t> prompt;
  int64_t maxNewTokens = 16;
  double temperature = 0.0;       // 0 = greedy
  double topP = 1.0;
  uint64_t seed = 0;
  bool keepLogits = false;        // keep the last row of logits (lastLogits)
  // Keep every position's logits, prompt and generated (allLogits): row i is the distribution
  // after position i. The last generated token is then fed back as well, for its row.
  bool keepAllLogits = false;
};

struct StepEvent {
  int64_t request = 0;
  int32_t token = -1;             // the newest token produced by this step (-1: a prefill chunk only)
  std::vector<int32_t> tokens;    // every token produced by this step, in order (1 .. block + 1)
  int accepted = 0;               // speculative steps: drafts accepted (tokens.size() - 1)
  bool finished = false;
};

// Totals of the speculative steps so far (mean accepted per step = accepted / steps).
struct SpeculationStats {
  int64_t steps = 0;              // speculative steps (one per request per engine step)
  int64_t drafted = 0;            // drafts verified
  int64_t accepted = 0;           // drafts accepted
};

// A device tensor for runOp: address and shape (dtype is the op's for that name).
struct EngineTensor {
  uint64_t addr = 0;
  std::vector<int64_t> shape;
};

class EngineImpl;

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineOptions& opts = {});
  ~Engine();

  Status loadModel(const std::string& modelDir);
  bool hasModel() const;
  int64_t vocabSize() const;
  int64_t kvCapacityTokens() const;  // 0 on the cpu backend (no fixed cache)
  // One line naming the backend: "cuda, <GPU> (<target> kernels), KV capacity N tokens" or
  // "cpu, N threads"; with pipeline stages, then each stage's layers, GPU, weights and KV capacity.
  std::string describe() const;

  Result<int64_t> addRequest(const RequestParams& params);
  Status removeRequest(int64_t request);
  // Advances every live, unfinished request: the next prefill chunk, or one decode token.
  Result<std::vector<StepEvent>> step(void* stream = nullptr);
  bool finished(int64_t request) const;
  std::vector<int32_t> tokens(int64_t request) const;  // generated so far
  Result<std::vector<float>> lastLogits(int64_t request) const;
  // [prompt + generated, vocab] row-major, complete once the request finished (keepAllLogits).
  Result<std::vector<float>> allLogits(int64_t request) const;
  // The fp32 logits of the last step, still on the device: [events, vocab] row-major, row i for
  // event i of that step (what its token was sampled from; after a prefill chunk, the logits of
  // the chunk's last token). Complete when step() returns; valid until the next step() or
  // loadModel() reuses the memory. An error before the first step and on the cpu backend.
  Result<TensorView> stepLogits() const;
  int64_t liveRequests() const;
  bool speculative() const;       // the loaded model speculates (draft layers and the option on)
  SpeculationStats speculationStats() const;

  // One `di` op on caller-owned device buffers, specialized for the engine's target (cuda only).
  Status runOp(const std::string& op, const OpAttrs& attrs, const std::map<std::string, EngineTensor>& tensors,
               void* stream = nullptr);

 private:
  Engine() = default;
  std::unique_ptr<EngineImpl> impl_;
};

}  // namespace deepinfer
