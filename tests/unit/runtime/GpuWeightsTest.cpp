// The GPU weight plan without a GPU: gpuWeightBytes of the tiny model equals the checkpoint's
// stored bytes of every tensor but the engram tables (fp8/fp4 codes and scales as stored, bf16,
// fp32 vectors), the config's own tensor table gives the same bytes, a projection in a format
// weight_gemm does not read is refused, and a missing or misshapen tensor fails with exactly
// loadCpuWeights' message.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "model/gpu/GpuWeights.h"
#include "model/CpuForwardWeights.h"
#include "model/MakeModel.h"
#include "model/Safetensors.h"
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

// The stored bytes of every tensor of the checkpoint the GPU holds: all but the engram tables
// (read row by row on the host), scales included.
int64_t storedBytesOnDevice(const Checkpoint& ck, int64_t* tensors) {
  int64_t bytes = 0;
  *tensors = 0;
  for (const auto& n : ck.names()) {
    if (n.find(".engram.embed.") != std::string::npos) continue;
    SafetensorsEntry en;
    auto p = ck.rawData(n, &en);
    EXPECT_TRUE(p.ok()) << n;
    bytes += int64_t(en.byteSize());
    ++*tensors;
  }
  return bytes;
}

TEST_F(GpuWeightPlan, BytesAreTheCheckpointsBytes) {
  // The GPU keeps every tensor as the checkpoint stores it (fp8/fp4 codes + UE8M0 scales, bf16,
  // fp32 vectors), so the plan equals the file's bytes of those tensors exactly.
  auto ck = Checkpoint::open(tiny().dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  int64_t tensors = 0;
  const int64_t expect = storedBytesOnDevice(*ck, &tensors);
  ASSERT_GT(tensors, 100);
  auto bytes = gpuWeightBytes(cfg_, *ck);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  EXPECT_EQ(*bytes, expect);

  // By hand for the tiny sizes (hidden 256, vocab 1024, 8 experts of width 128): embed + head
  // bf16, and one layer's routed experts fp4 (codes + one scale byte per 32 columns).
  const int64_t C = cfg_.hiddenSize, V = cfg_.vocabSize, I = cfg_.moeIntermediateSize, E = cfg_.nRoutedExperts;
  EXPECT_EQ(C, 256);
  EXPECT_EQ(V, 1024);
  const int64_t experts = E * (2 * (I * C / 2 + I * (C / 32)) + (C * I / 2 + C * (I / 32)));
  EXPECT_GT(*bytes, 2 * (2 * V * C) + cfg_.numHiddenLayers * experts);
}

TEST_F(GpuWeightPlan, ConfigTableMatchesTheCheckpoint) {
  // A model built without a checkpoint (ConfigWeightTable: modelTensorSpecs' formats) allocates
  // exactly what loading make-model's checkpoint of the same config allocates.
  auto ck = Checkpoint::open(tiny().dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto fromFile = gpuWeightBytes(cfg_, *ck);
  ASSERT_TRUE(fromFile.ok()) << fromFile.error().message;
  auto fromConfig = gpuWeightBytes(cfg_, ConfigWeightTable(cfg_, /*draft=*/true));
  ASSERT_TRUE(fromConfig.ok()) << fromConfig.error().message;
  EXPECT_EQ(*fromConfig, *fromFile);
  // Without the draft: less, by the mtp.* tensors' bytes.
  auto noDraft = gpuWeightBytes(cfg_, ConfigWeightTable(cfg_, /*draft=*/false));
  ASSERT_TRUE(noDraft.ok()) << noDraft.error().message;
  int64_t draftBytes = 0;
  for (const auto& n : ck->names())
    if (n.rfind("mtp.", 0) == 0) {
      SafetensorsEntry en;
      ASSERT_TRUE(ck->rawData(n, &en).ok());
      draftBytes += int64_t(en.byteSize());
    }
  ASSERT_GT(draftBytes, 0);
  EXPECT_EQ(*noDraft, *fromFile - draftBytes);
  // An unknown name is reported as such.
  auto missing = ConfigWeightTable(cfg_, true).info("layers.0.attn.nothing");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("'layers.0.attn.nothing'"), std::string::npos);
}

TEST_F(GpuWeightPlan, ProjectionInBf16IsRefused) {
  // weight_gemm reads the checkpoint's fp8/fp4 formats only: a projection stored as bf16 is
  // refused at planning, naming the tensor and what the runtime expected (the CPU reference
  // would accept it; the GPU runtime does not dequantize).
  ScratchDir dir("gpu_weights_bf16_projection");
  const std::string name = "layers.0.attn.wkv.weight";
  const int64_t D = cfg_.headDim, C = cfg_.hiddenSize;
  std::vector<uint8_t> data(size_t(D * C * 2), 0);
  writeText(dir.file("model.safetensors.index.json"),
            R"({"weight_map": {"layers.0.attn.wkv.weight": "w.safetensors"}})");
  std::string header = fmt::format(R"({{"{}": {{"dtype": "BF16", "shape": [{}, {}], "data_offsets": [0, {}]}}}})",
                                    name, D, C, data.size());
  while (header.size() % 8) header += ' ';
  std::vector<uint8_t> file(8);
  const uint64_t hl = header.size();
  for (int i = 0; i < 8; ++i) file[size_t(i)] = uint8_t(hl >> (8 * i));
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), data.begin(), data.end());
  testing_util::writeBytes(dir.file("w.safetensors"), file);
  auto ck = Checkpoint::open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;

  // Plan one projection through the walk's checks: the config table for everything else.
  struct Mixed : GpuWeightTable {
    const Checkpoint& ck;
    ConfigWeightTable rest;
    std::string name;
    Mixed(const Checkpoint& c, const ModelConfig& cfg, std::string n) : ck(c), rest(cfg, false), name(std::move(n)) {}
    Result<TensorInfo> info(const std::string& n) const override { return n == name ? ck.info(n) : rest.info(n); }
    bool hasDraft() const override { return false; }
  };
  auto bytes = gpuWeightBytes(cfg_, Mixed(*ck, cfg_, name));
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.error().message.find("'" + name + "' is BF16"), std::string::npos) << bytes.error().message;
  EXPECT_NE(bytes.error().message.find("weight_gemm"), std::string::npos) << bytes.error().message;
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
