// RMSNorm of f32 rows (oracle: runtime/model/CpuLayersMath.cpp rmsNorm, fp32 path):
//   r = 1 / sqrt(sum(x^2) / n + eps);  out[i] = bf16(w[i] * x[i] * r)
// with the same fp32 rounding points; only the summation order of sum(x^2) differs.
// Rows up to kWarpRowsMaxWidth wide take one warp each (q/kv/index-key norms: 128..1280);
// wider rows (the hidden size) take one CTA each.
#pragma once
#include "model/ModelCommon.cuh"
#include "model/params/ModelNormParams.h"

namespace di {
namespace model {

__device__ __forceinline__ void store_norm(uint16_t* out, int64_t i, float v) { out[i] = f32_to_bf16(v); }
__device__ __forceinline__ void store_norm(float* out, int64_t i, float v) { out[i] = bf16_to_f32(f32_to_bf16(v)); }

template <class Out>
__device__ __forceinline__ void rms_norm_row_write(const RmsNormParams& p, const float* x, Out* out, float ss,
                                                   int first, int step) {
  const float r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, float(p.n)), p.eps)));
  for (int i = first; i < p.n; i += step) {
    const float w = bf16_to_f32(p.w[i]);
    store_norm(out, i, __fmul_rn(__fmul_rn(w, x[i]), r));
  }
}

template <class Out>
__device__ __forceinline__ void rms_norm_warp(const RmsNormParams& p) {
  const int lane = int(threadIdx.x & 31u);
  const int64_t warps = int64_t(gridDim.x) * kCtaWarps;
  for (int64_t row = int64_t(blockIdx.x) * kCtaWarps + int64_t(threadIdx.x >> 5); row < p.rows; row += warps) {
    const float* x = p.x + row * p.x_stride;
    float ss = 0.f;
    for (int i = lane; i < p.n; i += 32) ss = __fadd_rn(ss, __fmul_rn(x[i], x[i]));
    ss = warp_sum(ss);
    rms_norm_row_write(p, x, static_cast<Out*>(p.out) + row * p.out_stride, ss, lane, 32);
  }
}

template <class Out>
__device__ __forceinline__ void rms_norm_cta(const RmsNormParams& p) {
  __shared__ float scratch[kCtaWarps];
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {  // CTA-uniform
    const float* x = p.x + row * p.x_stride;
    float ss[1] = {0.f};
    for (int i = int(threadIdx.x); i < p.n; i += kCtaThreads) ss[0] = __fadd_rn(ss[0], __fmul_rn(x[i], x[i]));
    cta_sum(ss, scratch);
    rms_norm_row_write(p, x, static_cast<Out*>(p.out) + row * p.out_stride, ss[0], int(threadIdx.x), kCtaThreads);
  }
}

}  // namespace model
}  // namespace di

extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads)
    di_model_rms_norm_bf16_warp(const di::RmsNormParams p) {
  di::grid_dependency_sync();
  di::model::rms_norm_warp<uint16_t>(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads)
    di_model_rms_norm_f32_warp(const di::RmsNormParams p) {
  di::grid_dependency_sync();
  di::model::rms_norm_warp<float>(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads)
    di_model_rms_norm_bf16_cta(const di::RmsNormParams p) {
  di::grid_dependency_sync();
  di::model::rms_norm_cta<uint16_t>(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads)
    di_model_rms_norm_f32_cta(const di::RmsNormParams p) {
  di::grid_dependency_sync();
  di::model::rms_norm_cta<float>(p);
}
