// deepinfer-model-bench's speculative-decoding measurements (DSpark, docs/dspark.md): the cost
// of a verify step against a plain decode step, the draft pass alone, and decode tok/s as a
// function of the acceptance length (oracle drafts: the target's own greedy continuation, with
// the draft after the a-th made wrong), next to the natural acceptance of the draft model.
#pragma once
#include <random>
#include <string>
#include <vector>

#include "ModelBenchOptions.h"
#include "model/gpu/GpuModel.h"

namespace deepinfer::bench {

// One measurement at S streams (speculative requests stepped together, one GpuModel call per
// step), the median of `repeats` blocks of `steps` steps on fresh requests.
struct SpecRow {
  int streams = 0;
  std::string kind;          // "plain" (no drafts: verify [next] only), "draft" (the draft pass alone),
                             // "oracle" (target continuation, the draft after `target` wrong), "model"
  int target = -1;           // oracle: drafts accepted by construction (B: all)
  int steps = 0;
  double stepMs = 0;         // per step (draft pass + verify for "model"; verify only for "oracle")
  double meanAccepted = 0;   // drafts accepted per step per stream, as measured
  double tokPerS = 0;        // streams x tokens per step / time per step ("oracle": + a draft pass)
  std::string error;
};

// Runs every measurement for each stream count of `opts`; the model must speculate.
std::vector<SpecRow> measureSpeculative(GpuModel& model, const ModelBenchOptions& opts, std::mt19937_64& rng);
void printSpecRows(const std::vector<SpecRow>& rows, int blockSize);
std::string specRowsJson(const std::vector<SpecRow>& rows);

}  // namespace deepinfer::bench
