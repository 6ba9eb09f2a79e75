// deepinfer-model-bench: a V4.1 model through the GPU runtime (GpuModel) on GPU 0: cold prefill
// throughput and time to first token per context, decode throughput per number of streams
// (batched in one forward call per step, and stepped one stream after another), the KV cache
// footprint, each against the roofline of the measured ceilings (Roofline.h) and the model's
// bytes and FLOPs per token (ModelRoofline.h). Prints a table; writes JSON.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>

#include "ReportText.h"
#include "BenchKernels.h"
#include "ModelBenchMeasure.h"
#include "ModelBenchOptions.h"
#include "ModelBenchReport.h"
#include "ModelBenchSpec.h"
#include "ModelFullDepth.h"
#include "ModelLongContextRun.h"
#include "ModelRoofline.h"
#include "Roofline.h"
#include "model/Checkpoint.h"
#include "model/gpu/GpuModel.h"
#include "model/gpu/GpuStagesReport.h"
#include "model/gpu/GpuWeights.h"
#include "model/Sampling.h"

using namespace deepinfer;
using namespace deepinfer::bench;

namespace {

PrefillRow measurePrefill(GpuModel& model, int64_t ctx, const ModelBenchOptions& opts, const Ceilings& ceil,
                          std::mt19937_64& rng) {
  const ModelConfig& cfg = model.config();
  PrefillRow row;
  row.ctx = ctx;
  row.chunk = opts.chunk;
  row.flops = prefillFlops(cfg, ctx);
  const int64_t chunks = (ctx + opts.chunk - 1) / opts.chunk;
  row.weightBytes = tokenWeightBytes(cfg, WeightStorage::Checkpoint, cfg.numExpertsPerTok).total() * double(chunks);
  row.floorSeconds = rooflineFloorUs(ceil, row.weightBytes, row.flops.total()) * 1e-6;
  const auto ids = randomIds(rng, ctx, cfg.vocabSize);
  auto req = model.newRequest();
  if (!req.ok()) {
    row.error = req.error().message;
    return row;
  }
  const auto t0 = Clock::now();
  auto last = prefillChunks(model, *req, ids, opts.chunk, &row.chunkMs);
  row.seconds = secondsSince(t0);
  if (!last.ok()) {
    row.error = last.error().message;
    row.seconds = 0;
  } else {
    const auto t1 = Clock::now();
    const int32_t first = greedy(last->data(), cfg.vocabSize);
    row.sampleMs = secondsSince(t1) * 1e3;
    row.firstTokenMs = row.seconds * 1e3 + row.sampleMs;
    row.lastChunkLaunches = model.lastCallLaunches();
    (void)first;
  }
  if (Status s = model.releaseRequest(*req); !s.ok() && row.error.empty()) row.error = s.error().message;
  return row;
}

// S fresh requests, each prefilled with the prompt, then the decode measurement (timeDecode).
DecodeRow measureDecode(GpuModel& model, int streams, bool batched, const ModelBenchOptions& opts,
                        const Ceilings& ceil, std::mt19937_64& rng) {
  const int64_t V = model.config().vocabSize;
  DecodeRow row;
  row.batched = batched;
  row.streams = streams;
  row.steps = opts.decodeSteps;
  row.prompt = opts.promptTokens;
  std::vector<int64_t> reqs;
  std::vector<int32_t> next;
  for (int s = 0; s < streams && row.error.empty(); ++s) {
    auto req = model.newRequest();
    if (!req.ok()) {
      row.error = req.error().message;
      break;
    }
    reqs.push_back(*req);
    auto last = prefillChunks(model, *req, randomIds(rng, opts.promptTokens, V), opts.chunk, nullptr);
    if (!last.ok()) row.error = last.error().message;
    else next.push_back(greedy(last->data(), V));
  }
  if (row.error.empty()) timeDecode(model, reqs, next, opts, ceil, row);
  for (int64_t r : reqs)
    if (Status s = model.releaseRequest(r); !s.ok() && row.error.empty()) row.error = s.error().message;
  return row;
}

// What the long-context run does, in place of the cold-prefill and decode-stream items.
std::vector<std::string> longContextAssumptions(const ModelBenchReport& r) {
  const LongContextReport& l = *r.longContext;
  return {
      fmt::format("Long context: the KV cache is sized for {} tokens (GpuModelOptions::kvCacheBytes = the window rings "
                  "of {} requests + the compressed and index-key caches of {} tokens) and the run was checked "
                  "against the free device memory before loading: weights + that cache + the prefill's scratch at "
                  "the context (the indexer's scores [chunk, N] f32, the gathered attention workspaces, the "
                  "candidate block scores, each with the runtime's 25% headroom) + a fixed {} GiB reserve.",
                  l.context, l.memory.maxRequests, l.context + l.chunk, kLongContextReserveBytes >> 30),
      fmt::format("The long prefill: one request, uniformly random token ids (seed {}), {} tokens per prefill call "
                  "(lastOnly logits), {} positions (the context less the {} tokens of the decode measurement, so "
                  "the last decode step sits at position {}). A warm-up of {} tokens compiled the first shapes; "
                  "larger shapes compile when the context first reaches them, and those NVRTC compiles are in the "
                  "segment's time (each segment reports its count; a warm kernel cache makes them disk loads). "
                  "Time to first token = the sum of the chunks' times + the greedy pick from the last logits.",
                  r.opts.seed, l.chunk, l.promptTokens, l.decodeTokens, l.context - 1, r.run.warmupTokens),
      fmt::format("Segment floor: its positions' FLOPs (prefillFlops(end) - prefillFlops(begin)) at the mma.sync "
                  "rate, or its chunks' weight reads at the copy bandwidth, whichever is longer. The runtime scores "
                  "every key of a candidate-restricted index source before masking, which the FLOP count (the "
                  "candidate entries only) leaves out."),
      fmt::format("Decode at a context c: a fresh request prefilled with c - {} random ids (at the full context: "
                  "the long request itself), 2 untimed steps, then {} timed repetitions of {} steps, one forward "
                  "call per step (a CUDA graph), the median; how flat = tok/s at the longest context / tok/s at the "
                  "first.",
                  l.decodeTokens, r.opts.repeats, r.opts.decodeSteps),
  };
}

std::vector<std::string> assumptionsFor(const ModelBenchReport& r) {
  const ModelConfig& c = r.cfg;
  std::vector<std::string> a = {
      "Times are host wall-clock around GpuModel calls; every call returns only once its logits are on the host, "
      "so each includes device synchronization, the logits copy and host overheads.",
  };
  if (r.longContext) {
    for (std::string& s : longContextAssumptions(r)) a.push_back(std::move(s));
  } else {
    std::vector<std::string> runs = {
        fmt::format("Cold prefill: a fresh request with an empty cache, uniformly random token ids (fixed seed "
                    "{}), {} tokens per prefill call (lastOnly logits: the head runs on each chunk's last row). "
                    "Kernels were compiled and warmed beforehand by an untimed warm-up prefill of {} tokens and "
                    "decode steps, so no JIT compile is timed.",
                    r.opts.seed, r.opts.chunk, r.run.warmupTokens),
        "Time to first token = the cold prefill time + the host's greedy pick of the first token from the last "
        "row's logits.",
        fmt::format("Decode: each stream is a request prefilled with {} random ids, then 2 untimed steps; tok/s = "
                    "streams x {} steps / the median of {} timed repetitions; each step feeds the greedy pick of "
                    "the previous logits. 'batched' runs one GpuModel::forward call per step over every stream; "
                    "'serial' runs one GpuModel::decode call per stream per step (streams stepped one after another, "
                    "not batched).",
                    r.opts.promptTokens, r.opts.decodeSteps, r.opts.repeats),
    };
    a.insert(a.end(), runs.begin(), runs.end());
  }
  std::vector<std::string> rest = {
      "Launches per forward call: counted where the runtime enqueues work (deepinfer/LaunchTally.h): kernels "
      "launched through the driver (di ops, model kernels), cuBLAS GEMM calls (one each, though cuBLAS may run "
      "more than one kernel) and stream-ordered copies and fills; per layer = that layer's iteration of the "
      "forward pass (its engram module, mHC steps, attention, MoE). A decode step runs as a CUDA graph: one host "
      "launch replays it; 'graph nodes' counts the graph's kernel nodes, cuBLAS's own kernels included.",
      "Decode roofline: floor time per step = (weights read per step + KV bytes read per step) / the measured "
      "copy bandwidth (a device-to-device copy's read + write bytes per second); fraction = floor / measured.",
      fmt::format("Weights per step: every matrix one token multiplies, as the runtime stores it (the checkpoint's "
                  "formats: fp8 e4m3 + one UE8M0 byte per 32x32 block for the projections, shared expert and engram "
                  "wkv, fp4 e2m1 + one UE8M0 byte per 32 columns for the routed experts, bf16 for the head, router, "
                  "compressor and indexer keys and norms; mHC mixes, sinks and router bias fp32): attention wq_a/wq_b/wkv/wo_a/wo_b, compressor and index-key "
                  "projections of the kv sources, indexer wq_b/weights_proj of the index sources, mHC mixes, router, "
                  "the shared expert, the routed experts, engram wkv, the head; one embedding row. One token reads "
                  "{} routed experts per layer; a batched step of S streams reads the expected number of distinct "
                  "experts when each token picks {} of {} uniformly: E(1 - (1 - k/E)^S). The serial roofline "
                  "charges every stream its own weights.",
                  c.numExpertsPerTok, c.numExpertsPerTok, c.nRoutedExperts),
      fmt::format("KV bytes per decode token: per layer min(position + 1, {}) window rows of 584 bytes; per layer "
                  "with ratio > 0, min({}, visible compressed entries) selected rows of 584 bytes; per index source, "
                  "every visible index key of its key layer at 132 bytes (restricted index sources: at most {} "
                  "candidate entries). Evaluated at the middle position of the timed steps. Cache writes and "
                  "activations are not counted.",
                  c.slidingWindow, c.indexTopk, int64_t(c.candidateTopkBlocks) * c.candidateBlockSize),
      "Prefill roofline: floor = max(FLOPs / the measured mma.sync bf16 rate, weights read once per chunk / copy "
      "bandwidth); FLOPs = 2 x the matrix operands one token multiplies (routed: num_experts_per_tok experts) x "
      "context + the head once (2 V C) + attention 2 x 2 x H x head_dim x keys per token and layer (keys = the "
      "window + the selected compressed rows, exact per position) + the indexer 2 x Hi x Di (+ 2 Hi) per scored "
      "key. The quantized projections and experts run through weight_gemm / moe_experts (mma.sync); the bf16 "
      "head, router and compressor GEMMs through cuBLAS, which may exceed the mma.sync rate.",
      "KV bytes per token = GpuKvCapacity::bytesPerToken: the compressed cache (584-byte rows in 64-row pages "
      "padded to 576-byte units) and the index keys (132 bytes) of every kv source, divided by its compress "
      "ratio. The window rings (a fixed amount per request, sized for sliding_window - 1 + one chunk rows per "
      "layer) are reported per request and amortised over the context: bytes_per_token + "
      "window_bytes_per_request / context.",
      "Tokens of capacity per 80 GB = 80e9 / bytes_per_token (window rings and workspaces not counted); "
      "capacity_tokens is this run's cache (its budget after the window rings of max_requests requests).",
      "Random weights (make-model) and random token ids: routing and index selections are not those of real "
      "text, which may change expert reuse across a batch and the time of data-dependent steps.",
  };
  a.insert(a.end(), rest.begin(), rest.end());
  if (r.opts.synthetic == "proxy")
    a.push_back(
        "Synthetic proxy model (--synthetic proxy): make-model's proxy preset (7 layers at V4.1-Flash widths, 128 "
        "routed experts) with weights generated on the host in the checkpoint's formats (GpuModel::loadSynthetic: "
        "random codes, one scale per tensor) instead of read from a ~28 GB checkpoint; the same shapes, kernels and "
        "bytes per token as --model on a make-model proxy.");
  if (r.opts.synthetic == "flash")
    a.push_back(fmt::format(
        "Synthetic full-depth model (--synthetic flash): V4.1-Flash's config (40 layers, hidden {}, vocab {}, every "
        "layer role, the engram layers) with {} routed experts per layer instead of 384 (a token reads {} either "
        "way, so per-token bytes and FLOPs are the real model's; a batch of S streams touches more distinct experts "
        "of 384 than of {}); {}; weights generated on the host in the checkpoint's formats "
        "(GpuModel::loadSynthetic: random codes, one scale per tensor); engram rows made up on the host from a hash "
        "of the row id instead of read from ~95 GB tables.",
        c.hiddenSize, c.vocabSize, c.nRoutedExperts, c.numExpertsPerTok, c.nRoutedExperts,
        r.draftWeightBytes > 0
            ? fmt::format("the DSpark draft as the config defines it ({} stages mtp.0-{} with {} routed experts, "
                          "top-{}, Markov rank {}, block {}; {:.2f} GB) generated the same way",
                          c.numNextnPredictLayers, c.numNextnPredictLayers - 1, c.draftRoutedExperts(),
                          c.draftExpertsPerTok(), c.dspark.markovRank, c.dsparkBlockSize, r.draftWeightBytes / 1e9)
            : "no DSpark draft (" +
                  (!r.draftLeftOut.empty()     ? r.draftLeftOut
                   : r.opts.longContext > 0 ? std::string("--long-context measures no speculative rows")
                                            : std::string("--no-speculative")) +
                  ")"));
  if (!r.speculative.empty())
    a.push_back(fmt::format(
        "Speculative decoding (DSpark, block {}): at each stream count, fresh speculative requests prefilled with "
        "the decode prompt, one untimed step, then {} timed steps (median of {} repetitions), one GpuModel call "
        "per step over every stream. 'plain': steps verifying no draft (the target forward of a decode step plus "
        "the DSpark features a speculative request keeps). 'draft pass alone': GpuModel::draft (drafts to the "
        "host). 'oracle a': the drafts are the target's own greedy continuation with draft a+1 made wrong; the "
        "continuation is recorded first ('oracle recording', untimed) by greedy speculative steps over the same "
        "prompts in which every stream verifies {} drafts, i.e. verify forwards of the same rows as the oracle's "
        "(the kernels round a row by the forward's row count, so a continuation from decode steps would part "
        "from the verify rows at near-ties); every oracle step is checked to accept exactly a drafts and emit "
        "the recorded tokens, else the row is an error. Their step time is the verify step alone and their "
        "tok/s adds one draft pass per step: streams x (accepted + 1) / (verify + draft). 'model drafts': the draft "
        "heads' own drafts; with random weights they are accepted about as often as random tokens, so this row "
        "shows the cost of the full step, not a realistic acceptance. {}",
        c.dsparkBlockSize, r.opts.decodeSteps, r.opts.repeats, c.dsparkBlockSize,
        c.numHiddenLayers < v41FlashDefaults().numHiddenLayers
            ? fmt::format("The model has {} target layers and {} draft stages: the draft pass's share of a step "
                          "is far larger than in the {}-layer model.",
                          c.numHiddenLayers, c.numNextnPredictLayers, v41FlashDefaults().numHiddenLayers)
            : fmt::format("{} target layers and {} draft stages, as V4.1-Flash.", c.numHiddenLayers,
                          c.numNextnPredictLayers)));
  if (c.numEngramLayers() > 0)
    a.push_back("Engram table rows are gathered on the host from the checkpoint's mapping (not device bytes; not "
                "in the roofline).");
  return a;
}

// A long-context run keeps one request at a time (the decode contexts' requests are released
// before the long one starts); one more for the warm-up's.
constexpr int kLongContextRequests = 2;

// --long-context: the memory a request of that context needs beside the weights, from the config,
// checked against the free device memory with the checkpoint's weights (for --synthetic the
// full-depth plan fits the weights around it).
Result<LongContextReport> planLongContext(const ModelBenchOptions& opts, int64_t freeBytes, int maxRequests) {
  LongContextReport lc;
  lc.context = opts.longContext;
  lc.chunk = opts.chunk;
  lc.segment = opts.segment;
  lc.decodeTokens = opts.decodeTokens();
  lc.timeBudget = opts.timeBudget;
  lc.freeBytesBeforeLoad = freeBytes;
  // The full-depth model's attention and caches do not depend on its expert count.
  auto cfg = opts.synthetic.empty() ? loadModelConfig(opts.model)
                                     : syntheticModelConfig(opts.synthetic, opts.synthetic == "flash" ? 16 : 0);
  if (!cfg.ok()) return cfg.error();
  auto memory = longContextMemory(*cfg, lc.context, lc.chunk, maxRequests);
  if (!memory.ok()) return memory.error();
  lc.memory = *memory;
  if (!opts.synthetic.empty()) return lc;
  auto ckpt = Checkpoint::open(opts.model);
  if (!ckpt.ok()) return ckpt.error();
  auto weights = gpuWeightBytes(*cfg, *ckpt);
  if (!weights.ok()) return weights.error();
  lc.weightBytes = *weights;
  DI_TRY(checkLongContextFits(lc.memory, lc.weightBytes, freeBytes));
  return lc;
}

int runModelBench(const ModelBenchOptions& opts) {
  const auto start = Clock::now();
  auto dev = Device::open(0);
  if (!dev.ok()) {
    fmt::print(stderr,
               "deepinfer-model-bench: no GPU: {}\n"
               "deepinfer-model-bench runs the model on an NVIDIA GPU (sm_80 or newer); nothing was measured.\n",
               dev.error().message);
    return 1;
  }
  const LocalGpuInfo& gpu = (*dev)->info();
  ModelBenchReport rep;
  rep.opts = opts;
  ModelRunInfo& run = rep.run;
  run.gpuName = gpu.profile.gpuName;
  run.arch = gpu.profile.archName();
  run.driver = gpu.profile.driverVersion;
  run.smCount = gpu.profile.smCount;
  run.memoryBytes = gpu.totalMemBytes;
  run.commit = !opts.commit.empty() ? opts.commit : DI_BUILD_COMMIT;
  run.date = utcNow("%Y-%m-%dT%H:%M:%SZ");
  run.mode = opts.quick ? "quick" : "full";
  run.modelDir = opts.model;
  fmt::print("deepinfer-model-bench on {} ({}, {} SMs, {:.0f} GB), driver {}, commit {}\n", run.gpuName, run.arch,
             run.smCount, double(run.memoryBytes) / 1e9, run.driver, run.commit);

  {  // The ceilings first, while the device memory is free.
    auto kernels = loadBenchKernels(**dev);
    run.ceilings = measureCeilings(**dev, kernels.ok() ? &*kernels : nullptr,
                                   kernels.ok() ? "" : kernels.error().message, 20);
  }
  const Ceilings& ceil = run.ceilings;
  fmt::print("ceilings: copy {} GB/s{}, mma.sync bf16 {} TFLOP/s{}\n",
             ceil.copyGBs > 0 ? fmt::format("{:.0f}", ceil.copyGBs) : "-",
             ceil.copyError.empty() ? "" : " (" + ceil.copyError + ")",
             ceil.mmaTflops > 0 ? fmt::format("{:.0f}", ceil.mmaTflops) : "-",
             ceil.mmaError.empty() ? "" : " (" + ceil.mmaError + ")");
  std::fflush(stdout);

  GpuModelOptions mo;
  mo.jit.programmaticLaunch = opts.pdl;
  mo.maxChunkTokens = opts.chunk;
  mo.kvCacheBytes = opts.kvBytes;
  int maxStreams = 1;
  for (int s : opts.streams) maxStreams = std::max(maxStreams, s);
  mo.maxRequests = std::max(16, maxStreams + 1);
  mo.tp = opts.tp;
  if (opts.tp > 1) {
    // One GPU per tensor rank when that many are visible, else logical ranks on this one.
    bool enough = true;
    for (int r = 1; r < opts.tp && enough; ++r) enough = Device::open((*dev)->ordinal() + r).ok();
    if (enough)
      for (int r = 0; r < opts.tp; ++r) mo.gpus.push_back((*dev)->ordinal() + r);
  }
  auto mem = (*dev)->memInfo();
  if (!mem.ok()) {
    fmt::print(stderr, "deepinfer-model-bench: {}\n", mem.error().message);
    return 1;
  }
  const int64_t freeBeforeLoad = int64_t(mem->first);
  // --long-context: the KV cache sized for the context and the run checked against the free
  // memory before anything is loaded (ModelLongContext.h).
  if (opts.longContext > 0) {
    mo.maxRequests = kLongContextRequests;
    mo.speculative = false;  // no draft rings
    auto lc = planLongContext(opts, freeBeforeLoad, mo.maxRequests);
    if (!lc.ok()) {
      fmt::print(stderr, "deepinfer-model-bench: {}\n", lc.error().message);
      return 1;
    }
    rep.longContext = std::move(*lc);
    mo.kvCacheBytes = rep.longContext->memory.kvBytes;
    if (opts.synthetic.empty())
      fmt::print("long context {} fits (checked before loading): {}\n", opts.longContext,
                 describeLongContextMemory(rep.longContext->memory, rep.longContext->weightBytes, freeBeforeLoad));
  }
  auto t0 = Clock::now();
  Result<std::unique_ptr<GpuModel>> loaded = Error{""};
  if (!opts.synthetic.empty()) {
    // The full-depth model: bytes planned before anything is allocated, so a model that does not
    // fit is refused with the numbers instead of running out of memory half-way.
    if (mo.kvCacheBytes <= 0) mo.kvCacheBytes = kFullDepthKvBytes;
    const int64_t reserve = rep.longContext ? rep.longContext->memory.total()
                                            : mo.kvCacheBytes + kFullDepthWorkspaceBytes;
    auto plan = planSynthetic(opts.synthetic, freeBeforeLoad, reserve, opts.experts, opts.speculative);
    if (!plan.ok()) {
      fmt::print(stderr, "deepinfer-model-bench: {}\n", plan.error().message);
      return 1;
    }
    auto cfg = syntheticModelConfig(opts.synthetic, plan->experts);
    if (!cfg.ok()) {
      fmt::print(stderr, "deepinfer-model-bench: {}\n", cfg.error().message);
      return 1;
    }
    run.modelDir = fmt::format("synthetic {}, {} layers, {} experts{}",
                               opts.synthetic == "flash" ? "V4.1-Flash" : "proxy", cfg->numHiddenLayers, plan->experts,
                               plan->draft ? ", DSpark draft" : "");
    fmt::print("synthetic {} model ({} layers): {} routed experts per layer, {:.2f} GB of weights{}{}, {:.2f} GB free, "
               "{:.2f} GB kept for the KV cache and workspaces\n",
               opts.synthetic, cfg->numHiddenLayers, plan->experts, double(plan->weightBytes) / 1e9,
               plan->bytesPerExpert > 0
                   ? fmt::format(" ({:.3f} GB per expert in every layer)", double(plan->bytesPerExpert) / 1e9)
                   : std::string(),
               plan->draft ? fmt::format(" + {:.2f} GB of DSpark draft ({} stages, {} experts each)",
                                         double(plan->draftBytes) / 1e9, cfg->numNextnPredictLayers,
                                         cfg->draftRoutedExperts())
                           : std::string(opts.speculative          ? ""
                                         : opts.longContext > 0 ? " (no DSpark draft: --long-context)"
                                                                : " (no DSpark draft: --no-speculative)"),
               double(plan->freeBytes) / 1e9, double(plan->reserveBytes) / 1e9);
    if (!plan->draftLeftOut.empty()) {
      rep.draftLeftOut = plan->draftLeftOut;
      fmt::print("NOTE: no speculative rows: {}\n", plan->draftLeftOut);
    }
    mo.speculative = plan->draft;
    if (rep.longContext) {
      rep.longContext->weightBytes = plan->weightBytes;
      fmt::print("long context {} fits (checked before loading): {}\n", opts.longContext,
                 describeLongContextMemory(rep.longContext->memory, plan->weightBytes, freeBeforeLoad));
    }
    std::fflush(stdout);
    loaded = GpuModel::loadSynthetic(*cfg, opts.seed, *dev, mo);
  } else {
    loaded = GpuModel::load(opts.model, *dev, mo);
  }
  if (!loaded.ok()) {
    fmt::print(stderr, "deepinfer-model-bench: loading {}: {}\n", run.modelDir, loaded.error().message);
    return 1;
  }
  GpuModel& model = **loaded;
  run.loadSeconds = secondsSince(t0);
  run.weightLoadSeconds = model.weightInfo().loadSeconds;
  run.target = model.targetName();
  run.pdl = model.programmaticLaunch();
  rep.cfg = model.config();
  const ModelConfig& cfg = rep.cfg;
  const double embedBytes = double(cfg.vocabSize) * double(cfg.hiddenSize);  // elements of embed
  rep.deviceWeightBytes = double(model.weightInfo().deviceBytes);
  rep.bf16WeightBytes = tokenWeightBytes(cfg, WeightStorage::Bf16, cfg.nRoutedExperts).total() -
                        tokenWeightBytes(cfg, WeightStorage::Bf16, 0).embedRow + 2 * embedBytes;
  rep.checkpointWeightBytes = tokenWeightBytes(cfg, WeightStorage::Checkpoint, cfg.nRoutedExperts).total() -
                              tokenWeightBytes(cfg, WeightStorage::Checkpoint, 0).embedRow + 2 * embedBytes;
  if (model.speculation()) {
    auto draft = draftWeightBytes(cfg);
    rep.draftWeightBytes = draft.ok() ? double(*draft) : 0;
  }
  const GpuKvCapacity& cap = model.capacity();
  KvReport& kv = rep.kv;
  kv.runtimeBytesPerToken = cap.bytesPerToken;
  kv.bytesPerTokenRows = kvCacheBytesPerToken(cfg, 0);
  kv.windowBytesPerRequest = cap.windowBytesPerRequest;
  kv.minWindowBytesPerRequest = minWindowBytesPerRequest(cfg);
  kv.capacityTokens = cap.tokens;
  kv.totalBytes = cap.totalBytes;
  kv.budgetBytes = opts.kvBytes;
  kv.maxRequests = mo.maxRequests;
  fmt::print("loaded {} in {:.0f} s (target {}, programmatic dependent launch {}): {} layers, {} experts; weights {:.2f} GB on the GPU in {:.1f} s; KV "
             "cache {} tokens, {} bytes per token\n",
             run.modelDir, run.loadSeconds, run.target, run.pdl, cfg.numHiddenLayers, cfg.nRoutedExperts,
             rep.deviceWeightBytes / 1e9, run.weightLoadSeconds, cap.tokens, cap.bytesPerToken);
  // Stages and tensor ranks: each rank's, each GPU's and the total weights and KV.
  if (const std::string where = describeGpuStages(model.stages()); !where.empty())
    fmt::print("placement{}\n", where);
  std::fflush(stdout);

  std::mt19937_64 rng(opts.seed);
  bool problems = false;
  if (rep.longContext) {
    LongContextReport& lc = *rep.longContext;
    lc.capacityTokens = cap.tokens;
    if (auto m = (*dev)->memInfo(); m.ok()) lc.freeBytesAfterLoad = int64_t(m->first);
    fmt::print("long context {}: the runtime's KV cache holds {} tokens; {:.2f} GB free after loading\n", lc.context,
               cap.tokens, double(lc.freeBytesAfterLoad) / 1e9);
    if (cap.tokens < lc.context) {
      fmt::print(stderr,
                 "deepinfer-model-bench: the runtime's KV cache holds {} tokens, fewer than the {} planned (budget {} "
                 "bytes)\n",
                 cap.tokens, lc.context, mo.kvCacheBytes);
      return 1;
    }
  }
  // Warm-up: the largest context once (every kernel and shape bucket the timed prefills reach
  // compiles here), then a few decode steps of that request and a batched step. A long-context
  // run warms up on two chunks: its larger shapes compile during the segments (counted there).
  {
    run.warmupTokens = rep.longContext ? 2 * opts.chunk : *std::max_element(opts.contexts.begin(), opts.contexts.end());
    t0 = Clock::now();
    auto req = model.newRequest();
    Status s = req.ok() ? Status{} : Status{req.error()};
    if (s.ok()) {
      auto last = prefillChunks(model, *req, randomIds(rng, run.warmupTokens, cfg.vocabSize), opts.chunk, nullptr);
      if (!last.ok()) s = last.error();
      for (int i = 0; i < 2 && s.ok(); ++i)
        if (auto d = model.decode(*req, 1); !d.ok()) s = d.error();
      (void)model.releaseRequest(*req);
    }
    run.warmupSeconds = secondsSince(t0);
    fmt::print("warm-up: prefill of {} tokens + 2 decode steps in {:.1f} s{}\n", run.warmupTokens, run.warmupSeconds,
               s.ok() ? "" : " FAILED: " + s.error().message);
    std::fflush(stdout);
    problems = !s.ok();
  }

  if (rep.longContext) {
    measureLongContext(model, **dev, opts, ceil, start, rng, *rep.longContext);
    problems = problems || !rep.longContext->error.empty();
    for (const LongDecode& d : rep.longContext->decode) problems = problems || !d.row.error.empty();
  }
  for (int64_t ctx : rep.longContext ? std::vector<int64_t>{} : opts.contexts) {
    rep.prefill.push_back(measurePrefill(model, ctx, opts, ceil, rng));
    const PrefillRow& p = rep.prefill.back();
    if (p.error.empty())
      fmt::print("prefill {}: {:.3f} s, {:.0f} tok/s, TTFT {:.1f} ms\n", ctx, p.seconds, p.tokPerS(), p.firstTokenMs);
    else
      fmt::print("prefill {}: ERROR {}\n", ctx, p.error);
    std::fflush(stdout);
    problems = problems || !p.error.empty();
  }
  for (int s : rep.longContext ? std::vector<int>{} : opts.streams)
    for (bool batched : {true, false}) {
      rep.decode.push_back(measureDecode(model, s, batched, opts, ceil, rng));
      const DecodeRow& d = rep.decode.back();
      if (d.error.empty())
        fmt::print("decode {} stream(s), {}: {:.1f} tok/s ({:.2f} ms per step; a call: {})\n", s,
                   batched ? "batched" : "serial", d.tokPerS(), d.stepMs(), launchesText(d.stepLaunches));
      else
        fmt::print("decode {} stream(s), {}: ERROR {}\n", s, batched ? "batched" : "serial", d.error);
      std::fflush(stdout);
      problems = problems || !d.error.empty();
    }
  if (opts.speculative && model.speculation()) {
    rep.speculative = measureSpeculative(model, opts, rng);
    for (const SpecRow& r : rep.speculative) problems = problems || !r.error.empty();
  } else if (opts.speculative && rep.draftLeftOut.empty()) {
    rep.draftLeftOut = "the model has no DSpark draft (no mtp.* tensors or no DSpark fields in its config)";
  }
  run.totalSeconds = secondsSince(start);
  rep.assumptions = assumptionsFor(rep);
  printModelReport(rep);

  const std::string path = !opts.out.empty() ? opts.out
                                             : fmt::format("benchmarks/results/model-{}{}-{}.json",
                                                           rep.longContext ? "long-context-" : "", slug(run.gpuName),
                                                           utcNow("%Y-%m-%d"));
  std::error_code ec;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::ofstream f(path, std::ios::trunc);
  f << modelReportJson(rep);
  f.close();
  if (!f) {
    fmt::print(stderr, "deepinfer-model-bench: could not write {}{}\n", path, ec ? ": " + ec.message() : "");
    return 1;
  }
  fmt::print("\nwrote {} ({:.0f} s){}\n", path, run.totalSeconds, problems ? "; some measurements FAILED (exit 1)" : "");
  return problems ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto opts = parseModelBenchOptions(argc, argv);
  if (!opts.ok()) {
    fmt::print(stderr, "deepinfer-model-bench: {}\n\n{}", opts.error().message, modelBenchUsage());
    return 2;
  }
  if (opts->help) {
    fmt::print("{}", modelBenchUsage());
    return 0;
  }
  return runModelBench(*opts);
}
