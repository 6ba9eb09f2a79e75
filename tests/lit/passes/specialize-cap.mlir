// RUN: deepinfer-opt %s --di-specialize-target=target=sm_80 | FileCheck %s --check-prefix=SM80
// RUN: deepinfer-opt %s --di-specialize-target=target=sm_90 | FileCheck %s --check-prefix=SM90
// Prefill candidates over the 48 KB cap are dropped on sm_80 (and the IR says how many);
// sm_90's profile lifts the cap to 227 KB, so most of them survive there.

// SM80: di.sparse_mla_prefill
// SM80-NOT: smem = {{(49[2-9][0-9][0-9]|[5-9][0-9][0-9][0-9][0-9]|[1-9][0-9][0-9][0-9][0-9][0-9])}},
// SM80-SAME: di.dropped_over_cap = {{[1-9][0-9]*}} : i64
// SM90: di.sparse_mla_prefill
// SM90-SAME: smem = {{(49[2-9][0-9][0-9]|[5-9][0-9][0-9][0-9][0-9]|[1-9][0-9][0-9][0-9][0-9][0-9])}},
// SM90-SAME: di.dropped_over_cap =
func.func @sparse_mla_prefill(%arg0: tensor<2x16x512xbf16>, %arg1: tensor<32x512xbf16>, %arg2: tensor<2x16xi32>, %arg3: tensor<2xi32>, %arg4: tensor<16xf32>) -> (tensor<2x16x512xbf16>, tensor<2x16xf32>) {
  %out, %lse = di.sparse_mla_prefill q(%arg0 : tensor<2x16x512xbf16>) kv(%arg1 : tensor<32x512xbf16>) indices(%arg2 : tensor<2x16xi32>) lens(%arg3 : tensor<2xi32>) attn_sink(%arg4 : tensor<16xf32>) {sm_scale = 0.0441941693 : f32} -> tensor<2x16x512xbf16>, tensor<2x16xf32>
  return %out, %lse : tensor<2x16x512xbf16>, tensor<2x16xf32>
}
