// RUN: deepinfer-opt %s -split-input-file -verify-diagnostics
// Each verifier rule of di.mhc_pre rejects a bad op with a message naming the value.

// fn shape
func.func @mhc_pre(%arg0: tensor<3x4x256xbf16>, %arg1: tensor<24x1000xf32>, %arg2: tensor<3xf32>, %arg3: tensor<24xf32>, %arg4: tensor<3x4xf32>, %arg5: tensor<256xbf16>) -> (tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>) {
  // expected-error @+1 {{'di.mhc_pre' op mhc_pre: fn has shape [24, 1000]; expected [24, 1024]}}
  %layer_input, %pre, %post, %comb = di.mhc_pre x(%arg0 : tensor<3x4x256xbf16>) fn(%arg1 : tensor<24x1000xf32>) scale(%arg2 : tensor<3xf32>) base(%arg3 : tensor<24xf32>) pre_in(%arg4 : tensor<3x4xf32>) norm_weight(%arg5 : tensor<256xbf16>) {hc_eps = 9.99999997E-7 : f32, norm_eps = 9.99999968E-21 : f32, rms_eps = 9.99999968E-21 : f32, sinkhorn_iters = 20 : i64} -> tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>
  return %layer_input, %pre, %post, %comb : tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>
}

// -----

// scale size
func.func @mhc_pre(%arg0: tensor<3x4x256xbf16>, %arg1: tensor<24x1024xf32>, %arg2: tensor<4xf32>, %arg3: tensor<24xf32>, %arg4: tensor<3x4xf32>, %arg5: tensor<256xbf16>) -> (tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>) {
  // expected-error @+1 {{'di.mhc_pre' op mhc_pre: scale has shape [4]; expected [3]}}
  %layer_input, %pre, %post, %comb = di.mhc_pre x(%arg0 : tensor<3x4x256xbf16>) fn(%arg1 : tensor<24x1024xf32>) scale(%arg2 : tensor<4xf32>) base(%arg3 : tensor<24xf32>) pre_in(%arg4 : tensor<3x4xf32>) norm_weight(%arg5 : tensor<256xbf16>) {hc_eps = 9.99999997E-7 : f32, norm_eps = 9.99999968E-21 : f32, rms_eps = 9.99999968E-21 : f32, sinkhorn_iters = 20 : i64} -> tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>
  return %layer_input, %pre, %post, %comb : tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>
}

// -----

// sinkhorn iters
func.func @mhc_pre(%arg0: tensor<3x4x256xbf16>, %arg1: tensor<24x1024xf32>, %arg2: tensor<3xf32>, %arg3: tensor<24xf32>, %arg4: tensor<3x4xf32>, %arg5: tensor<256xbf16>) -> (tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>) {
  // expected-error @+1 {{'di.mhc_pre' op mhc_pre: attribute sinkhorn_iters = 0; it must be an integer in 1..1000000 (total Sinkhorn rounds, 20 in V4.1)}}
  %layer_input, %pre, %post, %comb = di.mhc_pre x(%arg0 : tensor<3x4x256xbf16>) fn(%arg1 : tensor<24x1024xf32>) scale(%arg2 : tensor<3xf32>) base(%arg3 : tensor<24xf32>) pre_in(%arg4 : tensor<3x4xf32>) norm_weight(%arg5 : tensor<256xbf16>) {hc_eps = 9.99999997E-7 : f32, norm_eps = 9.99999968E-21 : f32, rms_eps = 9.99999968E-21 : f32, sinkhorn_iters = 0 : i64} -> tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>
  return %layer_input, %pre, %post, %comb : tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>
}

// -----

// pre_in streams
func.func @mhc_pre(%arg0: tensor<3x4x256xbf16>, %arg1: tensor<24x1024xf32>, %arg2: tensor<3xf32>, %arg3: tensor<24xf32>, %arg4: tensor<3x3xf32>, %arg5: tensor<256xbf16>) -> (tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>) {
  // expected-error @+1 {{'di.mhc_pre' op mhc_pre: pre_in has shape [3, 3]; expected [3, 4]}}
  %layer_input, %pre, %post, %comb = di.mhc_pre x(%arg0 : tensor<3x4x256xbf16>) fn(%arg1 : tensor<24x1024xf32>) scale(%arg2 : tensor<3xf32>) base(%arg3 : tensor<24xf32>) pre_in(%arg4 : tensor<3x3xf32>) norm_weight(%arg5 : tensor<256xbf16>) {hc_eps = 9.99999997E-7 : f32, norm_eps = 9.99999968E-21 : f32, rms_eps = 9.99999968E-21 : f32, sinkhorn_iters = 20 : i64} -> tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>
  return %layer_input, %pre, %post, %comb : tensor<3x256xbf16>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4x4xf32>
}
