// deepinfer-model-bench --long-context without a GPU: the memory a 1M-token request of the proxy
// model needs (benchmarks/ModelLongContext.h), worked out by hand from GpuModel's pool sizing and
// the prefill's scratch buffers; the fit check naming the shortfall; the options.
#include <gtest/gtest.h>

#include "ModelBenchOptions.h"
#include "ModelFullDepth.h"
#include "ModelLongContext.h"
#include "ProxyConfig.h"
#include "model/MakeModelPresets.h"
#include "model/gpu/GpuWeights.h"

using namespace deepinfer;
using namespace deepinfer::bench;

namespace {

constexpr int64_t kMillion = 1048576;

TEST(LongContextMemory, ProxyAtOneMillionTokens) {
  auto m = longContextMemory(proxy(), kMillion, 1024, 2);
  ASSERT_TRUE(m.ok()) << m.error().message;
  // Window rings: 7 layers x ceil((128 - 1 + 1024) / 64) = 18 pages of mlaPageBytes(64) = 37,440
  // bytes (64 rows of 584 padded to 576-byte units), for 2 requests.
  EXPECT_EQ(m->windowBytes, 7 * 18 * 37440 * 2);
  // Per token: (37,440 + 64 x 132 index-key bytes) / 64 = 717 per compressed entry; layer 2 has
  // one per 2 tokens, layer 4 one per token: 358.5 + 717.
  EXPECT_DOUBLE_EQ(m->kvBytesPerToken, 1075.5);
  EXPECT_EQ(m->kvBytes, 7 * 18 * 37440 * 2 + int64_t(1075.5 * (kMillion + 1024)));
  // Indexer scores: layers 4 and 5 score layer 4's 2^20 keys: [1024, 2^20] f32, +25%.
  EXPECT_EQ(m->scoresBytes, int64_t(1024) * kMillion * 4 * 5 / 4);
  // Workspaces: source 2 (2^19 compressed rows) and source 4 (2^20), each + the 1152-row ring, and
  // the window-only layers' ring; 1024 bytes a row, +25% each.
  EXPECT_EQ(m->workspaceBytes, ((kMillion / 2 + 1152) * 1024 * 5 / 4) + ((kMillion + 1152) * 1024 * 5 / 4) +
                                   (1152 * 1024 * 5 / 4));
  // Candidate blocks of layer 4: 2^20 / 8 = 131,072 per token, [1024, 131072] f32, +25%.
  EXPECT_EQ(m->blockScoresBytes, int64_t(1024) * 131072 * 4 * 5 / 4);
  EXPECT_EQ(m->scratchBytes(), 5368709120 + 2017689600 + 671088640);
  EXPECT_EQ(m->reserveBytes, kLongContextReserveBytes);
  EXPECT_EQ(m->total(), m->kvBytes + m->scratchBytes() + m->reserveBytes);
  EXPECT_LT(m->kvBytes, int64_t(1.2e9));  // the 1M-token cache itself is ~1.1 GB
}

TEST(LongContextMemory, ProxyFitsOneH200AndTheShortfallIsNamed) {
  const ModelConfig c = proxy();
  auto m = longContextMemory(c, kMillion, 1024, 2);
  ASSERT_TRUE(m.ok());
  auto weights = gpuWeightBytes(c, ConfigWeightTable(c, /*draft=*/true));  // GpuModel::load loads the draft too
  ASSERT_TRUE(weights.ok()) << weights.error().message;
  EXPECT_GT(*weights, int64_t(25e9));
  EXPECT_LT(*weights + m->total(), int64_t(60e9));
  EXPECT_TRUE(checkLongContextFits(*m, *weights, int64_t(141e9)).ok());
  const int64_t free = *weights + m->total() - int64_t(2.5e9);
  const Status s = checkLongContextFits(*m, *weights, free);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("a 1048576-token context does not fit on this GPU: weights"), std::string::npos)
      << s.error().message;
  EXPECT_NE(s.error().message.find("short by 2.50 GB"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("indexer scores 5.37"), std::string::npos) << s.error().message;
}

TEST(LongContextMemory, ContextBeyondThePositionsIsRefused) {
  auto m = longContextMemory(proxy(), kMillion + 1, 1024, 2);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("--long-context 1048577 exceeds the model's max_position_embeddings 1048576"),
            std::string::npos)
      << m.error().message;
  EXPECT_FALSE(longContextMemory(proxy(), kMillion, 0, 2).ok());
}

TEST(LongContextMemory, FullDepthFlashScalesWithItsSources) {
  auto c = fullDepthConfig(16);
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto m = longContextMemory(*c, kMillion, 1024, 2);
  ASSERT_TRUE(m.ok()) << m.error().message;
  // Every kv source adds a workspace; the scores buffer is one, sized by the widest index source.
  int sources = 0;
  for (int l = 0; l < c->numHiddenLayers; ++l) sources += c->role(l).isKvSource ? 1 : 0;
  EXPECT_GT(sources, 0);
  EXPECT_GT(m->workspaceBytes, int64_t(sources) * 1152 * 1024);
  EXPECT_LE(m->scoresBytes, int64_t(1024) * kMillion * 4 * 5 / 4);
  EXPECT_GT(m->kvBytesPerToken, 0);
}

Result<ModelBenchOptions> parse(std::vector<std::string> args) {
  std::vector<char*> argv;
  static std::string name = "deepinfer-model-bench";
  argv.push_back(name.data());
  for (std::string& a : args) argv.push_back(a.data());
  return parseModelBenchOptions(int(argv.size()), argv.data());
}

TEST(ModelBenchOptions, LongContextDefaults) {
  auto o = parse({"--model", "/m", "--long-context", "1048576"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->longContext, kMillion);
  EXPECT_EQ(o->decodeContexts, (std::vector<int64_t>{16384, 131072}));
  EXPECT_EQ(o->segment, 131072);
  EXPECT_EQ(o->timeBudget, 0);
  EXPECT_EQ(o->decodeTokens(), 2 + 3 * 32);
  EXPECT_FALSE(o->speculative);
  o = parse({"--synthetic", "flash", "--long-context", "262144", "--decode-contexts", "8192", "--segment", "65536",
             "--time-budget", "480", "--decode-steps", "8", "--repeats", "2"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->decodeContexts, (std::vector<int64_t>{8192}));
  EXPECT_EQ(o->segment, 65536);
  EXPECT_EQ(o->timeBudget, 480);
  EXPECT_EQ(o->decodeTokens(), 18);
}

TEST(ModelBenchOptions, LongContextMisuseIsNamed) {
  auto err = [](std::vector<std::string> args) {
    auto o = parse(std::move(args));
    return o.ok() ? std::string("(accepted)") : o.error().message;
  };
  EXPECT_NE(err({"--model", "/m", "--long-context", "1048576", "--contexts", "16384"})
                .find("--contexts does not apply with --long-context"),
            std::string::npos);
  EXPECT_NE(err({"--model", "/m", "--long-context", "1048576", "--streams", "4"}).find("--streams does not apply"),
            std::string::npos);
  EXPECT_NE(err({"--model", "/m", "--long-context", "1048576", "--quick"}).find("--quick does not apply"),
            std::string::npos);
  EXPECT_NE(err({"--model", "/m", "--long-context", "1048576", "--kv-bytes", "9"}).find("--kv-bytes does not apply"),
            std::string::npos);
  EXPECT_NE(err({"--model", "/m", "--segment", "131072"}).find("--segment applies to --long-context only"),
            std::string::npos);
  EXPECT_NE(err({"--model", "/m", "--time-budget", "5"}).find("--time-budget applies to --long-context only"),
            std::string::npos);
  EXPECT_NE(err({"--model", "/m", "--decode-contexts", "5"}).find("--decode-contexts applies to --long-context only"),
            std::string::npos);
  EXPECT_NE(err({"--model", "/m", "--long-context", "1048576", "--segment", "1000"})
                .find("--segment 1000 must be a multiple of --chunk 1024"),
            std::string::npos);
  EXPECT_NE(err({"--model", "/m", "--long-context", "1048576", "--decode-contexts", "16384,2000000"})
                .find("--decode-contexts 2000000: each must be above the 98 decode tokens and below --long-context"),
            std::string::npos);
  EXPECT_NE(err({"--model", "/m", "--long-context", "1000"}).find("--long-context 1000 leaves no prefill"),
            std::string::npos);
  EXPECT_NE(err({"--model", "/m", "--long-context", "x"}).find("--long-context expects an integer >= 1, got 'x'"),
            std::string::npos);
  EXPECT_NE(err({"--model", "/m", "--long-context", "1048576", "--time-budget", "-1"})
                .find("--time-budget expects an integer >= 0"),
            std::string::npos);
}

}  // namespace
