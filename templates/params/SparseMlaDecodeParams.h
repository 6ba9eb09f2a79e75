// Parameters of sparse_mla_decode (docs/ops.md §6), shared by the host family and the device
// template. Runtime shapes live here; tile sizes and head grouping are template arguments.
#pragma once
#include "common/Types.h"

// The shared-memory layout helper below is evaluated by the host (resource estimates) and by
// the device (carving the buffer), so both agree on the exact byte count.
#if defined(__CUDACC__)
#define DI_SMD_HOST_DEVICE __host__ __device__
#else
#define DI_SMD_HOST_DEVICE
#endif

namespace di {

struct SparseMlaDecodeParams {
  const uint16_t* q;             // [B*Sq, H, 512] bf16 bits
  const uint8_t* swa_cache;      // [swa pages, swa_page_bytes], docs/ops.md §2 layout
  const int32_t* swa_indices;    // [B*Sq, swa_k] page*BS + offset, -1 = none
  const int32_t* swa_lens;       // [B] or [B*Sq]
  const uint8_t* extra_cache;    // optional compressed cache (null when absent)
  const int32_t* extra_indices;  // [B*Sq, extra_k] or null
  const int32_t* extra_lens;     // [B] or [B*Sq], or null
  const float* attn_sink;        // [H]
  uint16_t* out;                 // [B*Sq, H, 512] bf16 bits
  float* lse;                    // [B*Sq, H], natural log, without the sink
  float* partial_o;              // workspace: [B*Sq*H*splits, 512] fp32, normalized per split
  float* partial_lse;            // workspace: [B*Sq*H*splits] fp32 (-inf for an empty split)
  uint32_t* arrivals;            // zeroed workspace: [B*Sq, H / heads_per_cta] CTA arrival
                                 // counters of the one-launch merge (null otherwise)
  int64_t swa_page_bytes;
  int64_t extra_page_bytes;
  int64_t swa_num_slots;         // pages * block size: an index at or above it is ignored
  int64_t extra_num_slots;
  int32_t swa_block_size;
  int32_t extra_block_size;
  int32_t swa_block_shift;       // log2(block size) when it is a power of two, else -1
  int32_t extra_block_shift;
  int32_t swa_k;                 // index row width of each source
  int32_t extra_k;               // 0 when the compressed source is absent
  int32_t swa_lens_per_query;    // 1: lens shaped [B, Sq]; 0: [B]
  int32_t extra_lens_per_query;
  int32_t sq;
  int32_t heads;
  int32_t num_splits;
  float scale_log2;              // sm_scale * log2(e): scores live in the exp2 domain
};

// Shared-memory layout of one CTA (bytes, in order): the dequantized bf16 key tile, the raw
// cp.async stages, the cross-warp score partials, the reduced scores (only with 8 head-dim
// slices, which reduce in two steps), the q tile (only when q lives in shared memory), one valid
// flag per key for each in-flight tile.
struct SparseMlaDecodeSmem {
  int kbuf;       // keys * 1024: 512 bf16 per key, 16-byte chunks XOR-swizzled by key % 8
  int raw;        // per stage keys * 592: 576 data bytes per key, then 8 scale bytes per key
  int spart;      // m_tiles * dim_slices * keys * 64: fp32 partial scores in fragment order
  int sred;       // m_tiles * keys * 64 when dim_slices == 8, else empty
  int qbuf;       // heads * 1024 when q is in shared memory (bf16, swizzled as kbuf), else empty
  int valid;      // (stages + 1) * keys bytes
  int total;
};

DI_SMD_HOST_DEVICE constexpr SparseMlaDecodeSmem sparseMlaDecodeSmem(int heads_per_cta,
                                                                    int dim_slices, int keys,
                                                                    int stages,
                                                                    bool q_in_smem = false) {
  const int m_tiles = (heads_per_cta + 15) / 16;
  SparseMlaDecodeSmem s{};
  s.kbuf = 0;
  s.raw = keys * 1024;
  s.spart = s.raw + stages * keys * 592;
  s.sred = s.spart + m_tiles * dim_slices * keys * 64;
  s.qbuf = s.sred + (dim_slices == 8 ? m_tiles * keys * 64 : 0);
  s.valid = s.qbuf + (q_in_smem ? heads_per_cta * 1024 : 0);
  s.total = (s.valid + (stages + 1) * keys + 15) / 16 * 16;
  return s;
}

}  // namespace di
