// Pipeline stages of the GPU runtime without a GPU: the stage plan of the tiny model (layer
// ranges, mirrored kv sources, and exactly what crosses each boundary: the mirrored sources'
// attention inputs, the index selections and candidate blocks later layers read), the hand-off
// buffers' sizes, each stage's weights (only its tensors: the stages' bytes add up to the
// backbone's plus one compressor per mirror), and the parallel options' errors in the Engine
// and C APIs (a tp that does not split the model, or a --gpus list of the wrong length, names what is wrong).
#include <gtest/gtest.h>

#include <string>

#include "deepinfer/Engine.h"
#include "deepinfer/deepinfer.h"
#include "model/MakeModelPresets.h"
#include "model/gpu/GpuForward.h"
#include "model/gpu/GpuWeights.h"

namespace deepinfer {
namespace {

ModelConfig tiny() {
  auto c = makeModelPresetConfig("tiny");
  EXPECT_TRUE(c.ok()) << c.error().message;
  return c.ok() ? *c : ModelConfig{};
}

std::vector<GpuStagePlan> mustStages(int pp, std::vector<int> layers) {
  GpuModelOptions o;
  o.pp = pp;
  o.stageLayers = std::move(layers);
  auto s = planGpuStages(tiny(), o);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return s.ok() ? *s : std::vector<GpuStagePlan>{};
}

std::string stageError(GpuModelOptions o) {
  auto s = planGpuStages(tiny(), o);
  return s.ok() ? std::string("(no error)") : s.error().message;
}

TEST(GpuStages, OneStageRunsEverythingAndSendsNothing) {
  const auto s = mustStages(1, {});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_TRUE(s[0].first() && s[0].last());
  EXPECT_EQ(s[0].layerBegin, 0);
  EXPECT_EQ(s[0].layerEnd, 8);
  EXPECT_TRUE(s[0].mirroredSources.empty() && s[0].sendInputs.empty() && s[0].recvInputs.empty());
  EXPECT_TRUE(s[0].sendSelections.empty() && !s[0].sendKept);
}

TEST(GpuStages, TinySplitsMirrorAndSendWhatLaterLayersRead) {
  // tiny: 2 = ratio-2 kv+index source read by 3; 4 = ratio-1 kv+index+candidate source read by
  // 5, 6 (restricted, scores 4's keys) and 7 (reads 6's top-k).
  {
    const auto s = mustStages(2, {3, 5});  // [0,3) [3,8)
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[1].mirroredSources, std::vector<int>({2}));
    EXPECT_EQ(s[0].sendInputs, std::vector<int>({2}));
    EXPECT_EQ(s[0].sendSelections, std::vector<int>({2}));
    EXPECT_FALSE(s[0].sendKept);
    EXPECT_EQ(s[1].recvInputs, s[0].sendInputs);
    EXPECT_EQ(s[1].recvSelections, s[0].sendSelections);
  }
  {
    const auto s = mustStages(2, {});  // [0,4) [4,8): stage 1 reads only its own source
    EXPECT_EQ(s[1].layerBegin, 4);
    EXPECT_TRUE(s[1].mirroredSources.empty() && s[0].sendInputs.empty() && s[0].sendSelections.empty());
    EXPECT_FALSE(s[0].sendKept);
  }
  {
    const auto s = mustStages(3, {2, 4, 2});  // [0,2) [2,6) [6,8)
    EXPECT_TRUE(s[1].mirroredSources.empty());
    EXPECT_EQ(s[2].mirroredSources, std::vector<int>({4}));
    EXPECT_TRUE(s[0].sendInputs.empty() && s[0].sendSelections.empty() && !s[0].sendKept);
    EXPECT_EQ(s[1].sendInputs, std::vector<int>({4}));
    EXPECT_TRUE(s[1].sendSelections.empty()) << "6 and 7 read 6's selection, made on stage 2";
    EXPECT_TRUE(s[1].sendKept) << "6 is restricted by 4's candidate blocks";
    EXPECT_TRUE(s[2].recvKept);
  }
  {
    const auto s = mustStages(3, {5, 1, 2});  // [0,5) [5,6) [6,8): 4's input and blocks pass through
    EXPECT_EQ(s[1].mirroredSources, std::vector<int>({4}));
    EXPECT_EQ(s[2].mirroredSources, std::vector<int>({4}));
    EXPECT_EQ(s[0].sendInputs, std::vector<int>({4}));
    EXPECT_EQ(s[0].sendSelections, std::vector<int>({4}));
    EXPECT_TRUE(s[0].sendKept);
    EXPECT_EQ(s[1].sendInputs, std::vector<int>({4}));
    EXPECT_TRUE(s[1].sendSelections.empty());
    EXPECT_TRUE(s[1].sendKept);
  }
}

TEST(GpuStages, HandoffItemsAreTheResidualStateThenWhatLaterLayersRead) {
  const ModelConfig cfg = tiny();
  const int64_t T = 7, C = cfg.hiddenSize;
  const auto items = gpuHandoffItems(cfg, {2}, {2, 4}, true, T);
  ASSERT_EQ(items.size(), 9u);
  const std::vector<std::pair<std::string, size_t>> want = {
      {"X", size_t(T * 4 * C * 2)}, {"f", size_t(T * C * 2)},     {"post", size_t(T * 16)},
      {"comb", size_t(T * 64)},     {"preF", size_t(T * 16)},     {"u.2", size_t(T * C * 2)},
      {"sel.2", size_t(T * cfg.indexTopk * 4)}, {"sel.4", size_t(T * cfg.indexTopk * 4)},
      {"kept", size_t(T * cfg.candidateTopkBlocks * 4)}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(items[i].name, want[i].first);
    EXPECT_EQ(items[i].bytes, want[i].second) << want[i].first;
  }
}

TEST(GpuStages, BadSplitsAndTensorParallelismAreClearErrors) {
  GpuModelOptions o;
  o.pp = 2;
  o.stageLayers = {4, 5};
  EXPECT_EQ(stageError(o), "pipeline stages: stage layer counts add up to 9, the model has 8 layers");
  o.stageLayers = {8, 0};
  EXPECT_NE(stageError(o).find("stage 1 has 0 layers"), std::string::npos) << stageError(o);
  o.stageLayers = {};
  o.pp = 9;
  EXPECT_NE(stageError(o).find("pp 9: more stages than the model's 8 layers"), std::string::npos) << stageError(o);
  o.pp = 0;
  EXPECT_EQ(stageError(o), "pp 0 must be at least 1");
  o.pp = 2;
  o.gpus = {0, 1, 2};
  EXPECT_EQ(stageError(o), "3 GPUs given for 2 pipeline stages (one ordinal per stage)");
  o.gpus = {0, -1};
  EXPECT_EQ(stageError(o), "GPU ordinal -1 of stage 1 is negative");
  o.gpus = {};
  o.tp = 3;  // the split ShardPlan rejects
  const std::string tp = stageError(o);
  EXPECT_NE(tp.find("tp 3 x pp 2: tp 3 does not split num_attention_heads = 8"), std::string::npos) << tp;
  o.tp = 2;
  o.gpus = {0, 1};
  EXPECT_EQ(stageError(o), "2 GPUs given for 2 pipeline stages x 2 tensor ranks (one ordinal per rank, rank r of "
                           "stage s at s * tp + r)");
  o.gpus = {};
  o.tp = 1;
  o.pp = 1;
  o.stageLayers = {7};
  EXPECT_NE(stageError(o).find("add up to 7, the model has 8 layers"), std::string::npos) << stageError(o);
}

TEST(GpuStages, EachStageHoldsOnlyItsTensors) {
  const ModelConfig cfg = tiny();
  const ConfigWeightTable table(cfg, /*draft=*/false);
  GpuStageTensors whole;
  auto all = gpuWeightBytes(cfg, table, whole);
  ASSERT_TRUE(all.ok()) << all.error().message;
  // The mirrored compressor of layer 2 (ratio 2: wkv and wgate, norm, index keys and their norm).
  const int64_t C = cfg.hiddenSize, D = cfg.headDim, Di = cfg.indexHeadDim;
  const int64_t mirror2 = 2 * D * C * 2 + D * 2 + Di * D * 2 + Di * 2;
  for (const auto& [layers, mirrorBytes] :
       std::vector<std::pair<std::vector<int>, int64_t>>{{{4, 4}, 0}, {{3, 5}, mirror2}}) {
    const auto stages = mustStages(2, layers);
    int64_t sum = 0;
    for (const GpuStagePlan& sp : stages) {
      GpuStageTensors t;
      t.layerBegin = sp.layerBegin;
      t.layerEnd = sp.layerEnd;
      t.embedding = sp.first();
      t.head = sp.last();
      t.mirroredSources = sp.mirroredSources;
      auto b = gpuWeightBytes(cfg, table, t);
      ASSERT_TRUE(b.ok()) << b.error().message;
      EXPECT_LT(*b, *all);
      sum += *b;
    }
    EXPECT_EQ(sum, *all + mirrorBytes) << "split " << layers[0] << "," << layers[1];
  }
  GpuStageTensors bad;
  bad.layerBegin = 3;
  bad.layerEnd = 8;
  bad.mirroredSources = {4};
  auto b = gpuWeightBytes(cfg, table, bad);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("layer 4 is not a kv source of an earlier stage"), std::string::npos)
      << b.error().message;
}

TEST(GpuStages, EngineAndCApiRefuseWhatIsNotBuilt) {
  EngineOptions o;
  o.tp = 2;
  o.backend = "cpu";
  auto e = Engine::create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("cpu backend runs the whole model in one stage on one rank"), std::string::npos)
      << e.error().message;
  o.tp = 1;
  o.pp = 2;
  e = Engine::create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("cpu backend runs the whole model in one stage"), std::string::npos)
      << e.error().message;
  o.backend = "cuda";
  o.stageLayers = {8};
  EXPECT_EQ(checkParallelOptions(o).error().message, "engine: 1 stage layer counts given for pp 2");
  o.stageLayers = {};
  o.gpus = {0};
  EXPECT_EQ(checkParallelOptions(o).error().message,
            "engine: 1 GPUs given for 2 pipeline stages (one ordinal per stage)");
  o.gpus = {0, 0};
  EXPECT_TRUE(checkParallelOptions(o).ok());

  di_engine_options c{};
  c.backend = "cpu";
  c.tp = 4;
  di_engine* eng = nullptr;
  EXPECT_NE(di_engine_create(&c, &eng), 0);
  EXPECT_NE(std::string(di_last_error()).find("cpu backend runs the whole model in one stage on one rank"),
            std::string::npos)
      << di_last_error();
  c.tp = 0;
  c.pp = 2;
  const int layers[2] = {4, 4};
  c.stage_layers = layers;
  EXPECT_NE(di_engine_create(&c, &eng), 0);
  EXPECT_NE(std::string(di_last_error()).find("cpu backend runs the whole model in one stage"), std::string::npos)
      << di_last_error();
  c.pp = -1;
  EXPECT_NE(di_engine_create(&c, &eng), 0);
  EXPECT_NE(std::string(di_last_error()).find("pp -1 < 0"), std::string::npos) << di_last_error();
  c.pp = 1;
  c.stage_layers = nullptr;
  ASSERT_EQ(di_engine_create(&c, &eng), 0) << di_last_error();
  size_t len = 0;
  char buf[64];
  ASSERT_EQ(di_engine_describe(eng, buf, sizeof buf, &len), 0) << di_last_error();
  EXPECT_EQ(std::string(buf), "cpu (no model)");
  EXPECT_EQ(len, std::string("cpu (no model)").size());
  di_engine_destroy(eng);
  EXPECT_NE(di_engine_describe(nullptr, buf, sizeof buf, &len), 0);
}

}  // namespace
}  // namespace deepinfer
