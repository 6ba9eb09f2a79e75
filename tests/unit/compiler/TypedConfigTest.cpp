// Every family's config is a struct of named knobs: the knob map of #di.config converts to it and
// back, canImplement is asked before anything else, and a config the family cannot implement is
// an error naming the knob (never a unit that fails to compile, never a made-up estimate).
#include <gtest/gtest.h>

#include "deepinfer/OpShapes.h"
#include "deepinfer/OpSignature.h"
#include "deepinfer/Pipeline.h"

using namespace deepinfer;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(TypedConfig, EveryCandidateRoundTripsThroughTheIr) {
  const TargetProfile t = *findTarget("sm_86");
  int checked = 0;
  for (const KernelFamily* fam : allKernelFamilies()) {
    auto d = makeOpDesc(fam->opName(), {}, {});
    ASSERT_TRUE(d.ok()) << fam->opName();
    auto spec = specialize(*d, t);
    ASSERT_TRUE(spec.ok()) << fam->opName() << ": " << spec.error().message;
    ASSERT_FALSE(spec->fitting.empty()) << fam->opName();
    for (const KernelConfig& c : {spec->chosen.config, spec->fitting.front().config, spec->fitting.back().config}) {
      EXPECT_TRUE(fam->canImplement(c, *d).ok()) << fam->opName() << " " << configToString(c);
      // As a fixed config through the pipeline: #di.config holds exactly these knobs afterwards.
      auto p = runKernelPipeline(*d, t, c);
      ASSERT_TRUE(p.ok()) << fam->opName() << ": " << p.error().message;
      EXPECT_EQ(p->config.config, c) << fam->opName();
      ++checked;
    }
  }
  EXPECT_EQ(checked, 42);  // 14 families x 3 configs
}

TEST(TypedConfig, UnknownAndMissingKnobsAreErrorsNamingThem) {
  auto d = makeOpDesc("topk", {}, {});
  ASSERT_TRUE(d.ok());
  const KernelFamily* fam = findKernelFamily("topk");
  KernelConfig c = fam->defaultConfig(*d, *findTarget("sm_80"));
  KernelConfig extra = c;
  extra["warps"] = 4;
  auto e = fam->emit(extra, *d, "k");
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(contains(e.error().message, "has no knob 'warps' (knobs: threads, radix_bits, pool_keys, splits)"))
      << e.error().message;
  KernelConfig missing = c;
  missing.erase("splits");
  auto est = fam->estimate(missing, *d);
  ASSERT_FALSE(est.ok());
  EXPECT_TRUE(contains(est.error().message, "lacks knob 'splits'")) << est.error().message;
}

TEST(TypedConfig, AConfigTheFamilyCannotImplementIsAnErrorEverywhere) {
  struct Bad {
    const char* op;
    const char* knob;
    int64_t value;
    const char* message;
  };
  const Bad bad[] = {
      {"topk", "radix_bits", 9, "radix_bits = 9 must be 1 (bisection), 8 or 11"},
      {"indexer_logits", "block_n", 48, "block_n = 48 must be 32, 64 or 128"},
      {"mhc_pre", "use_mma", 2, "use_mma = 2; expected 0 or 1"},
      {"mhc_post", "threads", 48, "threads = 48; expected a multiple of 32 in 32..256"},
      {"sparse_mla_prefill", "stages", 1, "is not a supported CTA shape"},
      {"sparse_mla_decode", "keys_per_tile", 24, "keys_per_tile=24 must be 16 or 32"},
      {"kv_quant_insert", "warps", 0, "warps = 0 must be in 1..32"},
      {"combine_topk_swa", "threads", 100, "threads = 100 must be a multiple of 32 in 32..1024"},
      {"gather_kcache", "tokens_per_warp", 3, "tokens_per_warp = 3 must be 1, 2 or 4"},
      {"weight_gemm", "splits", 33, "splits = 33 must be in 1..32"},  // the decode default streams: K splits 1..32
      {"weight_gemm", "stream", 4, "stream = 4: stream must be 0, 1, 2 or 3"},
      {"moe_experts", "block_k", 48, "block_k = 48 must be 1, 2, 4 or 8 steps of 128 columns"},
      {"moe_experts", "stream", 5, "stream = 5: stream must be 0, 1, 2 or 3"},
  };
  const TargetProfile t = *findTarget("sm_80");
  for (const Bad& b : bad) {
    auto d = makeOpDesc(b.op, {}, {});
    ASSERT_TRUE(d.ok()) << b.op;
    const KernelFamily* fam = findKernelFamily(b.op);
    KernelConfig c = fam->defaultConfig(*d, t);
    c[b.knob] = b.value;
    const Status can = fam->canImplement(c, *d);
    ASSERT_FALSE(can.ok()) << b.op;
    EXPECT_TRUE(contains(can.error().message, b.message)) << can.error().message;
    // Every hook says the same instead of producing a unit, a plan or an estimate.
    auto unit = fam->emit(c, *d, "k");
    auto plan = fam->launchPlan(c, *d, "k");
    auto est = fam->estimate(c, *d);
    auto ws = fam->workspaceBytes(c, *d);
    auto zeroed = fam->zeroedWorkspaceBytes(c, *d);
    auto params = fam->packParams(c, *d, {});
    EXPECT_FALSE(unit.ok() || plan.ok() || est.ok() || ws.ok() || zeroed.ok() || params.ok()) << b.op;
    if (!unit.ok()) EXPECT_EQ(unit.error().message, can.error().message);
    // The pipeline and the config check refuse it with the family's message too.
    auto check = checkConfig(*d, t, c);
    ASSERT_FALSE(check.ok());
    EXPECT_TRUE(contains(check.error().message, b.message)) << check.error().message;
    auto p = runKernelPipeline(*d, t, c);
    ASSERT_FALSE(p.ok());
    EXPECT_TRUE(contains(p.error().message, b.message)) << p.error().message;
  }
}

}  // namespace
