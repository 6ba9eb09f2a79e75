// What deepinfer-model-bench's measurements share: random prompts, chunked prefill of one
// request, the greedy pick, and the decode measurement on requests already prefilled.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "ModelBenchOptions.h"
#include "ModelBenchReport.h"
#include "Roofline.h"
#include "model/gpu/GpuModel.h"

namespace deepinfer::bench {

double medianOf(std::vector<double> v);
std::vector<int32_t> randomIds(std::mt19937_64& rng, int64_t n, int64_t vocab);
int32_t greedy(const float* logits, int64_t V);

// Prefills `ids` into `req` one chunk per call (lastOnly logits: the head runs on the last row of
// each chunk only, as an engine would); returns the last chunk's logits row and each call's time.
Result<std::vector<float>> prefillChunks(GpuModel& model, int64_t req, const std::vector<int32_t>& ids, int64_t chunk,
                                         std::vector<double>* chunkMs);

// The decode measurement on requests already prefilled (`next`: each one's next token, updated):
// two untimed steps (the decode-shape kernels compile and the graphs are captured there), then
// opts.repeats timed blocks of opts.decodeSteps steps, each feeding the greedy pick of the previous
// logits (host argmax included). Batched: one GpuModel::forward per step over every request;
// serial: one GpuModel::decode per request per step. Fills `row` (its error on failure) with the
// floor of the timed positions; releases nothing.
void timeDecode(GpuModel& model, const std::vector<int64_t>& reqs, std::vector<int32_t>& next,
                const ModelBenchOptions& opts, const Ceilings& ceil, DecodeRow& row);

}  // namespace deepinfer::bench
