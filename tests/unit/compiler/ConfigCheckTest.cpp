// One check decides whether a config can serve an op: checkConfig (used by the passes, the tuner
// and the JIT before reusing a tuned winner) runs the same knob check every launch runs
// (packParams, through the family's canImplement), and it speaks in the family's own terms before
// any resource estimate. A winner
// tuned for V4.1-Flash (64 heads) therefore can never reach the launch of a tiny (8 heads) op.
#include <gtest/gtest.h>

#include <string>

#include "deepinfer/OpShapes.h"
#include "deepinfer/Specialize.h"
#include "deepinfer/TuningDims.h"

using namespace deepinfer;

namespace {

// Device addresses for every tensor of `d` (inputs, outputs, workspaces): aligned, never read.
DeviceAddrMap fakeAddrs(const KernelFamily& f, const OpDesc& d) {
  DeviceAddrMap a;
  uint64_t next = uint64_t(1) << 40;
  for (const auto& [name, shape] : d.shapes) a[name] = (next += uint64_t(1) << 32);
  for (const auto& [name, spec] : f.outputs(d)) a[name] = (next += uint64_t(1) << 32);
  a["__workspace"] = (next += uint64_t(1) << 32);
  a["__zeroed"] = (next += uint64_t(1) << 32);
  return a;
}

OpDesc desc(const std::string& op, const std::map<std::string, int64_t>& shape = {}) {
  auto d = makeOpDesc(op, shape, {});
  EXPECT_TRUE(d.ok()) << op << ": " << d.error().message;
  return *d;
}

// Each op at the V4.1-Flash shapes and at a small model's (the tiny preset's widths).
struct OpPair {
  std::string op;
  std::map<std::string, int64_t> small;
};
const std::vector<OpPair> kOps = {
    {"sparse_mla_decode", {{"H", 8}, {"swa_k", 32}, {"extra_k", 16}}},
    {"sparse_mla_prefill", {{"H", 8}, {"topk", 48}, {"T", 40}}},
    {"indexer_logits", {{"Hi", 4}, {"context", 300}, {"T", 40}}},
    {"topk", {{"k", 16}, {"N", 300}, {"T", 40}}},
    {"combine_topk_swa", {{"topk", 16}, {"window", 32}, {"T", 40}}},
    {"gather_kcache", {{"context", 300}, {"block_size", 16}}},
    {"kv_quant_insert", {{"T", 40}, {"block_size", 16}}},
    {"mhc_pre", {{"C", 256}, {"T", 40}}},
    {"mhc_post", {{"C", 256}, {"T", 40}}},
    {"mhc_fused_post_pre", {{"C", 256}, {"T", 40}}},
    {"mhc_collapse", {{"C", 256}, {"T", 40}}},
    {"weight_gemm", {{"M", 40}, {"N", 256}, {"K", 512}}},
    {"moe_experts", {{"T", 40}, {"k", 2}, {"E", 8}, {"C", 256}, {"I", 128}}},
};

}  // namespace

TEST(ConfigCheck, WhatCheckConfigAcceptsEveryLaunchAccepts) {
  for (const char* tn : {"sm_80", "sm_90"}) {
    const TargetProfile t = *findTarget(tn);
    for (const OpPair& p : kOps) {
      SCOPED_TRACE(p.op + " on " + tn);
      const KernelFamily& f = *findKernelFamily(p.op);
      const OpDesc big = desc(p.op), small = desc(p.op, p.small);
      ASSERT_TRUE(f.validate(small).ok()) << f.validate(small).error().message;
      std::vector<KernelConfig> configs = f.candidates(big, t);
      configs.push_back(f.defaultConfig(big, t));
      int refusedAtLaunch = 0;
      for (const KernelConfig& c : configs) {
        SCOPED_TRACE(configToString(c));
        auto check = checkConfig(small, t, c);
        auto pack = f.packParams(c, small, fakeAddrs(f, small));
        if (!pack.ok()) {
          ++refusedAtLaunch;
          ASSERT_FALSE(check.ok()) << "checkConfig accepted what the launch refuses: " << pack.error().message;
          EXPECT_EQ(check.error().message, pack.error().message);
        }
        if (check.ok()) EXPECT_TRUE(emitKernel(small, c).ok());
      }
      if (p.op == "sparse_mla_decode") EXPECT_GT(refusedAtLaunch, 0);  // 16/32/64 heads per CTA of 8 heads
    }
  }
}

TEST(ConfigCheck, TunedDecodeWinnerForV41IsRefusedForTinyInTheLaunchsWords) {
  const TargetProfile t = *findTarget("sm_90");
  const OpDesc tiny = desc("sparse_mla_decode", {{"B", 1}, {"H", 8}, {"swa_k", 128}, {"extra_k", 512}});
  const KernelConfig winner = {{"heads_per_cta", 16}, {"keys_per_tile", 16}, {"kv_splits", 4}, {"merge", 0},
                               {"schedule", 0},     {"stages", 2},        {"threads", 256}};
  ASSERT_TRUE(checkConfig(desc("sparse_mla_decode", {{"B", 1}}), t, winner).ok());
  auto r = checkConfig(tiny, t, winner);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("heads_per_cta=16 must be a multiple of 8 in 8..64 dividing the 8 heads"),
            std::string::npos)
      << r.error().message;
  // And the tuning key keeps the two apart in the first place.
  EXPECT_NE(tuningDims(tiny), tuningDims(desc("sparse_mla_decode", {{"B", 1}})));
  EXPECT_EQ(tuningDims(tiny).value_or(""), "H=8,Sq=1,swa_k=128,extra_k=512,swa_bs=64,extra_bs=64");
}

TEST(ConfigCheck, OutOfRangeKnobsAreReportedInTheFamilysTerms) {
  const TargetProfile t = *findTarget("sm_80");
  for (const OpPair& p : kOps) {
    const KernelFamily& f = *findKernelFamily(p.op);
    const OpDesc d = desc(p.op);
    const KernelConfig dflt = f.defaultConfig(d, t);
    ASSERT_TRUE(checkConfig(d, t, dflt).ok()) << p.op;
    for (const auto& [knob, v0] : dflt)
      for (int64_t v : {int64_t(-1), int64_t(0), int64_t(3), int64_t(4611686018427387903)}) {
        KernelConfig c = dflt;
        c[knob] = v;
        SCOPED_TRACE(p.op + " " + configToString(c));
        auto r = checkConfig(d, t, c);
        if (r.ok()) continue;  // e.g. kv_splits=3 is a valid value
        const std::string& m = r.error().message;
        EXPECT_NE(m.find(p.op), std::string::npos) << m;
        EXPECT_EQ(m.find("4611686018427387903 bytes"), std::string::npos) << m;
        EXPECT_EQ(m.find("-1 threads"), std::string::npos) << m;
        // A config whose knobs the family refuses is never emitted (no `#error` unit).
        if (!f.canImplement(c, d).ok()) {
          auto k = emitKernel(d, c);
          ASSERT_FALSE(k.ok());
          EXPECT_EQ(k.error().message, f.canImplement(c, d).error().message);
        }
      }
  }
}

TEST(ConfigCheck, UnknownAndMissingKnobsAreNamed) {
  const TargetProfile t = *findTarget("sm_80");
  const OpDesc d = desc("kv_quant_insert");
  auto unknown = checkConfig(d, t, {{"warps", 2}, {"wraps", 4}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("has no knob 'wraps' (knobs: warps)"), std::string::npos)
      << unknown.error().message;
  auto missing = checkConfig(d, t, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("lacks knob 'warps'"), std::string::npos) << missing.error().message;
}
