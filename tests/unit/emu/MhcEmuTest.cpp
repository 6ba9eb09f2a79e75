// The mHC templates (MhcStream.cuh, MhcFinalize.cuh: mhc_pre, mhc_post, mhc_fused_post_pre,
// mhc_collapse) executed on the CPU by the SIMT emulator (SimtEmu.h) and compared with the C++
// references by the GPU tests' rule: the same template code, the family's own launch plan,
// workspace (poisoned) and packed parameters, every case of tests/cases, outputs poisoned first.
// Configs: every candidate that fits sm_80, sm_86 or sm_90 (the tuner's choices: CUDA-core and
// tensor-core mixes, 1..8 warps, 1..C/32 slices) on the C = 256 cases and the defaults of each
// target on the C = 5120 and 16384 cases (every candidate there with DI_EMU_ALL=1). This checks the data
// flow (fragment layouts, slice partials, the finalize's reductions) where no GPU is available;
// the GPU tests check the compiled kernels themselves. A one-launch plan must also give its two-launch
// twin's bits (one_launch = 0, same knobs), with its CTAs in grid order or shuffled.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <set>

#include "cases/OpCases.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Reference.h"
#include "deepinfer/Specialize.h"
#include "deepinfer/TargetProfile.h"
// clang-format off
#include "EmuCuda.h"
#include "EmuHarness.h"
#include "MhcStream.cuh"
#include "MhcFinalize.cuh"
#include "MhcOneLaunch.cuh"
// clang-format on

namespace {

using namespace deepinfer;
using emu_test::templateArgs;
using emu_test::EmulatedRun;
using emu_test::runPlanEmulated;
using emu_test::expectCtaOrderIndependent;

using MhcFn = void (*)(const di::MhcParams&);

template <int kMode, int kWarps, bool kMma>
void stream(const di::MhcParams& p) {
  di::mhc_stream_kernel<kMode, kWarps, kMma>(p);
}
template <int kMode, int kWarps, bool kMma>
void oneLaunch(const di::MhcParams& p) {
  di::mhc_one_launch_kernel<kMode, kWarps, kMma>(p);
}
void finalize(const di::MhcParams& p) { di::mhc_finalize_kernel<256>(p); }
void sqrsum(const di::MhcParams& p) { di::mhc_sqrsum_kernel<256>(p); }

// The stream-pass instantiations, by the template arguments the emitted unit spells.
#define DI_MHC(M, W, K) {"di::" #M ", " #W ", " #K, &stream<di::M, W, K>}
#define DI_MHC_WARPS(M, K) DI_MHC(M, 1, K), DI_MHC(M, 2, K), DI_MHC(M, 3, K), DI_MHC(M, 4, K), DI_MHC(M, 8, K)
const std::map<std::string, MhcFn>& streamKernels() {
  static const std::map<std::string, MhcFn> m = {
      DI_MHC_WARPS(kMhcModePre, true),    DI_MHC_WARPS(kMhcModePre, false),  DI_MHC_WARPS(kMhcModeFused, true),
      DI_MHC_WARPS(kMhcModeFused, false), DI_MHC_WARPS(kMhcModePost, false), DI_MHC_WARPS(kMhcModeCollapse, false),
  };
  return m;
}

// The one-launch instantiations (mix modes on tensor cores, post mode), by the same key.
#define DI_MHC1(M, W, K) {"di::" #M ", " #W ", " #K, &oneLaunch<di::M, W, K>}
#define DI_MHC1_WARPS(M, K) DI_MHC1(M, 1, K), DI_MHC1(M, 2, K), DI_MHC1(M, 3, K), DI_MHC1(M, 4, K), DI_MHC1(M, 8, K)
const std::map<std::string, MhcFn>& oneLaunchKernels() {
  static const std::map<std::string, MhcFn> m = {
      DI_MHC1_WARPS(kMhcModePre, true),
      DI_MHC1_WARPS(kMhcModeFused, true),
      DI_MHC1_WARPS(kMhcModePost, false),
  };
  return m;
}

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The mHC kernel of a plan step: the finalize and sum-of-squares passes at 256 threads, the
// stream pass by its template arguments.
Result<std::function<void()>> pickMhc(const LaunchStep& st, const std::string& src, const std::vector<uint8_t>& params) {
  if (params.size() != sizeof(di::MhcParams)) return Error{"packed params are not an MhcParams"};
  const auto* p = reinterpret_cast<const di::MhcParams*>(params.data());
  MhcFn fn = nullptr;
  if (endsWith(st.entry, "_finalize")) {
    if (templateArgs(src, "di::mhc_finalize_kernel<") != "256") return Error{"finalize is not <256>"};
    fn = &finalize;
  } else if (endsWith(st.entry, "_sqrsum")) {
    if (templateArgs(src, "di::mhc_sqrsum_kernel<") != "256") return Error{"sqrsum is not <256>"};
    fn = &sqrsum;
  } else if (src.find("di::mhc_one_launch_kernel<") != std::string::npos) {
    const std::string args = templateArgs(src, "di::mhc_one_launch_kernel<");
    auto it = oneLaunchKernels().find(args);
    if (it == oneLaunchKernels().end()) return Error{"the emulator test has no mhc_one_launch_kernel<" + args + ">"};
    fn = it->second;
  } else {
    const std::string args = templateArgs(src, "di::mhc_stream_kernel<");
    auto it = streamKernels().find(args);
    if (it == streamKernels().end()) return Error{"the emulator test has no mhc_stream_kernel<" + args + ">"};
    fn = it->second;
  }
  return std::function<void()>([fn, p] { fn(*p); });
}

EmulatedRun runEmulated(const std::string& op, const OpAttrs& attrs, const TensorMap& inputs, const KernelConfig& cfg,
                        uint64_t ctaOrderSeed = 0) {
  return runPlanEmulated(op, attrs, inputs, cfg, pickMhc, ctaOrderSeed);
}

uint64_t seed() {
  const char* s = std::getenv("DI_TEST_SEED");
  return s ? std::strtoull(s, nullptr, 0) : 20261202;
}

// Every case of `op`: the defaults of sm_80, sm_86 and sm_90, plus every fitting candidate of
// those targets on the small-C cases (all cases with DI_EMU_ALL=1).
void checkOp(const std::string& op) {
  const bool all = std::getenv("DI_EMU_ALL") != nullptr;
  int compared = 0, configsRun = 0, shuffled = 0, twins = 0;
  std::set<int64_t> slicesSeen, oneLaunchTokens;
  for (const auto& c : deepinfer::testing::casesFor(op, seed(), false)) {
    TensorMap ref = c.inputs;
    ASSERT_TRUE(runReference(op, c.attrs, ref).ok()) << c.name;
    auto d = describeOp(op, c.attrs, c.inputs);
    ASSERT_TRUE(d.ok()) << c.name << ": " << d.error().message;
    const std::string resName = d->hasTensor("residual") ? "residual" : "x";
    const bool smallC = d->dim(resName, 2) <= 256;
    std::vector<KernelConfig> configs;
    auto add = [&](const KernelConfig& k) {
      for (const auto& have : configs)
        if (configToString(have) == configToString(k)) return;
      configs.push_back(k);
    };
    for (const char* tn : {"sm_80", "sm_86", "sm_90"}) {
      auto spec = specialize(*d, *findTarget(tn));
      ASSERT_TRUE(spec.ok()) << c.name << " on " << tn << ": " << spec.error().message;
      add(spec->chosen.config);
      if (smallC || all)
        for (const auto& ch : spec->fitting) add(ch.config);
    }
    for (const KernelConfig& cfg : configs) {
      const std::string where = fmt::format("{} [{}] {{{}}} (seed {})", op, c.name, configToString(cfg), seed());
      auto got = runEmulated(op, c.attrs, c.inputs, cfg);
      ASSERT_EQ(got.error, "") << where;
      auto fromKernel = deepinfer::testing::expectedFromKernelOutputs(op, c.attrs, c.inputs, got.tensors);
      ASSERT_TRUE(fromKernel.ok()) << where << ": " << fromKernel.error().message;
      for (const auto& out : deepinfer::testing::outputNames(op)) {
        const HostTensor& want = fromKernel->count(out) ? fromKernel->at(out) : ref.at(out);
        auto rep = deepinfer::testing::compareOutputs(op, out, want, got.tensors.at(out), c.attrs, c.inputs);
        EXPECT_TRUE(rep.ok) << where << " '" << out << "': " << rep.metric << " " << rep.maxErr << ": " << rep.detail;
        ++compared;
      }
      ++configsRun;
      if (cfg.count("k_slices")) slicesSeen.insert(cfg.at("k_slices"));
      // A one-launch plan (arrival counters in the zeroed region) again with its CTAs shuffled:
      // another CTA of each tile arrives last and finalizes, and every output bit must be the same.
      if (got.zeroedBytes > 0) {
        expectCtaOrderIndependent(op, got, runEmulated(op, c.attrs, c.inputs, cfg, seed() * 2654435761u + 1), where);
        ++shuffled;
        oneLaunchTokens.insert(d->dim(resName, 0));
        // ... and the same bits as its two-launch twin (the finalize launch's reductions).
        KernelConfig twin = cfg;
        twin.at("one_launch") = 0;
        const EmulatedRun launched = runEmulated(op, c.attrs, c.inputs, twin);
        ASSERT_EQ(launched.error, "") << where << " (two-launch twin)";
        ASSERT_EQ(launched.zeroedBytes, 0) << where << " (two-launch twin)";
        for (const auto& out : deepinfer::testing::outputNames(op))
          EXPECT_TRUE(launched.tensors.at(out).bytes == got.tensors.at(out).bytes)
              << where << " '" << out << "': not the two-launch plan's bits";
        ++twins;
      }
    }
  }
  if (op != "mhc_collapse") {
    // The one-launch plans ran at decode sizes on both sides of one 16-token tile.
    EXPECT_TRUE(oneLaunchTokens.count(1) && oneLaunchTokens.count(15) && oneLaunchTokens.count(17))
        << op << ": one-launch plans ran at " << fmt::format("{}", fmt::join(oneLaunchTokens, ", "));
  }
  // The candidates reach both ends of the split: one slice and one 32-column chunk per slice.
  EXPECT_TRUE(slicesSeen.count(1)) << op;
  EXPECT_TRUE(slicesSeen.count(8)) << op << ": C = 256 has 8 chunks";
  // ... and more slices than one batch of the reductions' loads covers (kMhcLoadBatch x 32).
  EXPECT_GT(*slicesSeen.rbegin(), di::kMhcLoadBatch * 32) << op;
  if (op != "mhc_collapse") EXPECT_GT(twins, 0) << op << ": no one-launch plan was compared with its two-launch twin";
  fmt::print("{}: {} emulated comparisons over {} case configs, {} one-launch plans re-run with their CTAs shuffled "
             "and bit-compared with their two-launch twins (seed {})\n",
             op, compared, configsRun, shuffled, seed());
}

TEST(MhcEmu, PreMatchesReference) { checkOp("mhc_pre"); }
TEST(MhcEmu, PostMatchesReference) { checkOp("mhc_post"); }
TEST(MhcEmu, FusedPostPreMatchesReference) { checkOp("mhc_fused_post_pre"); }
TEST(MhcEmu, CollapseMatchesReference) { checkOp("mhc_collapse"); }

}  // namespace
