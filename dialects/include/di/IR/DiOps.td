#ifndef DI_OPS
#define DI_OPS

include "di/IR/DiDialect.td"
include "di/IR/DiAttrs.td"
include "di/IR/DiInterfaces.td"

// Element types of spec/ops.md: bf16, f32, i32, i64 and raw fp8 cache bytes as ui8.
def Di_BF16Tensor : RankedTensorOf<[BF16]>;
def Di_F32Tensor : RankedTensorOf<[F32]>;
def Di_I32Tensor : RankedTensorOf<[I32]>;
def Di_I64Tensor : RankedTensorOf<[I64]>;
def Di_U8Tensor : RankedTensorOf<[UI8]>;

def Di_KvQuantInsertOp : Di_Op<"kv_quant_insert", [DeclareOpInterfaceMethods<Di_KernelOpInterface>]> {
  let summary = "Write tokens into the fp8_ds_mla KV cache (ops.md §2)";
  let arguments = (ins
    Di_BF16Tensor:$k,
    Di_I64Tensor:$slot_mapping,
    Di_U8Tensor:$k_cache,
    I64Attr:$block_size,
    DefaultValuedAttr<StrAttr, "\"fp8_ds_mla\"">:$cache_format
  );
  let results = (outs
    Di_U8Tensor:$k_cache_out
  );
  let assemblyFormat = [{
    `k` `(` $k `:` type($k) `)`
    `slot_mapping` `(` $slot_mapping `:` type($slot_mapping) `)`
    `k_cache` `(` $k_cache `:` type($k_cache) `)`
    attr-dict `->` type(results)
  }];
  let hasVerifier = 1;
}

def Di_GatherKcacheOp : Di_Op<"gather_kcache", [DeclareOpInterfaceMethods<Di_KernelOpInterface>]> {
  let summary = "Dequantize and gather KV rows into a bf16 workspace (ops.md §3)";
  let arguments = (ins
    Di_U8Tensor:$k_cache,
    Di_I32Tensor:$seq_lens,
    Optional<Di_I32Tensor>:$gather_lens,
    Di_I32Tensor:$block_table,
    Di_BF16Tensor:$out,
    I64Attr:$block_size,
    DefaultValuedAttr<I64Attr, "0">:$offset,
    DefaultValuedAttr<StrAttr, "\"fp8_ds_mla\"">:$cache_format
  );
  let results = (outs
    Di_BF16Tensor:$out_updated
  );
  let assemblyFormat = [{
    `k_cache` `(` $k_cache `:` type($k_cache) `)`
    `seq_lens` `(` $seq_lens `:` type($seq_lens) `)`
    (`gather_lens` `(` $gather_lens^ `:` type($gather_lens) `)`)?
    `block_table` `(` $block_table `:` type($block_table) `)`
    `out` `(` $out `:` type($out) `)`
    attr-dict `->` type(results)
  }];
  let hasVerifier = 1;
}

def Di_CombineTopkSwaOp : Di_Op<"combine_topk_swa", [DeclareOpInterfaceMethods<Di_KernelOpInterface>]> {
  let summary = "Build top-k + sliding-window index rows (ops.md §4)";
  let arguments = (ins
    Di_I32Tensor:$topk_indices,
    Di_I32Tensor:$query_start_loc,
    Di_I32Tensor:$seq_lens,
    Di_I32Tensor:$gather_lens,
    I64Attr:$window,
    I64Attr:$ratio,
    I64Attr:$topk,
    I64Attr:$M,
    I64Attr:$N
  );
  let results = (outs
    Di_I32Tensor:$rows,
    Di_I32Tensor:$lens
  );
  let assemblyFormat = [{
    `topk_indices` `(` $topk_indices `:` type($topk_indices) `)`
    `query_start_loc` `(` $query_start_loc `:` type($query_start_loc) `)`
    `seq_lens` `(` $seq_lens `:` type($seq_lens) `)`
    `gather_lens` `(` $gather_lens `:` type($gather_lens) `)`
    attr-dict `->` type(results)
  }];
  let hasVerifier = 1;
}

def Di_SparseMlaPrefillOp : Di_Op<"sparse_mla_prefill", [DeclareOpInterfaceMethods<Di_KernelOpInterface>]> {
  let summary = "Sparse MQA attention over gathered bf16 KV (ops.md §5)";
  let arguments = (ins
    Di_BF16Tensor:$q,
    Di_BF16Tensor:$kv,
    Di_I32Tensor:$indices,
    Di_I32Tensor:$lens,
    Di_F32Tensor:$attn_sink,
    F32Attr:$sm_scale,
    DefaultValuedAttr<I64Attr, "448">:$nope_dim,
    DefaultValuedAttr<I64Attr, "64">:$rope_dim
  );
  let results = (outs
    Di_BF16Tensor:$out,
    Di_F32Tensor:$lse
  );
  let assemblyFormat = [{
    `q` `(` $q `:` type($q) `)`
    `kv` `(` $kv `:` type($kv) `)`
    `indices` `(` $indices `:` type($indices) `)`
    `lens` `(` $lens `:` type($lens) `)`
    `attn_sink` `(` $attn_sink `:` type($attn_sink) `)`
    attr-dict `->` type(results)
  }];
  let hasVerifier = 1;
}

def Di_SparseMlaDecodeOp : Di_Op<"sparse_mla_decode", [AttrSizedOperandSegments, DeclareOpInterfaceMethods<Di_KernelOpInterface>]> {
  let summary = "Sparse MQA decode attention over fp8 caches (ops.md §6)";
  let arguments = (ins
    Di_BF16Tensor:$q,
    Di_U8Tensor:$swa_cache,
    Di_I32Tensor:$swa_indices,
    Di_I32Tensor:$swa_lens,
    Optional<Di_U8Tensor>:$extra_cache,
    Optional<Di_I32Tensor>:$extra_indices,
    Optional<Di_I32Tensor>:$extra_lens,
    Di_F32Tensor:$attn_sink,
    F32Attr:$sm_scale,
    I64Attr:$swa_block_size,
    DefaultValuedAttr<I64Attr, "0">:$extra_block_size,
    DefaultValuedAttr<I64Attr, "448">:$nope_dim,
    DefaultValuedAttr<I64Attr, "64">:$rope_dim,
    DefaultValuedAttr<StrAttr, "\"fp8_ds_mla\"">:$cache_format
  );
  let results = (outs
    Di_BF16Tensor:$out,
    Di_F32Tensor:$lse
  );
  let assemblyFormat = [{
    `q` `(` $q `:` type($q) `)`
    `swa_cache` `(` $swa_cache `:` type($swa_cache) `)`
    `swa_indices` `(` $swa_indices `:` type($swa_indices) `)`
    `swa_lens` `(` $swa_lens `:` type($swa_lens) `)`
    (`extra_cache` `(` $extra_cache^ `:` type($extra_cache) `)`)?
    (`extra_indices` `(` $extra_indices^ `:` type($extra_indices) `)`)?
    (`extra_lens` `(` $extra_lens^ `:` type($extra_lens) `)`)?
    `attn_sink` `(` $attn_sink `:` type($attn_sink) `)`
    attr-dict `->` type(results)
  }];
  let hasVerifier = 1;
}

def Di_IndexerLogitsOp : Di_Op<"indexer_logits", [DeclareOpInterfaceMethods<Di_KernelOpInterface>]> {
  let summary = "Lightning-indexer scores over the fp8 index-key cache (ops.md §7)";
  let arguments = (ins
    Di_BF16Tensor:$q,
    Di_F32Tensor:$weights,
    Di_U8Tensor:$k_cache,
    Di_I32Tensor:$block_table,
    Di_I32Tensor:$token_to_req,
    Di_I32Tensor:$visible,
    I64Attr:$block_size
  );
  let results = (outs
    Di_F32Tensor:$scores
  );
  let assemblyFormat = [{
    `q` `(` $q `:` type($q) `)`
    `weights` `(` $weights `:` type($weights) `)`
    `k_cache` `(` $k_cache `:` type($k_cache) `)`
    `block_table` `(` $block_table `:` type($block_table) `)`
    `token_to_req` `(` $token_to_req `:` type($token_to_req) `)`
    `visible` `(` $visible `:` type($visible) `)`
    attr-dict `->` type(results)
  }];
  let hasVerifier = 1;
}

def Di_TopkOp : Di_Op<"topk", [DeclareOpInterfaceMethods<Di_KernelOpInterface>]> {
  let summary = "Per-row top-k indices, sorted ascending, -1 padded (ops.md §7)";
  let arguments = (ins
    Di_F32Tensor:$scores,
    Di_I32Tensor:$lens,
    I64Attr:$k
  );
  let results = (outs
    Di_I32Tensor:$indices
  );
  let assemblyFormat = [{
    `scores` `(` $scores `:` type($scores) `)`
    `lens` `(` $lens `:` type($lens) `)`
    attr-dict `->` type(results)
  }];
  let hasVerifier = 1;
}

def Di_MhcPreOp : Di_Op<"mhc_pre", [DeclareOpInterfaceMethods<Di_KernelOpInterface>]> {
  let summary = "mHC pre step, delayed form: mixes of x, collapse with pre_in, RMSNorm (ops.md §8)";
  let arguments = (ins
    Di_BF16Tensor:$x,
    Di_F32Tensor:$fn,
    Di_F32Tensor:$scale,
    Di_F32Tensor:$base,
    Di_F32Tensor:$pre_in,
    Di_BF16Tensor:$norm_weight,
    F32Attr:$rms_eps,
    F32Attr:$hc_eps,
    I64Attr:$sinkhorn_iters,
    F32Attr:$norm_eps
  );
  let results = (outs
    Di_BF16Tensor:$layer_input,
    Di_F32Tensor:$pre,
    Di_F32Tensor:$post,
    Di_F32Tensor:$comb
  );
  let assemblyFormat = [{
    `x` `(` $x `:` type($x) `)`
    `fn` `(` $fn `:` type($fn) `)`
    `scale` `(` $scale `:` type($scale) `)`
    `base` `(` $base `:` type($base) `)`
    `pre_in` `(` $pre_in `:` type($pre_in) `)`
    `norm_weight` `(` $norm_weight `:` type($norm_weight) `)`
    attr-dict `->` type(results)
  }];
  let hasVerifier = 1;
}

def Di_MhcPostOp : Di_Op<"mhc_post", [DeclareOpInterfaceMethods<Di_KernelOpInterface>]> {
  let summary = "mHC post step; also emits the next pre's sqrsum (ops.md §8)";
  let arguments = (ins
    Di_BF16Tensor:$f_out,
    Di_BF16Tensor:$residual,
    Di_F32Tensor:$post,
    Di_F32Tensor:$comb
  );
  let results = (outs
    Di_BF16Tensor:$x,
    Di_F32Tensor:$sqrsum
  );
  let assemblyFormat = [{
    `f_out` `(` $f_out `:` type($f_out) `)`
    `residual` `(` $residual `:` type($residual) `)`
    `post` `(` $post `:` type($post) `)`
    `comb` `(` $comb `:` type($comb) `)`
    attr-dict `->` type(results)
  }];
  let hasVerifier = 1;
}

def Di_MhcFusedPostPreOp : Di_Op<"mhc_fused_post_pre", [DeclareOpInterfaceMethods<Di_KernelOpInterface>]> {
  let summary = "mHC post of one sublayer fused with the delayed pre of the next (ops.md §8)";
  let arguments = (ins
    Di_BF16Tensor:$f_out,
    Di_BF16Tensor:$residual,
    Di_F32Tensor:$post,
    Di_F32Tensor:$comb,
    Di_F32Tensor:$fn,
    Di_F32Tensor:$scale,
    Di_F32Tensor:$base,
    Di_F32Tensor:$pre_in,
    Di_BF16Tensor:$norm_weight,
    F32Attr:$rms_eps,
    F32Attr:$hc_eps,
    I64Attr:$sinkhorn_iters,
    F32Attr:$norm_eps
  );
  let results = (outs
    Di_BF16Tensor:$x,
    Di_BF16Tensor:$layer_input,
    Di_F32Tensor:$next_pre,
    Di_F32Tensor:$next_post,
    Di_F32Tensor:$next_comb
  );
  let assemblyFormat = [{
    `f_out` `(` $f_out `:` type($f_out) `)`
    `residual` `(` $residual `:` type($residual) `)`
    `post` `(` $post `:` type($post) `)`
    `comb` `(` $comb `:` type($comb) `)`
    `fn` `(` $fn `:` type($fn) `)`
    `scale` `(` $scale `:` type($scale) `)`
    `base` `(` $base `:` type($base) `)`
    `pre_in` `(` $pre_in `:` type($pre_in) `)`
    `norm_weight` `(` $norm_weight `:` type($norm_weight) `)`
    attr-dict `->` type(results)
  }];
  let hasVerifier = 1;
}

def Di_MhcCollapseOp : Di_Op<"mhc_collapse", [DeclareOpInterfaceMethods<Di_KernelOpInterface>]> {
  let summary = "Collapse the 4 residual streams with a pre-mix (ops.md §8)";
  let arguments = (ins
    Di_BF16Tensor:$x,
    Di_F32Tensor:$pre
  );
  let results = (outs
    Di_BF16Tensor:$h
  );
  let assemblyFormat = [{
    `x` `(` $x `:` type($x) `)`
    `pre` `(` $pre `:` type($pre) `)`
    attr-dict `->` type(results)
  }];
  let hasVerifier = 1;
}

def Di_WeightGemmOp : Di_Op<"weight_gemm", [AttrSizedOperandSegments, DeclareOpInterfaceMethods<Di_KernelOpInterface>]> {
  let summary = "y = x . dequant(w)^T over fp8/fp4 checkpoint weights, with fused epilogues";
  let description = [{
    `x` [M, K] bf16; `w` holds the checkpoint's bytes (spec/model.md §3): `weight_bits = 8`:
    e4m3 [N, K] with UE8M0 `w_scale` [ceil(N/32), ceil(K/32)] (one per 32x32 block);
    `weight_bits = 4`: e2m1 [N, K/2] (low nibble = even column) with `w_scale` [N, K/32].
    Every weight is dequantized to the correctly rounded bf16 of code * 2^(s-127) (exact for
    the scale bytes checkpoints use) and the products are accumulated in fp32.
    `groups = G`: x is viewed [M, G, K/G] and w [G * N/G, K/G]; output column n reads group
    n / (N/G) (wo_a). `epilogue`: 0 = f32 `y`, 1 = bf16 `y`, 2 = SwiGLU of `w` (gate) and
    `w_up` (up): y = bf16(silu(min(g, limit)) * clamp(v, -limit, limit)).
  }];
  let arguments = (ins
    Di_BF16Tensor:$x,
    Di_U8Tensor:$w,
    Di_U8Tensor:$w_scale,
    Optional<Di_U8Tensor>:$w_up,
    Optional<Di_U8Tensor>:$w_up_scale,
    I64Attr:$weight_bits,
    DefaultValuedAttr<I64Attr, "1">:$groups,
    DefaultValuedAttr<I64Attr, "0">:$epilogue,
    DefaultValuedAttr<F32Attr, "10.0">:$swiglu_limit
  );
  let results = (outs
    RankedTensorOf<[F32, BF16]>:$y
  );
  let assemblyFormat = [{
    `x` `(` $x `:` type($x) `)`
    `w` `(` $w `:` type($w) `)`
    `w_scale` `(` $w_scale `:` type($w_scale) `)`
    (`w_up` `(` $w_up^ `:` type($w_up) `)`)?
    (`w_up_scale` `(` $w_up_scale^ `:` type($w_up_scale) `)`)?
    attr-dict `->` type(results)
  }];
  let hasVerifier = 1;
}

def Di_MoeExpertsOp : Di_Op<"moe_experts", [DeclareOpInterfaceMethods<Di_KernelOpInterface>]> {
  let summary = "Routed experts of the MoE sublayer over fp4 weights, grouped on the device (model.md §7)";
  let description = [{
    For every token t and rank r with e = ids[t, r] in [0, E):
    g = x[t] . w1[e]^T, v = x[t] . w3[e]^T (fp32), h = bf16(weights[t, r] * silu(min(g, limit)) *
    clamp(v, -limit, limit)), y[t, r] = h . w2[e]^T (fp32); y[t, r] = 0 for any other id.
    Experts are e2m1 with UE8M0 scales per 1x32: w1/w3 [E, I, C/2] + [E, I, C/32], w2
    [E, C, I/2] + [E, C, I/32]. Each y row is written once (no atomics): the result does not
    depend on scheduling; the caller sums the ranks in order (CpuLayersMoe.cpp).
  }];
  let arguments = (ins
    Di_BF16Tensor:$x,
    Di_I32Tensor:$ids,
    Di_F32Tensor:$weights,
    Di_U8Tensor:$w1,
    Di_U8Tensor:$w1_scale,
    Di_U8Tensor:$w3,
    Di_U8Tensor:$w3_scale,
    Di_U8Tensor:$w2,
    Di_U8Tensor:$w2_scale,
    DefaultValuedAttr<F32Attr, "10.0">:$swiglu_limit
  );
  let results = (outs
    Di_F32Tensor:$y
  );
  let assemblyFormat = [{
    `x` `(` $x `:` type($x) `)`
    `ids` `(` $ids `:` type($ids) `)`
    `weights` `(` $weights `:` type($weights) `)`
    `w1` `(` $w1 `:` type($w1) `)`
    `w1_scale` `(` $w1_scale `:` type($w1_scale) `)`
    `w3` `(` $w3 `:` type($w3) `)`
    `w3_scale` `(` $w3_scale `:` type($w3_scale) `)`
    `w2` `(` $w2 `:` type($w2) `)`
    `w2_scale` `(` $w2_scale `:` type($w2_scale) `)`
    attr-dict `->` type(results)
  }];
  let hasVerifier = 1;
}

#endif // DI_OPS
