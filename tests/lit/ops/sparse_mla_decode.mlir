// RUN: deepinfer-opt %s | deepinfer-opt | FileCheck %s
// Round trip of a valid di.sparse_mla_decode.

// CHECK-LABEL: func.func @sparse_mla_decode
// CHECK: di.sparse_mla_decode
func.func @sparse_mla_decode(%arg0: tensor<2x1x16x512xbf16>, %arg1: tensor<4x37440xui8>, %arg2: tensor<2x1x8xi32>, %arg3: tensor<2xi32>, %arg4: tensor<4x37440xui8>, %arg5: tensor<2x1x16xi32>, %arg6: tensor<2xi32>, %arg7: tensor<16xf32>) -> (tensor<2x1x16x512xbf16>, tensor<2x1x16xf32>) {
  %out, %lse = di.sparse_mla_decode q(%arg0 : tensor<2x1x16x512xbf16>) swa_cache(%arg1 : tensor<4x37440xui8>) swa_indices(%arg2 : tensor<2x1x8xi32>) swa_lens(%arg3 : tensor<2xi32>) extra_cache(%arg4 : tensor<4x37440xui8>) extra_indices(%arg5 : tensor<2x1x16xi32>) extra_lens(%arg6 : tensor<2xi32>) attn_sink(%arg7 : tensor<16xf32>) {extra_block_size = 64 : i64, sm_scale = 0.0441941693 : f32, swa_block_size = 64 : i64} -> tensor<2x1x16x512xbf16>, tensor<2x1x16xf32>
  return %out, %lse : tensor<2x1x16x512xbf16>, tensor<2x1x16xf32>
}
