// RUN: deepinfer-opt %s | deepinfer-opt | FileCheck %s
// Round trip of a valid di.combine_topk_swa.

// CHECK-LABEL: func.func @combine_topk_swa
// CHECK: di.combine_topk_swa
func.func @combine_topk_swa(%arg0: tensor<4x8xi32>, %arg1: tensor<3xi32>, %arg2: tensor<2xi32>, %arg3: tensor<2xi32>) -> (tensor<4x128xi32>, tensor<4xi32>) {
  %rows, %lens = di.combine_topk_swa topk_indices(%arg0 : tensor<4x8xi32>) query_start_loc(%arg1 : tensor<3xi32>) seq_lens(%arg2 : tensor<2xi32>) gather_lens(%arg3 : tensor<2xi32>) {M = 40 : i64, N = 32 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<4x128xi32>, tensor<4xi32>
  return %rows, %lens : tensor<4x128xi32>, tensor<4xi32>
}
