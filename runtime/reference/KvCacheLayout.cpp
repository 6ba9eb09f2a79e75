#include "reference/KvCacheLayout.h"

#include <cmath>
#include <vector>

#include "deepinfer/Formats.h"

namespace deepinfer::ref {

void quantizeKvToken(const uint16_t* k, uint8_t* page, int64_t blockSize, int64_t offset) {
  uint8_t* data = page + offset * kTokenDataBytes;
  uint8_t* scales = page + blockSize * kTokenDataBytes + offset * kTokenScaleBytes;
  for (int64_t tile = 0; tile < kScaleTiles; ++tile) {
    const uint16_t* x = k + tile * kScaleTileDims;
    // fmax skips NaN, as the GPU's fmaxf does; a NaN element itself encodes as 0x7F below.
    float amax = 0.f;
    for (int64_t d = 0; d < kScaleTileDims; ++d) amax = std::fmax(amax, std::fabs(bf16ToFloat(x[d])));
    // The floor is on amax (vLLM's writer), not on amax / 448 (FlashMLA's test quantizer).
    amax = std::fmax(amax, 1e-4f);
    const uint8_t e = ue8m0CeilEncode(amax / 448.f);
    const float scale = ue8m0ToFloat(e);
    for (int64_t d = 0; d < kScaleTileDims; ++d) {
      float v = bf16ToFloat(x[d]) / scale;
      if (v > 448.f) v = 448.f;
      if (v < -448.f) v = -448.f;
      data[tile * kScaleTileDims + d] = e4m3Code(v);
    }
    scales[tile] = e;
  }
  scales[kScaleTiles] = 0;
  // RoPE dims as little-endian bf16, bit for bit.
  for (int64_t j = kNopeDims; j < kHeadDim; ++j) {
    const int64_t at = kNopeDims + 2 * (j - kNopeDims);
    data[at] = uint8_t(k[j] & 0xFF);
    data[at + 1] = uint8_t(k[j] >> 8);
  }
}

void dequantizeKvToken(const uint8_t* page, int64_t blockSize, int64_t offset, uint16_t* out) {
  const uint8_t* data = page + offset * kTokenDataBytes;
  const uint8_t* scales = page + blockSize * kTokenDataBytes + offset * kTokenScaleBytes;
  for (int64_t d = 0; d < kNopeDims; ++d) out[d] = dequantE4m3ToBf16(data[d], scales[d / kScaleTileDims]);
  for (int64_t j = kNopeDims; j < kHeadDim; ++j) {
    const int64_t at = kNopeDims + 2 * (j - kNopeDims);
    out[j] = uint16_t(data[at] | (uint16_t(data[at + 1]) << 8));
  }
}

}  // namespace deepinfer::ref
