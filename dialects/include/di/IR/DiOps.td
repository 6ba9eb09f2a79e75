#ifndef DI_OPS
#define DI_OPS

include "di/IR/DiDialect.td"
include "di/IR/DiAttrs.td"
include "di/IR/DiInterfaces.td"

// A tensor operand or result of a kernel op: its element type (docs/ops.md: bf16, f32, i32, i64
// and raw fp8 cache bytes as ui8) and the ranks it may have. `diDType` is the element type's
// name in deepinfer::DType: di-tblgen writes the op signatures the runtime reads (operand names,
// dtypes, ranks, attributes and defaults) from these definitions, so this file is the only
// description of an op.
// Di_TensorOf allows several element types, for a result whose type the op's attributes choose
// (weight_gemm's `y`: f32 or bf16 by its epilogue): the family's outputs() says which one, and
// the signature carries `dtype`, the first.
class Di_TensorOf<list<Type> elts, string dtype, list<int> ranks> : TensorRankOf<elts, ranks> {
  string diDType = dtype;
  list<int> diRanks = ranks;
}
class Di_Tensor<Type elt, string dtype, list<int> ranks> : Di_TensorOf<[elt], dtype, ranks>;
class Di_BF16<list<int> ranks> : Di_Tensor<BF16, "BF16", ranks>;
class Di_F32<list<int> ranks> : Di_Tensor<F32, "F32", ranks>;
class Di_I32<list<int> ranks> : Di_Tensor<I32, "I32", ranks>;
class Di_I64<list<int> ranks> : Di_Tensor<I64, "I64", ranks>;
class Di_U8<list<int> ranks> : Di_Tensor<UI8, "U8", ranks>;

// A result that is an operand's buffer updated in place: at run time both are one tensor under
// the operand's canonical name (docs/ops.md §11).
class Di_UpdatesInPlace<string resultName, string operandName> {
  string result = resultName;
  string operand = operandName;
}

// A `di` op that lowers to one generated kernel (its family in compiler/kernels).
class Di_KernelOp<string mnemonic, list<Trait> traits = [], list<Di_UpdatesInPlace> inPlace = []>
    : Di_Op<mnemonic, !listconcat(traits, [DeclareOpInterfaceMethods<Di_KernelOpInterface>])> {
  list<Di_UpdatesInPlace> updatesInPlace = inPlace;
}

def Di_KvQuantInsertOp : Di_KernelOp<"kv_quant_insert", [],
    [Di_UpdatesInPlace<"k_cache_out", "k_cache">]> {
  let summary = "Write tokens into the fp8_ds_mla KV cache (docs/ops.md §2)";
  let arguments = (ins
    Di_BF16<[2]>:$k,
    Di_I64<[1]>:$slot_mapping,
    Di_U8<[2]>:$k_cache,
    I64Attr:$block_size,
    DefaultValuedAttr<StrAttr, "\"fp8_ds_mla\"">:$cache_format
  );
  let results = (outs
    Di_U8<[2]>:$k_cache_out
  );
  let assemblyFormat = [{
    `k` `(` $k `:` type($k) `)`
    `slot_mapping` `(` $slot_mapping `:` type($slot_mapping) `)`
    `k_cache` `(` $k_cache `:` type($k_cache) `)`
    attr-dict `->` type(results)
  }];
}

def Di_GatherKcacheOp : Di_KernelOp<"gather_kcache", [],
    [Di_UpdatesInPlace<"out_updated", "out">]> {
  let summary = "Dequantize and gather KV rows into a bf16 workspace (docs/ops.md §3)";
  let arguments = (ins
    Di_U8<[2]>:$k_cache,
    Di_I32<[1]>:$seq_lens,
    Optional<Di_I32<[1]>>:$gather_lens,
    Di_I32<[2]>:$block_table,
    Di_BF16<[3]>:$out,
    I64Attr:$block_size,
    DefaultValuedAttr<I64Attr, "0">:$offset,
    DefaultValuedAttr<StrAttr, "\"fp8_ds_mla\"">:$cache_format
  );
  let results = (outs
    Di_BF16<[3]>:$out_updated
  );
  let assemblyFormat = [{
    `k_cache` `(` $k_cache `:` type($k_cache) `)`
    `seq_lens` `(` $seq_lens `:` type($seq_lens) `)`
    (`gather_lens` `(` $gather_lens^ `:` type($gather_lens) `)`)?
    `block_table` `(` $block_table `:` type($block_table) `)`
    `out` `(` $out `:` type($out) `)`
    attr-dict `->` type(results)
  }];
}

def Di_CombineTopkSwaOp : Di_KernelOp<"combine_topk_swa"> {
  let summary = "Build top-k + sliding-window index rows (docs/ops.md §4)";
  let arguments = (ins
    Di_I32<[2]>:$topk_indices,
    Di_I32<[1]>:$query_start_loc,
    Di_I32<[1]>:$seq_lens,
    Di_I32<[1]>:$gather_lens,
    I64Attr:$window,
    I64Attr:$ratio,
    I64Attr:$topk,
    I64Attr:$M,
    I64Attr:$N
  );
  let results = (outs
    Di_I32<[2]>:$rows,
    Di_I32<[1]>:$lens
  );
  let assemblyFormat = [{
    `topk_indices` `(` $topk_indices `:` type($topk_indices) `)`
    `query_start_loc` `(` $query_start_loc `:` type($query_start_loc) `)`
    `seq_lens` `(` $seq_lens `:` type($seq_lens) `)`
    `gather_lens` `(` $gather_lens `:` type($gather_lens) `)`
    attr-dict `->` type(results)
  }];
}

// gather_kcache (the window rows, at offset N) and combine_topk_swa over the same lengths in one
// launch; di-fuse-gather-combine builds it from the pair.
def Di_GatherKcacheCombineOp : Di_KernelOp<"gather_kcache_combine", [],
    [Di_UpdatesInPlace<"out_updated", "out">]> {
  let summary = "Gather the window rows and build the index rows into them, in one launch (docs/ops.md §4a)";
  let arguments = (ins
    Di_U8<[2]>:$k_cache,
    Di_I32<[1]>:$seq_lens,
    Di_I32<[1]>:$gather_lens,
    Di_I32<[2]>:$block_table,
    Di_BF16<[3]>:$out,
    Di_I32<[2]>:$topk_indices,
    Di_I32<[1]>:$query_start_loc,
    I64Attr:$block_size,
    I64Attr:$window,
    I64Attr:$ratio,
    I64Attr:$topk,
    I64Attr:$N
  );
  let results = (outs
    Di_BF16<[3]>:$out_updated,
    Di_I32<[2]>:$rows,
    Di_I32<[1]>:$lens
  );
  let assemblyFormat = [{
    `k_cache` `(` $k_cache `:` type($k_cache) `)`
    `seq_lens` `(` $seq_lens `:` type($seq_lens) `)`
    `gather_lens` `(` $gather_lens `:` type($gather_lens) `)`
    `block_table` `(` $block_table `:` type($block_table) `)`
    `out` `(` $out `:` type($out) `)`
    `topk_indices` `(` $topk_indices `:` type($topk_indices) `)`
    `query_start_loc` `(` $query_start_loc `:` type($query_start_loc) `)`
    attr-dict `->` type(results)
  }];
}

def Di_SparseMlaPrefillOp : Di_KernelOp<"sparse_mla_prefill"> {
  let summary = "Sparse MQA attention over gathered bf16 KV (docs/ops.md §5)";
  let arguments = (ins
    Di_BF16<[3]>:$q,
    Di_BF16<[2]>:$kv,
    Di_I32<[2]>:$indices,
    Di_I32<[1]>:$lens,
    Di_F32<[1]>:$attn_sink,
    DefaultValuedAttr<F32Attr, "0.04419417382415922">:$sm_scale,
    DefaultValuedAttr<I64Attr, "448">:$nope_dim,
    DefaultValuedAttr<I64Attr, "64">:$rope_dim
  );
  let results = (outs
    Di_BF16<[3]>:$out,
    Di_F32<[2]>:$lse
  );
  let assemblyFormat = [{
    `q` `(` $q `:` type($q) `)`
    `kv` `(` $kv `:` type($kv) `)`
    `indices` `(` $indices `:` type($indices) `)`
    `lens` `(` $lens `:` type($lens) `)`
    `attn_sink` `(` $attn_sink `:` type($attn_sink) `)`
    attr-dict `->` type(results)
  }];
}

def Di_SparseMlaDecodeOp : Di_KernelOp<"sparse_mla_decode", [AttrSizedOperandSegments]> {
  let summary = "Sparse MQA decode attention over fp8 caches (docs/ops.md §6)";
  let arguments = (ins
    Di_BF16<[4]>:$q,
    Di_U8<[2]>:$swa_cache,
    Di_I32<[3]>:$swa_indices,
    Di_I32<[1, 2]>:$swa_lens,
    Optional<Di_U8<[2]>>:$extra_cache,
    Optional<Di_I32<[3]>>:$extra_indices,
    Optional<Di_I32<[1, 2]>>:$extra_lens,
    Di_F32<[1]>:$attn_sink,
    DefaultValuedAttr<F32Attr, "0.04419417382415922">:$sm_scale,
    I64Attr:$swa_block_size,
    DefaultValuedAttr<I64Attr, "0">:$extra_block_size,
    DefaultValuedAttr<I64Attr, "448">:$nope_dim,
    DefaultValuedAttr<I64Attr, "64">:$rope_dim,
    DefaultValuedAttr<StrAttr, "\"fp8_ds_mla\"">:$cache_format
  );
  let results = (outs
    Di_BF16<[4]>:$out,
    Di_F32<[3]>:$lse
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
}

def Di_IndexerLogitsOp : Di_KernelOp<"indexer_logits"> {
  let summary = "Lightning-indexer scores over the fp8 index-key cache (docs/ops.md §7)";
  let arguments = (ins
    Di_BF16<[3]>:$q,
    Di_F32<[2]>:$weights,
    Di_U8<[2]>:$k_cache,
    Di_I32<[2]>:$block_table,
    Di_I32<[1]>:$token_to_req,
    Di_I32<[1]>:$visible,
    I64Attr:$block_size
  );
  let results = (outs
    Di_F32<[2]>:$scores
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
}

def Di_TopkOp : Di_KernelOp<"topk"> {
  let summary = "Per-row top-k indices, sorted ascending, -1 padded (docs/ops.md §7)";
  let arguments = (ins
    Di_F32<[2]>:$scores,
    Di_I32<[1]>:$lens,
    I64Attr:$k
  );
  let results = (outs
    Di_I32<[2]>:$indices
  );
  let assemblyFormat = [{
    `scores` `(` $scores `:` type($scores) `)`
    `lens` `(` $lens `:` type($lens) `)`
    attr-dict `->` type(results)
  }];
}

def Di_MhcPreOp : Di_KernelOp<"mhc_pre"> {
  let summary = "mHC pre step, delayed form: mixes of x, collapse with pre_in, RMSNorm (docs/ops.md §8)";
  let arguments = (ins
    Di_BF16<[3]>:$x,
    Di_F32<[2]>:$fn,
    Di_F32<[1]>:$scale,
    Di_F32<[1]>:$base,
    Di_F32<[2]>:$pre_in,
    Di_BF16<[1]>:$norm_weight,
    DefaultValuedAttr<F32Attr, "1e-20">:$rms_eps,
    DefaultValuedAttr<F32Attr, "1e-6">:$hc_eps,
    DefaultValuedAttr<I64Attr, "20">:$sinkhorn_iters,
    DefaultValuedAttr<F32Attr, "1e-20">:$norm_eps
  );
  let results = (outs
    Di_BF16<[2]>:$layer_input,
    Di_F32<[2]>:$pre,
    Di_F32<[2]>:$post,
    Di_F32<[3]>:$comb
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
}

def Di_MhcPostOp : Di_KernelOp<"mhc_post"> {
  let summary = "mHC post step; also emits the next pre's sqrsum (docs/ops.md §8)";
  let arguments = (ins
    Di_BF16<[2]>:$f_out,
    Di_BF16<[3]>:$residual,
    Di_F32<[2]>:$post,
    Di_F32<[3]>:$comb
  );
  let results = (outs
    Di_BF16<[3]>:$x,
    Di_F32<[1]>:$sqrsum
  );
  let assemblyFormat = [{
    `f_out` `(` $f_out `:` type($f_out) `)`
    `residual` `(` $residual `:` type($residual) `)`
    `post` `(` $post `:` type($post) `)`
    `comb` `(` $comb `:` type($comb) `)`
    attr-dict `->` type(results)
  }];
}

def Di_MhcFusedPostPreOp : Di_KernelOp<"mhc_fused_post_pre", [],
    [Di_UpdatesInPlace<"next_post", "post">, Di_UpdatesInPlace<"next_comb", "comb">]> {
  let summary = "mHC post of one sublayer fused with the delayed pre of the next (docs/ops.md §8)";
  let arguments = (ins
    Di_BF16<[2]>:$f_out,
    Di_BF16<[3]>:$residual,
    Di_F32<[2]>:$post,
    Di_F32<[3]>:$comb,
    Di_F32<[2]>:$fn,
    Di_F32<[1]>:$scale,
    Di_F32<[1]>:$base,
    Di_F32<[2]>:$pre_in,
    Di_BF16<[1]>:$norm_weight,
    DefaultValuedAttr<F32Attr, "1e-20">:$rms_eps,
    DefaultValuedAttr<F32Attr, "1e-6">:$hc_eps,
    DefaultValuedAttr<I64Attr, "20">:$sinkhorn_iters,
    DefaultValuedAttr<F32Attr, "1e-20">:$norm_eps
  );
  let results = (outs
    Di_BF16<[3]>:$x,
    Di_BF16<[2]>:$layer_input,
    Di_F32<[2]>:$pre,
    Di_F32<[2]>:$next_post,
    Di_F32<[3]>:$next_comb
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
}

def Di_MhcCollapseOp : Di_KernelOp<"mhc_collapse"> {
  let summary = "Collapse the 4 residual streams with a pre-mix (docs/ops.md §8)";
  let arguments = (ins
    Di_BF16<[3]>:$x,
    Di_F32<[2]>:$pre
  );
  let results = (outs
    Di_BF16<[2]>:$h
  );
  let assemblyFormat = [{
    `x` `(` $x `:` type($x) `)`
    `pre` `(` $pre `:` type($pre) `)`
    attr-dict `->` type(results)
  }];
}

def Di_WeightGemmOp : Di_KernelOp<"weight_gemm", [AttrSizedOperandSegments]> {
  let summary = "y = x . dequant(w)^T over fp8/fp4 checkpoint weights, with fused epilogues";
  let description = [{
    `x` [M, K] bf16; `w` holds the checkpoint's bytes (docs/model.md §3): `weight_bits = 8`:
    e4m3 [N, K] with UE8M0 `w_scale` [ceil(N/32), ceil(K/32)] (one per 32x32 block);
    `weight_bits = 4`: e2m1 [N, K/2] (low nibble = even column) with `w_scale` [N, K/32].
    Every weight is dequantized to the correctly rounded bf16 of code * 2^(s-127) (exact for
    the scale bytes checkpoints use) and the products are accumulated in fp32.
    `groups = G`: x is viewed [M, G, K/G] and w [G * N/G, K/G]; output column n reads group
    n / (N/G) (wo_a). `epilogue`: 0 = f32 `y`, 1 = bf16 `y`, 2 = SwiGLU of `w` (gate) and
    `w_up` (up): y = bf16(silu(min(g, limit)) * clamp(v, -limit, limit)).
  }];
  let arguments = (ins
    Di_BF16<[2]>:$x,
    Di_U8<[2]>:$w,
    Di_U8<[2]>:$w_scale,
    Optional<Di_U8<[2]>>:$w_up,
    Optional<Di_U8<[2]>>:$w_up_scale,
    I64Attr:$weight_bits,
    DefaultValuedAttr<I64Attr, "1">:$groups,
    DefaultValuedAttr<I64Attr, "0">:$epilogue,
    DefaultValuedAttr<F32Attr, "10.0">:$swiglu_limit
  );
  let results = (outs
    Di_TensorOf<[F32, BF16], "F32", [2]>:$y
  );
  let assemblyFormat = [{
    `x` `(` $x `:` type($x) `)`
    `w` `(` $w `:` type($w) `)`
    `w_scale` `(` $w_scale `:` type($w_scale) `)`
    (`w_up` `(` $w_up^ `:` type($w_up) `)`)?
    (`w_up_scale` `(` $w_up_scale^ `:` type($w_up_scale) `)`)?
    attr-dict `->` type(results)
  }];
}

def Di_MoeExpertsOp : Di_KernelOp<"moe_experts"> {
  let summary = "Routed experts of the MoE sublayer over fp4 weights, grouped on the device (docs/model.md §7)";
  let description = [{
    For every token t and rank r with e = ids[t, r] in [0, E):
    g = x[t] . w1[e]^T, v = x[t] . w3[e]^T (fp32), h = bf16(weights[t, r] * silu(min(g, limit)) *
    clamp(v, -limit, limit)), y[t, r] = h . w2[e]^T (fp32); y[t, r] = 0 for any other id.
    Experts are e2m1 with UE8M0 scales per 1x32: w1/w3 [E, I, C/2] + [E, I, C/32], w2
    [E, C, I/2] + [E, C, I/32]. Each y row is written once (no atomics): the result does not
    depend on scheduling; the caller sums the ranks in order (CpuLayersMoe.cpp).
  }];
  let arguments = (ins
    Di_BF16<[2]>:$x,
    Di_I32<[2]>:$ids,
    Di_F32<[2]>:$weights,
    Di_U8<[3]>:$w1,
    Di_U8<[3]>:$w1_scale,
    Di_U8<[3]>:$w3,
    Di_U8<[3]>:$w3_scale,
    Di_U8<[3]>:$w2,
    Di_U8<[3]>:$w2_scale,
    DefaultValuedAttr<F32Attr, "10.0">:$swiglu_limit
  );
  let results = (outs
    Di_F32<[3]>:$y
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
}

#endif // DI_OPS
