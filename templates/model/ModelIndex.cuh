// The index path's small kernels (docs/model.md §6/§9):
//  - index_query_quant: per (token, head) row, e4m3 with the scale UE8M0-ceil(max(amax, 1e-4) /
//    448), decoded back in place; the scale is folded into the head weight (oracle:
//    CpuLayersKvCache.cpp quantizeIndexQuery and CpuLayersIndexer.cpp).
//  - index_key_insert: the same quantization of an index key into its page of the index-key
//    cache, [BS * Di e4m3][BS fp32 scale] (oracle: IndexKeyCache::append).
//  - candidate_block_scores / mask_to_blocks: the candidate-block ranking of layer 20 and the
//    restriction of later layers to its kept blocks (oracle: CpuLayersIndexer.cpp
//    candidateBlocksOf and the restricted candidate list).
//  - drop_neg_inf: removes selected entries whose score is -inf (entries the mask removed that
//    a top-k over fewer finite scores than k still returned).
#pragma once
#include "model/ModelCommon.cuh"
#include "model/params/ModelIndexParams.h"

namespace di {
namespace model {

// One warp per row; the amax is a max (exact in any order), so the result is bit-exact.
__device__ __forceinline__ void index_query_quant(const IndexQueryQuantParams& p) {
  const int lane = int(threadIdx.x & 31u);
  const int64_t warps = int64_t(gridDim.x) * kCtaWarps;
  for (int64_t row = int64_t(blockIdx.x) * kCtaWarps + int64_t(threadIdx.x >> 5); row < p.rows; row += warps) {
    uint16_t* q = p.q + row * p.Di;
    float amax = 0.f;
    for (int i = lane; i < p.Di; i += 32) amax = fmaxf(amax, fabsf(bf16_to_f32(q[i])));
    const float scale = index_scale(warp_max(amax));
    for (int i = lane; i < p.Di; i += 32)
      q[i] = f32_to_bf16(e4m3_to_f32(quantize_scaled_e4m3(bf16_to_f32(q[i]), scale)));
    if (lane == 0) p.weights[row] = __fmul_rn(__fmul_rn(p.weights[row], p.head_scale), scale);
  }
}

// One warp per key. Page p starts at p * BS * (Di + 4): codes of token o at o * Di, its fp32
// scale at BS * Di + 4 * o.
__device__ __forceinline__ void index_key_insert(const IndexKeyInsertParams& p) {
  const int lane = int(threadIdx.x & 31u);
  const int64_t warps = int64_t(gridDim.x) * kCtaWarps;
  for (int64_t r = int64_t(blockIdx.x) * kCtaWarps + int64_t(threadIdx.x >> 5); r < p.n; r += warps) {
    const int64_t slot = p.slots[r];
    if (slot < 0) continue;  // warp-uniform
    const int64_t page = slot / p.block_size, off = slot - page * p.block_size;
    uint8_t* base = p.cache + page * p.block_size * (int64_t(p.Di) + 4);
    const uint16_t* key = p.keys + r * p.Di;
    float amax = 0.f;
    for (int i = lane; i < p.Di; i += 32) amax = fmaxf(amax, fabsf(bf16_to_f32(key[i])));
    const float scale = index_scale(warp_max(amax));
    uint8_t* codes = base + off * p.Di;
    for (int i = lane; i < p.Di; i += 32) codes[i] = uint8_t(quantize_scaled_e4m3(bf16_to_f32(key[i]), scale));
    if (lane == 0) *reinterpret_cast<float*>(base + p.block_size * p.Di + 4 * off) = scale;
  }
}

// One thread per (token, block): the block's max over its visible entries, scanned in order
// with the reference's std::max; +inf for the newest entry's block; -inf past the last block.
__device__ __forceinline__ void candidate_block_scores(const CandidateBlockScoresParams& p) {
  const int64_t total = p.T * p.width;
  for (int64_t w = flat_thread(); w < total; w += flat_stride()) {
    const int64_t t = w / p.width, b = w - t * p.width;
    const int64_t v = p.visible[t];
    const int64_t nb = v > 0 ? (v + p.block_size - 1) / p.block_size : 0;
    if (b == 0) p.block_lens[t] = int32_t(nb);
    float m = neg_inf();
    if (b >= nb) {
      m = neg_inf();
    } else if (b == (v - 1) / p.block_size) {
      m = pos_inf();  // pinned: the block of the newest visible entry
    } else {
      const float* row = p.scores + t * p.scores_stride;
      const int64_t end = (b + 1) * p.block_size < v ? (b + 1) * p.block_size : v;
      for (int64_t j = b * p.block_size; j < end; ++j) m = std_max(m, row[j]);
    }
    p.block_scores[w] = m;
  }
}

// One CTA per token. Kept blocks are marked in a shared bitmap covering kMaskChunkBlocks
// blocks at a time (one pass for any realistic context), then every visible entry outside a
// marked block is set to -inf. visible is clamped to the row stride.
__device__ __forceinline__ void mask_to_blocks(const MaskToBlocksParams& p) {
  __shared__ uint32_t bits[kMaskChunkBlocks / 32];
  for (int64_t t = blockIdx.x; t < p.T; t += gridDim.x) {  // CTA-uniform
    int64_t v = p.visible[t];
    v = v < p.scores_stride ? v : p.scores_stride;
    if (v <= 0) continue;
    const int64_t nb = (v + p.block_size - 1) / p.block_size;
    float* row = p.scores + t * p.scores_stride;
    const int32_t* kept = p.kept_blocks + t * p.KB;
    for (int64_t b0 = 0; b0 < nb; b0 += kMaskChunkBlocks) {
      for (int i = int(threadIdx.x); i < kMaskChunkBlocks / 32; i += kCtaThreads) bits[i] = 0u;
      __syncthreads();
      for (int i = int(threadIdx.x); i < p.KB; i += kCtaThreads) {
        const int64_t b = kept[i] - b0;
        if (b >= 0 && b < kMaskChunkBlocks) atomicOr(&bits[b >> 5], 1u << (b & 31));
      }
      __syncthreads();
      const int64_t jEnd = (b0 + kMaskChunkBlocks) * p.block_size < v ? (b0 + kMaskChunkBlocks) * p.block_size : v;
      for (int64_t j = b0 * p.block_size + threadIdx.x; j < jEnd; j += kCtaThreads) {
        const int64_t b = j / p.block_size - b0;
        if (((bits[b >> 5] >> (b & 31)) & 1u) == 0u) row[j] = neg_inf();
      }
      __syncthreads();  // the bitmap is cleared for the next chunk / token
    }
  }
}

// One warp per token: in-order stream compaction with a ballot per 32 entries. Writes go to
// positions at or before the entry's own, all in chunks the warp has already read.
__device__ __forceinline__ void drop_neg_inf(const DropNegInfParams& p) {
  const int lane = int(threadIdx.x & 31u);
  const int64_t warps = int64_t(gridDim.x) * kCtaWarps;
  const uint32_t below = (1u << lane) - 1u;
  for (int64_t t = int64_t(blockIdx.x) * kCtaWarps + int64_t(threadIdx.x >> 5); t < p.T; t += warps) {
    int32_t* sel = p.selection + t * p.K;
    const float* sc = p.scores + t * p.scores_stride;
    int cnt = 0;
    for (int base = 0; base < p.K; base += 32) {
      const int i = base + lane;
      const int32_t e = i < p.K ? sel[i] : -1;
      const bool keep = e >= 0 && (int64_t(e) >= p.scores_stride || sc[e] != neg_inf());
      const uint32_t ballot = __ballot_sync(0xFFFFFFFFu, keep);
      if (keep) sel[cnt + __popc(ballot & below)] = e;
      cnt += __popc(ballot);
    }
    __syncwarp();
    for (int i = cnt + lane; i < p.K; i += 32) sel[i] = -1;
  }
}

// One thread per (token, entry). An entry past the page table (never produced by the
// indexer: entries are < the visible count) reads as -1 rather than out of bounds.
__device__ __forceinline__ void selection_to_slots(const SelectionToSlotsParams& p) {
  const int64_t n = p.T * p.K;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / p.K;
    const int32_t e = p.selection[i];
    int32_t slot = -1;
    if (e >= 0 && e / p.block_size < p.width)
      slot = p.page_table[int64_t(p.token_req[t]) * p.width + e / p.block_size] * p.block_size + e % p.block_size;
    p.slots[i] = slot;
  }
}

}  // namespace model
}  // namespace di

extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads)
    di_model_index_query_quant(const di::IndexQueryQuantParams p) {
  di::grid_dependency_sync();
  di::model::index_query_quant(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads)
    di_model_index_key_insert(const di::IndexKeyInsertParams p) {
  di::grid_dependency_sync();
  di::model::index_key_insert(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads)
    di_model_candidate_block_scores(const di::CandidateBlockScoresParams p) {
  di::grid_dependency_sync();
  di::model::candidate_block_scores(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads)
    di_model_mask_to_blocks(const di::MaskToBlocksParams p) {
  di::grid_dependency_sync();
  di::model::mask_to_blocks(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads)
    di_model_drop_neg_inf(const di::DropNegInfParams p) {
  di::grid_dependency_sync();
  di::model::drop_neg_inf(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads)
    di_model_selection_to_slots(const di::SelectionToSlotsParams p) {
  di::grid_dependency_sync();
  di::model::selection_to_slots(p);
}
