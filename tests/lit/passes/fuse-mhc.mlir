// RUN: deepinfer-opt %s --split-input-file --di-fuse-mhc | FileCheck %s
// di-fuse-mhc: mhc_post(l) followed by the delayed mhc_pre(l+1) on the residual it produced
// becomes one mhc_fused_post_pre; every use of the post's residual reads the fused op's.

// CHECK-LABEL: func.func @fuse
// CHECK-NOT: di.mhc_post
// CHECK-NOT: di.mhc_pre
// CHECK: %[[X:[^,]+]], %[[LI:[^,]+]], %[[PRE:[^,]+]], %{{[^,]+}}, %{{[^ ]+}} = di.mhc_fused_post_pre f_out(%arg0 : tensor<3x256xbf16>) residual(%arg1 : tensor<3x4x256xbf16>)
// CHECK-SAME: norm_weight(%arg8 : tensor<256xbf16>) -> tensor<3x4x256xbf16>
// CHECK: return %[[X]], %[[LI]], %[[PRE]]
func.func @fuse(%f: tensor<3x256xbf16>, %res: tensor<3x4x256xbf16>, %post: tensor<3x4xf32>, %comb: tensor<3x4x4xf32>,
                %fn: tensor<24x1024xf32>, %scale: tensor<3xf32>, %base: tensor<24xf32>, %pre_in: tensor<3x4xf32>,
                %w: tensor<256xbf16>) -> (tensor<3x4x256xbf16>, tensor<3x256xbf16>, tensor<3x4xf32>) {
  %x, %sq = di.mhc_post f_out(%f : tensor<3x256xbf16>) residual(%res : tensor<3x4x256xbf16>) post(%post : tensor<3x4xf32>) comb(%comb : tensor<3x4x4xf32>) -> tensor<3x4x256xbf16>, tensor<3xf32>
  %li, %pre, %p2, %c2 = di.mhc_pre x(%x : tensor<3x4x256xbf16>) fn(%fn : tensor<24x1024xf32>) scale(%scale : tensor<3xf32>) base(%base : tensor<24xf32>) pre_in(%pre_in : tensor<3x4xf32>) norm_weight(%w : tensor<256xbf16>) {hc_eps = 9.99999997E-7 : f32, norm_eps = 9.99999968E-21 : f32, rms_eps = 9.99999968E-21 : f32, sinkhorn_iters = 20 : i64} -> tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>
  return %x, %li, %pre : tensor<3x4x256xbf16>, tensor<3x256xbf16>, tensor<3x4xf32>
}

// -----

// Negative: the post's sqrsum is used, so the pair is left alone.
// CHECK-LABEL: func.func @sqrsum_used
// CHECK: di.mhc_post
// CHECK: di.mhc_pre
// CHECK-NOT: di.mhc_fused_post_pre
func.func @sqrsum_used(%f: tensor<3x256xbf16>, %res: tensor<3x4x256xbf16>, %post: tensor<3x4xf32>, %comb: tensor<3x4x4xf32>,
                %fn: tensor<24x1024xf32>, %scale: tensor<3xf32>, %base: tensor<24xf32>, %pre_in: tensor<3x4xf32>,
                %w: tensor<256xbf16>) -> (tensor<3x256xbf16>, tensor<3xf32>) {
  %x, %sq = di.mhc_post f_out(%f : tensor<3x256xbf16>) residual(%res : tensor<3x4x256xbf16>) post(%post : tensor<3x4xf32>) comb(%comb : tensor<3x4x4xf32>) -> tensor<3x4x256xbf16>, tensor<3xf32>
  %li, %pre, %p2, %c2 = di.mhc_pre x(%x : tensor<3x4x256xbf16>) fn(%fn : tensor<24x1024xf32>) scale(%scale : tensor<3xf32>) base(%base : tensor<24xf32>) pre_in(%pre_in : tensor<3x4xf32>) norm_weight(%w : tensor<256xbf16>) {hc_eps = 9.99999997E-7 : f32, norm_eps = 9.99999968E-21 : f32, rms_eps = 9.99999968E-21 : f32, sinkhorn_iters = 20 : i64} -> tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>
  return %li, %sq : tensor<3x256xbf16>, tensor<3xf32>
}
