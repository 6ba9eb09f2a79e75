// sparse_mla_decode's default config per target at V4.1's decode shapes (64 heads, 128 window +
// 512 compressed keys): one of the tuner's candidates (so the GPU suite's candidate sweep covers
// it), within the target's shared-memory cap (48 KB on sm_80/sm_86), and the schedule the
// cost model favours: the widest CTAs the target holds (all 64 heads with q in shared memory
// where the cap allows, else 32 heads with q in registers) and enough splits to fill the SMs at
// small batches, 32-key tiles (dynamic shared memory) for q-in-register CTAs above 48 KB.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "deepinfer/OpShapes.h"
#include "deepinfer/Specialize.h"

using namespace deepinfer;

namespace {

KernelConfig defaultAt(int64_t B, const TargetProfile& t, Specialization* specOut = nullptr) {
  auto d = makeOpDesc("sparse_mla_decode", {{"B", B}}, {});
  EXPECT_TRUE(d.ok());
  auto spec = specialize(*d, t);
  EXPECT_TRUE(spec.ok()) << spec.error().message;
  if (specOut) *specOut = *spec;
  return spec->chosen.config;
}

TEST(SparseMlaDecodeDefaults, AreFittingCandidatesWithinEachTargetsCap) {
  for (const char* name : {"sm_80", "sm_86", "sm_89", "sm_90"}) {
    const TargetProfile t = *findTarget(name);
    for (int64_t B : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128}) {
      Specialization spec;
      const KernelConfig c = defaultAt(B, t, &spec);
      bool listed = false;
      for (const ConfigChoice& ch : spec.fitting) listed = listed || ch.config == c;
      EXPECT_TRUE(listed) << name << " B=" << B << ": default " << configToString(c) << " is not a candidate";
      EXPECT_LE(spec.chosen.estimate.smemBytes, t.smemPerCtaCap) << name << " B=" << B;
      if (t.arch() == 80 || t.arch() == 86) EXPECT_LE(spec.chosen.estimate.smemBytes, 48 * 1024) << name;
    }
  }
}

// Up to B ~ 12, 32-head CTAs with q in registers, split to fill the SMs, on every target: on sm_90
// the 64-head q-in-shared-memory schedule measured slower there (22.3 against 20.1 us at B = 6,
// 72da531) and wins from B = 16 on.
TEST(SparseMlaDecodeDefaults, SmallBatchesSplit32HeadCtasToFillTheSms) {
  for (const char* name : {"sm_80", "sm_86", "sm_90"}) {
    const TargetProfile t = *findTarget(name);
    for (int64_t B : {6, 12}) {
      const KernelConfig c = defaultAt(B, t);
      EXPECT_EQ(c.at("heads_per_cta"), 32) << name << " B=" << B;
      EXPECT_EQ(c.at("schedule"), 0) << name << " B=" << B;
      const int64_t ctas = B * (64 / c.at("heads_per_cta")) * c.at("kv_splits");
      EXPECT_GT(ctas, t.smCount / 2) << name << " B=" << B << ": " << configToString(c);
    }
  }
  const KernelConfig c16 = defaultAt(16, *findTarget("sm_90"));
  EXPECT_EQ(c16.at("schedule"), 1) << configToString(c16);
  EXPECT_EQ(c16.at("heads_per_cta"), 64) << configToString(c16);
}

// sm_89's 99 KB cannot hold 64 heads' q next to a 16-key tile's buffers: 32-head CTAs with q in
// registers and 32-key tiles there; sm_90 keeps all heads in one CTA (16-key tiles: 32-key tiles
// spill under its 128-register bound).
TEST(SparseMlaDecodeDefaults, LargeBatchesUse32KeyTilesOnlyAbove48KbWithQInRegisters) {
  for (int64_t B : {24, 64}) {
    const KernelConfig c = defaultAt(B, *findTarget("sm_90"));
    EXPECT_EQ(c.at("schedule"), 1) << B;
    EXPECT_EQ(c.at("heads_per_cta"), 64) << B;
    EXPECT_EQ(c.at("keys_per_tile"), 16) << B;
    const KernelConfig c89 = defaultAt(B, *findTarget("sm_89"));
    EXPECT_EQ(c89.at("schedule"), 0) << B;
    EXPECT_EQ(c89.at("keys_per_tile"), 32) << B;
  }
  for (const char* name : {"sm_80", "sm_86"}) {
    EXPECT_EQ(defaultAt(24, *findTarget(name)).at("keys_per_tile"), 16) << name;
    EXPECT_EQ(defaultAt(24, *findTarget(name)).at("schedule"), 0) << name;
  }
}

// The two split merges as plans: merge = 0 is the split launch plus a merge launch over a plain
// workspace; merge = 1 is one launch whose arrival counters (one per query and head group) live
// in the zeroed workspace, with the same partials workspace.
TEST(SparseMlaDecodePlans, OneLaunchMergeCountsArrivalsInTheZeroedWorkspace) {
  auto d = makeOpDesc("sparse_mla_decode", {{"B", 6}, {"Sq", 2}}, {});
  ASSERT_TRUE(d.ok());
  KernelConfig c = {{"heads_per_cta", 32}, {"threads", 256}, {"keys_per_tile", 16}, {"stages", 1},
                    {"kv_splits", 5},      {"merge", 0},      {"schedule", 0}};
  auto launched = emitKernel(*d, c);
  ASSERT_TRUE(launched.ok()) << launched.error().message;
  ASSERT_EQ(launched->plan.size(), 2u);
  EXPECT_EQ(launched->plan[0].grid[0], 5u);
  EXPECT_EQ(launched->zeroedBytes, 0);
  c["merge"] = 1;
  auto one = emitKernel(*d, c);
  ASSERT_TRUE(one.ok()) << one.error().message;
  ASSERT_EQ(one->plan.size(), 1u);
  EXPECT_EQ(one->plan[0].grid[0], 5u);
  EXPECT_EQ(one->zeroedBytes, 6 * 2 * (64 / 32) * 4);
  EXPECT_EQ(one->workspaceBytes, launched->workspaceBytes);
  EXPECT_NE(one->unit.source.find("di::smd::Mode::kMergeLastCta"), std::string::npos);
  EXPECT_NE(launched->unit.source.find("di::smd::Mode::kMergeLaunch"), std::string::npos);
}

// schedule = 1 (q in shared memory): one CTA column per query when the CTA takes all 64 heads,
// the q tile's 64 KB in the dynamic shared memory the launch asks for, the template told so;
// offered (64 and 32 heads) only where that fits the cap; refused for CTAs that are not whole
// 16-head m-tiles.
TEST(SparseMlaDecodePlans, QInSharedMemoryTakesAllHeadsInOneCtaWhereTheCapAllows) {
  auto d = makeOpDesc("sparse_mla_decode", {{"B", 6}}, {});
  ASSERT_TRUE(d.ok());
  const KernelConfig c = {{"heads_per_cta", 64}, {"threads", 512}, {"keys_per_tile", 16}, {"stages", 2},
                          {"kv_splits", 20},     {"merge", 0},     {"schedule", 1}};
  auto k = emitKernel(*d, c);
  ASSERT_TRUE(k.ok()) << k.error().message;
  ASSERT_EQ(k->plan.size(), 2u);
  EXPECT_EQ(k->plan[0].grid[0], 20u);
  EXPECT_EQ(k->plan[0].grid[1], 1u);
  EXPECT_EQ(k->plan[0].grid[2], 6u);
  EXPECT_EQ(int64_t(k->plan[0].dynamicSmem), int64_t(16 * 1024 + 2 * 16 * 592 + 4 * 4 * 16 * 64 + 64 * 1024 + 48));
  EXPECT_NE(k->unit.source.find("sparse_mla_decode_kernel<64, 4, 16, 2, di::smd::Mode::kMergeLaunch, true, true>"),
            std::string::npos)
      << k->unit.source;

  // 64-head CTAs (q 64 KB) only on sm_90; 32-head ones (q 32 KB) also in sm_89's 99 KB.
  for (const char* name : {"sm_80", "sm_86", "sm_89", "sm_90"}) {
    auto spec = specialize(*d, *findTarget(name));
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    std::set<int64_t> heads;
    for (const ConfigChoice& ch : spec->fitting)
      if (ch.config.at("schedule") == 1) heads.insert(ch.config.at("heads_per_cta"));
    const std::string n = name;
    const std::set<int64_t> expected = n == "sm_90"   ? std::set<int64_t>{32, 64}
                                       : n == "sm_89" ? std::set<int64_t>{32}
                                                      : std::set<int64_t>{};
    EXPECT_EQ(heads, expected) << name;
  }

  KernelConfig padded = c;
  padded["heads_per_cta"] = 32;
  padded["threads"] = 256;
  EXPECT_TRUE(emitKernel(*d, padded).ok());
  auto tiny = makeOpDesc("sparse_mla_decode", {{"B", 2}, {"H", 24}}, {});
  ASSERT_TRUE(tiny.ok());
  KernelConfig odd = c;
  odd["heads_per_cta"] = 24;
  odd["threads"] = 256;
  auto r = emitKernel(*tiny, odd);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("schedule=1 (q in shared memory) needs heads_per_cta in whole m-tiles of 16"),
            std::string::npos)
      << r.error().message;
}

}  // namespace
