// The KV capacity report of a model's stages and tensor ranks (model/gpu/GpuStagesReport.h),
// without a GPU: each rank's line, per GPU (ranks sharing a GPU add their weights and KV, the
// tokens are the smallest of them) and in total (the tokens are the smallest rank's, bytes add).
#include <gtest/gtest.h>

#include <string>

#include "model/gpu/GpuStagesReport.h"

namespace deepinfer {
namespace {

GpuStageReport rank(int stage, int tpRank, int gpu, int64_t weights, int64_t tokens, int64_t kvBytes) {
  GpuStageReport r;
  r.stage = stage;
  r.tpRank = tpRank;
  r.gpu = gpu;
  r.layerBegin = stage * 4;
  r.layerEnd = stage * 4 + 4;
  r.weightBytes = weights;
  r.capacity.tokens = tokens;
  r.capacity.bytesPerToken = 1000;
  r.capacity.totalBytes = kvBytes;
  r.collective = "logical";
  return r;
}

constexpr int64_t kMiB = 1 << 20;

TEST(GpuStagesReport, Tp2TimesPp2OnFourGpusPerGpuAndTotal) {
  const std::vector<GpuStageReport> ranks = {rank(0, 0, 0, 10 * kMiB, 5000, 40 * kMiB),
                                             rank(0, 1, 1, 12 * kMiB, 4000, 30 * kMiB),
                                             rank(1, 0, 2, 8 * kMiB, 6000, 50 * kMiB),
                                             rank(1, 1, 3, 8 * kMiB, 7000, 60 * kMiB)};
  const auto gpus = gpuShares(ranks);
  ASSERT_EQ(gpus.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(gpus[i].gpu, int(i));
    EXPECT_EQ(gpus[i].ranks, 1);
    EXPECT_EQ(gpus[i].weightBytes, ranks[i].weightBytes);
    EXPECT_EQ(gpus[i].kvBytes, ranks[i].capacity.totalBytes);
    EXPECT_EQ(gpus[i].tokens, ranks[i].capacity.tokens);
  }
  const std::string d = describeGpuStages(ranks);
  EXPECT_NE(d.find("; 2 pipeline stages x 2 tensor ranks; stage 0 rank 0: layers 0..3 on GPU 0, weights 10.0 MiB, "
                   "KV capacity 5000 tokens (1000 bytes/token)"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("; stage 1 rank 1: layers 4..7 on GPU 3, weights 8.0 MiB, KV capacity 7000 tokens"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("; GPU 1: 1 rank, weights 12.0 MiB, KV 30.0 MiB, 4000 tokens"), std::string::npos) << d;
  EXPECT_NE(d.find("; in total (4 GPUs) weights 38.0 MiB, KV 180.0 MiB, KV capacity 4000 tokens (the smallest rank's)"),
            std::string::npos)
      << d;
}

TEST(GpuStagesReport, LogicalRanksSharingOneGpuAddUp) {
  const std::vector<GpuStageReport> ranks = {rank(0, 0, 0, 10 * kMiB, 5000, 40 * kMiB),
                                             rank(0, 1, 0, 12 * kMiB, 3000, 30 * kMiB)};
  const auto gpus = gpuShares(ranks);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].ranks, 2);
  EXPECT_EQ(gpus[0].weightBytes, 22 * kMiB);
  EXPECT_EQ(gpus[0].kvBytes, 70 * kMiB);
  EXPECT_EQ(gpus[0].tokens, 3000);
  const std::string d = describeGpuStages(ranks);
  EXPECT_NE(d.find("; 1 pipeline stage x 2 tensor ranks;"), std::string::npos) << d;
  EXPECT_NE(d.find("; GPU 0: 2 ranks, weights 22.0 MiB, KV 70.0 MiB, 3000 tokens"), std::string::npos) << d;
  EXPECT_NE(d.find("; in total (1 GPU) weights 22.0 MiB, KV 70.0 MiB, KV capacity 3000 tokens"), std::string::npos) << d;
}

TEST(GpuStagesReport, OneRankWithoutACollectiveAddsNothingPipelineStagesNoRanks) {
  GpuStageReport one = rank(0, 0, 0, kMiB, 100, kMiB);
  one.collective.clear();
  EXPECT_EQ(describeGpuStages({one}), "");
  EXPECT_EQ(describeGpuStages({}), "");
  // TP1 over NCCL: one rank with a collective is reported.
  EXPECT_NE(describeGpuStages({rank(0, 0, 0, kMiB, 100, kMiB)}).find("; 1 pipeline stage; stage 0: layers 0..3"),
            std::string::npos);
  // Two stages, one rank each: no "rank" in the lines; mirrors named.
  GpuStageReport s1 = rank(1, 0, 1, kMiB, 200, kMiB);
  s1.mirroredSources = {2};
  const std::string d = describeGpuStages({one, s1});
  EXPECT_NE(d.find("; 2 pipeline stages; stage 0: layers 0..3 on GPU 0"), std::string::npos) << d;
  EXPECT_NE(d.find("(1000 bytes/token, mirrors kv source 2)"), std::string::npos) << d;
  EXPECT_EQ(d.find(" rank 0:"), std::string::npos) << d;
  EXPECT_NE(d.find("KV capacity 100 tokens (the smallest rank's)"), std::string::npos) << d;
}

}  // namespace
}  // namespace deepinfer
