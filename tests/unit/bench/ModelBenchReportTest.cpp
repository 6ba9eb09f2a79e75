// deepinfer-model-bench's report without a GPU (benchmarks/ModelBenchReport.h): launches per
// forward call (total, per layer, outside the layers, graph nodes), the long-context part
// (segments, decode at each context, how flat), the DSpark draft's bytes and config (the
// full-depth model with its draft) and the reason when a draft that was asked for is absent, in
// the JSON file and the table.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "ModelBenchReport.h"
#include "ModelFullDepth.h"
#include "llvm/Support/JSON.h"
#include "model/MakeModelPresets.h"

using namespace deepinfer;
using namespace deepinfer::bench;

namespace {

// A 7-layer call: every layer 20 kernels + 3 cuBLAS + 2 copies; outside them 2 kernels (embedding,
// last-row gather), the head (cuBLAS) and 4 uploads.
GpuCallLaunches call(bool graph) {
  GpuCallLaunches l;
  l.perLayer.assign(7, LaunchTally{20, 3, 2});
  l.total = {7 * 20 + 2, 7 * 3 + 1, 7 * 2 + 4};
  l.graph = graph;
  if (graph) {
    l.graphKernels = 170;
    l.graphMemoryNodes = 18;
    l.graphProgrammaticEdges = 150;
  }
  return l;
}

DecodeRow decodeRow(double seconds, int64_t position) {
  DecodeRow d;
  d.batched = true;
  d.streams = 1;
  d.steps = 32;
  d.firstPosition = position;
  d.lastPosition = position + 95;
  d.seconds = seconds;
  d.repeatSeconds = {seconds, seconds, seconds};
  d.stepLaunches = call(true);
  return d;
}

ModelBenchReport longReport() {
  ModelBenchReport r;
  auto cfg = makeModelPresetConfig("proxy");
  EXPECT_TRUE(cfg.ok());
  r.cfg = *cfg;
  r.opts.model = "/tmp/proxy";
  r.opts.longContext = 1048576;
  r.opts.speculative = false;
  LongContextReport l;
  l.context = 1048576;
  l.chunk = 1024;
  l.segment = 131072;
  l.decodeTokens = 98;
  l.promptTokens = 1048576 - 98;
  l.reached = l.promptTokens;
  l.memory = *longContextMemory(r.cfg, l.context, l.chunk, 2);
  l.weightBytes = int64_t(29e9);
  l.freeBytesBeforeLoad = int64_t(150e9);
  l.capacityTokens = 1049000;
  l.freeBytesAfterLoad = int64_t(100e9);
  l.freeBytesAfterPrefill = int64_t(92e9);
  for (int64_t b = 0; b < l.promptTokens; b += l.segment) {
    LongSegment s;
    s.begin = b;
    s.end = std::min(b + l.segment, l.promptTokens);
    s.chunks = int((s.end - s.begin + 1023) / 1024);
    s.seconds = 10.0 + double(b) / 131072;  // slower as the context grows
    s.floorSeconds = 1.0;
    s.lastChunkLaunches = call(false);
    l.segments.push_back(s);
    l.prefillSeconds += s.seconds;
  }
  l.firstTokenMs = l.prefillSeconds * 1e3 + 0.4;
  l.chunkMs = {9.5, 9.7};
  for (int64_t c : {16384, 131072, 1048576}) {
    LongDecode d;
    d.context = c;
    d.prefillTokens = c - 98;
    d.prefillSeconds = double(c) / 10000;
    d.row = decodeRow(c == 1048576 ? 32 * 0.005 : 32 * 0.004, c - 98);
    l.decode.push_back(d);
  }
  r.longContext = l;
  return r;
}

const llvm::json::Object& obj(const llvm::json::Value* v) { return *v->getAsObject(); }

TEST(ModelBenchReport, LaunchesJsonSplitsLayersAndOutside) {
  auto v = llvm::json::parse(launchesJson(call(true)));
  ASSERT_TRUE(bool(v)) << llvm::toString(v.takeError());
  const llvm::json::Object& o = *v->getAsObject();
  EXPECT_EQ(o.getBoolean("graph"), true);
  EXPECT_EQ(*o.getInteger("graph_kernel_nodes"), 170);
  EXPECT_EQ(*o.getInteger("graph_programmatic_edges"), 150);
  EXPECT_EQ(*obj(o.get("total")).getInteger("launches"), 142 + 22);
  EXPECT_EQ(*obj(o.get("outside_layers")).getInteger("kernels"), 2);
  EXPECT_EQ(*obj(o.get("outside_layers")).getInteger("cublas_calls"), 1);
  EXPECT_EQ(*obj(o.get("outside_layers")).getInteger("memory_ops"), 4);
  ASSERT_EQ(o.getArray("per_layer")->size(), 7u);
  EXPECT_EQ(*obj(&(*o.getArray("per_layer"))[3]).getInteger("launches"), 23);
  v = llvm::json::parse(launchesJson(call(false)));
  ASSERT_TRUE(bool(v));
  EXPECT_TRUE(v->getAsObject()->get("graph_kernel_nodes")->getAsNull());
  EXPECT_TRUE(v->getAsObject()->get("graph_programmatic_edges")->getAsNull());
  EXPECT_EQ(launchesText(call(true)), "164 launches (142 kernels + 22 cuBLAS) + 18 copies/fills, one graph of 170 "
                                      "kernel nodes (150 programmatic edges)");
  GpuCallLaunches unknown = call(true);
  unknown.graphProgrammaticEdges = -1;  // the driver did not report the edges
  EXPECT_NE(launchesText(unknown).find("(? programmatic edges)"), std::string::npos);
}

TEST(ModelBenchReport, LongContextJson) {
  const ModelBenchReport r = longReport();
  auto v = llvm::json::parse(modelReportJson(r));
  ASSERT_TRUE(bool(v)) << llvm::toString(v.takeError());
  const llvm::json::Object& top = *v->getAsObject();
  EXPECT_EQ(*obj(top.get("options")).getInteger("long_context"), 1048576);
  EXPECT_TRUE(obj(top.get("options")).getArray("contexts")->empty());
  const llvm::json::Object& l = obj(top.get("long_context"));
  EXPECT_EQ(*l.getInteger("context"), 1048576);
  EXPECT_EQ(*l.getInteger("decode_tokens"), 98);
  const llvm::json::Object& mem = obj(l.get("memory"));
  EXPECT_EQ(*mem.getInteger("kv_bytes"), r.longContext->memory.kvBytes);
  EXPECT_EQ(*mem.getInteger("total_bytes"), int64_t(29e9) + r.longContext->memory.total());
  EXPECT_EQ(*mem.getInteger("forward_bytes_measured"), int64_t(8e9));
  const llvm::json::Object& p = obj(l.get("prefill"));
  EXPECT_EQ(p.getBoolean("complete"), true);
  EXPECT_EQ(p.getBoolean("stopped_by_time_budget"), false);
  ASSERT_EQ(p.getArray("segments")->size(), 8u);
  const llvm::json::Object& s0 = *(*p.getArray("segments"))[0].getAsObject();
  EXPECT_EQ(*s0.getInteger("end"), 131072);
  EXPECT_DOUBLE_EQ(*s0.getNumber("tok_s"), 13107.2);
  EXPECT_DOUBLE_EQ(*s0.getNumber("roofline_fraction"), 0.1);
  EXPECT_EQ(*(*p.getArray("segments"))[7].getAsObject()->getInteger("end"), 1048576 - 98);
  EXPECT_NEAR(*p.getNumber("time_to_first_token_ms"), r.longContext->firstTokenMs, 1e-3 * r.longContext->firstTokenMs);
  const llvm::json::Array& dec = *l.getArray("decode");
  ASSERT_EQ(dec.size(), 3u);
  EXPECT_DOUBLE_EQ(*obj(dec[0].getAsObject()->get("decode")).getNumber("tok_s"), 250);
  EXPECT_DOUBLE_EQ(*obj(dec[2].getAsObject()->get("decode")).getNumber("tok_s"), 200);
  EXPECT_EQ(obj(obj(dec[2].getAsObject()->get("decode")).get("launches_per_call")).getBoolean("graph"), true);
  const llvm::json::Object& flat = obj(l.get("decode_flatness"));
  EXPECT_DOUBLE_EQ(*flat.getNumber("ratio"), 0.8);
  EXPECT_EQ(*flat.getInteger("from_context"), 16384);
  EXPECT_EQ(*flat.getInteger("to_context"), 1048576);
  EXPECT_TRUE(top.getArray("prefill")->empty());
  EXPECT_TRUE(top.getArray("decode")->empty());
}

TEST(ModelBenchReport, StoppedLongPrefillHasNoFirstToken) {
  ModelBenchReport r = longReport();
  LongContextReport& l = *r.longContext;
  l.stopped = true;
  l.timeBudget = 480;
  l.reached = 600000;
  l.decode.pop_back();
  auto v = llvm::json::parse(modelReportJson(r));
  ASSERT_TRUE(bool(v)) << llvm::toString(v.takeError());
  const llvm::json::Object& p = obj(obj(v->getAsObject()->get("long_context")).get("prefill"));
  EXPECT_EQ(p.getBoolean("complete"), false);
  EXPECT_EQ(p.getBoolean("stopped_by_time_budget"), true);
  EXPECT_TRUE(p.get("time_to_first_token_ms")->getAsNull());
  ::testing::internal::CaptureStdout();
  printLongContext(l);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("STOPPED at position 600000"), std::string::npos) << out;
  EXPECT_NE(out.find("the remaining segments were not measured"), std::string::npos) << out;
}

TEST(ModelBenchReport, TableShowsSegmentsFlatnessAndLaunches) {
  const ModelBenchReport r = longReport();
  ::testing::internal::CaptureStdout();
  printModelReport(r);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("long context: 1048576 tokens in chunks of 1024; weights 29.00 GB + KV cache"), std::string::npos)
      << out;
  EXPECT_NE(out.find("0K..128K"), std::string::npos) << out;
  EXPECT_NE(out.find("896K..1048478"), std::string::npos) << out;
  EXPECT_NE(out.find("how flat: decode at 1024K runs at 0.80x the tok/s at 16K"), std::string::npos) << out;
  EXPECT_NE(out.find("device memory the forward passes took by the end of the long prefill: 8.00 GB"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("launches per forward call"), std::string::npos) << out;
  EXPECT_NE(out.find("decode step at 1024K (1 stream)"), std::string::npos) << out;
  EXPECT_NE(out.find("23 23 23 23 23 23 23"), std::string::npos) << out;  // launches of each of the 7 layers
}

ModelBenchReport fullDepthReport() {
  ModelBenchReport r;
  auto cfg = fullDepthConfig(128);
  EXPECT_TRUE(cfg.ok());
  r.cfg = *cfg;
  r.run.modelDir = "synthetic V4.1-Flash, 40 layers, 128 experts, DSpark draft";
  r.checkpointWeightBytes = 106.0e9;
  auto draft = draftWeightBytes(r.cfg);
  EXPECT_TRUE(draft.ok());
  r.draftWeightBytes = double(*draft);
  r.deviceWeightBytes = r.checkpointWeightBytes + r.draftWeightBytes;
  return r;
}

TEST(ModelBenchReport, DraftBytesAndConfigInJsonAndTable) {
  const ModelBenchReport r = fullDepthReport();
  const std::string j = modelReportJson(r);
  EXPECT_NE(j.find(R"("draft": {"stages": 3, "block_size": 5, "routed_experts": 128, "experts_per_token": 3, )"
                   R"("markov_rank": 256, "target_layers": [37, 38, 39], "weight_bytes": 7.93287e+09, )"
                   R"("left_out": null})"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find(R"("weight_bytes_device": 1.13933e+11)"), std::string::npos) << j;

  testing::internal::CaptureStdout();
  printModelReport(r);
  std::fflush(stdout);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("weights 113.93 GB on the GPU in the checkpoint's formats (113.93 GB from the config of which "
                     "7.93 GB the DSpark draft"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("no speculative rows"), std::string::npos) << out;
}

TEST(ModelBenchReport, AMissingDraftSaysWhy) {
  ModelBenchReport r = fullDepthReport();
  r.draftWeightBytes = 0;
  r.deviceWeightBytes = r.checkpointWeightBytes;
  r.draftLeftOut = "the DSpark draft (7.39 GiB: ...) does not fit next to 384 routed experts per layer";
  const std::string j = modelReportJson(r);
  EXPECT_NE(j.find(R"("draft": {"stages": null, "weight_bytes": null, "left_out": "the DSpark draft (7.39 GiB: ...) )"
                   R"(does not fit next to 384 routed experts per layer"})"),
            std::string::npos)
      << j;
  testing::internal::CaptureStdout();
  printModelReport(r);
  std::fflush(stdout);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("no speculative rows: the DSpark draft (7.39 GiB: ...) does not fit"), std::string::npos) << out;
  EXPECT_EQ(out.find("speculative decoding (DSpark"), std::string::npos) << out;
}

}  // namespace
