// RUN: deepinfer-opt %s -split-input-file -verify-diagnostics
// Each verifier rule of di.combine_topk_swa rejects a bad op with a message naming the value.

// ratio unsupported
func.func @combine_topk_swa(%arg0: tensor<4x8xi32>, %arg1: tensor<3xi32>, %arg2: tensor<2xi32>, %arg3: tensor<2xi32>) -> (tensor<4x128xi32>, tensor<4xi32>) {
  // expected-error @+1 {{'di.combine_topk_swa' op combine_topk_swa: ratio is -1; it must be >= 0}}
  %rows, %lens = di.combine_topk_swa topk_indices(%arg0 : tensor<4x8xi32>) query_start_loc(%arg1 : tensor<3xi32>) seq_lens(%arg2 : tensor<2xi32>) gather_lens(%arg3 : tensor<2xi32>) {M = 40 : i64, N = 32 : i64, ratio = -1 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<4x128xi32>, tensor<4xi32>
  return %rows, %lens : tensor<4x128xi32>, tensor<4xi32>
}

// -----

// window zero
func.func @combine_topk_swa(%arg0: tensor<4x8xi32>, %arg1: tensor<3xi32>, %arg2: tensor<2xi32>, %arg3: tensor<2xi32>) -> (tensor<4x128xi32>, tensor<4xi32>) {
  // expected-error @+1 {{'di.combine_topk_swa' op combine_topk_swa: window is 0; it must be >= 1}}
  %rows, %lens = di.combine_topk_swa topk_indices(%arg0 : tensor<4x8xi32>) query_start_loc(%arg1 : tensor<3xi32>) seq_lens(%arg2 : tensor<2xi32>) gather_lens(%arg3 : tensor<2xi32>) {M = 40 : i64, N = 32 : i64, ratio = 2 : i64, topk = 8 : i64, window = 0 : i64} -> tensor<4x128xi32>, tensor<4xi32>
  return %rows, %lens : tensor<4x128xi32>, tensor<4xi32>
}

// -----

// topk attr vs tensor
func.func @combine_topk_swa(%arg0: tensor<4x8xi32>, %arg1: tensor<3xi32>, %arg2: tensor<2xi32>, %arg3: tensor<2xi32>) -> (tensor<4x128xi32>, tensor<4xi32>) {
  // expected-error @+1 {{'di.combine_topk_swa' op combine_topk_swa: topk_indices has 8 columns but topk is 16}}
  %rows, %lens = di.combine_topk_swa topk_indices(%arg0 : tensor<4x8xi32>) query_start_loc(%arg1 : tensor<3xi32>) seq_lens(%arg2 : tensor<2xi32>) gather_lens(%arg3 : tensor<2xi32>) {M = 40 : i64, N = 32 : i64, ratio = 2 : i64, topk = 16 : i64, window = 4 : i64} -> tensor<4x128xi32>, tensor<4xi32>
  return %rows, %lens : tensor<4x128xi32>, tensor<4xi32>
}

// -----

// query_start_loc size
func.func @combine_topk_swa(%arg0: tensor<4x8xi32>, %arg1: tensor<4xi32>, %arg2: tensor<2xi32>, %arg3: tensor<2xi32>) -> (tensor<4x128xi32>, tensor<4xi32>) {
  // expected-error @+1 {{'di.combine_topk_swa' op combine_topk_swa: tensor 'query_start_loc' has shape [4], expected [3] (dim 0 differs)}}
  %rows, %lens = di.combine_topk_swa topk_indices(%arg0 : tensor<4x8xi32>) query_start_loc(%arg1 : tensor<4xi32>) seq_lens(%arg2 : tensor<2xi32>) gather_lens(%arg3 : tensor<2xi32>) {M = 40 : i64, N = 32 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<4x128xi32>, tensor<4xi32>
  return %rows, %lens : tensor<4x128xi32>, tensor<4xi32>
}
