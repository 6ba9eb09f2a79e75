// make-model's encoders: bit-exact agreement with the reference e4m3 encoder, e2m1 nearest-even
// rounding, and the block / row quantizers' scale choice and layout.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "deepinfer/Formats.h"
#include "model/QuantEncode.h"

using namespace deepinfer;

TEST(QuantEncode, E4m3MatchesReferenceEncoderEverywhere) {
  int64_t checked = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const float x = bf16ToFloat(uint16_t(b));
    for (float m : {1.f, 1.00048828125f, 0.999755859375f, 1.0625f}) {
      const float y = x * m;
      ASSERT_EQ(encodeE4m3(y), floatToE4m3(y)) << y;
      ++checked;
    }
  }
  // Exact midpoints between neighbouring codes: ties go to the even code.
  for (int c = 0; c < 0x7E; ++c) {
    const float mid = (e4m3ToFloat(uint8_t(c)) + e4m3ToFloat(uint8_t(c + 1))) / 2;
    ASSERT_EQ(encodeE4m3(mid), floatToE4m3(mid)) << mid;
    ASSERT_EQ(encodeE4m3(mid) & 1, 0) << mid;
    ASSERT_EQ(encodeE4m3(-mid), 0x80 | encodeE4m3(mid));
  }
  EXPECT_GT(checked, 200000);
  EXPECT_EQ(encodeE4m3(1000.f), 0x7E);
  EXPECT_EQ(encodeE4m3(-INFINITY), 0xFE);
  EXPECT_EQ(encodeE4m3(NAN), 0x7F);
  EXPECT_EQ(encodeE4m3(-0.f), 0x80);
  EXPECT_EQ(encodeE4m3(std::ldexp(1.f, -10)), 0x00);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(encodeE4m3(std::ldexp(3.f, -10)), 0x02);  // 1.5 subnormal steps: tie to even (2)
}

TEST(QuantEncode, E2m1NearestEven) {
  for (int c = 0; c < 16; ++c) EXPECT_EQ(encodeE2m1(e2m1ToFloat(uint8_t(c))), c == 8 ? 8 : c) << c;
  // Midpoints: 0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2.0, 2.5 -> 2.0, 3.5 -> 4.0, 5 -> 4.0.
  const float mids[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f};
  const uint8_t want[7] = {0, 2, 2, 4, 4, 6, 6};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(encodeE2m1(mids[i]), want[i]) << mids[i];
    EXPECT_EQ(encodeE2m1(-mids[i]), 8 | want[i]) << mids[i];
  }
  EXPECT_EQ(encodeE2m1(0.26f), 1);
  EXPECT_EQ(encodeE2m1(5.01f), 7);
  EXPECT_EQ(encodeE2m1(100.f), 7);
  EXPECT_EQ(encodeE2m1(-100.f), 15);
}

TEST(QuantEncode, Fp8BlocksPickTheSmallestCoveringScale) {
  const int64_t rows = 70, cols = 45;  // ragged last blocks
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> w(size_t(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = nd(rng) * std::ldexp(1.f, int(i % 7) - 3);
  std::vector<uint8_t> codes(w.size(), 0x7F), scales(3 * 2, 0);
  quantizeFp8Blocks(w.data(), rows, cols, codes.data(), scales.data());
  for (int64_t br = 0; br < 3; ++br)
    for (int64_t bc = 0; bc < 2; ++bc) {
      float amax = 0;
      for (int64_t r = br * 32; r < std::min(rows, br * 32 + 32); ++r)
        for (int64_t c = bc * 32; c < std::min(cols, bc * 32 + 32); ++c)
          amax = std::max(amax, std::fabs(w[size_t(r * cols + c)]));
      const float s = ue8m0ToFloat(scales[size_t(br * 2 + bc)]);
      EXPECT_GE(s * 448.f, amax);
      EXPECT_LT(s * 224.f, amax);  // a smaller power of two would not cover amax
    }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t code = codes[size_t(r * cols + c)];
      ASSERT_NE(code & 0x7F, 0x7F);
      const float s = ue8m0ToFloat(scales[size_t((r / 32) * 2 + c / 32)]);
      ASSERT_EQ(code, floatToE4m3(w[size_t(r * cols + c)] / s));
    }
}

TEST(QuantEncode, Fp8RowsAndFp4Rows) {
  const int64_t rows = 5, cols = 96;
  std::mt19937 rng(12);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> w(size_t(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = nd(rng) * float(1 + i % 5);
  std::vector<uint8_t> codes(w.size(), 0xFF), scales(size_t(rows * 3), 0);
  quantizeFp8Rows(w.data(), rows, cols, codes.data(), scales.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float s = ue8m0ToFloat(scales[size_t(r * 3 + c / 32)]);
      ASSERT_EQ(codes[size_t(r * cols + c)], floatToE4m3(w[size_t(r * cols + c)] / s));
    }

  std::vector<uint8_t> packed(size_t(rows * cols / 2), 0xFF), s4(size_t(rows * 3), 0);
  quantizeFp4Rows(w.data(), rows, cols, packed.data(), s4.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float s = ue8m0ToFloat(s4[size_t(r * 3 + c / 32)]);
      const float x = w[size_t(r * cols + c)];
      const uint8_t byte = packed[size_t(r * cols / 2 + c / 2)];
      const uint8_t nib = (c % 2 == 0) ? (byte & 0xF) : (byte >> 4);
      // Nearest representable value at this scale (brute force over the 16 codes).
      float best = INFINITY;
      for (int k = 0; k < 16; ++k) best = std::min(best, std::fabs(e2m1ToFloat(uint8_t(k)) * s - x));
      ASSERT_EQ(std::fabs(e2m1ToFloat(nib) * s - x), best) << r << "," << c;
      ASSERT_LE(std::fabs(x), 6.f * s);
    }
}

// Zero blocks and tiny or huge ones still get scale bytes the loaders accept (Checkpoint's
// exactScaleBytes): 127 for all-zero, else clamped to fp8 3..246 / fp4 0..252.
TEST(QuantEncode, ScaleBytesStayInTheLoadersRange) {
  const int64_t rows = 64, cols = 64;
  std::vector<float> w(size_t(rows * cols), 0.f);
  for (int64_t c = 0; c < 32; ++c) w[size_t(32 * cols + c)] = 1e-40f;  // block [1, 0]: subnormal amax
  for (int64_t c = 32; c < 64; ++c) w[size_t(32 * cols + c)] = 3e38f;  // block [1, 1]: near FLT_MAX
  std::vector<uint8_t> codes(w.size()), scales(4);
  quantizeFp8Blocks(w.data(), rows, cols, codes.data(), scales.data());
  EXPECT_EQ(scales[0], 127);  // all zero
  EXPECT_EQ(scales[1], 127);
  EXPECT_EQ(scales[2], 3);    // would be 1: clamped up
  EXPECT_EQ(scales[3], 246);  // would be 254: clamped down (the codes saturate at 448)
  for (uint8_t c : codes) EXPECT_NE(c & 0x7F, 0x7F);
  std::vector<uint8_t> packed(size_t(rows * cols / 2)), s4(size_t(rows * 2));
  quantizeFp4Rows(w.data(), rows, cols, packed.data(), s4.data());
  EXPECT_EQ(s4[0], 127);
  EXPECT_EQ(s4[size_t(32 * 2)], 1);        // fp4 takes bytes down to 0; ue8m0CeilEncode gives >= 1
  EXPECT_EQ(s4[size_t(32 * 2 + 1)], 252);  // clamped down
}
