#include "reference/QuantGemmRef.h"

#include <cmath>
#include <vector>

#include "deepinfer/Formats.h"

namespace deepinfer::ref {
namespace {

// Correctly rounded fp64 -> bf16 (nearest even): round to fp32 with round-to-odd first, which
// keeps what the second rounding needs.
uint16_t doubleToBf16(double d) {
  float f = float(d);
  if (std::isfinite(f) && double(f) != d) {
    if (std::fabs(double(f)) > std::fabs(d)) f = std::nextafter(f, 0.f);
    f = bitsToFloat(floatToBits(f) | 1u);
  }
  return floatToBf16(f);
}

// Every (code, scale byte) of both formats, decoded once: rows are scale bytes.
struct Tables {
  std::vector<uint16_t> e4m3, e2m1;  // [256][256], [256][16]
  Tables() : e4m3(256 * 256), e2m1(256 * 16) {
    for (int s = 0; s < 256; ++s) {
      for (int c = 0; c < 256; ++c) e4m3[size_t(s * 256 + c)] = dequantWeightBf16(e4m3ToFloat(uint8_t(c)), uint8_t(s));
      for (int c = 0; c < 16; ++c) e2m1[size_t(s * 16 + c)] = dequantWeightBf16(e2m1ToFloat(uint8_t(c)), uint8_t(s));
    }
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

double ue8m0Scale(uint8_t s) { return s == 0xFF ? std::nan("") : std::ldexp(1.0, int(s) - 127); }

uint16_t dequantWeightBf16(float code, uint8_t s) {
  const double v = double(code) * ue8m0Scale(s);  // exact: at most 4 significant bits
  return std::isnan(v) ? kBf16CanonicalNaN : doubleToBf16(v);
}

void QuantMatrix::row(int64_t r, float* out) const {
  const Tables& t = tables();
  const int64_t sc = scaleCols();
  if (bits == 8) {
    const uint8_t* c = codes + r * cols;
    const uint8_t* s = scales + (r / 32) * sc;
    for (int64_t k = 0; k < cols; ++k) out[k] = bf16ToFloat(t.e4m3[size_t(s[k / 32]) * 256 + c[k]]);
  } else {
    const uint8_t* c = codes + r * (cols / 2);
    const uint8_t* s = scales + r * sc;
    for (int64_t k = 0; k < cols; ++k) {
      const uint8_t nib = (k & 1) ? uint8_t(c[k / 2] >> 4) : uint8_t(c[k / 2] & 0xF);
      out[k] = bf16ToFloat(t.e2m1[size_t(s[k / 32]) * 16 + nib]);
    }
  }
}

double accumulationTolerance(int64_t K) { return double((K + 15) / 16 + 64) * std::ldexp(1.0, -23); }

}  // namespace deepinfer::ref
