// Parameters of the model's RoPE kernels (templates/model/ModelRope.cuh).
#pragma once
#include "common/Types.h"

namespace di {

struct RopeParams {
  const void* x;             // f32 [rows, width] (rope_f32_to_bf16) or bf16 (rope_bf16_inplace)
  uint16_t* out;             // bf16 [rows, width]; == x for the in-place entry
  const float* inv_freq;     // [rope_dim / 2]
  const int64_t* positions;  // [rows / rows_per_pos] or null (then pos_base + k * pos_stride)
  int64_t x_stride;          // elements
  int64_t out_stride;        // elements
  int64_t rows;
  int64_t rows_per_pos;
  int64_t pos_base;
  int64_t pos_stride;
  int32_t width;
  int32_t rope_dim;
  int32_t inverse;           // 1: rotate by -angle
  int32_t pad_;
};
static_assert(sizeof(RopeParams) == 96, "RopeParams layout");

}  // namespace di
