// RUN: deepinfer-opt %s | deepinfer-opt | FileCheck %s
// Round trip of a valid di.kv_quant_insert.

// CHECK-LABEL: func.func @kv_quant_insert
// CHECK: di.kv_quant_insert
func.func @kv_quant_insert(%arg0: tensor<4x512xbf16>, %arg1: tensor<4xi64>, %arg2: tensor<3x1728xui8>) -> tensor<3x1728xui8> {
  %0 = di.kv_quant_insert k(%arg0 : tensor<4x512xbf16>) slot_mapping(%arg1 : tensor<4xi64>) k_cache(%arg2 : tensor<3x1728xui8>) {block_size = 2 : i64} -> tensor<3x1728xui8>
  return %0 : tensor<3x1728xui8>
}
