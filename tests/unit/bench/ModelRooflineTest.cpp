// The model roofline arithmetic of deepinfer-model-bench (benchmarks/ModelRoofline.h) on the
// proxy preset (7 layers at V4.1-Flash widths, 128 experts), against numbers worked out by hand
// from docs/model.md §1-§3: C 5120, H 64, head_dim 512, q_lora 1280, o_lora 1024 x 8 groups,
// index 32 heads x 128, 6 of 128 experts of I 2304 + 1 shared, V 129280, hc 4; kv sources 2
// (ratio 2) and 4 (ratio 1), index sources 2, 4, 5 (5 restricted to 4's candidates), engram 1, 5.
#include <gtest/gtest.h>

#include "ModelRoofline.h"
#include "ProxyConfig.h"
#include "model/MakeModelPresets.h"

using namespace deepinfer;
using namespace deepinfer::bench;

namespace {

// Attention matrices of one layer: wq_a 1280*5120 = 6,553,600; wq_b 32768*1280 = 41,943,040;
// wkv 512*5120 = 2,621,440; wo_a 8192*4096 = 33,554,432; wo_b 5120*8192 = 41,943,040.
constexpr double kAttentionParams = 126615552;
// One SwiGLU expert: 3 * 2304 * 5120.
constexpr double kExpertParams = 35389440;

TEST(ModelRoofline, ProxyWeightBytesPerDecodeToken) {
  const ModelConfig c = proxy();
  const TokenWeightBytes b = tokenWeightBytes(c, WeightStorage::Bf16, 6);
  // bf16 matrices + q_norm (2*1280) + kv_norm (2*512) + fp32 sinks (4*64), 7 layers.
  EXPECT_DOUBLE_EQ(b.attention, 7 * (2 * kAttentionParams + 2560 + 1024 + 256));
  EXPECT_DOUBLE_EQ(b.attention, 1772644608);
  // Layer 2 (ratio 2): wkv + wgate 2*(2*512*5120), norm 1024, wk 2*128*512, k_norm 256;
  // layer 4 (ratio 1): the same without wgate.
  EXPECT_DOUBLE_EQ(b.compressor, (10485760 + 1024 + 131072 + 256) + (5242880 + 1024 + 131072 + 256));
  // Three index sources: wq_b 2*4096*1280 + weights_proj 2*32*5120.
  EXPECT_DOUBLE_EQ(b.indexer, 3 * (10485760 + 327680));
  // Per layer, two sublayers of fn 4*24*20480 + base 4*24 + scale 4*3 + a norm 2*5120.
  EXPECT_DOUBLE_EQ(b.mhc, 7 * 2 * (1966080 + 96 + 12 + 10240));
  EXPECT_DOUBLE_EQ(b.router, 7 * (2 * 128 * 5120 + 4 * 128));
  EXPECT_DOUBLE_EQ(b.shared, 7 * 2 * kExpertParams);
  EXPECT_DOUBLE_EQ(b.routed, 7 * 6 * 2 * kExpertParams);
  EXPECT_DOUBLE_EQ(b.routed, 2972712960);
  // Two engram layers: wkv [5*5120, 24*256] bf16 + q/k weights 2 * 2*4*5120.
  EXPECT_DOUBLE_EQ(b.engram, 2 * (2.0 * 25600 * 6144 + 81920));
  EXPECT_DOUBLE_EQ(b.head, 2.0 * 129280 * 5120 + 10240);
  EXPECT_DOUBLE_EQ(b.embedRow, 10240);
  EXPECT_DOUBLE_EQ(b.total(), 7279249128);  // ~7.28 GB read per decode token
}

TEST(ModelRoofline, CheckpointFormatsAreSmaller) {
  const ModelConfig c = proxy();
  const TokenWeightBytes q = tokenWeightBytes(c, WeightStorage::Checkpoint, 6);
  // fp4 expert: w1/w3 [2304, 5120]: 2304*5120/2 + 2304*160 scales = 6,266,880; w2 [5120, 2304]:
  // 5120*2304/2 + 5120*72 = 6,266,880.
  EXPECT_DOUBLE_EQ(q.routed, 7 * 6 * 3 * 6266880.0);
  // fp8 wq_b [32768, 1280]: 41,943,040 + 1024*40 block scales; head stays bf16.
  const TokenWeightBytes onlyHead = tokenWeightBytes(c, WeightStorage::Checkpoint, 0);
  EXPECT_DOUBLE_EQ(onlyHead.head, 2.0 * 129280 * 5120 + 10240);
  EXPECT_DOUBLE_EQ(onlyHead.routed, 0);
  EXPECT_LT(q.total(), tokenWeightBytes(c, WeightStorage::Bf16, 6).total() * 0.6);
}

TEST(ModelRoofline, DistinctExperts) {
  EXPECT_DOUBLE_EQ(expectedDistinctExperts(128, 6, 1), 6);
  // 128 * (1 - (122/128)^2) = 128 - 122^2/128 = 128 - 116.28125.
  EXPECT_DOUBLE_EQ(expectedDistinctExperts(128, 6, 2), 11.71875);
  EXPECT_NEAR(expectedDistinctExperts(128, 6, 1000), 128, 1e-9);
  EXPECT_EQ(expectedDistinctExperts(128, 6, 0), 0);
}

TEST(ModelRoofline, ProxyMatmulParams) {
  const ModelConfig c = proxy();
  // Per layer: attention + mHC mixes 2*24*4*5120 (983,040) + router 128*5120 (655,360) + 7 experts
  // = 375,980,032; 7 layers = 2,631,860,224. kv source 2: 2*512*5120 + 128*512/2 = 5,275,648;
  // kv source 4: 512*5120 + 128*512 = 2,686,976; three index sources 3 * (4096*1280 + 32*5120) =
  // 16,220,160; two engram wkv 2 * 25600*6144 = 314,572,800.
  EXPECT_DOUBLE_EQ(tokenMatmulParams(c, false), 2631860224.0 + 5275648 + 2686976 + 16220160 + 314572800);
  EXPECT_DOUBLE_EQ(tokenMatmulParams(c, false), 2970615808);
  EXPECT_DOUBLE_EQ(tokenMatmulParams(c, true), 2970615808.0 + 129280.0 * 5120);
}

TEST(ModelRoofline, ProxyDecodeKvBytes) {
  const ModelConfig c = proxy();
  // Position 1000 sees 1001 tokens: 500 entries of layer 2 (ratio 2), 1001 of layer 4.
  const DecodeKvBytes kv = decodeKvBytes(c, 1000);
  EXPECT_DOUBLE_EQ(kv.window, 7 * 128 * 584);
  // Layers 2, 3 select all 500 entries of layer 2; layers 4, 5, 6 select 512 of layer 4's 1001.
  EXPECT_DOUBLE_EQ(kv.compressed, 2 * 500 * 584 + 3 * 512 * 584);
  // Index sources 2 (500 keys), 4 (1001) and 5 (1001, under the 2048*8 candidate cap), 132 bytes.
  EXPECT_DOUBLE_EQ(kv.indexKeys, (500 + 1001 + 1001) * 132);
  EXPECT_DOUBLE_EQ(kv.total(), 523264 + 1481024 + 330264);
  // Position 0: one window row per layer; layer 4's single entry is selected by 4, 5, 6.
  const DecodeKvBytes first = decodeKvBytes(c, 0);
  EXPECT_DOUBLE_EQ(first.window, 7 * 584);
  EXPECT_DOUBLE_EQ(first.compressed, 3 * 584);
  EXPECT_DOUBLE_EQ(first.indexKeys, 2 * 132);
  // Far out, layer 5 scores at most 16384 of layer 4's keys.
  const DecodeKvBytes far = decodeKvBytes(c, 99999);
  EXPECT_DOUBLE_EQ(far.indexKeys, (50000 + 100000 + 16384) * 132.0);
  EXPECT_DOUBLE_EQ(far.compressed, 5 * 512 * 584);
}

TEST(ModelRoofline, ProxyPrefillFlops) {
  const ModelConfig c = proxy();
  // Four tokens (positions 0..3). Window keys 1+2+3+4 = 10 per layer (70); layers 2, 3 see
  // 0,1,1,2 entries (4 each), layers 4, 5, 6 see 1,2,3,4 (10 each): 108 keys in all.
  const PrefillFlops f = prefillFlops(c, 4);
  EXPECT_DOUBLE_EQ(f.attention, 4.0 * 64 * 512 * 108);
  // Scored keys: layer 2: 4, layers 4 and 5: 10 each; 2*32*128 + 2*32 FLOPs per key.
  EXPECT_DOUBLE_EQ(f.indexer, 24.0 * (8192 + 64));
  EXPECT_DOUBLE_EQ(f.linear, 2.0 * 2970615808 * 4);
  EXPECT_DOUBLE_EQ(f.head, 2.0 * 129280 * 5120);
  EXPECT_DOUBLE_EQ(f.total(), f.linear + f.head + f.attention + f.indexer);
  // Long contexts: attention grows about linearly (window + top-k saturate), per token
  // at most 4*64*512*(7*128 + 5*512) = 453,509,120 FLOPs.
  const PrefillFlops g = prefillFlops(c, 65536);
  EXPECT_LT(g.attention, 65536.0 * 453509120);
  EXPECT_GT(g.attention, 0.95 * 65536.0 * 453509120);
}

TEST(ModelRoofline, ProxyKvCacheBytesPerToken) {
  const ModelConfig c = proxy();
  // Rows: (584 + 132) / 2 + (584 + 132) / 1 = 358 + 716.
  EXPECT_DOUBLE_EQ(kvCacheBytesPerToken(c, 0), 1074);
  // 64-row pages: mlaPageBytes(64) = 65 * 576 = 37,440 and 64 * 132 = 8,448 index bytes:
  // 45,888 / 128 + 45,888 / 64 = 358.5 + 717 (GpuKvCapacity::bytesPerToken rounds up to 1076).
  EXPECT_DOUBLE_EQ(kvCacheBytesPerToken(c, 64), 1075.5);
  EXPECT_DOUBLE_EQ(minWindowBytesPerRequest(c), 7 * 128 * 584);
}

}  // namespace
