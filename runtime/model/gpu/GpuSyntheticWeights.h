// Weights for a model that has no checkpoint on disk (deepinfer-model-bench's full-depth mode):
// every tensor of ConfigWeightTable(cfg) in its checkpoint format, generated on the host and
// uploaded, so a model far larger than the machine's disk runs with the real per-token bytes and
// FLOPs. Quantized projections and routed experts are random codes (fp8 values in [-2, 2]
// encoded e4m3, fp4 uniform over the 16 e2m1 codes) with one UE8M0 scale per tensor that gives
// each output the variance of an N(0, 1/fan-in) matrix; the code bytes come from a host pool at
// a per-tensor offset (distinct bytes per tensor, no per-element generation for ~100 GB). Every
// other tensor (bf16 embeddings, head, router, compressor and indexer projections, norms, mHC
// mixes, sinks, router bias) is make-model's (SyntheticWeights::fillRows). Not a trained model:
// routing and index selections are those of random weights.
#pragma once
#include <cstdint>
#include <string>

#include "GpuWeights.h"

namespace deepinfer {

// The scale byte that gives codes of root-mean-square `codeRms` the spread of N(0, 1/fanIn).
uint8_t syntheticScaleByte(double codeRms, int64_t fanIn);

// Plans (gpuWeightBytes of the config table, checked against the device's free memory first),
// generates and uploads. `draft`: the DSpark stages and heads too (when configured). With a
// `stage`, only its tensors (the same values as the whole model's: each is a function of its name).
Result<GpuWeights> makeSyntheticGpuWeights(const ModelConfig& cfg, bool draft, uint64_t seed, const Device& dev,
                                           const GpuStageTensors& stage = {});

// Rows of a synthetic engram table (the real ones are ~95 GB each): row r of `table`, width
// `cols`, values uniform in [-1, 1) from a hash of (seed, table, r, column), so every lookup of
// a row sees the same values. out[n * cols].
void syntheticEngramRows(uint64_t seed, const std::string& table, const int64_t* rows, size_t n, int64_t cols,
                         float* out);

}  // namespace deepinfer
