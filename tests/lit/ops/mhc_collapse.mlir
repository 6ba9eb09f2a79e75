// RUN: deepinfer-opt %s | deepinfer-opt | FileCheck %s
// Round trip of a valid di.mhc_collapse.

// CHECK-LABEL: func.func @mhc_collapse
// CHECK: di.mhc_collapse
func.func @mhc_collapse(%arg0: tensor<3x4x256xbf16>, %arg1: tensor<3x4xf32>) -> tensor<3x256xbf16> {
  %0 = di.mhc_collapse x(%arg0 : tensor<3x4x256xbf16>) pre(%arg1 : tensor<3x4xf32>) -> tensor<3x256xbf16>
  return %0 : tensor<3x256xbf16>
}
