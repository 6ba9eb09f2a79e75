// RUN: deepinfer-opt %s -split-input-file -verify-diagnostics
// Each verifier rule of di.sparse_mla_prefill rejects a bad op with a message naming the value.

// heads not tileable
func.func @sparse_mla_prefill(%arg0: tensor<2x12x512xbf16>, %arg1: tensor<32x512xbf16>, %arg2: tensor<2x16xi32>, %arg3: tensor<2xi32>, %arg4: tensor<16xf32>) -> (tensor<2x12x512xbf16>, tensor<2x16xf32>) {
  // expected-error @+1 {{'di.sparse_mla_prefill' op sparse_mla_prefill: q has 12 heads; heads must be a multiple of 8 in 8..128}}
  %out, %lse = di.sparse_mla_prefill q(%arg0 : tensor<2x12x512xbf16>) kv(%arg1 : tensor<32x512xbf16>) indices(%arg2 : tensor<2x16xi32>) lens(%arg3 : tensor<2xi32>) attn_sink(%arg4 : tensor<16xf32>) {sm_scale = 0.0441941693 : f32} -> tensor<2x12x512xbf16>, tensor<2x16xf32>
  return %out, %lse : tensor<2x12x512xbf16>, tensor<2x16xf32>
}

// -----

// head dim
func.func @sparse_mla_prefill(%arg0: tensor<2x16x256xbf16>, %arg1: tensor<32x512xbf16>, %arg2: tensor<2x16xi32>, %arg3: tensor<2xi32>, %arg4: tensor<16xf32>) -> (tensor<2x16x256xbf16>, tensor<2x16xf32>) {
  // expected-error @+1 {{'di.sparse_mla_prefill' op sparse_mla_prefill: q has head dim 256 ([2, 16, 256]); the head dim must be 512}}
  %out, %lse = di.sparse_mla_prefill q(%arg0 : tensor<2x16x256xbf16>) kv(%arg1 : tensor<32x512xbf16>) indices(%arg2 : tensor<2x16xi32>) lens(%arg3 : tensor<2xi32>) attn_sink(%arg4 : tensor<16xf32>) {sm_scale = 0.0441941693 : f32} -> tensor<2x16x256xbf16>, tensor<2x16xf32>
  return %out, %lse : tensor<2x16x256xbf16>, tensor<2x16xf32>
}

// -----

// indices rows
func.func @sparse_mla_prefill(%arg0: tensor<2x16x512xbf16>, %arg1: tensor<32x512xbf16>, %arg2: tensor<3x16xi32>, %arg3: tensor<2xi32>, %arg4: tensor<16xf32>) -> (tensor<2x16x512xbf16>, tensor<2x16xf32>) {
  // expected-error @+1 {{'di.sparse_mla_prefill' op sparse_mla_prefill: indices has 3 rows ([3, 16]) but q has 2 tokens}}
  %out, %lse = di.sparse_mla_prefill q(%arg0 : tensor<2x16x512xbf16>) kv(%arg1 : tensor<32x512xbf16>) indices(%arg2 : tensor<3x16xi32>) lens(%arg3 : tensor<2xi32>) attn_sink(%arg4 : tensor<16xf32>) {sm_scale = 0.0441941693 : f32} -> tensor<2x16x512xbf16>, tensor<2x16xf32>
  return %out, %lse : tensor<2x16x512xbf16>, tensor<2x16xf32>
}

// -----

// attn_sink size
func.func @sparse_mla_prefill(%arg0: tensor<2x16x512xbf16>, %arg1: tensor<32x512xbf16>, %arg2: tensor<2x16xi32>, %arg3: tensor<2xi32>, %arg4: tensor<8xf32>) -> (tensor<2x16x512xbf16>, tensor<2x16xf32>) {
  // expected-error @+1 {{'di.sparse_mla_prefill' op sparse_mla_prefill: attn_sink has 8 entries but q has 16 heads}}
  %out, %lse = di.sparse_mla_prefill q(%arg0 : tensor<2x16x512xbf16>) kv(%arg1 : tensor<32x512xbf16>) indices(%arg2 : tensor<2x16xi32>) lens(%arg3 : tensor<2xi32>) attn_sink(%arg4 : tensor<8xf32>) {sm_scale = 0.0441941693 : f32} -> tensor<2x16x512xbf16>, tensor<2x16xf32>
  return %out, %lse : tensor<2x16x512xbf16>, tensor<2x16xf32>
}

// -----

// nope dim
func.func @sparse_mla_prefill(%arg0: tensor<2x16x512xbf16>, %arg1: tensor<32x512xbf16>, %arg2: tensor<2x16xi32>, %arg3: tensor<2xi32>, %arg4: tensor<16xf32>) -> (tensor<2x16x512xbf16>, tensor<2x16xf32>) {
  // expected-error @+1 {{'di.sparse_mla_prefill' op sparse_mla_prefill: nope_dim = 320; the kernels need 448 NoPE dims}}
  %out, %lse = di.sparse_mla_prefill q(%arg0 : tensor<2x16x512xbf16>) kv(%arg1 : tensor<32x512xbf16>) indices(%arg2 : tensor<2x16xi32>) lens(%arg3 : tensor<2xi32>) attn_sink(%arg4 : tensor<16xf32>) {nope_dim = 320 : i64, sm_scale = 0.0441941693 : f32} -> tensor<2x16x512xbf16>, tensor<2x16xf32>
  return %out, %lse : tensor<2x16x512xbf16>, tensor<2x16xf32>
}
