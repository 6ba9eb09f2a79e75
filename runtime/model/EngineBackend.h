// What Engine drives: a model with per-request caches that runs forward calls and speculative
// steps. Two implementations: the generated kernels on a GPU (gpu/GpuEngineBackend.cpp, over
// GpuModel) and the C++ reference on the CPU (CpuEngineBackend.cpp, over CpuModel). Engine keeps
// the requests' sampling state and token bookkeeping above this line, once for both.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/Tensor.h"
#include "deepinfer/TensorView.h"
#include "model/ModelConfig.h"
#include "model/Sampling.h"

namespace deepinfer {

class Device;
struct EngineOptions;

struct EngineSpecStep {
  int64_t request = 0;              // a speculative request whose prompt has been run
  int32_t next = 0;                 // the newest emitted token, at the request's position
  SamplingOptions sampling;
  int64_t maxDrafts = -1;           // verify at most this many drafts (< 0: the block size)
  bool keepLogits = false;          // return the target's logits at the committed positions
};

struct EngineSpecOutcome {
  int drafts = 0;                   // drafts verified
  int accepted = 0;                 // a
  std::vector<int32_t> emitted;     // d_1 .. d_a, b
  HostTensor logits;                // [a + 1, V] with keepLogits, else empty
};

class EngineBackend {
 public:
  virtual ~EngineBackend() = default;
  virtual const ModelConfig& config() const = 0;
  virtual int64_t capacityTokens() const = 0;  // 0: no fixed KV budget
  virtual bool speculation() const = 0;        // the model has a draft and speculation is allowed
  virtual int draftBlockSize() const = 0;
  virtual std::string describe() const = 0;

  virtual Result<int64_t> newRequest(bool speculative) = 0;
  virtual Status releaseRequest(int64_t request) = 0;
  virtual void setStream(void* stream) = 0;
  // One call over several requests, each bringing a prefill chunk or one decode token: logits
  // per request, [n, V] or, with lastOnly, [1, V].
  virtual Result<std::vector<HostTensor>> forward(const std::vector<std::pair<int64_t, std::vector<int32_t>>>& work,
                                                  bool lastOnly) = 0;
  virtual Result<std::vector<EngineSpecOutcome>> speculativeStep(const std::vector<EngineSpecStep>& steps) = 0;
  // The last forward's logits still on the device: {addr, rows}; an error where there is no device.
  virtual Result<TensorView> deviceLogits() const = 0;
};

Result<std::unique_ptr<EngineBackend>> loadGpuEngineBackend(const std::string& modelDir,
                                                            const std::shared_ptr<Device>& dev,
                                                            const EngineOptions& opts);
Result<std::unique_ptr<EngineBackend>> loadCpuEngineBackend(const std::string& modelDir, const EngineOptions& opts);

}  // namespace deepinfer
