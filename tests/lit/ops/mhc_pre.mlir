// RUN: deepinfer-opt %s | deepinfer-opt | FileCheck %s
// Round trip of a valid di.mhc_pre.

// CHECK-LABEL: func.func @mhc_pre
// CHECK: di.mhc_pre
func.func @mhc_pre(%arg0: tensor<3x4x256xbf16>, %arg1: tensor<24x1024xf32>, %arg2: tensor<3xf32>, %arg3: tensor<24xf32>, %arg4: tensor<3x4xf32>, %arg5: tensor<256xbf16>) -> (tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>) {
  %layer_input, %pre, %post, %comb = di.mhc_pre x(%arg0 : tensor<3x4x256xbf16>) fn(%arg1 : tensor<24x1024xf32>) scale(%arg2 : tensor<3xf32>) base(%arg3 : tensor<24xf32>) pre_in(%arg4 : tensor<3x4xf32>) norm_weight(%arg5 : tensor<256xbf16>) {hc_eps = 9.99999997E-7 : f32, norm_eps = 9.99999968E-21 : f32, rms_eps = 9.99999968E-21 : f32, sinkhorn_iters = 20 : i64} -> tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>
  return %layer_input, %pre, %post, %comb : tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>
}
