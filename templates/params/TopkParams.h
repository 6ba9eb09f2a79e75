// Parameters of topk (docs/ops.md §7, §11): per row, the k largest of the first lens[t] scores,
// ties to the lower index, sorted ascending, -1 padded. Thread count, radix width, the shared
// key pool size and the plan step are template constants; shapes are runtime.
#pragma once
#include "common/Types.h"

namespace di {

struct TopkParams {
  const float* scores;   // [T, N]
  const int32_t* lens;   // [T]
  int32_t* indices;      // [T, k]
  // Split plan only (splits > 1): each of `splits` chunks of a row leaves its own top-k as
  // (order key, index) pairs in index order, padded with key 0; the merge step selects from them.
  uint32_t* cand_keys;   // [T, splits, k]
  int32_t* cand_idx;     // [T, splits, k]
  int32_t num_rows;      // T
  int32_t row_len;       // N
  int32_t k;
  int32_t splits;        // 1: one CTA per row, no workspace
  int32_t chunk_len;     // positions per split (a multiple of 4)
  int32_t pad_;
};

}  // namespace di
