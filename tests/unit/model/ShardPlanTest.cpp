// The sharding arithmetic (runtime/model/parallel/ShardPlan.h) on the real V4.1-Flash config and
// the tiny preset: splits partition every split tensor exactly (replicated tensors are counted
// once per tensor rank), ranges cover heads/groups/experts/vocabulary without overlap, stages
// mirror exactly the kv sources their layers read from earlier stages, the KV report is the
// formula it states, and bad shapes are errors naming the dimension or layer.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <map>

#include "model/MakeModelPresets.h"
#include "model/ModelConfig.h"
#include "model/parallel/ShardPlan.h"

namespace deepinfer {
namespace {

ShardPlan mustPlan(const ModelConfig& cfg, ParallelShape shape, bool draft = true) {
  auto p = planShards(cfg, shape, draft);
  EXPECT_TRUE(p.ok()) << p.error().message;
  return p.ok() ? *p : ShardPlan{};
}

std::string planError(const ModelConfig& cfg, ParallelShape shape) {
  auto p = planShards(cfg, shape);
  return p.ok() ? std::string("(no error)") : p.error().message;
}

TEST(ShardPlan, OneGpuHoldsEveryDeviceTensorOnce) {
  const ModelConfig cfg = v41FlashDefaults();
  const ShardPlan p = mustPlan(cfg, {});
  ASSERT_EQ(p.ranks.size(), 1u);
  EXPECT_EQ(p.ranks[0].weightBytes, p.modelBytes);
  EXPECT_EQ(p.ranks[0].hostBytes, p.hostBytes);
  // V4.1-Flash in its own formats: ~307 GB on devices (fp4 experts, fp8 projections), two engram
  // tables of ~101 GB each in host memory.
  EXPECT_GT(p.modelBytes, int64_t(300e9));
  EXPECT_LT(p.modelBytes, int64_t(315e9));
  EXPECT_GT(p.hostBytes, int64_t(200e9));
  EXPECT_TRUE(p.ranks[0].mirroredKvSources.empty());
  EXPECT_TRUE(p.ranks[0].embedding && p.ranks[0].head && p.ranks[0].draft);
}

TEST(ShardPlan, TensorSplitsPartitionTheBytesExactly) {
  const ModelConfig cfg = v41FlashDefaults();
  for (int tp : {2, 4, 8}) {
    const ShardPlan p = mustPlan(cfg, {tp, 1, {}});
    int64_t replicated = 0, sum = 0;
    for (const TensorShard& t : p.tensors) replicated += t.rule == ShardRule::Replicated ? t.fullBytes : 0;
    for (const RankPlan& r : p.ranks) sum += r.weightBytes;
    EXPECT_EQ(sum, p.modelBytes + int64_t(tp - 1) * replicated) << "tp " << tp;
    // Ranges: contiguous, disjoint, covering.
    for (int i = 0; i < tp; ++i) {
      const RankPlan& r = p.ranks[size_t(i)];
      EXPECT_EQ(r.headBegin, 64 / tp * i);
      EXPECT_EQ(r.headEnd - r.headBegin, 64 / tp);
      EXPECT_EQ(r.groupEnd - r.groupBegin, 8 / tp);
      EXPECT_EQ(r.expertBegin, 384 / tp * i);
      EXPECT_EQ(r.expertEnd - r.expertBegin, 384 / tp);
      EXPECT_EQ(r.draftExpertEnd - r.draftExpertBegin, 128 / tp);
      EXPECT_EQ(r.vocabEnd - r.vocabBegin, cfg.vocabSize / tp);
    }
    EXPECT_EQ(p.ranks.back().expertEnd, 384);
    EXPECT_EQ(p.ranks.back().vocabEnd, cfg.vocabSize);
  }
}

TEST(ShardPlan, EachRuleMatchesTheTensorsRole) {
  const ShardPlan p = mustPlan(v41FlashDefaults(), {2, 1, {}});
  std::map<std::string, ShardRule> rule;
  for (const TensorShard& t : p.tensors) rule[t.name] = t.rule;
  EXPECT_EQ(rule.at("layers.3.attn.wq_b.weight"), ShardRule::Rows);      // heads
  EXPECT_EQ(rule.at("layers.3.attn.wo_a.weight"), ShardRule::Rows);      // output groups
  EXPECT_EQ(rule.at("layers.3.attn.wo_b.weight"), ShardRule::Cols);      // row-parallel, all-reduced
  EXPECT_EQ(rule.at("layers.3.attn.attn_sink"), ShardRule::Rows);
  EXPECT_EQ(rule.at("layers.3.attn.wkv.weight"), ShardRule::Replicated);  // one kv head (MLA)
  EXPECT_EQ(rule.at("layers.3.attn.wq_a.weight"), ShardRule::Replicated);
  EXPECT_EQ(rule.at("layers.3.ffn.gate.weight"), ShardRule::Replicated);  // the router
  EXPECT_EQ(rule.at("layers.3.ffn.experts.200.w2.weight"), ShardRule::Expert);
  EXPECT_EQ(rule.at("layers.3.ffn.shared_experts.w1.weight"), ShardRule::Rows);
  EXPECT_EQ(rule.at("layers.3.ffn.shared_experts.w2.weight"), ShardRule::Cols);
  EXPECT_EQ(rule.at("layers.1.engram.embed.weight"), ShardRule::Host);
  EXPECT_EQ(rule.at("embed.weight"), ShardRule::Rows);
  EXPECT_EQ(rule.at("head.weight"), ShardRule::Rows);
  EXPECT_EQ(rule.at("mtp.1.ffn.experts.100.w1.weight"), ShardRule::Expert);
}

TEST(ShardPlan, ReferenceDesignsStagesAndMirroredSources) {
  const ModelConfig cfg = v41FlashDefaults();
  // TP2 x PP3 with 14,14,12 layers: layers 28..39 read layer 20's compressed cache, its index
  // keys and its candidate mask, which stage 1 computes; stage 2 mirrors it, nobody else does.
  const ShardPlan p = mustPlan(cfg, {2, 3, {14, 14, 12}});
  ASSERT_EQ(p.ranks.size(), 6u);
  EXPECT_EQ(p.stageFirstLayer, (std::vector<int>{0, 14, 28, 40}));
  for (const RankPlan& r : p.ranks) {
    EXPECT_EQ(r.rank, r.stage * 2 + r.tpRank);
    EXPECT_EQ(r.mirroredKvSources, r.stage == 2 ? std::vector<int>{20} : std::vector<int>{});
    EXPECT_EQ(r.embedding, r.stage == 0);
    EXPECT_EQ(r.head && r.draft, r.stage == 2);
    EXPECT_LT(r.weightBytes, int64_t(64e9)) << "the reference design's 64 GB GPUs";
  }
  // Stage 1 owns sources 14 (ratio 2) and 20 (ratio 1); stage 2 mirrors 20: per token, a
  // source of ratio r costs (page + index page) / (64 r) bytes.
  const double page = 37440, indexPage = 64.0 * (cfg.indexHeadDim + 4);
  EXPECT_EQ(p.ranks[2].kvBytesPerToken, int64_t(std::ceil((page + indexPage) / 128 + (page + indexPage) / 64)));
  EXPECT_EQ(p.ranks[4].kvBytesPerToken, int64_t(std::ceil((page + indexPage) / 64)));
  // What crosses each boundary per token: the residual streams, plus layer 20's entries at the
  // second boundary.
  EXPECT_EQ(p.sendBytesPerToken[0], 4 * cfg.hiddenSize * 2);
  EXPECT_EQ(p.sendBytesPerToken[1], int64_t(std::ceil(4.0 * double(cfg.hiddenSize) * 2 + (page + indexPage) / 64)));
  EXPECT_EQ(p.allReduceBytesPerToken[0], 14 * 2 * cfg.hiddenSize * 4);
  EXPECT_EQ(p.allReduceBytesPerToken[2], (12 + 3) * 2 * cfg.hiddenSize * 4);  // the draft stages too
}

TEST(ShardPlan, KvCapacityIsWhatWeightsAndWindowsLeave) {
  const ShardPlan p = mustPlan(v41FlashDefaults(), {2, 3, {14, 14, 12}});
  const int64_t gpu = int64_t(64e9);
  auto kv = kvCapacity(p, gpu, 8, 0.9);
  ASSERT_TRUE(kv.ok()) << kv.error().message;
  int64_t smallest = INT64_MAX;
  for (const RankPlan& r : p.ranks) {
    const KvCapacityRow& row = kv->perRank[size_t(r.rank)];
    EXPECT_EQ(row.freeBytes, gpu - r.weightBytes - 8 * r.windowBytesPerRequest);
    EXPECT_EQ(row.tokens, int64_t(double(row.freeBytes) * 0.9 / double(r.kvBytesPerToken)));
    smallest = std::min(smallest, row.tokens);
  }
  EXPECT_EQ(kv->tokens, smallest);
  EXPECT_GT(kv->tokens, 1'048'576) << "a 1M context fits the reference design";
  auto tooSmall = kvCapacity(p, int64_t(40e9), 8);
  ASSERT_FALSE(tooSmall.ok());
  EXPECT_NE(tooSmall.error().message.find("rank 0 (stage 0, tensor rank 0) needs"), std::string::npos)
      << tooSmall.error().message;
  EXPECT_FALSE(kvCapacity(p, gpu, 0).ok());
}

TEST(ShardPlan, TinySplitsForTheTp2AndPp2Tests) {
  auto tiny = makeModelPresetConfig("tiny");
  ASSERT_TRUE(tiny.ok()) << tiny.error().message;
  const ModelConfig& cfg = *tiny;
  EXPECT_EQ(planError(tinyPresetConfig(), {}), "the config's layer roles are not derived (finalizeModelConfig)");
  const ShardPlan tp2 = mustPlan(cfg, {2, 1, {}});
  EXPECT_EQ(tp2.ranks.size(), 2u);
  const ShardPlan pp2 = mustPlan(cfg, {1, 2, {}});
  EXPECT_EQ(pp2.stageFirstLayer.size(), 3u);
  EXPECT_TRUE(pp2.ranks[1].draft);
}

TEST(ShardPlan, BadShapesNameTheirCause) {
  const ModelConfig cfg = v41FlashDefaults();
  EXPECT_EQ(planError(cfg, {3, 1, {}}), "tp 3 does not split num_attention_heads = 64 into equal parts");
  EXPECT_EQ(planError(cfg, {16, 1, {}}), "tp 16 does not split o_groups = 8 into equal parts");
  EXPECT_EQ(planError(cfg, {0, 1, {}}), "tp 0 and pp 1 must be at least 1");
  EXPECT_EQ(planError(cfg, {1, 41, {}}), "pp 41: more stages than the model's 40 layers");
  EXPECT_EQ(planError(cfg, {1, 2, {20, 21}}), "stage layer counts add up to 41, the model has 40 layers");
  EXPECT_EQ(planError(cfg, {1, 2, {40, 0}}), "stage 1 has 0 layers; every stage needs at least one");
  EXPECT_EQ(planError(cfg, {1, 3, {14, 26}}), "2 stage layer counts given for pp 3");
  EXPECT_EQ(planError(cfg, {1, 2, {38, 2}}),
            "the DSpark draft runs on the last stage (1), but its tapped layer 37 is on stage 0: give the last stage "
            "layers 37..39");
  // Without the draft, the taps do not constrain the split.
  EXPECT_TRUE(planShards(cfg, {1, 2, {38, 2}}, /*withDraft=*/false).ok());
  ModelConfig odd = cfg;
  odd.moeIntermediateSize = 32 * 73;  // 2336 / 2 = 1168 columns: not whole 32-wide blocks
  ASSERT_TRUE(finalizeModelConfig(odd, "test").ok());
  EXPECT_NE(planError(odd, {2, 1, {}}).find("of whole 32-wide quantization blocks"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
