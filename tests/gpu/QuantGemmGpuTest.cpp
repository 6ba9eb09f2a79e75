// The quantized-weight ops as the GPU forward pass calls them (runtime/model/gpu/QuantGemmOps.h): through
// DiOps on device buffers for the local arch and the sm_80 / sm_86 PTX, moe_experts captured in a
// CUDA graph and replayed with new routing decisions written into the same buffers (no host round
// trip, launch sizes from the shapes only), and weight_gemm reading a column slice of a wider
// activation and writing a column slice of a wider output (the view's elements checked, the rest
// untouched), and every prefill tile candidate of both ops on every target. Outputs are compared
// with the C++ references by the GPU tests' rule.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "GpuTestDevice.h"
#include "PrecompileKernels.h"
#include "cases/OpCases.h"
#include "deepinfer/DeviceGraph.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Reference.h"
#include "deepinfer/Specialize.h"
#include "deepinfer/TensorView.h"
#include "deepinfer/ViewLaunch.h"
#include "model/gpu/QuantGemmOps.h"

using namespace deepinfer;

namespace {

struct Env {
  std::shared_ptr<Device> dev;
  std::unique_ptr<Jit> jit;
  std::string why;
  uint64_t seed = 0;
};

Env& env() {
  static Env e = [] {
    Env e;
    const auto& g = testing_util::gpuTestDevice();
    e.seed = g.seed;
    if (!g.dev) {
      e.why = g.why;
      return e;
    }
    e.dev = g.dev;
    e.jit = std::make_unique<Jit>(e.dev);
    return e;
  }();
  return e;
}

std::vector<TargetProfile> targets() {
  std::vector<TargetProfile> t = {env().dev->info().profile};
  for (const char* n : {"sm_80", "sm_86"})
    if (t[0].arch() != std::atoi(n + 3)) t.push_back(*findTarget(n));
  return t;
}

Result<DeviceBuffer> upload(const HostTensor& t) {
  auto b = DeviceBuffer::alloc(std::max<size_t>(t.bytes.size(), 16));
  if (!b.ok()) return b.error();
  DI_TRY(b->upload(t.bytes.data(), t.bytes.size()));
  return b;
}

HostTensor download(const DeviceBuffer& b, DType dtype, std::vector<int64_t> shape) {
  HostTensor t(dtype, std::move(shape));
  EXPECT_TRUE(b.download(t.bytes.data(), t.bytes.size()).ok());
  return t;
}

DeviceQuantWeight quantWeight(const DeviceBuffer& codes, const DeviceBuffer& scales, int64_t rows, int64_t cols,
                              int bits) {
  return {codes.addr(), scales.addr(), rows, cols, bits};
}

TEST(QuantGemmOps, WeightGemmThroughDiOps) {
  Env& e = env();
  if (!e.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << e.why;
  ASSERT_TRUE(e.dev->use().ok());
  int compared = 0;
  for (const TargetProfile& target : targets()) {
    DiOps ops(*e.jit, target);
    for (const auto& c : deepinfer::testing::casesFor("weight_gemm", e.seed, false)) {
      const std::string where = fmt::format("weight_gemm [{}] on {} (seed {})", c.name, target.name, e.seed);
      TensorMap want = c.inputs;
      ASSERT_TRUE(runReference("weight_gemm", c.attrs, want).ok()) << where;
      std::map<std::string, DeviceBuffer> b;
      for (const auto& [name, t] : c.inputs) {
        auto u = upload(t);
        ASSERT_TRUE(u.ok()) << where << ": " << u.error().message;
        b[name] = std::move(*u);
      }
      const HostTensor& y0 = want.at("y");
      auto y = DeviceBuffer::alloc(y0.bytes.size());
      ASSERT_TRUE(y.ok() && y->fill(0x7F).ok()) << where;
      const int bits = int(c.attrs.getInt("weight_bits", 8));
      const int64_t G = c.attrs.getInt("groups", 1), M = c.inputs.at("x").dim(0);
      const int64_t N = c.inputs.at("w").dim(0), Kg = c.inputs.at("x").dim(1) / G;
      const DeviceQuantWeight w = quantWeight(b.at("w"), b.at("w_scale"), N, Kg, bits);
      const auto epi = GemmEpilogue(c.attrs.getInt("epilogue", 0));
      std::optional<DeviceQuantWeight> up;
      if (epi == GemmEpilogue::Swiglu) up = quantWeight(b.at("w_up"), b.at("w_up_scale"), N, Kg, bits);
      Status s = weightGemm(ops, b.at("x").addr(), M, w, y->addr(), epi, nullptr, G, up ? &*up : nullptr);
      ASSERT_TRUE(s.ok()) << where << ": " << s.error().message;
      ASSERT_TRUE(e.dev->synchronize().ok()) << where;
      const HostTensor got = download(*y, y0.dtype, y0.shape);
      auto rep = deepinfer::testing::compareOutputs("weight_gemm", "y", y0, got, c.attrs, c.inputs);
      EXPECT_TRUE(rep.ok) << where << ": " << rep.metric << " " << rep.maxErr << ": " << rep.detail;
      ++compared;
    }
  }
  fmt::print("weight_gemm through DiOps: {} comparisons (seed {})\n", compared, e.seed);
}

// Capture once, then replay with other routing decisions in the same buffers.
TEST(QuantGemmOps, MoeExpertsReplaysAsACudaGraph) {
  Env& e = env();
  if (!e.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << e.why;
  ASSERT_TRUE(e.dev->use().ok());
  auto cases = deepinfer::testing::casesFor("moe_experts", e.seed, false);
  // Two cases of one shape: the second's routing replaces the first's between replays.
  std::vector<deepinfer::testing::OpCase> same;
  for (const auto& c : cases)
    if (c.name == "t40_k4_e16_one_expert") same.push_back(c);
  ASSERT_EQ(same.size(), 1u);
  deepinfer::testing::OpCase second = same[0];
  {
    // Routing from another seed's case of the same shape: every expert id shuffled.
    auto other = deepinfer::testing::casesFor("moe_experts", e.seed + 1, false);
    for (const auto& c : other)
      if (c.name == same[0].name) {
        second.inputs["ids"] = c.inputs.at("ids");
        second.inputs["weights"] = c.inputs.at("weights");
      }
  }
  for (const TargetProfile& target : targets()) {
    DiOps ops(*e.jit, target);
    const auto& c = same[0];
    const std::string where = fmt::format("moe_experts [{}] graph on {} (seed {})", c.name, target.name, e.seed);
    std::map<std::string, DeviceBuffer> b;
    for (const auto& [name, t] : c.inputs) {
      auto u = upload(t);
      ASSERT_TRUE(u.ok()) << where;
      b[name] = std::move(*u);
    }
    const int64_t T = c.inputs.at("x").dim(0), C = c.inputs.at("x").dim(1), k = c.inputs.at("ids").dim(1);
    const DeviceExpertWeights w{b.at("w1").addr(), b.at("w1_scale").addr(), b.at("w3").addr(), b.at("w3_scale").addr(),
                                b.at("w2").addr(), b.at("w2_scale").addr(), c.inputs.at("w1").dim(0), C,
                                c.inputs.at("w1").dim(1)};
    auto y = DeviceBuffer::alloc(size_t(T * k * C * 4));
    ASSERT_TRUE(y.ok());
    auto stream = Stream::create();
    ASSERT_TRUE(stream.ok());
    auto run = [&] { return moeExperts(ops, b.at("x").addr(), b.at("ids").addr(), b.at("weights").addr(), T, k, w,
                                       y->addr(), stream->handle()); };
    ASSERT_TRUE(run().ok()) << where;  // eager once: the kernel is loaded and the workspace sized
    ASSERT_TRUE(stream->synchronize().ok());
    ASSERT_TRUE(DeviceGraph::beginCapture(stream->handle()).ok()) << where;
    Status captured = run();
    auto graph = DeviceGraph::endCapture(stream->handle());
    ASSERT_TRUE(captured.ok()) << where << ": " << captured.error().message;
    ASSERT_TRUE(graph.ok()) << where << ": " << graph.error().message;
    const std::vector<const deepinfer::testing::OpCase*> order = {&c, &second, &c};
    for (const auto* cs : order) {
      ASSERT_TRUE(b.at("ids").upload(cs->inputs.at("ids").bytes.data(), cs->inputs.at("ids").bytes.size()).ok());
      ASSERT_TRUE(b.at("weights").upload(cs->inputs.at("weights").bytes.data(), cs->inputs.at("weights").bytes.size()).ok());
      ASSERT_TRUE(y->fill(0x7F).ok());
      ASSERT_TRUE(graph->launch(stream->handle()).ok()) << where;
      ASSERT_TRUE(stream->synchronize().ok()) << where;
      TensorMap want = cs->inputs;
      ASSERT_TRUE(runReference("moe_experts", cs->attrs, want).ok());
      const HostTensor got = download(*y, DType::F32, {T, k, C});
      auto rep = deepinfer::testing::compareOutputs("moe_experts", "y", want.at("y"), got, cs->attrs, cs->inputs);
      EXPECT_TRUE(rep.ok) << where << (cs == &second ? " (second routing)" : "") << ": " << rep.metric << " "
                          << rep.maxErr << ": " << rep.detail;
    }
  }
}

// Split-K in one launch (the last CTA of each tile reduces, counted in DiOps' zeroed workspace):
// captured in a CUDA graph and replayed; every replay must find the counters zero again and give
// the eager launch's bytes (no dependence on which CTA arrives last).
TEST(QuantGemmOps, WeightGemmSplitKReplaysAsACudaGraph) {
  Env& e = env();
  if (!e.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << e.why;
  ASSERT_TRUE(e.dev->use().ok());
  const deepinfer::testing::OpCase* found = nullptr;
  auto cases = deepinfer::testing::casesFor("weight_gemm", e.seed, false);
  for (const auto& c : cases)
    if (c.name == "fp8_m300_n256_k1024") found = &c;  // 6 prefill tiles: split-K by default
  ASSERT_NE(found, nullptr);
  const auto& c = *found;
  TensorMap want = c.inputs;
  ASSERT_TRUE(runReference("weight_gemm", c.attrs, want).ok());
  const HostTensor& y0 = want.at("y");
  JitOptions untuned;  // the families' defaults (split-K for this shape), whatever `tune` recorded
  untuned.useTuned = false;
  Jit jit(e.dev, untuned);
  for (const TargetProfile& target : targets()) {
    const std::string where = fmt::format("weight_gemm [{}] graph on {} (seed {})", c.name, target.name, e.seed);
    auto d = describeOp("weight_gemm", c.attrs, c.inputs);
    ASSERT_TRUE(d.ok());
    auto k = jit.get(*d, target);
    ASSERT_TRUE(k.ok()) << where << ": " << k.error().message;
    ASSERT_GT((*k)->kernel.zeroedBytes, 0) << where << ": the default is not split-K ("
                                           << configToString((*k)->config.config) << ")";
    ASSERT_EQ((*k)->kernel.plan.size(), 1u) << where << ": split-K must be one launch";
    DiOps ops(jit, target);
    std::map<std::string, DeviceBuffer> b;
    for (const auto& [name, t] : c.inputs) {
      auto u = upload(t);
      ASSERT_TRUE(u.ok()) << where;
      b[name] = std::move(*u);
    }
    auto y = DeviceBuffer::alloc(y0.bytes.size());
    ASSERT_TRUE(y.ok() && y->fill(0x7F).ok());
    const int64_t N = c.inputs.at("w").dim(0), K = c.inputs.at("x").dim(1);
    const int64_t M = c.inputs.at("x").dim(0);
    const DeviceQuantWeight w = quantWeight(b.at("w"), b.at("w_scale"), N, K, 8);
    auto stream = Stream::create();
    ASSERT_TRUE(stream.ok());
    auto run = [&] { return weightGemm(ops, b.at("x").addr(), M, w, y->addr(), GemmEpilogue::F32, stream->handle()); };
    ASSERT_TRUE(run().ok()) << where;
    ASSERT_TRUE(stream->synchronize().ok());
    const HostTensor eager = download(*y, y0.dtype, y0.shape);
    auto rep = deepinfer::testing::compareOutputs("weight_gemm", "y", y0, eager, c.attrs, c.inputs);
    EXPECT_TRUE(rep.ok) << where << " (eager): " << rep.metric << " " << rep.maxErr << ": " << rep.detail;
    ASSERT_TRUE(DeviceGraph::beginCapture(stream->handle()).ok()) << where;
    Status captured = run();
    auto graph = DeviceGraph::endCapture(stream->handle());
    ASSERT_TRUE(captured.ok()) << where << ": " << captured.error().message;
    ASSERT_TRUE(graph.ok()) << where << ": " << graph.error().message;
    for (int replay = 0; replay < 3; ++replay) {
      ASSERT_TRUE(y->fill(0x7F).ok());
      ASSERT_TRUE(e.dev->synchronize().ok());  // the poison lands before the replay
      ASSERT_TRUE(graph->launch(stream->handle()).ok()) << where;
      ASSERT_TRUE(stream->synchronize().ok()) << where;
      const HostTensor got = download(*y, y0.dtype, y0.shape);
      EXPECT_TRUE(got.bytes == eager.bytes) << where << ": replay " << replay << " differs from the eager launch";
    }
  }
}

// x a column slice of [M, K + 24] and y a column slice of [M, N + 6].
TEST(QuantGemmOps, WeightGemmStridedViews) {
  Env& e = env();
  if (!e.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << e.why;
  ASSERT_TRUE(e.dev->use().ok());
  for (const TargetProfile& target : targets()) {
    for (const auto& c : deepinfer::testing::casesFor("weight_gemm", e.seed, false)) {
      if (c.name != "fp8_m5_n200_k272_bf16" && c.name != "fp4_m40_n96_k320_bf16" && c.name != "fp8_m16_n512_k5120_bf16")
        continue;
      const std::string where = fmt::format("weight_gemm [{}] views on {} (seed {})", c.name, target.name, e.seed);
      const HostTensor& x = c.inputs.at("x");
      const int64_t M = x.dim(0), K = x.dim(1), N = c.inputs.at("w").dim(0);
      const int64_t ldx = K + 24, ldy = N + 6, xOff = 16, yOff = 2;
      TensorMap want = c.inputs;
      ASSERT_TRUE(runReference("weight_gemm", c.attrs, want).ok());
      auto d = describeOp("weight_gemm", c.attrs, c.inputs);
      ASSERT_TRUE(d.ok());
      auto k = e.jit->get(*d, target);
      ASSERT_TRUE(k.ok()) << where << ": " << k.error().message;
      std::map<std::string, DeviceBuffer> bufs;
      TensorViewMap views;
      for (const auto& [name, t] : c.inputs) {
        if (name == "x") continue;
        auto u = upload(t);
        ASSERT_TRUE(u.ok());
        auto v = TensorView::of(*u, t.dtype, t.shape);
        ASSERT_TRUE(v.ok());
        views[name] = *v;
        bufs[name] = std::move(*u);
      }
      HostTensor wideX(DType::BF16, {M, ldx});
      for (int64_t m = 0; m < M; ++m) std::memcpy(wideX.bytes.data() + (m * ldx + xOff) * 2, x.bytes.data() + m * K * 2, K * 2);
      auto bx = upload(wideX);
      ASSERT_TRUE(bx.ok());
      const DType yt = want.at("y").dtype;
      const size_t ysz = dtypeSize(yt);
      auto by = DeviceBuffer::alloc(size_t(M * ldy) * ysz);
      ASSERT_TRUE(by.ok() && by->fill(0x5A).ok());
      auto vx = TensorView::of(*bx, DType::BF16, {M, ldx});
      auto vy = TensorView::of(*by, yt, {M, ldy});
      ASSERT_TRUE(vx.ok() && vy.ok());
      auto sx = vx->slice(1, xOff, xOff + K);
      auto sy = vy->slice(1, yOff, yOff + N);
      ASSERT_TRUE(sx.ok() && sy.ok());
      views["x"] = *sx;
      views["y"] = *sy;
      std::optional<DeviceBuffer> ws;
      if ((*k)->kernel.workspaceBytes > 0) {
        auto wb = DeviceBuffer::alloc(size_t((*k)->kernel.workspaceBytes));
        ASSERT_TRUE(wb.ok());
        auto wv = TensorView::of(*wb, DType::U8, {(*k)->kernel.workspaceBytes});
        ASSERT_TRUE(wv.ok());
        views["__workspace"] = *wv;
        ws = std::move(*wb);
      }
      const int64_t zeroedBytes = (*k)->kernel.zeroedBytes;
      std::optional<DeviceBuffer> zeroed;
      if (zeroedBytes > 0) {
        auto zb = DeviceBuffer::alloc(size_t(zeroedBytes));
        ASSERT_TRUE(zb.ok() && zb->fill(0).ok());
        auto zv = TensorView::of(*zb, DType::U8, {zeroedBytes});
        ASSERT_TRUE(zv.ok());
        views["__zeroed"] = *zv;
        zeroed = std::move(*zb);
      }
      auto launched = launchViews(*e.jit, **k, views, nullptr);
      ASSERT_TRUE(launched.ok()) << where << ": " << launched.error().message;
      ASSERT_TRUE(e.dev->synchronize().ok());
      if (zeroed) {
        const HostTensor z = download(*zeroed, DType::U8, {zeroedBytes});
        for (int64_t i = 0; i < zeroedBytes; ++i)
          ASSERT_EQ(z.bytes[size_t(i)], 0) << where << ": byte " << i << " of the zeroed workspace was left non-zero";
      }
      const HostTensor wide = download(*by, yt, {M, ldy});
      HostTensor got(yt, {M, N});
      for (int64_t m = 0; m < M; ++m)
        for (int64_t col = 0; col < ldy; ++col) {
          const uint8_t* p = wide.bytes.data() + (m * ldy + col) * ysz;
          if (col >= yOff && col < yOff + N) std::memcpy(got.bytes.data() + (m * N + col - yOff) * ysz, p, ysz);
          else
            for (size_t i = 0; i < ysz; ++i) ASSERT_EQ(p[i], 0x5A) << where << ": row " << m << " column " << col << " outside the view was written";
        }
      auto rep = deepinfer::testing::compareOutputs("weight_gemm", "y", want.at("y"), got, c.attrs, c.inputs);
      EXPECT_TRUE(rep.ok) << where << ": " << rep.metric << " " << rep.maxErr << ": " << rep.detail;
    }
  }
}

// Every prefill tile (block_m > 16: weights decoded once per CTA, ldmatrix fragments) the tuner
// may pick, on every target: for each case, every fitting candidate with block_m > 16 (the
// defaults and the alternatives: 256-row and 256-column tiles, block_k 64, 8 warps, one n8 tile
// per warp), outputs poisoned, compared with the C++ reference. The cases' prefill rows are not
// multiples of any tile (M = 17, 20, 33, 40, 129, 130, 300; 105 and 129 rows per expert).
// Every prefill tile (block_m > 16) the specialization offers, one test per (op, target) so that
// the shards compile and run them side by side.
class PrefillCandidates : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(PrefillCandidates, EveryPrefillTileMatchesReference) {
  Env& e = env();
  if (!e.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << e.why;
  ASSERT_TRUE(e.dev->use().ok());
  const auto& [op, targetName] = GetParam();
  const TargetProfile& local = e.dev->info().profile;
  if (targetName != "native" && local.arch() == std::atoi(targetName.c_str() + 3))
    GTEST_SKIP() << targetName << " is this GPU's own arch: the native instance covers it";
  const TargetProfile target = targetName == "native" ? local : *findTarget(targetName);
  // Compiled side by side first: one by one, this test outlasted the suite's time limit.
  const auto cases = deepinfer::testing::casesFor(op, e.seed, false);
  std::vector<testing_util::KernelToCompile> kernels;
  for (const auto& c : cases) {
    auto d = describeOp(op, c.attrs, c.inputs);
    ASSERT_TRUE(d.ok()) << d.error().message;
    auto spec = specialize(*d, target);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    for (const auto& ch : spec->fitting)
      if (ch.config.count("block_m") && ch.config.at("block_m") > 16) kernels.push_back({*d, target, ch.config});
  }
  testing_util::precompileKernels(*e.jit, kernels);
  int compared = 0;
  for (const auto& c : cases) {
    TensorMap ref = c.inputs;
    ASSERT_TRUE(runReference(op, c.attrs, ref).ok()) << op << " [" << c.name << "]";
    auto d = describeOp(op, c.attrs, c.inputs);
    ASSERT_TRUE(d.ok()) << d.error().message;
    auto spec = specialize(*d, target);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    for (const auto& ch : spec->fitting) {
      if (!ch.config.count("block_m") || ch.config.at("block_m") <= 16) continue;
      const std::string where = fmt::format("{} [{}] on {} {{{}}} (seed {})", op, c.name, target.name,
                                            configToString(ch.config), e.seed);
      TensorMap gpu = c.inputs;
      GpuRunOptions opts;
      opts.config = ch.config;
      auto run = runOpOnGpu(*e.jit, op, c.attrs, target, gpu, opts);
      ASSERT_TRUE(run.ok()) << where << ": " << run.error().message;
      for (const auto& out : deepinfer::testing::outputNames(op)) {
        auto rep = deepinfer::testing::compareOutputs(op, out, ref.at(out), gpu.at(out), c.attrs, c.inputs);
        EXPECT_TRUE(rep.ok) << where << " '" << out << "': " << rep.metric << " " << rep.maxErr << ": " << rep.detail;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 0) << op << ": no prefill candidate ran on " << target.name;
  fmt::print("{} prefill candidates on {}: {} comparisons (seed {})\n", op, target.name, compared, e.seed);
}

INSTANTIATE_TEST_SUITE_P(QuantGemm, PrefillCandidates,
                         ::testing::Combine(::testing::Values("weight_gemm", "moe_experts"),
                                            ::testing::Values("native", "sm_80", "sm_86")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

}  // namespace
