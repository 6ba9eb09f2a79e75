// `tune` compiles candidates on worker threads through Jit::precompile, which emits with
// checkConfig + emitKernel instead of the MLIR pipeline. The binary-cache key must be the one
// Jit::get computes through the pipeline, or the timed kernel would be compiled twice (and the
// cache filled with entries nobody loads).
#include <gtest/gtest.h>

#include "deepinfer/Jit.h"
#include "deepinfer/OpShapes.h"
#include "deepinfer/ShapeBuckets.h"

using namespace deepinfer;

namespace {

TEST(PrecompileKey, EmitKernelMatchesThePipelineForFixedConfigs) {
  auto t = findTarget("sm_80");
  ASSERT_TRUE(t.has_value());
  int compared = 0;
  for (const char* op : {"sparse_mla_decode", "sparse_mla_prefill", "indexer_logits", "topk", "combine_topk_swa",
                         "gather_kcache", "kv_quant_insert", "mhc_pre", "mhc_post", "mhc_fused_post_pre", "mhc_collapse",
                         "weight_gemm", "moe_experts"}) {
    auto d = makeOpDesc(op, {}, {});
    ASSERT_TRUE(d.ok()) << op;
    auto sp = specialize(*d, *t);
    ASSERT_TRUE(sp.ok()) << op;
    ASSERT_FALSE(sp->fitting.empty()) << op;
    // The default and the last candidate (a different config in every family with several).
    for (const KernelConfig& cfg : {sp->chosen.config, sp->fitting.back().config}) {
      auto p = runKernelPipeline(*d, *t, cfg);
      ASSERT_TRUE(p.ok()) << op << ": " << p.error().message;
      auto k = emitKernel(*d, cfg);
      ASSERT_TRUE(k.ok()) << op;
      EXPECT_EQ(k->unit.source, p->kernel.unit.source) << op << " " << configToString(cfg);
      EXPECT_EQ(kernelContentKey(k->unit, t->arch(), false), kernelContentKey(p->kernel.unit, t->arch(), false)) << op;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 26);
}

}  // namespace
