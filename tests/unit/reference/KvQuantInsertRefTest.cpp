// kv_quant_insert reference (docs/ops.md §2): a token with hand-worked scales and codes, bytes
// outside the token left alone, -1 slots skipped, and the errors users see.
#include <gtest/gtest.h>

#include <cmath>

#include "RefTestUtil.h"
#include "deepinfer/Formats.h"

namespace deepinfer::testing {
namespace {

constexpr uint8_t kPoison = 0xAB;
constexpr int64_t kBs2PageBytes = 1728;  // ceil(2 * 584 / 576) * 576

// One token whose seven tiles were worked out by hand (values, scale byte, codes below).
std::vector<float> handToken() {
  std::vector<float> k(512, 0.f);
  for (int d = 0; d < 64; ++d) k[d] = 1.f;  // tile 0: amax 3.5, 3.5/448 = 2^-7 -> scale 120
  k[0] = 3.5f;
  k[1] = -0.5f;
  for (int d = 64; d < 128; ++d) k[d] = std::ldexp(1.f, -17);  // tile 1: amax floored to 1e-4 -> 2^-22 -> 105
  for (int d = 128; d < 192; ++d) k[d] = std::ldexp(1.f, -7);  // tile 2: 2^-7/448 -> 2^-15 -> 112
  for (int d = 192; d < 256; ++d) k[d] = 0.5f;                 // tile 3: amax 448 -> scale 1 -> 127
  k[192] = 448.f;
  k[193] = 1.0625f;                               // tie 1.0 / 1.125 -> 1.0 (0x38)
  k[194] = 1.1875f;                               // tie 1.125 / 1.25 -> 1.25 (0x3A)
  k[195] = 17.f;                                  // tie 16 / 18 -> 16 (0x58)
  k[196] = 3.f / 1024.f;                          // tie between subnormals 2^-9 and 2^-8 -> 2^-8 (0x02)
  for (int d = 256; d < 320; ++d) k[d] = -300.f;  // tile 4: 300/448 -> 1 -> 127; -300 -> -288 (0xF9)
  for (int d = 320; d < 384; ++d) k[d] = 0.25f;   // tile 5: 0.25/448 -> 2^-10 -> 117; 256 (0x78)
  for (int d = 384; d < 448; ++d) k[d] = 2.f;     // tile 6: 1024/448 -> 4 -> 129; 2/4 -> 0.5 (0x30)
  k[384] = 1024.f;
  for (int j = 0; j < 64; ++j) k[448 + j] = float(j + 1) * 0.125f;  // RoPE dims, copied
  return k;
}

TEST(KvQuantInsertRef, HandWorkedToken) {
  TensorMap m;
  m["k"] = bf16Of({2, 512}, [] {
    std::vector<float> two = handToken();
    for (int d = 0; d < 512; ++d) two.push_back(1.f);  // the second token is skipped
    return two;
  }());
  m["slot_mapping"] = i64Tensor({2}, {3, -1});  // page 1, offset 1
  m["k_cache"] = HostTensor(DType::U8, {2, kBs2PageBytes});
  std::fill(m["k_cache"].bytes.begin(), m["k_cache"].bytes.end(), kPoison);
  OpAttrs a;
  a.setInt("block_size", 2);
  ASSERT_EQ(runError("kv_quant_insert", a, m), "");

  const uint8_t* page = m["k_cache"].ptr<uint8_t>() + kBs2PageBytes;
  const uint8_t* data = page + 576;  // token offset 1
  const uint8_t* scales = page + 2 * 576 + 8;
  const uint8_t wantScales[8] = {120, 105, 112, 127, 127, 117, 129, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(scales[i], wantScales[i]) << "scale byte " << i;
  EXPECT_EQ(data[0], 0x7E);    // 3.5 * 2^7 = 448
  EXPECT_EQ(data[1], 0xE8);    // -0.5 * 2^7 = -64
  EXPECT_EQ(data[2], 0x70);    // 128
  EXPECT_EQ(data[64], 0x60);   // 2^-17 / 2^-22 = 32
  EXPECT_EQ(data[128], 0x78);  // 2^-7 / 2^-15 = 256
  EXPECT_EQ(data[192], 0x7E);
  EXPECT_EQ(data[193], 0x38);
  EXPECT_EQ(data[194], 0x3A);
  EXPECT_EQ(data[195], 0x58);
  EXPECT_EQ(data[196], 0x02);
  EXPECT_EQ(data[197], 0x30);  // 0.5
  EXPECT_EQ(data[256], 0xF9);
  EXPECT_EQ(data[320], 0x78);
  EXPECT_EQ(data[384], 0x78);  // 1024 / 4
  EXPECT_EQ(data[385], 0x30);
  for (int j = 0; j < 64; ++j) {
    const uint16_t bits = floatToBf16(float(j + 1) * 0.125f);
    EXPECT_EQ(data[448 + 2 * j], bits & 0xFF) << "rope dim " << j;
    EXPECT_EQ(data[449 + 2 * j], bits >> 8) << "rope dim " << j;
  }
  // Every byte outside the token's 576 data and 8 scale bytes keeps its poison.
  const HostTensor& c = m["k_cache"];
  int64_t touched = 0;
  for (int64_t i = 0; i < int64_t(c.bytes.size()); ++i) {
    const bool inToken = (i >= kBs2PageBytes + 576 && i < kBs2PageBytes + 1152) ||
                         (i >= kBs2PageBytes + 1160 && i < kBs2PageBytes + 1168);
    if (!inToken) {
      EXPECT_EQ(c.bytes[size_t(i)], kPoison) << "byte " << i;
    }
    touched += inToken;
  }
  EXPECT_EQ(touched, 584);
}

TEST(KvQuantInsertRef, PageBytesForBlockSizes) {
  for (auto [bs, pageBytes] : {std::pair<int64_t, int64_t>{2, 1728}, {64, 37440}, {256, 149760}}) {
    TensorMap m;
    Rng rng{uint64_t(bs)};
    m["k"] = bf16Normal(rng, {1, 512});
    m["slot_mapping"] = i64Tensor({1}, {bs - 1});  // the page's last slot
    m["k_cache"] = HostTensor(DType::U8, {1, pageBytes});
    std::fill(m["k_cache"].bytes.begin(), m["k_cache"].bytes.end(), kPoison);
    OpAttrs a;
    a.setInt("block_size", bs);
    EXPECT_EQ(runError("kv_quant_insert", a, m), "") << "block size " << bs;
    // The last slot's scale pad byte is the last scale byte before the zero padding.
    EXPECT_EQ(m["k_cache"].bytes[size_t(bs * 576 + bs * 8 - 1)], 0);
    m["k_cache"] = HostTensor(DType::U8, {1, pageBytes + 576});
    EXPECT_NE(runError("kv_quant_insert", a, m)
                  .find(fmt::format("expected [P, page_bytes(block_size={})={}]", bs, pageBytes)),
              std::string::npos);
  }
}

TEST(KvQuantInsertRef, RejectsBadSlotsWithoutWriting) {
  Rng rng(7);
  OpAttrs a;
  a.setInt("block_size", 2);
  auto run = [&](std::vector<int64_t> slots) {
    TensorMap m;
    m["k"] = bf16Normal(rng, {int64_t(slots.size()), 512});
    m["slot_mapping"] = i64Tensor({int64_t(slots.size())}, slots);
    m["k_cache"] = HostTensor(DType::U8, {2, kBs2PageBytes});
    std::fill(m["k_cache"].bytes.begin(), m["k_cache"].bytes.end(), kPoison);
    const std::string err = runError("kv_quant_insert", a, m);
    for (uint8_t b : m["k_cache"].bytes)
      if (b != kPoison) return std::string("the cache was written despite: ") + err;
    return err;
  };
  EXPECT_EQ(run({0, 4}), "kv_quant_insert: slot_mapping[1] = 4 is outside [-1, P*block_size = 4)");
  EXPECT_EQ(run({-2}), "kv_quant_insert: slot_mapping[0] = -2 is outside [-1, P*block_size = 4)");
  EXPECT_EQ(run({1, 2, 1}), "kv_quant_insert: slot_mapping[2] = 1 repeats slot_mapping[0]");
}

}  // namespace
}  // namespace deepinfer::testing
