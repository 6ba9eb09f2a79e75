// RUN: deepinfer-opt %s --di-specialize-target=target=sm_86 --di-emit-cuda | FileCheck %s
// di-emit-cuda instantiates the op's template: the unit includes the template header, its entry
// name derives from the unit's content (never the bare op name), and the launch plan is attached.

// CHECK: di.mhc_collapse
// CHECK-SAME: di.cuda = "#include \22Mhc
// CHECK-SAME: extern \22C\22 __global__
// CHECK-SAME: di_mhc_collapse_[[HASH:[0-9a-f]{16}]]
// CHECK-SAME: di.launch = [{block = array<i64: 32, 1, 1>, dynamic_smem = 0 : i64, entry = "di_mhc_collapse_[[HASH]]", grid = array<i64:
func.func @mhc_collapse(%arg0: tensor<3x4x256xbf16>, %arg1: tensor<3x4xf32>) -> tensor<3x256xbf16> {
  %0 = di.mhc_collapse x(%arg0 : tensor<3x4x256xbf16>) pre(%arg1 : tensor<3x4xf32>) -> tensor<3x256xbf16>
  return %0 : tensor<3x256xbf16>
}
