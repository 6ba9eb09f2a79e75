// Reference of topk (docs/ops.md §7, §11): the k largest of the first lens[t] scores, exact ties
// to the lower index, returned sorted ascending and -1 padded.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "reference/RefOps.h"

namespace deepinfer::ref {

Status topk(RefArgs& a) {
  REF_ASSIGN(k, a.intAttr("k", 1, kMaxRowEntries));
  REF_ASSIGN(scores, a.in("scores", {anyDim("T"), anyDim("N")}));
  const int64_t T = scores->dim(0), N = scores->dim(1);
  REF_ASSIGN(lens, a.in("lens", {dimOf("T", T)}));
  const int32_t* len = lens->ptr<int32_t>();
  const float* sc = scores->ptr<float>();
  for (int64_t t = 0; t < T; ++t) {
    if (len[t] < 0 || len[t] > N) return a.fail("lens[{}] = {} is outside [0, N = {}]", t, len[t], N);
    // NaN has no place in the order; reject it rather than pick an arbitrary rule.
    for (int64_t s = 0; s < len[t]; ++s)
      if (std::isnan(sc[t * N + s]))
        return a.fail("scores[{}, {}] is NaN (within lens[{}] = {})", t, s, t, len[t]);
  }

  int32_t* out = a.out("indices", {T, k}).ptr<int32_t>();
  for (int64_t t = 0; t < T; ++t) {
    const float* row = sc + t * N;
    int32_t* o = out + t * k;
    std::vector<int32_t> order(size_t(len[t]));
    std::iota(order.begin(), order.end(), 0);
    // Largest first; a stable sort keeps equal scores (including -0 == +0 and -inf ties) in
    // index order, which is the tie rule.
    std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return row[x] > row[y]; });
    const int64_t n = std::min<int64_t>(k, len[t]);
    order.resize(size_t(n));
    std::sort(order.begin(), order.end());
    for (int64_t i = 0; i < k; ++i) o[i] = i < n ? order[size_t(i)] : -1;
  }
  return {};
}

}  // namespace deepinfer::ref
