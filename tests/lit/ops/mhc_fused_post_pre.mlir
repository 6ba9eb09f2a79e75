// RUN: deepinfer-opt %s | deepinfer-opt | FileCheck %s
// Round trip of a valid di.mhc_fused_post_pre.

// CHECK-LABEL: func.func @mhc_fused_post_pre
// CHECK: di.mhc_fused_post_pre
func.func @mhc_fused_post_pre(%arg0: tensor<3x256xbf16>, %arg1: tensor<3x4x256xbf16>, %arg2: tensor<3x4xf32>, %arg3: tensor<3x4x4xf32>, %arg4: tensor<24x1024xf32>, %arg5: tensor<3xf32>, %arg6: tensor<24xf32>, %arg7: tensor<3x4xf32>, %arg8: tensor<256xbf16>) -> (tensor<3x4x256xbf16>, tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>) {
  %x, %layer_input, %next_pre, %next_post, %next_comb = di.mhc_fused_post_pre f_out(%arg0 : tensor<3x256xbf16>) residual(%arg1 : tensor<3x4x256xbf16>) post(%arg2 : tensor<3x4xf32>) comb(%arg3 : tensor<3x4x4xf32>) fn(%arg4 : tensor<24x1024xf32>) scale(%arg5 : tensor<3xf32>) base(%arg6 : tensor<24xf32>) pre_in(%arg7 : tensor<3x4xf32>) norm_weight(%arg8 : tensor<256xbf16>) {hc_eps = 9.99999997E-7 : f32, norm_eps = 9.99999968E-21 : f32, rms_eps = 9.99999968E-21 : f32, sinkhorn_iters = 20 : i64} -> tensor<3x4x256xbf16>, tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>
  return %x, %layer_input, %next_pre, %next_post, %next_comb : tensor<3x4x256xbf16>, tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>
}
