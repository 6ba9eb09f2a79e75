// Quantized weights for the cases of weight_gemm and moe_experts: N(0, sigma) values quantized
// the way checkpoints are (model/QuantEncode.h: the smallest UE8M0 power of two >= amax / max
// code per block), and the edits that put the rare bytes a kernel must still get right into
// them (e4m3 subnormal and NaN codes, scale bytes at and past the edges of the exact range).
#pragma once
#include <cstdint>
#include <vector>

#include "cases/CaseUtil.h"

namespace deepinfer::testing {

struct QuantTensor {
  HostTensor codes;   // U8: e4m3 [rows, cols] or e2m1 [rows, cols/2]
  HostTensor scales;  // U8: [ceil(rows/32), ceil(cols/32)] or [rows, cols/32]
};

// bits 8: e4m3 with 32x32-block scales; bits 4: e2m1 with 1x32 scales (cols % 32 == 0).
QuantTensor quantWeights(Rng& rng, int bits, int64_t rows, int64_t cols, double sigma);

// Sets `count` random e4m3 codes to subnormal codes (0x01..0x07, either sign).
void injectE4m3Subnormals(Rng& rng, QuantTensor& q, int64_t count);
// Sets one random e4m3 code of each of `rows` to a NaN code (0x7F or 0xFF).
void injectE4m3Nans(Rng& rng, QuantTensor& q, const std::vector<int64_t>& rows);
// Overwrites scale bytes with `values`, each at a random position.
void injectScaleBytes(Rng& rng, QuantTensor& q, const std::vector<uint8_t>& values);

}  // namespace deepinfer::testing
