// RoPE over the last rope_dim dims of each row (oracle: runtime/model/Rope.cpp
// RopeTable::rotate): adjacent pairs (2i, 2i+1) rotated by angle fp32(pos * inv_freq[i]), cos and
// sin evaluated in fp64 and rounded to fp32, then a*c - b*s and a*s + b*c in fp32 (no
// contraction), rounded to bf16 once. One thread per pair (and per copied non-RoPE element).
#pragma once
#include "model/ModelCommon.cuh"
#include "model/params/ModelRopeParams.h"

namespace di {
namespace model {

__device__ __forceinline__ int64_t rope_position(const RopeParams& p, int64_t row) {
  const int64_t k = row / p.rows_per_pos;
  return p.positions != nullptr ? p.positions[k] : p.pos_base + k * p.pos_stride;
}

// (a, b) rotated by pair i's angle at `pos` (forward, or inverse with -sin).
__device__ __forceinline__ void rope_rotate_pair(const RopeParams& p, int64_t pos, int i, float& a, float& b) {
  const float angle = __double2float_rn(__dmul_rn(double(pos), double(p.inv_freq[i])));
  double sd, cd;
  sincos(double(angle), &sd, &cd);
  const float c = __double2float_rn(cd);
  const float s = p.inverse ? -__double2float_rn(sd) : __double2float_rn(sd);
  const float x0 = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  const float x1 = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
  a = x0;
  b = x1;
}

__device__ __forceinline__ void rope_f32_to_bf16(const RopeParams& p) {
  const int half = p.rope_dim / 2;
  const int nope = p.width - p.rope_dim;
  const int64_t per_row = int64_t(nope) + half;
  const int64_t total = p.rows * per_row;
  const float* x = static_cast<const float*>(p.x);
  for (int64_t w = flat_thread(); w < total; w += flat_stride()) {
    const int64_t row = w / per_row;
    const int j = int(w - row * per_row);
    const float* xr = x + row * p.x_stride;
    uint16_t* orow = p.out + row * p.out_stride;
    if (j < nope) {
      orow[j] = f32_to_bf16(xr[j]);
    } else {
      const int i = j - nope;
      const int d = nope + 2 * i;
      float a = xr[d], b = xr[d + 1];
      rope_rotate_pair(p, rope_position(p, row), i, a, b);
      orow[d] = f32_to_bf16(a);
      orow[d + 1] = f32_to_bf16(b);
    }
  }
}

__device__ __forceinline__ void rope_bf16_inplace(const RopeParams& p) {
  const int half = p.rope_dim / 2;
  const int nope = p.width - p.rope_dim;
  const int64_t total = p.rows * half;
  for (int64_t w = flat_thread(); w < total; w += flat_stride()) {
    const int64_t row = w / half;
    const int i = int(w - row * half);
    uint16_t* xr = p.out + row * p.out_stride;
    const int d = nope + 2 * i;
    float a = bf16_to_f32(xr[d]), b = bf16_to_f32(xr[d + 1]);
    rope_rotate_pair(p, rope_position(p, row), i, a, b);
    xr[d] = f32_to_bf16(a);
    xr[d + 1] = f32_to_bf16(b);
  }
}

}  // namespace model
}  // namespace di

extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads) di_model_rope_f32_to_bf16(const di::RopeParams p) {
  di::grid_dependency_sync();
  di::model::rope_f32_to_bf16(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads) di_model_rope_bf16_inplace(const di::RopeParams p) {
  di::grid_dependency_sync();
  di::model::rope_bf16_inplace(p);
}
