// RUN: deepinfer-opt %s -split-input-file -verify-diagnostics
// Each verifier rule of di.gather_kcache rejects a bad op with a message naming the value.

// page bytes vs block_size
func.func @gather_kcache(%arg0: tensor<8x1728xui8>, %arg1: tensor<2xi32>, %arg2: tensor<2xi32>, %arg3: tensor<2x4xi32>, %arg4: tensor<2x8x512xbf16>) -> tensor<2x8x512xbf16> {
  // expected-error @+1 {{'di.gather_kcache' op gather_kcache: k_cache has 1728 bytes per page, but block_size 64 needs ceil(64*584/576)*576 = 37440}}
  %0 = di.gather_kcache k_cache(%arg0 : tensor<8x1728xui8>) seq_lens(%arg1 : tensor<2xi32>) gather_lens(%arg2 : tensor<2xi32>) block_table(%arg3 : tensor<2x4xi32>) out(%arg4 : tensor<2x8x512xbf16>) {block_size = 64 : i64} -> tensor<2x8x512xbf16>
  return %0 : tensor<2x8x512xbf16>
}

// -----

// block_table rows
func.func @gather_kcache(%arg0: tensor<8x1728xui8>, %arg1: tensor<2xi32>, %arg2: tensor<2xi32>, %arg3: tensor<3x4xi32>, %arg4: tensor<2x8x512xbf16>) -> tensor<2x8x512xbf16> {
  // expected-error @+1 {{'di.gather_kcache' op gather_kcache: block_table has 3 rows but seq_lens has 2 requests}}
  %0 = di.gather_kcache k_cache(%arg0 : tensor<8x1728xui8>) seq_lens(%arg1 : tensor<2xi32>) gather_lens(%arg2 : tensor<2xi32>) block_table(%arg3 : tensor<3x4xi32>) out(%arg4 : tensor<2x8x512xbf16>) {block_size = 2 : i64} -> tensor<2x8x512xbf16>
  return %0 : tensor<2x8x512xbf16>
}

// -----

// out head dim
func.func @gather_kcache(%arg0: tensor<8x1728xui8>, %arg1: tensor<2xi32>, %arg2: tensor<2xi32>, %arg3: tensor<2x4xi32>, %arg4: tensor<2x8x256xbf16>) -> tensor<2x8x256xbf16> {
  // expected-error @+1 {{'di.gather_kcache' op gather_kcache: out has shape [2, 8, 256]; expected [R=2, M, 512]}}
  %0 = di.gather_kcache k_cache(%arg0 : tensor<8x1728xui8>) seq_lens(%arg1 : tensor<2xi32>) gather_lens(%arg2 : tensor<2xi32>) block_table(%arg3 : tensor<2x4xi32>) out(%arg4 : tensor<2x8x256xbf16>) {block_size = 2 : i64} -> tensor<2x8x256xbf16>
  return %0 : tensor<2x8x256xbf16>
}

// -----

// gather_lens length
func.func @gather_kcache(%arg0: tensor<8x1728xui8>, %arg1: tensor<2xi32>, %arg2: tensor<3xi32>, %arg3: tensor<2x4xi32>, %arg4: tensor<2x8x512xbf16>) -> tensor<2x8x512xbf16> {
  // expected-error @+1 {{'di.gather_kcache' op gather_kcache: tensor 'gather_lens' has shape [3], expected [2] (dim 0 differs)}}
  %0 = di.gather_kcache k_cache(%arg0 : tensor<8x1728xui8>) seq_lens(%arg1 : tensor<2xi32>) gather_lens(%arg2 : tensor<3xi32>) block_table(%arg3 : tensor<2x4xi32>) out(%arg4 : tensor<2x8x512xbf16>) {block_size = 2 : i64} -> tensor<2x8x512xbf16>
  return %0 : tensor<2x8x512xbf16>
}
