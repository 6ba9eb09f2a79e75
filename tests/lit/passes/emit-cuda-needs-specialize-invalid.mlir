// RUN: deepinfer-opt %s --split-input-file --di-emit-cuda -verify-diagnostics
// Emission reads the module's target and each op's config: without them it is an error naming
// the pass to run first.

// expected-error @+1 {{has no di.target attribute; run di-specialize-target{target=...} first}}
module {
  func.func @mhc_collapse(%arg0: tensor<3x4x256xbf16>, %arg1: tensor<3x4xf32>) -> tensor<3x256xbf16> {
    %0 = di.mhc_collapse x(%arg0 : tensor<3x4x256xbf16>) pre(%arg1 : tensor<3x4xf32>) -> tensor<3x256xbf16>
    return %0 : tensor<3x256xbf16>
  }
}

// -----

module attributes {di.target = #di.target<name = "sm_80", arch = 80, sm_count = 108, smem_cap = 49152, smem_per_sm = 167936, smem_per_cta_opt_in = 166912, regs_per_sm = 65536, max_regs_per_thread = 255, max_warps_per_sm = 64, max_ctas_per_sm = 32, l2_bytes = 41943040, mem_bandwidth_gbs = 2.039000e+03 : f64>} {
  func.func @mhc_collapse(%arg0: tensor<3x4x256xbf16>, %arg1: tensor<3x4xf32>) -> tensor<3x256xbf16> {
    // expected-error @+1 {{has no di.config; run di-specialize-target first}}
    %0 = di.mhc_collapse x(%arg0 : tensor<3x4x256xbf16>) pre(%arg1 : tensor<3x4xf32>) -> tensor<3x256xbf16>
    return %0 : tensor<3x256xbf16>
  }
}
