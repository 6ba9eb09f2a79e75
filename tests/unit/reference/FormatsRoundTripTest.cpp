// The host number formats every reference decodes with (Formats.h, docs/ops.md §1): UE8M0 and
// e4m3 round trips over all 256 codes, hand values, rounding ties and the dequantizer's NaN rule.
#include <gtest/gtest.h>

#include <cmath>

#include "deepinfer/Formats.h"

namespace deepinfer {
namespace {

TEST(Ue8m0, AllCodesDecodeToPowersOfTwoAndEncodeBack) {
  for (int e = 1; e <= 254; ++e) {
    const float v = ue8m0ToFloat(uint8_t(e));
    EXPECT_EQ(v, std::ldexp(1.f, e - 127)) << "code " << e;
    EXPECT_EQ(ue8m0CeilEncode(v), e) << "an exact power of two must not round up, code " << e;
    if (e < 254) {
      EXPECT_EQ(ue8m0CeilEncode(std::nextafter(v, INFINITY)), e + 1) << "code " << e;
    }
    if (e > 1) {
      EXPECT_EQ(ue8m0CeilEncode(std::nextafter(v, 0.f)), e) << "code " << e;
    }
  }
  EXPECT_EQ(floatToBits(ue8m0ToFloat(0)), 0u);  // +0, not a tiny power of two
  EXPECT_TRUE(std::isnan(ue8m0ToFloat(0xFF)));
  EXPECT_EQ(ue8m0CeilEncode(1e-45f), 1);  // clamped to [1, 254]
  EXPECT_EQ(ue8m0CeilEncode(3e38f), 254);
  EXPECT_EQ(ue8m0CeilEncode(0.75f), 127);          // 0.75 -> 1.0
  EXPECT_EQ(ue8m0CeilEncode(1e-4f / 448.f), 105);  // 2.23e-7 -> 2^-22
}

TEST(E4m3, AllCodesRoundTrip) {
  for (int c = 0; c < 256; ++c) {
    const float v = e4m3ToFloat(uint8_t(c));
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v)) << "code " << c;
      continue;
    }
    EXPECT_EQ(floatToE4m3(v), c) << "code " << c << " value " << v;
    EXPECT_EQ(std::signbit(v), c >= 0x80) << "code " << c;
  }
  EXPECT_EQ(floatToE4m3(NAN), 0x7F);
}

TEST(E4m3, HandValuesAndOrder) {
  EXPECT_EQ(e4m3ToFloat(0x38), 1.f);
  EXPECT_EQ(e4m3ToFloat(0xB8), -1.f);
  EXPECT_EQ(e4m3ToFloat(0x7E), 448.f);
  EXPECT_EQ(e4m3ToFloat(0x01), std::ldexp(1.f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3ToFloat(0x07), 7 * std::ldexp(1.f, -9));
  EXPECT_EQ(e4m3ToFloat(0x08), std::ldexp(1.f, -6));  // smallest normal
  EXPECT_EQ(e4m3ToFloat(0x79), 288.f);
  for (int c = 0; c < 0x7E; ++c) EXPECT_LT(e4m3ToFloat(uint8_t(c)), e4m3ToFloat(uint8_t(c + 1))) << c;
}

TEST(E4m3, TiesRoundToEvenAndLargeValuesSaturate) {
  for (int c = 0; c < 0x7E; ++c) {
    const float mid = 0.5f * (e4m3ToFloat(uint8_t(c)) + e4m3ToFloat(uint8_t(c + 1)));
    const int even = (c & 1) ? c + 1 : c;
    EXPECT_EQ(floatToE4m3(mid), even) << "midpoint above code " << c;
    EXPECT_EQ(floatToE4m3(-mid), 0x80 | even) << "midpoint below code " << (0x80 | c);
  }
  EXPECT_EQ(floatToE4m3(1.0625f), 0x38);  // 1 + 1/16 -> 1.0 (mantissa 0)
  EXPECT_EQ(floatToE4m3(300.f), 0x79);    // 288 is nearer than 320
  EXPECT_EQ(floatToE4m3(464.f), 0x7E);
  EXPECT_EQ(floatToE4m3(1e9f), 0x7E);
  EXPECT_EQ(floatToE4m3(-1e9f), 0xFE);
}

TEST(Dequant, ExactProductsCanonicalNaNAndZeroScale) {
  for (int c = 0; c < 256; ++c) {
    const bool nanCode = (c & 0x7F) == 0x7F;
    for (int e = 100; e <= 150; ++e) {
      const uint16_t b = dequantE4m3ToBf16(uint8_t(c), uint8_t(e));
      if (nanCode) {
        EXPECT_EQ(b, kBf16CanonicalNaN) << "code " << c;
      } else {  // e4m3 times a power of two is exact in bf16
        EXPECT_EQ(bf16ToFloat(b), std::ldexp(e4m3ToFloat(uint8_t(c)), e - 127))
            << "code " << c << " scale " << e;
      }
    }
    EXPECT_EQ(dequantE4m3ToBf16(uint8_t(c), 0xFF), kBf16CanonicalNaN) << "code " << c;
    if (!nanCode) {
      // Scale byte 0 is +0: the product is a zero carrying the code's sign.
      EXPECT_EQ(dequantE4m3ToBf16(uint8_t(c), 0), (c & 0x80) ? 0x8000 : 0x0000) << "code " << c;
    }
  }
}

}  // namespace
}  // namespace deepinfer
