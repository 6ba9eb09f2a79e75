// What deepinfer-model-bench measured and derived, the readable table and the JSON file.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ModelBenchOptions.h"
#include "ModelBenchSpecRows.h"
#include "ModelLongContext.h"
#include "ModelRoofline.h"
#include "Roofline.h"
#include "model/ModelConfig.h"
#include "model/gpu/GpuModel.h"

namespace deepinfer::bench {

struct ModelRunInfo {
  std::string gpuName, arch, driver, commit, date, mode, modelDir, target;
  std::string pdl;                     // programmatic dependent launch: "on" or "off (why)"
  int smCount = 0;
  int64_t memoryBytes = 0;
  double loadSeconds = 0, warmupSeconds = 0, totalSeconds = 0;
  double weightLoadSeconds = 0;        // GpuWeightInfo::loadSeconds (part of loadSeconds)
  int64_t warmupTokens = 0;
  Ceilings ceilings;
};

// One cold prefill: a fresh request, `ctx` random ids in chunks of `chunk`.
struct PrefillRow {
  int64_t ctx = 0, chunk = 0;
  double seconds = 0;            // every chunk's prefill call, back to back
  double firstTokenMs = 0;       // seconds + the greedy pick of the first token from the last row
  double sampleMs = 0;
  std::vector<double> chunkMs;
  PrefillFlops flops;
  double weightBytes = 0;        // weights read once per chunk (the checkpoint's formats, as the runtime holds them)
  double floorSeconds = 0;       // rooflineFloorUs(flops, bytes)
  GpuCallLaunches lastChunkLaunches;  // what the last chunk's forward call enqueued
  std::string error;
  double tokPerS() const { return seconds > 0 ? double(ctx) / seconds : 0; }
  double fraction() const { return seconds > 0 ? floorSeconds / seconds : 0; }
};

// Decode at S streams: each stream prefilled with `prompt` tokens, then `steps` steps of one
// token per stream, `repeats` times. Batched: one GpuModel::forward call per step over every
// stream; serial: one GpuModel::decode call per stream per step (streams stepped one after
// another, not batched).
struct DecodeRow {
  bool batched = false;
  int streams = 0, steps = 0;
  int64_t prompt = 0, firstPosition = 0, lastPosition = 0;
  std::vector<double> repeatSeconds;
  double seconds = 0;               // the median repetition
  double distinctExperts = 0;       // routed experts per layer one batched step reads (expected)
  double weightBytesBatched = 0;    // weights one step of all streams reads, batched
  double weightBytesPerToken = 0;   // weights one token reads alone
  DecodeKvBytes kvPerToken;         // at the middle position of the timed steps
  double floorSecondsBatched = 0;   // per step: (batched weights + S * KV) / copy bandwidth
  double floorSecondsSerial = 0;    // per step: S * (weights + KV) / copy bandwidth
  GpuCallLaunches stepLaunches;     // what the last timed forward call enqueued (one step, or one stream's step)
  std::string error;
  double tokPerS() const { return seconds > 0 ? double(streams) * steps / seconds : 0; }
  double stepMs() const { return steps > 0 ? seconds / steps * 1e3 : 0; }
  double fraction() const { return seconds > 0 ? floorSecondsBatched * steps / seconds : 0; }
  double fractionSerial() const { return seconds > 0 ? floorSecondsSerial * steps / seconds : 0; }
};

struct KvReport {
  int64_t runtimeBytesPerToken = 0;    // GpuKvCapacity::bytesPerToken (compressed + index keys, paged)
  double bytesPerTokenRows = 0;        // the same from the config, unpadded rows
  int64_t windowBytesPerRequest = 0;   // GpuKvCapacity::windowBytesPerRequest (rings sized for a chunk)
  double minWindowBytesPerRequest = 0; // sliding_window rows per layer
  int64_t capacityTokens = 0, totalBytes = 0, budgetBytes = 0;
  int maxRequests = 0;
  static constexpr double kPer80GB = 80e9;
  double tokensPer80GB() const { return runtimeBytesPerToken > 0 ? kPer80GB / double(runtimeBytesPerToken) : 0; }
  // Per token of one request at context `ctx`, its window rings amortised over the context.
  double amortisedBytesPerToken(int64_t ctx) const {
    return double(runtimeBytesPerToken) + (ctx > 0 ? double(windowBytesPerRequest) / double(ctx) : 0);
  }
};

// deepinfer-model-bench --long-context N (ModelLongContext.h for the memory).
// One segment of the long prefill: positions [begin, end), chunk by chunk.
struct LongSegment {
  int64_t begin = 0, end = 0;
  int chunks = 0;
  double seconds = 0;                 // its chunks' prefill calls, back to back
  int jitCompiles = 0;                // NVRTC compiles during the segment (their time is in `seconds`)
  double floorSeconds = 0;            // its FLOPs at the mma.sync rate or its chunks' weights at the copy bandwidth
  GpuCallLaunches lastChunkLaunches;
  double tokPerS() const { return seconds > 0 ? double(end - begin) / seconds : 0; }
  double fraction() const { return seconds > 0 ? floorSeconds / seconds : 0; }
};

// Single-stream decode ending at `context`: a request prefilled to context - decode tokens, then
// the decode measurement (DecodeRow, one stream, batched) on it.
struct LongDecode {
  int64_t context = 0;
  int64_t prefillTokens = 0;
  double prefillSeconds = 0;          // that request's prefill (at N: the long prefill)
  int jitCompiles = 0;                // during that prefill
  DecodeRow row;
};

struct LongContextReport {
  int64_t context = 0, chunk = 0, segment = 0, decodeTokens = 0, timeBudget = 0;
  LongContextMemory memory;
  int64_t weightBytes = 0;            // planned before loading (gpuWeightBytes / the full-depth plan)
  int64_t freeBytesBeforeLoad = 0;
  int64_t capacityTokens = 0;         // GpuKvCapacity::tokens of the loaded model
  // Device memory free right after loading and after the long prefill: what the forward passes
  // took (scratch buffers, activations, kernels), against memory.scratchBytes() + reserveBytes.
  int64_t freeBytesAfterLoad = 0, freeBytesAfterPrefill = 0;
  int64_t promptTokens = 0;           // context - decode tokens
  int64_t reached = 0;                // positions prefilled (promptTokens unless stopped or failed)
  bool stopped = false;               // the time budget ran out before the prompt was in
  double prefillSeconds = 0;          // every chunk of the long prefill, back to back
  double firstTokenMs = 0;            // prefillSeconds + the greedy pick of the first token (0 when incomplete)
  std::vector<LongSegment> segments;
  std::vector<double> chunkMs;
  std::string error;
  std::vector<LongDecode> decode;     // at each decode context, then at the context the long prefill reached
  // Decode tok/s at the longest context over tok/s at the first (0 when either is missing).
  double flatness() const;
};

struct ModelBenchReport {
  ModelRunInfo run;
  ModelBenchOptions opts;
  ModelConfig cfg;
  double deviceWeightBytes = 0;        // the weights on the GPU as loaded (GpuWeightInfo::deviceBytes)
  double checkpointWeightBytes = 0;    // every weight in the checkpoint's fp8/fp4 formats (from the config)
  double bf16WeightBytes = 0;          // the same with every matrix bf16 (the runtime before issue 13)
  double draftWeightBytes = 0;         // the DSpark draft's part of the device weights (from the config; 0: none)
  std::string draftLeftOut;            // why there are no speculative rows although they were asked for
  std::vector<PrefillRow> prefill;
  std::vector<DecodeRow> decode;
  KvReport kv;
  std::vector<SpecRow> speculative;    // DSpark measurements (empty without a draft or with --no-speculative)
  std::optional<LongContextReport> longContext;  // --long-context
  std::vector<std::string> assumptions;
};

void printModelReport(const ModelBenchReport& r);
std::string modelReportJson(const ModelBenchReport& r);

// Pieces the long-context report shares (ModelLongContextReport.cpp).
std::string launchesJson(const GpuCallLaunches& l);
std::string decodeRowJson(const DecodeRow& d);
// "123 kernels + 14 cuBLAS + 9 copies/fills (eager)" / "... (graph: 140 kernel nodes)".
std::string launchesText(const GpuCallLaunches& l);
void printLongContext(const LongContextReport& r);
std::string longContextJson(const LongContextReport& r);

}  // namespace deepinfer::bench
