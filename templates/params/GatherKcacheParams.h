// Parameters of gather_kcache (docs/ops.md §3): dequantize paged fp8_ds_mla rows into out[R, M, 512].
// Shared by host C++ (packing) and device code; the block size is a template constant.
#pragma once
#include "common/Types.h"

namespace di {

struct GatherKcacheParams {
  const uint8_t* k_cache;        // [num_pages, page_bytes]
  const int32_t* seq_lens;       // [R]
  const int32_t* gather_lens;    // [R], or nullptr when absent (gather seq_lens[r] rows)
  const int32_t* block_table;    // [R, max_pages]
  uint16_t* out;                 // [R, M, 512] bf16 view; only rows offset .. offset+g-1 are written
  int64_t num_pages;             // page ids outside [0, num_pages) leave their row untouched
  int32_t num_reqs;              // R
  int32_t max_pages;             // block_table row length
  int32_t rows;                  // M
  int32_t offset;                // first written row of each request
  // Element strides of `out` (the caller's view, docs/ops.md §3: written in place, no copy):
  // row (r, m) starts at out + r * out_req_stride + m * out_row_stride; its 512 values are
  // contiguous. Contiguous out: M * 512 and 512. Multiples of 8 (16-byte row starts); every
  // row start is below element 2^35 (64 GiB of bf16), so the kernel keeps it in 32 bits.
  int64_t out_req_stride;
  int64_t out_row_stride;
};

}  // namespace di
