// sparse_mla_decode's default config per target at V4.1's decode shapes (64 heads, 128 window +
// 512 compressed keys): one of the tuner's candidates (so the GPU suite's candidate sweep covers
// it), within the target's shared-memory cap (48 KB on sm_80/sm_86), and the schedule the
// measured costs favour: 32 heads per CTA and enough splits to fill the SMs at small batches,
// 32-key tiles (dynamic shared memory) where the target allows them and the batch is large.
#include <gtest/gtest.h>

#include "deepinfer/OpShapes.h"
#include "deepinfer/Specialize.h"

using namespace deepinfer;

namespace {

KernelConfig defaultAt(int64_t B, const TargetProfile& t, Specialization* specOut = nullptr) {
  auto d = makeOpDesc("sparse_mla_decode", {{"B", B}}, {});
  EXPECT_TRUE(d.ok());
  auto spec = specialize(*d, t);
  EXPECT_TRUE(spec.ok()) << spec.error().message;
  if (specOut) *specOut = *spec;
  return spec->chosen.config;
}

TEST(SparseMlaDecodeDefaults, AreFittingCandidatesWithinEachTargetsCap) {
  for (const char* name : {"sm_80", "sm_86", "sm_89", "sm_90"}) {
    const TargetProfile t = *findTarget(name);
    for (int64_t B : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128}) {
      Specialization spec;
      const KernelConfig c = defaultAt(B, t, &spec);
      bool listed = false;
      for (const ConfigChoice& ch : spec.fitting) listed = listed || ch.config == c;
      EXPECT_TRUE(listed) << name << " B=" << B << ": default " << configToString(c) << " is not a candidate";
      EXPECT_LE(spec.chosen.estimate.smemBytes, t.smemPerCtaCap) << name << " B=" << B;
      if (t.arch() == 80 || t.arch() == 86) EXPECT_LE(spec.chosen.estimate.smemBytes, 48 * 1024) << name;
    }
  }
}

TEST(SparseMlaDecodeDefaults, SmallBatchesSplitOver32HeadCtasThatFillTheSms) {
  for (const char* name : {"sm_80", "sm_86", "sm_90"}) {
    const TargetProfile t = *findTarget(name);
    for (int64_t B : {6, 12}) {
      const KernelConfig c = defaultAt(B, t);
      EXPECT_EQ(c.at("heads_per_cta"), 32) << name << " B=" << B;
      const int64_t ctas = B * (64 / c.at("heads_per_cta")) * c.at("kv_splits");
      EXPECT_GT(ctas, t.smCount / 2) << name << " B=" << B << ": " << configToString(c);
    }
  }
}

TEST(SparseMlaDecodeDefaults, LargeBatchesUse32KeyTilesOnlyAbove48Kb) {
  EXPECT_EQ(defaultAt(24, *findTarget("sm_90")).at("keys_per_tile"), 32);
  EXPECT_EQ(defaultAt(64, *findTarget("sm_90")).at("keys_per_tile"), 32);
  for (const char* name : {"sm_80", "sm_86"})
    EXPECT_EQ(defaultAt(24, *findTarget(name)).at("keys_per_tile"), 16) << name;
}

// The two split merges as plans: merge = 0 is the split launch plus a merge launch over a plain
// workspace; merge = 1 is one launch whose arrival counters (one per query and head group) live
// in the zeroed workspace, with the same partials workspace.
TEST(SparseMlaDecodePlans, OneLaunchMergeCountsArrivalsInTheZeroedWorkspace) {
  auto d = makeOpDesc("sparse_mla_decode", {{"B", 6}, {"Sq", 2}}, {});
  ASSERT_TRUE(d.ok());
  KernelConfig c = {{"heads_per_cta", 32}, {"threads", 256}, {"keys_per_tile", 16},
                    {"stages", 1},         {"kv_splits", 5},  {"merge", 0}};
  auto launched = emitKernel(*d, c);
  ASSERT_TRUE(launched.ok()) << launched.error().message;
  ASSERT_EQ(launched->plan.size(), 2u);
  EXPECT_EQ(launched->plan[0].grid[0], 5u);
  EXPECT_EQ(launched->zeroedBytes, 0);
  c["merge"] = 1;
  auto one = emitKernel(*d, c);
  ASSERT_TRUE(one.ok()) << one.error().message;
  ASSERT_EQ(one->plan.size(), 1u);
  EXPECT_EQ(one->plan[0].grid[0], 5u);
  EXPECT_EQ(one->zeroedBytes, 6 * 2 * (64 / 32) * 4);
  EXPECT_EQ(one->workspaceBytes, launched->workspaceBytes);
  EXPECT_NE(one->unit.source.find("di::smd::Mode::kMergeLastCta"), std::string::npos);
  EXPECT_NE(launched->unit.source.find("di::smd::Mode::kMergeLaunch"), std::string::npos);
}

}  // namespace
