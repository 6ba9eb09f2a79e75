#include <gtest/gtest.h>

#include "deepinfer/LocalGpu.h"
#include "deepinfer/TargetProfile.h"

using namespace deepinfer;

TEST(TargetProfile, ArchFactsFollowTheSpec) {
  auto a80 = archFacts(80), a86 = archFacts(86), a89 = archFacts(89), a90 = archFacts(90);
  ASSERT_TRUE(a80 && a86 && a89 && a90);
  EXPECT_EQ(a80->smemPerSm, 164 * 1024);
  EXPECT_EQ(a86->smemPerSm, 100 * 1024);
  EXPECT_EQ(a90->smemPerSm, 228 * 1024);
  EXPECT_EQ(a80->smemPerCtaOptIn, 163 * 1024);
  EXPECT_EQ(a86->smemPerCtaOptIn, 99 * 1024);
  EXPECT_EQ(a80->maxWarpsPerSm, 64);
  EXPECT_EQ(a86->maxWarpsPerSm, 48);
  EXPECT_EQ(a89->maxWarpsPerSm, 48);
  EXPECT_EQ(a80->maxCtasPerSm, 32);
  EXPECT_EQ(a86->maxCtasPerSm, 16);
  EXPECT_EQ(a89->maxCtasPerSm, 24);
  EXPECT_FALSE(a80->nativeFp8Convert);
  EXPECT_FALSE(a86->nativeFp8Convert);
  EXPECT_TRUE(a89->nativeFp8Convert);
  EXPECT_FALSE(archFacts(75).has_value());
}

TEST(TargetProfile, AmpereCapIs48KBAndLiftedElsewhere) {
  for (const auto& t : targetPresets()) {
    if (t.arch() == 80 || t.arch() == 86) EXPECT_EQ(t.smemPerCtaCap, 48 * 1024) << t.name;
    else EXPECT_GT(t.smemPerCtaCap, 48 * 1024) << t.name;
  }
}

TEST(TargetProfile, PresetsKeepPartFactsSeparateFromArch) {
  // Never infer SMs from the architecture: three sm_80 parts, three SM counts.
  EXPECT_EQ(findTarget("a100-80gb")->smCount, 108);
  EXPECT_EQ(findTarget("ga100-64gb")->smCount, 74);
  EXPECT_EQ(findTarget("a30")->smCount, 56);
  EXPECT_EQ(findTarget("ga100-64gb")->memBandwidthGBs, 0);  // unknown: to be measured
  EXPECT_TRUE(findTarget("rtx3090")->bf16Fp32AccHalfRate);
  EXPECT_FALSE(findTarget("rtx-a6000")->bf16Fp32AccHalfRate);
  EXPECT_EQ(findTarget("h200")->l2Bytes, 60ll * 1024 * 1024);
  EXPECT_FALSE(findTarget("sm_75").has_value());
  EXPECT_FALSE(findTarget("").has_value());
  for (const auto& n : defaultTargetNames()) EXPECT_TRUE(findTarget(n).has_value()) << n;
}

// Without a driver (CI) the local GPU is an error that says why; with one, its facts are sane.
TEST(LocalGpu, DriverlessPathReportsPlainly) {
  auto g = localGpu(0);
  if (!g.ok()) {
    const std::string& m = g.error().message;
    EXPECT_TRUE(m.find("driver") != std::string::npos || m.find("GPU") != std::string::npos) << m;
    GTEST_SKIP() << "no GPU here: " << m;
  }
  EXPECT_GT(g->profile.smCount, 0);
  EXPECT_GE(g->profile.arch(), 80);
  EXPECT_FALSE(g->profile.gpuName.empty());
  EXPECT_GT(g->profile.l2Bytes, 0);
  EXPECT_GT(g->profile.smemPerCtaCap, 0);
  EXPECT_FALSE(localGpu(1000).ok());
}
