// The checkpoint weight formats: hand-checked dequantized values (every e2m1 code, e4m3 zeros,
// subnormals, normals, the largest finite and both NaN codes, scale bytes at and past the edges
// of the exact range), and the device decoders' integer logic (templates/common/QuantWeights.cuh,
// compiled here as host code) against the reference for every code and every scale byte.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "common/QuantWeights.cuh"
#include "deepinfer/Formats.h"
#include "reference/QuantEpilogueRef.h"
#include "reference/QuantGemmRef.h"

namespace deepinfer::ref {
namespace {

uint16_t e2m1(uint8_t code, uint8_t s) { return dequantWeightBf16(e2m1ToFloat(code), s); }
uint16_t e4m3(uint8_t code, uint8_t s) { return dequantWeightBf16(e4m3ToFloat(code), s); }

TEST(QuantWeights, EveryE2m1CodeAtUnitScale) {
  const uint16_t want[16] = {0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0,
                             0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0};
  for (int c = 0; c < 16; ++c) EXPECT_EQ(e2m1(uint8_t(c), 127), want[c]) << "code " << c;
}

TEST(QuantWeights, E2m1ScaleEdges) {
  EXPECT_EQ(e2m1(1, 0), 0x0020);    // 0.5 * 2^-127 = 2^-128: a bf16 subnormal, exact (byte 0 is 2^-127)
  EXPECT_EQ(e2m1(7, 0), 0x0140);    // 6 * 2^-127 = 1.5 * 2^-125
  EXPECT_EQ(e2m1(7, 252), 0x7F40);  // 6 * 2^125 = 1.5 * 2^127: the largest exact
  EXPECT_EQ(e2m1(5, 253), 0x7F40);  // 3 * 2^126
  EXPECT_EQ(e2m1(7, 253), 0x7F80);  // 6 * 2^126 overflows bf16: inf
  EXPECT_EQ(e2m1(15, 253), 0xFF80);
  EXPECT_EQ(e2m1(0, 255), kBf16CanonicalNaN);  // 0xFF is NaN, even for a zero code
  EXPECT_EQ(e2m1(8, 128), 0x8000);             // -0 stays -0
}

TEST(QuantWeights, E4m3CodesAtUnitScale) {
  EXPECT_EQ(e4m3(0x00, 127), 0x0000);
  EXPECT_EQ(e4m3(0x80, 127), 0x8000);
  EXPECT_EQ(e4m3(0x01, 127), 0x3B00);  // the smallest subnormal, 2^-9
  EXPECT_EQ(e4m3(0x07, 127), 0x3C60);  // 7 * 2^-9 = 1.75 * 2^-7
  EXPECT_EQ(e4m3(0x08, 127), 0x3C80);  // the smallest normal, 2^-6
  EXPECT_EQ(e4m3(0x38, 127), 0x3F80);  // 1
  EXPECT_EQ(e4m3(0x7E, 127), 0x43E0);  // 448, the largest finite
  EXPECT_EQ(e4m3(0xFE, 127), 0xC3E0);
  EXPECT_EQ(e4m3(0x7F, 127), kBf16CanonicalNaN);
  EXPECT_EQ(e4m3(0xFF, 127), kBf16CanonicalNaN);
}

TEST(QuantWeights, E4m3ScaleEdges) {
  EXPECT_EQ(e4m3(0x01, 3), 0x0001);    // 2^-9 * 2^-124 = 2^-133, the smallest bf16 subnormal (exact range starts at 3)
  EXPECT_EQ(e4m3(0x01, 2), 0x0000);    // 2^-134: a tie, rounds to the even 0
  EXPECT_EQ(e4m3(0x03, 2), 0x0002);    // 1.5 * 2^-133: a tie, rounds to the even 2 * 2^-133
  EXPECT_EQ(e4m3(0x38, 0), 0x0040);    // 2^-127
  EXPECT_EQ(e4m3(0x7E, 246), 0x7F60);  // 448 * 2^119 = 1.75 * 2^127: the largest exact
  EXPECT_EQ(e4m3(0x7E, 247), 0x7F80);  // overflows: inf
  EXPECT_EQ(e4m3(0x38, 255), kBf16CanonicalNaN);
}

TEST(QuantWeights, ScaleByteZeroIsNotZero) {
  EXPECT_EQ(ue8m0Scale(0), std::ldexp(1.0, -127));
  EXPECT_EQ(ue8m0Scale(127), 1.0);
  EXPECT_TRUE(std::isnan(ue8m0Scale(255)));
}

// bf16 bits -> double, and the correctly rounded product of two bf16 values (what fma.rn.bf16x2
// with a -0 addend computes: no flush to zero).
double bf(uint32_t h) { return bf16ToFloat(uint16_t(h & 0xFFFF)); }
uint16_t mulBf16(uint16_t a, uint16_t b) {
  const double p = bf(a) * bf(b);  // exact: two 8-bit significands
  return std::isnan(p) ? kBf16CanonicalNaN : floatToBf16(float(bf16Of(p)));
}
uint16_t applyFactors(uint16_t placed, const di::qw::ScaleFactors& f) {
  uint16_t r = mulBf16(placed, uint16_t(f.first));
  if (f.two) r = mulBf16(r, uint16_t(f.second));
  return r;
}
bool sameBf16(uint16_t a, uint16_t b) {
  const bool nanA = (a & 0x7FFF) > 0x7F80, nanB = (b & 0x7FFF) > 0x7F80;
  return nanA || nanB ? nanA == nanB : a == b;
}

TEST(QuantWeights, DeviceE2m1DecodeMatchesTheReferenceForEveryCodeAndScaleByte) {
  int checked = 0;
  for (int s = 0; s < 256; ++s) {
    const di::qw::ScaleFactors f = di::qw::e2m1_scale_factors(uint32_t(s));
    for (int lo = 0; lo < 16; ++lo)
      for (int j = 0; j < 4; ++j) {
        const int hi = 15 - lo;  // a different code in the pair's high half
        const uint32_t mask = (0xFu << (4 * j)) | (0xFu << (4 * (j + 4)));
        const uint32_t w = (uint32_t(lo) << (4 * j)) | (uint32_t(hi) << (4 * (j + 4))) | (0xD5A3C96Bu & ~mask);
        const uint32_t pair = di::qw::e2m1_pair_biased(w, j);
        const uint16_t gotLo = applyFactors(uint16_t(pair & 0xFFFF), f), gotHi = applyFactors(uint16_t(pair >> 16), f);
        ASSERT_TRUE(sameBf16(gotLo, e2m1(uint8_t(lo), uint8_t(s)))) << "code " << lo << " scale " << s << " nibble " << j;
        ASSERT_TRUE(sameBf16(gotHi, e2m1(uint8_t(hi), uint8_t(s)))) << "code " << hi << " scale " << s << " nibble " << j + 4;
        checked += 2;
      }
  }
  EXPECT_EQ(checked, 256 * 16 * 4 * 2);
}

// The other nibbles of the word must not leak into a pair.
TEST(QuantWeights, DeviceE2m1PairsIgnoreTheOtherNibbles) {
  for (int j = 0; j < 4; ++j) {
    const uint32_t mask = (0xFu << (4 * j)) | (0xFu << (4 * (j + 4)));
    EXPECT_EQ(di::qw::e2m1_pair_biased(0x9ABCDEF1u & mask, j), di::qw::e2m1_pair_biased(0x9ABCDEF1u, j)) << j;
  }
}

TEST(QuantWeights, DeviceE4m3DecodeMatchesTheReferenceForEveryCodeAndScaleByte) {
  for (int s = 0; s < 256; ++s) {
    const di::qw::ScaleFactors f = di::qw::e4m3_scale_factors(uint32_t(s));
    for (int c = 0; c < 256; ++c) {
      const uint32_t other = uint32_t(255 - c);
      const uint32_t w = uint32_t(c) | (other << 8) | (0x38u << 16) | (other << 24);  // [c, o, 1.0, o]
      // Bytes 0 and 2 through the shifted word, 1 and 3 directly (QuantWeights.cuh e4m3_fragments).
      const uint32_t even = di::qw::e4m3_pair_biased(w << 8), odd = di::qw::e4m3_pair_biased(w);
      uint16_t got = applyFactors(uint16_t(even & 0xFFFF), f);
      const uint16_t gotOther = applyFactors(uint16_t(odd & 0xFFFF), f);
      const bool nanCode = (di::qw::e4m3_nan_probe(w) & 0x80u) != 0;
      if (nanCode) got = kBf16CanonicalNaN;  // the decoder's patch for a NaN code
      ASSERT_TRUE(sameBf16(got, e4m3(uint8_t(c), uint8_t(s)))) << "code " << c << " scale " << s;
      const bool otherNan = (di::qw::e4m3_nan_probe(w) & 0x8000u) != 0;
      ASSERT_TRUE(sameBf16(otherNan ? kBf16CanonicalNaN : gotOther, e4m3(uint8_t(other), uint8_t(s))))
          << "code " << other << " scale " << s;
      ASSERT_TRUE(sameBf16(applyFactors(uint16_t(even >> 16), f), e4m3(0x38, uint8_t(s)))) << "scale " << s;
    }
  }
}

TEST(QuantWeights, E4m3NanProbeFlagsExactlyTheNanCodes) {
  for (int c = 0; c < 256; ++c) {
    const uint32_t probe = di::qw::e4m3_nan_probe(uint32_t(c) * 0x01010101u);
    EXPECT_EQ(probe != 0, (c & 0x7F) == 0x7F) << c;
  }
}

// Both formats' fragment orders place each of a thread's 8 columns in exactly one k slot.
TEST(QuantWeights, FragmentOrdersArePermutations) {
  for (bool fp4 : {true, false}) {
    std::set<int> cols;
    for (int ks = 0; ks < 2; ++ks)
      for (int r = 0; r < 2; ++r) {
        cols.insert(di::qw::frag_low_column(fp4, ks, r));
        cols.insert(di::qw::frag_high_column(fp4, ks, r));
      }
    EXPECT_EQ(cols, (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7})) << (fp4 ? "e2m1" : "e4m3");
  }
}

}  // namespace
}  // namespace deepinfer::ref
