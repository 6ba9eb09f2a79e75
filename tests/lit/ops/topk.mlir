// RUN: deepinfer-opt %s | deepinfer-opt | FileCheck %s
// Round trip of a valid di.topk.

// CHECK-LABEL: func.func @topk
// CHECK: di.topk
func.func @topk(%arg0: tensor<4x64xf32>, %arg1: tensor<4xi32>) -> tensor<4x8xi32> {
  %0 = di.topk scores(%arg0 : tensor<4x64xf32>) lens(%arg1 : tensor<4xi32>) {k = 8 : i64} -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}
