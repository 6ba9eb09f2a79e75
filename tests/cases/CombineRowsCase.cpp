#include "cases/CombineRowsCase.h"

#include <algorithm>

namespace deepinfer::testing {

int64_t addCombineRows(Rng& rng, const CombineRowsSpec& s, int64_t gatherSlack, OpCase& c) {
  const int64_t R = int64_t(s.queryLens.size());
  const int64_t N = s.ratio > 0 ? (s.maxModelLen + s.ratio - 1) / s.ratio : 0;
  std::vector<int32_t> qsl = {s.qsl0}, gatherLens;
  int64_t maxQ = 0;
  for (int64_t b = 0; b < R; ++b) {
    const int32_t q = s.queryLens[size_t(b)], seq = s.seqLens[size_t(b)];
    qsl.push_back(qsl.back() + q);
    maxQ = std::max<int64_t>(maxQ, q);
    const int64_t extra = gatherSlack > 1 ? rng.range(0, gatherSlack) : 0;
    gatherLens.push_back(int32_t(std::min<int64_t>(seq, q + s.window - 1 + extra)));
  }
  const int64_t T = qsl.back() - s.qsl0;
  std::vector<int32_t> topk(size_t(T * s.K));
  for (auto& v : topk) {
    const double u = rng.uniform();
    if (u < 0.05)
      v = -1;
    else if (u < 0.07)
      v = -int32_t(rng.range(2, 1000));
    else if (u < 0.10)
      v = int32_t(N + rng.range(0, 1000));
    else
      v = N > 0 ? int32_t(rng.range(0, N)) : int32_t(rng.range(0, 1000));
  }
  c.attrs.setInt("window", s.window);
  c.attrs.setInt("ratio", s.ratio);
  c.attrs.setInt("topk", s.K);
  c.attrs.setInt("N", N);
  c.inputs["topk_indices"] = i32Tensor({T, s.K}, topk);
  c.inputs["query_start_loc"] = i32Tensor({R + 1}, qsl);
  c.inputs["seq_lens"] = i32Tensor({R}, s.seqLens);
  c.inputs["gather_lens"] = i32Tensor({R}, gatherLens);
  return N + s.window + maxQ + 4;  // N + window + max_batched_tokens (+ slack)
}

}  // namespace deepinfer::testing
