// sparse_mla_decode's schedules on the GPU: the local arch's cubin and the sm_80 / sm_86
// specializations loaded as PTX, against the C++ reference with outputs and workspace poisoned
// and the zeroed workspace checked zero after every launch (runOpOnGpu), on every decode case
// (B = 1, fewer keys than a tile, odd K, lens 0, invalid and junk indices, no valid entry, NaN
// codes). For every kernel geometry the target offers (heads per CTA x threads x keys per tile x
// stages x schedule, q in registers or in shared memory: each a distinct NVRTC unit), both split merges at 2, 5 and 11 splits, whatever the key
// count (so small cases have empty splits and 11 crosses the merge's load chunks), and one
// direct (single-split) run. The one-launch merge (merge = 1) must give the same bits as the
// merge launch (merge = 0) at the same split count: the merge sums in split order whichever CTA
// arrives last. GpuOps.MatchesReference covers each target's default.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <tuple>

#include "GpuTestDevice.h"
#include "PrecompileKernels.h"
#include "cases/OpCases.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Reference.h"
#include "deepinfer/Specialize.h"

using namespace deepinfer;

namespace {

const char* kOp = "sparse_mla_decode";

// (kv_splits, merge) in this order: each merge = 1 run follows the merge = 0 run it must equal.
constexpr std::pair<int64_t, int64_t> kPlans[] = {{1, 0}, {2, 0}, {2, 1}, {5, 0}, {5, 1}, {11, 0}, {11, 1}};

using Geometry = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>;

// The kernel geometries among the fitting candidates (heads per CTA, threads, keys per tile,
// stages, schedule): many candidates share one, differing in splits and merge only.
std::set<Geometry> geometriesOf(const Specialization& spec) {
  std::set<Geometry> g;
  for (const auto& ch : spec.fitting)
    g.insert({ch.config.at("heads_per_cta"), ch.config.at("threads"), ch.config.at("keys_per_tile"),
              ch.config.at("stages"), ch.config.at("schedule")});
  return g;
}

KernelConfig configOf(const Geometry& g, std::pair<int64_t, int64_t> plan) {
  const auto& [heads, threads, keys, stages, schedule] = g;
  return {{"heads_per_cta", heads}, {"threads", threads},         {"keys_per_tile", keys}, {"stages", stages},
          {"kv_splits", plan.first}, {"merge", plan.second}, {"schedule", schedule}};
}

// One test per target ("native", "sm_80", "sm_86"), so that the shards run them side by side.
class SparseMlaDecodeCandidates : public ::testing::TestWithParam<std::string> {};

TEST_P(SparseMlaDecodeCandidates, EveryGeometryAndMergeMatchesReference) {
  const auto& g = testing_util::gpuTestDevice();
  if (!g.dev) GTEST_SKIP() << "no GPU, GPU test skipped: " << g.why;
  static Jit jit(g.dev);
  const auto only = testing_util::namedTestTarget(*g.dev, GetParam());
  if (!only) GTEST_SKIP() << GetParam() << " is this GPU's own arch: the native instance covers it";
  const std::vector<TargetProfile> targets = {*only};
  const auto cases = deepinfer::testing::casesFor(kOp, g.seed, false);
  {  // the runs' kernels (every geometry with every plan), compiled side by side first
    std::vector<testing_util::KernelToCompile> kernels;
    for (const auto& c : cases) {
      auto d = describeOp(kOp, c.attrs, c.inputs);
      auto spec = d.ok() ? specialize(*d, *only) : Result<Specialization>(d.error());
      if (!spec.ok()) continue;  // reported by the loop below
      for (const auto& geometry : geometriesOf(*spec))
        for (const auto& plan : kPlans) kernels.push_back({*d, *only, configOf(geometry, plan)});
    }
    testing_util::precompileKernels(jit, kernels);
  }
  int compared = 0, runs = 0, sameBits = 0;
  for (const auto& c : cases) {
    auto d = describeOp(kOp, c.attrs, c.inputs);
    ASSERT_TRUE(d.ok()) << c.name << ": " << d.error().message;
    TensorMap ref = c.inputs;
    ASSERT_TRUE(runReference(kOp, c.attrs, ref).ok()) << c.name;
    for (const auto& target : targets) {
      auto spec = specialize(*d, target);
      ASSERT_TRUE(spec.ok()) << c.name << " on " << target.name << ": " << spec.error().message;
      const std::set<Geometry> geometries = geometriesOf(*spec);
      ASSERT_FALSE(geometries.empty()) << c.name << " on " << target.name;
      for (const auto& geometry : geometries) {
        TensorMap launchMerged;
        for (const auto& [splits, merge] : kPlans) {
          const KernelConfig cfg = configOf(geometry, {splits, merge});
          const std::string where =
              fmt::format("{} [{}] on {} {{{}}} (seed {})", kOp, c.name, target.name, configToString(cfg), g.seed);
          TensorMap gpu = c.inputs;
          GpuRunOptions opts;
          opts.config = cfg;
          auto run = runOpOnGpu(jit, kOp, c.attrs, target, gpu, opts);
          ASSERT_TRUE(run.ok()) << where << ": " << run.error().message;
          ++runs;
          for (const auto& out : deepinfer::testing::outputNames(kOp)) {
            auto rep = deepinfer::testing::compareOutputs(kOp, out, ref.at(out), gpu.at(out), c.attrs, c.inputs);
            EXPECT_TRUE(rep.ok) << where << " '" << out << "': " << rep.metric << " " << rep.maxErr << ": "
                                << rep.detail;
            ++compared;
            if (merge == 0) continue;
            const HostTensor& a = launchMerged.at(out);
            const HostTensor& b = gpu.at(out);
            ASSERT_EQ(a.bytes.size(), b.bytes.size()) << where;
            size_t first = 0;
            while (first < a.bytes.size() && a.bytes[first] == b.bytes[first]) ++first;
            EXPECT_EQ(first, a.bytes.size()) << where << " '" << out << "': differs from the merge launch's bits "
                                             << "(first at byte " << first << ")";
            ++sameBits;
          }
          if (merge == 0)
            for (const auto& out : deepinfer::testing::outputNames(kOp)) launchMerged[out] = gpu.at(out);
        }
      }
    }
  }
  fmt::print("{}: {} comparisons over {} runs on {} targets, {} bit-equal one-launch merges (seed {}); JIT: {} "
             "compiles\n",
             kOp, compared, runs, targets.size(), sameBits, g.seed, jit.compiles());
}

INSTANTIATE_TEST_SUITE_P(Targets, SparseMlaDecodeCandidates, ::testing::ValuesIn(testing_util::testTargetNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
