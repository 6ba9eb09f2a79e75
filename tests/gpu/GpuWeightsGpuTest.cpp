// loadGpuWeights on the tiny model: every device tensor, downloaded, equals Checkpoint::loadBf16
// (matrices, norms) or loadF32 (mixes, sinks, router bias) bit for bit; nothing is missed or
// added (the walk below covers the checkpoint's table minus scales and engram tables); the
// structure follows the layer roles; deviceBytes equals gpuWeightBytes; a missing tensor fails
// with loadCpuWeights' message. Skips visibly without a GPU.
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

// One device tensor and the checkpoint name it came from.
struct Entry {
  std::string name;
  const DeviceBuffer* buf;
  bool f32;
  int64_t rows = -1, cols = -1;  // the GpuMatrix's recorded shape, -1 for plain buffers
};

// The device tensors of `w`, named independently of the loader.
std::vector<Entry> entries(const ModelConfig& cfg, const GpuWeights& w) {
  std::vector<Entry> out;
  auto mat = [&](const std::string& n, const GpuMatrix& m) { out.push_back({n, &m.data, false, m.rows, m.cols}); };
  auto b16 = [&](const std::string& n, const DeviceBuffer& b) { out.push_back({n, &b, false}); };
  auto f32 = [&](const std::string& n, const DeviceBuffer& b) { out.push_back({n, &b, true}); };
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
    auto expert = [&](const std::string& pe, const GpuExpertWeights& e) {
      mat(pe + "w1.weight", e.w1);
      mat(pe + "w3.weight", e.w3);
      mat(pe + "w2.weight", e.w2);
    };
    for (size_t e = 0; e < l.ffn.experts.size(); ++e) expert(fmt::format("{}experts.{}.", pf, e), l.ffn.experts[e]);
    if (cfg.nSharedExperts > 0) expert(pf + "shared_experts.", l.ffn.shared);
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

TEST_F(GpuWeightsGpu, EveryTensorEqualsTheCheckpointBitForBit) {
  Env& e = env();
  auto list = entries(e.cfg, *e.w);
  int64_t bytes = 0;
  std::set<std::string> seen;
  for (const Entry& en : list) {
    SCOPED_TRACE(en.name);
    ASSERT_TRUE(seen.insert(en.name).second) << "listed twice";
    auto ti = e.ckpt->info(en.name);
    ASSERT_TRUE(ti.ok()) << ti.error().message;
    auto want = en.f32 ? e.ckpt->loadF32(en.name, ti->logicalShape) : e.ckpt->loadBf16(en.name, ti->logicalShape);
    ASSERT_TRUE(want.ok()) << want.error().message;
    ASSERT_EQ(en.buf->size(), want->bytes.size());
    ASSERT_NE(en.buf->addr(), 0u);
    if (en.rows >= 0) {
      ASSERT_EQ(ti->logicalShape.size(), 2u);
      EXPECT_EQ(en.rows, ti->logicalShape[0]);
      EXPECT_EQ(en.cols, ti->logicalShape[1]);
    }
    std::vector<uint8_t> got(want->bytes.size());
    auto st = en.buf->download(got.data(), got.size());
    ASSERT_TRUE(st.ok()) << st.error().message;
    ASSERT_TRUE(got == want->bytes) << "device copy differs from Checkpoint::" << (en.f32 ? "loadF32" : "loadBf16");
    bytes += int64_t(got.size());
  }
  // Nothing left out: the checkpoint holds exactly these plus scales and engram tables.
  std::set<std::string> scales;
  for (const auto& n : e.ckpt->names())
    if (auto ti = e.ckpt->info(n); ti.ok() && !ti->scaleName.empty()) scales.insert(ti->scaleName);
  for (const auto& n : e.ckpt->names()) {
    if (scales.count(n) || n.find(".engram.embed.") != std::string::npos) continue;
    EXPECT_TRUE(seen.count(n)) << n << " is in the checkpoint but not on the device";
  }
  EXPECT_EQ(e.w->deviceBytes, bytes);
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
    ASSERT_EQ(int64_t(l.ffn.experts.size()), cfg.nRoutedExperts);
    EXPECT_EQ(l.ffn.experts[0].w1.rows, cfg.moeIntermediateSize);
    EXPECT_EQ(l.ffn.experts[0].w2.cols, cfg.moeIntermediateSize);
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

}  // namespace
