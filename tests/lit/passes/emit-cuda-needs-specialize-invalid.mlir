// RUN: deepinfer-opt %s --di-emit-cuda -verify-diagnostics
// Emission needs a target and a config: running it first is an error at the op.
func.func @mhc_collapse(%arg0: tensor<3x4x256xbf16>, %arg1: tensor<3x4xf32>) -> tensor<3x256xbf16> {
  // expected-error @+1 {{has no di.config/di.target; run di-specialize-target first}}
  %0 = di.mhc_collapse x(%arg0 : tensor<3x4x256xbf16>) pre(%arg1 : tensor<3x4xf32>) -> tensor<3x256xbf16>
  return %0 : tensor<3x256xbf16>
}
