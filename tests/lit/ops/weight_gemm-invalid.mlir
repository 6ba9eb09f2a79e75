// RUN: deepinfer-opt %s -split-input-file -verify-diagnostics
// Each verifier rule of di.weight_gemm rejects a bad op with a message naming the value.

// weight_bits other than 4 / 8
func.func @bits(%x: tensor<4x256xbf16>, %w: tensor<96x256xui8>, %s: tensor<3x8xui8>) -> tensor<4x96xf32> {
  // expected-error @+1 {{'di.weight_gemm' op weight_gemm: weight_bits = 6 must be 8 (e4m3, 32x32-block scales) or 4 (e2m1, 1x32 scales)}}
  %0 = di.weight_gemm x(%x : tensor<4x256xbf16>) w(%w : tensor<96x256xui8>) w_scale(%s : tensor<3x8xui8>) {weight_bits = 6 : i64} -> tensor<4x96xf32>
  return %0 : tensor<4x96xf32>
}

// -----

// e4m3 weights of the wrong width
func.func @wcols(%x: tensor<4x256xbf16>, %w: tensor<96x128xui8>, %s: tensor<3x8xui8>) -> tensor<4x96xf32> {
  // expected-error @+1 {{'di.weight_gemm' op weight_gemm: tensor 'w' has shape [96, 128], expected [96, 256] (dim 1 differs)}}
  %0 = di.weight_gemm x(%x : tensor<4x256xbf16>) w(%w : tensor<96x128xui8>) w_scale(%s : tensor<3x8xui8>) {weight_bits = 8 : i64} -> tensor<4x96xf32>
  return %0 : tensor<4x96xf32>
}

// -----

// e2m1 scales are per row, not per 32x32 block
func.func @fp4scale(%x: tensor<4x256xbf16>, %w: tensor<96x128xui8>, %s: tensor<3x8xui8>) -> tensor<4x96xf32> {
  // expected-error @+1 {{'di.weight_gemm' op weight_gemm: tensor 'w_scale' has shape [3, 8], expected [96, 8] (dim 0 differs)}}
  %0 = di.weight_gemm x(%x : tensor<4x256xbf16>) w(%w : tensor<96x128xui8>) w_scale(%s : tensor<3x8xui8>) {weight_bits = 4 : i64} -> tensor<4x96xf32>
  return %0 : tensor<4x96xf32>
}

// -----

// e4m3 K not a multiple of 16
func.func @k16(%x: tensor<4x40xbf16>, %w: tensor<96x40xui8>, %s: tensor<3x2xui8>) -> tensor<4x96xf32> {
  // expected-error @+1 {{'di.weight_gemm' op weight_gemm: e4m3 weights need K per group = 40 to be a multiple of 16 (16-byte rows)}}
  %0 = di.weight_gemm x(%x : tensor<4x40xbf16>) w(%w : tensor<96x40xui8>) w_scale(%s : tensor<3x2xui8>) {weight_bits = 8 : i64} -> tensor<4x96xf32>
  return %0 : tensor<4x96xf32>
}

// -----

// SwiGLU without the up projection
func.func @noup(%x: tensor<4x256xbf16>, %w: tensor<96x256xui8>, %s: tensor<3x8xui8>) -> tensor<4x96xbf16> {
  // expected-error @+1 {{'di.weight_gemm' op weight_gemm: epilogue = 2 (SwiGLU) needs the up projection 'w_up' and 'w_up_scale'}}
  %0 = di.weight_gemm x(%x : tensor<4x256xbf16>) w(%w : tensor<96x256xui8>) w_scale(%s : tensor<3x8xui8>) {weight_bits = 8 : i64, epilogue = 2 : i64} -> tensor<4x96xbf16>
  return %0 : tensor<4x96xbf16>
}

// -----

// an up projection without SwiGLU
func.func @extra(%x: tensor<4x256xbf16>, %w: tensor<96x256xui8>, %s: tensor<3x8xui8>) -> tensor<4x96xf32> {
  // expected-error @+1 {{'di.weight_gemm' op weight_gemm: 'w_up'/'w_up_scale' are read only by epilogue = 2 (SwiGLU); epilogue = 0}}
  %0 = di.weight_gemm x(%x : tensor<4x256xbf16>) w(%w : tensor<96x256xui8>) w_scale(%s : tensor<3x8xui8>) w_up(%w : tensor<96x256xui8>) w_up_scale(%s : tensor<3x8xui8>) {weight_bits = 8 : i64} -> tensor<4x96xf32>
  return %0 : tensor<4x96xf32>
}

// -----

// groups of rows that are not whole n8 tiles
func.func @groups(%x: tensor<4x512xbf16>, %w: tensor<36x128xui8>, %s: tensor<2x4xui8>) -> tensor<4x36xf32> {
  // expected-error @+1 {{'di.weight_gemm' op weight_gemm: w has 36 rows = 4 groups of 9; grouped weights need groups of a multiple of 8 rows}}
  %0 = di.weight_gemm x(%x : tensor<4x512xbf16>) w(%w : tensor<36x128xui8>) w_scale(%s : tensor<2x4xui8>) {weight_bits = 8 : i64, groups = 4 : i64} -> tensor<4x36xf32>
  return %0 : tensor<4x36xf32>
}

// -----

// the result dtype must follow the epilogue
func.func @dtype(%x: tensor<4x256xbf16>, %w: tensor<96x256xui8>, %s: tensor<3x8xui8>) -> tensor<4x96xf32> {
  // expected-error @+1 {{'di.weight_gemm' op result 'y' has type 'tensor<4x96xf32>' but the op produces BF16 elements}}
  %0 = di.weight_gemm x(%x : tensor<4x256xbf16>) w(%w : tensor<96x256xui8>) w_scale(%s : tensor<3x8xui8>) {weight_bits = 8 : i64, epilogue = 1 : i64} -> tensor<4x96xf32>
  return %0 : tensor<4x96xf32>
}

// -----

// the result shape must be [M, N]
func.func @shape(%x: tensor<4x256xbf16>, %w: tensor<96x256xui8>, %s: tensor<3x8xui8>) -> tensor<4x95xf32> {
  // expected-error @+1 {{'di.weight_gemm' op result 'y' has type 'tensor<4x95xf32>' but the inputs give shape [4, 96]}}
  %0 = di.weight_gemm x(%x : tensor<4x256xbf16>) w(%w : tensor<96x256xui8>) w_scale(%s : tensor<3x8xui8>) {weight_bits = 8 : i64} -> tensor<4x95xf32>
  return %0 : tensor<4x95xf32>
}

// -----

// an odd output width (the epilogues store column pairs)
func.func @odd(%x: tensor<4x256xbf16>, %w: tensor<95x256xui8>, %s: tensor<3x8xui8>) -> tensor<4x95xf32> {
  // expected-error @+1 {{'di.weight_gemm' op weight_gemm: w has 95 rows; the output is written in column pairs, so its width must be even}}
  %0 = di.weight_gemm x(%x : tensor<4x256xbf16>) w(%w : tensor<95x256xui8>) w_scale(%s : tensor<3x8xui8>) {weight_bits = 8 : i64} -> tensor<4x95xf32>
  return %0 : tensor<4x95xf32>
}
