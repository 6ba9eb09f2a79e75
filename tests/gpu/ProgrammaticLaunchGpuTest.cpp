// Programmatic dependent launch (deepinfer/ProgrammaticLaunch.h) on a 9.0+ GPU: a kernel is
// launched while the previous one of its stream drains and waits for it in its first statement
// (templates/common/GridDependency.cuh). Same kernels in the same order, so results must not
// change by a bit:
//  - ops whose launch plan chains several kernels (moe_experts route -> w13 -> w2, split weight
//    GEMMs, mHC stream -> finalize, split sparse attention -> merge, topk passes) on a real
//    stream, against the C++ reference on fresh random inputs with outputs poisoned;
//  - the tiny model's decode steps replayed as CUDA graphs with PDL on against the same with PDL
//    off, bit for bit, at batch sizes 1 and 3, over steps that force fresh captures;
//  - the graphs with PDL on hold programmatic edges, those with it off none.
// Skips without a GPU, and the PDL-specific checks skip on a GPU below sm_90.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>

#include "CompareOnGpu.h"
#include "GpuTestDevice.h"
#include "PrecompileKernels.h"
#include "TinyModelDir.h"
#include "cases/OpCases.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/ProgrammaticLaunch.h"
#include "deepinfer/Reference.h"
#include "model/CpuForward.h"
#include "model/gpu/GpuModel.h"

using namespace deepinfer;

namespace {

bool gpuDoesPdl(const Device& dev) { return dev.info().profile.arch() >= 90; }

}  // namespace

TEST(ProgrammaticLaunchGpu, ChainedLaunchPlansOnAStreamMatchTheReference) {
  const auto& g = testing_util::gpuTestDevice();
  if (!g.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << g.why;
  if (!gpuDoesPdl(*g.dev)) GTEST_SKIP() << "programmatic dependent launch needs sm_90+";
  JitOptions jo;
  jo.programmaticLaunch = true;
  Jit jit(g.dev, jo);
  const TargetProfile native = g.dev->info().profile;
  ASSERT_TRUE(useProgrammaticLaunch({true, true, native.arch(), native.arch(), false}));
  auto stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.error().message;
  int compared = 0, chained = 0;
  for (const char* op : {"moe_experts", "weight_gemm", "mhc_pre", "mhc_post", "mhc_fused_post_pre", "sparse_mla_decode",
                         "topk"}) {
    auto cases = deepinfer::testing::casesFor(op, g.seed, /*large=*/false);
    ASSERT_FALSE(cases.empty()) << op;
    testing_util::precompileKernels(jit, testing_util::defaultKernels(op, cases, {native}));
    for (const auto& c : cases) {
      TensorMap ref = c.inputs;
      auto rs = runReference(op, c.attrs, ref);
      ASSERT_TRUE(rs.ok()) << op << " [" << c.name << "]: reference failed: " << rs.error().message;
      GpuRunOptions opts;
      opts.stream = stream->handle();
      std::shared_ptr<const LoadedKernel> ran;
      testing_util::runAndCompare(
          jit, op, c, native, opts, ref, compared, [](const auto&, const auto&, const auto&) {}, &ran,
          " with programmatic launches");
      if (::testing::Test::HasFatalFailure()) return;
      chained += ran->kernel.plan.size() > 1;
    }
  }
  fmt::print("programmatic launches: {} outputs compared, {} cases with chained launch plans\n", compared, chained);
  EXPECT_GT(chained, 5) << "too few multi-kernel plans exercised";
}

namespace {

struct PdlModels : testing_util::TinyModelEnv {
  std::unique_ptr<GpuModel> on, off;
};

PdlModels& models() {
  static PdlModels m = [] {
    PdlModels m;
    if (!m.open("pdl")) return m;
    GpuModelOptions go;
    go.kvCacheBytes = int64_t(256) << 20;
    go.maxRequests = 4;
    go.maxChunkTokens = 128;
    go.cudaGraphs = true;
    go.jit.programmaticLaunch = true;
    if (!(m.on = m.loadGpu(go))) return m;
    go.jit.programmaticLaunch = false;
    m.off = m.loadGpu(go);
    return m;
  }();
  return m;
}

}  // namespace

TEST(ProgrammaticLaunchGpu, ModelDecodeGraphsWithPdlMatchWithoutBitForBit) {
  PdlModels& m = models();
  if (!m.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << m.why;
  ASSERT_TRUE(m.on && m.off);
  const bool pdl = gpuDoesPdl(*m.dev);
  EXPECT_EQ(m.on->programmaticLaunch() == "on", pdl) << m.on->programmaticLaunch();
  EXPECT_NE(m.off->programmaticLaunch().find("off"), std::string::npos) << m.off->programmaticLaunch();
  const int64_t V = m.on->config().vocabSize;
  int differing = 0, rows = 0;
  int64_t edgesOn = 0, edgesOff = 0, graphSteps = 0;  // reported; asserted in the test below
  for (int batch : {1, 3}) {
    std::vector<int64_t> ron, roff;
    std::vector<std::pair<int64_t, std::vector<int32_t>>> won, woff;
    for (int b = 0; b < batch; ++b) {
      auto a = m.on->newRequest();
      auto z = m.off->newRequest();
      ASSERT_TRUE(a.ok() && z.ok());
      ron.push_back(*a);
      roff.push_back(*z);
      const auto prompt = testing_util::randomIds(20 + 17 * b, m.seed + 40 + uint64_t(10 * batch + b), V);
      won.push_back({*a, prompt});
      woff.push_back({*z, prompt});
    }
    auto pa = m.on->forward(won, true);
    auto pz = m.off->forward(woff, true);
    ASSERT_TRUE(pa.ok()) << pa.error().message;
    ASSERT_TRUE(pz.ok()) << pz.error().message;
    std::vector<int32_t> next(static_cast<size_t>(batch));
    for (int b = 0; b < batch; ++b) {
      differing += std::memcmp((*pa)[size_t(b)].ptr<float>(), (*pz)[size_t(b)].ptr<float>(), size_t(V) * 4) != 0;
      ++rows;
      next[size_t(b)] = argmaxToken((*pz)[size_t(b)].ptr<float>(), V);
    }
    const auto launchesBefore = m.on->counters().graphLaunches;
    const int steps = 20;  // the longest prompt crosses a 64-entry page: a new graph shape mid-run
    for (int s = 0; s < steps; ++s) {
      won.clear();
      woff.clear();
      for (int b = 0; b < batch; ++b) {
        won.push_back({ron[size_t(b)], {next[size_t(b)]}});
        woff.push_back({roff[size_t(b)], {next[size_t(b)]}});
      }
      auto a = m.on->forward(won, true);
      ASSERT_TRUE(a.ok()) << a.error().message;
      const GpuCallLaunches la = m.on->lastCallLaunches();
      auto z = m.off->forward(woff, true);
      ASSERT_TRUE(z.ok()) << z.error().message;
      const GpuCallLaunches lz = m.off->lastCallLaunches();
      if (la.graph && lz.graph) {
        ++graphSteps;
        edgesOn += la.graphProgrammaticEdges;
        edgesOff += lz.graphProgrammaticEdges;
        EXPECT_EQ(la.graphKernels, lz.graphKernels) << "the same kernels either way";
      }
      for (int b = 0; b < batch; ++b) {
        const bool same =
            std::memcmp((*a)[size_t(b)].ptr<float>(), (*z)[size_t(b)].ptr<float>(), size_t(V) * 4) == 0;
        differing += !same;
        ++rows;
        EXPECT_TRUE(same) << "batch " << batch << " step " << s << " row " << b << " differs with PDL on";
        next[size_t(b)] = argmaxToken((*z)[size_t(b)].ptr<float>(), V);
      }
    }
    EXPECT_EQ(m.on->counters().graphLaunches - launchesBefore, steps) << "every decode step should replay a graph";
    for (int64_t r : ron) EXPECT_TRUE(m.on->releaseRequest(r).ok());
    for (int64_t r : roff) EXPECT_TRUE(m.off->releaseRequest(r).ok());
  }
  fmt::print("{{\"test\":\"pdl_on_vs_off\",\"rows\":{},\"rows_differing\":{},\"graph_steps\":{},"
             "\"programmatic_edges_on\":{},\"programmatic_edges_off\":{},\"pdl\":\"{}\"}}\n",
             rows, differing, graphSteps, edgesOn, edgesOff, m.on->programmaticLaunch());
  EXPECT_EQ(differing, 0);
  EXPECT_EQ(graphSteps, 40);
}

TEST(ProgrammaticLaunchGpu, DecodeGraphsHoldProgrammaticEdgesOnlyWithPdlOn) {
  // Stream capture turns a programmatic launch after a kernel of the same stream into a
  // programmatic edge; without them PDL saves nothing in the graphs.
  PdlModels& m = models();
  if (!m.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << m.why;
  ASSERT_TRUE(m.on && m.off);
  const int64_t V = m.on->config().vocabSize;
  const auto prompt = testing_util::randomIds(30, m.seed + 90, V);
  int64_t edges[2] = {-2, -2}, kernels[2] = {0, 0};
  GpuModel* models2[2] = {m.on.get(), m.off.get()};
  for (int i = 0; i < 2; ++i) {
    GpuModel& g = *models2[i];
    auto r = g.newRequest();
    ASSERT_TRUE(r.ok());
    auto p = g.prefill(*r, prompt, true);
    ASSERT_TRUE(p.ok()) << p.error().message;
    int32_t next = argmaxToken(p->ptr<float>(), V);
    for (int s = 0; s < 3; ++s) {  // the first step may capture; later ones replay
      auto d = g.decode(*r, next);
      ASSERT_TRUE(d.ok()) << d.error().message;
      next = argmaxToken(d->data(), V);
    }
    const GpuCallLaunches& l = g.lastCallLaunches();
    ASSERT_TRUE(l.graph);
    edges[i] = l.graphProgrammaticEdges;
    kernels[i] = l.graphKernels;
    EXPECT_TRUE(g.releaseRequest(*r).ok());
  }
  fmt::print("decode graph: {} kernel nodes; programmatic edges: {} with PDL on, {} with it off\n", kernels[0],
             edges[0], edges[1]);
  EXPECT_EQ(edges[1], 0) << "PDL off must capture no programmatic edge";
  if (!gpuDoesPdl(*m.dev)) {
    EXPECT_EQ(edges[0], 0);
    GTEST_SKIP() << "programmatic dependent launch needs sm_90+";
  }
  EXPECT_GT(edges[0], 0) << "PDL on should capture kernel -> kernel edges as programmatic";
}
