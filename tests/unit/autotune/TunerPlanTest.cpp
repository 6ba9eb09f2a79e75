// The tuner's plan comes from the kernel families: every op with a tuning axis, each of its
// buckets once, at shapes that follow the model's dimensions.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "Tuner.h"
#include "deepinfer/OpShapes.h"

using namespace deepinfer;
using namespace deepinfer::bench;

namespace {

TEST(TunerPlan, EveryTunableOpOverEveryBucket) {
  const auto items = tunePlan(ModelDims{});
  std::set<std::string> seen;
  for (const KernelFamily* fam : allKernelFamilies()) {
    if (!fam->bucketAxis()) continue;
    size_t n = 0;
    for (const auto& it : items) n += it.op == fam->opName();
    // One row of buckets per shape the model runs the op at: weight_gemm's 8 projections,
    // combine_topk_swa's and gather_kcache_combine's 2 compress ratios, one for the others.
    const size_t shapes = fam->tuneShapes(ModelDims{}, 1).size();
    const bool perRatio = fam->opName() == "combine_topk_swa" || fam->opName() == "gather_kcache_combine";
    EXPECT_EQ(shapes, fam->opName() == "weight_gemm" ? 8u : perRatio ? 2u : 1u);
    EXPECT_EQ(n, shapes * shapeBuckets(fam->opName()).size()) << fam->opName();
    seen.insert(fam->opName());
  }
  EXPECT_EQ(seen.size(), 14u);
  EXPECT_EQ(items.size(), 164u);
  for (const auto& it : items) {
    // The description the family builds for the bucket lies in that bucket.
    auto d = makeOpDesc(it.op, it.shape, {});
    ASSERT_TRUE(d.ok()) << it.op << ": " << d.error().message;
    auto b = bucketFor(*d);
    ASSERT_TRUE(b.has_value()) << it.op;
    EXPECT_EQ(b->label(), it.bucket.label()) << it.op;
  }
}

TEST(TunerPlan, FiltersAndModelDimensions) {
  ModelDims m;
  m.heads = 16;
  m.hidden = 1024;
  const auto items = tunePlan(m, {"sparse_mla_decode", "mhc_post"}, {"B=1", "T=2"});
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].op, "sparse_mla_decode");
  EXPECT_EQ(items[0].shape.at("H"), 16);
  EXPECT_EQ(items[0].shape.at("B"), 1);
  EXPECT_EQ(items[1].op, "mhc_post");
  EXPECT_EQ(items[1].shape.at("C"), 1024);
  EXPECT_EQ(items[1].shape.at("T"), 2);
  // The candidates on a target include the default.
  auto c = tuneCandidates(items[0], *findTarget("sm_80"));
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_NE(std::find(c.configs.begin(), c.configs.end(), c.defaultConfig), c.configs.end());
  EXPECT_EQ(checkTuneInputs(items[1]), "");
}

}  // namespace
