// templates/SparseMlaDecode.cuh executed on the CPU by the SIMT emulator (SimtEmu.h) through the
// family's own plans (poisoned outputs and workspace, the zeroed region checked zero afterwards)
// and compared with the C++ reference by the GPU tests' rule, on the decode cases with B = 1,
// fewer keys than a tile (empty splits), odd K at 64 heads, and odd K with NaN codes at Sq = 2:
// the direct plan, the merge launch and the one-launch merge (the last CTA of each head group
// merges) at 3 and 11 splits (past the merge's load chunks), for 16- and 32-head CTAs with 16-
// and 32-key tiles, and with q in shared memory (schedule 1) for 64-head CTAs (all heads of a
// query), 32-head and 16-head ones. The one-launch merge runs with its CTAs in grid order and in
// permutations (the hardware may finish them in any order) and must give the merge launch's bits
// every time. This checks the data flow (ldmatrix fragments, the dequantized tile, the split
// bookkeeping and the arrival counters) where no GPU is available; the GPU tests check the
// compiled kernels.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

#include "cases/OpCases.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Reference.h"
#include "deepinfer/Specialize.h"
// clang-format off
#include "EmuCuda.h"
#include "EmuHarness.h"
#include "SparseMlaDecode.cuh"
// clang-format on

namespace {

using namespace deepinfer;
using emu_test::EmulatedRun;
using emu_test::runPlanEmulated;
using emu_test::templateArgs;

constexpr const char* kOp = "sparse_mla_decode";
using DecodeFn = void (*)(const di::SparseMlaDecodeParams&);

template <int HEADS, int DS, int N, int STAGES, int MODE, bool DYN, bool QS>
void decode(const di::SparseMlaDecodeParams& p) {
  di::sparse_mla_decode_kernel<HEADS, DS, N, STAGES, MODE, DYN, QS>(p);
}
// Any table size >= the split count runs the same arithmetic: the family's bound.
void merge(const di::SparseMlaDecodeParams& p) { di::sparse_mla_decode_merge_kernel<1024>(p); }

// The instantiations the configs below emit, by the template arguments the unit spells.
#define DI_SMD(H, D, N, S, M, Y, Q) \
  {#H ", " #D ", " #N ", " #S ", di::smd::Mode::" #M ", " #Y ", " #Q, &decode<H, D, N, S, di::smd::Mode::M, Y, Q>}
#define DI_SMD_MODES(H, D, N, S, Y, Q) \
  DI_SMD(H, D, N, S, kDirect, Y, Q), DI_SMD(H, D, N, S, kMergeLaunch, Y, Q), DI_SMD(H, D, N, S, kMergeLastCta, Y, Q)
const std::map<std::string, DecodeFn>& kernels() {
  static const std::map<std::string, DecodeFn> m = {
      DI_SMD_MODES(16, 8, 16, 2, false, false), DI_SMD_MODES(32, 4, 16, 1, false, false),
      DI_SMD_MODES(32, 4, 32, 2, true, false),  DI_SMD_MODES(64, 4, 16, 2, true, true),
      DI_SMD_MODES(32, 4, 16, 3, true, true),   DI_SMD_MODES(16, 4, 16, 1, false, true)};
  return m;
}

Result<std::function<void()>> pick(const LaunchStep& st, const std::string& src, const std::vector<uint8_t>& params) {
  if (params.size() != sizeof(di::SparseMlaDecodeParams)) return Error{"packed params are not SparseMlaDecodeParams"};
  const auto* p = reinterpret_cast<const di::SparseMlaDecodeParams*>(params.data());
  DecodeFn fn = nullptr;
  if (st.entry.size() > 6 && st.entry.compare(st.entry.size() - 6, 6, "_merge") == 0) {
    fn = &merge;
  } else {
    const std::string args = templateArgs(src, "di::sparse_mla_decode_kernel<");
    auto it = kernels().find(args);
    if (it == kernels().end()) return Error{"the emulator test has no sparse_mla_decode_kernel<" + args + ">"};
    fn = it->second;
  }
  return std::function<void()>([fn, p] { fn(*p); });
}

uint64_t seed() {
  const char* s = std::getenv("DI_TEST_SEED");
  return s ? std::strtoull(s, nullptr, 0) : 20261202;
}

struct Geometry {
  int64_t heads, threads, keys, stages, schedule;
};

KernelConfig config(const Geometry& g, int64_t splits, int64_t merge) {
  return {{"heads_per_cta", g.heads}, {"threads", g.threads}, {"keys_per_tile", g.keys}, {"stages", g.stages},
          {"kv_splits", splits},      {"merge", merge},       {"schedule", g.schedule}};
}

TEST(SparseMlaDecodeEmu, DirectLaunchAndLastCtaMergesMatchReferenceAndEachOther) {
  const std::set<std::string> names = {"b1_sq1_h64_swa_only", "b2_sq1_h64_odd_k", "b3_sq1_h64_few_keys",
                                       "b7_sq2_h16_nan_odd_k"};
  int compared = 0, sameBits = 0, seen = 0;
  for (const auto& c : deepinfer::testing::casesFor(kOp, seed(), false)) {
    if (!names.count(c.name)) continue;
    ++seen;
    TensorMap ref = c.inputs;
    ASSERT_TRUE(runReference(kOp, c.attrs, ref).ok()) << c.name;
    const int64_t H = c.inputs.at("q").dim(2);
    std::vector<Geometry> geometries = {{16, 256, 16, 2, 0}};
    if (H % 32 == 0) geometries.push_back({32, 256, 16, 1, 0}), geometries.push_back({32, 256, 32, 2, 0});
    if (H % 64 == 0) geometries.push_back({64, 512, 16, 2, 1}), geometries.push_back({32, 256, 16, 3, 1});
    else geometries.push_back({16, 128, 16, 1, 1});
    for (const Geometry& geo : geometries) {
      auto check = [&](const KernelConfig& cfg, uint64_t order) -> TensorMap {
        const std::string where =
            fmt::format("{} [{}] {{{}}} CTA order {} (seed {})", kOp, c.name, configToString(cfg), order, seed());
        EmulatedRun got = runPlanEmulated(kOp, c.attrs, c.inputs, cfg, pick, order);
        EXPECT_EQ(got.error, "") << where;
        if (!got.error.empty()) return {};
        for (const auto& out : deepinfer::testing::outputNames(kOp)) {
          auto rep = deepinfer::testing::compareOutputs(kOp, out, ref.at(out), got.tensors.at(out), c.attrs, c.inputs);
          EXPECT_TRUE(rep.ok) << where << " '" << out << "': " << rep.metric << " " << rep.maxErr << ": "
                              << rep.detail;
          ++compared;
        }
        return got.tensors;
      };
      check(config(geo, 1, 0), 0);
      // 3 splits in grid order and a permutation; 11 in another permutation.
      for (const auto& [splits, orders] : {std::pair<int64_t, std::vector<uint64_t>>{3, {0, 7}}, {11, {1234567}}}) {
        const TensorMap launched = check(config(geo, splits, 0), 0);
        if (launched.empty()) continue;
        for (uint64_t order : orders) {
          const TensorMap oneLaunch = check(config(geo, splits, 1), order);
          if (oneLaunch.empty()) continue;
          for (const auto& out : deepinfer::testing::outputNames(kOp)) {
            EXPECT_EQ(launched.at(out).bytes, oneLaunch.at(out).bytes)
                << c.name << " {" << configToString(config(geo, splits, 1)) << "} CTA order "
                << order << " '" << out << "': not the merge launch's bits";
            ++sameBits;
          }
        }
      }
    }
  }
  EXPECT_EQ(seen, int(names.size()));
  fmt::print("{}: {} emulated comparisons, {} bit-equal one-launch merges (seed {})\n", kOp, compared, sameBits,
             seed());
}

}  // namespace
