// The mHC one-launch plans (docs/ops.md §8.5) as the compiler offers them: decode-size candidates
// that run in one launch with their arrival counters in "__zeroed" (the defaults stay two-launch:
// they measured faster), none past T = 64, and a one-launch config the kernels cannot serve is an
// error naming the knob.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "deepinfer/OpShapes.h"
#include "deepinfer/Pipeline.h"

using namespace deepinfer;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

OpDesc desc(const std::string& op, int64_t T, int64_t C = 5120) {
  auto d = makeOpDesc(op, {{"T", T}, {"C", C}}, {});
  EXPECT_TRUE(d.ok()) << op;
  return *d;
}

TEST(MhcOneLaunch, DecodeCandidatesRunInOneLaunchWithZeroedArrivalCounters) {
  for (const char* op : {"mhc_pre", "mhc_fused_post_pre", "mhc_post"}) {
    const KernelFamily* fam = findKernelFamily(op);
    ASSERT_NE(fam, nullptr) << op;
    for (const char* tn : {"sm_80", "sm_86", "sm_90"}) {
      for (int64_t T : {1, 2, 6, 12, 16}) {
        const std::string where = fmt::format("{} T={} on {}", op, T, tn);
        const OpDesc d = desc(op, T);
        auto spec = specialize(d, *findTarget(tn));
        ASSERT_TRUE(spec.ok()) << where << ": " << spec.error().message;
        int seen = 0;
        for (const auto& ch : spec->fitting) {
          const KernelConfig& c = ch.config;
          if (c.at("one_launch") != 1) continue;
          ++seen;
          auto plan = fam->launchPlan(c, d, "k");
          ASSERT_TRUE(plan.ok()) << where;
          ASSERT_EQ(plan->size(), 1u) << where;
          EXPECT_EQ((*plan)[0].grid[1], uint32_t(c.at("k_slices"))) << where;
          // One token tile: one counter, rounded up to 16 bytes; the partial records as before.
          EXPECT_EQ((*plan)[0].grid[0], 1u) << where;
          EXPECT_EQ(fam->zeroedWorkspaceBytes(c, d).value(), 16) << where;
          EXPECT_GT(fam->workspaceBytes(c, d).value(), 0) << where;
          auto u = fam->emit(c, d, "k");
          ASSERT_TRUE(u.ok()) << where;
          EXPECT_TRUE(contains(u->source, "di::mhc_one_launch_kernel<")) << u->source;
          EXPECT_EQ(u->entries, std::vector<std::string>{"k"}) << where;
        }
        EXPECT_GT(seen, 0) << where;
        // The default: the two-launch plan, no zeroed memory.
        const KernelConfig c = fam->defaultConfig(d, *findTarget(tn));
        EXPECT_EQ(c.at("one_launch"), 0) << where << ": " << configToString(c);
        EXPECT_EQ(fam->zeroedWorkspaceBytes(c, d).value(), 0) << where;
      }
    }
  }
}

TEST(MhcOneLaunch, LargeTRunsTheTwoLaunchPlanWithoutZeroedMemory) {
  for (const char* op : {"mhc_pre", "mhc_fused_post_pre"}) {
    const KernelFamily* fam = findKernelFamily(op);
    for (int64_t T : {64, 1536}) {
      const OpDesc d = desc(op, T);
      const KernelConfig c = fam->defaultConfig(d, *findTarget("sm_90"));
      EXPECT_EQ(c.at("one_launch"), 0) << op << " T=" << T;
      EXPECT_EQ(fam->launchPlan(c, d, "k")->size(), 2u) << op << " T=" << T;
      EXPECT_EQ(fam->zeroedWorkspaceBytes(c, d).value(), 0) << op << " T=" << T;
    }
  }
}

TEST(MhcOneLaunch, CandidatesIncludeOneLaunchOnlyUpToT64) {
  for (const char* op : {"mhc_pre", "mhc_fused_post_pre", "mhc_post"}) {
    for (int64_t T : {1, 64, 65}) {
      auto spec = specialize(desc(op, T), *findTarget("sm_86"));
      ASSERT_TRUE(spec.ok()) << op << ": " << spec.error().message;
      int oneLaunch = 0;
      for (const auto& ch : spec->fitting) oneLaunch += ch.config.at("one_launch") == 1;
      if (T <= 64) {
        EXPECT_GT(oneLaunch, 0) << op << " T=" << T;
      } else {
        EXPECT_EQ(oneLaunch, 0) << op << " T=" << T;
      }
    }
  }
}

TEST(MhcOneLaunch, ConfigsTheKernelsCannotServeAreErrorsNamingTheKnob) {
  const KernelFamily* pre = findKernelFamily("mhc_pre");
  KernelConfig c{{"threads", 256}, {"k_slices", 160}, {"use_mma", 1}, {"one_launch", 2}};
  auto e = pre->canImplement(c, desc("mhc_pre", 6));
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(contains(e.error().message, "one_launch = 2; expected 0 or 1")) << e.error().message;
  c["one_launch"] = 1;
  EXPECT_TRUE(pre->canImplement(c, desc("mhc_pre", 6)).ok());
  e = pre->canImplement(c, desc("mhc_pre", 65));
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(contains(e.error().message, "one_launch = 1 with T = 65")) << e.error().message;
  const KernelFamily* post = findKernelFamily("mhc_post");
  e = post->canImplement({{"threads", 32}, {"k_slices", 160}, {"one_launch", 3}}, desc("mhc_post", 6));
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(contains(e.error().message, "one_launch = 3")) << e.error().message;
}

}  // namespace
