// RUN: deepinfer-opt %s | deepinfer-opt | FileCheck %s
// Round trip of a valid di.gather_kcache.

// CHECK-LABEL: func.func @gather_kcache
// CHECK: di.gather_kcache
func.func @gather_kcache(%arg0: tensor<8x1728xui8>, %arg1: tensor<2xi32>, %arg2: tensor<2xi32>, %arg3: tensor<2x4xi32>, %arg4: tensor<2x8x512xbf16>) -> tensor<2x8x512xbf16> {
  %0 = di.gather_kcache k_cache(%arg0 : tensor<8x1728xui8>) seq_lens(%arg1 : tensor<2xi32>) gather_lens(%arg2 : tensor<2xi32>) block_table(%arg3 : tensor<2x4xi32>) out(%arg4 : tensor<2x8x512xbf16>) {block_size = 2 : i64} -> tensor<2x8x512xbf16>
  return %0 : tensor<2x8x512xbf16>
}
