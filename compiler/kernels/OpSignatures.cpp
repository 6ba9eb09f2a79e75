#include "deepinfer/OpSignature.h"

#include <fmt/format.h>

namespace deepinfer {
namespace {

TensorSig in(const char* n, DType t) { return {n, t, false, false}; }
TensorSig opt(const char* n, DType t) { return {n, t, true, false}; }
TensorSig inout(const char* n, DType t) { return {n, t, false, true}; }
TensorSig out(const char* n, DType t) { return {n, t, false, false}; }
AttrSig intAttr(const char* n) { return {n, true, true, 0}; }
AttrSig intAttr(const char* n, int64_t d) { return {n, true, false, double(d)}; }
AttrSig fltAttr(const char* n) { return {n, false, true, 0}; }
AttrSig fltAttr(const char* n, double d) { return {n, false, false, d}; }

std::vector<AttrSig> mhcPreAttrs() {
  return {fltAttr("rms_eps", 1e-20), fltAttr("hc_eps", 1e-6), intAttr("sinkhorn_iters", 20),
          fltAttr("norm_eps", 1e-20)};
}

std::vector<OpSignature> build() {
  using D = DType;
  std::vector<OpSignature> s;
  s.push_back({"kv_quant_insert",
               {in("k", D::BF16), in("slot_mapping", D::I64), inout("k_cache", D::U8)},
               {out("k_cache", D::U8)},
               {intAttr("block_size")}});
  s.push_back({"gather_kcache",
               {in("k_cache", D::U8), in("seq_lens", D::I32), opt("gather_lens", D::I32),
                in("block_table", D::I32), inout("out", D::BF16)},
               {out("out", D::BF16)},
               {intAttr("block_size"), intAttr("offset", 0)}});
  s.push_back({"combine_topk_swa",
               {in("topk_indices", D::I32), in("query_start_loc", D::I32), in("seq_lens", D::I32),
                in("gather_lens", D::I32)},
               {out("rows", D::I32), out("lens", D::I32)},
               {intAttr("window"), intAttr("ratio"), intAttr("topk"), intAttr("M"), intAttr("N")}});
  s.push_back({"sparse_mla_prefill",
               {in("q", D::BF16), in("kv", D::BF16), in("indices", D::I32), in("lens", D::I32),
                in("attn_sink", D::F32)},
               {out("out", D::BF16), out("lse", D::F32)},
               {fltAttr("sm_scale", 0.04419417382415922)}});
  s.push_back({"sparse_mla_decode",
               {in("q", D::BF16), in("swa_cache", D::U8), in("swa_indices", D::I32),
                in("swa_lens", D::I32), opt("extra_cache", D::U8), opt("extra_indices", D::I32),
                opt("extra_lens", D::I32), in("attn_sink", D::F32)},
               {out("out", D::BF16), out("lse", D::F32)},
               {fltAttr("sm_scale", 0.04419417382415922), intAttr("swa_block_size"),
                intAttr("extra_block_size", 0)}});
  s.push_back({"indexer_logits",
               {in("q", D::BF16), in("weights", D::F32), in("k_cache", D::U8),
                in("block_table", D::I32), in("token_to_req", D::I32), in("visible", D::I32)},
               {out("scores", D::F32)},
               {intAttr("block_size")}});
  s.push_back({"topk", {in("scores", D::F32), in("lens", D::I32)}, {out("indices", D::I32)},
               {intAttr("k")}});
  s.push_back({"mhc_pre",
               {in("x", D::BF16), in("fn", D::F32), in("scale", D::F32), in("base", D::F32),
                in("pre_in", D::F32), in("norm_weight", D::BF16)},
               {out("layer_input", D::BF16), out("pre", D::F32), out("post", D::F32),
                out("comb", D::F32)},
               mhcPreAttrs()});
  s.push_back({"mhc_post",
               {in("f_out", D::BF16), in("residual", D::BF16), in("post", D::F32), in("comb", D::F32)},
               {out("x", D::BF16), out("sqrsum", D::F32)},
               {}});
  s.push_back({"mhc_fused_post_pre",
               {in("f_out", D::BF16), in("residual", D::BF16), in("post", D::F32), in("comb", D::F32),
                in("fn", D::F32), in("scale", D::F32), in("base", D::F32), in("pre_in", D::F32),
                in("norm_weight", D::BF16)},
               {out("x", D::BF16), out("layer_input", D::BF16), out("pre", D::F32),
                out("post", D::F32), out("comb", D::F32)},
               mhcPreAttrs()});
  s.push_back({"mhc_collapse", {in("x", D::BF16), in("pre", D::F32)}, {out("h", D::BF16)}, {}});
  // y = x . dequant(w)^T (spec/model.md §3 formats); `y` is F32 for epilogue 0 and BF16 for 1
  // (bf16 store) and 2 (SwiGLU of w and w_up): the family's outputs() gives the dtype.
  s.push_back({"weight_gemm",
               {in("x", D::BF16), in("w", D::U8), in("w_scale", D::U8), opt("w_up", D::U8),
                opt("w_up_scale", D::U8)},
               {out("y", D::F32)},
               {intAttr("weight_bits"), intAttr("groups", 1), intAttr("epilogue", 0),
                fltAttr("swiglu_limit", 10.0)}});
  // The routed experts of the MoE sublayer (spec/model.md §7) over fp4 expert weights.
  s.push_back({"moe_experts",
               {in("x", D::BF16), in("ids", D::I32), in("weights", D::F32), in("w1", D::U8),
                in("w1_scale", D::U8), in("w3", D::U8), in("w3_scale", D::U8), in("w2", D::U8),
                in("w2_scale", D::U8)},
               {out("y", D::F32)},
               {fltAttr("swiglu_limit", 10.0)}});
  return s;
}

}  // namespace

const std::vector<OpSignature>& opSignatures() {
  static const std::vector<OpSignature> sigs = build();
  return sigs;
}

const OpSignature* findOpSignature(const std::string& op) {
  for (const auto& s : opSignatures())
    if (s.op == op) return &s;
  return nullptr;
}

Result<OpAttrs> completeAttrs(const OpSignature& sig, const OpAttrs& given) {
  OpAttrs a = given;
  for (const auto& [name, v] : given.all()) {
    bool known = false;
    for (const auto& as : sig.attrs) known |= as.name == name;
    if (!known) return Error{fmt::format("{}: unknown attribute '{}'", sig.op, name)};
  }
  for (const auto& as : sig.attrs) {
    if (a.has(as.name)) continue;
    if (as.required) return Error{fmt::format("{}: missing required attribute '{}'", sig.op, as.name)};
    if (as.isInt) a.setInt(as.name, int64_t(as.dflt));
    else a.setFloat(as.name, as.dflt);
  }
  return a;
}

}  // namespace deepinfer
