// The self-contained pieces of the CPU forward pass: RoPE tables (plain and YaRN), the cache
// byte formats, e4m3 encoding, top-k tie order, mHC mixes, the thread pool.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>

#include "deepinfer/Formats.h"
#include "model/CpuForwardCaches.h"
#include "model/CpuForwardLayers.h"
#include "model/CpuForwardMath.h"
#include "model/CpuForwardThreads.h"
#include "model/QuantEncode.h"
#include "model/Rope.h"

using namespace deepinfer;

namespace {

float f32(double x) { return float(x); }

std::vector<float> randomBf16Row(std::mt19937& rng, int n, float sigma) {
  std::normal_distribution<float> nd(0.f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = roundBf16(nd(rng));
  return v;
}

}  // namespace

TEST(CpuRope, PlainFrequenciesAreFp64PowersRoundedOnce) {
  auto t = RopeTable::plain(64, 10000.0);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->invFreq().size(), 32u);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(t->invFreq()[size_t(i)], f32(std::pow(10000.0, -i / 32.0))) << i;
}

// V4.1's YaRN: corr(32) = 15.45 -> low 15, corr(1) = 24.71 -> high 25 (worked out by hand from
// docs/model.md §6), so pairs up to 15 keep their frequency, pairs from 25 are divided by 16 and
// pair 20 sits half-way.
TEST(CpuRope, YarnRampMatchesHandDerivedBounds) {
  auto t = RopeTable::yarn(64, 160000.0, 16, 32, 1, 65536);
  ASSERT_TRUE(t.ok());
  const auto& f = t->invFreq();
  for (int i = 0; i < 32; ++i) {
    const double b = std::pow(160000.0, -i / 32.0);
    if (i <= 15) {
      EXPECT_EQ(f[size_t(i)], f32(b)) << i;
    } else if (i >= 25) {
      EXPECT_EQ(f[size_t(i)], f32(b / 16)) << i;
    }
  }
  EXPECT_EQ(f[20], f32(std::pow(160000.0, -20 / 32.0) * (0.5 / 16 + 0.5)));
  EXPECT_EQ(f[16], f32(std::pow(160000.0, -16 / 32.0) * (0.1 / 16 + 0.9)));
}

TEST(CpuRope, RejectsBadDims) {
  EXPECT_FALSE(RopeTable::plain(63, 10000.0).ok());
  EXPECT_FALSE(RopeTable::plain(64, 1.0).ok());
  EXPECT_FALSE(RopeTable::yarn(64, 160000.0, 0.5, 32, 1, 65536).ok());
}

TEST(CpuRope, RotatesAdjacentPairsAndInverts) {
  auto t = RopeTable::plain(4, 10000.0);  // inv_freq {1, 0.01}
  ASSERT_TRUE(t.ok());
  float x[4] = {1.f, 0.f, 0.f, 1.f};
  t->rotate(x, 1, false);
  EXPECT_FLOAT_EQ(x[0], std::cos(1.f));
  EXPECT_FLOAT_EQ(x[1], std::sin(1.f));
  EXPECT_FLOAT_EQ(x[2], -std::sin(0.01f));
  EXPECT_FLOAT_EQ(x[3], std::cos(0.01f));
  t->rotate(x, 1, true);
  EXPECT_NEAR(x[0], 1.f, 1e-6);
  EXPECT_NEAR(x[1], 0.f, 1e-6);
  EXPECT_NEAR(x[2], 0.f, 1e-6);
  EXPECT_NEAR(x[3], 1.f, 1e-6);
  float y[4] = {0.3f, -0.7f, 2.f, 5.f};
  t->rotate(y, 0, false);  // position 0 is the identity
  EXPECT_EQ(y[0], 0.3f);
  EXPECT_EQ(y[1], -0.7f);
  EXPECT_EQ(y[3], 5.f);
}

// The caches quantize with QuantEncode's fast encoder; it must agree with Formats.h.
TEST(CpuCaches, FastE4m3EncoderMatchesFormatsReference) {
  std::vector<float> probes;
  for (int c = 0; c < 0x7F; ++c) {  // every finite value, and the midpoints between neighbours
    const float v = e4m3ToFloat(uint8_t(c));
    probes.push_back(v);
    probes.push_back(-v);
    if (c < 0x7E) probes.push_back((v + e4m3ToFloat(uint8_t(c + 1))) / 2);
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> ud(-500.f, 500.f);
  std::lognormal_distribution<float> ln(-3.f, 3.f);
  for (int i = 0; i < 20000; ++i) probes.push_back(ud(rng));
  for (int i = 0; i < 20000; ++i) probes.push_back(ln(rng) * (i % 2 ? 1 : -1));
  probes.push_back(448.f);
  probes.push_back(1e9f);
  probes.push_back(std::nanf(""));
  for (float p : probes) EXPECT_EQ(encodeE4m3(p), floatToE4m3(p)) << p;
}

TEST(CpuCaches, KvRowLayoutFollowsFp8DsMla) {
  EXPECT_EQ(kvPageBytes(64), 37440);
  EXPECT_EQ(kvPageBytes(2), 1728);
  EXPECT_EQ(kvPageBytes(256), 149760);
  std::mt19937 rng(11);
  const int64_t BS = 4;
  std::vector<uint8_t> page(size_t(kvPageBytes(BS)), 0xEE);
  std::vector<float> row = randomBf16Row(rng, 512, 1.f);
  for (int i = 64; i < 128; ++i) row[size_t(i)] = roundBf16(row[size_t(i)] * 1e-7f);  // amax < 1e-4
  encodeKvRow(row.data(), page.data(), BS, 2);
  const uint8_t* data = page.data() + 2 * 576;
  const uint8_t* scales = page.data() + BS * 576 + 2 * 8;
  for (int tile = 0; tile < 7; ++tile) {
    float amax = 0;
    for (int i = 0; i < 64; ++i) amax = std::max(amax, std::fabs(row[size_t(tile * 64 + i)]));
    const uint8_t e = ue8m0CeilEncode(std::max(amax, 1e-4f) / 448.f);
    EXPECT_EQ(scales[tile], e) << tile;
    for (int i = 0; i < 64; ++i) {
      const float x = row[size_t(tile * 64 + i)] / ue8m0ToFloat(e);
      EXPECT_EQ(data[tile * 64 + i], floatToE4m3(std::clamp(x, -448.f, 448.f)));
    }
  }
  EXPECT_EQ(scales[1], ue8m0CeilEncode(1e-4f / 448.f));  // the floor is on amax
  EXPECT_EQ(scales[7], 0);
  for (int i = 0; i < 64; ++i) {
    uint16_t b;
    std::memcpy(&b, data + 448 + 2 * i, 2);
    EXPECT_EQ(b, floatToBf16(row[size_t(448 + i)]));
  }
  EXPECT_EQ(page[0], 0xEE);  // other tokens untouched
  EXPECT_EQ(page[size_t(BS * 576)], 0xEE);

  std::vector<float> back(512, -1.f);
  decodeKvRow(page.data(), BS, 2, back.data());
  for (int i = 0; i < 448; ++i)
    EXPECT_EQ(back[size_t(i)], bf16ToFloat(dequantE4m3ToBf16(data[i], scales[i / 64]))) << i;
  for (int i = 448; i < 512; ++i) EXPECT_EQ(back[size_t(i)], row[size_t(i)]);
}

TEST(CpuCaches, PagedCacheRingAndCompressedMirror) {
  std::mt19937 rng(3);
  PagedKvCache ring(4);
  std::vector<std::vector<float>> rows;
  for (int p = 0; p < 11; ++p) {
    rows.push_back(randomBf16Row(rng, 512, 2.f));
    ring.write(p % 8, rows.back().data());
  }
  EXPECT_EQ(ring.numPages(), 2);
  std::vector<float> a(512), b(512);
  PagedKvCache single(1);
  single.write(0, rows[10].data());
  ring.read(10 % 8, a.data());
  single.read(0, b.data());
  EXPECT_EQ(a, b);  // slot 2 holds position 10 now, encoded identically whatever the page size
  CompressedKvCache comp(2);
  for (int j = 0; j < 5; ++j) comp.append(rows[size_t(j)].data());
  ASSERT_EQ(comp.size(), 5);
  comp.bytes().read(3, a.data());
  EXPECT_EQ(0, std::memcmp(a.data(), comp.row(3), 512 * sizeof(float)));
  EXPECT_NE(a, rows[3]);  // e4m3 loses bits: the mirror is the decoded bytes, not the input
}

TEST(CpuCaches, IndexKeysUsePow2ScalePerRow) {
  std::mt19937 rng(5);
  IndexKeyCache keys(128, 2);
  std::vector<float> k = randomBf16Row(rng, 128, 3.f);
  keys.append(k.data());
  std::vector<float> tiny(128, 1e-7f);
  keys.append(tiny.data());
  keys.append(k.data());
  ASSERT_EQ(keys.size(), 3);
  float amax = 0;
  for (float v : k) amax = std::max(amax, std::fabs(v));
  const float s = ue8m0ToFloat(ue8m0CeilEncode(amax / 448.f));
  EXPECT_EQ(keys.scale(0), s);
  EXPECT_EQ(keys.scale(1), ue8m0ToFloat(ue8m0CeilEncode(1e-4f / 448.f)));
  float stored;
  std::memcpy(&stored, keys.page(0).data() + 2 * 128 + 4, 4);  // page 0, token 1's scale
  EXPECT_EQ(stored, keys.scale(1));
  for (int i = 0; i < 128; ++i) {
    EXPECT_EQ(keys.page(0)[size_t(i)], floatToE4m3(k[size_t(i)] / s));
    EXPECT_EQ(keys.values(2)[i], e4m3ToFloat(floatToE4m3(k[size_t(i)] / s)));
  }
  std::vector<float> q(128);
  const float qs = quantizeIndexQuery(k.data(), 128, q.data());
  EXPECT_EQ(qs, s);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(q[size_t(i)], keys.values(0)[i]);
}

TEST(CpuMath, TopkTiesGoToLowerIndexAndSkipMinusInf) {
  const float v[8] = {1.f, 3.f, 3.f, -INFINITY, 2.f, 3.f, 0.f, -INFINITY};
  EXPECT_EQ(topkAscending(v, 8, 2), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(topkAscending(v, 8, 4), (std::vector<int32_t>{1, 2, 4, 5}));
  EXPECT_EQ(topkAscending(v, 8, 8), (std::vector<int32_t>{0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(topkAscending(v, std::vector<int32_t>{5, 2, 7}, 1), (std::vector<int32_t>{2}));
}

TEST(CpuMath, RmsNormRoundsOnce) {
  const float x[4] = {1.f, -2.f, 3.f, 0.5f};
  const float w[4] = {0.5f, 1.f, 2.f, -1.f};
  float out[4];
  CpuExec ex;
  rmsNorm(ex, x, 4, w, 1e-20, out);
  const float r = 1.f / std::sqrt((1.f + 4.f + 9.f + 0.25f) / 4.f);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], roundBf16(w[i] * x[i] * r));
}

TEST(CpuMath, GemmIsIdenticalForAnyThreadCount) {
  std::mt19937 rng(9);
  CpuMatrix W;
  W.rows = 300;
  W.cols = 77;
  W.data = randomBf16Row(rng, 300 * 77, 1.f);
  std::vector<float> x = randomBf16Row(rng, 5 * 77, 1.f);
  std::vector<float> y1(5 * 300, NAN), y2(5 * 300, NAN);
  CpuThreadPool one(1), three(3);
  gemm(CpuExec{&one, false}, x.data(), 5, W, y1.data());
  gemm(CpuExec{&three, false}, x.data(), 5, W, y2.data());
  EXPECT_EQ(y1, y2);
  double ref = 0;
  for (int k = 0; k < 77; ++k) ref += double(x[size_t(77 + k)]) * double(W.data[size_t(200 * 77 + k)]);
  EXPECT_NEAR(y1[size_t(300 + 200)], ref, 1e-4);
}

TEST(CpuThreads, ParallelForCoversEveryIndexOnce) {
  CpuThreadPool pool(3);
  for (int64_t n : {1, 2, 7, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallelFor(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
    });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[size_t(i)].load(), 1) << n << " " << i;
  }
}

// Sinkhorn output is (nearly) doubly stochastic for mixes of realistic spread; pre lies in (eps, 1 + eps), post in (0, 2).
TEST(CpuMhc, MixesAreDoublyStochastic) {
  std::mt19937 rng(13);
  const int64_t C = 64;
  CpuMhcWeights w;
  w.fn.rows = 24;
  w.fn.cols = 4 * C;
  w.fn.data = randomBf16Row(rng, 24 * 4 * C, 0.1f);
  w.scale = {0.7f, 1.3f, 0.5f};
  w.base = randomBf16Row(rng, 24, 0.5f);
  std::vector<float> x = randomBf16Row(rng, 4 * C, 1.f);
  for (bool fp64 : {false, true}) {
    CpuMhcMix mix = mhcMixes(CpuExec{nullptr, fp64}, x.data(), C, w, 1e-20, 1e-6, 20);
    for (int i = 0; i < 4; ++i) {
      EXPECT_GT(mix.pre[i], 1e-6f);
      EXPECT_LT(mix.pre[i], 1.f + 1e-6f);
      EXPECT_GT(mix.post[i], 0.f);
      EXPECT_LT(mix.post[i], 2.f);
      float row = 0, col = 0;
      for (int j = 0; j < 4; ++j) {
        row += mix.comb[i * 4 + j];
        col += mix.comb[j * 4 + i];
      }
      EXPECT_NEAR(row, 1.f, 1e-3);
      EXPECT_NEAR(col, 1.f, 1e-5);  // the last round normalizes columns
    }
  }
}

// The post step sends comb column j to stream j (the transpose of docs/ops.md §8).
TEST(CpuMhc, PostUsesCombColumnsAndRoundsOnce) {
  const int64_t C = 2;
  std::vector<float> x = {1.f, 2.f, 10.f, 20.f, 100.f, 200.f, 1000.f, 2000.f};
  CpuMhcMix mix{};
  for (int j = 0; j < 4; ++j) mix.post[j] = 0.5f * float(j);
  mix.comb[1 * 4 + 0] = 1.f;  // stream 0 <- stream 1
  mix.comb[3 * 4 + 2] = 1.f;  // stream 2 <- stream 3
  const float f[2] = {4.f, 8.f};
  mhcPost(CpuExec{}, x.data(), C, mix, f);
  EXPECT_EQ(x[0], 10.f);
  EXPECT_EQ(x[1], 20.f);
  EXPECT_EQ(x[2], 2.f);   // stream 1: only post * f
  EXPECT_EQ(x[3], 4.f);
  EXPECT_EQ(x[4], 1004.f);
  EXPECT_EQ(x[5], roundBf16(2008.f));
  float h[2];
  const float pre[4] = {0.5f, 0.f, 0.f, 0.25f};
  std::vector<float> y = {1.f, 2.f, 0.f, 0.f, 0.f, 0.f, 3.f, 1.001f};
  mhcCollapse(CpuExec{}, y.data(), C, pre, h);
  EXPECT_EQ(h[0], 1.25f);
  EXPECT_EQ(h[1], roundBf16(1.f + 0.25f * 1.001f));
}
