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
  void* out;             // bf16 [T, C], or f32 with f32_out (a tensor rank's partial sum)
  int64_t T;
  int64_t C;
  int32_t k;
  int32_t f32_out;
};
static_assert(sizeof(MoeSumParams) == 48, "MoeSumParams layout");

}  // namespace di
