// RUN: deepinfer-opt %s -split-input-file -verify-diagnostics
// Each verifier rule of di.topk rejects a bad op with a message naming the value.

// k zero
func.func @topk(%arg0: tensor<4x64xf32>, %arg1: tensor<4xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{'di.topk' op topk: k = 0 must be in 1..16777216}}
  %0 = di.topk scores(%arg0 : tensor<4x64xf32>) lens(%arg1 : tensor<4xi32>) {k = 0 : i64} -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

// lens size
func.func @topk(%arg0: tensor<4x64xf32>, %arg1: tensor<5xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{'di.topk' op topk: tensor 'lens' has shape [5], expected [4] (dim 0 differs)}}
  %0 = di.topk scores(%arg0 : tensor<4x64xf32>) lens(%arg1 : tensor<5xi32>) {k = 8 : i64} -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

// rank (checked by the ODS: Di_F32<[2]>)
func.func @topk(%arg0: tensor<4xf32>, %arg1: tensor<4xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{'di.topk' op operand #0 must be 2D tensor of 32-bit float values, but got 'tensor<4xf32>'}}
  %0 = di.topk scores(%arg0 : tensor<4xf32>) lens(%arg1 : tensor<4xi32>) {k = 8 : i64} -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}
