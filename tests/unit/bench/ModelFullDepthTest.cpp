// deepinfer-model-bench's full-depth synthetic model (benchmarks/ModelFullDepth.h) without a GPU:
// the config has V4.1-Flash's depth, widths and roles with the chosen expert count, its weight
// bytes are the roofline's checkpoint-format bytes (the floors the bench divides by are the
// bytes the GPU holds), the per-expert bytes match a hand count, and the plan takes the most
// experts that fit, refusing what does not fit before anything is allocated.
#include <gtest/gtest.h>

#include "ModelFullDepth.h"
#include "ModelRoofline.h"
#include "model/gpu/GpuWeights.h"

using namespace deepinfer;
using namespace deepinfer::bench;

namespace {

constexpr int64_t kGiB = int64_t(1) << 30;

// One fp4 expert of V4.1-Flash (C 5120, I 2304): w1 and w3 [2304, 5120], w2 [5120, 2304], each
// 2304 * 5120 / 2 code bytes + one scale byte per row and 32 columns (2304 * 160 = 5120 * 72).
constexpr int64_t kExpertBytes = 3 * (2304 * 5120 / 2 + 2304 * 160);
// Its router row: gate [E, 5120] bf16 + bias [E] f32.
constexpr int64_t kRouterRowBytes = 5120 * 2 + 4;

TEST(ModelFullDepth, ConfigIsFlashWithTheExpertCount) {
  const ModelConfig flash = v41FlashDefaults();
  auto c = fullDepthConfig(128);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->numHiddenLayers, 40);
  EXPECT_EQ(c->hiddenSize, 5120);
  EXPECT_EQ(c->vocabSize, 129280);
  EXPECT_EQ(c->moeIntermediateSize, 2304);
  EXPECT_EQ(c->numExpertsPerTok, 6);
  EXPECT_EQ(c->nRoutedExperts, 128);
  EXPECT_EQ(c->nSharedExperts, 1);
  EXPECT_EQ(c->kvSourceLayerIds, flash.kvSourceLayerIds);
  EXPECT_EQ(c->indexSourceLayerIds, flash.indexSourceLayerIds);
  EXPECT_EQ(c->engramLayerIds, flash.engramLayerIds);
  for (int L = 0; L < 40; ++L) {
    EXPECT_EQ(c->role(L).ratio, flash.role(L).ratio) << L;
    EXPECT_EQ(c->role(L).isEngram, flash.role(L).isEngram) << L;
  }
  EXPECT_LE(c->draftRoutedExperts(), 128);
  auto few = fullDepthConfig(32);
  ASSERT_TRUE(few.ok()) << few.error().message;
  EXPECT_EQ(few->draftRoutedExperts(), 32);  // the draft MoE never has more experts than the layers
  for (int bad : {0, 5, 385}) {
    auto b = fullDepthConfig(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.error().message.find("routed experts per layer"), std::string::npos) << b.error().message;
  }
}

TEST(ModelFullDepth, WeightBytesAreTheRooflinesCheckpointBytes) {
  // The GPU holds every tensor in the checkpoint's format: gpuWeightBytes of the config table
  // equals what the roofline charges for the whole model in WeightStorage::Checkpoint (every
  // expert, plus the embedding table instead of one row).
  for (int E : {16, 128}) {
    auto c = fullDepthConfig(E);
    ASSERT_TRUE(c.ok()) << c.error().message;
    auto bytes = gpuWeightBytes(*c, ConfigWeightTable(*c, /*draft=*/false));
    ASSERT_TRUE(bytes.ok()) << bytes.error().message;
    const TokenWeightBytes all = tokenWeightBytes(*c, WeightStorage::Checkpoint, E);
    const double embed = double(c->vocabSize) * double(c->hiddenSize) * 2;
    EXPECT_EQ(double(*bytes), all.total() - all.embedRow + embed) << E;
    EXPECT_EQ(double(all.routed), double(40 * E) * double(kExpertBytes)) << E;
  }
}

TEST(ModelFullDepth, PlanTakesTheMostExpertsThatFit) {
  const int64_t freeBytes = 139 * kGiB, reserve = 14 * kGiB;
  auto p = planFullDepth(freeBytes, reserve, 0);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->bytesPerExpert, 40 * (kExpertBytes + kRouterRowBytes));
  EXPECT_EQ(p->experts % 16, 0);
  EXPECT_GE(p->experts, 128);  // an H200 holds at least the example
  EXPECT_LE(p->weightBytes + reserve, freeBytes);
  EXPECT_GT(p->weightBytes + 16 * p->bytesPerExpert + reserve, freeBytes);  // 16 more would not fit
  EXPECT_EQ(p->weightBytes, p->fixedBytes + p->experts * p->bytesPerExpert);
  auto c = fullDepthConfig(p->experts);
  ASSERT_TRUE(c.ok());
  auto exact = gpuWeightBytes(*c, ConfigWeightTable(*c, false));
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(p->weightBytes, *exact);
  // Everything fits on a large device: capped at the real model's 384.
  auto big = planFullDepth(1024 * kGiB, reserve, 0);
  ASSERT_TRUE(big.ok()) << big.error().message;
  EXPECT_EQ(big->experts, 384);
}

TEST(ModelFullDepth, PlanRefusesWhatDoesNotFit) {
  const int64_t reserve = 14 * kGiB;
  auto explicitOk = planFullDepth(139 * kGiB, reserve, 64);
  ASSERT_TRUE(explicitOk.ok()) << explicitOk.error().message;
  EXPECT_EQ(explicitOk->experts, 64);
  auto tooMany = planFullDepth(139 * kGiB, reserve, 384);
  ASSERT_FALSE(tooMany.ok());
  EXPECT_NE(tooMany.error().message.find("does not fit"), std::string::npos) << tooMany.error().message;
  EXPECT_NE(tooMany.error().message.find("384 routed experts"), std::string::npos) << tooMany.error().message;
  auto tiny = planFullDepth(20 * kGiB, reserve, 0);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.error().message.find("not even 16"), std::string::npos) << tiny.error().message;
}

}  // namespace
