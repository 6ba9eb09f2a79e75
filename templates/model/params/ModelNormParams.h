// Parameters of the model's RMSNorm kernels (templates/model/ModelNorm.cuh). Shared by host
// C++ (packing) and device code; the layout is fixed by the static_assert below.
#pragma once
#include "common/Types.h"

namespace di {

struct RmsNormParams {
  const float* x;        // [rows, n], row stride x_stride (elements)
  const uint16_t* w;     // [n] bf16
  void* out;             // [rows, n] bf16 or f32 (per entry), row stride out_stride
  int64_t x_stride;
  int64_t out_stride;
  int64_t rows;
  int32_t n;
  float eps;             // fp32(eps), as the CPU reference adds it
};
static_assert(sizeof(RmsNormParams) == 56, "RmsNormParams layout");

}  // namespace di
