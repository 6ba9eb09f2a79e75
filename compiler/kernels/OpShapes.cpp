#include "deepinfer/OpShapes.h"

#include <fmt/format.h>

#include "deepinfer/OpSignature.h"

namespace deepinfer {
namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

const std::map<std::string, std::vector<ShapeParam>>& table() {
  static const std::map<std::string, std::vector<ShapeParam>> t = {
      {"kv_quant_insert", {{"T", 1536, "tokens written"}, {"block_size", 64, "tokens per page"},
                           {"pages", 64, "pages in the cache"}}},
      {"gather_kcache", {{"R", 1, "requests"}, {"context", 16384, "tokens gathered per request"},
                         {"block_size", 64, "tokens per page"}, {"offset", 0, "first output row"}}},
      {"combine_topk_swa", {{"T", 1536, "query tokens"}, {"R", 1, "requests"}, {"topk", 512, "K"},
                            {"window", 128, "sliding window"}, {"ratio", 2, "compression ratio"},
                            {"max_model_len", 65536, "for N = ceil(max_model_len / ratio)"}}},
      {"sparse_mla_prefill", {{"T", 1536, "query tokens"}, {"H", 64, "query heads"},
                              {"kv_rows", 32768, "rows of the gathered workspace"},
                              {"topk", 2048, "index entries per token (Kmax)"}}},
      {"sparse_mla_decode", {{"B", 6, "batch"}, {"Sq", 1, "queries per request"}, {"H", 64, "heads"},
                             {"swa_k", 128, "window keys"}, {"extra_k", 512, "compressed keys (0 = none)"},
                             {"swa_block_size", 64, ""}, {"extra_block_size", 64, ""},
                             {"pages", 1024, "pages per cache"}}},
      {"indexer_logits", {{"T", 1536, "query tokens"}, {"Hi", 32, "indexer heads"}, {"R", 1, "requests"},
                          {"context", 8192, "compressed positions per request"}, {"block_size", 64, ""}}},
      {"topk", {{"T", 1536, "rows"}, {"N", 8192, "candidates per row"}, {"k", 512, ""}}},
      {"mhc_pre", {{"T", 6, "tokens"}, {"C", 5120, "hidden size"}}},
      {"mhc_post", {{"T", 6, "tokens"}, {"C", 5120, "hidden size"}}},
      {"mhc_fused_post_pre", {{"T", 6, "tokens"}, {"C", 5120, "hidden size"}}},
      {"mhc_collapse", {{"T", 6, "tokens"}, {"C", 5120, "hidden size"}}},
      {"weight_gemm", {{"M", 1, "rows of x (tokens)"}, {"N", 1280, "output columns (all groups)"},
                       {"K", 5120, "input columns (all groups)"}, {"weight_bits", 8, "8: fp8 e4m3, 4: fp4 e2m1"},
                       {"groups", 1, "column groups (wo_a: 8)"},
                       {"epilogue", 0, "0: f32, 1: bf16, 2: SwiGLU of w and w_up (bf16)"}}},
      {"moe_experts", {{"T", 1, "tokens"}, {"k", 6, "experts per token"}, {"E", 128, "routed experts"},
                       {"C", 5120, "hidden size"}, {"I", 2304, "expert intermediate size"}}},
  };
  return t;
}

}  // namespace

const std::vector<ShapeParam>& opShapeParams(const std::string& op) {
  static const std::vector<ShapeParam> none;
  auto it = table().find(op);
  return it == table().end() ? none : it->second;
}

Result<OpDesc> makeOpDesc(const std::string& op, const std::map<std::string, int64_t>& given,
                          const OpAttrs& attrOverrides) {
  const OpSignature* sig = findOpSignature(op);
  if (!sig) {
    std::string names;
    for (const auto& s : opSignatures()) names += (names.empty() ? "" : ", ") + s.op;
    return Error{fmt::format("unknown op '{}' (ops: {})", op, names)};
  }
  std::map<std::string, int64_t> p;
  for (const auto& sp : opShapeParams(op)) p[sp.name] = sp.dflt;
  for (const auto& [k, v] : given) {
    if (!p.count(k)) {
      std::string known;
      for (const auto& sp : opShapeParams(op)) known += (known.empty() ? "" : ", ") + sp.name;
      return Error{fmt::format("{}: unknown shape parameter '{}' (known: {})", op, k, known)};
    }
    if (v < 0) return Error{fmt::format("{}: shape parameter {} = {} is negative", op, k, v)};
    p[k] = v;
  }
  OpDesc d;
  d.op = op;
  auto& s = d.shapes;
  OpAttrs a;
  if (op == "kv_quant_insert") {
    s["k"] = {p["T"], 512};
    s["slot_mapping"] = {p["T"]};
    s["k_cache"] = {p["pages"], mlaPageBytes(p["block_size"])};
    a.setInt("block_size", p["block_size"]);
  } else if (op == "gather_kcache") {
    const int64_t bs = std::max<int64_t>(p["block_size"], 1), maxPages = cdiv(p["context"], bs);
    s["k_cache"] = {p["R"] * maxPages, mlaPageBytes(bs)};
    s["seq_lens"] = {p["R"]};
    s["gather_lens"] = {p["R"]};
    s["block_table"] = {p["R"], maxPages};
    s["out"] = {p["R"], p["offset"] + p["context"], 512};
    a.setInt("block_size", bs);
    a.setInt("offset", p["offset"]);
  } else if (op == "combine_topk_swa") {
    const int64_t ratio = p["ratio"], n = ratio > 0 ? cdiv(p["max_model_len"], ratio) : 0;
    s["topk_indices"] = {p["T"], p["topk"]};
    s["query_start_loc"] = {p["R"] + 1};
    s["seq_lens"] = {p["R"]};
    s["gather_lens"] = {p["R"]};
    a.setInt("window", p["window"]);
    a.setInt("ratio", ratio);
    a.setInt("topk", p["topk"]);
    a.setInt("N", n);
    a.setInt("M", n + p["window"] + p["T"]);
  } else if (op == "sparse_mla_prefill") {
    s["q"] = {p["T"], p["H"], 512};
    s["kv"] = {p["kv_rows"], 512};
    s["indices"] = {p["T"], p["topk"]};
    s["lens"] = {p["T"]};
    s["attn_sink"] = {p["H"]};
    a.setFloat("sm_scale", 0.04419417382415922);
  } else if (op == "sparse_mla_decode") {
    s["q"] = {p["B"], p["Sq"], p["H"], 512};
    s["swa_cache"] = {p["pages"], mlaPageBytes(p["swa_block_size"])};
    s["swa_indices"] = {p["B"], p["Sq"], p["swa_k"]};
    s["swa_lens"] = {p["B"]};
    if (p["extra_k"] > 0) {
      s["extra_cache"] = {p["pages"], mlaPageBytes(p["extra_block_size"])};
      s["extra_indices"] = {p["B"], p["Sq"], p["extra_k"]};
      s["extra_lens"] = {p["B"]};
      a.setInt("extra_block_size", p["extra_block_size"]);
    }
    s["attn_sink"] = {p["H"]};
    a.setFloat("sm_scale", 0.04419417382415922);
    a.setInt("swa_block_size", p["swa_block_size"]);
  } else if (op == "indexer_logits") {
    const int64_t bs = std::max<int64_t>(p["block_size"], 1), maxPages = cdiv(p["context"], bs);
    s["q"] = {p["T"], p["Hi"], 128};
    s["weights"] = {p["T"], p["Hi"]};
    s["k_cache"] = {p["R"] * maxPages, bs * 132};
    s["block_table"] = {p["R"], maxPages};
    s["token_to_req"] = {p["T"]};
    s["visible"] = {p["T"]};
    a.setInt("block_size", bs);
  } else if (op == "topk") {
    s["scores"] = {p["T"], p["N"]};
    s["lens"] = {p["T"]};
    a.setInt("k", p["k"]);
  } else if (op == "weight_gemm") {
    const int64_t M = p["M"], N = p["N"], K = p["K"], G = std::max<int64_t>(p["groups"], 1);
    const int64_t Kg = K / G, wcols = p["weight_bits"] == 4 ? Kg / 2 : Kg;
    const std::vector<int64_t> scale =
        p["weight_bits"] == 4 ? std::vector<int64_t>{N, Kg / 32} : std::vector<int64_t>{cdiv(N, 32), cdiv(Kg, 32)};
    s["x"] = {M, K};
    s["w"] = {N, wcols};
    s["w_scale"] = scale;
    if (p["epilogue"] == 2) {
      s["w_up"] = {N, wcols};
      s["w_up_scale"] = scale;
    }
    a.setInt("weight_bits", p["weight_bits"]);
    a.setInt("groups", G);
    a.setInt("epilogue", p["epilogue"]);
  } else if (op == "moe_experts") {
    const int64_t T = p["T"], k = p["k"], E = p["E"], C = p["C"], I = p["I"];
    s["x"] = {T, C};
    s["ids"] = {T, k};
    s["weights"] = {T, k};
    s["w1"] = s["w3"] = {E, I, C / 2};
    s["w1_scale"] = s["w3_scale"] = {E, I, C / 32};
    s["w2"] = {E, C, I / 2};
    s["w2_scale"] = {E, C, I / 32};
  } else {  // the mHC ops
    const int64_t T = p["T"], C = p["C"];
    auto mixesIn = [&] {
      s["fn"] = {24, 4 * C};
      s["scale"] = {3};
      s["base"] = {24};
      s["pre_in"] = {T, 4};
      s["norm_weight"] = {C};
    };
    if (op == "mhc_pre") {
      s["x"] = {T, 4, C};
      mixesIn();
    } else if (op == "mhc_post" || op == "mhc_fused_post_pre") {
      s["f_out"] = {T, C};
      s["residual"] = {T, 4, C};
      s["post"] = {T, 4};
      s["comb"] = {T, 4, 4};
      if (op == "mhc_fused_post_pre") mixesIn();
    } else {
      s["x"] = {T, 4, C};
      s["pre"] = {T, 4};
    }
  }
  for (const auto& [k, v] : attrOverrides.all()) {
    if (v.isInt) a.setInt(k, v.i);
    else a.setFloat(k, v.f);
  }
  auto full = completeAttrs(*sig, a);
  if (!full.ok()) return full.error();
  d.attrs = *full;
  return d;
}

}  // namespace deepinfer
