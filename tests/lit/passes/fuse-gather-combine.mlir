// RUN: deepinfer-opt %s -split-input-file --di-fuse-gather-combine | FileCheck %s
// di-fuse-gather-combine folds combine_topk_swa into the window gather_kcache whose rows it
// indexes (same seq_lens / gather_lens values, offset = N, M = out's rows), and leaves every
// other pair alone.

// The gather then the combine: one fused op with both ops' operands and attributes, its results
// in place of both ops' results.
// CHECK-LABEL: func.func @gather_then_combine
// CHECK-NOT: di.gather_kcache k_cache
// CHECK-NOT: di.combine_topk_swa
// CHECK: %[[G:[a-z_0-9]+]], %[[R:[a-z_0-9]+]], %[[L:[a-z_0-9]+]] = di.gather_kcache_combine k_cache(%arg0 : tensor<8x1728xui8>) seq_lens(%arg1 : tensor<2xi32>) gather_lens(%arg2 : tensor<2xi32>) block_table(%arg3 : tensor<2x4xi32>) out(%arg4 : tensor<2x40x512xbf16>) topk_indices(%arg5 : tensor<4x8xi32>) query_start_loc(%arg6 : tensor<3xi32>) {N = 32 : i64, block_size = 2 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
// CHECK-NEXT: return %[[G]], %[[R]], %[[L]]
func.func @gather_then_combine(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  %g = di.gather_kcache k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) {block_size = 2 : i64, offset = 32 : i64} -> tensor<2x40x512xbf16>
  %rows, %lens = di.combine_topk_swa topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) {M = 40 : i64, N = 32 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<4x128xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}

// -----

// The combine first: the fused op takes the gather's place (after everything the gather reads).
// CHECK-LABEL: func.func @combine_then_gather
// CHECK-NOT: di.combine_topk_swa
// CHECK: di.gather_kcache_combine
// CHECK-NOT: di.gather_kcache k_cache
func.func @combine_then_gather(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  %rows, %lens = di.combine_topk_swa topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) {M = 40 : i64, N = 32 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<4x128xi32>, tensor<4xi32>
  %g = di.gather_kcache k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) {block_size = 2 : i64, offset = 32 : i64} -> tensor<2x40x512xbf16>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}

// -----

// Two gathers (the compressed rows at offset 0, the window rows at offset N = 32): only the
// window gather is the combine's partner; the compressed gather stays and feeds the fused op.
// CHECK-LABEL: func.func @two_gathers
// CHECK: %[[C:[a-z_0-9]+]] = di.gather_kcache k_cache({{.*}}) {block_size = 2 : i64} -> tensor<2x40x512xbf16>
// CHECK: di.gather_kcache_combine {{.*}} out(%[[C]] : tensor<2x40x512xbf16>)
// CHECK-NOT: di.combine_topk_swa
func.func @two_gathers(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  %c = di.gather_kcache k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) {block_size = 2 : i64, offset = 0 : i64} -> tensor<2x40x512xbf16>
  %g = di.gather_kcache k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%c : tensor<2x40x512xbf16>) {block_size = 2 : i64, offset = 32 : i64} -> tensor<2x40x512xbf16>
  %rows, %lens = di.combine_topk_swa topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) {M = 40 : i64, N = 32 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<4x128xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}

// -----

// Different seq_lens values: the rows would not index the gathered rows.
// CHECK-LABEL: func.func @different_lengths
// CHECK-NOT: di.gather_kcache_combine
// CHECK: di.gather_kcache k_cache
// CHECK-NOT: di.gather_kcache_combine
// CHECK: di.combine_topk_swa
// CHECK-NOT: di.gather_kcache_combine
func.func @different_lengths(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>, %seq2: tensor<2xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  %g = di.gather_kcache k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) {block_size = 2 : i64, offset = 32 : i64} -> tensor<2x40x512xbf16>
  %rows, %lens = di.combine_topk_swa topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) seq_lens(%seq2 : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) {M = 40 : i64, N = 32 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<4x128xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}

// -----

// The gather writes at offset 0, the rows point at N = 32.
// CHECK-LABEL: func.func @offset_not_n
// CHECK-NOT: di.gather_kcache_combine
// CHECK: di.gather_kcache k_cache
// CHECK-NOT: di.gather_kcache_combine
// CHECK: di.combine_topk_swa
// CHECK-NOT: di.gather_kcache_combine
func.func @offset_not_n(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  %g = di.gather_kcache k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) {block_size = 2 : i64, offset = 0 : i64} -> tensor<2x40x512xbf16>
  %rows, %lens = di.combine_topk_swa topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) {M = 40 : i64, N = 32 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<4x128xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}

// -----

// M = 48 is not out's 40 rows per request.
// CHECK-LABEL: func.func @m_not_out_rows
// CHECK-NOT: di.gather_kcache_combine
// CHECK: di.gather_kcache k_cache
// CHECK-NOT: di.gather_kcache_combine
// CHECK: di.combine_topk_swa
// CHECK-NOT: di.gather_kcache_combine
func.func @m_not_out_rows(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  %g = di.gather_kcache k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) {block_size = 2 : i64, offset = 32 : i64} -> tensor<2x40x512xbf16>
  %rows, %lens = di.combine_topk_swa topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) {M = 48 : i64, N = 32 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<4x128xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}

// -----

// The gathered rows are used before the combine: the gather cannot move after it.
// CHECK-LABEL: func.func @result_used_between
// CHECK-NOT: di.gather_kcache_combine
// CHECK: di.gather_kcache k_cache
// CHECK-NOT: di.gather_kcache_combine
// CHECK: di.combine_topk_swa
// CHECK-NOT: di.gather_kcache_combine
func.func private @use(tensor<2x40x512xbf16>)
func.func @result_used_between(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  %g = di.gather_kcache k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) {block_size = 2 : i64, offset = 32 : i64} -> tensor<2x40x512xbf16>
  func.call @use(%g) : (tensor<2x40x512xbf16>) -> ()
  %rows, %lens = di.combine_topk_swa topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) {M = 40 : i64, N = 32 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<4x128xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}

// -----

// Another op reads the buffer the gather updates in place, between the two.
// CHECK-LABEL: func.func @out_read_between
// CHECK-NOT: di.gather_kcache_combine
// CHECK: di.gather_kcache k_cache
// CHECK-NOT: di.gather_kcache_combine
// CHECK: di.combine_topk_swa
// CHECK-NOT: di.gather_kcache_combine
func.func private @use(tensor<2x40x512xbf16>)
func.func @out_read_between(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  %g = di.gather_kcache k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) {block_size = 2 : i64, offset = 32 : i64} -> tensor<2x40x512xbf16>
  func.call @use(%out) : (tensor<2x40x512xbf16>) -> ()
  %rows, %lens = di.combine_topk_swa topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) {M = 40 : i64, N = 32 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<4x128xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}

// -----

// An op with a di.config chosen for it alone keeps it.
// CHECK-LABEL: func.func @configured
// CHECK-NOT: di.gather_kcache_combine
// CHECK: di.gather_kcache k_cache
// CHECK-NOT: di.gather_kcache_combine
// CHECK: di.combine_topk_swa
// CHECK-NOT: di.gather_kcache_combine
func.func @configured(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  %g = di.gather_kcache k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) {block_size = 2 : i64, offset = 32 : i64, di.config = #di.config<knobs = {ctas_per_sm = 1 : i64, grid_ctas = 1 : i64, tokens_per_warp = 1 : i64, warps = 4 : i64}, smem = 0, threads = 128, ctas_per_sm = 1, regs = 32>} -> tensor<2x40x512xbf16>
  %rows, %lens = di.combine_topk_swa topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) {M = 40 : i64, N = 32 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<4x128xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}

// -----

// A gather without gather_lens (it gathers seq_lens rows): not the combine's window.
// CHECK-LABEL: func.func @no_gather_lens
// CHECK-NOT: di.gather_kcache_combine
// CHECK: di.combine_topk_swa
func.func @no_gather_lens(%kc: tensor<8x1728xui8>, %seq: tensor<2xi32>, %gl: tensor<2xi32>, %bt: tensor<2x4xi32>, %out: tensor<2x40x512xbf16>, %tk: tensor<4x8xi32>, %qsl: tensor<3xi32>) -> (tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>) {
  %g = di.gather_kcache k_cache(%kc : tensor<8x1728xui8>) seq_lens(%seq : tensor<2xi32>) block_table(%bt : tensor<2x4xi32>) out(%out : tensor<2x40x512xbf16>) {block_size = 2 : i64, offset = 32 : i64} -> tensor<2x40x512xbf16>
  %rows, %lens = di.combine_topk_swa topk_indices(%tk : tensor<4x8xi32>) query_start_loc(%qsl : tensor<3xi32>) seq_lens(%seq : tensor<2xi32>) gather_lens(%gl : tensor<2xi32>) {M = 40 : i64, N = 32 : i64, ratio = 2 : i64, topk = 8 : i64, window = 4 : i64} -> tensor<4x128xi32>, tensor<4xi32>
  return %g, %rows, %lens : tensor<2x40x512xbf16>, tensor<4x128xi32>, tensor<4xi32>
}
