// RUN: deepinfer-opt %s -split-input-file -verify-diagnostics
// The rules of di.gather_kcache_combine are gather_kcache's and combine_topk_swa's, each named.

// -----

// window zero (combine_topk_swa's rule)
func.func @gather_kcache_combine(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  // expected-error @+1 {{gather_kcache_combine: combine_topk_swa: window is 0; it must be >= 1}}
  %g, %rows, %lens = di.gather_kcache_combine k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) {N = 32 : i64, block_size = 2 : i64, ratio = 2 : i64, topk = 8 : i64, window = 0 : i64} -> tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}

// -----

// N past out's rows (gather_kcache's offset rule)
func.func @gather_kcache_combine(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  // expected-error @+1 {{gather_kcache_combine: gather_kcache: offset is 48; it must be in 0..M = 40}}
  %g, %rows, %lens = di.gather_kcache_combine k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) {N = 48 : i64, block_size = 2 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}

// -----

// no room for the window after N
func.func @gather_kcache_combine(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  // expected-error @+1 {{gather_kcache_combine: combine_topk_swa: M is 40 but must be at least N + window = 38 + 4}}
  %g, %rows, %lens = di.gather_kcache_combine k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) {N = 38 : i64, block_size = 2 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}

// -----

// topk attribute vs the top-k rows
func.func @gather_kcache_combine(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  // expected-error @+1 {{gather_kcache_combine: combine_topk_swa: topk_indices has 8 columns but topk is 16}}
  %g, %rows, %lens = di.gather_kcache_combine k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) {N = 32 : i64, block_size = 2 : i64, ratio = 2 : i64, topk = 16 : i64, window = 4 : i64} -> tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}

// -----

// block table rows vs requests
func.func @gather_kcache_combine(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<3x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  // expected-error @+1 {{gather_kcache_combine: gather_kcache: block_table has 3 rows but seq_lens has 2 requests}}
  %g, %rows, %lens = di.gather_kcache_combine k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<3x4xi32>) out(%out : tensor<2x40x512xbf16>) topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) {N = 32 : i64, block_size = 2 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}

// -----

// page bytes vs block_size
func.func @gather_kcache_combine(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  // expected-error @+1 {{gather_kcache_combine: }}
  %g, %rows, %lens = di.gather_kcache_combine k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) {N = 32 : i64, block_size = 4 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}

// -----

// rows result width
func.func @gather_kcache_combine(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x256xi32>, tensor<4xi32>) {
  // expected-error @+1 {{result 'rows' has type 'tensor<4x256xi32>'}}
  %g, %rows, %lens = di.gather_kcache_combine k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) {N = 32 : i64, block_size = 2 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<2x40x512xbf16>, tensor<4x256xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x256xi32>, tensor<4xi32>
}
