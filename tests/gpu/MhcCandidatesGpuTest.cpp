// Every candidate config the tuner may pick for the four mHC ops, on the GPU: the local arch's
// cubin and the sm_80 / sm_86 specializations loaded as PTX, against the C++ reference with
// outputs poisoned (runOpOnGpu). GpuOps.MatchesReference covers each target's default on every
// case; this covers the rest of the candidates (CUDA-core and tensor-core mixes, 1..8 warps,
// 1..8 slices: the stream pass split over C with the finalize/sqrsum reductions, or not split)
// on the C = 256 cases, whose T = 15 and 17 sit on both sides of the tensor-core threshold.
// The kernels differ per (mode, warps, mma) only, so this is a few NVRTC units per op and target.
// A one-launch candidate (one_launch = 1: the last CTA of a tile finalizes, counted in the zeroed
// workspace, which runOpOnGpu checks is zero again after the launch) must give every bit of its
// two-launch twin (one_launch = 0, the same other knobs): both run the same reductions.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "GpuTestDevice.h"
#include "PrecompileKernels.h"
#include "cases/OpCases.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Reference.h"
#include "deepinfer/Specialize.h"

using namespace deepinfer;

namespace {

class MhcCandidates : public ::testing::TestWithParam<std::string> {};

TEST_P(MhcCandidates, EveryCandidateOnEveryTargetMatchesReference) {
  const auto& g = testing_util::gpuTestDevice();
  if (!g.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << g.why;
  static Jit jit(g.dev);
  const std::string op = GetParam();
  const std::vector<TargetProfile> targets = testing_util::testTargets(*g.dev);
  // The C = 256 cases; the model-size cases run their defaults in GpuOps.
  std::vector<deepinfer::testing::OpCase> cases;
  for (auto& c : deepinfer::testing::casesFor(op, g.seed, false))
    if (c.inputs.at(c.inputs.count("residual") ? "residual" : "x").dim(2) == 256) cases.push_back(std::move(c));
  // Every candidate kernel compiled side by side first (the suite is compile-bound).
  testing_util::precompileKernels(
      jit, testing_util::candidateKernels(op, cases, targets, [](const KernelConfig&, const auto&) { return true; }));
  int compared = 0, runs = 0, twins = 0;
  std::set<int64_t> tokens;
  for (const auto& c : cases) {
    auto d = describeOp(op, c.attrs, c.inputs);
    ASSERT_TRUE(d.ok()) << c.name << ": " << d.error().message;
    const std::string res = d->hasTensor("residual") ? "residual" : "x";
    tokens.insert(d->dim(res, 0));
    TensorMap ref = c.inputs;
    ASSERT_TRUE(runReference(op, c.attrs, ref).ok()) << c.name;
    for (const auto& target : targets) {
      auto spec = specialize(*d, target);
      ASSERT_TRUE(spec.ok()) << c.name << " on " << target.name << ": " << spec.error().message;
      std::map<std::string, TensorMap> outputsOf;  // by config
      for (const auto& choice : spec->fitting) {
        TensorMap gpu = c.inputs;
        GpuRunOptions opts;
        opts.config = choice.config;
        const std::string where = fmt::format("{} [{}] on {} {{{}}} (seed {})", op, c.name, target.name,
                                              configToString(choice.config), g.seed);
        auto run = runOpOnGpu(jit, op, c.attrs, target, gpu, opts);
        ASSERT_TRUE(run.ok()) << where << ": " << run.error().message;
        auto fromKernel = deepinfer::testing::expectedFromKernelOutputs(op, c.attrs, c.inputs, gpu);
        ASSERT_TRUE(fromKernel.ok()) << where << ": " << fromKernel.error().message;
        for (const auto& out : deepinfer::testing::outputNames(op)) {
          const HostTensor& want = fromKernel->count(out) ? fromKernel->at(out) : ref.at(out);
          auto rep = deepinfer::testing::compareOutputs(op, out, want, gpu.at(out), c.attrs, c.inputs);
          EXPECT_TRUE(rep.ok) << where << " '" << out << "': " << rep.metric << " " << rep.maxErr << ": "
                              << rep.detail;
          ++compared;
        }
        ++runs;
        outputsOf[configToString(choice.config)] = gpu;
      }
      for (const auto& choice : spec->fitting) {
        if (!choice.config.count("one_launch") || choice.config.at("one_launch") != 1) continue;
        KernelConfig twin = choice.config;
        twin.at("one_launch") = 0;
        auto it = outputsOf.find(configToString(twin));
        if (it == outputsOf.end()) {
          // The twin is not offered here (e.g. the fused one-launch plan runs 8 warps, which the
          // two-launch candidates drop below 113 tokens): run it anyway, as the emulator test does.
          TensorMap gpu = c.inputs;
          GpuRunOptions opts;
          opts.config = twin;
          auto run = runOpOnGpu(jit, op, c.attrs, target, gpu, opts);
          ASSERT_TRUE(run.ok()) << op << " [" << c.name << "] on " << target.name << " two-launch twin {"
                                << configToString(twin) << "}: " << run.error().message;
          it = outputsOf.emplace(configToString(twin), std::move(gpu)).first;
        }
        const TensorMap& one = outputsOf.at(configToString(choice.config));
        for (const auto& out : deepinfer::testing::outputNames(op))
          EXPECT_TRUE(one.at(out).bytes == it->second.at(out).bytes)
              << op << " [" << c.name << "] on " << target.name << " {" << configToString(choice.config) << "} '"
              << out << "': not the two-launch plan's bits (seed " << g.seed << ")";
        ++twins;
      }
    }
  }
  if (op != "mhc_collapse") EXPECT_GT(twins, 0) << op << ": no one-launch candidate had a two-launch twin";
  // Both sides of the tensor-core threshold were run.
  EXPECT_TRUE(tokens.count(15) && tokens.count(17)) << op;
  fmt::print("{}: {} comparisons over {} candidate runs on {} targets, {} one-launch runs bit-equal to their "
             "two-launch twins (seed {}); JIT: {} compiles\n",
             op, compared, runs, targets.size(), twins, g.seed, jit.compiles());
}

INSTANTIATE_TEST_SUITE_P(Mhc, MhcCandidates,
                         ::testing::Values("mhc_pre", "mhc_post", "mhc_fused_post_pre", "mhc_collapse"));

}  // namespace
