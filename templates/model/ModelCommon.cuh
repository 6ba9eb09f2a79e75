// Shared device helpers of the model kernels (templates/model/*.cuh): CTA and warp reductions,
// 64-bit grid-stride indexing, and the scalar functions of the CPU reference
// (runtime/model/CpuForwardMath.h) with the same rounding points.
//
// The model unit is compiled with --fmad=false (runtime/gpu/ModelKernels.cpp), so `a * b + c`
// rounds twice like the CPU's fp32 code. exp / log1p are evaluated in fp64 and rounded once to
// fp32: the nearest fp32 value, which is what glibc's expf / log1pf return (they are documented
// within 0.502 ulp, so they can differ from it only by one ulp, and only for arguments whose
// exact result lies within ~1e-3 ulp of a rounding midpoint). CUDA's fp32 expf (2 ulp) would
// differ far more often.
#pragma once
#include "common/Numerics.cuh"
#include "common/Types.h"
#include "model/params/ModelLaunch.h"

namespace di {
namespace model {

// Flat 64-bit thread index and stride for grid-stride loops over large tensors.
__device__ __forceinline__ int64_t flat_thread() {
  return int64_t(blockIdx.x) * int64_t(blockDim.x) + int64_t(threadIdx.x);
}
__device__ __forceinline__ int64_t flat_stride() { return int64_t(gridDim.x) * int64_t(blockDim.x); }

// NVRTC has no <cmath>, so no INFINITY macro.
__device__ __forceinline__ float pos_inf() { return __int_as_float(0x7F800000); }
__device__ __forceinline__ float neg_inf() { return __int_as_float(int(0xFF800000u)); }

__device__ __forceinline__ float exp_f32(float x) { return float(exp(double(x))); }
__device__ __forceinline__ float log1p_f32(float x) { return float(log1p(double(x))); }

// CpuForwardMath.h: sigmoid(x) = 1 / (1 + e^-x), silu(x) = x / (1 + e^-x),
// softplus(x) = x > 20 ? x : log1p(e^x), all in fp32 with these rounding points.
__device__ __forceinline__ float sigmoid_f32(float x) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, exp_f32(-x))); }
__device__ __forceinline__ float silu_f32(float x) { return __fdiv_rn(x, __fadd_rn(1.0f, exp_f32(-x))); }
__device__ __forceinline__ float softplus_f32(float x) { return x > 20.f ? x : log1p_f32(exp_f32(x)); }

// std::min / std::max / std::clamp as the CPU reference evaluates them (NaN handling included:
// std::min(a, b) is (b < a) ? b : a).
__device__ __forceinline__ float std_min(float a, float b) { return (b < a) ? b : a; }
__device__ __forceinline__ float std_max(float a, float b) { return (a < b) ? b : a; }
__device__ __forceinline__ float std_clamp(float v, float lo, float hi) {
  return (v < lo) ? lo : ((hi < v) ? hi : v);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}

// Sum of N values over the CTA (blockDim.x == kCtaThreads); every thread gets the totals.
// `scratch` holds kCtaWarps * N floats; the call ends with the CTA synchronized, so the
// scratch may be reused by the next call.
template <int N>
__device__ __forceinline__ void cta_sum(float (&v)[N], float* scratch) {
  const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x >> 5);
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = warp_sum(v[i]);
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) scratch[i * kCtaWarps + warp] = v[i];
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < N; ++i) {
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kCtaWarps; ++w) s += scratch[i * kCtaWarps + w];
    v[i] = s;
  }
  __syncthreads();
}

// (value, index) candidates of an argmax: a larger value wins, equal values go to the lower
// index; idx < 0 marks "no candidate" (it loses to everything).
struct ArgBest {
  float v;
  int64_t i;
};
__device__ __forceinline__ bool arg_better(const ArgBest& a, const ArgBest& b) {
  if (a.i < 0) return false;
  if (b.i < 0) return true;
  return a.v > b.v || (a.v == b.v && a.i < b.i);
}
__device__ __forceinline__ ArgBest warp_arg_best(ArgBest a) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    ArgBest b;
    b.v = __shfl_xor_sync(0xFFFFFFFFu, a.v, o);
    b.i = __shfl_xor_sync(0xFFFFFFFFu, a.i, o);
    if (arg_better(b, a)) a = b;
  }
  return a;
}
// CTA-wide argmax; every thread gets the winner. `sv`/`si` hold kCtaWarps entries; ends synced.
__device__ __forceinline__ ArgBest cta_arg_best(ArgBest a, float* sv, int64_t* si) {
  const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x >> 5);
  a = warp_arg_best(a);
  if (lane == 0) {
    sv[warp] = a.v;
    si[warp] = a.i;
  }
  __syncthreads();
  ArgBest best{0.f, -1};
#pragma unroll
  for (int w = 0; w < kCtaWarps; ++w) {
    const ArgBest c{sv[w], si[w]};
    if (arg_better(c, best)) best = c;
  }
  __syncthreads();
  return best;
}

// UE8M0-ceil scale of a row for the index path (docs/model.md §9): 2^ceil(log2(max(amax, 1e-4) / 448))
// as fp32, exactly as CpuLayersKvCache.cpp computes it (ue8m0ToFloat(ue8m0CeilEncode(..))).
__device__ __forceinline__ float index_scale(float amax) {
  const float s = __fdiv_rn(fmaxf(amax, 1e-4f), 448.f);
  const uint32_t b = __float_as_uint(s);
  int e = int((b >> 23) & 0xFFu) + ((b & 0x7FFFFFu) != 0u ? 1 : 0);
  e = e < 1 ? 1 : (e > 254 ? 254 : e);
  return __uint_as_float(uint32_t(e) << 23);
}

// e4m3 code of x / scale clamped to +-448 (CpuLayersKvCache.cpp quantizeScaled); NaN -> 0x7F.
__device__ __forceinline__ uint32_t quantize_scaled_e4m3(float x, float scale) {
  const float y = std_clamp(__fdiv_rn(x, scale), -448.f, 448.f);
  return y != y ? 0x7Fu : f32_to_e4m3(y);
}

}  // namespace model
}  // namespace di
