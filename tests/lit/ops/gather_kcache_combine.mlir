// RUN: deepinfer-opt %s | deepinfer-opt | FileCheck %s
// Round trip of a valid di.gather_kcache_combine.

// CHECK-LABEL: func.func @gather_kcache_combine
// CHECK: di.gather_kcache_combine
func.func @gather_kcache_combine(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  %g, %rows, %lens = di.gather_kcache_combine k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) {N = 32 : i64, block_size = 2 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}
