#include "deepinfer/TuningDims.h"

#include <fmt/format.h>

#include <utility>
#include <vector>

namespace deepinfer {

std::optional<std::string> tuningDims(const OpDesc& d) {
  std::vector<std::pair<const char*, int64_t>> dims;
  bool ok = true;
  auto dim = [&](const char* tensor, size_t i) -> int64_t {
    auto it = d.shapes.find(tensor);
    if (it == d.shapes.end() || it->second.size() <= i) {
      ok = false;
      return 0;
    }
    return it->second[i];
  };
  auto attr = [&](const char* name) -> int64_t {
    if (!d.attrs.has(name)) {
      ok = false;
      return 0;
    }
    return d.attrs.getInt(name, 0);
  };
  const std::string& op = d.op;
  if (op == "sparse_mla_decode") {
    const bool extra = d.hasTensor("extra_indices");
    dims = {{"H", dim("q", 2)},
            {"Sq", dim("q", 1)},
            {"swa_k", dim("swa_indices", 2)},
            {"extra_k", extra ? dim("extra_indices", 2) : 0},
            {"swa_bs", attr("swa_block_size")},
            {"extra_bs", extra ? attr("extra_block_size") : 0}};
  } else if (op == "sparse_mla_prefill") {
    dims = {{"H", dim("q", 1)}, {"topk", dim("indices", 1)}};
  } else if (op == "indexer_logits") {
    dims = {{"Hi", dim("q", 1)}, {"bs", attr("block_size")}};
  } else if (op == "topk") {
    dims = {{"k", attr("k")}};
  } else if (op == "combine_topk_swa") {
    dims = {{"topk", attr("topk")}, {"window", attr("window")}, {"ratio", attr("ratio")}};
  } else if (op == "gather_kcache" || op == "kv_quant_insert") {
    dims = {{"bs", attr("block_size")}};
  } else if (op == "mhc_post") {
    dims = {{"C", dim("residual", 2)}};
  } else if (op == "mhc_collapse") {
    dims = {{"C", dim("x", 2)}};
  } else if (op == "mhc_pre" || op == "mhc_fused_post_pre") {
    dims = {{"C", dim(op == "mhc_pre" ? "x" : "residual", 2)}, {"sinkhorn", attr("sinkhorn_iters")}};
  } else {
    return std::nullopt;
  }
  if (!ok) return std::nullopt;
  std::string s;
  for (const auto& [k, v] : dims) s += fmt::format("{}{}={}", s.empty() ? "" : ",", k, v);
  return s;
}

}  // namespace deepinfer
