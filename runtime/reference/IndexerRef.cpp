// Reference of indexer_logits (docs/ops.md §7): per query token, the weighted ReLU scores of
// every visible compressed position against the e4m3 index-key cache, fp32.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "deepinfer/Formats.h"
#include "reference/RefOps.h"

namespace deepinfer::ref {
namespace {
constexpr int64_t kIndexDim = 128;       // index head dim
constexpr int64_t kIndexKeyBytes = 132;  // 128 e4m3 + one fp32 scale per token
}  // namespace

Status indexerLogits(RefArgs& a) {
  REF_ASSIGN(bs, a.intAttr("block_size", 1, kMaxBlockSize));
  REF_ASSIGN(q, a.in("q", {anyDim("T"), anyDim("Hi"), exactDim(kIndexDim)}));
  const int64_t T = q->dim(0), Hi = q->dim(1);
  REF_ASSIGN(weights, a.in("weights", {dimOf("T", T), dimOf("Hi", Hi)}));
  REF_ASSIGN(cache, a.in("k_cache", {anyDim("P"), dimOf(fmt::format("block_size*132 (block_size={})", bs),
                                                        bs * kIndexKeyBytes)}));
  const int64_t P = cache->dim(0), pageBytes = bs * kIndexKeyBytes;
  REF_ASSIGN(table, a.in("block_table", {anyDim("R"), anyDim("max_pages")}));
  const int64_t R = table->dim(0), maxPages = table->dim(1), Nmax = maxPages * bs;
  REF_ASSIGN(toReq, a.in("token_to_req", {dimOf("T", T)}));
  REF_ASSIGN(visible, a.in("visible", {dimOf("T", T)}));

  const int32_t* req = toReq->ptr<int32_t>();
  const int32_t* vis = visible->ptr<int32_t>();
  const int32_t* bt = table->ptr<int32_t>();
  for (int64_t t = 0; t < T; ++t) {
    if (req[t] < 0 || req[t] >= R)
      return a.fail("token_to_req[{}] = {} is not a row of 'block_table' (R = {})", t, req[t], R);
    if (vis[t] < 0 || vis[t] > Nmax)
      return a.fail("visible[{}] = {} is outside [0, Nmax = max_pages*block_size = {}]", t, vis[t], Nmax);
    for (int64_t pi = 0; pi * bs < vis[t]; ++pi) {
      const int64_t page = bt[req[t] * maxPages + pi];
      if (page < 0 || page >= P)
        return a.fail("block_table[{}, {}] = {} is not a page of 'k_cache' (P = {}); token {} reads it",
                      req[t], pi, page, P, t);
    }
  }

  const uint16_t* qb = q->ptr<uint16_t>();
  const float* w = weights->ptr<float>();
  const uint8_t* pages = cache->ptr<uint8_t>();
  float* scores = a.out("scores", {T, Nmax}).ptr<float>();
  std::vector<float> key(kIndexDim);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t s = 0; s < Nmax; ++s) {
      float* score = scores + t * Nmax + s;
      if (s >= vis[t]) {
        *score = -INFINITY;
        continue;
      }
      const uint8_t* page = pages + int64_t(bt[req[t] * maxPages + s / bs]) * pageBytes;
      const int64_t off = s % bs;
      for (int64_t d = 0; d < kIndexDim; ++d) key[size_t(d)] = e4m3ToFloat(page[off * kIndexDim + d]);
      float kScale;
      std::memcpy(&kScale, page + bs * kIndexDim + off * 4, 4);
      float sum = 0.f;
      for (int64_t h = 0; h < Hi; ++h) {
        const uint16_t* qh = qb + (t * Hi + h) * kIndexDim;
        float dot = 0.f;
        for (int64_t d = 0; d < kIndexDim; ++d) dot += bf16ToFloat(qh[d]) * key[size_t(d)];
        sum += w[t * Hi + h] * std::max(dot, 0.f);
      }
      // The scale is a power of two, so applying it once after the head sum is exact.
      *score = sum * kScale;
    }
  }
  return {};
}

}  // namespace deepinfer::ref
