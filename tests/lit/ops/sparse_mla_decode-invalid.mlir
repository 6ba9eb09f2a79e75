// RUN: deepinfer-opt %s -split-input-file -verify-diagnostics
// Each verifier rule of di.sparse_mla_decode rejects a bad op with a message naming the value.

// heads not tileable
func.func @sparse_mla_decode(%arg0: tensor<2x1x12x512xbf16>, %arg1: tensor<4x37440xui8>, %arg2: tensor<2x1x8xi32>, %arg3: tensor<2xi32>, %arg4: tensor<4x37440xui8>, %arg5: tensor<2x1x16xi32>, %arg6: tensor<2xi32>, %arg7: tensor<16xf32>) -> (tensor<2x1x12x512xbf16>, tensor<2x1x16xf32>) {
  // expected-error @+1 {{'di.sparse_mla_decode' op sparse_mla_decode: q has 12 heads; heads must be a multiple of 8 in 8..128}}
  %out, %lse = di.sparse_mla_decode q(%arg0 : tensor<2x1x12x512xbf16>) swa_cache(%arg1 : tensor<4x37440xui8>) swa_indices(%arg2 : tensor<2x1x8xi32>) swa_lens(%arg3 : tensor<2xi32>) extra_cache(%arg4 : tensor<4x37440xui8>) extra_indices(%arg5 : tensor<2x1x16xi32>) extra_lens(%arg6 : tensor<2xi32>) attn_sink(%arg7 : tensor<16xf32>) {extra_block_size = 64 : i64, sm_scale = 0.0441941693 : f32, swa_block_size = 64 : i64} -> tensor<2x1x12x512xbf16>, tensor<2x1x16xf32>
  return %out, %lse : tensor<2x1x12x512xbf16>, tensor<2x1x16xf32>
}

// -----

// too many heads
func.func @sparse_mla_decode(%arg0: tensor<2x1x136x512xbf16>, %arg1: tensor<4x37440xui8>, %arg2: tensor<2x1x8xi32>, %arg3: tensor<2xi32>, %arg4: tensor<4x37440xui8>, %arg5: tensor<2x1x16xi32>, %arg6: tensor<2xi32>, %arg7: tensor<16xf32>) -> (tensor<2x1x136x512xbf16>, tensor<2x1x16xf32>) {
  // expected-error @+1 {{'di.sparse_mla_decode' op sparse_mla_decode: q has 136 heads; heads must be a multiple of 8 in 8..128}}
  %out, %lse = di.sparse_mla_decode q(%arg0 : tensor<2x1x136x512xbf16>) swa_cache(%arg1 : tensor<4x37440xui8>) swa_indices(%arg2 : tensor<2x1x8xi32>) swa_lens(%arg3 : tensor<2xi32>) extra_cache(%arg4 : tensor<4x37440xui8>) extra_indices(%arg5 : tensor<2x1x16xi32>) extra_lens(%arg6 : tensor<2xi32>) attn_sink(%arg7 : tensor<16xf32>) {extra_block_size = 64 : i64, sm_scale = 0.0441941693 : f32, swa_block_size = 64 : i64} -> tensor<2x1x136x512xbf16>, tensor<2x1x16xf32>
  return %out, %lse : tensor<2x1x136x512xbf16>, tensor<2x1x16xf32>
}

// -----

// swa page bytes
func.func @sparse_mla_decode(%arg0: tensor<2x1x16x512xbf16>, %arg1: tensor<4x37000xui8>, %arg2: tensor<2x1x8xi32>, %arg3: tensor<2xi32>, %arg4: tensor<4x37000xui8>, %arg5: tensor<2x1x16xi32>, %arg6: tensor<2xi32>, %arg7: tensor<16xf32>) -> (tensor<2x1x16x512xbf16>, tensor<2x1x16xf32>) {
  // expected-error @+1 {{'di.sparse_mla_decode' op sparse_mla_decode: swa_cache has shape [4, 37000]; expected [pages, 37440] (ceil(64 * 584 / 576) * 576 bytes per page of 64 tokens)}}
  %out, %lse = di.sparse_mla_decode q(%arg0 : tensor<2x1x16x512xbf16>) swa_cache(%arg1 : tensor<4x37000xui8>) swa_indices(%arg2 : tensor<2x1x8xi32>) swa_lens(%arg3 : tensor<2xi32>) extra_cache(%arg4 : tensor<4x37000xui8>) extra_indices(%arg5 : tensor<2x1x16xi32>) extra_lens(%arg6 : tensor<2xi32>) attn_sink(%arg7 : tensor<16xf32>) {extra_block_size = 64 : i64, sm_scale = 0.0441941693 : f32, swa_block_size = 64 : i64} -> tensor<2x1x16x512xbf16>, tensor<2x1x16xf32>
  return %out, %lse : tensor<2x1x16x512xbf16>, tensor<2x1x16xf32>
}

// -----

// swa_indices batch
func.func @sparse_mla_decode(%arg0: tensor<2x1x16x512xbf16>, %arg1: tensor<4x37440xui8>, %arg2: tensor<3x1x8xi32>, %arg3: tensor<2xi32>, %arg4: tensor<4x37440xui8>, %arg5: tensor<2x1x16xi32>, %arg6: tensor<2xi32>, %arg7: tensor<16xf32>) -> (tensor<2x1x16x512xbf16>, tensor<2x1x16xf32>) {
  // expected-error @+1 {{'di.sparse_mla_decode' op sparse_mla_decode: swa_indices has shape [3, 1, 8]; expected [2, 1, K] with K >= 1}}
  %out, %lse = di.sparse_mla_decode q(%arg0 : tensor<2x1x16x512xbf16>) swa_cache(%arg1 : tensor<4x37440xui8>) swa_indices(%arg2 : tensor<3x1x8xi32>) swa_lens(%arg3 : tensor<2xi32>) extra_cache(%arg4 : tensor<4x37440xui8>) extra_indices(%arg5 : tensor<2x1x16xi32>) extra_lens(%arg6 : tensor<2xi32>) attn_sink(%arg7 : tensor<16xf32>) {extra_block_size = 64 : i64, sm_scale = 0.0441941693 : f32, swa_block_size = 64 : i64} -> tensor<2x1x16x512xbf16>, tensor<2x1x16xf32>
  return %out, %lse : tensor<2x1x16x512xbf16>, tensor<2x1x16xf32>
}

// -----

// lse result shape
func.func @sparse_mla_decode(%arg0: tensor<2x1x16x512xbf16>, %arg1: tensor<4x37440xui8>, %arg2: tensor<2x1x8xi32>, %arg3: tensor<2xi32>, %arg4: tensor<4x37440xui8>, %arg5: tensor<2x1x16xi32>, %arg6: tensor<2xi32>, %arg7: tensor<16xf32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>) {
  // expected-error @+1 {{'di.sparse_mla_decode' op result 'lse' has type 'tensor<2x16x1xf32>' but the inputs give shape [2, 1, 16]}}
  %out, %lse = di.sparse_mla_decode q(%arg0 : tensor<2x1x16x512xbf16>) swa_cache(%arg1 : tensor<4x37440xui8>) swa_indices(%arg2 : tensor<2x1x8xi32>) swa_lens(%arg3 : tensor<2xi32>) extra_cache(%arg4 : tensor<4x37440xui8>) extra_indices(%arg5 : tensor<2x1x16xi32>) extra_lens(%arg6 : tensor<2xi32>) attn_sink(%arg7 : tensor<16xf32>) {extra_block_size = 64 : i64, sm_scale = 0.0441941693 : f32, swa_block_size = 64 : i64} -> tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
  return %out, %lse : tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
}

// -----

// swa_lens may be [B] or [B, Sq] (Di_I32<[1, 2]>), not rank 3
func.func @sparse_mla_decode(%arg0: tensor<2x1x16x512xbf16>, %arg1: tensor<4x37440xui8>, %arg2: tensor<2x1x8xi32>, %arg3: tensor<2x1x1xi32>, %arg7: tensor<16xf32>) -> (tensor<2x1x16x512xbf16>, tensor<2x1x16xf32>) {
  // expected-error @+1 {{'di.sparse_mla_decode' op operand #3 must be 1D/2D tensor of 32-bit signless integer values, but got 'tensor<2x1x1xi32>'}}
  %out, %lse = di.sparse_mla_decode q(%arg0 : tensor<2x1x16x512xbf16>) swa_cache(%arg1 : tensor<4x37440xui8>) swa_indices(%arg2 : tensor<2x1x8xi32>) swa_lens(%arg3 : tensor<2x1x1xi32>) attn_sink(%arg7 : tensor<16xf32>) {swa_block_size = 64 : i64} -> tensor<2x1x16x512xbf16>, tensor<2x1x16xf32>
  return %out, %lse : tensor<2x1x16x512xbf16>, tensor<2x1x16xf32>
}
