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
  // A sub-op's message names the same tensors (the canonical names are shared): under this op.
  auto sub = [&](const std::string& op, const OpAttrs& attrs, TensorMap& t) -> Status {
    if (auto st = runReference(op, attrs, t); !st.ok()) {
      std::string m = st.error().message;
      if (m.rfind(op + ": ", 0) == 0) m = m.substr(op.size() + 2);
      return a.fail("{}", m);
    }
    return {};
  };

  // Both run on copies and the results land only when both succeeded: a failed call leaves
  // every tensor as it was.
  TensorMap c;
  for (const char* n : {"topk_indices", "query_start_loc", "seq_lens", "gather_lens"}) c[n] = *a.find(n);
  OpAttrs ca;
  ca.setInt("window", window);
  ca.setInt("ratio", ratio);
  ca.setInt("topk", topk);
  ca.setInt("M", M);
  ca.setInt("N", N);
  DI_TRY(sub("combine_topk_swa", ca, c));

  TensorMap g;
  for (const char* n : {"k_cache", "seq_lens", "gather_lens", "block_table"}) g[n] = *a.find(n);
  g["out"] = *out;
  OpAttrs ga;
  ga.setInt("block_size", bs);
  ga.setInt("offset", N);
  DI_TRY(sub("gather_kcache", ga, g));

  *out = std::move(g.at("out"));
  HostTensor rows = std::move(c.at("rows")), lens = std::move(c.at("lens"));
  a.out("rows", rows.shape) = std::move(rows);
  a.out("lens", lens.shape) = std::move(lens);
  return {};
}

}  // namespace deepinfer::ref
