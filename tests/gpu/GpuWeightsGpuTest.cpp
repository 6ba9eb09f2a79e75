// loadGpuWeights on the tiny model: every quantized device tensor holds the checkpoint's code and
// scale bytes exactly (fp8 e4m3 + UE8M0 per 32x32, fp4 e2m1 + UE8M0 per 32 columns), every other
// one equals Checkpoint::loadBf16 (matrices, norms) or loadF32 (mixes, sinks, router bias) bit
// for bit; nothing is missed or added (the walk below covers the checkpoint's table minus
// engram tables); the device bytes equal the checkpoint's and gpuWeightBytes; the structure
// follows the layer roles; a missing tensor, a NaN and a bad scale byte fail naming the tensor.
// Skips visibly without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "deepinfer/Device.h"
#include "model/gpu/GpuWeights.h"
#include "model/CpuForwardWeights.h"
#include "model/MakeModel.h"
#include "model/Safetensors.h"
#include "unit/model/ModelTestFiles.h"

using namespace deepinfer;
using deepinfer::testing_util::ScratchDir;
using deepinfer::testing_util::writeText;

namespace {

struct Env {
  std::shared_ptr<Device> dev;
  std::string why;
  std::unique_ptr<ScratchDir> dir;
  ModelConfig cfg;
  std::unique_ptr<Checkpoint> ckpt;
  std::unique_ptr<GpuWeights> w;
  std::string loadError;
};

void setUp(Env& e) {
  auto d = Device::open(0);
  if (!d.ok()) {
    e.why = d.error().message;
    return;
  }
  e.dev = *d;
  e.dir = std::make_unique<ScratchDir>("gpu_weights");
  MakeModelOptions o;
  o.preset = "tiny";
  o.outDir = e.dir->path();
  o.seed = 5;
  o.threads = 2;
  if (Status st = makeModel(o); !st.ok()) {
    e.loadError = st.error().message;
    return;
  }
  auto cfg = loadModelConfig(e.dir->path());
  if (!cfg.ok()) {
    e.loadError = cfg.error().message;
    return;
  }
  e.cfg = *cfg;
  auto ck = Checkpoint::open(e.dir->path());
  if (!ck.ok()) {
    e.loadError = ck.error().message;
    return;
  }
  e.ckpt = std::make_unique<Checkpoint>(std::move(*ck));
  auto w = loadGpuWeights(e.cfg, *e.ckpt, *e.dev);
  if (!w.ok()) {
    e.loadError = w.error().message;
    return;
  }
  e.w = std::make_unique<GpuWeights>(std::move(*w));
}

Env& env() {
  static std::unique_ptr<Env> e = [] {
    auto p = std::make_unique<Env>();
    setUp(*p);
    return p;
  }();
  return *e;
}

class GpuWeightsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!env().dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << env().why;
    ASSERT_TRUE(env().w) << env().loadError;
  }
};

// One device tensor and the checkpoint name it came from. Quantized tensors are the
// checkpoint's code bytes (`buf`) and scale bytes (`scales`) at an offset (routed experts share
// one buffer per kind); bf16 and f32 ones the loaders' decoded values.
struct Entry {
  enum Kind { Bf16, F32, Quant } kind = Bf16;
  std::string name;
  const DeviceBuffer* buf = nullptr;
  int64_t rows = -1, cols = -1;  // the GpuMatrix's recorded shape, -1 for plain buffers
  GpuWeightFormat format = GpuWeightFormat::Bf16;
  const DeviceBuffer* scales = nullptr;
  size_t codeOffset = 0, scaleOffset = 0;
};

// The device tensors of `w`, named independently of the loader.
std::vector<Entry> entries(const ModelConfig& cfg, const GpuWeights& w) {
  std::vector<Entry> out;
  auto mat = [&](const std::string& n, const GpuMatrix& m) {
    Entry e;
    e.kind = m.quantized() ? Entry::Quant : Entry::Bf16;
    e.name = n;
    e.buf = &m.data;
    e.rows = m.rows;
    e.cols = m.cols;
    e.format = m.format;
    e.scales = &m.scales;
    out.push_back(e);
  };
  auto b16 = [&](const std::string& n, const DeviceBuffer& b) { out.push_back({Entry::Bf16, n, &b}); };
  auto f32 = [&](const std::string& n, const DeviceBuffer& b) { out.push_back({Entry::F32, n, &b}); };
  mat("embed.weight", w.embed);
  mat("head.weight", w.head);
  b16("norm.weight", w.norm);
  auto block = [&](const std::string& p, const GpuLayerWeights& l) {
    b16(p + "attn_norm.weight", l.attnNorm);
    b16(p + "ffn_norm.weight", l.ffnNorm);
    for (auto [which, hc] : {std::pair{"attn", &l.hcAttn}, std::pair{"ffn", &l.hcFfn}}) {
      f32(p + "hc_" + which + "_fn", hc->fn);
      f32(p + "hc_" + which + "_base", hc->base);
      f32(p + "hc_" + which + "_scale", hc->scale);
    }
    const GpuAttentionWeights& a = l.attn;
    const std::string pa = p + "attn.";
    mat(pa + "wq_a.weight", a.wqA);
    b16(pa + "q_norm.weight", a.qNorm);
    mat(pa + "wq_b.weight", a.wqB);
    mat(pa + "wkv.weight", a.wkv);
    b16(pa + "kv_norm.weight", a.kvNorm);
    mat(pa + "wo_a.weight", a.woA);
    mat(pa + "wo_b.weight", a.woB);
    f32(pa + "attn_sink", a.attnSink);
    if (!a.compWkv.empty()) {
      mat(pa + "compressor.wkv.weight", a.compWkv);
      b16(pa + "compressor.norm.weight", a.compNorm);
      if (!a.compWgate.empty()) mat(pa + "compressor.wgate.weight", a.compWgate);
      mat(pa + "indexer.wk.weight", a.idxWk);
      b16(pa + "indexer.k_norm.weight", a.idxKNorm);
    }
    if (!a.idxWqB.empty()) {
      mat(pa + "indexer.wq_b.weight", a.idxWqB);
      mat(pa + "indexer.weights_proj.weight", a.idxWeightsProj);
    }
    const std::string pf = p + "ffn.";
    mat(pf + "gate.weight", l.ffn.gate);
    f32(pf + "gate.bias", l.ffn.gateBias);
    // Routed experts: expert e's codes and scales at e times their size in each kind's buffer.
    const GpuRoutedExperts& r = l.ffn.routed;
    const int64_t C = r.hidden, I = r.intermediate;
    for (int64_t e = 0; e < r.experts; ++e)
      for (const auto& [which, codes, scales, rows, cols] :
           {std::tuple{"w1", &r.w1, &r.w1Scale, I, C}, std::tuple{"w3", &r.w3, &r.w3Scale, I, C},
            std::tuple{"w2", &r.w2, &r.w2Scale, C, I}}) {
        Entry en;
        en.kind = Entry::Quant;
        en.name = fmt::format("{}experts.{}.{}.weight", pf, e, which);
        en.buf = codes;
        en.scales = scales;
        en.rows = rows;
        en.cols = cols;
        en.format = GpuWeightFormat::Fp4;
        en.codeOffset = size_t(e * rows * cols / 2);
        en.scaleOffset = size_t(e * rows * (cols / 32));
        out.push_back(en);
      }
    if (cfg.nSharedExperts > 0) {
      mat(pf + "shared_experts.w1.weight", l.ffn.shared.w1);
      mat(pf + "shared_experts.w3.weight", l.ffn.shared.w3);
      mat(pf + "shared_experts.w2.weight", l.ffn.shared.w2);
    }
    if (l.hasEngram) {
      mat(p + "engram.wkv.weight", l.engram.wkv);
      b16(p + "engram.q_weight", l.engram.qWeight);
      b16(p + "engram.k_weight", l.engram.kWeight);
    }
  };
  for (int L = 0; L < int(w.layers.size()); ++L) block(fmt::format("layers.{}.", L), w.layers[size_t(L)]);
  if (w.hasDraft) {  // the DSpark stages (blocks of their own) and heads
    const GpuDsparkWeights& d = w.draft;
    for (int s = 0; s < int(d.stages.size()); ++s) block(fmt::format("mtp.{}.", s), d.stages[size_t(s)]);
    mat("mtp.0.main_proj.weight", d.mainProj);
    b16("mtp.0.main_norm.weight", d.mainNorm);
    const std::string last = fmt::format("mtp.{}.", d.stages.size() - 1);
    b16(last + "norm.weight", d.norm);
    mat(last + "markov_head.embed.weight", d.markovEmbed);
    mat(last + "markov_head.head.weight", d.markovHead);
    b16(last + "confidence_head.proj.weight", d.confidence);
  }
  return out;
}

std::vector<uint8_t> downloadBytes(const DeviceBuffer& b, size_t offset, size_t n) {
  std::vector<uint8_t> got(n);
  auto st = b.download(got.data(), n, offset);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return got;
}

// The raw bytes of a checkpoint tensor as stored.
std::vector<uint8_t> rawBytes(const Checkpoint& ck, const std::string& name) {
  SafetensorsEntry en;
  auto p = ck.rawData(name, &en);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  if (!p.ok()) return {};
  return std::vector<uint8_t>(*p, *p + en.byteSize());
}

// Every buffer of the weights once (routed experts' kinds are shared by their experts).
int64_t bufferBytes(const std::vector<Entry>& list) {
  std::set<const DeviceBuffer*> seen;
  int64_t n = 0;
  for (const Entry& en : list)
    for (const DeviceBuffer* b : {en.buf, en.scales})
      if (b && seen.insert(b).second) n += int64_t(b->size());
  return n;
}

TEST_F(GpuWeightsGpu, EveryTensorEqualsTheCheckpointBitForBit) {
  // Quantized tensors: the checkpoint's code and scale bytes exactly, in the checkpoint's format;
  // bf16/f32 ones: Checkpoint::loadBf16 / loadF32 exactly.
  Env& e = env();
  auto list = entries(e.cfg, *e.w);
  std::set<std::string> seen;
  int quantized = 0;
  for (const Entry& en : list) {
    SCOPED_TRACE(en.name);
    ASSERT_TRUE(seen.insert(en.name).second) << "listed twice";
    auto ti = e.ckpt->info(en.name);
    ASSERT_TRUE(ti.ok()) << ti.error().message;
    ASSERT_NE(en.buf->addr(), 0u);
    if (en.rows >= 0) {
      ASSERT_EQ(ti->logicalShape.size(), 2u);
      EXPECT_EQ(en.rows, ti->logicalShape[0]);
      EXPECT_EQ(en.cols, ti->logicalShape[1]);
    }
    if (en.kind == Entry::Quant) {
      ++quantized;
      ASSERT_NE(ti->format, WeightFormat::Plain) << "a bf16 checkpoint tensor was stored as quantized";
      EXPECT_EQ(en.format, ti->format == WeightFormat::Fp4 ? GpuWeightFormat::Fp4 : GpuWeightFormat::Fp8);
      const auto codes = rawBytes(*e.ckpt, en.name), scales = rawBytes(*e.ckpt, ti->scaleName);
      ASSERT_FALSE(codes.empty());
      ASSERT_FALSE(scales.empty());
      ASSERT_LE(en.codeOffset + codes.size(), en.buf->size());
      ASSERT_LE(en.scaleOffset + scales.size(), en.scales->size());
      EXPECT_TRUE(downloadBytes(*en.buf, en.codeOffset, codes.size()) == codes) << "code bytes differ";
      EXPECT_TRUE(downloadBytes(*en.scales, en.scaleOffset, scales.size()) == scales) << "scale bytes differ";
      continue;
    }
    // The spec's bf16/f32 tensors stay as decoded; a quantized checkpoint tensor must not land here.
    EXPECT_EQ(ti->format, WeightFormat::Plain) << "a quantized checkpoint tensor was dequantized";
    auto want = en.kind == Entry::F32 ? e.ckpt->loadF32(en.name, ti->logicalShape)
                                      : e.ckpt->loadBf16(en.name, ti->logicalShape);
    ASSERT_TRUE(want.ok()) << want.error().message;
    ASSERT_EQ(en.buf->size(), want->bytes.size());
    ASSERT_TRUE(downloadBytes(*en.buf, 0, want->bytes.size()) == want->bytes)
        << "device copy differs from Checkpoint::" << (en.kind == Entry::F32 ? "loadF32" : "loadBf16");
  }
  EXPECT_GT(quantized, 100);
  // Nothing left out: the checkpoint holds exactly these plus scales and engram tables.
  std::set<std::string> scales;
  for (const auto& n : e.ckpt->names())
    if (auto ti = e.ckpt->info(n); ti.ok() && !ti->scaleName.empty()) scales.insert(ti->scaleName);
  int64_t fileBytes = 0;  // the checkpoint's bytes of the same tensors (scales included)
  for (const auto& n : e.ckpt->names()) {
    if (n.find(".engram.embed.") != std::string::npos) continue;
    if (!scales.count(n)) EXPECT_TRUE(seen.count(n)) << n << " is in the checkpoint but not on the device";
    fileBytes += int64_t(rawBytes(*e.ckpt, n).size());
  }
  // Every buffer is one tensor's (or one expert kind's) exact size: the device holds what the
  // checkpoint stores (fp32 vectors as fp32, bf16 as bf16, quantized tensors with their scales).
  const int64_t bytes = bufferBytes(list);
  EXPECT_EQ(e.w->deviceBytes, bytes);
  EXPECT_EQ(bytes, fileBytes);
  auto planned = gpuWeightBytes(e.cfg, *e.ckpt);
  ASSERT_TRUE(planned.ok()) << planned.error().message;
  EXPECT_EQ(*planned, bytes);
}

TEST_F(GpuWeightsGpu, StructureFollowsTheLayerRoles) {
  Env& e = env();
  const ModelConfig& cfg = e.cfg;
  const GpuWeights& w = *e.w;
  ASSERT_EQ(int(w.layers.size()), cfg.numHiddenLayers);
  EXPECT_EQ(w.embed.rows, cfg.vocabSize);
  EXPECT_EQ(w.embed.cols, cfg.hiddenSize);
  EXPECT_EQ(w.head.rows, cfg.vocabSize);
  EXPECT_EQ(int64_t(w.norm.size()), cfg.hiddenSize * 2);
  int ratio2Sources = 0, indexSources = 0, engrams = 0;
  for (int L = 0; L < cfg.numHiddenLayers; ++L) {
    SCOPED_TRACE(fmt::format("layer {}", L));
    const LayerRole& role = cfg.role(L);
    const GpuLayerWeights& l = w.layers[size_t(L)];
    EXPECT_EQ(l.attn.wqA.rows, cfg.qLoraRank);
    EXPECT_EQ(l.attn.wqB.rows, int64_t(cfg.numAttentionHeads) * cfg.headDim);
    EXPECT_EQ(int64_t(l.attn.attnSink.size()), int64_t(cfg.numAttentionHeads) * 4);
    EXPECT_EQ(int64_t(l.hcAttn.fn.size()), 24 * 4 * cfg.hiddenSize * 4);
    EXPECT_EQ(l.attn.compWkv.empty(), !role.isKvSource);
    EXPECT_EQ(l.attn.idxWk.empty(), !role.isKvSource);
    EXPECT_EQ(l.attn.compWgate.empty(), !(role.isKvSource && role.ratio == 2));
    EXPECT_EQ(l.attn.idxWqB.empty(), !role.isIndexSource);
    EXPECT_EQ(l.attn.idxWeightsProj.empty(), !role.isIndexSource);
    EXPECT_EQ(l.ffn.routed.experts, cfg.nRoutedExperts);
    EXPECT_EQ(l.ffn.routed.hidden, cfg.hiddenSize);
    EXPECT_EQ(l.ffn.routed.intermediate, cfg.moeIntermediateSize);
    EXPECT_EQ(int64_t(l.ffn.routed.w2.size()), cfg.nRoutedExperts * cfg.hiddenSize * cfg.moeIntermediateSize / 2);
    EXPECT_EQ(l.attn.wqA.format, GpuWeightFormat::Fp8);
    EXPECT_EQ(l.ffn.gate.format, GpuWeightFormat::Bf16);
    EXPECT_EQ(l.ffn.shared.w1.empty(), cfg.nSharedExperts == 0);
    EXPECT_EQ(l.hasEngram, role.isEngram);
    if (l.hasEngram) {
      EXPECT_EQ(l.engram.tableName, fmt::format("layers.{}.engram.embed.weight", L));
      EXPECT_EQ(l.engram.wkv.rows, 5 * cfg.hiddenSize);
    } else {
      EXPECT_TRUE(l.engram.wkv.empty());
    }
    ratio2Sources += role.isKvSource && role.ratio == 2;
    indexSources += role.isIndexSource;
    engrams += l.hasEngram;
  }
  // The tiny preset exercises every optional part.
  EXPECT_GT(ratio2Sources, 0);
  EXPECT_GT(indexSources, 0);
  EXPECT_GT(engrams, 0);
}

TEST_F(GpuWeightsGpu, MissingTensorFailsLikeTheCpuLoader) {
  Env& e = env();
  ScratchDir dir("gpu_weights_missing_gpu");
  std::filesystem::create_symlink(e.dir->file("model.safetensors"), dir.file("model.safetensors"));
  const std::string drop = "layers.3.ffn.experts.1.w3.weight";
  ASSERT_TRUE(e.ckpt->has(drop));
  std::string map;
  for (const auto& n : e.ckpt->names())
    if (n != drop) map += fmt::format("{}\"{}\": \"model.safetensors\"", map.empty() ? "" : ", ", n);
  writeText(dir.file("model.safetensors.index.json"), fmt::format("{{\"weight_map\": {{{}}}}}", map));
  auto ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto w = loadGpuWeights(e.cfg, *ck, *e.dev);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("'" + drop + "' is not in the checkpoint"), std::string::npos) << w.error().message;
  auto cpu = loadCpuWeights(e.cfg, *ck);
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(w.error().message, cpu.error().message);
}

TEST_F(GpuWeightsGpu, NaNWeightFailsLikeTheCpuLoader) {
  // One NaN in a copy of the checkpoint: both loaders refuse it, naming the tensor and element.
  Env& e = env();
  ScratchDir dir("gpu_weights_nan");
  const std::string st = dir.file("model.safetensors");
  std::filesystem::copy_file(e.dir->file("model.safetensors"), st);
  const std::string name = "layers.5.attn.attn_sink";
  uint64_t at = 0;
  {
    auto f = SafetensorsFile::open(st);
    ASSERT_TRUE(f.ok()) << f.error().message;
    const SafetensorsEntry* en = (*f)->find(name);
    ASSERT_NE(en, nullptr);
    ASSERT_EQ(en->dtype, "F32");
    at = std::filesystem::file_size(st) - (*f)->dataSectionSize() + en->begin + 4;  // element 1
  }
  std::vector<uint8_t> bytes = testing_util::readBytes(st);
  const float nan = std::nanf("");
  std::memcpy(bytes.data() + at, &nan, 4);
  testing_util::writeBytes(st, bytes);
  auto ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto w = loadGpuWeights(e.cfg, *ck, *e.dev);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("'" + name + "': holds NaN at element [0, 1]"), std::string::npos)
      << w.error().message;
  auto cpu = loadCpuWeights(e.cfg, *ck);
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(w.error().message, cpu.error().message);
}

// A copy of the checkpoint with one byte of tensor `name` (element `index` of its stored bytes)
// replaced; returns the copy's directory.
std::unique_ptr<ScratchDir> corruptCopy(Env& e, const std::string& tag, const std::string& name, uint64_t index,
                                        uint8_t byte) {
  auto dir = std::make_unique<ScratchDir>(tag);
  const std::string st = dir->file("model.safetensors");
  std::filesystem::copy_file(e.dir->file("model.safetensors"), st);
  uint64_t at = 0;
  {
    auto f = SafetensorsFile::open(st);
    EXPECT_TRUE(f.ok()) << f.error().message;
    if (!f.ok()) return dir;
    const SafetensorsEntry* en = (*f)->find(name);
    EXPECT_NE(en, nullptr) << name;
    if (!en) return dir;
    at = std::filesystem::file_size(st) - (*f)->dataSectionSize() + en->begin + index;
  }
  std::vector<uint8_t> bytes = testing_util::readBytes(st);
  bytes[at] = byte;
  testing_util::writeBytes(st, bytes);
  return dir;
}

TEST_F(GpuWeightsGpu, BadQuantizedBytesFailNamingTheTensor) {
  // The GPU loader uploads quantized bytes as stored, so it must refuse what the CPU loader
  // refuses: an e4m3 NaN code, a NaN (0xFF) scale byte of an fp8 weight, a scale byte of a
  // routed expert outside the exact range. Same messages as the CPU loader.
  Env& e = env();
  struct Case {
    std::string tensor, corrupt;
    uint64_t index;
    uint8_t byte;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {"layers.1.attn.wq_b.weight", "layers.1.attn.wq_b.weight", 5, 0x7F, {"holds NaN at element [0, 5]"}},
      {"layers.2.ffn.shared_experts.w2.weight", "layers.2.ffn.shared_experts.w2.scale", 1, 0xFF, {"byte 255 (NaN)"}},
      {"layers.3.ffn.experts.5.w1.weight", "layers.3.ffn.experts.5.w1.scale", 2, 253, {"byte 253"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.corrupt);
    auto dir = corruptCopy(e, "gpu_weights_bad_bytes", c.corrupt, c.index, c.byte);
    auto ck = Checkpoint::open(dir->path());
    ASSERT_TRUE(ck.ok()) << ck.error().message;
    auto w = loadGpuWeights(e.cfg, *ck, *e.dev);
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.error().message.find("'" + c.tensor + "'"), std::string::npos) << w.error().message;
    for (const std::string& x : c.expect) EXPECT_NE(w.error().message.find(x), std::string::npos) << w.error().message;
    auto cpu = loadCpuWeights(e.cfg, *ck);
    ASSERT_FALSE(cpu.ok());
    EXPECT_EQ(w.error().message, cpu.error().message);
  }
}

}  // namespace
