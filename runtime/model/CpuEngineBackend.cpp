// Engine's cpu backend: the C++ reference forward pass (CpuModel) behind EngineBackend. Requests
// run one after another within a step; their caches live in host memory.
#include <fmt/format.h>

#include <cstring>
#include <map>

#include "deepinfer/Engine.h"
#include "model/CpuForward.h"
#include "model/CpuSpeculative.h"
#include "model/EngineBackend.h"

namespace deepinfer {
namespace {

HostTensor lastRow(const HostTensor& logits) {
  const int64_t n = logits.shape[0], V = logits.shape[1];
  HostTensor row(DType::F32, {1, V});
  std::memcpy(row.bytes.data(), logits.ptr<float>() + (n - 1) * V, size_t(V) * sizeof(float));
  return row;
}

class CpuEngineBackend : public EngineBackend {
 public:
  CpuEngineBackend(std::unique_ptr<CpuModel> m, const EngineOptions& opts)
      : m_(std::move(m)), maxRequests_(opts.maxRequests), speculative_(opts.speculative) {}
  const ModelConfig& config() const override { return m_->config(); }
  int64_t capacityTokens() const override { return 0; }
  bool speculation() const override { return speculative_ && m_->hasDraft(); }
  int draftBlockSize() const override { return m_->draftBlockSize(); }
  std::string describe() const override { return fmt::format("cpu, {} threads", m_->threads()); }

  Result<int64_t> newRequest(bool speculative) override {
    if (int64_t(states_.size()) >= maxRequests_)
      return Error{fmt::format("all {} request slots are in use (maxRequests)", maxRequests_)};
    Result<CpuRequestState> st = speculative ? m_->newSpeculativeRequest() : Result<CpuRequestState>(m_->newRequest());
    if (!st.ok()) return st.error();
    const int64_t id = nextId_++;
    states_.emplace(id, std::move(*st));
    return id;
  }
  Status releaseRequest(int64_t request) override {
    if (states_.erase(request) == 0) return Error{fmt::format("no request {}", request)};
    return {};
  }
  void setStream(void*) override {}

  Result<std::vector<HostTensor>> forward(const std::vector<std::pair<int64_t, std::vector<int32_t>>>& work,
                                          bool lastOnly) override {
    std::vector<HostTensor> out;
    for (const auto& [request, ids] : work) {
      auto st = state(request);
      if (!st.ok()) return st.error();
      auto logits = m_->prefill(**st, ids);
      if (!logits.ok()) return logits.error();
      out.push_back(lastOnly ? lastRow(*logits) : std::move(*logits));
    }
    return out;
  }

  Result<std::vector<EngineSpecOutcome>> speculativeStep(const std::vector<EngineSpecStep>& steps) override {
    std::vector<CpuSpecStep> in(steps.size());
    for (size_t i = 0; i < steps.size(); ++i) {
      auto st = state(steps[i].request);
      if (!st.ok()) return st.error();
      in[i].state = *st;
      in[i].next = steps[i].next;
      in[i].sampling = steps[i].sampling;
      in[i].maxDrafts = steps[i].maxDrafts;
    }
    auto out = m_->speculativeStep(in);
    if (!out.ok()) return out.error();
    std::vector<EngineSpecOutcome> r(out->size());
    for (size_t i = 0; i < r.size(); ++i) {
      CpuSpecOutcome& o = (*out)[i];
      r[i].drafts = int(o.drafts.size());
      r[i].accepted = o.accepted;
      r[i].emitted = std::move(o.emitted);
      if (steps[i].keepLogits) r[i].logits = std::move(o.logits);
    }
    return r;
  }

  Result<TensorView> deviceLogits() const override {
    return Error{"the cpu backend keeps logits on the host (lastLogits / allLogits)"};
  }

 private:
  Result<CpuRequestState*> state(int64_t request) {
    auto it = states_.find(request);
    if (it == states_.end()) return Error{fmt::format("no request {}", request)};
    return &it->second;
  }

  std::unique_ptr<CpuModel> m_;
  int64_t maxRequests_;
  bool speculative_;
  std::map<int64_t, CpuRequestState> states_;
  int64_t nextId_ = 1;
};

}  // namespace

Result<std::unique_ptr<EngineBackend>> loadCpuEngineBackend(const std::string& modelDir, const EngineOptions& opts) {
  CpuModelOptions co;
  co.threads = opts.threads;
  auto model = CpuModel::load(modelDir, co);
  if (!model.ok()) return model.error();
  return std::unique_ptr<EngineBackend>(std::make_unique<CpuEngineBackend>(std::move(*model), opts));
}

}  // namespace deepinfer
