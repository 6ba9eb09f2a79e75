// deepinfer-model-bench's report (benchmarks/ModelBenchReport.h) without a GPU: the DSpark draft's
// bytes and config in the JSON and the table (the full-depth model with its draft), and the reason
// when a draft that was asked for is absent.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "ModelBenchReport.h"
#include "ModelFullDepth.h"

using namespace deepinfer;
using namespace deepinfer::bench;

namespace {

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
