// Small model kernels: the embedding broadcast to the four residual streams (CpuForward.cpp
// run), f32 -> bf16 rounding, the greedy argmax (CpuForward.cpp argmaxToken) and the DSpark
// target feature (CpuForward.cpp captureTap).
#pragma once
#include "common/Mma.cuh"
#include "model/ModelCommon.cuh"
#include "model/params/ModelMiscParams.h"

namespace di {
namespace model {

// One CTA per token (grid-stride over tokens): the embedding row is read once and stored to
// the four streams.
__device__ __forceinline__ void embed_streams(const EmbedStreamsParams& p) {
  for (int64_t t = blockIdx.x; t < p.T; t += gridDim.x) {
    const int64_t id = p.ids[t];
    const uint16_t* src = p.embed + id * p.C;
    uint16_t* dst = p.X + t * 4 * p.C;
    if (p.vec) {
      const int64_t chunks = p.C / 8;
      for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
        const U32x4 v = ld_global_nc_v4(src + 8 * c);
#pragma unroll
        for (int s = 0; s < 4; ++s) st_global_v4(dst + s * p.C + 8 * c, v);
      }
    } else {
      for (int64_t c = threadIdx.x; c < p.C; c += blockDim.x) {
        const uint16_t v = src[c];
#pragma unroll
        for (int s = 0; s < 4; ++s) dst[s * p.C + c] = v;
      }
    }
  }
}

__device__ __forceinline__ void round_bf16(const RoundBf16Params& p) {
  for (int64_t i = flat_thread(); i < p.n; i += flat_stride()) p.out[i] = f32_to_bf16(p.x[i]);
}

__device__ __forceinline__ void round_f32_inplace(const RoundF32Params& p) {
  for (int64_t i = flat_thread(); i < p.n; i += flat_stride()) p.x[i] = bf16_to_f32(f32_to_bf16(p.x[i]));
}

// argmaxToken scans i = 1.. and keeps the first strictly larger value: the result is the lowest
// index of the maximum over the non-NaN values, or 0 when logits[0] is NaN (nothing compares
// greater than it) or everything is NaN.
__device__ __forceinline__ void argmax_rows(const ArgmaxParams& p) {
  __shared__ float sv[kCtaWarps];
  __shared__ int64_t si[kCtaWarps];
  for (int64_t t = blockIdx.x; t < p.T; t += gridDim.x) {  // CTA-uniform
    const float* row = p.logits + t * p.V;
    ArgBest best{0.f, -1};
    int finite = 1;
    for (int64_t i = threadIdx.x; i < p.V; i += kCtaThreads) {
      const float v = row[i];
      finite &= (__float_as_uint(v) & 0x7f800000u) != 0x7f800000u ? 1 : 0;  // not inf/NaN
      if (v != v) continue;
      if (best.i < 0 || v > best.v) best = ArgBest{v, i};  // ascending i: ties keep the lower
    }
    finite = __syncthreads_and(finite);
    best = cta_arg_best(best, sv, si);
    if (p.finite != nullptr && threadIdx.x == 0) p.finite[t] = finite;
    if (threadIdx.x == 0) {
      const float first = row[0];
      p.out[t] = (first != first || best.i < 0) ? 0 : int32_t(best.i);
    }
  }
}

// g[t, d] = bf16(((x0 + x1) + x2 + x3) * 0.25): fp32 sums in stream order, one rounding
// (the multiplication by 0.25 is exact).
__device__ __forceinline__ void stream_mean(const StreamMeanParams& p) {
  const int64_t n = p.T * p.C;
  for (int64_t i = flat_thread(); i < n; i += flat_stride()) {
    const int64_t t = i / p.C, d = i - t * p.C;
    const uint16_t* x = p.X + t * 4 * p.C + d;
    float s = __fadd_rn(bf16_to_f32(x[0]), bf16_to_f32(x[p.C]));
    s = __fadd_rn(s, bf16_to_f32(x[2 * p.C]));
    s = __fadd_rn(s, bf16_to_f32(x[3 * p.C]));
    p.out[t * p.outStride + d] = f32_to_bf16(__fmul_rn(s, 0.25f));
  }
}

}  // namespace model
}  // namespace di

extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads) di_model_embed_streams(const di::EmbedStreamsParams p) {
  di::grid_dependency_sync();
  di::model::embed_streams(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads) di_model_round_bf16(const di::RoundBf16Params p) {
  di::grid_dependency_sync();
  di::model::round_bf16(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads)
    di_model_round_f32_inplace(const di::RoundF32Params p) {
  di::grid_dependency_sync();
  di::model::round_f32_inplace(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads) di_model_argmax(const di::ArgmaxParams p) {
  di::grid_dependency_sync();
  di::model::argmax_rows(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads) di_model_stream_mean(const di::StreamMeanParams p) {
  di::grid_dependency_sync();
  di::model::stream_mean(p);
}
