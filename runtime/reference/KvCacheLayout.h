// The 584-byte-per-token "fp8_ds_mla" page layout of docs/ops.md §2, shared by the writer,
// the gather and the decode references.
#pragma once
#include <cstdint>

#include "deepinfer/OpShapes.h"  // mlaPageBytes: the page size of a block size

namespace deepinfer::ref {

constexpr int64_t kHeadDim = 512;   // 448 NoPE + 64 RoPE
constexpr int64_t kNopeDims = 448;  // stored as e4m3 with a UE8M0 scale per 64
constexpr int64_t kScaleTileDims = 64;
constexpr int64_t kScaleTiles = 7;
constexpr int64_t kTokenDataBytes = 576;  // 448 e4m3 + 64 bf16
constexpr int64_t kTokenScaleBytes = 8;   // 7 scales + 1 zero pad byte

// Quantizes one token (512 bf16 bits) into slot `offset` of `page`. Writes exactly the
// token's 576 data bytes and 8 scale bytes, nothing else.
void quantizeKvToken(const uint16_t* k, uint8_t* page, int64_t blockSize, int64_t offset);

// Decodes slot `offset` of `page` into 512 bf16 bits: dims 0..447 are e4m3 times the tile's
// UE8M0 scale rounded once to bf16 (NaN -> 0x7FC0), dims 448..511 copied.
void dequantizeKvToken(const uint8_t* page, int64_t blockSize, int64_t offset, uint16_t* out);

}  // namespace deepinfer::ref
