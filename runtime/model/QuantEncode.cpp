// Encoders behind make-model's quantized tensors.
#include "QuantEncode.h"

#include <algorithm>
#include <cmath>

#include "Checkpoint.h"
#include "deepinfer/Formats.h"

namespace deepinfer {

uint8_t encodeE4m3(float x) {
  uint32_t b = floatToBits(x);
  const uint8_t sign = uint8_t((b >> 24) & 0x80);
  b &= 0x7FFFFFFFu;
  if (b > 0x7F800000u) return 0x7F;              // NaN
  if (b >= 0x43E00000u) return sign | 0x7E;      // >= 448 (and inf): saturate
  if (b < 0x3C800000u) {                         // below 2^-6: subnormal step 2^-9
    // A result of 8 is the smallest normal (code 0x08): the carry is the right code.
    return sign | uint8_t(std::nearbyint(bitsToFloat(b) * 512.f));
  }
  // Round the fp32 mantissa to 3 bits, nearest even; a carry moves into the exponent.
  const uint32_t r = b + 0x7FFFFu + ((b >> 20) & 1u);
  const int code = ((int(r >> 23) - 127 + 7) << 3) | int((r >> 20) & 7u);
  return sign | uint8_t(std::min(code, 0x7E));
}

uint8_t encodeE2m1(float x) {
  const uint8_t sign = std::signbit(x) ? 8 : 0;
  const float a = std::fabs(x);
  // Count the midpoints between {0, .5, 1, 1.5, 2, 3, 4, 6} that `a` passes; at a midpoint the
  // even code wins (strict > where the lower neighbour is even, >= where the upper one is).
  const int c = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.f);
  return sign | uint8_t(c);
}

namespace {

// The smallest power of two >= amax / maxCode, kept inside the bytes the loaders accept (an
// all-zero block gets 1.0: any scale encodes its zeros, but byte 1 would be refused).
uint8_t scaleFor(float amax, float maxCode, WeightFormat f) {
  const ScaleByteRange r = exactScaleBytes(f);
  if (amax == 0.f) return 127;
  return uint8_t(std::clamp(int(ue8m0CeilEncode(amax / maxCode)), r.lo, r.hi));
}

// 1 / 2^(e-127), exact: the quotient w / scale is then a multiply by a power of two.
float inverseScale(uint8_t e) { return bitsToFloat(uint32_t(254 - e) << 23); }

}  // namespace

void quantizeFp8Blocks(const float* w, int64_t rows, int64_t cols, uint8_t* codes, uint8_t* scales) {
  const int64_t sc = (cols + 31) / 32;
  for (int64_t br = 0; br < rows; br += 32) {
    const int64_t re = std::min(rows, br + 32);
    for (int64_t bc = 0; bc < cols; bc += 32) {
      const int64_t ce = std::min(cols, bc + 32);
      float amax = 0;
      for (int64_t r = br; r < re; ++r)
        for (int64_t c = bc; c < ce; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      const uint8_t s = scaleFor(amax, 448.f, WeightFormat::Fp8Block);
      scales[(br / 32) * sc + bc / 32] = s;
      const float inv = inverseScale(s);
      for (int64_t r = br; r < re; ++r)
        for (int64_t c = bc; c < ce; ++c) codes[r * cols + c] = encodeE4m3(w[r * cols + c] * inv);
    }
  }
}

void quantizeFp8Rows(const float* w, int64_t rows, int64_t cols, uint8_t* codes, uint8_t* scales) {
  const int64_t sc = (cols + 31) / 32;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t bc = 0; bc < cols; bc += 32) {
      const int64_t ce = std::min(cols, bc + 32);
      float amax = 0;
      for (int64_t c = bc; c < ce; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      const uint8_t s = scaleFor(amax, 448.f, WeightFormat::Fp8Row);
      scales[r * sc + bc / 32] = s;
      const float inv = inverseScale(s);
      for (int64_t c = bc; c < ce; ++c) codes[r * cols + c] = encodeE4m3(w[r * cols + c] * inv);
    }
}

void quantizeFp4Rows(const float* w, int64_t rows, int64_t cols, uint8_t* packed, uint8_t* scales) {
  const int64_t sc = cols / 32;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t bc = 0; bc < cols; bc += 32) {
      float amax = 0;
      for (int64_t c = bc; c < bc + 32; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      const uint8_t s = scaleFor(amax, 6.f, WeightFormat::Fp4);
      scales[r * sc + bc / 32] = s;
      const float inv = inverseScale(s);
      for (int64_t c = bc; c < bc + 32; c += 2) {
        const uint8_t lo = encodeE2m1(w[r * cols + c] * inv), hi = encodeE2m1(w[r * cols + c + 1] * inv);
        packed[r * (cols / 2) + c / 2] = uint8_t(lo | (hi << 4));
      }
    }
}

}  // namespace deepinfer
