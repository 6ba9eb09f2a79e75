// Building blocks of the case generators: the seeded generator and random tensors of
// deepinfer/HostRandom.h (cases must be the same bytes on every machine), and fp8 caches built
// the way the writers build them (deepinfer/EncodedInputs.h, written by the references here).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cases/CompareOutputs.h"
#include "deepinfer/EncodedInputs.h"
#include "deepinfer/HostRandom.h"
#include "deepinfer/Tensor.h"

namespace deepinfer::testing {

using deepinfer::bf16Normal;
using deepinfer::f32Normal;
using deepinfer::f32Uniform;
using deepinfer::fillRandomBytes;
using deepinfer::i32Tensor;
using deepinfer::i64Tensor;
using deepinfer::indexerKeyCache;
using deepinfer::randomBytes;
using deepinfer::Rng;
using deepinfer::shuffledRange;

// Runs the reference; throws std::runtime_error naming `what` when it fails.
void runReferenceOrThrow(const std::string& op, const OpAttrs& attrs, TensorMap& tensors,
                         const std::string& what);

// An fp8_ds_mla cache [numPages, page_bytes] whose pages listed in `filledPages` hold N(0, sigma)
// tokens written by the kv_quant_insert reference; other bytes are zero (never read).
HostTensor writerBuiltKvCache(Rng& rng, int64_t numPages, int64_t blockSize,
                              const std::vector<int64_t>& filledPages, double sigma = 1.0);

}  // namespace deepinfer::testing
