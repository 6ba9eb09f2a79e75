// RUN: deepinfer-opt %s | deepinfer-opt | FileCheck %s
// Round trip of valid di.weight_gemm ops: e4m3 with f32 out, e2m1 with bf16 out, the SwiGLU pair
// (w_up) and the grouped form of wo_a.

// CHECK-LABEL: func.func @fp8_f32
// CHECK: di.weight_gemm x(%{{.*}} : tensor<4x256xbf16>) w(%{{.*}} : tensor<96x256xui8>) w_scale(%{{.*}} : tensor<3x8xui8>) {weight_bits = 8 : i64} -> tensor<4x96xf32>
func.func @fp8_f32(%x: tensor<4x256xbf16>, %w: tensor<96x256xui8>, %s: tensor<3x8xui8>) -> tensor<4x96xf32> {
  %0 = di.weight_gemm x(%x : tensor<4x256xbf16>) w(%w : tensor<96x256xui8>) w_scale(%s : tensor<3x8xui8>) {weight_bits = 8 : i64} -> tensor<4x96xf32>
  return %0 : tensor<4x96xf32>
}

// CHECK-LABEL: func.func @fp4_bf16
// CHECK: di.weight_gemm {{.*}} {epilogue = 1 : i64, weight_bits = 4 : i64} -> tensor<12x160xbf16>
func.func @fp4_bf16(%x: tensor<12x512xbf16>, %w: tensor<160x256xui8>, %s: tensor<160x16xui8>) -> tensor<12x160xbf16> {
  %0 = di.weight_gemm x(%x : tensor<12x512xbf16>) w(%w : tensor<160x256xui8>) w_scale(%s : tensor<160x16xui8>) {weight_bits = 4 : i64, epilogue = 1 : i64} -> tensor<12x160xbf16>
  return %0 : tensor<12x160xbf16>
}

// CHECK-LABEL: func.func @swiglu
// CHECK: di.weight_gemm {{.*}} w_up(%{{.*}} : tensor<72x256xui8>) w_up_scale(%{{.*}} : tensor<3x8xui8>) {epilogue = 2 : i64, swiglu_limit = 8.000000e+00 : f32, weight_bits = 8 : i64} -> tensor<7x72xbf16>
func.func @swiglu(%x: tensor<7x256xbf16>, %w: tensor<72x256xui8>, %s: tensor<3x8xui8>, %u: tensor<72x256xui8>, %us: tensor<3x8xui8>) -> tensor<7x72xbf16> {
  %0 = di.weight_gemm x(%x : tensor<7x256xbf16>) w(%w : tensor<72x256xui8>) w_scale(%s : tensor<3x8xui8>) w_up(%u : tensor<72x256xui8>) w_up_scale(%us : tensor<3x8xui8>) {weight_bits = 8 : i64, epilogue = 2 : i64, swiglu_limit = 8.0 : f32} -> tensor<7x72xbf16>
  return %0 : tensor<7x72xbf16>
}

// CHECK-LABEL: func.func @wo_a
// CHECK: di.weight_gemm {{.*}} {epilogue = 1 : i64, groups = 8 : i64, weight_bits = 8 : i64} -> tensor<2x8192xbf16>
func.func @wo_a(%x: tensor<2x32768xbf16>, %w: tensor<8192x4096xui8>, %s: tensor<256x128xui8>) -> tensor<2x8192xbf16> {
  %0 = di.weight_gemm x(%x : tensor<2x32768xbf16>) w(%w : tensor<8192x4096xui8>) w_scale(%s : tensor<256x128xui8>) {weight_bits = 8 : i64, groups = 8 : i64, epilogue = 1 : i64} -> tensor<2x8192xbf16>
  return %0 : tensor<2x8192xbf16>
}
