// Parameters of kv_quant_insert (docs/ops.md §2): quantize k rows into the fp8_ds_mla paged cache.
// Shared by host C++ (packing) and device code; the block size is a template constant.
#pragma once
#include "common/Types.h"

namespace di {

struct KvQuantInsertParams {
  const uint16_t* k;             // [T, 512] bf16, rows already normed and RoPE'd
  const int64_t* slot_mapping;   // [T] page * block_size + offset; -1 (any negative) skips the row
  uint8_t* k_cache;              // [num_pages, page_bytes]
  int64_t num_pages;             // slots at or past num_pages * block_size are skipped, not written
  int32_t num_tokens;            // T
  int32_t pad_;
};

}  // namespace di
