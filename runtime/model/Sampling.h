// Next-token sampling on the host, shared by the CPU and CUDA backends of `deepinfer-jit run`:
// greedy argmax (temperature 0) or temperature + top-p (nucleus) sampling with a counter-based
// RNG, so a (seed, step) pair always draws the same token whatever ran before.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/Error.h"

namespace deepinfer {

struct SamplingOptions {
  double temperature = 0.0;  // 0: greedy argmax (ties to the lower index); must be >= 0
  double topP = 1.0;         // keep the smallest most-probable prefix with mass >= topP; (0, 1]
  uint64_t seed = 0;
};

// Rejects temperature < 0 (or not finite) and topP outside (0, 1], naming the bad value.
Status validateSampling(const SamplingOptions& o);

// A uniform double in [0, 1) from (seed, step): splitmix64 of the seed, mixed with the step
// through a second splitmix64 round, top 53 bits.
double samplingUniform(uint64_t seed, uint64_t step);

// Logits a token may be chosen from: every value finite. Otherwise an error naming `where`, the
// first bad index and how many are bad (NaN logits would make greedy emit token 0 forever).
Status checkFiniteLogits(const float* logits, int64_t V, const std::string& where);

// The token for `step` from logits[0, V). Greedy: the first index of the maximum (NaN never
// wins unless logits[0] is NaN, as argmaxToken). Sampling: softmax of logits / temperature in
// fp64 (NaN logits get probability 0), sorted by probability descending (ties to the lower
// index), cut to the smallest prefix whose mass is >= topP, renormalized, one uniform draw.
// Options must pass validateSampling (callers validate once, up front); V >= 1.
int32_t sampleToken(const float* logits, int64_t V, const SamplingOptions& o, uint64_t step);

// The distribution sampleToken draws from, over the whole vocabulary: one-hot on the argmax for
// temperature 0, else the renormalized nucleus (0 outside it). Speculative decoding's target
// distribution p (docs/dspark.md §5).
std::vector<double> samplingDistribution(const float* logits, int64_t V, const SamplingOptions& o);
// softmax(logits / temperature) over the whole vocabulary (no nucleus), in fp64: a draft's q.
std::vector<double> softmaxDistribution(const float* logits, int64_t V, double temperature);

// Speculative decoding's random draws (docs/dspark.md §8): independent counter-based streams
// keyed by (request seed, position of the token concerned, purpose), so a request's results do
// not depend on what it is batched with or how many tokens earlier steps accepted.
enum class SpecDraw : uint64_t { Draft = 1, Accept = 2, Residual = 3 };
double keyedUniform(uint64_t seed, uint64_t position, SpecDraw purpose);
// Inverse CDF in index order over an unnormalized distribution: the first token whose cumulative
// mass exceeds u * total (u in [0, 1)); tokens of mass 0 are never returned when any has mass.
int32_t drawFrom(const std::vector<double>& p, double u);

}  // namespace deepinfer
