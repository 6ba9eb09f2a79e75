// RUN: deepinfer-opt %s -split-input-file -verify-diagnostics
// Each verifier rule of di.mhc_post rejects a bad op with a message naming the value.

// comb shape
func.func @mhc_post(%arg0: tensor<3x256xbf16>, %arg1: tensor<3x4x256xbf16>, %arg2: tensor<3x4xf32>, %arg3: tensor<3x4x3xf32>) -> (tensor<3x4x256xbf16>, tensor<3xf32>) {
  // expected-error @+1 {{'di.mhc_post' op mhc_post: comb has shape [3, 4, 3]; expected [3, 4, 4]}}
  %x, %sqrsum = di.mhc_post f_out(%arg0 : tensor<3x256xbf16>) residual(%arg1 : tensor<3x4x256xbf16>) post(%arg2 : tensor<3x4xf32>) comb(%arg3 : tensor<3x4x3xf32>) -> tensor<3x4x256xbf16>, tensor<3xf32>
  return %x, %sqrsum : tensor<3x4x256xbf16>, tensor<3xf32>
}

// -----

// f_out width
func.func @mhc_post(%arg0: tensor<3x128xbf16>, %arg1: tensor<3x4x256xbf16>, %arg2: tensor<3x4xf32>, %arg3: tensor<3x4x4xf32>) -> (tensor<3x4x256xbf16>, tensor<3xf32>) {
  // expected-error @+1 {{'di.mhc_post' op mhc_post: f_out has shape [3, 128]; expected [3, 256]}}
  %x, %sqrsum = di.mhc_post f_out(%arg0 : tensor<3x128xbf16>) residual(%arg1 : tensor<3x4x256xbf16>) post(%arg2 : tensor<3x4xf32>) comb(%arg3 : tensor<3x4x4xf32>) -> tensor<3x4x256xbf16>, tensor<3xf32>
  return %x, %sqrsum : tensor<3x4x256xbf16>, tensor<3xf32>
}
