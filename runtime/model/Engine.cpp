// Engine: requests with their sampling state over a GpuModel, stepped one chunk or one token at
// a time, and the kernel-level entry point (one `di` op on caller buffers).
#include "deepinfer/Engine.h"

#include <algorithm>
#include <fmt/format.h>

#include "lib/DiOps.h"
#include "model/gpu/GpuModel.h"
#include "deepinfer/Device.h"
#include "deepinfer/Jit.h"
#include "model/Sampling.h"

namespace deepinfer {

struct EngineRequest {
  RequestParams params;
  SamplingOptions sampling;
  int64_t gpuRequest = 0;
  size_t prefilled = 0;              // prompt tokens already run
  std::vector<int32_t> generated;
  std::vector<float> lastLogits;
  bool finished = false;
};

class EngineImpl {
 public:
  EngineOptions opts;
  std::shared_ptr<Device> dev;
  TargetProfile target;
  std::unique_ptr<Jit> jit;          // kernel-level ops
  std::unique_ptr<DiOps> ops;
  std::unique_ptr<GpuModel> model;
  std::map<int64_t, EngineRequest> requests;
  int64_t nextId = 1;
};

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(const EngineOptions& opts) {
  auto dev = Device::open(opts.device);
  if (!dev.ok()) return Error{fmt::format("engine: no GPU {}: {}", opts.device, dev.error().message)};
  std::unique_ptr<Engine> e(new Engine());
  e->impl_ = std::make_unique<EngineImpl>();
  EngineImpl& m = *e->impl_;
  m.opts = opts;
  m.dev = *dev;
  if (opts.target.empty()) {
    m.target = m.dev->info().profile;
  } else {
    auto t = findTarget(opts.target);
    if (!t) return Error{fmt::format("engine: unknown target '{}'", opts.target)};
    m.target = *t;
  }
  m.jit = std::make_unique<Jit>(m.dev);
  m.ops = std::make_unique<DiOps>(*m.jit, m.target);
  return e;
}

Status Engine::loadModel(const std::string& modelDir) {
  EngineImpl& m = *impl_;
  if (!m.requests.empty()) return Error{"engine: cannot load a model while requests are live"};
  GpuModelOptions go;
  go.target = m.opts.target;
  go.kvCacheBytes = m.opts.kvCacheBytes;
  go.maxRequests = m.opts.maxRequests;
  go.maxChunkTokens = m.opts.maxChunkTokens;
  m.model.reset();
  auto model = GpuModel::load(modelDir, m.dev, go);
  if (!model.ok()) return Error{fmt::format("engine: loading '{}': {}", modelDir, model.error().message)};
  m.model = std::move(*model);
  return {};
}

bool Engine::hasModel() const { return impl_->model != nullptr; }
int64_t Engine::vocabSize() const { return impl_->model ? impl_->model->config().vocabSize : 0; }
int64_t Engine::kvCapacityTokens() const { return impl_->model ? impl_->model->capacity().tokens : 0; }
int64_t Engine::liveRequests() const { return int64_t(impl_->requests.size()); }

Result<int64_t> Engine::addRequest(const RequestParams& params) {
  EngineImpl& m = *impl_;
  if (!m.model) return Error{"engine: no model loaded (loadModel first)"};
  if (params.prompt.empty()) return Error{"engine: a request needs at least one prompt token"};
  if (params.maxNewTokens < 0) return Error{fmt::format("engine: maxNewTokens {} < 0", params.maxNewTokens)};
  for (size_t i = 0; i < params.prompt.size(); ++i)
    if (params.prompt[i] < 0 || params.prompt[i] >= vocabSize())
      return Error{fmt::format("engine: prompt token {} (at index {}) is outside the vocabulary [0, {})",
                               params.prompt[i], i, vocabSize())};
  EngineRequest r;
  r.params = params;
  r.sampling.temperature = params.temperature;
  r.sampling.topP = params.topP;
  r.sampling.seed = params.seed;
  DI_TRY(validateSampling(r.sampling));
  auto g = m.model->newRequest();
  if (!g.ok()) return Error{fmt::format("engine: {}", g.error().message)};
  r.gpuRequest = *g;
  const int64_t id = m.nextId++;
  m.requests.emplace(id, std::move(r));
  return id;
}

Status Engine::removeRequest(int64_t request) {
  EngineImpl& m = *impl_;
  auto it = m.requests.find(request);
  if (it == m.requests.end()) return Error{fmt::format("engine: no request {}", request)};
  Status st = m.model->releaseRequest(it->second.gpuRequest);
  m.requests.erase(it);
  return st;
}

bool Engine::finished(int64_t request) const {
  auto it = impl_->requests.find(request);
  return it == impl_->requests.end() || it->second.finished;
}

std::vector<int32_t> Engine::tokens(int64_t request) const {
  auto it = impl_->requests.find(request);
  return it == impl_->requests.end() ? std::vector<int32_t>{} : it->second.generated;
}

Result<std::vector<float>> Engine::lastLogits(int64_t request) const {
  auto it = impl_->requests.find(request);
  if (it == impl_->requests.end()) return Error{fmt::format("engine: no request {}", request)};
  if (!it->second.params.keepLogits) return Error{fmt::format("engine: request {} does not keep logits", request)};
  if (it->second.lastLogits.empty()) return Error{fmt::format("engine: request {} has no logits yet", request)};
  return it->second.lastLogits;
}

Result<std::vector<StepEvent>> Engine::step(void* stream) {
  EngineImpl& m = *impl_;
  if (!m.model) return Error{"engine: no model loaded"};
  m.model->setStream(stream);
  const int64_t V = vocabSize();
  // One forward call for every live request: its next prefill chunk or its last token.
  std::vector<std::pair<int64_t, std::vector<int32_t>>> work;
  std::vector<int64_t> ids;
  for (auto& [id, r] : m.requests) {
    if (r.finished) continue;
    std::vector<int32_t> tokens;
    if (r.prefilled < r.params.prompt.size()) {
      const size_t len = std::min<size_t>(size_t(m.opts.maxChunkTokens), r.params.prompt.size() - r.prefilled);
      tokens.assign(r.params.prompt.begin() + int64_t(r.prefilled), r.params.prompt.begin() + int64_t(r.prefilled + len));
    } else {
      tokens = {r.generated.back()};
    }
    work.emplace_back(r.gpuRequest, std::move(tokens));
    ids.push_back(id);
  }
  std::vector<StepEvent> events;
  if (work.empty()) return events;
  auto logits = m.model->forward(work, /*lastOnly=*/true);
  if (!logits.ok()) return Error{fmt::format("engine: step: {}", logits.error().message)};
  for (size_t i = 0; i < ids.size(); ++i) {
    EngineRequest& r = m.requests.at(ids[i]);
    StepEvent ev;
    ev.request = ids[i];
    const bool wasPrefill = r.prefilled < r.params.prompt.size();
    if (wasPrefill) r.prefilled += work[i].second.size();
    if (!wasPrefill || r.prefilled == r.params.prompt.size()) {
      const float* row = (*logits)[i].ptr<float>();
      if (r.params.keepLogits) r.lastLogits.assign(row, row + V);
      if (int64_t(r.generated.size()) < r.params.maxNewTokens) {
        ev.token = sampleToken(row, V, r.sampling, uint64_t(r.generated.size()));
        r.generated.push_back(ev.token);
      }
      // The last generated token is not fed back: nothing reads its logits.
      r.finished = int64_t(r.generated.size()) >= r.params.maxNewTokens;
    }
    ev.finished = r.finished;
    events.push_back(ev);
  }
  return events;
}

Status Engine::runOp(const std::string& op, const OpAttrs& attrs, const std::map<std::string, EngineTensor>& tensors,
                     void* stream) {
  std::map<std::string, DiTensor> t;
  for (const auto& [name, et] : tensors) t[name] = DiTensor{et.addr, et.shape};
  DI_TRY(impl_->dev->use());
  return impl_->ops->run(op, attrs, t, stream);
}

}  // namespace deepinfer
