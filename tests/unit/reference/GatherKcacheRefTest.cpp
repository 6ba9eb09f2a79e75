// gather_kcache reference (docs/ops.md §3): hand-built cache bytes decoded into the right row,
// rows outside the gathered range untouched, agreement with kv_quant_insert, and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "RefTestUtil.h"
#include "deepinfer/Formats.h"

namespace deepinfer::testing {
namespace {

constexpr int64_t kPageBytes2 = 1728;  // block size 2

TEST(GatherKcacheRef, HandBuiltTokenLandsInItsRow) {
  // Request 0 has 4 tokens; gather_lens 1 gathers position 3 = page block_table[0, 1] = 2,
  // offset 1 in that page, into out[0, offset = 1].
  HostTensor cache(DType::U8, {3, kPageBytes2});
  uint8_t* tok = cache.ptr<uint8_t>() + 2 * kPageBytes2 + 576;
  uint8_t* sc = cache.ptr<uint8_t>() + 2 * kPageBytes2 + 2 * 576 + 8;
  tok[0] = 0x38;  // 1.0 * 2^(129-127) = 4
  tok[1] = 0xB8;  // -4
  tok[2] = 0x7F;  // NaN code -> canonical NaN
  tok[3] = 0x01;  // 2^-9 * 4 = 2^-7
  sc[0] = 129;
  tok[64] = 0x40;  // 2.0 with scale byte 0 -> +0
  sc[1] = 0;
  tok[128] = 0x30;  // any code with scale byte 0xFF -> canonical NaN
  sc[2] = 0xFF;
  sc[3] = sc[4] = sc[5] = sc[6] = 127;
  tok[448] = 0x34;  // RoPE dim 448 = bf16 0x1234 (little-endian)
  tok[449] = 0x12;
  tok[510] = 0xC0;  // RoPE dim 479 = bf16 0xFFC0, a NaN pattern copied as is
  tok[511] = 0xFF;

  TensorMap m;
  m["k_cache"] = std::move(cache);
  m["seq_lens"] = i32Tensor({1}, {4});
  m["gather_lens"] = i32Tensor({1}, {1});
  m["block_table"] = i32Tensor({1, 2}, {-1, 2});  // page of positions 0..1 is never read
  Rng rng(3);
  m["out"] = randomBytes(rng, DType::BF16, {1, 3, 512});
  const HostTensor before = m["out"];
  OpAttrs a;
  a.setInt("block_size", 2);
  a.setInt("offset", 1);
  ASSERT_EQ(runError("gather_kcache", a, m), "");

  const uint16_t* o = m["out"].ptr<uint16_t>();
  const uint16_t* row = o + 512;
  EXPECT_EQ(bf16ToFloat(row[0]), 4.f);
  EXPECT_EQ(bf16ToFloat(row[1]), -4.f);
  EXPECT_EQ(row[2], 0x7FC0);
  EXPECT_EQ(bf16ToFloat(row[3]), std::ldexp(1.f, -7));
  EXPECT_EQ(row[4], 0x0000);  // code 0 times 4
  EXPECT_EQ(row[64], 0x0000);
  EXPECT_EQ(row[128], 0x7FC0);
  EXPECT_EQ(row[191], 0x7FC0);  // the whole tile
  EXPECT_EQ(row[192], 0x0000);
  EXPECT_EQ(row[448], 0x1234);
  EXPECT_EQ(row[479], 0xFFC0);
  EXPECT_EQ(row[480], 0x0000);
  // Rows 0 and 2 keep their poison.
  for (int64_t i = 0; i < 512; ++i) {
    EXPECT_EQ(o[i], before.ptr<uint16_t>()[i]) << "row 0 dim " << i;
    EXPECT_EQ(o[1024 + i], before.ptr<uint16_t>()[1024 + i]) << "row 2 dim " << i;
  }
}

TEST(GatherKcacheRef, ReturnsWhatKvQuantInsertWrote) {
  // Write 70 random tokens of one request (two pages of 64, in reversed page order), then
  // gather all of them: each row must be the e4m3 codes times their scale, close to the input.
  Rng rng(11);
  const int64_t bs = 64, T = 70, pageBytes = 37440;
  TensorMap w;
  w["k"] = bf16Normal(rng, {T, 512});
  std::vector<int64_t> slots;
  for (int64_t t = 0; t < T; ++t) slots.push_back(t < bs ? 2 * bs + t : (t - bs));  // pages 2 then 0
  w["slot_mapping"] = i64Tensor({T}, slots);
  w["k_cache"] = randomBytes(rng, DType::U8, {3, pageBytes});
  OpAttrs wa;
  wa.setInt("block_size", bs);
  ASSERT_EQ(runError("kv_quant_insert", wa, w), "");

  TensorMap g;
  g["k_cache"] = w["k_cache"];
  g["seq_lens"] = i32Tensor({1}, {int32_t(T)});
  g["block_table"] = i32Tensor({1, 3}, {2, 0, -1});
  g["out"] = randomBytes(rng, DType::BF16, {1, T, 512});
  OpAttrs ga;
  ga.setInt("block_size", bs);
  ASSERT_EQ(runError("gather_kcache", ga, g), "");

  const uint8_t* cache = g["k_cache"].ptr<uint8_t>();
  for (int64_t t = 0; t < T; ++t) {
    const int64_t page = slots[size_t(t)] / bs, off = slots[size_t(t)] % bs;
    const uint8_t* data = cache + page * pageBytes + off * 576;
    const uint8_t* scales = cache + page * pageBytes + bs * 576 + off * 8;
    const uint16_t* row = g["out"].ptr<uint16_t>() + t * 512;
    const uint16_t* x = w["k"].ptr<uint16_t>() + t * 512;
    for (int64_t d = 0; d < 448; ++d) {
      const float scale = std::ldexp(1.f, scales[d / 64] - 127);
      const float want = e4m3ToFloat(data[d]) * scale;
      ASSERT_EQ(bf16ToFloat(row[d]), want) << "token " << t << " dim " << d;
      // Within half an e4m3 step of the written value (3 mantissa bits; subnormal step 2^-9).
      const float xv = bf16ToFloat(x[d]);
      ASSERT_LE(std::fabs(want - xv), std::max(std::fabs(xv) / 16.f, scale * std::ldexp(1.f, -10)))
          << "token " << t << " dim " << d;
    }
    for (int64_t d = 448; d < 512; ++d) ASSERT_EQ(row[d], x[d]) << "token " << t << " rope dim " << d;
  }
}

TEST(GatherKcacheRef, ErrorsNameTheTensorAndLeaveOutUntouched) {
  Rng rng(5);
  auto base = [&] {
    TensorMap m;
    m["k_cache"] = randomBytes(rng, DType::U8, {4, kPageBytes2});
    m["seq_lens"] = i32Tensor({2}, {3, 4});
    m["block_table"] = i32Tensor({2, 2}, {0, 1, 2, 3});
    m["out"] = randomBytes(rng, DType::BF16, {2, 4, 512});
    return m;
  };
  OpAttrs a;
  a.setInt("block_size", 2);

  TensorMap m = base();
  m["block_table"] = i32Tensor({2, 3}, {0, 1, 0, 2, 3, 0});
  EXPECT_EQ(runError("gather_kcache", a, m), "");  // extra columns are fine
  m = base();
  m["block_table"] = i32Tensor({3, 2}, {0, 1, 2, 3, 0, 0});
  EXPECT_EQ(runError("gather_kcache", a, m),
            "gather_kcache: tensor 'block_table' has shape [3, 2], expected [R=2, max_pages]");
  m = base();
  m["block_table"] = i32Tensor({2, 1}, {0, 1});
  EXPECT_EQ(
      runError("gather_kcache", a, m),
      "gather_kcache: request 0 needs block_table[0, 1] for position 2 but 'block_table' has 1 columns");
  m = base();
  m["block_table"] = i32Tensor({2, 2}, {0, 1, 2, 4});
  const HostTensor before = m["out"];
  EXPECT_EQ(runError("gather_kcache", a, m),
            "gather_kcache: block_table[1, 1] = 4 is not a page of 'k_cache' (P = 4); request 1 reads it");
  EXPECT_EQ(m["out"].bytes, before.bytes) << "a failed call must not write";
  m = base();
  m["gather_lens"] = i32Tensor({2}, {1, 5});
  EXPECT_EQ(runError("gather_kcache", a, m),
            "gather_kcache: gather_lens[1] = 5 is outside [0, seq_lens[1] = 4]");
  m = base();
  OpAttrs off = a;
  off.setInt("offset", 1);
  EXPECT_EQ(runError("gather_kcache", off, m),
            "gather_kcache: request 1 gathers 4 rows at offset 1, past 'out' dim 1 (M = 4)");
  m = base();
  m["out"] = randomBytes(rng, DType::F32, {2, 4, 512});
  EXPECT_EQ(runError("gather_kcache", a, m), "gather_kcache: tensor 'out' has dtype F32, expected BF16");
  m = base();
  m.erase("seq_lens");
  EXPECT_EQ(runError("gather_kcache", a, m), "gather_kcache: missing required tensor 'seq_lens' (I32)");
}

}  // namespace
}  // namespace deepinfer::testing
