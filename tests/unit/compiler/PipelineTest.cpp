// The pipeline builds the op in a module that carries the target and returns what the passes
// wrote into the IR. No process-wide state: pipelines run in parallel (the JIT's precompile and
// `tune` rely on it), and a profile no preset has (the local GPU's) needs no registration.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <thread>

#include "deepinfer/OpShapes.h"
#include "deepinfer/OpSignature.h"
#include "deepinfer/Pipeline.h"

using namespace deepinfer;

namespace {

// What a pipeline run decided, as one comparable string.
std::string summary(const PipelineResult& p) {
  std::string s = configToString(p.config.config) + "\n" + p.kernel.baseName + "\n" + p.kernel.unit.source;
  for (const auto& st : p.kernel.plan)
    s += fmt::format("{} {},{},{} {},{},{} {}\n", st.entry, st.grid[0], st.grid[1], st.grid[2], st.block[0],
                     st.block[1], st.block[2], st.dynamicSmem);
  return s + std::to_string(p.kernel.workspaceBytes) + "\n" + std::to_string(p.spec.fitting.size());
}

// A part no preset describes (as a local GPU's profile would be): 20 SMs, odd bandwidth and L2,
// and optionally a lower per-CTA cap.
TargetProfile oddPart(int64_t cap = 48 * 1024) {
  TargetProfile t = *findTarget("sm_86");
  t.name = "local";
  t.smCount = 20;
  t.smemPerCtaCap = cap;
  t.memBandwidthGBs = 123.25;
  t.l2Bytes = 3 << 20;
  return t;
}

TEST(Pipeline, ReturnsWhatThePassesWroteIntoTheIr) {
  auto d = makeOpDesc("sparse_mla_decode", {{"B", 6}}, {});
  ASSERT_TRUE(d.ok());
  PipelineIr ir;
  auto p = runKernelPipeline(*d, *findTarget("sm_86"), std::nullopt, &ir);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_NE(ir.input.find("module attributes {di.target = #di.target<name = \"sm_86\""), std::string::npos);
  EXPECT_NE(ir.emitted.find("di.kernel = \"" + p->kernel.baseName + "\""), std::string::npos);
  EXPECT_NE(ir.emitted.find("di.launch = [{"), std::string::npos);
  // The emitted unit is the family's for the config the pass chose.
  auto k = emitKernel(*d, p->config.config);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->unit.source, p->kernel.unit.source);
  EXPECT_EQ(k->workspaceBytes, p->kernel.workspaceBytes);
  ASSERT_EQ(k->plan.size(), p->kernel.plan.size());
  for (size_t i = 0; i < k->plan.size(); ++i) {
    EXPECT_EQ(k->plan[i].entry, p->kernel.plan[i].entry);
    EXPECT_EQ(k->plan[i].grid, p->kernel.plan[i].grid);
    EXPECT_EQ(k->plan[i].block, p->kernel.plan[i].block);
  }
  EXPECT_EQ(p->kernel.unit.entries, k->unit.entries);
}

TEST(Pipeline, TheTargetComesFromTheModuleNotFromARegistry) {
  auto d = makeOpDesc("topk", {{"T", 4}, {"N", 9000}, {"k", 16}}, {});
  ASSERT_TRUE(d.ok());
  const TargetProfile odd = oddPart(32 * 1024);
  auto p = runKernelPipeline(*d, odd);
  ASSERT_TRUE(p.ok()) << p.error().message;
  // The pass saw the 32 KB cap: the default's pool fits it, and so does every candidate.
  EXPECT_LE(p->config.estimate.smemBytes, odd.smemPerCtaCap);
  for (const auto& c : p->spec.fitting) EXPECT_LE(c.estimate.smemBytes, odd.smemPerCtaCap);
  auto spec = specialize(*d, odd);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(p->config.config, spec->chosen.config);
  EXPECT_EQ(p->spec.fitting.size(), spec->fitting.size());
  // The name alone means nothing to the presets.
  EXPECT_FALSE(findTarget("local").has_value());
}

TEST(Pipeline, RunsInParallelWithTheSameResults) {
  std::vector<std::pair<OpDesc, TargetProfile>> work;
  for (const auto& sig : opSignatures()) {
    auto d = makeOpDesc(sig.op, {}, {});
    ASSERT_TRUE(d.ok()) << sig.op;
    for (const TargetProfile& t : {*findTarget("sm_80"), *findTarget("sm_90"), oddPart()}) work.push_back({*d, t});
  }
  std::vector<std::string> sequential;
  for (const auto& [d, t] : work) {
    auto p = runKernelPipeline(d, t);
    ASSERT_TRUE(p.ok()) << d.op << " on " << t.name << ": " << p.error().message;
    sequential.push_back(summary(*p));
  }
  std::vector<std::string> parallel(work.size());
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      for (size_t i = w; i < work.size(); i += 4) {
        auto p = runKernelPipeline(work[i].first, work[i].second);
        parallel[i] = p.ok() ? summary(*p) : "error: " + p.error().message;
      }
    });
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < work.size(); ++i)
    EXPECT_EQ(parallel[i], sequential[i]) << work[i].first.op << " on " << work[i].second.name;
}

TEST(Pipeline, ABadDescriptionIsTheFamilysMessage) {
  auto d = makeOpDesc("sparse_mla_decode", {{"H", 12}}, {});
  ASSERT_TRUE(d.ok());
  auto p = runKernelPipeline(*d, *findTarget("sm_80"));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("q has 12 heads; heads must be a multiple of 8 in 8..128"), std::string::npos)
      << p.error().message;
}

}  // namespace
