// deepinfer-model-bench's full-depth synthetic model (benchmarks/ModelFullDepth.h) without a GPU:
// the config has V4.1-Flash's depth, widths and roles with the chosen expert count, its weight
// bytes are the roofline's checkpoint-format bytes (the floors the bench divides by are the
// bytes the GPU holds), the per-expert and DSpark draft bytes match a hand count, and the plan
// takes the most experts that fit (leaving room for the draft when it is asked for), refusing
// what does not fit before anything is allocated and leaving out, with the reason, a draft that
// does not fit.
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
  auto p = planFullDepth(freeBytes, reserve, 0, /*wantDraft=*/false);
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
  auto big = planFullDepth(1024 * kGiB, reserve, 0, false);
  ASSERT_TRUE(big.ok()) << big.error().message;
  EXPECT_EQ(big->experts, 384);
}

// One fp8 matrix [r, c]: codes + one UE8M0 byte per 32x32 block.
constexpr int64_t fp8Bytes(int64_t r, int64_t c) { return r * c + ((r + 31) / 32) * ((c + 31) / 32); }
// One draft stage of V4.1-Flash: a ratio-0 block (docs/dspark.md §1) with the draft MoE.
//  attention: wq_a [1280, 5120], wq_b [32768, 1280], wkv [512, 5120], wo_a [8192, 4096] (8 groups of
//  1024 x 8*512), wo_b [5120, 8192], fp8; q_norm 1280 and kv_norm 512 bf16; 64 fp32 sinks.
constexpr int64_t kStageAttention = fp8Bytes(1280, 5120) + fp8Bytes(32768, 1280) + fp8Bytes(512, 5120) +
                                    fp8Bytes(8192, 4096) + fp8Bytes(5120, 8192) + 2 * 1280 + 2 * 512 + 4 * 64;
//  mHC: two sublayers of fn f32 [24, 4*5120] + base [24] + scale [3]; attn_norm and ffn_norm bf16.
constexpr int64_t kStageMhc = 2 * (4 * 24 * 20480 + 4 * 24 + 4 * 3) + 2 * 2 * 5120;
//  The shared expert fp8: w1, w3 [2304, 5120], w2 [5120, 2304].
constexpr int64_t kStageShared = 2 * fp8Bytes(2304, 5120) + fp8Bytes(5120, 2304);
constexpr int64_t stageBytes(int64_t draftExperts) {
  return kStageAttention + kStageMhc + draftExperts * (kRouterRowBytes + kExpertBytes) + kStageShared;
}
// The extras: mtp.0.main_proj fp8 [5120, 3*5120] + main_norm, mtp.2.norm, the Markov embed and
// head bf16 [129280, 256] each, the confidence head bf16 [1, 5120 + 256].
constexpr int64_t kDraftExtras = fp8Bytes(5120, 15360) + 2 * 5120 + 2 * 5120 + 2 * (2 * 129280 * 256) + 2 * (5120 + 256);

TEST(ModelFullDepth, DraftBytesAreAHandCount) {
  static_assert(kStageAttention == 126743040 && kStageShared == 35424000 && kDraftExtras == 211133952);
  // V4.1-Flash's draft: 3 stages with 128 routed experts each, ~7.93 GB.
  auto d = fullDepthDraftBytes(128);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(*d, 3 * stageBytes(128) + kDraftExtras);
  EXPECT_EQ(*d, 7932873096);
  // The draft keeps its own 128 experts however many the layers have, and never more than they.
  auto more = fullDepthDraftBytes(384);
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(*more, *d);
  auto fewer = fullDepthDraftBytes(32);
  ASSERT_TRUE(fewer.ok());
  EXPECT_EQ(*fewer, 3 * stageBytes(32) + kDraftExtras);
  // It is the whole difference the draft makes to the weights, and nothing without DSpark fields.
  auto cfg = fullDepthConfig(128);
  ASSERT_TRUE(cfg.ok());
  auto with = gpuWeightBytes(*cfg, ConfigWeightTable(*cfg, true));
  auto without = gpuWeightBytes(*cfg, ConfigWeightTable(*cfg, false));
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_EQ(*with - *without, *d);
  ModelConfig plain = *cfg;
  plain.numNextnPredictLayers = 0;
  plain.dsparkBlockSize = 0;
  plain.dsparkTargetLayerIds.clear();
  auto none = draftWeightBytes(plain);
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_EQ(*none, 0);
}

// The H200 run at 9ceebdd: 149.56 GB free, the default reserve (4 GiB KV + 10 GiB), 128 experts:
// 106.00 GB of backbone + 7.93 GB of draft + 15.03 GB kept = 128.96 GB, ~20 GB to spare.
TEST(ModelFullDepth, TheH200RunFitsItsDraft) {
  const int64_t freeBytes = 149560000000, reserve = kFullDepthKvBytes + kFullDepthWorkspaceBytes;
  auto p = planFullDepth(freeBytes, reserve, 128, /*wantDraft=*/true);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_TRUE(p->draft);
  EXPECT_TRUE(p->draftLeftOut.empty()) << p->draftLeftOut;
  EXPECT_NEAR(double(p->weightBytes) / 1e9, 106.00, 0.005);  // the run's "106.00 GB of weights"
  EXPECT_EQ(p->draftBytes, 7932873096);
  EXPECT_EQ(p->totalBytes(), p->weightBytes + p->draftBytes);
  EXPECT_GT(freeBytes - p->totalBytes() - reserve, int64_t(20e9));
  // Left to itself the plan takes the most experts that fit next to the draft: fewer than
  // without it, and 16 more would not fit.
  auto autoDraft = planFullDepth(freeBytes, reserve, 0, true);
  auto autoPlain = planFullDepth(freeBytes, reserve, 0, false);
  ASSERT_TRUE(autoDraft.ok() && autoPlain.ok());
  EXPECT_TRUE(autoDraft->draft);
  EXPECT_FALSE(autoPlain->draft);
  EXPECT_EQ(autoDraft->experts % 16, 0);
  EXPECT_LT(autoDraft->experts, autoPlain->experts);
  EXPECT_LE(autoDraft->totalBytes() + reserve, freeBytes);
  auto next = fullDepthConfig(autoDraft->experts + 16);
  ASSERT_TRUE(next.ok());
  auto nextBytes = gpuWeightBytes(*next, ConfigWeightTable(*next, true));
  ASSERT_TRUE(nextBytes.ok());
  EXPECT_GT(*nextBytes + reserve, freeBytes);
  // Without the draft nothing is planned for it, but its size is still reported.
  EXPECT_EQ(autoPlain->totalBytes(), autoPlain->weightBytes);
  EXPECT_GT(autoPlain->draftBytes, 0);
}

TEST(ModelFullDepth, ADraftThatDoesNotFitIsLeftOutSayingWhy) {
  const int64_t reserve = kFullDepthKvBytes + kFullDepthWorkspaceBytes;
  auto at128 = planFullDepth(1024 * kGiB, reserve, 128, true);
  ASSERT_TRUE(at128.ok());
  // Room for 128 experts and 3 GiB: the backbone fits, the draft (7.4 GiB) does not.
  const int64_t freeBytes = at128->weightBytes + reserve + 3 * kGiB;
  auto p = planFullDepth(freeBytes, reserve, 128, true);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->experts, 128);
  EXPECT_FALSE(p->draft);
  EXPECT_EQ(p->totalBytes(), p->weightBytes);
  EXPECT_NE(p->draftLeftOut.find("DSpark draft (7.39 GiB: 3 stages with 128 routed experts each"), std::string::npos)
      << p->draftLeftOut;
  EXPECT_NE(p->draftLeftOut.find("does not fit next to 128 routed experts per layer"), std::string::npos)
      << p->draftLeftOut;
  // It names the count that leaves room: the draft needs 4.4 GiB more, 7 experts' worth (0.70 GiB
  // each across the 40 layers), so 112 in steps of 16; and 112 does fit.
  EXPECT_NE(p->draftLeftOut.find("--experts 112 or fewer leave room for it"), std::string::npos) << p->draftLeftOut;
  auto at112 = planFullDepth(freeBytes, reserve, 112, true);
  ASSERT_TRUE(at112.ok());
  EXPECT_TRUE(at112->draft);
  // Without an expert count the plan gives up experts for the draft instead.
  auto automatic = planFullDepth(freeBytes, reserve, 0, true);
  ASSERT_TRUE(automatic.ok());
  EXPECT_EQ(automatic->experts, 112);
  EXPECT_TRUE(automatic->draft);
  // When not even 16 experts leave room, the automatic plan keeps the backbone alone and says so.
  auto at16 = planFullDepth(1024 * kGiB, reserve, 16, false);
  ASSERT_TRUE(at16.ok());
  const int64_t small = at16->weightBytes + reserve + kGiB;
  auto bare = planFullDepth(small, reserve, 0, true);
  ASSERT_TRUE(bare.ok()) << bare.error().message;
  EXPECT_EQ(bare->experts, 16);
  EXPECT_FALSE(bare->draft);
  EXPECT_NE(bare->draftLeftOut.find("no expert count leaves room for it"), std::string::npos) << bare->draftLeftOut;
  // Not asked for: never a reason.
  auto off = planFullDepth(freeBytes, reserve, 128, false);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->draft);
  EXPECT_TRUE(off->draftLeftOut.empty());
}

TEST(ModelFullDepth, PlanRefusesWhatDoesNotFit) {
  const int64_t reserve = 14 * kGiB;
  auto explicitOk = planFullDepth(139 * kGiB, reserve, 64, false);
  ASSERT_TRUE(explicitOk.ok()) << explicitOk.error().message;
  EXPECT_EQ(explicitOk->experts, 64);
  auto tooMany = planFullDepth(139 * kGiB, reserve, 384, false);
  ASSERT_FALSE(tooMany.ok());
  EXPECT_NE(tooMany.error().message.find("does not fit"), std::string::npos) << tooMany.error().message;
  EXPECT_NE(tooMany.error().message.find("384 routed experts"), std::string::npos) << tooMany.error().message;
  auto tiny = planFullDepth(20 * kGiB, reserve, 0, false);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.error().message.find("not even 16"), std::string::npos) << tiny.error().message;
}

// --synthetic proxy: make-model's proxy config (7 layers, 128 experts), its weight bytes those of
// the proxy's weight table, refused with the bytes when it does not fit, the draft left out with
// the reason when only the draft does not fit; --experts does not apply to it; unknown names list both.
TEST(ModelFullDepth, SyntheticProxyIsTheMakeModelPreset) {
  auto cfg = syntheticModelConfig("proxy", 0);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->numHiddenLayers, 7);
  EXPECT_EQ(cfg->nRoutedExperts, 128);
  EXPECT_EQ(cfg->hiddenSize, 5120);
  auto weights = gpuWeightBytes(*cfg, ConfigWeightTable(*cfg, false));
  ASSERT_TRUE(weights.ok()) << weights.error().message;
  const int64_t reserve = 14 * kGiB;
  auto p = planSynthetic("proxy", 139 * kGiB, reserve, 0, /*wantDraft=*/true);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->experts, 128);
  EXPECT_EQ(p->weightBytes, *weights);
  EXPECT_GT(p->draftBytes, 0);
  EXPECT_TRUE(p->draft);
  // Room for the weights but not the draft: the draft is left out, saying why.
  auto noDraft = planSynthetic("proxy", *weights + reserve + p->draftBytes / 2, reserve, 0, true);
  ASSERT_TRUE(noDraft.ok()) << noDraft.error().message;
  EXPECT_FALSE(noDraft->draft);
  EXPECT_NE(noDraft->draftLeftOut.find("does not fit"), std::string::npos) << noDraft->draftLeftOut;
  auto tooSmall = planSynthetic("proxy", *weights + reserve / 2, reserve, 0, false);
  ASSERT_FALSE(tooSmall.ok());
  EXPECT_NE(tooSmall.error().message.find("synthetic proxy model does not fit"), std::string::npos)
      << tooSmall.error().message;
  auto experts = syntheticModelConfig("proxy", 64);
  ASSERT_FALSE(experts.ok());
  EXPECT_NE(experts.error().message.find("--experts 64 applies to --synthetic flash"), std::string::npos);
  auto unknown = planSynthetic("mini", 139 * kGiB, reserve, 0, false);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("'flash'"), std::string::npos);
  EXPECT_NE(unknown.error().message.find("'proxy'"), std::string::npos);
  // "flash" goes through planFullDepth unchanged.
  auto flash = planSynthetic("flash", 139 * kGiB, reserve, 64, false);
  ASSERT_TRUE(flash.ok()) << flash.error().message;
  EXPECT_EQ(flash->experts, 64);
}

}  // namespace
