// RUN: deepinfer-opt %s -split-input-file -verify-diagnostics
// Each verifier rule of di.kv_quant_insert rejects a bad op with a message naming the value.

// head dim not 512
func.func @kv_quant_insert(%arg0: tensor<4x511xbf16>, %arg1: tensor<4xi64>, %arg2: tensor<3x1728xui8>) -> tensor<3x1728xui8> {
  // expected-error @+1 {{'di.kv_quant_insert' op kv_quant_insert: k has 511 columns per token; expected 512 (448 NoPE + 64 RoPE)}}
  %0 = di.kv_quant_insert k(%arg0 : tensor<4x511xbf16>) slot_mapping(%arg1 : tensor<4xi64>) k_cache(%arg2 : tensor<3x1728xui8>) {block_size = 2 : i64} -> tensor<3x1728xui8>
  return %0 : tensor<3x1728xui8>
}

// -----

// slot_mapping length
func.func @kv_quant_insert(%arg0: tensor<4x512xbf16>, %arg1: tensor<5xi64>, %arg2: tensor<3x1728xui8>) -> tensor<3x1728xui8> {
  // expected-error @+1 {{'di.kv_quant_insert' op kv_quant_insert: tensor 'slot_mapping' has shape [5], expected [4] (dim 0 differs)}}
  %0 = di.kv_quant_insert k(%arg0 : tensor<4x512xbf16>) slot_mapping(%arg1 : tensor<5xi64>) k_cache(%arg2 : tensor<3x1728xui8>) {block_size = 2 : i64} -> tensor<3x1728xui8>
  return %0 : tensor<3x1728xui8>
}

// -----

// page bytes vs block_size
func.func @kv_quant_insert(%arg0: tensor<4x512xbf16>, %arg1: tensor<4xi64>, %arg2: tensor<3x1728xui8>) -> tensor<3x1728xui8> {
  // expected-error @+1 {{'di.kv_quant_insert' op kv_quant_insert: k_cache has 1728 bytes per page, but block_size 4 needs ceil(4*584/576)*576 = 2880}}
  %0 = di.kv_quant_insert k(%arg0 : tensor<4x512xbf16>) slot_mapping(%arg1 : tensor<4xi64>) k_cache(%arg2 : tensor<3x1728xui8>) {block_size = 4 : i64} -> tensor<3x1728xui8>
  return %0 : tensor<3x1728xui8>
}

// -----

// block_size zero
func.func @kv_quant_insert(%arg0: tensor<4x512xbf16>, %arg1: tensor<4xi64>, %arg2: tensor<3x1728xui8>) -> tensor<3x1728xui8> {
  // expected-error @+1 {{'di.kv_quant_insert' op kv_quant_insert: block_size is 0; it must be in 1..1048576}}
  %0 = di.kv_quant_insert k(%arg0 : tensor<4x512xbf16>) slot_mapping(%arg1 : tensor<4xi64>) k_cache(%arg2 : tensor<3x1728xui8>) {block_size = 0 : i64} -> tensor<3x1728xui8>
  return %0 : tensor<3x1728xui8>
}

// -----

// cache format
func.func @kv_quant_insert(%arg0: tensor<4x512xbf16>, %arg1: tensor<4xi64>, %arg2: tensor<3x1728xui8>) -> tensor<3x1728xui8> {
  // expected-error @+1 {{'di.kv_quant_insert' op cache_format 'fp4_trained' is not supported (supported: 'fp8_ds_mla', 584 bytes per token)}}
  %0 = di.kv_quant_insert k(%arg0 : tensor<4x512xbf16>) slot_mapping(%arg1 : tensor<4xi64>) k_cache(%arg2 : tensor<3x1728xui8>) {block_size = 2 : i64, cache_format = "fp4_trained"} -> tensor<3x1728xui8>
  return %0 : tensor<3x1728xui8>
}
