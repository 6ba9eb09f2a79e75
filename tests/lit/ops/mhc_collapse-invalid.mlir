// RUN: deepinfer-opt %s -split-input-file -verify-diagnostics
// Each verifier rule of di.mhc_collapse rejects a bad op with a message naming the value.

// pre streams
func.func @mhc_collapse(%arg0: tensor<3x4x256xbf16>, %arg1: tensor<3x3xf32>) -> tensor<3x256xbf16> {
  // expected-error @+1 {{'di.mhc_collapse' op mhc_collapse: pre has shape [3, 3]; expected [3, 4]}}
  %0 = di.mhc_collapse x(%arg0 : tensor<3x4x256xbf16>) pre(%arg1 : tensor<3x3xf32>) -> tensor<3x256xbf16>
  return %0 : tensor<3x256xbf16>
}

// -----

// x streams
func.func @mhc_collapse(%arg0: tensor<3x3x256xbf16>, %arg1: tensor<3x4xf32>) -> tensor<3x256xbf16> {
  // expected-error @+1 {{'di.mhc_collapse' op mhc_collapse: x has 3 streams (shape [3, 3, 256]); mHC needs n = 4 streams, [T, 4, C]}}
  %0 = di.mhc_collapse x(%arg0 : tensor<3x3x256xbf16>) pre(%arg1 : tensor<3x4xf32>) -> tensor<3x256xbf16>
  return %0 : tensor<3x256xbf16>
}
