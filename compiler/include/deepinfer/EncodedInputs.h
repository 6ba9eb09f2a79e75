// Random tensors in the encoded formats of docs/ops.md, for the kernel families' benchmark inputs
// and the test cases: fp8_ds_mla KV pages written by the kv_quant_insert reference (every byte one
// the real writer could produce), indexer key pages, fp8/fp4 weight codes and UE8M0 scale bytes.
#pragma once
#include <cstdint>
#include <vector>

#include "deepinfer/BenchInputs.h"
#include "deepinfer/HostRandom.h"

namespace deepinfer {

// An fp8_ds_mla cache [numPages, page_bytes] (docs/ops.md §2) whose pages listed in `filledPages`
// hold N(0, sigma) tokens written by `reference`'s kv_quant_insert; other bytes are zero (never
// read).
Result<HostTensor> writerBuiltKvCache(Rng& rng, int64_t numPages, int64_t blockSize,
                                      const std::vector<int64_t>& filledPages, double sigma,
                                      const HostOpReference& reference);

// The same at benchmark sizes, fast: the `filledPages` hold tokens copied from a pool of
// `sourceTokens` N(0, 1) tokens the writer wrote.
Result<HostTensor> tiledKvCache(Rng& rng, int64_t numPages, int64_t blockSize, const std::vector<int64_t>& filledPages,
                                const HostOpReference& reference, int64_t sourceTokens = 1024);

// An indexer key cache [numPages, BS*132] (docs/ops.md §7): keys of N(0, sigma_token) with
// log-normal per-token sigma, quantized per token to e4m3 with the power-of-two scale
// max(amax, 1e-4)/448 rounded up, stored as fp32.
HostTensor indexerKeyCache(Rng& rng, int64_t numPages, int64_t blockSize);

// Quantized weights [rows, cols] at benchmark sizes, built fast: e4m3 codes (bits 8) are random
// bytes with the top exponent bit cleared (|value| <= 1.875, subnormals included, never NaN),
// e2m1 codes (bits 4, two per byte) random nibbles (all valid).
HostTensor quantCodes(Rng& rng, int bits, int64_t rows, int64_t cols);
// UE8M0 scale bytes, random in 118..122 (2^-9 .. 2^-5).
HostTensor quantScales(Rng& rng, std::vector<int64_t> shape);

}  // namespace deepinfer
