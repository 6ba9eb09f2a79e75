// The tensor ranks' ranges (planShards, the one source the GPU runtime takes them from) and the
// sharded weight walk (gpuWeightBytes of a rank's GpuStageTensors, no device): every rank holds
// disjoint, covering ranges of heads, groups, experts, shared-expert rows and vocabulary rows;
// the GPU plan of tp x pp hands each stage its ranks; a rank's bytes are the replicated tensors
// plus 1/tp of the sharded ones; misaligned shards are clear errors.
#include <gtest/gtest.h>

#include "cases/TensorParallelModels.h"
#include "model/MakeModelPresets.h"
#include "model/gpu/GpuForward.h"
#include "model/gpu/GpuWeights.h"
#include "model/parallel/ShardPlan.h"

namespace deepinfer {
namespace {

using deepinfer::testing::tiny16;

TEST(TpShard, RanksHoldDisjointCoveringRanges) {
  const ModelConfig cfg = tiny16();
  for (int tp : {1, 2}) {
    ParallelShape shape;
    shape.tp = tp;
    shape.pp = 2;
    auto plan = planShards(cfg, shape, /*withDraft=*/false);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    ASSERT_EQ(plan->ranks.size(), size_t(2 * tp));
    for (int s = 0; s < 2; ++s) {
      int heads = 0, groups = 0, experts = 0;
      int64_t vocab = 0, shared = 0;
      for (int r = 0; r < tp; ++r) {
        const RankPlan& rp = plan->ranks[size_t(s * tp + r)];
        EXPECT_EQ(rp.stage, s);
        EXPECT_EQ(rp.tpRank, r);
        EXPECT_EQ(rp.headBegin, heads) << "contiguous, in rank order";
        EXPECT_EQ(rp.groupBegin, groups);
        EXPECT_EQ(rp.expertBegin, experts);
        EXPECT_EQ(rp.vocabBegin, vocab);
        EXPECT_EQ(rp.sharedBegin, shared);
        heads = rp.headEnd;
        groups = rp.groupEnd;
        experts = rp.expertEnd;
        vocab = rp.vocabEnd;
        shared = rp.sharedEnd;
        EXPECT_EQ(rp.headEnd - rp.headBegin, 16 / tp);
        EXPECT_EQ((rp.sharedEnd - rp.sharedBegin) % 32, 0) << "whole quantization blocks";
      }
      EXPECT_EQ(heads, cfg.numAttentionHeads);
      EXPECT_EQ(groups, cfg.oGroups);
      EXPECT_EQ(experts, cfg.nRoutedExperts);
      EXPECT_EQ(vocab, cfg.vocabSize);
      EXPECT_EQ(shared, cfg.moeIntermediateSize * cfg.nSharedExperts);
    }
  }
}

TEST(TpShard, GpuStagesCarryTheirRanksFromThePlan) {
  const ModelConfig cfg = tiny16();
  GpuModelOptions o;
  o.tp = 2;
  o.pp = 2;
  o.stageLayers = {3, 5};
  auto stages = planGpuStages(cfg, o);
  ASSERT_TRUE(stages.ok()) << stages.error().message;
  ParallelShape shape;
  shape.tp = 2;
  shape.pp = 2;
  shape.stageLayers = {3, 5};
  auto plan = planShards(cfg, shape, false);
  ASSERT_TRUE(plan.ok());
  for (int s = 0; s < 2; ++s) {
    const GpuStagePlan& sp = (*stages)[size_t(s)];
    ASSERT_EQ(sp.ranks.size(), 2u);
    for (int r = 0; r < 2; ++r) {
      const RankPlan& a = sp.ranks[size_t(r)];
      const RankPlan& b = plan->ranks[size_t(s * 2 + r)];
      EXPECT_EQ(a.headBegin, b.headBegin);
      EXPECT_EQ(a.expertEnd, b.expertEnd);
      EXPECT_EQ(a.vocabBegin, b.vocabBegin);
      EXPECT_EQ(a.layerBegin, sp.layerBegin);
    }
  }
  // One stage and one rank: the whole ranges.
  auto one = planGpuStages(cfg, GpuModelOptions{});
  ASSERT_TRUE(one.ok());
  ASSERT_EQ((*one)[0].ranks.size(), 1u);
  EXPECT_EQ((*one)[0].ranks[0].headEnd, 16);
  EXPECT_EQ((*one)[0].ranks[0].vocabEnd, cfg.vocabSize);
}

TEST(TpShard, ARanksWeightsAreTheReplicatedOnesPlusItsShare) {
  const ModelConfig cfg = tiny16();
  const ConfigWeightTable table(cfg, /*draft=*/false);
  GpuStageTensors whole;
  whole.draft = false;
  auto all = gpuWeightBytes(cfg, table, whole);
  ASSERT_TRUE(all.ok()) << all.error().message;
  ParallelShape shape;
  shape.tp = 2;
  auto plan = planShards(cfg, shape, false);
  ASSERT_TRUE(plan.ok());
  int64_t sum = 0, first = 0;
  for (int r = 0; r < 2; ++r) {
    GpuStageTensors t = whole;
    t.tp = 2;
    t.rank = plan->ranks[size_t(r)];
    auto b = gpuWeightBytes(cfg, table, t);
    ASSERT_TRUE(b.ok()) << b.error().message;
    if (r == 0) first = *b;
    EXPECT_EQ(*b, first) << "even splits: every rank holds the same bytes";
    EXPECT_LT(*b, *all);
    sum += *b;
  }
  // Two ranks hold the replicated tensors twice and the sharded ones once.
  EXPECT_GT(sum, *all);
  // A shard that does not land on whole quantization blocks is refused, naming the tensor.
  GpuStageTensors bad = whole;
  bad.tp = 2;
  bad.rank = plan->ranks[0];
  bad.rank.sharedEnd = 48;  // 48 rows of the shared experts: not whole 32-row blocks
  auto b = gpuWeightBytes(cfg, table, bad);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("shared_experts.w1.weight"), std::string::npos) << b.error().message;
  EXPECT_NE(b.error().message.find("32-wide blocks"), std::string::npos) << b.error().message;
}

}  // namespace
}  // namespace deepinfer
