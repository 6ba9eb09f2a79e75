// Every generated kernel against its C++ reference on a real GPU: the local arch's cubin and the
// sm_80 / sm_86 specializations loaded as PTX, on fresh random inputs (seed printed), outputs
// poisoned before each launch. Without a GPU every test skips with the reason.
//
// GpuViews: gather_kcache writing through a strided view of a larger poisoned workspace
// (docs/ops.md §3: the caller's strides, no copy), checked byte for byte over the whole buffer.
//
// Environment: DI_TEST_SEED (reuse a seed), DI_GPU_RESULTS (write one JSON row per comparison),
// DI_GPU_LARGE=0 (skip the > 2 GiB gather cases and the quantized GEMMs' model-shape decode
// cases), DI_GPU_ALL_CONFIGS=1 (every candidate config
// on the local arch, not only the default).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <tuple>

#include "CompareOnGpu.h"
#include "GpuTestDevice.h"
#include "PrecompileKernels.h"
#include "cases/OpCases.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Reference.h"
#include "deepinfer/Specialize.h"
#include "deepinfer/TensorView.h"
#include "deepinfer/ViewLaunch.h"
#include "reference/KvCacheRef.h"

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
    fmt::print("GPU: {} (sm_{}), seed {}\n", e.dev->info().profile.gpuName, e.dev->info().profile.arch(), e.seed);
    return e;
  }();
  return e;
}

std::mutex resultsMu;
void record(const std::string& row) {
  const char* path = std::getenv("DI_GPU_RESULTS");
  if (!path) return;
  std::lock_guard<std::mutex> lock(resultsMu);
  std::ofstream f(path, std::ios::app);
  f << row << "\n";
}

std::vector<TargetProfile> targets() { return testing_util::testTargets(*env().dev); }

// Runs `op` on case `c` for `target` with `cfg` (nullopt: the default) and compares every output
// with `ref` (CompareOnGpu.h), one results row per comparison.
void runAndCompare(const std::string& op, const deepinfer::testing::OpCase& c, const TargetProfile& target,
                   const std::optional<KernelConfig>& cfg, const TensorMap& ref, int& compared) {
  GpuRunOptions opts;
  opts.config = cfg;
  testing_util::runAndCompare(
      *env().jit, op, c, target, opts, ref, compared,
      [&](const std::string& out, const deepinfer::testing::CompareReport& rep, const LoadedKernel& k) {
        record(fmt::format("{{\"op\": \"{}\", \"case\": \"{}\", \"target\": \"{}\", \"arch\": {}, \"ptx\": {}, "
                           "\"config\": \"{}\", \"output\": \"{}\", \"shape\": \"{}\", \"ok\": {}, \"max_err\": {:.6g}, "
                           "\"metric\": \"{}\"}}",
                           op, c.name, target.name, target.arch(), k.fromPtx, configToString(k.config.config), out,
                           ref.at(out).shapeString(), rep.ok, rep.maxErr, rep.metric));
      });
}

class GpuOps : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuOps, MatchesReference) {
  Env& e = env();
  if (!e.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << e.why;
  const std::string op = GetParam();
  const char* large = std::getenv("DI_GPU_LARGE");
  const bool allConfigs = std::getenv("DI_GPU_ALL_CONFIGS") != nullptr;
  auto cases = deepinfer::testing::casesFor(op, e.seed, !(large && std::string(large) == "0"));
  ASSERT_FALSE(cases.empty());
  // Every target's default kernel for every case, compiled side by side first (the suite is
  // compile-bound).
  testing_util::precompileKernels(*e.jit, testing_util::defaultKernels(op, cases, targets()));
  int compared = 0;
  for (const auto& c : cases) {
    // One reference per case, shared by the targets (the model-shape cases' take seconds).
    TensorMap ref = c.inputs;
    auto rs = runReference(op, c.attrs, ref);
    ASSERT_TRUE(rs.ok()) << c.name << ": reference failed: " << rs.error().message;
    for (const auto& target : targets()) {
      // The default config, plus (on the local arch, when asked) every other candidate.
      std::vector<std::optional<KernelConfig>> configs = {std::nullopt};
      if (allConfigs && target.name == "local") {
        auto d = describeOp(op, c.attrs, c.inputs);
        ASSERT_TRUE(d.ok()) << d.error().message;
        auto spec = specialize(*d, target);
        ASSERT_TRUE(spec.ok()) << spec.error().message;
        for (const auto& ch : spec->fitting)
          if (ch.config != spec->chosen.config) configs.push_back(ch.config);
      }
      for (const auto& cfg : configs) runAndCompare(op, c, target, cfg, ref, compared);
    }
  }
  fmt::print("{}: {} comparisons over {} cases x {} targets (seed {}); JIT so far: {} NVRTC compiles, {} disk-cache hits\n",
             op, compared, cases.size(), targets().size(), e.seed, e.jit->compiles(), e.jit->diskHits());
}

// gather_kcache's `out` as a strided view: rows [kRowPad, kRowPad + M) and columns
// [kColPad, kColPad + 512) of a [R, M + 2 * kRowPad, 512 + 2 * kColPad] bf16 workspace of random
// bits. The expected workspace is the same bits with the strided reference applied, so the
// comparison covers bit-exact rows and every byte the kernel must leave alone (other rows,
// the padding columns on both sides of each row, rows beyond each request's gather).
TEST(GpuViews, GatherKcacheIntoStridedView) {
  Env& e = env();
  if (!e.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << e.why;
  constexpr int64_t kRowPad = 3, kColPad = 32;  // 64 bytes: rows stay 16-byte aligned
  constexpr int64_t kWidth = 512 + 2 * kColPad;
  const std::string op = "gather_kcache";
  auto cases = deepinfer::testing::casesFor(op, e.seed, false);
  ASSERT_FALSE(cases.empty());
  ASSERT_TRUE(e.dev->use().ok());
  int compared = 0;
  for (const auto& target : targets()) {
    for (const auto& c : cases) {
      const std::string where = fmt::format("{} [{}] on {}", op, c.name, target.name);
      auto d = describeOp(op, c.attrs, c.inputs);
      ASSERT_TRUE(d.ok()) << where << ": " << d.error().message;
      auto k = e.jit->get(*d, target);
      ASSERT_TRUE(k.ok()) << where << ": " << k.error().message;
      const int64_t R = d->dim("out", 0), M = d->dim("out", 1);
      const int64_t rowsAll = M + 2 * kRowPad;

      // Inputs: dense buffers, bound as contiguous views.
      std::map<std::string, DeviceBuffer> bufs;
      TensorViewMap views;
      for (const auto& [name, t] : c.inputs) {
        if (name == "out") continue;
        auto b = DeviceBuffer::alloc(std::max<size_t>(t.bytes.size(), 16));
        ASSERT_TRUE(b.ok()) << b.error().message;
        ASSERT_TRUE(b->upload(t.bytes.data(), t.bytes.size()).ok());
        auto v = TensorView::of(*b, t.dtype, t.shape);
        ASSERT_TRUE(v.ok()) << v.error().message;
        views[name] = *v;
        bufs[name] = std::move(b.value());
      }
      // The workspace: random bits everywhere, then the strided view of it.
      std::mt19937_64 rng(e.seed ^ uint64_t(compared + 1) * 0x9E3779B97F4A7C15ull);
      HostTensor ws(DType::BF16, {R * rowsAll * kWidth});
      for (auto& byte : ws.bytes) byte = uint8_t(rng());
      auto wsBuf = DeviceBuffer::alloc(std::max<size_t>(ws.bytes.size(), 16));
      ASSERT_TRUE(wsBuf.ok()) << wsBuf.error().message;
      ASSERT_TRUE(wsBuf->upload(ws.bytes.data(), ws.bytes.size()).ok());
      auto wsView = TensorView::of(*wsBuf, DType::BF16, {R, rowsAll, kWidth});
      ASSERT_TRUE(wsView.ok()) << wsView.error().message;
      auto rows = wsView->slice(1, kRowPad, kRowPad + M);
      ASSERT_TRUE(rows.ok()) << rows.error().message;
      auto out = rows->slice(2, kColPad, kColPad + 512);
      ASSERT_TRUE(out.ok()) << out.error().message;
      ASSERT_FALSE(out->isContiguous());
      views["out"] = *out;

      auto launched = launchViews(*e.jit, **k, views, nullptr);
      ASSERT_TRUE(launched.ok()) << where << ": " << launched.error().message;
      ASSERT_TRUE(e.dev->synchronize().ok());
      HostTensor got(DType::BF16, ws.shape);
      ASSERT_TRUE(wsBuf->download(got.bytes.data(), got.bytes.size()).ok());

      TensorMap ref = c.inputs;
      ref["out"] = ws;
      auto rs = ref::gatherKcacheStrided(c.attrs, ref, kRowPad * kWidth + kColPad, out->shape, out->strides);
      ASSERT_TRUE(rs.ok()) << where << ": reference failed: " << rs.error().message;
      const uint16_t* want = ref.at("out").ptr<uint16_t>();
      const uint16_t* have = got.ptr<uint16_t>();
      int64_t bad = 0, first = -1;
      for (int64_t i = 0; i < ws.numel(); ++i)
        if (want[i] != have[i] && bad++ == 0) first = i;
      ++compared;
      const int64_t col = first % kWidth, row = (first / kWidth) % rowsAll, req = first / kWidth / rowsAll;
      EXPECT_EQ(bad, 0) << where << " {" << configToString(k.value()->config.config) << "}: " << bad
                        << " elements differ; first at request " << req << ", workspace row " << row << " (view row "
                        << row - kRowPad << "), column " << col << " (view column " << col - kColPad
                        << "): expected 0x" << std::hex << (first >= 0 ? want[first] : 0) << ", got 0x"
                        << (first >= 0 ? have[first] : 0) << std::dec
                        << (row < kRowPad || row >= kRowPad + M || col < kColPad || col >= kColPad + 512
                                ? " (outside the view: must be untouched)"
                                : "");
    }
  }
  fmt::print("gather_kcache strided views: {} workspaces compared over {} cases x {} targets (seed {})\n", compared,
             cases.size(), targets().size(), e.seed);
}

// Every candidate the tuner may pick (every fitting config, not only the default) on every
// target: the sm_80 and sm_86 specializations as PTX and the native one, one test per (op,
// target) so that the shards run them side by side. For the ops whose schedules depend on the
// shape (gather_kcache's row-count regimes, topk's bisection and radix plans, combine_topk_swa's
// thread counts, indexer_logits' one, two or four m16 query tiles per warp and token groups split
// by requests, gather_kcache_combine's gather schedules with the row CTAs after them,
// sparse_mla_prefill's key tiles, head groups and ping-pong depths); the > 2 GiB gather case is
// left to MatchesReference.
class GpuCandidates : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(GpuCandidates, EveryFittingConfigMatchesReference) {
  Env& e = env();
  if (!e.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << e.why;
  const auto& [op, targetName] = GetParam();
  const auto target = testing_util::namedTestTarget(*e.dev, targetName);
  if (!target) GTEST_SKIP() << targetName << " is this GPU's own arch: the native instance covers it";
  auto cases = deepinfer::testing::casesFor(op, e.seed, false);
  ASSERT_FALSE(cases.empty());
  // Every candidate kernel compiled side by side first (the suite is compile-bound).
  testing_util::precompileKernels(
      *e.jit, testing_util::candidateKernels(op, cases, {*target}, [](const KernelConfig&, const auto&) { return true; }));
  int compared = 0, configs = 0;
  for (const auto& c : cases) {
    TensorMap ref = c.inputs;
    auto rs = runReference(op, c.attrs, ref);
    ASSERT_TRUE(rs.ok()) << c.name << ": reference failed: " << rs.error().message;
    auto d = describeOp(op, c.attrs, c.inputs);
    ASSERT_TRUE(d.ok()) << d.error().message;
    auto spec = specialize(*d, *target);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_FALSE(spec->fitting.empty()) << op << " [" << c.name << "] on " << target->name;
    for (const auto& ch : spec->fitting) {
      runAndCompare(op, c, *target, ch.config, ref, compared);
      ++configs;
    }
  }
  fmt::print("{} on {}: {} comparisons of {} (case, config) runs over {} cases (seed {})\n", op, target->name,
             compared, configs, cases.size(), e.seed);
}

// The two ops a gather_kcache_combine case stands for (docs/ops.md §4a): gather_kcache at offset N,
// and combine_topk_swa with M = out's rows, on the same tensors.
deepinfer::testing::OpCase gatherOfFused(const deepinfer::testing::OpCase& c) {
  deepinfer::testing::OpCase g;
  g.name = c.name;
  g.op = "gather_kcache";
  for (const char* n : {"k_cache", "seq_lens", "gather_lens", "block_table", "out"}) g.inputs[n] = c.inputs.at(n);
  g.attrs.setInt("block_size", c.attrs.getInt("block_size", 0));
  g.attrs.setInt("offset", c.attrs.getInt("N", 0));
  return g;
}

deepinfer::testing::OpCase combineOfFused(const deepinfer::testing::OpCase& c) {
  deepinfer::testing::OpCase r;
  r.name = c.name;
  r.op = "combine_topk_swa";
  for (const char* n : {"topk_indices", "query_start_loc", "seq_lens", "gather_lens"}) r.inputs[n] = c.inputs.at(n);
  for (const char* n : {"window", "ratio", "topk", "N"}) r.attrs.setInt(n, c.attrs.getInt(n, 0));
  r.attrs.setInt("M", c.inputs.at("out").dim(1));
  return r;
}

// The fused op against the two kernels it replaces, each run as its own launch on the same
// inputs (gather_kcache at offset N, then combine_topk_swa with M = out's rows): every output
// byte-identical, on every target, for every case (docs/ops.md §4a: the pair, by definition).
TEST(GpuFusion, GatherKcacheCombineEqualsThePairOfKernelsBitForBit) {
  Env& e = env();
  if (!e.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << e.why;
  const auto cases = deepinfer::testing::casesFor("gather_kcache_combine", e.seed, false);
  {  // the three ops' defaults for every case and target, compiled side by side first
    std::vector<testing_util::KernelToCompile> kernels =
        testing_util::defaultKernels("gather_kcache_combine", cases, targets());
    std::vector<deepinfer::testing::OpCase> gathers, combines;
    for (const auto& c : cases) {
      gathers.push_back(gatherOfFused(c));
      combines.push_back(combineOfFused(c));
    }
    for (const auto& k : testing_util::defaultKernels("gather_kcache", gathers, targets())) kernels.push_back(k);
    for (const auto& k : testing_util::defaultKernels("combine_topk_swa", combines, targets())) kernels.push_back(k);
    testing_util::precompileKernels(*e.jit, kernels);
  }
  int compared = 0;
  for (const auto& target : targets()) {
    for (const auto& c : cases) {
      TensorMap fused = c.inputs;
      auto rf = runOpOnGpu(*e.jit, "gather_kcache_combine", c.attrs, target, fused);
      ASSERT_TRUE(rf.ok()) << c.name << " on " << target.name << ": " << rf.error().message;

      auto gc = gatherOfFused(c);
      TensorMap& g = gc.inputs;
      auto rg = runOpOnGpu(*e.jit, "gather_kcache", gc.attrs, target, g);
      ASSERT_TRUE(rg.ok()) << c.name << " on " << target.name << ": " << rg.error().message;
      auto rc = combineOfFused(c);
      TensorMap& r = rc.inputs;
      auto rr = runOpOnGpu(*e.jit, "combine_topk_swa", rc.attrs, target, r);
      ASSERT_TRUE(rr.ok()) << c.name << " on " << target.name << ": " << rr.error().message;

      EXPECT_TRUE(fused.at("out").bytes == g.at("out").bytes) << c.name << " on " << target.name << ": out";
      EXPECT_TRUE(fused.at("rows").bytes == r.at("rows").bytes) << c.name << " on " << target.name << ": rows";
      EXPECT_TRUE(fused.at("lens").bytes == r.at("lens").bytes) << c.name << " on " << target.name << ": lens";
      compared += 3;
    }
  }
  fmt::print("gather_kcache_combine vs the pair of kernels: {} outputs compared (seed {})\n", compared, e.seed);
}

// The weight-streaming schedules (stream = 1, 2 = double-buffered rounds, 3 = the cp.async
// shared-memory ring, the decode default; weight_gemm also with K split over CTAs when the knob
// asks: templates/WeightStream.cuh, MoeStream.cuh): every
// such candidate of every case that has them (weight_gemm: M <= 16, i.e. M = 1, 2, 3, 4, 5, 7, 8,
// 9, 12, 16 with N and K off the 16-row and 64/128-column steps, groups, SwiGLU pairs, NaN codes
// and extreme scale bytes; moe_experts: <= 16 rows per expert) on every target, outputs
// poisoned. The defaults are also in GpuOps.MatchesReference (large model shapes too).
class GpuStreaming : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuStreaming, EveryStreamingCandidateOnEveryTargetMatchesReference) {
  Env& e = env();
  if (!e.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << e.why;
  const std::string op = GetParam();
  const auto opCases = deepinfer::testing::casesFor(op, e.seed, false);
  auto streamed = [](const KernelConfig& cfg) { return cfg.count("stream") && cfg.at("stream") != 0; };
  // Every streaming kernel compiled side by side first (the suite is compile-bound).
  testing_util::precompileKernels(
      *e.jit, testing_util::candidateKernels(op, opCases, targets(),
                                             [&](const KernelConfig& cfg, const auto&) { return streamed(cfg); }));
  int compared = 0, configs = 0, cases = 0;
  for (const auto& target : targets()) {
    for (const auto& c : opCases) {
      auto d = describeOp(op, c.attrs, c.inputs);
      ASSERT_TRUE(d.ok()) << d.error().message;
      auto spec = specialize(*d, target);
      ASSERT_TRUE(spec.ok()) << spec.error().message;
      std::vector<KernelConfig> picked;
      for (const auto& ch : spec->fitting)
        if (streamed(ch.config)) picked.push_back(ch.config);
      if (picked.empty()) continue;
      ++cases;
      TensorMap ref = c.inputs;
      auto rs = runReference(op, c.attrs, ref);
      ASSERT_TRUE(rs.ok()) << c.name << ": reference failed: " << rs.error().message;
      for (const auto& cfg : picked) {
        runAndCompare(op, c, target, cfg, ref, compared);
        ++configs;
      }
    }
  }
  EXPECT_GT(cases, 0) << op << ": no case has a streaming candidate";
  fmt::print("{} streaming: {} comparisons of {} (case, target, config) runs over {} (case, target) pairs (seed {})\n",
             op, compared, configs, cases, e.seed);
}

INSTANTIATE_TEST_SUITE_P(QuantGemm, GpuStreaming,
                         ::testing::Values(std::string("weight_gemm"), std::string("moe_experts")),
                         [](const auto& info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(ScheduledOps, GpuCandidates,
                         ::testing::Combine(::testing::Values(std::string("gather_kcache"), std::string("topk"),
                                                              std::string("combine_topk_swa"),
                                                              std::string("indexer_logits"),
                                                              std::string("gather_kcache_combine"),
                                                              std::string("sparse_mla_prefill")),
                                            ::testing::ValuesIn(testing_util::testTargetNames())),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

// Every op with a reference (all the kernel ops), by name.
INSTANTIATE_TEST_SUITE_P(AllOps, GpuOps, ::testing::ValuesIn(deepinfer::referenceOps()),
                         [](const auto& info) { return info.param; });

}  // namespace
