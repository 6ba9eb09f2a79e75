// RUN: deepinfer-opt %s | deepinfer-opt | FileCheck %s
// Round trip of a valid di.mhc_post.

// CHECK-LABEL: func.func @mhc_post
// CHECK: di.mhc_post
func.func @mhc_post(%arg0: tensor<3x256xbf16>, %arg1: tensor<3x4x256xbf16>, %arg2: tensor<3x4xf32>, %arg3: tensor<3x4x4xf32>) -> (tensor<3x4x256xbf16>, tensor<3xf32>) {
  %x, %sqrsum = di.mhc_post f_out(%arg0 : tensor<3x256xbf16>) residual(%arg1 : tensor<3x4x256xbf16>) post(%arg2 : tensor<3x4xf32>) comb(%arg3 : tensor<3x4x4xf32>) -> tensor<3x4x256xbf16>, tensor<3xf32>
  return %x, %sqrsum : tensor<3x4x256xbf16>, tensor<3xf32>
}
