// DSpark speculative decoding in the CPU reference (docs/dspark.md): the types of the draft pass
// and of a speculative step. The entry points are CpuModel::draft and CpuModel::speculativeStep
// (CpuForward.h); the rules are in CpuDraft.cpp (§4), CpuSpeculative.cpp (§5, §6) and
// SpecAccept.h (acceptance).
//
//   CpuRequestState st = *model->newSpeculativeRequest();
//   auto logits = model->prefill(st, prompt);           // also fills the draft rings
//   int32_t next = argmaxToken(last row of logits);     // emitted
//   for (;;) {
//     std::vector<CpuSpecStep> steps(1);
//     steps[0].state = &st; steps[0].next = next;       // greedy by default
//     auto out = model->speculativeStep(steps);          // emits 1 .. B+1 tokens
//     next = (*out)[0].emitted.back();
//   }
#pragma once
#include <cstdint>
#include <vector>

#include "Sampling.h"
#include "deepinfer/Tensor.h"

namespace deepinfer {

class CpuRequestState;

// One request's input to a draft pass: the anchor `next` at position state->position().
struct CpuDraftInput {
  const CpuRequestState* state = nullptr;
  int32_t next = 0;
  SamplingOptions sampling;       // temperature 0: argmax drafts; > 0: drafts sampled from z / T
};

// What a draft pass proposes for one request (B = dspark_block_size rows).
struct CpuDraftBlock {
  std::vector<int32_t> tokens;    // d_1 .. d_B
  std::vector<float> z;           // [B, V] fp32 logits z_k (Markov bias included)
  std::vector<float> confidence;  // [B] confidence logits c_k (sigmoid = estimated acceptance)
  std::vector<std::vector<double>> q;  // sampled drafts: softmax(z_k / T) per k; empty for argmax
  std::vector<float> h;           // [B, C] the pre-norm hidden rows (bf16 values), for tests
};

// One request's part in a speculative step.
struct CpuSpecStep {
  CpuRequestState* state = nullptr;  // a speculative request whose prompt has been prefilled
  int32_t next = 0;                  // the newest emitted token, at position state->position()
  SamplingOptions sampling;          // temperature 0 = greedy
  int64_t maxDrafts = -1;            // verify at most this many drafts (< 0: the block size)
  // Hooks for tests and the oracle benchmark: verify these drafts instead of the draft model's
  // (at most maxDrafts are used), drawn from `qOverride` (one full-vocabulary distribution per
  // draft; empty = one-hot, i.e. chosen deterministically).
  std::vector<int32_t> draftOverride;
  std::vector<std::vector<double>> qOverride;
};

struct CpuSpecOutcome {
  std::vector<int32_t> drafts;       // d_1 .. d_m that were verified (m = 0: a plain decode step)
  std::vector<float> confidence;     // c_1 .. c_B of the draft pass (empty with an override / m = 0)
  int accepted = 0;                  // a
  std::vector<int32_t> emitted;      // d_1 .. d_a, b: 1 .. m + 1 tokens
  HostTensor logits;                 // [a + 1, V]: the target's logits at the committed positions
};

}  // namespace deepinfer
