// mHC finalize pass (docs/ops.md §8), run after the stream pass (MhcStream.cuh):
//   - mhc_finalize_kernel: one CTA per token reduces the token's per-slice partial records in a
//     fixed order, turns the 24 mix values into pre / post / comb (RMS factor, sigmoid,
//     softmax + Sinkhorn in fp32), and applies the sublayer's RMSNorm in place to the bf16
//     collapse that the stream pass left in `layer_input`.
//   - mhc_sqrsum_kernel: mhc_post's sum of squares when the stream pass was split over C.
#pragma once
#include "common/Mma.cuh"
#include "common/Numerics.cuh"
#include "params/MhcParams.h"

namespace di {

// Plain coherent 16-byte load: `layer_input` is read and rewritten in place by this pass, which
// rules out the non-coherent path.
__device__ __forceinline__ U32x4 mhc_ld_coherent(const void* ptr) {
  U32x4 v;
  asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr));
  return v;
}

// 1/x to ~1 ulp (MUFU): the Sinkhorn loop is a 40-step dependency chain per token, and the
// 2e-3 tolerance on comb leaves orders of magnitude of room for this rounding.
__device__ __forceinline__ float mhc_rcp(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// pre and post of one token: lanes 0..3 write pre, lanes 4..7 post (one sigmoid each).
__device__ __forceinline__ void mhc_pre_post(const MhcParams& p, int64_t t, const float* tot,
                                             float rms, int lane) {
  if (lane >= 8) return;
  const float z = tot[lane] * rms * p.scale[lane >> 2] + p.base[lane];
  const float sig = __fdiv_rn(1.f, 1.f + expf(-z));
  if (lane < 4) {
    p.pre_out[t * 4 + lane] = sig + p.hc_eps;
  } else {
    p.post_out[t * 4 + (lane - 4)] = sig * 2.f;
  }
}

// comb of one token, in one thread's registers (no shuffles on the critical path): row
// softmax + eps, then Sinkhorn: the first round normalizes columns only, every further round
// rows then columns, each dividing by (sum + eps).
__device__ __forceinline__ void mhc_comb(const MhcParams& p, int64_t t, const float* tot,
                                         float rms) {
  const float eps = p.hc_eps, s2 = p.scale[2];
  float c[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float mx = -3.402823466e38f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      c[i][j] = tot[8 + i * 4 + j] * rms * s2 + p.base[8 + i * 4 + j];
      mx = fmaxf(mx, c[i][j]);
    }
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      c[i][j] = expf(c[i][j] - mx);
      sum += c[i][j];
    }
    const float r = mhc_rcp(sum);
#pragma unroll
    for (int j = 0; j < 4; ++j) c[i][j] = c[i][j] * r + eps;
  }
  for (int it = 0; it < p.sinkhorn_iters; ++it) {
    if (it > 0) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float r = mhc_rcp((c[i][0] + c[i][1]) + (c[i][2] + c[i][3]) + eps);
#pragma unroll
        for (int j = 0; j < 4; ++j) c[i][j] *= r;
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float r = mhc_rcp((c[0][j] + c[1][j]) + (c[2][j] + c[3][j]) + eps);
#pragma unroll
      for (int i = 0; i < 4; ++i) c[i][j] *= r;
    }
  }
  uint16_t* dst = reinterpret_cast<uint16_t*>(p.comb_out + t * 16);  // 64-byte aligned row
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    st_global_v4(dst + i * 8, U32x4{__float_as_uint(c[i][0]), __float_as_uint(c[i][1]),
                                    __float_as_uint(c[i][2]), __float_as_uint(c[i][3])});
  }
}

// Grid: T CTAs; block: kThreads (a multiple of 32, at least 64).
template <int kThreads>
__device__ __forceinline__ void mhc_finalize_kernel(const MhcParams& p) {
  static_assert(kThreads % 32 == 0 && kThreads >= 64 && kThreads <= 1024, "block size");
  constexpr int kGroups = kThreads / 32;
  __shared__ float red[kGroups][32];
  __shared__ float tot[32];
  const int tid = threadIdx.x, lane = tid & 31, grp = tid >> 5;
  const int64_t t = blockIdx.x;
  const int64_t T = p.T;

  // Group `grp` sums partials grp, grp + kGroups, ... in order; then the groups in order.
  float s = 0.f;
  if (lane <= kMhcRecHsq) {
    const float* rec = p.partials + t * kMhcRecord + lane;
#pragma unroll 8
    for (int k = grp; k < p.num_partials; k += kGroups) s += rec[int64_t(k) * T * kMhcRecord];
  }
  red[grp][lane] = s;
  __syncthreads();
  if (tid < 32) {
    float v = red[0][tid];
#pragma unroll
    for (int k = 1; k < kGroups; ++k) v += red[k][tid];
    tot[tid] = v;
  }
  __syncthreads();

  // The mixes: pre/post on warp 0, comb on warp 1 (in parallel); then every warp normalizes.
  const float rms = __frsqrt_rn(__fdiv_rn(tot[kMhcRecSqrsum], 4.f * float(p.C)) + p.rms_eps);
  if (grp == 0) {
    mhc_pre_post(p, t, tot, rms, lane);
  } else if (grp == 1 && lane == 0) {
    mhc_comb(p, t, tot, rms);
  }

  // RMSNorm of the collapse, in place: bf16((h * rsqrt(mean h^2 + eps)) * w), fp32, one rounding.
  const int C = p.C;
  const float inv = __frsqrt_rn(__fdiv_rn(tot[kMhcRecHsq], float(C)) + p.norm_eps);
  uint16_t* row = p.h_out + t * C;
  for (int v = tid; v < C / 8; v += kThreads) {
    const U32x4 h = mhc_ld_coherent(row + v * 8);
    const U32x4 w = ld_global_nc_v4(p.norm_weight + v * 8);
    const uint32_t hw[4] = {h.x, h.y, h.z, h.w}, ww[4] = {w.x, w.y, w.z, w.w};
    uint32_t o[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      o[k] = f32x2_to_bf16x2(bf16x2_lo(hw[k]) * inv * bf16x2_lo(ww[k]),
                             bf16x2_hi(hw[k]) * inv * bf16x2_hi(ww[k]));
    }
    st_global_v4(row + v * 8, U32x4{o[0], o[1], o[2], o[3]});
  }
}

// mhc_post with the stream pass split over num_partials slices of C: sqrsum[t] = sum of the
// slices in order. Grid: ceil(T / kThreads); block: kThreads.
template <int kThreads>
__device__ __forceinline__ void mhc_sqrsum_kernel(const MhcParams& p) {
  const int64_t t = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (t >= p.T) return;
  float s = 0.f;
#pragma unroll 4
  for (int k = 0; k < p.num_partials; ++k) s += p.partials[int64_t(k) * p.T + t];
  p.sqrsum_out[t] = s;
}

}  // namespace di
