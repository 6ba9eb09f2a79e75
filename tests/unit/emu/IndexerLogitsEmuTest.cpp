// templates/IndexerLogits.cuh under the host SIMT emulator (SimtEmu.h): every indexer_logits case
// against the C++ reference through the family's own plan and packed parameters (outputs
// poisoned, CTAs in a permuted order), with the defaults of sm_80, sm_86 and sm_90 and every
// fitting candidate of those targets that gives a warp four m16 query tiles (each must be listed
// below). Each template instance runs once, on the first case that offers it (the 32-head cases
// come first: several requests per token group, visible 0 / Nmax / one position into a page),
// since the emulator takes seconds per case. This checks the data flow (the e4m3 decode's K order against the query staging, the
// swizzled ldmatrix fragments, the row-lane head sums, segments of tokens of different requests,
// the -inf fill) without a GPU; the GPU suite (tests/gpu/GpuOpsTest.cpp) runs every candidate on
// the device.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "cases/OpCases.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Reference.h"
#include "deepinfer/Specialize.h"
#include "deepinfer/TargetProfile.h"
// clang-format off
#include "EmuCuda.h"
#include "EmuHarness.h"
#include "IndexerLogits.cuh"
// clang-format on

namespace {

using namespace deepinfer;
using emu_test::runPlanEmulated;
using emu_test::templateArgs;

using IndexerFn = void (*)(const di::IndexerLogitsParams&);

template <int HPAD, int TPC, int WM, int WN, int BN, int ST, int BS>
void indexer(const di::IndexerLogitsParams& p) {
  di::indexer_logits_kernel<HPAD, TPC, WM, WN, BN, ST, BS>(p);
}

// By the template arguments the emitted unit spells: <HPAD, TPC, WARPS_M, WARPS_N, BLOCK_N,
// STAGES, BS>.
#define DI_IDX(H, T, M, N, B, S, K) {#H ", " #T ", " #M ", " #N ", " #B ", " #S ", " #K, &indexer<H, T, M, N, B, S, K>}
const std::map<std::string, IndexerFn>& kernels() {
  static const std::map<std::string, IndexerFn> m = {
      // four m16 tiles per warp: 32 heads x 8 tokens, 64 heads x 4 tokens
      DI_IDX(32, 8, 4, 1, 64, 2, 64), DI_IDX(32, 8, 4, 1, 64, 1, 64), DI_IDX(32, 8, 4, 1, 32, 2, 64),
      DI_IDX(64, 4, 4, 1, 64, 2, 256), DI_IDX(64, 4, 4, 1, 64, 1, 256), DI_IDX(64, 4, 4, 1, 32, 2, 256),
      DI_IDX(64, 8, 8, 1, 64, 2, 256),
      // the targets' defaults for the cases' shapes (two m16 tiles per warp)
      DI_IDX(32, 4, 4, 2, 64, 2, 64), DI_IDX(32, 1, 1, 4, 64, 2, 64), DI_IDX(16, 4, 2, 4, 64, 2, 2),
      DI_IDX(64, 4, 8, 1, 64, 2, 256), DI_IDX(64, 2, 4, 2, 64, 2, 256),
  };
  return m;
}

Result<std::function<void()>> pick(const LaunchStep&, const std::string& src, const std::vector<uint8_t>& params) {
  if (params.size() != sizeof(di::IndexerLogitsParams)) return Error{"packed params are not IndexerLogitsParams"};
  const auto* p = reinterpret_cast<const di::IndexerLogitsParams*>(params.data());
  const std::string args = templateArgs(src, "di::indexer_logits_kernel<");
  auto it = kernels().find(args);
  if (it == kernels().end()) return Error{"the emulator test has no indexer_logits_kernel<" + args + ">"};
  IndexerFn fn = it->second;
  return std::function<void()>([fn, p] { fn(*p); });
}

// The emitted unit's template arguments.
std::string instance(const OpDesc& d, const KernelConfig& cfg) {
  auto k = emitKernel(d, cfg);
  return k.ok() ? templateArgs(k->unit.source, "di::indexer_logits_kernel<") : "";
}

// m16 query tiles per warp of an instance: TPC * HPAD / 16 / WARPS_M.
int mTilesPerWarp(const std::string& args) {
  std::stringstream ss(args);
  int v[7] = {};
  char comma = 0;
  for (int i = 0; i < 7; ++i) {
    ss >> v[i];
    if (i < 6) ss >> comma;
  }
  return v[2] > 0 ? v[1] * v[0] / 16 / v[2] : 0;
}

uint64_t seed() {
  const char* s = std::getenv("DI_TEST_SEED");
  return s ? std::strtoull(s, nullptr, 0) : 20261202;
}

TEST(IndexerLogitsEmu, DefaultsAndFourTileCandidatesMatchReference) {
  const std::string op = "indexer_logits";
  int compared = 0, fourTile = 0;
  std::set<std::string> done;  // template instances already run
  for (const auto& c : deepinfer::testing::casesFor(op, seed(), false)) {
    TensorMap ref = c.inputs;
    ASSERT_TRUE(runReference(op, c.attrs, ref).ok()) << c.name;
    auto d = describeOp(op, c.attrs, c.inputs);
    ASSERT_TRUE(d.ok()) << c.name << ": " << d.error().message;
    // One config per template instance (positions_per_cta is a runtime parameter; the GPU
    // suite runs every value), the targets' defaults first.
    std::map<std::string, KernelConfig> configs;
    auto add = [&](const KernelConfig& k) {
      const std::string args = instance(*d, k);
      if (!done.count(args)) configs.emplace(args, k);
    };
    for (const char* tn : {"sm_80", "sm_86", "sm_90"}) {
      auto spec = specialize(*d, *findTarget(tn));
      ASSERT_TRUE(spec.ok()) << c.name << " on " << tn << ": " << spec.error().message;
      add(spec->chosen.config);
      for (const auto& ch : spec->fitting)
        if (mTilesPerWarp(instance(*d, ch.config)) == 4) add(ch.config);
    }
    for (const auto& [args, cfg] : configs) {
      const std::string where =
          fmt::format("{} [{}] {{{}}} <{}> (seed {})", op, c.name, configToString(cfg), args, seed());
      if (mTilesPerWarp(args) == 4) ++fourTile;
      done.insert(args);
      auto got = runPlanEmulated(op, c.attrs, c.inputs, cfg, pick, seed());
      ASSERT_EQ(got.error, "") << where;
      auto rep = deepinfer::testing::compareOutputs(op, "scores", ref.at("scores"), got.tensors.at("scores"),
                                                    c.attrs, c.inputs);
      EXPECT_TRUE(rep.ok) << where << ": " << rep.metric << " " << rep.maxErr << ": " << rep.detail;
      ++compared;
    }
  }
  EXPECT_GT(fourTile, 0);
  fmt::print("{}: {} emulated comparisons, {} of four-tile candidates (seed {})\n", op, compared, fourTile, seed());
}

}  // namespace
