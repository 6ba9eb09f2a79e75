// RUN: deepinfer-opt %s -split-input-file -verify-diagnostics
// Each verifier rule of di.indexer_logits rejects a bad op with a message naming the value.

// indexer heads
func.func @indexer_logits(%arg0: tensor<4x3x128xbf16>, %arg1: tensor<4x4xf32>, %arg2: tensor<4x528xui8>, %arg3: tensor<1x4xi32>, %arg4: tensor<4xi32>, %arg5: tensor<4xi32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'di.indexer_logits' op indexer_logits: q has 3 heads; Hi must be in 4..64}}
  %0 = di.indexer_logits q(%arg0 : tensor<4x3x128xbf16>) weights(%arg1 : tensor<4x4xf32>) k_cache(%arg2 : tensor<4x528xui8>) block_table(%arg3 : tensor<1x4xi32>) token_to_req(%arg4 : tensor<4xi32>) visible(%arg5 : tensor<4xi32>) {block_size = 4 : i64} -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// indexer head dim
func.func @indexer_logits(%arg0: tensor<4x4x64xbf16>, %arg1: tensor<4x4xf32>, %arg2: tensor<4x528xui8>, %arg3: tensor<1x4xi32>, %arg4: tensor<4xi32>, %arg5: tensor<4xi32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'di.indexer_logits' op indexer_logits: q has head dim 64; the index head dim must be 128}}
  %0 = di.indexer_logits q(%arg0 : tensor<4x4x64xbf16>) weights(%arg1 : tensor<4x4xf32>) k_cache(%arg2 : tensor<4x528xui8>) block_table(%arg3 : tensor<1x4xi32>) token_to_req(%arg4 : tensor<4xi32>) visible(%arg5 : tensor<4xi32>) {block_size = 4 : i64} -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// key page bytes
func.func @indexer_logits(%arg0: tensor<4x4x128xbf16>, %arg1: tensor<4x4xf32>, %arg2: tensor<4x528xui8>, %arg3: tensor<1x4xi32>, %arg4: tensor<4xi32>, %arg5: tensor<4xi32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'di.indexer_logits' op indexer_logits: k_cache pages have 528 bytes; block_size = 8 needs block_size*132 = 1056}}
  %0 = di.indexer_logits q(%arg0 : tensor<4x4x128xbf16>) weights(%arg1 : tensor<4x4xf32>) k_cache(%arg2 : tensor<4x528xui8>) block_table(%arg3 : tensor<1x4xi32>) token_to_req(%arg4 : tensor<4xi32>) visible(%arg5 : tensor<4xi32>) {block_size = 8 : i64} -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}
