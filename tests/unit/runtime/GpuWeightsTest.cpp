// The GPU weight plan without a GPU: gpuWeightBytes of the tiny model equals the bytes of its
// tensor table (bf16 copies of every matrix and norm, f32 for fp32 vectors, no scales, no
// engram tables), and a missing or misshapen tensor fails with exactly loadCpuWeights' message.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "model/gpu/GpuWeights.h"
#include "model/CpuForwardWeights.h"
#include "model/MakeModel.h"
#include "unit/model/ModelTestFiles.h"

using namespace deepinfer;
using deepinfer::testing_util::ScratchDir;
using deepinfer::testing_util::writeText;

namespace {

struct Tiny {
  ScratchDir dir{"gpu_weights_plan"};
  std::string error;
  Tiny() {
    MakeModelOptions o;
    o.preset = "tiny";
    o.outDir = dir.path();
    o.seed = 11;
    o.threads = 2;
    Status st = makeModel(o);
    if (!st.ok()) error = st.error().message;
  }
};

Tiny& tiny() {
  static Tiny t;
  return t;
}

class GpuWeightPlan : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tiny().error.empty()) << tiny().error;
    auto cfg = loadModelConfig(tiny().dir.path());
    ASSERT_TRUE(cfg.ok()) << cfg.error().message;
    cfg_ = *cfg;
  }
  ModelConfig cfg_;
};

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

TEST_F(GpuWeightPlan, BytesMatchTheTensorTable) {
  auto ck = Checkpoint::open(tiny().dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  // Independent count from the file's table: every tensor except scales and engram tables, as
  // bf16, or f32 where the file stores f32 (mixes, sinks, router bias).
  std::set<std::string> scales;
  for (const auto& n : ck->names()) {
    auto ti = ck->info(n);
    ASSERT_TRUE(ti.ok()) << ti.error().message;
    if (!ti->scaleName.empty()) scales.insert(ti->scaleName);
  }
  int64_t expect = 0, tensors = 0;
  for (const auto& n : ck->names()) {
    if (scales.count(n) || n.find(".engram.embed.") != std::string::npos) continue;
    auto ti = ck->info(n);
    expect += numel(ti->logicalShape) * (ti->dtype == "F32" ? 4 : 2);
    ++tensors;
  }
  ASSERT_GT(tensors, 100);
  auto bytes = gpuWeightBytes(cfg_, *ck);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  EXPECT_EQ(*bytes, expect);

  // Spot checks by hand for the tiny sizes (hidden 256, vocab 1024).
  const int64_t C = cfg_.hiddenSize, V = cfg_.vocabSize;
  EXPECT_EQ(C, 256);
  EXPECT_EQ(V, 1024);
  EXPECT_GT(*bytes, 2 * (2 * V * C) + 2 * C);
}

// A copy of the model directory's table through an index that leaves `drop` out.
void writeIndexWithout(const Checkpoint& ck, const std::string& dir, const std::string& drop) {
  std::string map;
  for (const auto& n : ck.names()) {
    if (n == drop) continue;
    map += fmt::format("{}\"{}\": \"model.safetensors\"", map.empty() ? "" : ", ", n);
  }
  writeText(dir + "/model.safetensors.index.json", fmt::format("{{\"weight_map\": {{{}}}}}", map));
}

TEST_F(GpuWeightPlan, MissingTensorFailsLikeTheCpuLoader) {
  ScratchDir dir("gpu_weights_missing");
  // Link the data file into a fresh directory and describe it with an index lacking a tensor.
  std::filesystem::create_symlink(tiny().dir.file("model.safetensors"), dir.file("model.safetensors"));
  auto full = Checkpoint::open(tiny().dir.path());
  ASSERT_TRUE(full.ok()) << full.error().message;
  for (const std::string drop : {"layers.1.ffn.experts.3.w2.weight", "layers.2.attn.compressor.wgate.weight",
                                 "layers.4.attn.indexer.k_norm.weight", "head.weight", "layers.7.hc_ffn_scale"}) {
    ASSERT_TRUE(full->has(drop)) << drop;
    writeIndexWithout(*full, dir.path(), drop);
    auto ck = Checkpoint::open(dir.path());
    ASSERT_TRUE(ck.ok()) << ck.error().message;
    auto bytes = gpuWeightBytes(cfg_, *ck);
    ASSERT_FALSE(bytes.ok()) << drop;
    EXPECT_NE(bytes.error().message.find("'" + drop + "' is not in the checkpoint"), std::string::npos)
        << bytes.error().message;
    auto cpu = loadCpuWeights(cfg_, *ck);
    ASSERT_FALSE(cpu.ok());
    EXPECT_EQ(bytes.error().message, cpu.error().message);
  }
  // A missing scale of an fp8 weight is reported on the weight.
  writeIndexWithout(*full, dir.path(), "layers.0.attn.wq_a.scale");
  auto ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto bytes = gpuWeightBytes(cfg_, *ck);
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.error().message.find("no scale tensor 'layers.0.attn.wq_a.scale'"), std::string::npos)
      << bytes.error().message;
}

TEST_F(GpuWeightPlan, WrongShapeFailsLikeTheCpuLoader) {
  auto ck = Checkpoint::open(tiny().dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  for (int which = 0; which < 3; ++which) {
    ModelConfig cfg = cfg_;
    const char* expectName = "";
    if (which == 0) {
      cfg.qLoraRank *= 2;  // wq_a rows
      expectName = "'layers.0.attn.wq_a.weight'";
    } else if (which == 1) {
      cfg.moeIntermediateSize += 32;  // routed experts' width
      expectName = "'layers.0.ffn.experts.0.w1.weight'";
    } else {
      cfg.indexHeadDim *= 2;  // the first kv source's indexer.wk
      expectName = "'layers.2.attn.indexer.wk.weight'";
    }
    auto bytes = gpuWeightBytes(cfg, *ck);
    ASSERT_FALSE(bytes.ok()) << which;
    EXPECT_NE(bytes.error().message.find(expectName), std::string::npos) << bytes.error().message;
    EXPECT_NE(bytes.error().message.find("expected ["), std::string::npos) << bytes.error().message;
    auto cpu = loadCpuWeights(cfg, *ck);
    ASSERT_FALSE(cpu.ok());
    EXPECT_EQ(bytes.error().message, cpu.error().message);
  }
}

}  // namespace
