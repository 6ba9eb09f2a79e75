#include "model/gpu/GpuWeights.h"

#include <fmt/format.h>

#include "model/ModelTensors.h"

namespace deepinfer {
namespace {

std::string shapeStr(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::string baseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Where each tensor goes. The walk below visits the tensors of loadCpuWeights in its order;
// one sink only checks and counts (planning), the other loads and uploads.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual Status matrix(const std::string& name, int64_t rows, int64_t cols, GpuMatrix& out) = 0;
  virtual Status bf16(const std::string& name, const std::vector<int64_t>& shape, DeviceBuffer& out) = 0;
  virtual Status f32(const std::string& name, const std::vector<int64_t>& shape, DeviceBuffer& out) = 0;
};

// Checks a tensor as Checkpoint::loadBf16 / loadF32 would before decoding it, with their
// messages, and counts the bytes of its device copy.
class PlanSink : public Sink {
 public:
  explicit PlanSink(const Checkpoint& ckpt) : ckpt_(ckpt) {}
  Status matrix(const std::string& name, int64_t rows, int64_t cols, GpuMatrix&) override {
    return check(name, {rows, cols}, 2);
  }
  Status bf16(const std::string& name, const std::vector<int64_t>& shape, DeviceBuffer&) override {
    return check(name, shape, 2);
  }
  Status f32(const std::string& name, const std::vector<int64_t>& shape, DeviceBuffer&) override {
    return check(name, shape, 4);
  }
  int64_t bytes = 0;
  int64_t tensors = 0;

 private:
  Status check(const std::string& name, const std::vector<int64_t>& shape, int64_t elemBytes) {
    auto ti = ckpt_.info(name);
    if (!ti.ok()) return ti.error();
    const std::string where = fmt::format("{}: tensor '{}'", baseName(ti->file), name);
    if (ti->logicalShape != shape)
      return Error{fmt::format("{}: shape {} ({} {}), expected {}", where, shapeStr(ti->logicalShape), ti->dtype,
                               weightFormatName(ti->format), shapeStr(shape))};
    if (ti->format == WeightFormat::Plain && ti->dtype != "BF16" && ti->dtype != "F16" && ti->dtype != "F32")
      return Error{fmt::format("{}: tensor '{}' has dtype {}, which is not a floating-point weight",
                               baseName(ti->file), name, ti->dtype)};
    bytes += numel(shape) * elemBytes;
    ++tensors;
    return {};
  }
  const Checkpoint& ckpt_;
};

// Dequantizes one tensor on the host, uploads it and drops the host copy.
class UploadSink : public Sink {
 public:
  explicit UploadSink(const Checkpoint& ckpt) : ckpt_(ckpt) {}
  Status matrix(const std::string& name, int64_t rows, int64_t cols, GpuMatrix& out) override {
    DI_TRY(upload(name, ckpt_.loadBf16(name, {rows, cols}), out.data));
    out.rows = rows;
    out.cols = cols;
    return {};
  }
  Status bf16(const std::string& name, const std::vector<int64_t>& shape, DeviceBuffer& out) override {
    return upload(name, ckpt_.loadBf16(name, shape), out);
  }
  Status f32(const std::string& name, const std::vector<int64_t>& shape, DeviceBuffer& out) override {
    return upload(name, ckpt_.loadF32(name, shape), out);
  }
  int64_t bytes = 0;

 private:
  Status upload(const std::string& name, Result<HostTensor> t, DeviceBuffer& out) {
    if (!t.ok()) return t.error();
    const size_t n = t->bytes.size();
    auto buf = DeviceBuffer::alloc(n);
    if (!buf.ok()) return Error{fmt::format("weight '{}' ({} bytes): {}", name, n, buf.error().message)};
    auto st = buf->upload(t->bytes.data(), n);
    if (!st.ok()) return Error{fmt::format("weight '{}': {}", name, st.error().message)};
    out = std::move(*buf);
    bytes += int64_t(n);
    return {};
  }
  const Checkpoint& ckpt_;
};

// The row count of a 2-D tensor whose column count is known (shared experts' width).
Result<int64_t> rowsOf(const Checkpoint& ckpt, const std::string& name) {
  auto info = ckpt.info(name);
  if (!info.ok()) return info.error();
  if (info->logicalShape.size() != 2)
    return Error{fmt::format("checkpoint: tensor '{}' has rank {}, expected 2", name, info->logicalShape.size())};
  return info->logicalShape[0];
}

Status walkMhc(Sink& s, const std::string& p, const std::string& which, int64_t C, GpuMhcWeights& w) {
  DI_TRY(s.f32(p + "hc_" + which + "_fn", {24, 4 * C}, w.fn));
  DI_TRY(s.f32(p + "hc_" + which + "_base", {24}, w.base));
  DI_TRY(s.f32(p + "hc_" + which + "_scale", {3}, w.scale));
  return {};
}

// The attention tensors under `p` ("layers.L.attn." or "mtp.s.attn."); `role` says which
// compressor/indexer tensors the layer owns (none for draft stages).
Status walkAttention(Sink& s, const ModelConfig& cfg, const std::string& p, const LayerRole& role,
                     GpuAttentionWeights& w) {
  const int64_t C = cfg.hiddenSize, H = cfg.numAttentionHeads, D = cfg.headDim;
  const int64_t G = cfg.oGroups, qL = cfg.qLoraRank, oL = cfg.oLoraRank;
  DI_TRY(s.matrix(p + "wq_a.weight", qL, C, w.wqA));
  DI_TRY(s.bf16(p + "q_norm.weight", {qL}, w.qNorm));
  DI_TRY(s.matrix(p + "wq_b.weight", H * D, qL, w.wqB));
  DI_TRY(s.matrix(p + "wkv.weight", D, C, w.wkv));
  DI_TRY(s.bf16(p + "kv_norm.weight", {D}, w.kvNorm));
  DI_TRY(s.matrix(p + "wo_a.weight", G * oL, (H / G) * D, w.woA));
  DI_TRY(s.matrix(p + "wo_b.weight", C, G * oL, w.woB));
  DI_TRY(s.f32(p + "attn_sink", {H}, w.attnSink));
  const int64_t Hi = cfg.indexNHeads, Di = cfg.indexHeadDim;
  if (role.isKvSource) {
    DI_TRY(s.matrix(p + "compressor.wkv.weight", D, C, w.compWkv));
    DI_TRY(s.bf16(p + "compressor.norm.weight", {D}, w.compNorm));
    if (role.ratio == 2) DI_TRY(s.matrix(p + "compressor.wgate.weight", D, C, w.compWgate));
    DI_TRY(s.matrix(p + "indexer.wk.weight", Di, D, w.idxWk));
    DI_TRY(s.bf16(p + "indexer.k_norm.weight", {Di}, w.idxKNorm));
  }
  if (role.isIndexSource) {
    DI_TRY(s.matrix(p + "indexer.wq_b.weight", Hi * Di, qL, w.idxWqB));
    DI_TRY(s.matrix(p + "indexer.weights_proj.weight", Hi, C, w.idxWeightsProj));
  }
  return {};
}

Status walkExpert(Sink& s, const std::string& p, int64_t C, int64_t I, GpuExpertWeights& w) {
  DI_TRY(s.matrix(p + "w1.weight", I, C, w.w1));
  DI_TRY(s.matrix(p + "w3.weight", I, C, w.w3));
  DI_TRY(s.matrix(p + "w2.weight", C, I, w.w2));
  return {};
}

// The MoE tensors under `p` ("layers.L.ffn." or "mtp.s.ffn.") with E routed experts.
Status walkMoe(Sink& s, const Checkpoint& ckpt, const ModelConfig& cfg, const std::string& p, int64_t E,
               GpuMoeWeights& w) {
  const int64_t C = cfg.hiddenSize, I = cfg.moeIntermediateSize;
  DI_TRY(s.matrix(p + "gate.weight", E, C, w.gate));
  DI_TRY(s.f32(p + "gate.bias", {E}, w.gateBias));
  w.experts.resize(size_t(E));
  for (int64_t e = 0; e < E; ++e)
    DI_TRY(walkExpert(s, fmt::format("{}experts.{}.", p, e), C, I, w.experts[size_t(e)]));
  if (cfg.nSharedExperts > 0) {
    auto Is = rowsOf(ckpt, p + "shared_experts.w1.weight");
    if (!Is.ok()) return Is.error();
    DI_TRY(walkExpert(s, p + "shared_experts.", C, *Is, w.shared));
  }
  return {};
}

Status walkEngram(Sink& s, const ModelConfig& cfg, int layer, GpuEngramWeights& w) {
  const std::string p = fmt::format("layers.{}.engram.", layer);
  const int64_t C = cfg.hiddenSize;
  const int64_t lookups = int64_t(cfg.engramMaxNgramSize - 1) * cfg.engramNHeads;
  w.tableName = p + "embed.weight";
  DI_TRY(s.matrix(p + "wkv.weight", 5 * C, lookups * cfg.engramHeadDim, w.wkv));
  DI_TRY(s.bf16(p + "q_weight", {4, C}, w.qWeight));
  DI_TRY(s.bf16(p + "k_weight", {4, C}, w.kWeight));
  return {};
}

// The DSpark tensors (spec/dspark.md §1), in loadCpuWeights' order: the stages (window-only
// blocks with the draft MoE), stage 0's main_proj/main_norm, the last stage's heads.
Status walkDspark(Sink& s, const Checkpoint& ckpt, const ModelConfig& cfg, GpuDsparkWeights& w) {
  const int64_t C = cfg.hiddenSize, V = cfg.vocabSize, r = cfg.dspark.markovRank;
  const int64_t taps = int64_t(cfg.dsparkTargetLayerIds.size());
  const int S = cfg.numNextnPredictLayers;
  w.stages.resize(size_t(S));
  for (int st = 0; st < S; ++st) {
    GpuLayerWeights& lw = w.stages[size_t(st)];
    const std::string p = draftTensorName(st, "");
    DI_TRY(s.bf16(p + "attn_norm.weight", {C}, lw.attnNorm));
    DI_TRY(s.bf16(p + "ffn_norm.weight", {C}, lw.ffnNorm));
    DI_TRY(walkMhc(s, p, "attn", C, lw.hcAttn));
    DI_TRY(walkMhc(s, p, "ffn", C, lw.hcFfn));
    DI_TRY(walkAttention(s, cfg, p + "attn.", cfg.role(cfg.numHiddenLayers + st), lw.attn));
    DI_TRY(walkMoe(s, ckpt, cfg, p + "ffn.", cfg.draftRoutedExperts(), lw.ffn));
  }
  DI_TRY(s.matrix(draftTensorName(0, "main_proj.weight"), C, taps * C, w.mainProj));
  DI_TRY(s.bf16(draftTensorName(0, "main_norm.weight"), {C}, w.mainNorm));
  DI_TRY(s.bf16(draftTensorName(S - 1, "norm.weight"), {C}, w.norm));
  DI_TRY(s.matrix(draftTensorName(S - 1, "markov_head.embed.weight"), V, r, w.markovEmbed));
  DI_TRY(s.matrix(draftTensorName(S - 1, "markov_head.head.weight"), V, r, w.markovHead));
  DI_TRY(s.bf16(draftTensorName(S - 1, "confidence_head.proj.weight"), {1, C + r}, w.confidence));
  return {};
}

// Every tensor of the forward pass, in loadCpuWeights' order.
Status walk(const ModelConfig& cfg, const Checkpoint& ckpt, Sink& s, GpuWeights& w) {
  const int64_t V = cfg.vocabSize, C = cfg.hiddenSize;
  DI_TRY(s.matrix("embed.weight", V, C, w.embed));
  DI_TRY(s.matrix("head.weight", V, C, w.head));
  DI_TRY(s.bf16("norm.weight", {C}, w.norm));
  w.layers.resize(size_t(cfg.numHiddenLayers));
  for (int L = 0; L < cfg.numHiddenLayers; ++L) {
    GpuLayerWeights& lw = w.layers[size_t(L)];
    const std::string p = fmt::format("layers.{}.", L);
    DI_TRY(s.bf16(p + "attn_norm.weight", {C}, lw.attnNorm));
    DI_TRY(s.bf16(p + "ffn_norm.weight", {C}, lw.ffnNorm));
    DI_TRY(walkMhc(s, p, "attn", C, lw.hcAttn));
    DI_TRY(walkMhc(s, p, "ffn", C, lw.hcFfn));
    DI_TRY(walkAttention(s, cfg, p + "attn.", cfg.role(L), lw.attn));
    DI_TRY(walkMoe(s, ckpt, cfg, p + "ffn.", cfg.nRoutedExperts, lw.ffn));
    lw.hasEngram = cfg.role(L).isEngram;
    if (lw.hasEngram) DI_TRY(walkEngram(s, cfg, L, lw.engram));
  }
  w.hasDraft = cfg.dsparkConfigured() && checkpointHasDraft(ckpt);
  if (w.hasDraft) DI_TRY(walkDspark(s, ckpt, cfg, w.draft));
  return {};
}

struct Plan {
  int64_t bytes = 0;
  int64_t tensors = 0;
};

Result<Plan> plan(const ModelConfig& cfg, const Checkpoint& ckpt) {
  PlanSink s(ckpt);
  GpuWeights unused;
  DI_TRY(walk(cfg, ckpt, s, unused));
  return Plan{s.bytes, s.tensors};
}

double gib(int64_t bytes) { return double(bytes) / double(int64_t(1) << 30); }

}  // namespace

Result<int64_t> gpuWeightBytes(const ModelConfig& cfg, const Checkpoint& ckpt) {
  auto p = plan(cfg, ckpt);
  if (!p.ok()) return p.error();
  return p->bytes;
}

Result<GpuWeights> loadGpuWeights(const ModelConfig& cfg, const Checkpoint& ckpt, const Device& dev) {
  auto p = plan(cfg, ckpt);
  if (!p.ok()) return p.error();
  DI_TRY(dev.use());
  auto mem = dev.memInfo();
  if (!mem.ok()) return mem.error();
  if (p->bytes > int64_t(mem->first))
    return Error{fmt::format("model weights need {:.2f} GiB of device memory ({} bytes in {} tensors), {:.2f} GiB "
                             "free of {:.2f} GiB on GPU {}",
                             gib(p->bytes), p->bytes, p->tensors, gib(int64_t(mem->first)), gib(int64_t(mem->second)),
                             dev.ordinal())};
  UploadSink s(ckpt);
  GpuWeights w;
  DI_TRY(walk(cfg, ckpt, s, w));
  // A pageable host-to-device copy may return before its DMA lands; kernels on non-blocking
  // streams would not wait for it.
  DI_TRY(dev.synchronize());
  w.deviceBytes = s.bytes;
  return w;
}

}  // namespace deepinfer
