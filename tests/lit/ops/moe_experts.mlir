// RUN: deepinfer-opt %s | deepinfer-opt | FileCheck %s
// Round trip of a valid di.moe_experts: 3 tokens, 6 of 16 e2m1 experts, C = 256, I = 128.

// CHECK-LABEL: func.func @moe
// CHECK: di.moe_experts x(%{{.*}} : tensor<3x256xbf16>) ids(%{{.*}} : tensor<3x6xi32>) weights(%{{.*}} : tensor<3x6xf32>) w1(%{{.*}} : tensor<16x128x128xui8>) w1_scale(%{{.*}} : tensor<16x128x8xui8>) w3(%{{.*}} : tensor<16x128x128xui8>) w3_scale(%{{.*}} : tensor<16x128x8xui8>) w2(%{{.*}} : tensor<16x256x64xui8>) w2_scale(%{{.*}} : tensor<16x256x4xui8>) -> tensor<3x6x256xf32>
func.func @moe(%x: tensor<3x256xbf16>, %ids: tensor<3x6xi32>, %wt: tensor<3x6xf32>,
               %w1: tensor<16x128x128xui8>, %s1: tensor<16x128x8xui8>, %w3: tensor<16x128x128xui8>, %s3: tensor<16x128x8xui8>,
               %w2: tensor<16x256x64xui8>, %s2: tensor<16x256x4xui8>) -> tensor<3x6x256xf32> {
  %0 = di.moe_experts x(%x : tensor<3x256xbf16>) ids(%ids : tensor<3x6xi32>) weights(%wt : tensor<3x6xf32>) w1(%w1 : tensor<16x128x128xui8>) w1_scale(%s1 : tensor<16x128x8xui8>) w3(%w3 : tensor<16x128x128xui8>) w3_scale(%s3 : tensor<16x128x8xui8>) w2(%w2 : tensor<16x256x64xui8>) w2_scale(%s2 : tensor<16x256x4xui8>) -> tensor<3x6x256xf32>
  return %0 : tensor<3x6x256xf32>
}
