// sparse_mla_prefill / sparse_mla_decode references (docs/ops.md §5, §6): a hand-worked softmax
// with the sink in the denominator only, rows with no valid entry, and decode equal to prefill
// over the same key rows decoded independently here from the cache bytes (NaN -> 0).
#include <gtest/gtest.h>

#include <cmath>

#include "RefTestUtil.h"
#include "deepinfer/Formats.h"

namespace deepinfer::testing {
namespace {

TEST(SparseMlaPrefillRef, HandWorkedSoftmaxAndSink) {
  // q = 1 at dims 0 and 500 (a RoPE dim: one 512-wide product). kv row 0 = (2 at 0, 0.5 at 1,
  // 1 at 500): dot 3; row 1 = (-1, 0.25, 1): dot 0; row 2 unused. sm_scale 0.5 -> p = 1.5, 0.
  std::vector<float> kv(3 * 512, 0.f), q(3 * 2 * 512, 0.f);
  kv[0] = 2.f, kv[1] = 0.5f, kv[500] = 1.f;
  kv[512] = -1.f, kv[513] = 0.25f, kv[512 + 500] = 1.f;
  kv[1024] = 7.f;
  for (int h = 0; h < 2; ++h) q[h * 512] = q[h * 512 + 500] = 1.f;  // token 0, both heads
  for (int t = 1; t < 3; ++t) q[t * 1024] = 1.f;
  TensorMap m;
  m["q"] = bf16Of({3, 2, 512}, q);
  m["kv"] = bf16Of({3, 512}, kv);
  // Token 0: entries 0, -1 (skipped), 1, then 7 past lens. Token 1: lens 0. Token 2: entries
  // exist but none is valid (-1, S).
  m["indices"] = i32Tensor({3, 4}, {0, -1, 1, 2, /**/ 0, 1, 2, 0, /**/ -1, 3, 0, 0});
  m["lens"] = i32Tensor({3}, {3, 0, 2});
  m["attn_sink"] = f32Of({2}, {0.5f, 8.f});  // chosen so no expected value sits near a bf16 tie
  OpAttrs a;
  a.setFloat("sm_scale", 0.5);
  ASSERT_EQ(runError("sparse_mla_prefill", a, m), "");

  const double lse = std::log(std::exp(1.5) + 1.0);
  for (int h = 0; h < 2; ++h) {
    const double sink = h == 0 ? 0.5 : 8.0;
    const double denom = std::exp(1.5) + 1.0 + std::exp(sink);
    const double w0 = std::exp(1.5) / denom, w1 = 1.0 / denom;
    // The sink is not part of lse, whatever its size.
    EXPECT_NEAR(m["lse"].ptr<float>()[h], lse, 1e-6) << "head " << h;
    const uint16_t* out = m["out"].ptr<uint16_t>() + h * 512;
    const double want[4][2] = {{0, 2 * w0 - w1}, {1, 0.5 * w0 + 0.25 * w1}, {500, w0 + w1}, {2, 0}};
    for (auto [d, v] : want) EXPECT_EQ(out[int(d)], floatToBf16(float(v))) << "head " << h << " dim " << d;
    for (int d = 2; d < 512; ++d)
      if (d != 500) {
        EXPECT_EQ(out[d], 0) << "head " << h << " dim " << d;
      }
  }
  for (int64_t row = 2; row < 6; ++row) {  // tokens 1 and 2: no valid entry
    EXPECT_EQ(m["lse"].ptr<float>()[row], INFINITY) << "row " << row;
    for (int d = 0; d < 512; ++d) ASSERT_EQ(m["out"].ptr<uint16_t>()[row * 512 + d], 0) << "row " << row;
  }
}

TEST(SparseMlaPrefillRef, LensPastKmaxIsAnError) {
  Rng rng(2);
  TensorMap m;
  m["q"] = bf16Normal(rng, {1, 8, 512});
  m["kv"] = bf16Normal(rng, {4, 512});
  m["indices"] = i32Tensor({1, 2}, {0, 1});
  m["lens"] = i32Tensor({1}, {3});
  m["attn_sink"] = f32Normal(rng, {8});
  EXPECT_EQ(runError("sparse_mla_prefill", OpAttrs{}, m),
            "sparse_mla_prefill: lens[0] = 3 is outside [0, Kmax = 2] ('indices' has 2 columns)");
  m["lens"] = i32Tensor({1}, {2});
  m["attn_sink"] = f32Normal(rng, {4});
  EXPECT_EQ(runError("sparse_mla_prefill", OpAttrs{}, m),
            "sparse_mla_prefill: tensor 'attn_sink' has shape [4], expected [H=8]");
}

// Key row `i` of an fp8_ds_mla cache decoded straight from the spec's byte layout, NaN -> 0.
std::vector<float> decodeRow(const HostTensor& cache, int64_t bs, int64_t i) {
  const int64_t pageBytes = cache.dim(1);
  const uint8_t* page = cache.ptr<uint8_t>() + (i / bs) * pageBytes;
  const uint8_t* data = page + (i % bs) * 576;
  const uint8_t* scales = page + bs * 576 + (i % bs) * 8;
  std::vector<float> row(512);
  for (int d = 0; d < 448; ++d)
    row[size_t(d)] = e4m3ToFloat(data[d]) * ue8m0ToFloat(scales[d / 64]);  // 0xFF: NaN
  for (int d = 448; d < 512; ++d)
    row[size_t(d)] = bf16ToFloat(uint16_t(data[448 + 2 * (d - 448)] | data[449 + 2 * (d - 448)] << 8));
  for (float& v : row)
    if (std::isnan(v)) v = 0.f;
  return row;
}

TEST(SparseMlaDecodeRef, EqualsPrefillOverTheSameRows) {
  const int64_t B = 3, Sq = 2, H = 4, Ks = 16, Ke = 24;
  Rng rng(17);
  TensorMap d;
  d["q"] = bf16Normal(rng, {B, Sq, H, 512});
  d["swa_cache"] = writerBuiltKvCache(rng, 3, 64, {0, 1, 2});
  d["extra_cache"] = writerBuiltKvCache(rng, 40, 2, [] {
    std::vector<int64_t> p;
    for (int64_t i = 0; i < 40; ++i) p.push_back(i);
    return p;
  }());
  // NaN codes and a NaN scale in some extra rows: they count as 0 in both products.
  for (int64_t page = 0; page < 40; page += 3) {
    d["extra_cache"].ptr<uint8_t>()[page * 1728 + 5] = 0x7F;
    d["extra_cache"].ptr<uint8_t>()[page * 1728 + 2 * 576 + 8 + 2] = 0xFF;
  }
  auto randomIndices = [&](int64_t K, int64_t valid) {
    std::vector<int32_t> v(size_t(B * Sq * K));
    for (auto& x : v)
      x = rng.chance(0.1) ? -1 : rng.chance(0.05) ? int32_t(valid + 3) : int32_t(rng.range(0, valid));
    return v;
  };
  const std::vector<int32_t> si = randomIndices(Ks, 192), ei = randomIndices(Ke, 80);
  d["swa_indices"] = i32Tensor({B, Sq, Ks}, si);
  d["extra_indices"] = i32Tensor({B, Sq, Ke}, ei);
  d["swa_lens"] = i32Tensor({B}, {int32_t(Ks), 5, 0});
  d["extra_lens"] = i32Tensor({B, Sq}, {int32_t(Ke), 0, 7, int32_t(Ke), 0, 0});  // per query token
  d["attn_sink"] = f32Normal(rng, {H});
  OpAttrs da;
  da.setInt("swa_block_size", 64);
  da.setInt("extra_block_size", 2);
  ASSERT_EQ(runError("sparse_mla_decode", da, d), "");

  // The same queries as prefill tokens t = b*Sq + s over a kv list built here.
  std::vector<float> kv;
  std::vector<int32_t> pidx(size_t(B * Sq * (Ks + Ke)), -1), plens(size_t(B * Sq));
  const int32_t swaLens[3] = {int32_t(Ks), 5, 0};
  const int32_t extraLens[6] = {int32_t(Ke), 0, 7, int32_t(Ke), 0, 0};
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < Sq; ++s) {
      const int64_t t = b * Sq + s;
      int32_t n = 0;
      auto add = [&](const HostTensor& cache, int64_t bs, int64_t valid, const int32_t* idx, int64_t len) {
        for (int64_t k = 0; k < len; ++k) {
          if (idx[k] < 0 || idx[k] >= valid) continue;
          const std::vector<float> row = decodeRow(cache, bs, idx[k]);
          pidx[size_t(t * (Ks + Ke) + n++)] = int32_t(kv.size() / 512);
          for (float v : row) kv.push_back(v);
        }
      };
      add(d["swa_cache"], 64, 192, si.data() + t * Ks, swaLens[b]);
      add(d["extra_cache"], 2, 80, ei.data() + t * Ke, extraLens[t]);
      plens[size_t(t)] = n;
    }
  }
  TensorMap p;
  p["q"] = d["q"];
  p["q"].shape = {B * Sq, H, 512};
  p["kv"] = bf16Of({int64_t(kv.size() / 512), 512}, kv);
  p["indices"] = i32Tensor({B * Sq, Ks + Ke}, pidx);
  p["lens"] = i32Tensor({B * Sq}, plens);
  p["attn_sink"] = d["attn_sink"];
  ASSERT_EQ(runError("sparse_mla_prefill", OpAttrs{}, p), "");  // both use the default sm_scale

  EXPECT_EQ(d["out"].shape, (std::vector<int64_t>{B, Sq, H, 512}));
  EXPECT_EQ(d["lse"].shape, (std::vector<int64_t>{B, Sq, H}));
  EXPECT_EQ(d["out"].bytes, p["out"].bytes);
  EXPECT_EQ(d["lse"].bytes, p["lse"].bytes);
  // Query (2, 1) has no entries in either source.
  EXPECT_EQ(d["lse"].ptr<float>()[(2 * Sq + 1) * H], INFINITY);
}

TEST(SparseMlaDecodeRef, ExtraSourceIsAllOrNothing) {
  Rng rng(4);
  TensorMap m;
  m["q"] = bf16Normal(rng, {1, 1, 8, 512});
  m["swa_cache"] = writerBuiltKvCache(rng, 1, 64, {0});
  m["swa_indices"] = i32Tensor({1, 1, 2}, {0, 1});
  m["swa_lens"] = i32Tensor({1}, {2});
  m["attn_sink"] = f32Normal(rng, {8});
  OpAttrs a;
  a.setInt("swa_block_size", 64);
  EXPECT_EQ(runError("sparse_mla_decode", a, m), "");
  m["extra_lens"] = i32Tensor({1}, {1});
  EXPECT_EQ(
      runError("sparse_mla_decode", a, m),
      "sparse_mla_decode: the extra source needs all of 'extra_cache', 'extra_indices', 'extra_lens' or "
      "none (got 1 of 3)");
  m.erase("extra_lens");
  m["swa_lens"] = i32Tensor({1}, {3});
  EXPECT_EQ(runError("sparse_mla_decode", a, m),
            "sparse_mla_decode: swa_lens[0] = 3 is outside [0, K = 2] ('swa_indices' has 2 columns)");
  m["swa_lens"] = i32Tensor({1, 1, 1}, {1});
  EXPECT_EQ(runError("sparse_mla_decode", a, m),
            "sparse_mla_decode: tensor 'swa_lens' has shape [1, 1, 1], expected [B=1] or [B=1, Sq=1]");
}

}  // namespace
}  // namespace deepinfer::testing
