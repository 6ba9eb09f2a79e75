// Shape buckets of the tuning key: the boundaries of every op, the open last bucket, the mHC
// tensor-core threshold at T=16, and that the variable read from an op description is the one
// the tuner builds at each bucket's representative shape.
#include <gtest/gtest.h>

#include <limits>

#include "deepinfer/OpShapes.h"
#include "deepinfer/ShapeBuckets.h"

using namespace deepinfer;

namespace {

std::string labelOf(const std::string& op, int64_t v) {
  auto b = bucketOf(op, v);
  return b ? b->label() : "none";
}

TEST(ShapeBuckets, DecodeBatchBoundaries) {
  EXPECT_EQ(labelOf("sparse_mla_decode", 1), "B=1");
  EXPECT_EQ(labelOf("sparse_mla_decode", 2), "B=2");
  EXPECT_EQ(labelOf("sparse_mla_decode", 3), "B=3..4");
  EXPECT_EQ(labelOf("sparse_mla_decode", 4), "B=3..4");
  EXPECT_EQ(labelOf("sparse_mla_decode", 5), "B=5..8");
  EXPECT_EQ(labelOf("sparse_mla_decode", 8), "B=5..8");
  EXPECT_EQ(labelOf("sparse_mla_decode", 9), "B=9..16");
  EXPECT_EQ(labelOf("sparse_mla_decode", 32), "B=17..32");
  EXPECT_EQ(labelOf("sparse_mla_decode", 33), "B>=33");
  EXPECT_EQ(labelOf("sparse_mla_decode", 100000), "B>=33");
  EXPECT_EQ(bucketOf("sparse_mla_decode", 33)->representative, 64);
  EXPECT_EQ(bucketOf("sparse_mla_decode", 6)->representative, 8);
}

TEST(ShapeBuckets, PrefillTokenBoundaries) {
  for (const char* op : {"sparse_mla_prefill", "combine_topk_swa", "kv_quant_insert"}) {
    EXPECT_EQ(labelOf(op, 1), "T=1..16") << op;
    EXPECT_EQ(labelOf(op, 16), "T=1..16") << op;
    EXPECT_EQ(labelOf(op, 17), "T=17..64") << op;
    EXPECT_EQ(labelOf(op, 1024), "T=257..1024") << op;
    EXPECT_EQ(labelOf(op, 1025), "T>=1025") << op;
    EXPECT_EQ(bucketOf(op, 1536)->representative, 4096) << op;
  }
}

TEST(ShapeBuckets, MhcSplitsAtTheTensorCoreThreshold) {
  for (const char* op : {"mhc_pre", "mhc_post", "mhc_collapse", "mhc_fused_post_pre"}) {
    EXPECT_EQ(labelOf(op, 1), "T=1") << op;
    EXPECT_EQ(labelOf(op, 3), "T=3..4") << op;
    EXPECT_EQ(labelOf(op, 6), "T=5..8") << op;
    EXPECT_EQ(labelOf(op, 12), "T=9..15") << op;
    EXPECT_EQ(labelOf(op, 15), "T=9..15") << op;   // CUDA cores below 16
    EXPECT_EQ(labelOf(op, 16), "T=16..64") << op;  // tensor cores from 16 on
    EXPECT_EQ(labelOf(op, 64), "T=16..64") << op;
    EXPECT_EQ(labelOf(op, 1536), "T>=1025") << op;
    EXPECT_EQ(bucketOf(op, 12)->representative, 15) << op;
    // No bucket holds both sides of the threshold.
    for (const ShapeBucket& b : shapeBuckets(op)) EXPECT_FALSE(b.lo < 16 && b.hi >= 16) << op << " " << b.label();
  }
}

TEST(ShapeBuckets, ContextAndCandidateBoundaries) {
  EXPECT_EQ(labelOf("gather_kcache", 2048), "context=1..2048");
  EXPECT_EQ(labelOf("gather_kcache", 2049), "context=2049..8192");
  EXPECT_EQ(labelOf("gather_kcache", 16384), "context=8193..32768");
  EXPECT_EQ(labelOf("gather_kcache", 49152), "context>=32769");
  EXPECT_EQ(labelOf("indexer_logits", 8192), "context=2049..8192");
  EXPECT_EQ(labelOf("indexer_logits", 8193), "context>=8193");
  EXPECT_EQ(labelOf("topk", 8192), "N=2049..8192");
  EXPECT_EQ(labelOf("topk", 8193), "N>=8193");
  EXPECT_EQ(labelOf("not_an_op", 3), "none");
}

TEST(ShapeBuckets, BucketsCoverEveryValueOnce) {
  for (const char* op : {"sparse_mla_decode", "sparse_mla_prefill", "combine_topk_swa", "kv_quant_insert", "mhc_pre",
                         "mhc_post", "mhc_collapse", "mhc_fused_post_pre", "gather_kcache", "indexer_logits", "topk",
                         "weight_gemm", "moe_experts", "gather_kcache_combine"}) {
    const auto bs = shapeBuckets(op);
    ASSERT_FALSE(bs.empty()) << op;
    EXPECT_EQ(bs.front().lo, 1) << op;
    EXPECT_EQ(bs.back().hi, std::numeric_limits<int64_t>::max()) << op;
    for (size_t i = 0; i < bs.size(); ++i) {
      EXPECT_GE(bs[i].representative, bs[i].lo) << op;
      EXPECT_LE(bs[i].representative, bs[i].hi) << op;
      if (i > 0) EXPECT_EQ(bs[i].lo, bs[i - 1].hi + 1) << op;
    }
    EXPECT_FALSE(opDtypes(op).empty()) << op;
  }
}

TEST(ShapeBuckets, DescriptionsAtRepresentativesLandInTheirBucket) {
  const std::map<std::string, std::string> param = {
      {"sparse_mla_decode", "B"}, {"sparse_mla_prefill", "T"}, {"combine_topk_swa", "T"}, {"kv_quant_insert", "T"},
      {"mhc_pre", "T"},           {"mhc_post", "T"},           {"mhc_collapse", "T"},     {"mhc_fused_post_pre", "T"},
      {"gather_kcache", "context"}, {"indexer_logits", "context"}, {"topk", "N"}, {"weight_gemm", "M"},
      {"moe_experts", "T"}, {"gather_kcache_combine", "T"}};
  for (const auto& [op, p] : param) {
    for (const ShapeBucket& b : shapeBuckets(op)) {
      for (int64_t v : {b.lo, b.representative}) {
        auto d = makeOpDesc(op, {{p, v}}, {});
        ASSERT_TRUE(d.ok()) << op << " " << p << "=" << v << ": " << d.error().message;
        auto got = bucketFor(*d);
        ASSERT_TRUE(got.has_value()) << op;
        ShapeBucket want = b;
        want.cls = bucketClass(*d);
        EXPECT_EQ(got->label(), want.label()) << op << " " << p << "=" << v;
      }
    }
  }
}

// weight_gemm serves every projection: its buckets keep format, N x K, groups and epilogue apart.
TEST(ShapeBuckets, WeightGemmBucketsCarryTheProjection) {
  auto wqa = makeOpDesc("weight_gemm", {{"M", 3}, {"N", 1280}, {"K", 5120}}, {});
  auto woa = makeOpDesc("weight_gemm", {{"M", 3}, {"N", 8192}, {"K", 32768}, {"groups", 8}, {"epilogue", 1}}, {});
  auto w13 = makeOpDesc("weight_gemm", {{"M", 3000}, {"N", 2304}, {"K", 5120}, {"weight_bits", 4}, {"epilogue", 2}}, {});
  ASSERT_TRUE(wqa.ok() && woa.ok() && w13.ok());
  EXPECT_EQ(bucketFor(*wqa)->label(), "fp8 1280x5120 f32 M=3..4");
  EXPECT_EQ(bucketFor(*woa)->label(), "fp8 8192x32768 g8 bf16 M=3..4");
  EXPECT_EQ(bucketFor(*w13)->label(), "fp4 2304x5120 swiglu M>=1025");
  auto moe = makeOpDesc("moe_experts", {{"T", 12}}, {});
  ASSERT_TRUE(moe.ok());
  EXPECT_EQ(bucketFor(*moe)->label(), "T=9..16");
}

}  // namespace
