// Parameters of combine_topk_swa (docs/ops.md §4): one index row per prefill query token into the
// gathered workspace. topk (K) and window are template constants; everything else is runtime.
#pragma once
#include "common/Types.h"

namespace di {

struct CombineTopkSwaParams {
  const int32_t* topk_indices;     // [T, K] compressed positions, -1 padded
  const int32_t* query_start_loc;  // [R + 1]; offsets are relative to query_start_loc[0]
  const int32_t* seq_lens;         // [R]
  const int32_t* gather_lens;      // [R]
  int32_t* rows;                   // [T, W], W = round_up(K + window, 128)
  int32_t* lens;                   // [T]
  int32_t num_tokens;              // T
  int32_t num_reqs;                // R
  int32_t ratio;                   // 0: no compressed entries
  int32_t rows_per_req;            // M: workspace rows per request
  int32_t swa_row0;                // N: first sliding-window row inside a request's workspace
  int32_t pad_;
};

}  // namespace di
