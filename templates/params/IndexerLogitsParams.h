// Parameters of indexer_logits (docs/ops.md §7, §11): weighted ReLU scores of every visible
// compressed position against the e4m3 index-key cache. Tile shapes, the padded head count and
// the cache's block size are template constants; everything here is a runtime shape or pointer.
#pragma once
#include "common/Types.h"

namespace di {

struct IndexerLogitsParams {
  const uint16_t* q;             // [T, Hi, 128] bf16 (values exact in e4m3)
  const float* weights;          // [T, Hi]
  const uint8_t* k_cache;        // [P, BS*132]: per page [BS*128 e4m3][BS fp32 scale]
  const int32_t* block_table;    // [R, max_pages]
  const int32_t* token_to_req;   // [T]
  const int32_t* visible;        // [T]: position s is visible to token t iff s < visible[t]
  float* scores;                 // [T, n_max], -inf where not visible
  int32_t num_tokens;            // T
  int32_t num_heads;             // Hi (4..64)
  int32_t num_reqs;              // R
  int32_t max_pages;             // block_table.shape[1]
  int32_t num_pages;             // P: page indices outside [0, P) are never read
  int32_t n_max;                 // max_pages * BS, the scores row width
  int32_t positions_per_cta;     // one CTA covers this many positions (a multiple of the tile)
  int32_t pad_;
};

}  // namespace di
