// Parameters of the index-path kernels (templates/model/ModelIndex.cuh): index-query
// quantization, index-key insertion, candidate-block scores and masks, -inf removal.
#pragma once
#include "common/Types.h"

namespace di {

struct IndexQueryQuantParams {
  uint16_t* q;           // bf16 [rows, Di], in place
  float* weights;        // [rows], in place
  int64_t rows;
  int32_t Di;
  float head_scale;      // fp32(headScale)
};
static_assert(sizeof(IndexQueryQuantParams) == 32, "IndexQueryQuantParams layout");

struct IndexKeyInsertParams {
  const uint16_t* keys;  // bf16 [n, Di]
  const int64_t* slots;  // [n]: page * block_size + offset; negative skips
  uint8_t* cache;        // pages of block_size * (Di + 4) bytes
  int64_t n;
  int64_t block_size;
  int32_t Di;
  int32_t pad_;
};
static_assert(sizeof(IndexKeyInsertParams) == 48, "IndexKeyInsertParams layout");

struct CandidateBlockScoresParams {
  const float* scores;     // [T, *], row stride scores_stride
  const int32_t* visible;  // [T]
  float* block_scores;     // [T, width]
  int32_t* block_lens;     // [T]
  int64_t scores_stride;
  int64_t T;
  int64_t block_size;
  int64_t width;
};
static_assert(sizeof(CandidateBlockScoresParams) == 64, "CandidateBlockScoresParams layout");

struct MaskToBlocksParams {
  float* scores;              // [T, *], row stride scores_stride, in place
  const int32_t* visible;     // [T]
  const int32_t* kept_blocks; // [T, KB], -1 padded
  int64_t scores_stride;
  int64_t T;
  int64_t block_size;
  int32_t KB;
  int32_t pad_;
};
static_assert(sizeof(MaskToBlocksParams) == 56, "MaskToBlocksParams layout");

struct DropNegInfParams {
  int32_t* selection;     // [T, K], in place
  const float* scores;    // [T, *], row stride scores_stride
  int64_t scores_stride;
  int64_t T;
  int32_t K;
  int32_t pad_;
};
static_assert(sizeof(DropNegInfParams) == 40, "DropNegInfParams layout");

// Compressed entry ids -> cache slots for sparse_mla_decode: slots[t, i] = page_table[req[t],
// e / block_size] * block_size + e % block_size for e = selection[t, i] >= 0, else -1.
struct SelectionToSlotsParams {
  const int32_t* selection;   // [T, K]
  const int32_t* page_table;  // [R, width]
  const int32_t* token_req;   // [T]
  int32_t* slots;             // [T, K]
  int64_t T;
  int32_t K;
  int32_t width;
  int32_t block_size;
  int32_t pad_;
};
static_assert(sizeof(SelectionToSlotsParams) == 56, "SelectionToSlotsParams layout");

}  // namespace di
