// Pipeline stages on one GPU (label gpu; skips visibly without a GPU): the `tiny` model split
// into 2 and 3 stages over layer ranges, every stage a logical device of the same GPU with its
// own weights, KV pools and stream, against the same model in one stage. The stages run the
// same kernels in the same order on the same inputs (the hand-off is a byte copy of the
// residual state taken before the boundary layer's post step; mirrored kv sources are computed
// by the same compressor kernels from the source layer's attention input), so every logit must
// be identical bit for bit: chunked prefill, decode steps (CUDA graphs per stage), batched
// forwards with lastOnly, eager stages against a graph-replaying single stage, and synthetic
// weights. The splits cover each hand-off: a mirrored ratio-2 source with its carried tails
// (3,5: layer 3 reads layer 2's cache and top-k), a stage that starts at an engram layer and
// reads the candidate blocks of an earlier stage (2,4,2: layer 6), a selection and kept blocks
// sent on from a middle stage (3,2,3), a mirrored source's input and the kept blocks passed
// through a middle stage that mirrors the source itself (5,1,2), and the even splits.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>

#include "GpuTestDevice.h"
#include "TinyModelDir.h"
#include "deepinfer/LocalGpu.h"
#include "model/Checkpoint.h"
#include "model/CpuForward.h"
#include "model/ModelConfig.h"
#include "model/gpu/GpuModel.h"
#include "model/gpu/GpuWeights.h"

namespace deepinfer {
namespace {

constexpr int64_t kChunk = 48;  // prefill chunks: a 150-token prompt takes 4

GpuModelOptions baseOptions() {
  GpuModelOptions go;
  go.kvCacheBytes = int64_t(256) << 20;
  go.maxRequests = 4;
  go.maxChunkTokens = kChunk;
  return go;
}

struct PipeEnv : testing_util::TinyModelEnv {
  std::unique_ptr<GpuModel> one;  // the single-stage model
};

PipeEnv& env() {
  static PipeEnv e = [] {
    PipeEnv e;
    if (e.open("pipeline")) e.one = e.loadGpu(baseOptions());
    return e;
  }();
  return e;
}

#define NEED_GPU()                                                  \
  PipeEnv& e = env();                                               \
  if (!e.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << e.why

using testing_util::randomIds;

struct Split {
  int pp;
  std::vector<int> layers;  // empty: the even split
  std::vector<int> expectFirst;  // first layer of every stage
};

std::string splitName(const Split& s) {
  return fmt::format("pp{}[{}]", s.pp, s.layers.empty() ? std::string("even") : fmt::format("{}", fmt::join(s.layers, ",")));
}

const std::vector<Split>& splits() {
  static const std::vector<Split> s = {
      {2, {}, {0, 4}}, {2, {3, 5}, {0, 3}}, {3, {}, {0, 3, 6}}, {3, {2, 4, 2}, {0, 2, 6}}, {3, {3, 2, 3}, {0, 3, 5}},
      {3, {5, 1, 2}, {0, 5, 6}}};
  return s;
}

Result<std::unique_ptr<GpuModel>> loadSplit(const PipeEnv& e, const Split& s, bool graphs = true) {
  GpuModelOptions go = baseOptions();
  go.pp = s.pp;
  go.stageLayers = s.layers;
  go.cudaGraphs = graphs;
  return GpuModel::load(e.dir, e.dev, go);
}

// Counts rows of [n, V] logits that differ in any bit.
int64_t differingRows(const float* a, const float* b, int64_t n, int64_t V) {
  int64_t d = 0;
  for (int64_t r = 0; r < n; ++r) d += std::memcmp(a + r * V, b + r * V, size_t(V) * 4) != 0;
  return d;
}

// A 150-token prompt prefilled in chunks, then `steps` greedy decodes: every row of `pipe`
// identical to `one`'s.
void expectSameGreedyRun(GpuModel& one, GpuModel& pipe, uint64_t seed, int steps, const std::string& tag) {
  const int64_t V = one.config().vocabSize;
  const auto prompt = randomIds(150, seed, V);
  auto r1 = one.newRequest();
  auto rp = pipe.newRequest();
  ASSERT_TRUE(r1.ok() && rp.ok()) << (r1.ok() ? rp.error().message : r1.error().message);
  auto l1 = one.prefill(*r1, prompt);
  auto lp = pipe.prefill(*rp, prompt);
  ASSERT_TRUE(l1.ok()) << l1.error().message;
  ASSERT_TRUE(lp.ok()) << lp.error().message;
  EXPECT_EQ(differingRows(l1->ptr<float>(), lp->ptr<float>(), 150, V), 0) << tag << ": prefill rows differ";
  int32_t next = argmaxToken(l1->ptr<float>() + 149 * V, V);
  int64_t differing = 0;
  for (int s = 0; s < steps; ++s) {
    auto d1 = one.decode(*r1, next);
    auto dp = pipe.decode(*rp, next);
    ASSERT_TRUE(d1.ok()) << d1.error().message;
    ASSERT_TRUE(dp.ok()) << tag << " decode " << s << ": " << dp.error().message;
    differing += differingRows(d1->data(), dp->data(), 1, V);
    next = argmaxToken(d1->data(), V);
  }
  EXPECT_EQ(differing, 0) << tag << ": " << differing << " of " << steps << " decode steps differ";
  EXPECT_TRUE(one.releaseRequest(*r1).ok());
  EXPECT_TRUE(pipe.releaseRequest(*rp).ok());
}

TEST(GpuPipeline, StagesHoldOnlyTheirLayersTensorsAndCaches) {
  NEED_GPU();
  auto ckpt = Checkpoint::open(e.dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().message;
  const ModelConfig& cfg = e.one->config();
  for (const Split& s : splits()) {
    SCOPED_TRACE(splitName(s));
    auto pipe = loadSplit(e, s);
    ASSERT_TRUE(pipe.ok()) << pipe.error().message;
    const auto& st = (*pipe)->stages();
    ASSERT_EQ(int(st.size()), s.pp);
    int64_t weightSum = 0, minTokens = INT64_MAX, perToken = 0;
    for (int i = 0; i < s.pp; ++i) {
      const GpuStageReport& r = st[size_t(i)];
      EXPECT_EQ(r.layerBegin, s.expectFirst[size_t(i)]);
      EXPECT_EQ(r.layerEnd, i + 1 < s.pp ? s.expectFirst[size_t(i) + 1] : cfg.numHiddenLayers);
      EXPECT_EQ(r.embedding, i == 0);
      EXPECT_EQ(r.head, i + 1 == s.pp);
      EXPECT_EQ(r.gpu, e.dev->ordinal());
      // Mirrors: exactly the kv sources of earlier stages that the stage's layers read.
      std::vector<int> want;
      for (int L = r.layerBegin; L < r.layerEnd; ++L)
        for (int src : {cfg.role(L).kvSourceLayer, cfg.role(L).indexKeyLayer})
          if (src >= 0 && src < r.layerBegin && std::find(want.begin(), want.end(), src) == want.end())
            want.push_back(src);
      std::sort(want.begin(), want.end());
      EXPECT_EQ(r.mirroredSources, want);
      // The stage's weights are exactly its tensors' bytes (nothing else was uploaded).
      GpuStageTensors t;
      t.layerBegin = r.layerBegin;
      t.layerEnd = r.layerEnd;
      t.embedding = r.embedding;
      t.head = r.head;
      t.draft = false;
      t.mirroredSources = r.mirroredSources;
      auto bytes = gpuWeightBytes(cfg, *ckpt, t);
      ASSERT_TRUE(bytes.ok()) << bytes.error().message;
      EXPECT_EQ(r.weightBytes, *bytes);
      weightSum += r.weightBytes;
      minTokens = std::min(minTokens, r.capacity.tokens);
      perToken += r.capacity.bytesPerToken;
      EXPECT_GT(r.capacity.tokens, 0);
    }
    EXPECT_EQ((*pipe)->weightInfo().deviceBytes, weightSum);
    EXPECT_EQ((*pipe)->capacity().tokens, minTokens);
    EXPECT_EQ((*pipe)->capacity().bytesPerToken, perToken);
    // Without the draft (speculation needs pp 1) the stages hold the backbone once plus the
    // mirrored compressors: never less than the backbone.
    GpuStageTensors whole;
    whole.draft = false;
    auto backbone = gpuWeightBytes(cfg, *ckpt, whole);
    ASSERT_TRUE(backbone.ok());
    EXPECT_GE(weightSum, *backbone);
    fmt::print("{}: weights {} bytes over {} stages (backbone {}), KV capacity {} tokens\n", splitName(s), weightSum,
               s.pp, *backbone, (*pipe)->capacity().tokens);
  }
}

TEST(GpuPipeline, PrefillAndDecodeAreBitIdenticalToOneStage) {
  NEED_GPU();
  for (const Split& s : splits()) {
    SCOPED_TRACE(splitName(s));
    auto pipe = loadSplit(e, s);
    ASSERT_TRUE(pipe.ok()) << pipe.error().message;
    const auto before = (*pipe)->counters();
    expectSameGreedyRun(*e.one, **pipe, e.seed + 1, 24, splitName(s));
    const auto after = (*pipe)->counters();
    // Each stage replays its own graphs: pp graph launches per decode step.
    EXPECT_EQ(after.graphLaunches - before.graphLaunches, 24 * s.pp);
    EXPECT_EQ(after.forwards - before.forwards, 4 + 24);  // counted once per call (the head's stage)
    EXPECT_EQ((*pipe)->pagesInUse(), 0);
  }
}

TEST(GpuPipeline, EagerStagesEqualGraphReplayingOneStage) {
  NEED_GPU();
  const Split s{3, {2, 4, 2}, {0, 2, 6}};
  auto pipe = loadSplit(e, s, /*graphs=*/false);
  ASSERT_TRUE(pipe.ok()) << pipe.error().message;
  expectSameGreedyRun(*e.one, **pipe, e.seed + 2, 20, "eager pp3");
  EXPECT_EQ((*pipe)->counters().graphLaunches, 0);
}

TEST(GpuPipeline, BatchedForwardsAreBitIdenticalToOneStage) {
  NEED_GPU();
  // Three prompts of different lengths in one call (lastOnly), decoded together, a fourth
  // joining mid-way: the same calls on both models, every row identical.
  const int64_t V = e.one->config().vocabSize;
  const std::vector<int64_t> lens = {5, 33, 47, 20};
  for (const Split& s : {splits()[1], splits()[4]}) {
    SCOPED_TRACE(splitName(s));
    auto pipe = loadSplit(e, s);
    ASSERT_TRUE(pipe.ok()) << pipe.error().message;
    GpuModel* models[2] = {e.one.get(), pipe->get()};
    std::vector<int64_t> reqs[2];
    for (GpuModel* m : models)
      for (size_t i = 0; i < lens.size(); ++i) {
        auto r = m->newRequest();
        ASSERT_TRUE(r.ok()) << r.error().message;
        reqs[m == models[1]].push_back(*r);
      }
    std::vector<std::vector<int32_t>> prompts;
    for (size_t i = 0; i < lens.size(); ++i) prompts.push_back(randomIds(lens[i], e.seed + 20 + i, V));
    std::vector<int32_t> next(lens.size(), 0);
    int64_t rows = 0, differing = 0;
    for (int step = 0; step < 14; ++step) {
      std::vector<HostTensor> out[2];
      for (int k = 0; k < 2; ++k) {
        std::vector<std::pair<int64_t, std::vector<int32_t>>> work;
        for (size_t i = 0; i < 3; ++i)
          work.push_back({reqs[k][i], step == 0 ? prompts[i] : std::vector<int32_t>{next[i]}});
        if (step == 6) work.push_back({reqs[k][3], prompts[3]});
        if (step > 6) work.push_back({reqs[k][3], {next[3]}});
        auto o = models[k]->forward(work, /*lastOnly=*/true);
        ASSERT_TRUE(o.ok()) << "step " << step << ": " << o.error().message;
        out[k] = std::move(*o);
      }
      ASSERT_EQ(out[0].size(), out[1].size());
      for (size_t i = 0; i < out[0].size(); ++i) {
        ++rows;
        differing += differingRows(out[0][i].ptr<float>(), out[1][i].ptr<float>(), 1, V);
        next[i] = argmaxToken(out[0][i].ptr<float>(), V);
      }
    }
    EXPECT_EQ(differing, 0) << differing << " of " << rows << " rows differ";
    for (int k = 0; k < 2; ++k)
      for (int64_t r : reqs[k]) EXPECT_TRUE(models[k]->releaseRequest(r).ok());
  }
}

TEST(GpuPipeline, SyntheticWeightsPerStageEqualTheWholeModel) {
  NEED_GPU();
  // Each synthetic tensor is a function of its name: stages generating only theirs hold the
  // same values as the whole model.
  const ModelConfig& cfg = e.one->config();
  GpuModelOptions go = baseOptions();
  go.speculative = false;
  auto one = GpuModel::loadSynthetic(cfg, e.seed, e.dev, go);
  ASSERT_TRUE(one.ok()) << one.error().message;
  go.pp = 2;
  go.stageLayers = {3, 5};
  auto pipe = GpuModel::loadSynthetic(cfg, e.seed, e.dev, go);
  ASSERT_TRUE(pipe.ok()) << pipe.error().message;
  expectSameGreedyRun(**one, **pipe, e.seed + 3, 8, "synthetic pp2");
}

TEST(GpuPipeline, StagesOnTwoGpusAreBitIdenticalToOneStage) {
  NEED_GPU();
  auto second = localGpu(1);
  if (!second.ok()) GTEST_SKIP() << "one GPU only: " << second.error().message;
  GpuModelOptions go = baseOptions();
  go.pp = 2;
  go.stageLayers = {3, 5};
  go.gpus = {0, 1};
  auto pipe = GpuModel::load(e.dir, e.dev, go);
  ASSERT_TRUE(pipe.ok()) << pipe.error().message;
  EXPECT_EQ((*pipe)->stages()[1].gpu, 1);
  expectSameGreedyRun(*e.one, **pipe, e.seed + 4, 16, "pp2 on GPUs 0,1");
}

TEST(GpuPipeline, BadSplitsAndUnbuiltModesAreClearErrors) {
  NEED_GPU();
  auto expectError = [&](GpuModelOptions go, const std::string& needle) {
    auto m = GpuModel::load(e.dir, e.dev, go);
    ASSERT_FALSE(m.ok()) << "expected an error containing '" << needle << "'";
    EXPECT_NE(m.error().message.find(needle), std::string::npos) << m.error().message;
  };
  GpuModelOptions go = baseOptions();
  go.pp = 2;
  go.stageLayers = {4, 5};
  expectError(go, "add up to 9, the model has 8 layers");
  go.stageLayers = {8, 0};
  expectError(go, "stage 1 has 0 layers");
  go.stageLayers = {2, 3, 3};
  expectError(go, "3 stage layer counts given for pp 2");
  go.stageLayers = {};
  go.pp = 9;
  expectError(go, "more stages than the model's 8 layers");
  go.pp = 2;
  go.gpus = {0};
  expectError(go, "1 GPUs given for 2 pipeline stages");
  go.gpus = {0, 4096};
  expectError(go, "stage 1: GPU 4096");
  go.gpus = {};
  go.tp = 2;  // tiny's 8 heads: 4 per rank, below the attention kernels' multiple of 8
  expectError(go, "num_attention_heads 4");
  // Speculation needs one stage.
  go.tp = 1;
  auto pipe = GpuModel::load(e.dir, e.dev, go);
  ASSERT_TRUE(pipe.ok()) << pipe.error().message;
  EXPECT_FALSE((*pipe)->speculation());
  auto spec = (*pipe)->newSpeculativeRequest();
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message.find("across pipeline stages"), std::string::npos) << spec.error().message;
}

}  // namespace
}  // namespace deepinfer
