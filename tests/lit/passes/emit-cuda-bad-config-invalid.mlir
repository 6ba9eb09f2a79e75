// RUN: deepinfer-opt %s -split-input-file --di-emit-cuda -verify-diagnostics
// A hand-written config that the kernel cannot run is an error of di-emit-cuda, in the family's
// own terms (never a unit that is just '#error ...'); so is one over the target's cap.

module attributes {di.target = #di.target<name = "sm_80", arch = 80, sm_count = 108, smem_cap = 49152, smem_per_sm = 167936, smem_per_cta_opt_in = 166912, regs_per_sm = 65536, max_regs_per_thread = 255, max_warps_per_sm = 64, max_ctas_per_sm = 32, l2_bytes = 41943040, mem_bandwidth_gbs = 2.039000e+03 : f64>} {
  func.func @topk(%arg0: tensor<4x64xf32>, %arg1: tensor<4xi32>) -> tensor<4x8xi32> {
    // expected-error @+1 {{'di.topk' op topk: pool_keys = 3 must be a positive multiple of 256}}
    %0 = di.topk scores(%arg0 : tensor<4x64xf32>) lens(%arg1 : tensor<4xi32>) {k = 8 : i64, di.config = #di.config<knobs = {pool_keys = 3 : i64, radix_bits = 11 : i64, splits = 1 : i64, threads = 512 : i64}, smem = 0, threads = 512, ctas_per_sm = 1, regs = 0>} -> tensor<4x8xi32>
    return %0 : tensor<4x8xi32>
  }
}

// -----

module attributes {di.target = #di.target<name = "sm_80", arch = 80, sm_count = 108, smem_cap = 49152, smem_per_sm = 167936, smem_per_cta_opt_in = 166912, regs_per_sm = 65536, max_regs_per_thread = 255, max_warps_per_sm = 64, max_ctas_per_sm = 32, l2_bytes = 41943040, mem_bandwidth_gbs = 2.039000e+03 : f64>} {
  func.func @topk(%arg0: tensor<4x64xf32>, %arg1: tensor<4xi32>) -> tensor<4x8xi32> {
    // expected-error @+1 {{'di.topk' op topk: config {threads=512} lacks knob 'radix_bits'}}
    %0 = di.topk scores(%arg0 : tensor<4x64xf32>) lens(%arg1 : tensor<4xi32>) {k = 8 : i64, di.config = #di.config<knobs = {threads = 512 : i64}, smem = 0, threads = 512, ctas_per_sm = 1, regs = 0>} -> tensor<4x8xi32>
    return %0 : tensor<4x8xi32>
  }
}

// -----

module attributes {di.target = #di.target<name = "sm_80", arch = 80, sm_count = 108, smem_cap = 49152, smem_per_sm = 167936, smem_per_cta_opt_in = 166912, regs_per_sm = 65536, max_regs_per_thread = 255, max_warps_per_sm = 64, max_ctas_per_sm = 32, l2_bytes = 41943040, mem_bandwidth_gbs = 2.039000e+03 : f64>} {
  func.func @topk(%arg0: tensor<4x64xf32>, %arg1: tensor<4xi32>) -> tensor<4x8xi32> {
    // expected-error @+1 {{'di.topk' op topk: config {pool_keys=65536,radix_bits=11,splits=1,threads=512} needs 270608 bytes of shared memory per CTA, over the sm_80 cap of 49152 bytes (sm_80)}}
    %0 = di.topk scores(%arg0 : tensor<4x64xf32>) lens(%arg1 : tensor<4xi32>) {k = 8 : i64, di.config = #di.config<knobs = {pool_keys = 65536 : i64, radix_bits = 11 : i64, splits = 1 : i64, threads = 512 : i64}, smem = 0, threads = 512, ctas_per_sm = 1, regs = 0>} -> tensor<4x8xi32>
    return %0 : tensor<4x8xi32>
  }
}
