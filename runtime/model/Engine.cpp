// Engine: requests with their sampling state over a GpuModel, stepped one chunk or one token at
// a time, and the kernel-level entry point (one `di` op on caller buffers).
#include "deepinfer/Engine.h"

#include <algorithm>
#include <climits>
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
  SpeculationStats spec;

  bool speculating() const { return model && opts.speculative && model->speculation(); }
  Result<std::vector<StepEvent>> speculativeStep();
  int64_t lastStepRows = -1;         // events of the last step (-1: none since the model loaded; -2: speculative)
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
  go.speculative = m.opts.speculative;
  m.model.reset();
  m.lastStepRows = -1;
  auto model = GpuModel::load(modelDir, m.dev, go);
  if (!model.ok()) return Error{fmt::format("engine: loading '{}': {}", modelDir, model.error().message)};
  m.model = std::move(*model);
  return {};
}

bool Engine::hasModel() const { return impl_->model != nullptr; }
int64_t Engine::vocabSize() const { return impl_->model ? impl_->model->config().vocabSize : 0; }
int64_t Engine::kvCapacityTokens() const { return impl_->model ? impl_->model->capacity().tokens : 0; }
int64_t Engine::liveRequests() const { return int64_t(impl_->requests.size()); }
bool Engine::speculative() const { return impl_->speculating(); }
SpeculationStats Engine::speculationStats() const { return impl_->spec; }

Result<int64_t> Engine::addRequest(const RequestParams& params) {
  EngineImpl& m = *impl_;
  if (!m.model) return Error{"engine: no model loaded (loadModel first)"};
  if (params.prompt.empty()) return Error{"engine: a request needs at least one prompt token"};
  if (params.maxNewTokens < 0) return Error{fmt::format("engine: maxNewTokens {} < 0", params.maxNewTokens)};
  for (size_t i = 0; i < params.prompt.size(); ++i)
    if (params.prompt[i] < 0 || params.prompt[i] >= vocabSize())
      return Error{fmt::format("engine: prompt token {} (at index {}) is outside the vocabulary [0, {})",
                               params.prompt[i], i, vocabSize())};
  // Positions the request feeds (the last generated token is never fed back), checked now
  // rather than failing midway through its generation.
  const ModelConfig& cfg = m.model->config();
  const int64_t fed = int64_t(params.prompt.size()) + std::max<int64_t>(0, params.maxNewTokens - 1);
  const int64_t maxPositions = cfg.maxPositionEmbeddings > 0 ? cfg.maxPositionEmbeddings : int64_t(INT32_MAX);
  if (params.maxNewTokens > maxPositions || fed > maxPositions)
    return Error{fmt::format("engine: a prompt of {} tokens and {} new tokens need more positions than the model's {} "
                             "(max_position_embeddings)",
                             params.prompt.size(), params.maxNewTokens, maxPositions)};
  if (fed > m.model->capacity().tokens)
    return Error{fmt::format("engine: a prompt of {} tokens and {} new tokens need {} positions of KV cache; the "
                             "engine holds {}",
                             params.prompt.size(), params.maxNewTokens, fed, m.model->capacity().tokens)};
  EngineRequest r;
  r.params = params;
  r.sampling.temperature = params.temperature;
  r.sampling.topP = params.topP;
  r.sampling.seed = params.seed;
  DI_TRY(validateSampling(r.sampling));
  auto g = m.speculating() ? m.model->newSpeculativeRequest() : m.model->newRequest();
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
  // Once every live request is past its prompt, speculative steps; until then one forward call
  // for every live request: its next prefill chunk or its last token (a plain decode step keeps
  // a speculative request's draft rings current too).
  bool anyPrompt = false;
  for (const auto& [id, r] : m.requests) anyPrompt = anyPrompt || (!r.finished && r.prefilled < r.params.prompt.size());
  if (m.speculating() && !anyPrompt) return m.speculativeStep();
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
  m.lastStepRows = -1;
  if (work.empty()) {
    m.lastStepRows = 0;
    return events;
  }
  auto logits = m.model->forward(work, /*lastOnly=*/true);
  if (!logits.ok()) return Error{fmt::format("engine: step: {}", logits.error().message)};
  m.lastStepRows = int64_t(ids.size());
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
        DI_TRY(checkFiniteLogits(row, V, fmt::format("engine: request {}, position {}", ids[i],
                                                     r.params.prompt.size() + r.generated.size() - 1)));
        ev.token = sampleToken(row, V, r.sampling, uint64_t(r.generated.size()));
        r.generated.push_back(ev.token);
        ev.tokens = {ev.token};
      }
      // The last generated token is not fed back: nothing reads its logits.
      r.finished = int64_t(r.generated.size()) >= r.params.maxNewTokens;
    }
    ev.finished = r.finished;
    events.push_back(ev);
  }
  return events;
}

// One speculative step for every live, unfinished request (all past their prompts): the anchor
// is the newest generated token; at most the remaining budget is drafted, so no token is wasted.
Result<std::vector<StepEvent>> EngineImpl::speculativeStep() {
  const int64_t V = model->config().vocabSize, B = model->draftBlockSize();
  std::vector<GpuSpecStep> steps;
  std::vector<int64_t> ids;
  for (auto& [id, r] : requests) {
    if (r.finished) continue;
    GpuSpecStep s;
    s.request = r.gpuRequest;
    s.next = r.generated.back();
    s.sampling = r.sampling;
    s.maxDrafts = std::min<int64_t>(B, r.params.maxNewTokens - int64_t(r.generated.size()) - 1);
    s.keepLogits = r.params.keepLogits;
    steps.push_back(std::move(s));
    ids.push_back(id);
  }
  std::vector<StepEvent> events;
  lastStepRows = -1;
  if (steps.empty()) return events;
  auto out = model->speculativeStep(steps);
  if (!out.ok()) return Error{fmt::format("engine: step: {}", out.error().message)};
  for (size_t i = 0; i < ids.size(); ++i) {
    EngineRequest& r = requests.at(ids[i]);
    const GpuSpecOutcome& o = (*out)[i];
    StepEvent ev;
    ev.request = ids[i];
    ev.tokens = o.emitted;
    ev.token = o.emitted.back();
    ev.accepted = o.accepted;
    r.generated.insert(r.generated.end(), o.emitted.begin(), o.emitted.end());
    // The logits of the last committed position: the bonus token's distribution.
    if (r.params.keepLogits)
      r.lastLogits.assign(o.logits.ptr<float>() + int64_t(o.accepted) * V, o.logits.ptr<float>() + (o.accepted + 1) * V);
    r.finished = int64_t(r.generated.size()) >= r.params.maxNewTokens;
    ev.finished = r.finished;
    events.push_back(std::move(ev));
    ++spec.steps;
    spec.drafted += int64_t(o.drafts.size());
    spec.accepted += o.accepted;
  }
  lastStepRows = -2;  // the verify forward's rows are per drafted position, not one per request
  return events;
}

Result<TensorView> Engine::stepLogits() const {
  const EngineImpl& m = *impl_;
  if (!m.model) return Error{"engine: no model loaded"};
  if (m.lastStepRows == -2)
    return Error{"engine: the last step was speculative (several rows per request); read lastLogits(request)"};
  if (m.lastStepRows < 0) return Error{"engine: no step has run since the model was loaded (or the last one failed)"};
  const int64_t V = vocabSize();
  if (m.lastStepRows == 0) return TensorView::contiguous(0, DType::F32, {0, V});
  const GpuDeviceLogits l = m.model->lastDeviceLogits();
  if (l.rows != m.lastStepRows || l.addr == 0)
    return Error{fmt::format("engine: the last step left {} logits rows on the device, expected {}", l.rows,
                             m.lastStepRows)};
  return TensorView::contiguous(l.addr, DType::F32, {l.rows, V});
}

Status Engine::runOp(const std::string& op, const OpAttrs& attrs, const std::map<std::string, EngineTensor>& tensors,
                     void* stream) {
  std::map<std::string, DiTensor> t;
  for (const auto& [name, et] : tensors) t[name] = DiTensor{et.addr, et.shape};
  DI_TRY(impl_->dev->use());
  return impl_->ops->run(op, attrs, t, stream);
}

}  // namespace deepinfer
