// RUN: deepinfer-opt %s | deepinfer-opt | FileCheck %s
// Round trip of a valid di.indexer_logits.

// CHECK-LABEL: func.func @indexer_logits
// CHECK: di.indexer_logits
func.func @indexer_logits(%arg0: tensor<4x4x128xbf16>, %arg1: tensor<4x4xf32>, %arg2: tensor<4x528xui8>, %arg3: tensor<1x4xi32>, %arg4: tensor<4xi32>, %arg5: tensor<4xi32>) -> tensor<4x16xf32> {
  %0 = di.indexer_logits q(%arg0 : tensor<4x4x128xbf16>) weights(%arg1 : tensor<4x4xf32>) k_cache(%arg2 : tensor<4x528xui8>) block_table(%arg3 : tensor<1x4xi32>) token_to_req(%arg4 : tensor<4xi32>) visible(%arg5 : tensor<4xi32>) {block_size = 4 : i64} -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}
