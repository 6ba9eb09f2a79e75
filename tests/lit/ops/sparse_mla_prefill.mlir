// RUN: deepinfer-opt %s | deepinfer-opt | FileCheck %s
// Round trip of a valid di.sparse_mla_prefill.

// CHECK-LABEL: func.func @sparse_mla_prefill
// CHECK: di.sparse_mla_prefill
func.func @sparse_mla_prefill(%arg0: tensor<2x16x512xbf16>, %arg1: tensor<32x512xbf16>, %arg2: tensor<2x16xi32>, %arg3: tensor<2xi32>, %arg4: tensor<16xf32>) -> (tensor<2x16x512xbf16>, tensor<2x16xf32>) {
  %out, %lse = di.sparse_mla_prefill q(%arg0 : tensor<2x16x512xbf16>) kv(%arg1 : tensor<32x512xbf16>) indices(%arg2 : tensor<2x16xi32>) lens(%arg3 : tensor<2xi32>) attn_sink(%arg4 : tensor<16xf32>) {sm_scale = 0.0441941693 : f32} -> tensor<2x16x512xbf16>, tensor<2x16xf32>
  return %out, %lse : tensor<2x16x512xbf16>, tensor<2x16xf32>
}
