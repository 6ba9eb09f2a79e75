// RUN: deepinfer-opt %s --di-specialize-target=target=sm_80 -verify-diagnostics
// A config that breaks the target's shared-memory cap is a diagnostic, never a silent fallback.

func.func @sparse_mla_prefill(%arg0: tensor<2x16x512xbf16>, %arg1: tensor<32x512xbf16>, %arg2: tensor<2x16xi32>, %arg3: tensor<2xi32>, %arg4: tensor<16xf32>) -> (tensor<2x16x512xbf16>, tensor<2x16xf32>) {
  // expected-error @+1 {{sparse_mla_prefill: config {block_n=32,heads_per_cta=16,stages=4,warps=2} needs 136768 bytes of shared memory per CTA, over the sm_80 cap of 49152 bytes (sm_80)}}
  %out, %lse = di.sparse_mla_prefill q(%arg0 : tensor<2x16x512xbf16>) kv(%arg1 : tensor<32x512xbf16>) indices(%arg2 : tensor<2x16xi32>) lens(%arg3 : tensor<2xi32>) attn_sink(%arg4 : tensor<16xf32>) {di.config = #di.config<knobs = {block_n = 32 : i64, heads_per_cta = 16 : i64, stages = 4 : i64, warps = 2 : i64}, smem = 0, threads = 0, ctas_per_sm = 0, regs = 0>, sm_scale = 0.0441941693 : f32} -> tensor<2x16x512xbf16>, tensor<2x16xf32>
  return %out, %lse : tensor<2x16x512xbf16>, tensor<2x16xf32>
}
