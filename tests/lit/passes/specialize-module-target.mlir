// RUN: deepinfer-opt %s --split-input-file --di-specialize-target -verify-diagnostics | FileCheck %s
// The target is an attribute of the module: the pass reads it (here a made-up part with a 32 KB
// cap and 20 SMs, which no preset has) instead of looking a name up, and keeps it there.

// CHECK: module attributes {di.target = #di.target<name = "local", arch = 86, sm_count = 20, smem_cap = 32768
// CHECK: di.topk
// CHECK-SAME: di.config = #di.config<knobs = {pool_keys = 5888 : i64, radix_bits = 11 : i64
// CHECK-NOT: smem = {{(3276[9]|327[7-9][0-9]|32[8-9][0-9][0-9]|3[3-9][0-9][0-9][0-9]|[4-9][0-9][0-9][0-9][0-9])}},
module attributes {di.target = #di.target<name = "local", arch = 86, sm_count = 20, smem_cap = 32768, smem_per_sm = 102400, smem_per_cta_opt_in = 101376, regs_per_sm = 65536, max_regs_per_thread = 255, max_warps_per_sm = 48, max_ctas_per_sm = 16, l2_bytes = 0, mem_bandwidth_gbs = 0.0 : f64>} {
  func.func @topk(%arg0: tensor<4x9000xf32>, %arg1: tensor<4xi32>) -> tensor<4x16xi32> {
    %0 = di.topk scores(%arg0 : tensor<4x9000xf32>) lens(%arg1 : tensor<4xi32>) {k = 16 : i64} -> tensor<4x16xi32>
    return %0 : tensor<4x16xi32>
  }
}

// -----

// A module for an architecture the compiler has no facts for is rejected at the module (by the
// dialect's check of every di.target, before any pass).
// expected-error @+1 {{#di.target arch = 75 is not a supported architecture (80, 86, 89, 90)}}
module attributes {di.target = #di.target<name = "future", arch = 75, sm_count = 20, smem_cap = 32768, smem_per_sm = 102400, smem_per_cta_opt_in = 101376, regs_per_sm = 65536, max_regs_per_thread = 255, max_warps_per_sm = 48, max_ctas_per_sm = 16, l2_bytes = 0, mem_bandwidth_gbs = 0.0 : f64>} {
}
