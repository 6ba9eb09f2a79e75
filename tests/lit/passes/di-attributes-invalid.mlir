// RUN: deepinfer-opt %s -split-input-file -verify-diagnostics
// The dialect verifier checks every discardable di.* attribute by name and value: an unknown
// name, a #di.target whose facts are not its architecture's, a #di.config with a non-integer
// knob and a malformed pass result are errors, not silently carried along.

func.func @topk(%arg0: tensor<4x64xf32>, %arg1: tensor<4xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{unknown attribute 'di.tile' (the di dialect defines di.target, di.config}}
  %0 = di.topk scores(%arg0 : tensor<4x64xf32>) lens(%arg1 : tensor<4xi32>) {k = 8 : i64, di.tile = 4 : i64} -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

func.func @topk(%arg0: tensor<4x64xf32>, %arg1: tensor<4xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{#di.target arch = 75 is not a supported architecture (80, 86, 89, 90)}}
  %0 = di.topk scores(%arg0 : tensor<4x64xf32>) lens(%arg1 : tensor<4xi32>) {k = 8 : i64, di.target = #di.target<name = "sm_75", arch = 75, sm_count = 40, smem_cap = 49152, smem_per_sm = 65536, smem_per_cta_opt_in = 166912, regs_per_sm = 65536, max_regs_per_thread = 255, max_warps_per_sm = 32, max_ctas_per_sm = 16, l2_bytes = 41943040, mem_bandwidth_gbs = 2.039000e+03 : f64>} -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

func.func @topk(%arg0: tensor<4x64xf32>, %arg1: tensor<4xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{#di.target max_warps_per_sm = 128 is not sm_80's (64)}}
  %0 = di.topk scores(%arg0 : tensor<4x64xf32>) lens(%arg1 : tensor<4xi32>) {k = 8 : i64, di.target = #di.target<name = "sm_80", arch = 80, sm_count = 108, smem_cap = 49152, smem_per_sm = 167936, smem_per_cta_opt_in = 166912, regs_per_sm = 65536, max_regs_per_thread = 255, max_warps_per_sm = 128, max_ctas_per_sm = 32, l2_bytes = 41943040, mem_bandwidth_gbs = 2.039000e+03 : f64>} -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

func.func @topk(%arg0: tensor<4x64xf32>, %arg1: tensor<4xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{#di.target smem_cap = 1048576 must be in 1..166912 (sm_80's per-CTA opt-in maximum)}}
  %0 = di.topk scores(%arg0 : tensor<4x64xf32>) lens(%arg1 : tensor<4xi32>) {k = 8 : i64, di.target = #di.target<name = "sm_80", arch = 80, sm_count = 108, smem_cap = 1048576, smem_per_sm = 167936, smem_per_cta_opt_in = 166912, regs_per_sm = 65536, max_regs_per_thread = 255, max_warps_per_sm = 64, max_ctas_per_sm = 32, l2_bytes = 41943040, mem_bandwidth_gbs = 2.039000e+03 : f64>} -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

func.func @topk(%arg0: tensor<4x64xf32>, %arg1: tensor<4xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{#di.target name "sm_86" is an sm_86 target, not sm_80}}
  %0 = di.topk scores(%arg0 : tensor<4x64xf32>) lens(%arg1 : tensor<4xi32>) {k = 8 : i64, di.target = #di.target<name = "sm_86", arch = 80, sm_count = 108, smem_cap = 49152, smem_per_sm = 167936, smem_per_cta_opt_in = 166912, regs_per_sm = 65536, max_regs_per_thread = 255, max_warps_per_sm = 64, max_ctas_per_sm = 32, l2_bytes = 41943040, mem_bandwidth_gbs = 2.039000e+03 : f64>} -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

func.func @topk(%arg0: tensor<4x64xf32>, %arg1: tensor<4xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{#di.config knob 'threads' must be an integer, got "many"}}
  %0 = di.topk scores(%arg0 : tensor<4x64xf32>) lens(%arg1 : tensor<4xi32>) {k = 8 : i64, di.config = #di.config<knobs = {threads = "many"}, smem = 0, threads = 0, ctas_per_sm = 0, regs = 0>} -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

func.func @topk(%arg0: tensor<4x64xf32>, %arg1: tensor<4xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{attribute 'di.target' must be a #di.target, got "sm_80"}}
  %0 = di.topk scores(%arg0 : tensor<4x64xf32>) lens(%arg1 : tensor<4xi32>) {k = 8 : i64, di.target = "sm_80"} -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

func.func @topk(%arg0: tensor<4x64xf32>, %arg1: tensor<4xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{attribute 'di.cuda' must be a string (the emitted CUDA unit), got 5}}
  %0 = di.topk scores(%arg0 : tensor<4x64xf32>) lens(%arg1 : tensor<4xi32>) {k = 8 : i64, di.cuda = 5 : i64} -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

func.func @topk(%arg0: tensor<4x64xf32>, %arg1: tensor<4xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{attribute 'di.launch' must be an array of launch steps {entry, grid, block, dynamic_smem}}}
  %0 = di.topk scores(%arg0 : tensor<4x64xf32>) lens(%arg1 : tensor<4xi32>) {k = 8 : i64, di.launch = [{entry = "x"}]} -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}
