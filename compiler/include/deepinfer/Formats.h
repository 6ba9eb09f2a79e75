// Host-side number formats of docs/ops.md §1, shared by the references, the model code and
// tests. The device side is templates/common/Numerics.cuh; both follow the same contract.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "deepinfer/Tensor.h"

namespace deepinfer {

// The canonical NaN every dequantizer writes (bf16 bits), whatever the sign of the input.
constexpr uint16_t kBf16CanonicalNaN = 0x7FC0;

inline float bitsToFloat(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t floatToBits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

// UE8M0: fp32 bits e << 23 (e = 0 gives +0); 0xFF is NaN.
inline float ue8m0ToFloat(uint8_t e) {
  return e == 0xFF ? std::nanf("") : bitsToFloat(uint32_t(e) << 23);
}
// Smallest power of two >= s (s > 0), as a UE8M0 byte clamped to [1, 254].
inline uint8_t ue8m0CeilEncode(float s) {
  const uint32_t b = floatToBits(s);
  int e = int((b >> 23) & 0xFF) + ((b & 0x7FFFFF) ? 1 : 0);
  if (e < 1) e = 1;
  if (e > 254) e = 254;
  return uint8_t(e);
}

// e4m3fn: exact decode; 0x7F/0xFF are NaN.
inline float e4m3ToFloat(uint8_t c) {
  const int s = c >> 7, e = (c >> 3) & 0xF, m = c & 7;
  if (e == 15 && m == 7) return std::nanf("");
  const float mag = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(1.f + m / 8.f, e - 7);
  return s ? -mag : mag;
}
// Round to nearest even, saturate at +-448; NaN -> 0x7F.
inline uint8_t floatToE4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::fabs(x);
  if (a >= 448.f) return sign | 0x7E;
  // Search the 127 non-negative finite codes for the nearest (ties to even code).
  uint8_t best = 0;
  float bestErr = INFINITY;
  for (int c = 0; c <= 0x7E; ++c) {
    const float err = std::fabs(e4m3ToFloat(uint8_t(c)) - a);
    if (err < bestErr || (err == bestErr && (c & 1) == 0)) { bestErr = err; best = uint8_t(c); }
  }
  return sign | best;
}

// floatToE4m3 of `v`, through a table built once from floatToE4m3 for values that are exactly
// bf16 (every value the writers encode: a bf16 divided by a power of two), because floatToE4m3
// scans all 127 codes and the writers call it per element.
inline uint8_t e4m3Code(float v) {
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> t(65536);
    for (uint32_t b = 0; b < 65536; ++b) t[b] = floatToE4m3(bf16ToFloat(uint16_t(b)));
    return t;
  }();
  const uint16_t b = floatToBf16(v);
  return bf16ToFloat(b) == v ? table[b] : floatToE4m3(v);  // NaN and non-bf16 values: the scan
}

// e4m3 code times a UE8M0 scale, rounded once to bf16; any NaN gives kBf16CanonicalNaN.
inline uint16_t dequantE4m3ToBf16(uint8_t code, uint8_t scaleByte) {
  const float v = e4m3ToFloat(code) * ue8m0ToFloat(scaleByte);
  return std::isnan(v) ? kBf16CanonicalNaN : floatToBf16(v);
}

// fp4 e2m1 (magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6}, bit 3 = sign).
inline float e2m1ToFloat(uint8_t nibble) {
  static const float kMag[8] = {0.f, .5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  const float m = kMag[nibble & 7];
  return (nibble & 8) ? -m : m;
}

}  // namespace deepinfer
