// RUN: deepinfer-opt %s --di-specialize-target=target=sm_90 -verify-diagnostics
// The pass option may not contradict the target the module carries.

// expected-error @+1 {{the module is for target 'sm_80'; the pass option asks for 'sm_90'}}
module attributes {di.target = #di.target<name = "sm_80", arch = 80, sm_count = 108, smem_cap = 49152, smem_per_sm = 167936, smem_per_cta_opt_in = 166912, regs_per_sm = 65536, max_regs_per_thread = 255, max_warps_per_sm = 64, max_ctas_per_sm = 32, l2_bytes = 41943040, mem_bandwidth_gbs = 2.039000e+03 : f64>} {
}
