// deepinfer-model-bench's speculative-decoding measurements (DSpark, docs/dspark.md): the cost
// of a verify step against a plain decode step, the draft pass alone, and decode tok/s as a
// function of the acceptance length (oracle drafts: the target's own greedy continuation, with
// the draft after the a-th made wrong), next to the natural acceptance of the draft model.
//
// The oracle's continuation is recorded, per stream count, by greedy speculative steps over the
// same prompts with every stream verifying B drafts, i.e. verify forwards of the same S (B + 1)
// rows as the timed oracle steps. The GPU kernels are not batch-invariant (a row's rounding
// depends on the forward's row count), but a row's value depends only on its own tokens and that
// count, so the timed steps reproduce the recorded rows bit for bit and accept exactly the
// forced a; a continuation from one-row or S-row decode steps would not (tiny's near-ties flip).
// Every oracle step is checked, and a step that accepts otherwise makes its row an error.
#pragma once
#include <random>
#include <vector>

#include "ModelBenchOptions.h"
#include "ModelBenchSpecRows.h"
#include "model/gpu/GpuModel.h"

namespace deepinfer::bench {

// Runs every measurement for each stream count of `opts`; the model must speculate.
std::vector<SpecRow> measureSpeculative(GpuModel& model, const ModelBenchOptions& opts, std::mt19937_64& rng);

}  // namespace deepinfer::bench
