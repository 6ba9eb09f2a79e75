// RUN: deepinfer-opt %s -split-input-file -verify-diagnostics
// Each verifier rule of di.moe_experts rejects a bad op with a message naming the value.

// w2 is [E, C, I/2]
func.func @w2(%x: tensor<3x256xbf16>, %ids: tensor<3x6xi32>, %wt: tensor<3x6xf32>,
              %w1: tensor<16x128x128xui8>, %s1: tensor<16x128x8xui8>, %w3: tensor<16x128x128xui8>, %s3: tensor<16x128x8xui8>,
              %w2: tensor<16x128x128xui8>, %s2: tensor<16x256x4xui8>) -> tensor<3x6x256xf32> {
  // expected-error @+1 {{'di.moe_experts' op moe_experts: tensor 'w2' has shape [16, 128, 128], expected [16, 256, 64] (dim 1 differs)}}
  %0 = di.moe_experts x(%x : tensor<3x256xbf16>) ids(%ids : tensor<3x6xi32>) weights(%wt : tensor<3x6xf32>) w1(%w1 : tensor<16x128x128xui8>) w1_scale(%s1 : tensor<16x128x8xui8>) w3(%w3 : tensor<16x128x128xui8>) w3_scale(%s3 : tensor<16x128x8xui8>) w2(%w2 : tensor<16x128x128xui8>) w2_scale(%s2 : tensor<16x256x4xui8>) -> tensor<3x6x256xf32>
  return %0 : tensor<3x6x256xf32>
}

// -----

// routing weights for every (token, rank)
func.func @weights(%x: tensor<3x256xbf16>, %ids: tensor<3x6xi32>, %wt: tensor<3x5xf32>,
                   %w1: tensor<16x128x128xui8>, %s1: tensor<16x128x8xui8>, %w3: tensor<16x128x128xui8>, %s3: tensor<16x128x8xui8>,
                   %w2: tensor<16x256x64xui8>, %s2: tensor<16x256x4xui8>) -> tensor<3x6x256xf32> {
  // expected-error @+1 {{'di.moe_experts' op moe_experts: tensor 'weights' has shape [3, 5], expected [3, 6] (dim 1 differs)}}
  %0 = di.moe_experts x(%x : tensor<3x256xbf16>) ids(%ids : tensor<3x6xi32>) weights(%wt : tensor<3x5xf32>) w1(%w1 : tensor<16x128x128xui8>) w1_scale(%s1 : tensor<16x128x8xui8>) w3(%w3 : tensor<16x128x128xui8>) w3_scale(%s3 : tensor<16x128x8xui8>) w2(%w2 : tensor<16x256x64xui8>) w2_scale(%s2 : tensor<16x256x4xui8>) -> tensor<3x6x256xf32>
  return %0 : tensor<3x6x256xf32>
}

// -----

// the hidden size must be whole 32-column scale blocks
func.func @c32(%x: tensor<3x240xbf16>, %ids: tensor<3x6xi32>, %wt: tensor<3x6xf32>,
               %w1: tensor<16x128x120xui8>, %s1: tensor<16x128x7xui8>, %w3: tensor<16x128x120xui8>, %s3: tensor<16x128x7xui8>,
               %w2: tensor<16x240x64xui8>, %s2: tensor<16x240x4xui8>) -> tensor<3x6x240xf32> {
  // expected-error @+1 {{'di.moe_experts' op moe_experts: x has 240 columns; the hidden size must be a positive multiple of 32}}
  %0 = di.moe_experts x(%x : tensor<3x240xbf16>) ids(%ids : tensor<3x6xi32>) weights(%wt : tensor<3x6xf32>) w1(%w1 : tensor<16x128x120xui8>) w1_scale(%s1 : tensor<16x128x7xui8>) w3(%w3 : tensor<16x128x120xui8>) w3_scale(%s3 : tensor<16x128x7xui8>) w2(%w2 : tensor<16x240x64xui8>) w2_scale(%s2 : tensor<16x240x4xui8>) -> tensor<3x6x240xf32>
  return %0 : tensor<3x6x240xf32>
}

// -----

// the output is [T, k, C]: the ODS checks its rank, the family its dims
func.func @out(%x: tensor<3x256xbf16>, %ids: tensor<3x6xi32>, %wt: tensor<3x6xf32>,
               %w1: tensor<16x128x128xui8>, %s1: tensor<16x128x8xui8>, %w3: tensor<16x128x128xui8>, %s3: tensor<16x128x8xui8>,
               %w2: tensor<16x256x64xui8>, %s2: tensor<16x256x4xui8>) -> tensor<3x256xf32> {
  // expected-error @+1 {{'di.moe_experts' op result #0 must be 3D tensor of 32-bit float values, but got 'tensor<3x256xf32>'}}
  %0 = di.moe_experts x(%x : tensor<3x256xbf16>) ids(%ids : tensor<3x6xi32>) weights(%wt : tensor<3x6xf32>) w1(%w1 : tensor<16x128x128xui8>) w1_scale(%s1 : tensor<16x128x8xui8>) w3(%w3 : tensor<16x128x128xui8>) w3_scale(%s3 : tensor<16x128x8xui8>) w2(%w2 : tensor<16x256x64xui8>) w2_scale(%s2 : tensor<16x256x4xui8>) -> tensor<3x256xf32>
  return %0 : tensor<3x256xf32>
}

// -----

// the right rank with other dims
func.func @out(%x: tensor<3x256xbf16>, %ids: tensor<3x6xi32>, %wt: tensor<3x6xf32>,
               %w1: tensor<16x128x128xui8>, %s1: tensor<16x128x8xui8>, %w3: tensor<16x128x128xui8>, %s3: tensor<16x128x8xui8>,
               %w2: tensor<16x256x64xui8>, %s2: tensor<16x256x4xui8>) -> tensor<3x6x128xf32> {
  // expected-error @+1 {{'di.moe_experts' op result 'y' has type 'tensor<3x6x128xf32>' but the inputs give shape [3, 6, 256]}}
  %0 = di.moe_experts x(%x : tensor<3x256xbf16>) ids(%ids : tensor<3x6xi32>) weights(%wt : tensor<3x6xf32>) w1(%w1 : tensor<16x128x128xui8>) w1_scale(%s1 : tensor<16x128x8xui8>) w3(%w3 : tensor<16x128x128xui8>) w3_scale(%s3 : tensor<16x128x8xui8>) w2(%w2 : tensor<16x256x64xui8>) w2_scale(%s2 : tensor<16x256x4xui8>) -> tensor<3x6x128xf32>
  return %0 : tensor<3x6x128xf32>
}
