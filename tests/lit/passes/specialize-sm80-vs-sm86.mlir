// RUN: deepinfer-opt %s --di-specialize-target=target=sm_80 | FileCheck %s --check-prefix=SM80
// RUN: deepinfer-opt %s --di-specialize-target=target=sm_86 | FileCheck %s --check-prefix=SM86
// The same op specialized for sm_80 and sm_86: the module gets the target, both keep the 48 KB
// per-CTA cap, and the defaults differ where the SM limits do (64 vs 48 warps, 32 vs 16 CTAs).

// SM80: module attributes {di.target = #di.target<name = "sm_80", arch = 80, sm_count = 108, smem_cap = 49152, smem_per_sm = 167936, smem_per_cta_opt_in = 166912, regs_per_sm = 65536, max_regs_per_thread = 255, max_warps_per_sm = 64, max_ctas_per_sm = 32, l2_bytes = 41943040, mem_bandwidth_gbs = 2.039000e+03 : f64>}
// SM80: di.combine_topk_swa
// SM80-SAME: di.config = #di.config<knobs = {threads = 64 : i64}, smem = 20, threads = 64, ctas_per_sm = 21, regs = 48>
// SM80-NOT: di.target
// SM86: module attributes {di.target = #di.target<name = "sm_86", arch = 86, sm_count = 84, smem_cap = 49152, smem_per_sm = 102400, smem_per_cta_opt_in = 101376, regs_per_sm = 65536, max_regs_per_thread = 255, max_warps_per_sm = 48, max_ctas_per_sm = 16, l2_bytes = 6291456, mem_bandwidth_gbs = 7.680000e+02 : f64>}
// SM86: di.combine_topk_swa
// SM86-SAME: di.config = #di.config<knobs = {threads = 96 : i64}, smem = 20, threads = 96, ctas_per_sm = 16, regs = 40>
func.func @combine_topk_swa(%arg0: tensor<4x8xi32>, %arg1: tensor<3xi32>, %arg2: tensor<2xi32>, %arg3: tensor<2xi32>) -> (tensor<4x128xi32>, tensor<4xi32>) {
  %rows, %lens = di.combine_topk_swa topk_indices(%arg0 : tensor<4x8xi32>) query_start_loc(%arg1 : tensor<3xi32>) seq_lens(%arg2 : tensor<2xi32>) gather_lens(%arg3 : tensor<2xi32>) {M = 40 : i64, N = 32 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<4x128xi32>, tensor<4xi32>
  return %rows, %lens : tensor<4x128xi32>, tensor<4xi32>
}
