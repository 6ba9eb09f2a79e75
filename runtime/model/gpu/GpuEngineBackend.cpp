// Engine's cuda backend: GpuModel (the generated kernels) behind EngineBackend.
#include <fmt/format.h>

#include "deepinfer/Device.h"
#include "deepinfer/Engine.h"
#include "deepinfer/LocalGpu.h"
#include "model/EngineBackend.h"
#include "model/gpu/GpuModel.h"
#include "model/gpu/GpuStagesReport.h"

namespace deepinfer {
namespace {

class GpuEngineBackend : public EngineBackend {
 public:
  GpuEngineBackend(std::unique_ptr<GpuModel> m, std::string gpu) : m_(std::move(m)), gpu_(std::move(gpu)) {}
  const ModelConfig& config() const override { return m_->config(); }
  int64_t capacityTokens() const override { return m_->capacity().tokens; }
  bool speculation() const override { return m_->speculation(); }
  int draftBlockSize() const override { return m_->draftBlockSize(); }
  std::string describe() const override {
    std::string out =
        fmt::format("cuda, {} ({} kernels), KV capacity {} tokens", gpu_, m_->targetName(), m_->capacity().tokens);
    return out + describeGpuStages(m_->stages());
  }
  Result<int64_t> newRequest(bool speculative) override {
    return speculative ? m_->newSpeculativeRequest() : m_->newRequest();
  }
  Status releaseRequest(int64_t request) override { return m_->releaseRequest(request); }
  void setStream(void* stream) override { m_->setStream(stream); }
  Result<std::vector<HostTensor>> forward(const std::vector<std::pair<int64_t, std::vector<int32_t>>>& work,
                                          bool lastOnly) override {
    return m_->forward(work, lastOnly);
  }
  Result<std::vector<EngineSpecOutcome>> speculativeStep(const std::vector<EngineSpecStep>& steps) override {
    std::vector<GpuSpecStep> in(steps.size());
    for (size_t i = 0; i < steps.size(); ++i) {
      in[i].request = steps[i].request;
      in[i].next = steps[i].next;
      in[i].sampling = steps[i].sampling;
      in[i].maxDrafts = steps[i].maxDrafts;
      in[i].keepLogits = steps[i].keepLogits;
    }
    auto out = m_->speculativeStep(in);
    if (!out.ok()) return out.error();
    std::vector<EngineSpecOutcome> r(out->size());
    for (size_t i = 0; i < r.size(); ++i) {
      GpuSpecOutcome& o = (*out)[i];
      r[i].drafts = int(o.drafts.size());
      r[i].accepted = o.accepted;
      r[i].emitted = std::move(o.emitted);
      r[i].logits = std::move(o.logits);
    }
    return r;
  }
  Result<TensorView> deviceLogits() const override {
    const GpuDeviceLogits l = m_->lastDeviceLogits();
    return TensorView::contiguous(l.addr, DType::F32, {l.rows, m_->config().vocabSize});
  }

 private:
  std::unique_ptr<GpuModel> m_;
  std::string gpu_;
};

}  // namespace

Result<std::unique_ptr<EngineBackend>> loadGpuEngineBackend(const std::string& modelDir,
                                                            const std::shared_ptr<Device>& dev,
                                                            const EngineOptions& opts) {
  GpuModelOptions go;
  go.target = opts.target;
  go.kvCacheBytes = opts.kvCacheBytes;
  go.maxRequests = opts.maxRequests;
  go.maxChunkTokens = opts.maxChunkTokens;
  go.speculative = opts.speculative;
  go.pp = opts.pp;
  go.tp = opts.tp;
  go.stageLayers = opts.stageLayers;
  go.gpus = opts.gpus;
  const int ranks = go.pp * go.tp;
  if (go.gpus.empty() && ranks > 1) {
    // One GPU per rank when that many are visible from `device` on, else all on `device` (tensor
    // ranks then run as logical ranks: the one-GPU test double, docs/parallelism.md §1).
    bool enough = true;
    for (int s = 1; s < ranks && enough; ++s) enough = localGpu(dev->ordinal() + s).ok();
    if (enough)
      for (int s = 0; s < ranks; ++s) go.gpus.push_back(dev->ordinal() + s);
  }
  auto model = GpuModel::load(modelDir, dev, go);
  if (!model.ok()) return model.error();
  return std::unique_ptr<EngineBackend>(
      std::make_unique<GpuEngineBackend>(std::move(*model), dev->info().profile.gpuName));
}

}  // namespace deepinfer
