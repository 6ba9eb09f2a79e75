// Verification of a speculative step (docs/dspark.md §5), shared by the CPU reference and the
// GPU runtime (both bring the verify rows' logits to the host): greedy acceptance by argmax, or
// the Leviathan et al. rule for sampled requests, with the keyed random streams of Sampling.h.
#pragma once
#include <cstdint>
#include <vector>

#include "Sampling.h"

namespace deepinfer {

struct SpecAcceptance {
  int accepted = 0;   // a: d_1 .. d_a are emitted
  int32_t bonus = 0;  // b: the token emitted after them (the next step's anchor)
};

// `logits` holds m + 1 rows of V: row j is the target's fp32 logits at position n + j (the row of
// d_j for j >= 1, of the anchor for j = 0), so it predicts the token at n + j + 1. `drafts` are
// d_1 .. d_m. `q[j - 1]` is the distribution d_j was sampled from (full vocabulary); an empty
// list, or an empty row, means d_j was chosen deterministically (a one-hot q).
//  * temperature 0: a = the longest prefix with d_j == argmax L_{j-1}; b = argmax L_a.
//  * sampled: p_j = samplingDistribution(L_{j-1}); d_j is accepted when u_j * q_j(d_j) <
//    p_j(d_j) with u_j = keyedUniform(seed, n + j, Accept); at the first rejection b is drawn
//    from normalize(max(p_j - q_j, 0)) (p_j itself if that has no mass), else from p_{m+1};
//    that draw uses keyedUniform(seed, n + a + 1, Residual).
// Greedy acceptance from the rows' argmax tokens (argmaxRows[j] = argmax L_j, drafts.size() + 1
// of them): what acceptDrafts does at temperature 0, for callers that took the argmax on the
// device.
SpecAcceptance acceptGreedy(const int32_t* argmaxRows, const std::vector<int32_t>& drafts);

SpecAcceptance acceptDrafts(const float* logits, int64_t V, const std::vector<int32_t>& drafts,
                            const std::vector<std::vector<double>>& q, const SamplingOptions& sampling, int64_t n);

}  // namespace deepinfer
