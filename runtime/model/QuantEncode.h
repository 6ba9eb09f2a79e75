// Fast encoders for writing quantized checkpoints: e4m3 / e2m1 codes and UE8M0-scaled
// quantization of fp32 weights in the checkpoint layouts (docs/model.md §3). Decoding is
// deepinfer/Formats.h; these encoders agree with its floatToE4m3 bit for bit but avoid its
// per-value code search (a proxy checkpoint has tens of billions of values).
#pragma once
#include <cstdint>

namespace deepinfer {

// e4m3fn, round to nearest even, saturating at +-448; NaN -> 0x7F; -0 -> 0x80.
uint8_t encodeE4m3(float x);
// e2m1 nibble (bit 3 = sign), round to nearest even code, saturating at +-6.
uint8_t encodeE2m1(float x);

// w[rows, cols] -> codes[rows, cols] e4m3 + scales[ceil(rows/32), ceil(cols/32)], one UE8M0
// scale per 32x32 block: the smallest power of two >= amax / 448, within the bytes the loaders
// accept (exactScaleBytes, Checkpoint.h); an all-zero block gets scale byte 127 (1.0).
void quantizeFp8Blocks(const float* w, int64_t rows, int64_t cols, uint8_t* codes, uint8_t* scales);
// As above with one scale per row and 32 columns: scales[rows, ceil(cols/32)].
void quantizeFp8Rows(const float* w, int64_t rows, int64_t cols, uint8_t* codes, uint8_t* scales);
// w[rows, cols] (cols % 32 == 0) -> packed[rows, cols/2] (low nibble = even column) +
// scales[rows, cols/32]: the smallest power of two >= amax / 6 (same range rule).
void quantizeFp4Rows(const float* w, int64_t rows, int64_t cols, uint8_t* packed, uint8_t* scales);

}  // namespace deepinfer
