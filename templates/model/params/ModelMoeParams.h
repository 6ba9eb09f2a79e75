// Parameters of the MoE kernels (templates/model/ModelMoe.cuh): router, SwiGLU, row
// gather/scatter and the expert-output sum.
#pragma once
#include "common/Types.h"

namespace di {

struct RouterTopkParams {
  const float* logits;   // [T, E]
  const float* bias;     // [E]
  int32_t* ids;          // [T, k] ascending; -1 pads when fewer than k scores are choosable (NaN)
  float* weights;        // [T, k]; 0 for padded ids
  int64_t T;
  int32_t E;
  int32_t k;
  int32_t norm_topk;
  float scaling;         // fp32(routed_scaling_factor)
};
static_assert(sizeof(RouterTopkParams) == 56, "RouterTopkParams layout");

struct SwigluParams {
  const float* g;        // [n, I]
  const float* v;        // [n, I]
  const float* weights;  // [n] or null (weight 1)
  uint16_t* out;         // bf16 [n, I]
  int64_t n;
  int64_t I;
  float limit;
  int32_t pad_;
};
static_assert(sizeof(SwigluParams) == 56, "SwigluParams layout");

struct RowsParams {
  const void* src;       // gather: bf16 [*, C]; scatter: f32 [n, C]
  void* dst;             // gather: bf16 [n, C]; scatter: f32 [*, C]
  const int32_t* row_idx;  // [n]
  int64_t n;
  int64_t C;
  int32_t vec;           // 1: 16-byte vector path (C and both addresses allow it)
  int32_t pad_;
};
static_assert(sizeof(RowsParams) == 48, "RowsParams layout");

struct MoeSumParams {
  const float* shared;   // [T, C] or null (zeros)
  const float* routed;   // [T, k, C]
  uint16_t* out;         // bf16 [T, C]
  int64_t T;
  int64_t C;
  int32_t k;
  int32_t pad_;
};
static_assert(sizeof(MoeSumParams) == 48, "MoeSumParams layout");

// Per-row operand addresses for cuBLAS pointer-array GEMMs over routed rows without a trip to
// the host: row i = (token i / k, rank i % k) reads expert ids[i]'s weights.
struct MoeRowPointersParams {
  const int32_t* ids;            // [n] expert of each row
  const uint64_t* w1;            // [E] expert weight addresses
  const uint64_t* w3;
  const uint64_t* w2;
  uint64_t x;                    // bf16 [n / k, C] token rows
  uint64_t g, v, h, y;           // f32 [n, I], f32 [n, I], bf16 [n, I], f32 [n, C]
  uint64_t* out;                 // [8, n]: x, w1, w3, g, v, h, w2, y
  int64_t n;
  int32_t k, E;
  int64_t C, I;
};
static_assert(sizeof(MoeRowPointersParams) == 112, "MoeRowPointersParams layout");

}  // namespace di
