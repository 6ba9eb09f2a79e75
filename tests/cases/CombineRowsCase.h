// The index-row half that combine_topk_swa's cases and gather_kcache_combine's share: a prefill
// chunk's requests (query_start_loc from qsl0, seq_lens, gather_lens covering each request's first
// query token's window), out's rows per request M = N + window + max q (+ slack), and top-k rows
// with invalid entries (-1, other negatives, >= N) mixed into indices of [0, N).
#pragma once
#include <cstdint>
#include <vector>

#include "cases/OpCases.h"
#include "deepinfer/HostRandom.h"

namespace deepinfer::testing {

struct CombineRowsSpec {
  int64_t ratio = 4, window = 128, K = 512, maxModelLen = 8192;
  int32_t qsl0 = 0;
  std::vector<int32_t> queryLens, seqLens;
};

// Sets attrs window, ratio, topk and N and tensors topk_indices, query_start_loc, seq_lens and
// gather_lens on `c`; returns M. gather_lens[b] = min(seq, q + window - 1 + e) with e drawn from
// [0, gatherSlack) (1: exactly the first query token's window).
int64_t addCombineRows(Rng& rng, const CombineRowsSpec& s, int64_t gatherSlack, OpCase& c);

}  // namespace deepinfer::testing
