// deepinfer-bench's prefill-window gather (benchmarks/BenchSpecs.cpp): the last 1,663 positions of
// a 64K context read from a 26-page window ring into the workspace after 32K compressed rows, as
// GpuForwardAttention.cpp's attendPrefill gathers a 1536-token chunk's window rows.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "BenchCheck.h"
#include "BenchOptions.h"
#include "BenchSpecs.h"
#include "deepinfer/KernelFamily.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/OpShapes.h"
#include "deepinfer/ShapeBuckets.h"
#include "deepinfer/TargetProfile.h"

using namespace deepinfer;
using namespace deepinfer::bench;

namespace {

const BenchSpec* findSpec(const std::string& op, const std::string& shape) {
  for (const BenchSpec& s : benchSpecs())
    if (s.op == op && s.shape == shape) return &s;
  return nullptr;
}

constexpr int64_t kContext = 65536, kGather = 1663, kRingPages = 26, kOffset = 32768, kRowBytes = 1024;

TEST(PrefillWindowGather, IsABenchmarkRowWithTheIssueTargets) {
  const BenchSpec* s = findSpec("gather_kcache", "64K last 1663");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->targetUs, 4);
  EXPECT_EQ(s->publicBestUs, 53.4);
  auto picked = selectSpecs(benchSpecs(), {"gather_kcache"});
  ASSERT_TRUE(picked.ok());
  EXPECT_EQ(picked->size(), 3u);  // 16K x1, 48K x4 and the window
}

TEST(PrefillWindowGather, InputsAreTheRuntimesRingAndWorkspace) {
  auto c = buildCase(*findSpec("gather_kcache", "64K last 1663"), 0x5EED0B1Cull);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->attrs.getInt("offset", -1), kOffset);
  EXPECT_EQ(c->attrs.getInt("block_size", -1), 64);
  EXPECT_EQ(c->inputs.at("seq_lens").ptr<int32_t>()[0], kContext);
  EXPECT_EQ(c->inputs.at("gather_lens").ptr<int32_t>()[0], kGather);
  EXPECT_EQ(c->inputs.at("out").shape, (std::vector<int64_t>{1, kOffset + kRingPages * 64, 512}));
  // Every logical page of the context maps onto the ring: page p and page p + 26 share a page,
  // and the ring's 26 pages are distinct cache pages.
  const HostTensor& bt = c->inputs.at("block_table");
  ASSERT_EQ(bt.shape, (std::vector<int64_t>{1, kContext / 64}));
  const int32_t* t = bt.ptr<int32_t>();
  std::set<int32_t> ring(t, t + kRingPages);
  EXPECT_EQ(ring.size(), size_t(kRingPages));
  for (int64_t p = 0; p < kContext / 64; ++p) ASSERT_EQ(t[p], t[p % kRingPages]) << "logical page " << p;
  // Bytes: 1663 rows of 584 cache bytes read and 1024 written, the 26 block-table entries those
  // positions span (pages 998..1023), seq_lens and gather_lens.
  EXPECT_EQ(c->bytes, 1663.0 * 584 + 1663.0 * 1024 + 26 * 4 + 8);
  EXPECT_EQ(c->check.kind, CheckPlan::Kind::Full);
}

TEST(PrefillWindowGather, ReferenceWritesOnlyTheWindowRows) {
  auto c = buildCase(*findSpec("gather_kcache", "64K last 1663"), 7);
  ASSERT_TRUE(c.ok()) << c.error().message;
  const HostTensor before = c->inputs.at("out");
  auto e = computeExpected(*c);
  ASSERT_TRUE(e.ok()) << e.error().message;
  const HostTensor& out = e->tensors.at("out");
  ASSERT_EQ(out.bytes.size(), before.bytes.size());
  const size_t first = size_t(kOffset * kRowBytes), last = size_t((kOffset + kGather) * kRowBytes);
  EXPECT_EQ(std::memcmp(out.bytes.data(), before.bytes.data(), first), 0) << "a compressed row changed";
  EXPECT_EQ(std::memcmp(out.bytes.data() + last, before.bytes.data() + last, out.bytes.size() - last), 0)
      << "a ring row past the gathered ones changed";
  // Each gathered row is a token the cache holds (filled pages hold writer-built tokens: never
  // all zeros), so every position found a filled ring page.
  for (int64_t i = 0; i < kGather; ++i) {
    const uint8_t* row = out.bytes.data() + first + size_t(i * kRowBytes);
    bool nonzero = false;
    for (int64_t b = 0; b < kRowBytes && !nonzero; ++b) nonzero = row[b] != 0;
    ASSERT_TRUE(nonzero) << "gathered row " << i << " is all zeros";
  }
}

// The window gather is tuned and scheduled by the rows it gathers (1,664 behind 32K compressed
// rows), not by the workspace's 34K rows: the 2K bucket, and a default that spreads one row per
// warp over every SM of the H200 (416 4-warp CTAs) instead of 104 8-warp CTAs.
TEST(PrefillWindowGather, BucketAndDefaultFollowTheGatheredRows) {
  auto c = buildCase(*findSpec("gather_kcache", "64K last 1663"), 3);
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto d = describeOp("gather_kcache", c->attrs, c->inputs);
  ASSERT_TRUE(d.ok()) << d.error().message;
  auto b = bucketFor(*d);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->label(), "context=1..2048");
  const KernelFamily& f = *findKernelFamily("gather_kcache");
  const TargetProfile h200 = *findTarget("h200");
  EXPECT_EQ(configToString(f.defaultConfig(*d, h200)), "ctas_per_sm=16,grid_ctas=416,tokens_per_warp=1,warps=4");
  // 16K x1 fits one wave at four rows per warp (132 x 4 CTAs x 32 rows >= 16384): 512 CTAs, one
  // step. 48K x4 takes 16 steps of the 6-CTA-per-SM grid, balanced to 768 CTAs (not 792).
  auto g16 = makeOpDesc("gather_kcache", {{"R", 1}, {"context", 16384}}, {});
  auto g48 = makeOpDesc("gather_kcache", {{"R", 4}, {"context", 49152}}, {});
  ASSERT_TRUE(g16.ok() && g48.ok());
  EXPECT_EQ(bucketFor(*g16)->label(), "context=8193..32768");
  EXPECT_EQ(configToString(f.defaultConfig(*g16, h200)), "ctas_per_sm=4,grid_ctas=512,tokens_per_warp=4,warps=8");
  EXPECT_EQ(configToString(f.defaultConfig(*g48, h200)), "ctas_per_sm=6,grid_ctas=768,tokens_per_warp=2,warps=8");
}

TEST(PrefillWindowGather, BadParametersAreNamed) {
  BenchSpec s{"gather_kcache", "bad ring", {{"context", 4096}, {"gather", 200}, {"ring_rows", 100}}};
  auto c = buildCase(s, 1);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("gather_kcache [bad ring]: ring_rows must be"), std::string::npos)
      << c.error().message;
  s.params = {{"context", 100}, {"gather", 200}};
  c = buildCase(s, 1);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("gather <= context"), std::string::npos) << c.error().message;
}

}  // namespace
