// Engine: requests with their sampling state over an EngineBackend (the generated kernels on a
// GPU, or the C++ reference on the CPU), stepped one chunk or one token at a time, and the
// kernel-level entry point (one `di` op on caller buffers).
#include "deepinfer/Engine.h"

#include <algorithm>
#include <climits>
#include <fmt/format.h>

#include "lib/DiOps.h"
#include "deepinfer/Device.h"
#include "deepinfer/Jit.h"
#include "model/EngineBackend.h"
#include "model/Sampling.h"

namespace deepinfer {

struct EngineRequest {
  RequestParams params;
  SamplingOptions sampling;
  int64_t backendRequest = 0;
  size_t prefilled = 0;              // prompt tokens already run
  std::vector<int32_t> generated;
  std::vector<float> lastLogits;
  std::vector<float> allLogits;      // keepAllLogits: one row per position run so far
  bool lastFed = false;              // keepAllLogits: the last generated token was run for its row
  bool finished = false;

  bool inPrompt() const { return prefilled < params.prompt.size(); }
  // keepAllLogits runs the last generated token too, once the budget is spent.
  bool wantsTail() const {
    return params.keepAllLogits && !lastFed && !generated.empty() && int64_t(generated.size()) >= params.maxNewTokens;
  }
  void updateFinished() {
    finished = int64_t(generated.size()) >= params.maxNewTokens && !wantsTail();
  }
};

class EngineImpl {
 public:
  EngineOptions opts;
  std::shared_ptr<Device> dev;       // cuda backend only
  TargetProfile target;
  std::unique_ptr<Jit> jit;          // kernel-level ops
  std::unique_ptr<DiOps> ops;
  std::unique_ptr<EngineBackend> model;
  std::map<int64_t, EngineRequest> requests;
  int64_t nextId = 1;
  SpeculationStats spec;

  bool speculating() const { return model && opts.speculative && model->speculation(); }
  Result<std::vector<StepEvent>> speculativeStep();
  int64_t lastStepRows = -1;         // events of the last step (-1: none since the model loaded; -2: speculative)
};

Engine::~Engine() = default;

Status checkParallelOptions(const EngineOptions& opts) {
  if (opts.pp < 1) return Error{fmt::format("engine: pp {} < 1", opts.pp)};
  if (opts.tp < 1) return Error{fmt::format("engine: tp {} < 1", opts.tp)};
  if (!opts.stageLayers.empty() && int(opts.stageLayers.size()) != opts.pp)
    return Error{fmt::format("engine: {} stage layer counts given for pp {}", opts.stageLayers.size(), opts.pp)};
  for (size_t s = 0; s < opts.stageLayers.size(); ++s)
    if (opts.stageLayers[s] < 1)
      return Error{fmt::format("engine: stage {} has {} layers; every stage needs at least one", s, opts.stageLayers[s])};
  if (!opts.gpus.empty() && int64_t(opts.gpus.size()) != int64_t(opts.pp) * opts.tp)
    return Error{opts.tp > 1 ? fmt::format("engine: {} GPUs given for {} pipeline stages x {} tensor ranks (one "
                                           "ordinal per rank, rank r of stage s at s * tp + r)",
                                           opts.gpus.size(), opts.pp, opts.tp)
                             : fmt::format("engine: {} GPUs given for {} pipeline stages (one ordinal per stage)",
                                           opts.gpus.size(), opts.pp)};
  for (size_t s = 0; s < opts.gpus.size(); ++s)
    if (opts.gpus[s] < 0) return Error{fmt::format("engine: GPU ordinal {} of rank {} is negative", opts.gpus[s], s)};
  if (opts.backend == "cpu" && (opts.pp > 1 || opts.tp > 1 || !opts.gpus.empty()))
    return Error{"engine: the cpu backend runs the whole model in one stage on one rank (pp 1, tp 1, no GPUs)"};
  return {};
}

Result<std::unique_ptr<Engine>> Engine::create(const EngineOptions& opts) {
  if (opts.backend != "cuda" && opts.backend != "cpu")
    return Error{fmt::format("engine: unknown backend '{}' (cuda, cpu)", opts.backend)};
  if (opts.maxRequests < 1) return Error{fmt::format("engine: maxRequests {} < 1", opts.maxRequests)};
  if (opts.maxChunkTokens < 1) return Error{fmt::format("engine: maxChunkTokens {} < 1", opts.maxChunkTokens)};
  if (opts.threads < 0) return Error{fmt::format("engine: threads {} < 0", opts.threads)};
  DI_TRY(checkParallelOptions(opts));
  std::unique_ptr<Engine> e(new Engine());
  e->impl_ = std::make_unique<EngineImpl>();
  EngineImpl& m = *e->impl_;
  m.opts = opts;
  if (opts.backend == "cpu") {
    if (!opts.target.empty()) return Error{"engine: a target applies to the cuda backend only"};
    return e;
  }
  auto dev = Device::open(opts.device);
  if (!dev.ok()) return Error{fmt::format("engine: no GPU {}: {}", opts.device, dev.error().message)};
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
  m.model.reset();
  m.lastStepRows = -1;
  auto model = m.dev ? loadGpuEngineBackend(modelDir, m.dev, m.opts) : loadCpuEngineBackend(modelDir, m.opts);
  if (!model.ok()) return Error{fmt::format("engine: loading '{}': {}", modelDir, model.error().message)};
  m.model = std::move(*model);
  return {};
}

bool Engine::hasModel() const { return impl_->model != nullptr; }
int64_t Engine::vocabSize() const { return impl_->model ? impl_->model->config().vocabSize : 0; }
int64_t Engine::kvCapacityTokens() const { return impl_->model ? impl_->model->capacityTokens() : 0; }
std::string Engine::describe() const {
  if (impl_->model) return impl_->model->describe();
  return impl_->dev ? fmt::format("cuda, {} (no model)", impl_->dev->info().profile.gpuName) : "cpu (no model)";
}
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
  // Positions the request feeds (the last generated token only for keepAllLogits), checked now
  // rather than failing midway through its generation.
  const ModelConfig& cfg = m.model->config();
  const int64_t fed = int64_t(params.prompt.size()) + std::max<int64_t>(0, params.maxNewTokens - 1) +
                      (params.keepAllLogits && params.maxNewTokens > 0 ? 1 : 0);
  const int64_t maxPositions = cfg.maxPositionEmbeddings > 0 ? cfg.maxPositionEmbeddings : int64_t(INT32_MAX);
  if (params.maxNewTokens > maxPositions || fed > maxPositions)
    return Error{fmt::format("engine: a prompt of {} tokens and {} new tokens need more positions than the model's {} "
                             "(max_position_embeddings)",
                             params.prompt.size(), params.maxNewTokens, maxPositions)};
  const int64_t capacity = m.model->capacityTokens();
  if (capacity > 0 && fed > capacity)
    return Error{fmt::format("engine: a prompt of {} tokens and {} new tokens need {} positions of KV cache; the "
                             "engine holds {}",
                             params.prompt.size(), params.maxNewTokens, fed, capacity)};
  EngineRequest r;
  r.params = params;
  r.sampling.temperature = params.temperature;
  r.sampling.topP = params.topP;
  r.sampling.seed = params.seed;
  DI_TRY(validateSampling(r.sampling));
  auto g = m.model->newRequest(m.speculating());
  if (!g.ok()) return Error{fmt::format("engine: {}", g.error().message)};
  r.backendRequest = *g;
  const int64_t id = m.nextId++;
  m.requests.emplace(id, std::move(r));
  return id;
}

Status Engine::removeRequest(int64_t request) {
  EngineImpl& m = *impl_;
  auto it = m.requests.find(request);
  if (it == m.requests.end()) return Error{fmt::format("engine: no request {}", request)};
  Status st = m.model->releaseRequest(it->second.backendRequest);
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

Result<std::vector<float>> Engine::allLogits(int64_t request) const {
  auto it = impl_->requests.find(request);
  if (it == impl_->requests.end()) return Error{fmt::format("engine: no request {}", request)};
  if (!it->second.params.keepAllLogits)
    return Error{fmt::format("engine: request {} does not keep all logits (keepAllLogits)", request)};
  return it->second.allLogits;
}

Result<std::vector<StepEvent>> Engine::step(void* stream) {
  EngineImpl& m = *impl_;
  if (!m.model) return Error{"engine: no model loaded"};
  m.model->setStream(stream);
  const int64_t V = vocabSize();
  // Once every live request is past its prompt, speculative steps; until then one forward call
  // for every live request: its next prefill chunk or its last token (a plain decode step keeps
  // a speculative request's draft rings current too).
  bool anyPrompt = false, keepAll = false;
  for (const auto& [id, r] : m.requests) {
    anyPrompt = anyPrompt || (!r.finished && r.inPrompt());
    keepAll = keepAll || (!r.finished && r.params.keepAllLogits);
  }
  if (m.speculating() && !anyPrompt) return m.speculativeStep();
  std::vector<std::pair<int64_t, std::vector<int32_t>>> work;
  std::vector<int64_t> ids;
  for (auto& [id, r] : m.requests) {
    if (r.finished) continue;
    std::vector<int32_t> tokens;
    if (r.inPrompt()) {
      const size_t len = std::min<size_t>(size_t(m.opts.maxChunkTokens), r.params.prompt.size() - r.prefilled);
      tokens.assign(r.params.prompt.begin() + int64_t(r.prefilled), r.params.prompt.begin() + int64_t(r.prefilled + len));
    } else {
      tokens = {r.generated.back()};
    }
    work.emplace_back(r.backendRequest, std::move(tokens));
    ids.push_back(id);
  }
  std::vector<StepEvent> events;
  m.lastStepRows = -1;
  if (work.empty()) {
    m.lastStepRows = 0;
    return events;
  }
  // Every row comes back only when a request keeps them all (device logits then hold every row).
  auto logits = m.model->forward(work, /*lastOnly=*/!keepAll);
  if (!logits.ok()) return Error{fmt::format("engine: step: {}", logits.error().message)};
  m.lastStepRows = keepAll ? -1 : int64_t(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EngineRequest& r = m.requests.at(ids[i]);
    const HostTensor& rows = (*logits)[i];
    if (r.params.keepAllLogits) r.allLogits.insert(r.allLogits.end(), rows.ptr<float>(), rows.ptr<float>() + rows.numel());
    StepEvent ev;
    ev.request = ids[i];
    const bool wasPrompt = r.inPrompt(), tail = !wasPrompt && r.wantsTail();
    if (wasPrompt) r.prefilled += work[i].second.size();
    if (tail) r.lastFed = true;
    if (!tail && !r.inPrompt()) {
      const float* row = rows.ptr<float>() + (rows.shape[0] - 1) * V;
      if (r.params.keepLogits) r.lastLogits.assign(row, row + V);
      if (int64_t(r.generated.size()) < r.params.maxNewTokens) {
        const int64_t pos = int64_t(r.params.prompt.size() + r.generated.size()) - 1;
        DI_TRY(checkFiniteLogits(row, V, fmt::format("engine: request {}: logits at position {}", ids[i], pos)));
        ev.token = sampleToken(row, V, r.sampling, uint64_t(r.generated.size()));
        r.generated.push_back(ev.token);
        ev.tokens = {ev.token};
      }
    }
    r.updateFinished();
    ev.finished = r.finished;
    events.push_back(ev);
  }
  return events;
}

// One speculative step for every live, unfinished request (all past their prompts): the anchor
// is the newest generated token; at most the remaining budget is drafted, so no token is wasted.
// A request that only wants its last token's logits (keepAllLogits) verifies no draft and keeps
// nothing of what the step emits.
Result<std::vector<StepEvent>> EngineImpl::speculativeStep() {
  const int64_t V = model->config().vocabSize, B = model->draftBlockSize();
  std::vector<EngineSpecStep> steps;
  std::vector<int64_t> ids;
  for (auto& [id, r] : requests) {
    if (r.finished) continue;
    EngineSpecStep s;
    s.request = r.backendRequest;
    s.next = r.generated.back();
    s.sampling = r.sampling;
    s.maxDrafts = r.wantsTail() ? 0 : std::min<int64_t>(B, r.params.maxNewTokens - int64_t(r.generated.size()) - 1);
    s.keepLogits = r.params.keepLogits || r.params.keepAllLogits;
    steps.push_back(s);
    ids.push_back(id);
  }
  std::vector<StepEvent> events;
  lastStepRows = -1;
  if (steps.empty()) return events;
  auto out = model->speculativeStep(steps);
  if (!out.ok()) return Error{fmt::format("engine: step: {}", out.error().message)};
  for (size_t i = 0; i < ids.size(); ++i) {
    EngineRequest& r = requests.at(ids[i]);
    const EngineSpecOutcome& o = (*out)[i];
    StepEvent ev;
    ev.request = ids[i];
    if (r.params.keepAllLogits)
      r.allLogits.insert(r.allLogits.end(), o.logits.ptr<float>(), o.logits.ptr<float>() + o.logits.numel());
    if (r.wantsTail()) {
      r.lastFed = true;
    } else {
      ev.tokens = o.emitted;
      ev.token = o.emitted.back();
      ev.accepted = o.accepted;
      r.generated.insert(r.generated.end(), o.emitted.begin(), o.emitted.end());
      // The logits of the last committed position: the bonus token's distribution.
      if (r.params.keepLogits)
        r.lastLogits.assign(o.logits.ptr<float>() + int64_t(o.accepted) * V,
                            o.logits.ptr<float>() + (o.accepted + 1) * V);
      ++spec.steps;
      spec.drafted += o.drafts;
      spec.accepted += o.accepted;
    }
    r.updateFinished();
    ev.finished = r.finished;
    events.push_back(std::move(ev));
  }
  lastStepRows = -2;  // the verify forward's rows are per drafted position, not one per request
  return events;
}

Result<TensorView> Engine::stepLogits() const {
  const EngineImpl& m = *impl_;
  if (!m.model) return Error{"engine: no model loaded"};
  if (!m.dev) return Error{"engine: the cpu backend has no device logits; read lastLogits(request) or allLogits(request)"};
  if (m.lastStepRows == -2)
    return Error{"engine: the last step was speculative (several rows per request); read lastLogits(request)"};
  if (m.lastStepRows < 0)
    return Error{"engine: no step with one logits row per event has run since the model was loaded (none yet, the "
                 "last one failed, or it kept every row for keepAllLogits)"};
  const int64_t V = vocabSize();
  if (m.lastStepRows == 0) return TensorView::contiguous(0, DType::F32, {0, V});
  auto l = m.model->deviceLogits();
  if (!l.ok()) return Error{fmt::format("engine: {}", l.error().message)};
  if (l->shape[0] != m.lastStepRows || l->addr == 0)
    return Error{fmt::format("engine: the last step left {} logits rows on the device, expected {}", l->shape[0],
                             m.lastStepRows)};
  return *l;
}

Status Engine::runOp(const std::string& op, const OpAttrs& attrs, const std::map<std::string, EngineTensor>& tensors,
                     void* stream) {
  std::map<std::string, DiTensor> t;
  if (!impl_->dev) return Error{fmt::format("engine: runOp {}: kernels run on the cuda backend only", op)};
  for (const auto& [name, et] : tensors) t[name] = DiTensor{et.addr, et.shape};
  DI_TRY(impl_->dev->use());
  return impl_->ops->run(op, attrs, t, stream);
}

}  // namespace deepinfer
