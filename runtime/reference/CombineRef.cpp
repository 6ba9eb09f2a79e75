// Reference of combine_topk_swa (docs/ops.md §4): one index row per prefill token into the
// workspace gather_kcache fills (compressed rows at [M*b, M*b+N), window rows from M*b+N).
#include <algorithm>
#include <climits>

#include "reference/RefOps.h"

namespace deepinfer::ref {

Status combineTopkSwa(RefArgs& a) {
  REF_ASSIGN(window, a.intAttr("window", 1, kMaxRowEntries));
  REF_ASSIGN(ratio, a.intAttr("ratio", 0));
  REF_ASSIGN(K, a.intAttr("topk", 1, kMaxRowEntries));
  REF_ASSIGN(M, a.intAttr("M", 1, INT32_MAX));
  REF_ASSIGN(N, a.intAttr("N", 0, M));
  REF_ASSIGN(topk, a.in("topk_indices", {anyDim("T"), dimOf("topk", K)}));
  const int64_t T = topk->dim(0);
  REF_ASSIGN(qsl, a.in("query_start_loc", {anyDim("R+1")}));
  if (qsl->dim(0) < 1) return a.fail("tensor 'query_start_loc' is empty, expected [R+1] with R >= 0");
  const int64_t R = qsl->dim(0) - 1;
  REF_ASSIGN(seqLens, a.in("seq_lens", {dimOf("R", R)}));
  REF_ASSIGN(gatherLens, a.in("gather_lens", {dimOf("R", R)}));
  const int64_t W = (K + window + 127) / 128 * 128;

  const int32_t* q = qsl->ptr<int32_t>();
  const int32_t* seq = seqLens->ptr<int32_t>();
  const int32_t* gl = gatherLens->ptr<int32_t>();
  // Row values reach M*b + N + gather_lens[b] - 1 and must fit in int32.
  if (R > 0 && M * R > int64_t(INT32_MAX))
    return a.fail("M * R = {} * {} does not fit the int32 'rows'", M, R);
  if (int64_t(q[R]) - q[0] != T)
    return a.fail("query_start_loc[{}] - query_start_loc[0] = {} - {} but 'topk_indices' has T = {} rows", R,
                  q[R], q[0], T);
  for (int64_t b = 0; b < R; ++b) {
    const int64_t qlen = int64_t(q[b + 1]) - q[b], s = seq[b], g = gl[b];
    if (qlen < 0) return a.fail("query_start_loc decreases at index {} ({} -> {})", b, q[b], q[b + 1]);
    if (qlen > s) return a.fail("request {} has {} query tokens but seq_lens[{}] = {}", b, qlen, b, s);
    if (g < 0 || g > s) return a.fail("gather_lens[{}] = {} is outside [0, seq_lens[{}] = {}]", b, g, b, s);
    if (N + g > M) return a.fail("N + gather_lens[{}] = {} + {} exceeds M = {}", b, N, g, M);
    if (qlen == 0) continue;
    // The earliest window row any token of the request needs must have been gathered.
    const int64_t firstSwa = std::max<int64_t>(s - qlen - window + 1, 0);
    if (firstSwa < s - g)
      return a.fail(
          "gather_lens[{}] = {} starts the gathered window at position {}, but request {}'s "
          "first query token needs positions from {}",
          b, g, s - g, b, firstSwa);
  }

  const int32_t* ti = topk->ptr<int32_t>();
  int32_t* rows = a.out("rows", {T, W}).ptr<int32_t>();
  int32_t* lens = a.out("lens", {T}).ptr<int32_t>();
  for (int64_t b = 0; b < R; ++b) {
    const int64_t qlen = int64_t(q[b + 1]) - q[b], s = seq[b], g0 = s - gl[b];
    for (int64_t j = 0; j < qlen; ++j) {
      const int64_t t = int64_t(q[b]) - q[0] + j;
      const int64_t pos = s - qlen + j;
      const int64_t topkLen = ratio > 0 ? std::min((pos + 1) / ratio, K) : 0;
      const int64_t swaStart = std::max<int64_t>(pos - window + 1, 0);
      const int64_t swaLen = pos - swaStart + 1;
      int32_t* row = rows + t * W;
      for (int64_t k = 0; k < topkLen; ++k) {
        const int64_t v = ti[t * K + k];
        // Invalid entries become -1 (vLLM's CUDA path adds M*b to them; docs/ops.md §4 says not to).
        row[k] = (v < 0 || v >= N) ? -1 : int32_t(v + M * b);
      }
      for (int64_t i = 0; i < swaLen; ++i) row[topkLen + i] = int32_t(M * b + N + (swaStart - g0) + i);
      for (int64_t k = topkLen + swaLen; k < W; ++k) row[k] = -1;
      lens[t] = int32_t(topkLen + swaLen);
    }
  }
  return {};
}

}  // namespace deepinfer::ref
