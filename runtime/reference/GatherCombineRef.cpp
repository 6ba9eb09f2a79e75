// Reference of gather_kcache_combine (docs/ops.md §4a): by definition gather_kcache at offset N,
// then combine_topk_swa with M = out's rows per request, on the same lengths. The two
// references run as they are, so the fused kernel is held to exactly the pair's bits.
#include <fmt/format.h>

#include <climits>

#include "deepinfer/Reference.h"
#include "reference/RefOps.h"

namespace deepinfer::ref {

Status gatherKcacheCombine(RefArgs& a) {
  REF_ASSIGN(bs, a.intAttr("block_size", 1, kMaxBlockSize));
  REF_ASSIGN(window, a.intAttr("window", 1, kMaxRowEntries));
  REF_ASSIGN(ratio, a.intAttr("ratio", 0, INT32_MAX));
  REF_ASSIGN(topk, a.intAttr("topk", 1, kMaxRowEntries));
  REF_ASSIGN(N, a.intAttr("N", 0, INT32_MAX));
  REF_ASSIGN(out, a.inOut("out", {anyDim("R"), anyDim("M"), exactDim(512)}));
  const int64_t M = out->dim(1);
  auto sub = [&](const std::string& op, const OpAttrs& attrs, TensorMap& t) -> Status {
    if (auto st = runReference(op, attrs, t); !st.ok())
      return a.fail("{}", st.error().message);
    return {};
  };

  TensorMap g;
  for (const char* n : {"k_cache", "seq_lens", "gather_lens", "block_table"}) g[n] = *a.find(n);
  g["out"] = std::move(*out);
  OpAttrs ga;
  ga.setInt("block_size", bs);
  ga.setInt("offset", N);
  const Status gs = sub("gather_kcache", ga, g);
  *out = std::move(g.at("out"));
  DI_TRY(gs);

  TensorMap c;
  for (const char* n : {"topk_indices", "query_start_loc", "seq_lens", "gather_lens"}) c[n] = *a.find(n);
  OpAttrs ca;
  ca.setInt("window", window);
  ca.setInt("ratio", ratio);
  ca.setInt("topk", topk);
  ca.setInt("M", M);
  ca.setInt("N", N);
  DI_TRY(sub("combine_topk_swa", ca, c));
  HostTensor rows = std::move(c.at("rows")), lens = std::move(c.at("lens"));
  a.out("rows", rows.shape) = std::move(rows);
  a.out("lens", lens.shape) = std::move(lens);
  return {};
}

}  // namespace deepinfer::ref
