#include "ReportText.h"
#include "ModelBenchReport.h"

#include <fmt/format.h>

#include <cmath>
#include <type_traits>

namespace deepinfer::bench {
namespace {


// A JSON number; null for "not measured" (0) and non-finite values.
std::string jn(double v) {
  if (!std::isfinite(v) || v == 0) return "null";
  return fmt::format("{:.6g}", v);
}

std::string jerr(const std::string& e) { return e.empty() ? "null" : js(e); }

template <typename T>
std::string jlist(const std::vector<T>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_integral_v<T>) o += fmt::format("{}{}", i ? ", " : "", v[i]);  // exact (contexts, ids)
    else o += fmt::format("{}{}", i ? ", " : "", jn(double(v[i])));
  }
  return o + "]";
}

std::string pct(double f) { return f > 0 && std::isfinite(f) ? fmt::format("{:.1f}%", 100 * f) : "-"; }
std::string num(double v, int prec) { return v > 0 && std::isfinite(v) ? fmt::format("{:.{}f}", v, prec) : "-"; }

// The DSpark draft: its config and bytes when loaded, else null fields and why it is absent.
std::string draftJson(const ModelBenchReport& r) {
  const ModelConfig& m = r.cfg;
  if (r.draftWeightBytes <= 0)
    return fmt::format("{{\"stages\": null, \"weight_bytes\": null, \"left_out\": {}}}", jerr(r.draftLeftOut));
  return fmt::format(
      "{{\"stages\": {}, \"block_size\": {}, \"routed_experts\": {}, \"experts_per_token\": {}, "
      "\"markov_rank\": {}, \"target_layers\": {}, \"weight_bytes\": {}, \"left_out\": null}}",
      m.numNextnPredictLayers, m.dsparkBlockSize, m.draftRoutedExperts(), m.draftExpertsPerTok(), m.dspark.markovRank,
      jlist(m.dsparkTargetLayerIds), jn(r.draftWeightBytes));
}

std::string ctxName(int64_t ctx) { return ctx % 1024 == 0 ? fmt::format("{}K", ctx / 1024) : fmt::format("{}", ctx); }

std::string tallyJson(const LaunchTally& t) {
  return fmt::format("{{\"launches\": {}, \"kernels\": {}, \"cublas_calls\": {}, \"memory_ops\": {}}}", t.launches(),
                     t.kernels, t.cublasCalls, t.memoryOps);
}

LaunchTally layersSum(const GpuCallLaunches& l) {
  LaunchTally s;
  for (const LaunchTally& t : l.perLayer) s += t;
  return s;
}

// Each layer's launches, or their range for deep models.
std::string perLayerText(const GpuCallLaunches& l) {
  if (l.perLayer.empty()) return "-";
  std::string o;
  int64_t lo = l.perLayer[0].launches(), hi = lo;
  for (const LaunchTally& t : l.perLayer) {
    o += fmt::format("{}{}", o.empty() ? "" : " ", t.launches());
    lo = std::min(lo, t.launches());
    hi = std::max(hi, t.launches());
  }
  if (l.perLayer.size() <= 12) return o;
  return fmt::format("{}..{} (mean {:.1f})", lo, hi, double(layersSum(l).launches()) / double(l.perLayer.size()));
}

void printLaunches(const std::vector<std::pair<std::string, const GpuCallLaunches*>>& calls) {
  if (calls.empty()) return;
  fmt::print("\nlaunches per forward call (counted where the runtime enqueues work; launches = kernels + cuBLAS calls, "
             "each cuBLAS call counted once; a graph replays its kernel nodes in one host launch)\n");
  fmt::print("{:<40} {:>9} {:>8} {:>7} {:>13} {:>12}  {}\n", "call", "launches", "kernels", "cuBLAS", "copies/fills",
             "graph nodes", "launches per layer");
  for (const auto& [what, l] : calls)
    fmt::print("{:<40} {:>9} {:>8} {:>7} {:>13} {:>12}  {}\n", what, l->total.launches(), l->total.kernels,
               l->total.cublasCalls, l->total.memoryOps, l->graph ? fmt::format("{}", l->graphKernels) : "eager",
               perLayerText(*l));
}

}  // namespace

std::string launchesJson(const GpuCallLaunches& l) {
  std::string layers;
  for (const LaunchTally& t : l.perLayer) layers += fmt::format("{}{}", layers.empty() ? "" : ", ", tallyJson(t));
  return fmt::format(
      "{{\"graph\": {}, \"graph_kernel_nodes\": {}, \"graph_memory_nodes\": {}, "
      "\"graph_programmatic_edges\": {}, \"total\": {}, \"outside_layers\": {}, \"per_layer\": [{}]}}",
      l.graph ? "true" : "false", l.graph ? std::to_string(l.graphKernels) : "null",
      l.graph ? std::to_string(l.graphMemoryNodes) : "null",
      l.graph && l.graphProgrammaticEdges >= 0 ? std::to_string(l.graphProgrammaticEdges) : "null", tallyJson(l.total), tallyJson(l.total - layersSum(l)),
      layers);
}

std::string launchesText(const GpuCallLaunches& l) {
  return fmt::format("{} launches ({} kernels + {} cuBLAS) + {} copies/fills{}", l.total.launches(), l.total.kernels,
                     l.total.cublasCalls, l.total.memoryOps,
                     l.graph ? fmt::format(", one graph of {} kernel nodes ({} programmatic edges)", l.graphKernels,
                                           l.graphProgrammaticEdges >= 0 ? std::to_string(l.graphProgrammaticEdges)
                                                                         : std::string("?"))
                             : ", eager");
}

std::string decodeRowJson(const DecodeRow& d) {
  return fmt::format(
      "{{\"mode\": {}, \"streams\": {}, \"steps\": {}, \"prompt\": {}, \"positions\": [{}, {}], \"error\": {}, "
      "\"repeat_seconds\": {}, \"seconds\": {}, \"tok_s\": {}, \"tok_s_per_stream\": {}, \"step_ms\": {}, "
      "\"distinct_routed_experts_per_layer\": {}, \"weight_bytes_per_step_batched\": {}, "
      "\"weight_bytes_per_token\": {}, \"kv_bytes_per_token\": {{\"window\": {}, \"compressed\": {}, "
      "\"index_keys\": {}, \"total\": {}}}, \"roofline_floor_step_ms\": {}, \"roofline_fraction\": {}, "
      "\"tok_s_roofline\": {}, \"serial_floor_step_ms\": {}, \"serial_roofline_fraction\": {}, "
      "\"launches_per_call\": {}}}",
      js(d.batched ? "batched: one forward call per step over every stream"
                   : "serial: streams stepped one after another, not batched"),
      d.streams, d.steps, d.prompt, d.firstPosition, d.lastPosition, jerr(d.error), jlist(d.repeatSeconds),
      jn(d.seconds), jn(d.tokPerS()), jn(d.tokPerS() / std::max(1, d.streams)), jn(d.stepMs()),
      jn(d.distinctExperts), jn(d.weightBytesBatched), jn(d.weightBytesPerToken), jn(d.kvPerToken.window),
      jn(d.kvPerToken.compressed), jn(d.kvPerToken.indexKeys), jn(d.kvPerToken.total()),
      jn(d.floorSecondsBatched * 1e3), jn(d.fraction()),
      jn(d.floorSecondsBatched > 0 ? d.streams / d.floorSecondsBatched : 0), jn(d.floorSecondsSerial * 1e3),
      jn(d.fractionSerial()), launchesJson(d.stepLaunches));
}

void printModelReport(const ModelBenchReport& r) {
  const Ceilings& c = r.run.ceilings;
  fmt::print("\n{} ({}), driver {}, commit {}, {}; model {} ({} layers, {} experts, hidden {}), target {}, "
             "programmatic dependent launch {}\n",
             r.run.gpuName, r.run.arch, r.run.driver, r.run.commit, r.run.date, r.run.modelDir, r.cfg.numHiddenLayers,
             r.cfg.nRoutedExperts, r.cfg.hiddenSize, r.run.target, r.run.pdl.empty() ? "-" : r.run.pdl);
  fmt::print("measured ceilings: copy {} GB/s, mma.sync bf16 {} TFLOP/s; weights {:.2f} GB on the GPU in the "
             "checkpoint's formats ({:.2f} GB from the config{}, {:.1f} GB if bf16), loaded in {:.1f} s (model {:.0f} s)\n",
             num(c.copyGBs, 0), num(c.mmaTflops, 0), r.deviceWeightBytes / 1e9,
             (r.checkpointWeightBytes + r.draftWeightBytes) / 1e9,
             r.draftWeightBytes > 0 ? fmt::format(" of which {:.2f} GB the DSpark draft", r.draftWeightBytes / 1e9) : "",
             r.bf16WeightBytes / 1e9, r.run.weightLoadSeconds, r.run.loadSeconds);
  if (!r.draftLeftOut.empty()) fmt::print("no speculative rows: {}\n", r.draftLeftOut);

  if (!r.prefill.empty()) {
    fmt::print("\ncold prefill (fresh request, kernels compiled by a warm-up; chunks of {} tokens)\n", r.opts.chunk);
    fmt::print("{:>8} {:>10} {:>10} {:>10} {:>12} {:>10} {:>9}\n", "context", "seconds", "tok/s", "TTFT ms", "TFLOP",
               "floor s", "roofline");
  }
  for (const PrefillRow& p : r.prefill) {
    if (!p.error.empty()) {
      fmt::print("{:>8} ERROR {}\n", ctxName(p.ctx), p.error);
      continue;
    }
    fmt::print("{:>8} {:>10.3f} {:>10.0f} {:>10.1f} {:>12.1f} {:>10.3f} {:>9}\n", ctxName(p.ctx), p.seconds,
               p.tokPerS(), p.firstTokenMs, p.flops.total() / 1e12, p.floorSeconds, pct(p.fraction()));
  }

  if (!r.decode.empty()) {
    fmt::print("\ndecode (prompt {} tokens, {} steps, median of {}; batched: one forward call per step over every "
               "stream; serial: streams stepped one after another, not batched)\n",
               r.opts.promptTokens, r.opts.decodeSteps, r.opts.repeats);
    fmt::print("{:>8} {:>8} {:>10} {:>10} {:>12} {:>14} {:>9} {:>15}\n", "streams", "mode", "tok/s", "step ms",
               "GB per step", "floor step ms", "roofline", "serial roofline");
  }
  for (const DecodeRow& d : r.decode) {
    if (!d.error.empty()) {
      fmt::print("{:>8} {:>8} ERROR {}\n", d.streams, d.batched ? "batched" : "serial", d.error);
      continue;
    }
    fmt::print("{:>8} {:>8} {:>10.1f} {:>10.2f} {:>12.2f} {:>14.3f} {:>9} {:>15}\n", d.streams,
               d.batched ? "batched" : "serial", d.tokPerS(), d.stepMs(),
               (d.weightBytesBatched + d.streams * d.kvPerToken.total()) / 1e9, d.floorSecondsBatched * 1e3,
               pct(d.fraction()), pct(d.fractionSerial()));
  }

  printSpecRows(r.speculative, r.cfg.dsparkBlockSize);
  if (r.longContext) printLongContext(*r.longContext);

  // Launch counts of the calls measured: the launch-bound shapes are the decode steps.
  std::vector<std::pair<std::string, const GpuCallLaunches*>> calls;
  for (const PrefillRow& p : r.prefill)
    if (p.error.empty())
      calls.push_back({fmt::format("prefill chunk at {} ({} tokens)", ctxName(p.ctx), p.chunk), &p.lastChunkLaunches});
  for (const DecodeRow& d : r.decode)
    if (d.error.empty())
      calls.push_back({fmt::format("decode step, {} stream{} ({})", d.streams, d.streams > 1 ? "s" : "",
                                   d.batched ? "batched" : "serial: one stream's call"),
                       &d.stepLaunches});
  if (r.longContext) {
    for (const LongSegment& s : r.longContext->segments)
      calls.push_back({fmt::format("long prefill chunk at {}", ctxName(s.end)), &s.lastChunkLaunches});
    for (const LongDecode& d : r.longContext->decode)
      if (d.row.error.empty())
        calls.push_back({fmt::format("decode step at {} (1 stream)", ctxName(d.context)), &d.row.stepLaunches});
  }
  printLaunches(calls);

  const KvReport& k = r.kv;
  fmt::print("\nKV cache: {} bytes per context token (compressed + index keys of the kv sources; {:.1f} unpadded), "
             "+ {:.2f} MB of window rings per request\n",
             k.runtimeBytesPerToken, k.bytesPerTokenRows, double(k.windowBytesPerRequest) / 1e6);
  for (const PrefillRow& p : r.prefill)
    fmt::print("  at {}: {:.0f} bytes per token with the window amortised\n", ctxName(p.ctx),
               k.amortisedBytesPerToken(p.ctx));
  fmt::print("  tokens per 80 GB = 80e9 / {} = {:.1f} M; this run's cache: {} tokens in {:.1f} GB ({} requests)\n",
             k.runtimeBytesPerToken, k.tokensPer80GB() / 1e6, k.capacityTokens, double(k.totalBytes) / 1e9,
             k.maxRequests);
  fmt::print("\nassumptions:\n");
  for (const std::string& a : r.assumptions) fmt::print("  - {}\n", a);
}

std::string modelReportJson(const ModelBenchReport& r) {
  const Ceilings& c = r.run.ceilings;
  const bool longMode = r.opts.longContext > 0;
  const ModelConfig& m = r.cfg;
  std::string o = "{\n";
  o += fmt::format(
      "  \"benchmark\": \"deepinfer-model-bench\",\n"
      "  \"gpu\": {{\"name\": {}, \"arch\": {}, \"sm_count\": {}, \"memory_bytes\": {}, \"driver\": {}}},\n"
      "  \"commit\": {},\n  \"date\": {},\n  \"mode\": {},\n",
      js(r.run.gpuName), js(r.run.arch), r.run.smCount, r.run.memoryBytes, js(r.run.driver), js(r.run.commit),
      js(r.run.date), js(r.run.mode));
  o += fmt::format(
      "  \"ceilings\": {{\"copy_gb_s\": {}, \"copy_error\": {}, \"mma_bf16_tflop_s\": {}, \"mma_error\": {}}},\n",
      jn(c.copyGBs), jerr(c.copyError), jn(c.mmaTflops), jerr(c.mmaError));
  o += fmt::format(
      "  \"model\": {{\"dir\": {}, \"target\": {}, \"programmatic_launch\": {}, \"layers\": {}, \"hidden\": {}, \"heads\": {}, \"head_dim\": {}, "
      "\"vocab\": {}, \"routed_experts\": {}, \"experts_per_token\": {}, \"shared_experts\": {}, "
      "\"moe_intermediate\": {}, \"sliding_window\": {}, \"index_topk\": {}, \"compress_ratios\": {}, "
      "\"kv_source_layers\": {}, \"index_source_layers\": {}, \"engram_layers\": {}, "
      "\"weight_bytes_device\": {}, \"weight_bytes_checkpoint\": {}, \"weight_bytes_bf16\": {}, "
      "\"weight_load_seconds\": {}, \"load_seconds\": {}, \"draft\": {}}},\n",
      js(r.run.modelDir), js(r.run.target), js(r.run.pdl), m.numHiddenLayers, m.hiddenSize, m.numAttentionHeads, m.headDim,
      m.vocabSize, m.nRoutedExperts, m.numExpertsPerTok, m.nSharedExperts, m.moeIntermediateSize, m.slidingWindow,
      m.indexTopk,
      jlist(std::vector<int>(m.compressRatios.begin(), m.compressRatios.begin() + m.numHiddenLayers)),
      jlist(m.kvSourceLayerIds), jlist(m.indexSourceLayerIds), jlist(m.engramLayerIds), jn(r.deviceWeightBytes),
      jn(r.checkpointWeightBytes), jn(r.bf16WeightBytes), jn(r.run.weightLoadSeconds), jn(r.run.loadSeconds),
      draftJson(r));
  o += fmt::format(
      "  \"options\": {{\"contexts\": {}, \"streams\": {}, \"decode_steps\": {}, \"chunk\": {}, \"prompt\": {}, "
      "\"repeats\": {}, \"kv_bytes\": {}, \"seed\": {}, \"long_context\": {}, \"decode_contexts\": {}, "
      "\"segment\": {}, \"time_budget_s\": {}}},\n",
      jlist(longMode ? std::vector<int64_t>{} : r.opts.contexts),
      jlist(longMode ? std::vector<int>{} : r.opts.streams), r.opts.decodeSteps, r.opts.chunk,
      longMode ? "null" : std::to_string(r.opts.promptTokens), r.opts.repeats, r.opts.kvBytes, r.opts.seed,
      longMode ? std::to_string(r.opts.longContext) : "null",
      jlist(longMode ? r.opts.decodeContexts : std::vector<int64_t>{}),
      longMode ? std::to_string(r.opts.segment) : "null",
      longMode && r.opts.timeBudget > 0 ? std::to_string(r.opts.timeBudget) : "null");
  o += fmt::format("  \"warmup\": {{\"tokens\": {}, \"seconds\": {}}},\n", r.run.warmupTokens,
                   jn(r.run.warmupSeconds));

  o += "  \"prefill\": [";
  for (size_t i = 0; i < r.prefill.size(); ++i) {
    const PrefillRow& p = r.prefill[i];
    o += fmt::format(
        "{}\n    {{\"context\": {}, \"chunk\": {}, \"error\": {}, \"seconds\": {}, \"tok_s\": {}, "
        "\"time_to_first_token_ms\": {}, \"sample_ms\": {}, \"flops\": {{\"linear\": {}, \"head\": {}, "
        "\"attention\": {}, \"indexer\": {}, \"total\": {}}}, \"weight_bytes_read\": {}, "
        "\"roofline_floor_seconds\": {}, \"roofline_fraction\": {}, \"tok_s_roofline\": {}, "
        "\"kv_bytes_per_token_window_amortised\": {}, \"launches_last_chunk\": {}, \"chunk_ms\": {}}}",
        i ? "," : "", p.ctx, p.chunk, jerr(p.error), jn(p.seconds), jn(p.tokPerS()), jn(p.firstTokenMs),
        jn(p.sampleMs), jn(p.flops.linear), jn(p.flops.head), jn(p.flops.attention), jn(p.flops.indexer),
        jn(p.flops.total()), jn(p.weightBytes), jn(p.floorSeconds), jn(p.fraction()),
        jn(p.floorSeconds > 0 ? double(p.ctx) / p.floorSeconds : 0), jn(r.kv.amortisedBytesPerToken(p.ctx)),
        launchesJson(p.lastChunkLaunches), jlist(p.chunkMs));
  }
  o += "\n  ],\n";

  o += "  \"decode\": [";
  for (size_t i = 0; i < r.decode.size(); ++i) o += fmt::format("{}\n    {}", i ? "," : "", decodeRowJson(r.decode[i]));
  o += "\n  ],\n";

  if (!r.speculative.empty()) o += fmt::format("  \"speculative\": {},\n", specRowsJson(r.speculative));
  if (r.longContext) o += fmt::format("  \"long_context\": {},\n", longContextJson(*r.longContext));

  const KvReport& k = r.kv;
  o += fmt::format(
      "  \"kv\": {{\"bytes_per_token\": {}, \"bytes_per_token_unpadded\": {}, \"window_bytes_per_request\": {}, "
      "\"window_bytes_per_request_min\": {}, \"tokens_per_80gb\": {}, \"tokens_per_80gb_formula\": {}, "
      "\"capacity_tokens\": {}, \"cache_total_bytes\": {}, \"budget_bytes\": {}, \"max_requests\": {}}},\n",
      k.runtimeBytesPerToken, jn(k.bytesPerTokenRows), k.windowBytesPerRequest, jn(k.minWindowBytesPerRequest),
      jn(k.tokensPer80GB()), js("80e9 / bytes_per_token"), k.capacityTokens, k.totalBytes, k.budgetBytes,
      k.maxRequests);
  o += "  \"assumptions\": [";
  for (size_t i = 0; i < r.assumptions.size(); ++i) o += fmt::format("{}\n    {}", i ? "," : "", js(r.assumptions[i]));
  o += "\n  ],\n";
  o += fmt::format("  \"seconds\": {}\n}}\n", jn(r.run.totalSeconds));
  return o;
}

}  // namespace deepinfer::bench
