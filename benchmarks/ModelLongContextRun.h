// deepinfer-model-bench --long-context N on a model loaded with its KV cache sized for N
// (ModelBench.cpp plans the memory and loads): single-stream decode on fresh requests prefilled to
// each decode context, then one request prefilled in chunks to N less the decode tokens (tok/s
// per segment, JIT compiles and the floor of each, time to first token; stopped early only by
// --time-budget), then decode on it.
#pragma once
#include <random>

#include "ModelBenchOptions.h"
#include "ModelBenchReport.h"
#include "ReportText.h"
#include "Roofline.h"
#include "model/gpu/GpuModel.h"

namespace deepinfer::bench {

// Fills the measured parts of `r` (context, memory and capacity are the caller's); `runStart` is
// when the run began (the time budget counts from there).
void measureLongContext(GpuModel& model, const Device& dev, const ModelBenchOptions& opts, const Ceilings& ceil,
                        Clock::time_point runStart, std::mt19937_64& rng, LongContextReport& r);

}  // namespace deepinfer::bench
