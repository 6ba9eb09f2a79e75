#include "deepinfer/ShapeBuckets.h"

#include <fmt/format.h>

#include <limits>

#include "deepinfer/OpSignature.h"

namespace deepinfer {

std::string ShapeBucket::label() const {
  const std::string prefix = cls.empty() ? "" : cls + " ";
  if (hi == std::numeric_limits<int64_t>::max()) return fmt::format("{}{}>={}", prefix, var, lo);
  if (lo == hi) return fmt::format("{}{}={}", prefix, var, lo);
  return fmt::format("{}{}={}..{}", prefix, var, lo, hi);
}

std::optional<BucketAxis> bucketAxis(const std::string& op) {
  if (op == "sparse_mla_decode") return BucketAxis{"B", {1, 2, 4, 8, 16, 32, 64}};
  if (op == "sparse_mla_prefill" || op == "combine_topk_swa" || op == "kv_quant_insert")
    return BucketAxis{"T", {16, 64, 256, 1024, 4096}};
  if (op == "mhc_pre" || op == "mhc_post" || op == "mhc_collapse" || op == "mhc_fused_post_pre")
    return BucketAxis{"T", {1, 2, 4, 8, 15, 64, 256, 1024, 4096}};
  if (op == "gather_kcache") return BucketAxis{"context", {2048, 8192, 32768, 131072}};
  if (op == "indexer_logits") return BucketAxis{"context", {2048, 8192, 32768}};
  if (op == "topk") return BucketAxis{"N", {2048, 8192, 32768}};
  if (op == "weight_gemm") return BucketAxis{"M", {1, 2, 4, 8, 16, 64, 256, 1024, 4096}};
  if (op == "moe_experts") return BucketAxis{"T", {1, 2, 4, 8, 16, 64, 256, 1024, 4096}};
  return std::nullopt;
}

std::vector<ShapeBucket> shapeBuckets(const std::string& op) {
  std::vector<ShapeBucket> out;
  auto axis = bucketAxis(op);
  if (!axis) return out;
  const auto& e = axis->edges;
  for (size_t i = 0; i < e.size(); ++i) {
    ShapeBucket b;
    b.var = axis->var;
    b.lo = i == 0 ? 1 : e[i - 1] + 1;
    b.hi = i + 1 == e.size() && e.size() > 1 ? std::numeric_limits<int64_t>::max() : e[i];
    b.representative = e[i];
    out.push_back(b);
  }
  return out;
}

std::optional<ShapeBucket> bucketOf(const std::string& op, int64_t value) {
  for (const ShapeBucket& b : shapeBuckets(op))
    if (value <= b.hi) return b;
  return std::nullopt;
}

std::optional<int64_t> bucketValue(const OpDesc& d) {
  auto dim = [&](const char* t, size_t i) -> std::optional<int64_t> {
    auto it = d.shapes.find(t);
    if (it == d.shapes.end() || it->second.size() <= i) return std::nullopt;
    return it->second[i];
  };
  const std::string& op = d.op;
  if (op == "sparse_mla_decode" || op == "sparse_mla_prefill") return dim("q", 0);
  if (op == "combine_topk_swa") return dim("topk_indices", 0);
  if (op == "kv_quant_insert") return dim("k", 0);
  if (op == "mhc_pre" || op == "mhc_collapse") return dim("x", 0);
  if (op == "mhc_post" || op == "mhc_fused_post_pre") return dim("f_out", 0);
  if (op == "gather_kcache") return dim("out", 1);
  if (op == "topk") return dim("scores", 1);
  if (op == "weight_gemm" || op == "moe_experts") return dim("x", 0);
  if (op == "indexer_logits") {
    auto pages = dim("block_table", 1), row = dim("k_cache", 1);
    if (!pages || !row) return std::nullopt;
    return *pages * (*row / 132);  // 132 bytes per token: 128 fp8 + one fp32 scale
  }
  return std::nullopt;
}

std::optional<ShapeBucket> bucketFor(const OpDesc& d) {
  auto v = bucketValue(d);
  if (!v) return std::nullopt;
  auto b = bucketOf(d.op, *v);
  if (b) b->cls = bucketClass(d);
  return b;
}

std::string bucketClass(const OpDesc& d) {
  if (d.op != "weight_gemm") return "";
  auto x = d.shapes.find("x"), w = d.shapes.find("w");
  if (x == d.shapes.end() || w == d.shapes.end() || x->second.size() != 2 || w->second.size() != 2) return "";
  const int64_t groups = d.attrs.getInt("groups", 1), epi = d.attrs.getInt("epilogue", 0);
  return fmt::format("{} {}x{}{} {}", d.attrs.getInt("weight_bits", 8) == 4 ? "fp4" : "fp8", w->second[0],
                     x->second[1], groups > 1 ? fmt::format(" g{}", groups) : "",
                     epi == 2 ? "swiglu" : epi == 1 ? "bf16" : "f32");
}

std::string opDtypes(const std::string& op) {
  const OpSignature* sig = findOpSignature(op);
  if (!sig) return "";
  std::string s;
  for (const TensorSig& t : sig->inputs) s += (s.empty() ? "" : ",") + std::string(dtypeName(t.dtype));
  return s;
}

}  // namespace deepinfer
