// mHC finalize pass (docs/ops.md §8), run after the stream pass (MhcStream.cuh):
//   - mhc_finalize_kernel: one CTA per token reduces the token's per-slice partial records in a
//     fixed order, turns the 24 mix values into pre / post / comb (RMS factor, sigmoid,
//     softmax + Sinkhorn in fp32), and applies the sublayer's RMSNorm in place to the bf16
//     collapse that the stream pass left in `layer_input`.
//   - mhc_sqrsum_kernel: mhc_post's sum of squares when the stream pass was split over C.
#pragma once
#include "common/Mma.cuh"
#include "common/Numerics.cuh"
#include "MhcStream.cuh"  // MhcF32x4, mhc_ld_f32x4
#include "params/MhcParams.h"

namespace di {

// pre and post of one token: lanes 0..3 write pre, lanes 4..7 post (one sigmoid each).
// `scale` = scale[lane / 4] and `base` = base[lane], loaded by the caller.
__device__ __forceinline__ void mhc_pre_post(const MhcParams& p, int64_t t, const float* tot,
                                             float rms, int lane, float scale, float base) {
  if (lane >= 8) return;
  const float z = tot[lane] * rms * scale + base;
  const float sig = __fdiv_rn(1.f, 1.f + expf(-z));
  if (lane < 4) {
    p.pre_out[t * 4 + lane] = sig + p.hc_eps;
  } else {
    p.post_out[t * 4 + (lane - 4)] = sig * 2.f;
  }
}

// comb of one token, in one thread's registers (no shuffles on the critical path): row
// softmax + eps, then Sinkhorn: the first round normalizes columns only, every further round
// rows then columns, each dividing by (sum + eps). The reciprocals are rcp.approx (~1 ulp): the
// rounds are a 40-step dependency chain per token, and the 2e-3 tolerance on comb leaves orders
// of magnitude of room for this rounding.
// `s2` = scale[2] and `base` = base[8..23], loaded by the caller.
__device__ __forceinline__ void mhc_comb(const MhcParams& p, int64_t t, const float* tot,
                                         float rms, float s2, const float (&base)[16]) {
  const float eps = p.hc_eps;
  float c[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float mx = -3.402823466e38f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      c[i][j] = tot[8 + i * 4 + j] * rms * s2 + base[i * 4 + j];
      mx = fmaxf(mx, c[i][j]);
    }
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      c[i][j] = expf(c[i][j] - mx);
      sum += c[i][j];
    }
    const float r = rcp_approx_ftz(sum);
#pragma unroll
    for (int j = 0; j < 4; ++j) c[i][j] = c[i][j] * r + eps;
  }
  for (int it = 0; it < p.sinkhorn_iters; ++it) {
    if (it > 0) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float r = rcp_approx_ftz((c[i][0] + c[i][1]) + (c[i][2] + c[i][3]) + eps);
#pragma unroll
        for (int j = 0; j < 4; ++j) c[i][j] *= r;
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float r = rcp_approx_ftz((c[0][j] + c[1][j]) + (c[2][j] + c[3][j]) + eps);
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
// Latency, not bandwidth, bounds this pass at decode sizes (a few tokens, up to C/32 = 160
// partial records each), so its dependent steps are kept to a minimum:
//   1. what does not depend on the reduction is requested first: scale and base of the mixes,
//      and the norm's inputs (the collapse row and norm_weight, up to kMhcNormVecs 16-byte
//      vectors per thread, held in registers);
//   2. the partial records are reduced as 16-byte pieces: thread (s0, part) adds records
//      s0, s0 + kMhcSlots, ... of piece `part` in order (mhc_slot_sum; for 160 slices and 256
//      threads, 5 independent loads per thread: one L2 round trip), then one thread per value
//      adds the kMhcSlots slot sums in slot order (fixed: results do not depend on scheduling,
//      and the one-launch plan's finalize gives the same bits);
//   3. every thread normalizes its prefetched vectors, then one thread runs the Sinkhorn
//      rounds (the longest chain left, ~40 x (3 adds + rcp + mul)) and 8 lanes pre/post.
constexpr int kMhcNormVecs = 4;  // C <= 8 * kMhcNormVecs * kThreads needs no second pass
constexpr int kMhcLoadBatch = 8;  // loads per thread in flight at once in the reductions
constexpr int kMhcOneVals = kMhcRecHsq + 1;  // values reduced per record: 24 mixes, sum x^2, sum h^2

// Loads of what other CTAs wrote in the same launch (the one-launch plans) go through L2
// (ld.global.cg): L1 is not coherent across SMs.
#ifdef DI_SIMT_EMU
inline MhcF32x4 mhc_ld_cg_f32x4(const float* p) { return *reinterpret_cast<const MhcF32x4*>(p); }
inline float mhc_ld_cg_f32(const float* p) { return *p; }
inline U32x4 mhc_ld_cg_v4(const void* p) { return ld_global_v4(p); }
#else
__device__ __forceinline__ MhcF32x4 mhc_ld_cg_f32x4(const float* p) {
  MhcF32x4 v;
  asm volatile("ld.global.cg.v4.f32 {%0,%1,%2,%3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ float mhc_ld_cg_f32(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];\n" : "=f"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ U32x4 mhc_ld_cg_v4(const void* p) {
  U32x4 v;
  asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
#endif

// The partial-record reduction shared by the finalize launch and the one-launch finalize, so both
// give the same bits: slot s (of kMhcSlots) adds records s, s + kMhcSlots, ... in order, in batches
// of kMhcLoadBatch predicated loads all in flight before the first add (a rolled remainder loop
// would make each load its own round trip; absent ones add +0); then the token total adds the
// slot sums in slot order (mhc_slot_total). `rec` is record 0's 16-byte piece, records `stride`
// floats apart; kL2: read through L2 (records written in this launch).
constexpr int kMhcSlots = 32;
template <bool kL2>
__device__ __forceinline__ MhcF32x4 mhc_slot_sum(const float* rec, int64_t stride, int slot, int n) {
  MhcF32x4 s = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = slot; k0 < n; k0 += kMhcLoadBatch * kMhcSlots) {
    MhcF32x4 v[kMhcLoadBatch];
#pragma unroll
    for (int b = 0; b < kMhcLoadBatch; ++b) {
      const int k = k0 + b * kMhcSlots;
      const float* const src = rec + int64_t(k) * stride;
      v[b] = k < n ? (kL2 ? mhc_ld_cg_f32x4(src) : mhc_ld_f32x4(src)) : MhcF32x4{0.f, 0.f, 0.f, 0.f};
    }
#pragma unroll
    for (int b = 0; b < kMhcLoadBatch; ++b) {
      s.x += v[b].x;
      s.y += v[b].y;
      s.z += v[b].z;
      s.w += v[b].w;
    }
  }
  return s;
}
// Value `v` of a token: its kMhcSlots slot sums (rows of `red`, kW floats apart) in slot order.
template <int kW>
__device__ __forceinline__ float mhc_slot_total(const float (*red)[kW], int v) {
  float acc = red[0][v];
#pragma unroll
  for (int k = 1; k < kMhcSlots; ++k) acc += red[k][v];
  return acc;
}

// mhc_post's sqrsum of token t, lane l's share: slices l, l + 32, ... in order (independent
// loads: one L2 round trip for up to 32 x 8 slices). The sqrsum launch then adds the 32 shares
// by a butterfly of shuffles (mhc_sqrsum_butterfly); the one-launch plan, whose last CTA has
// other tokens, by the same tree over shared memory (mhc_sqrsum_tree): the same bits.
template <bool kL2>
__device__ __forceinline__ float mhc_sqrsum_lane(const MhcParams& p, int64_t t, int lane) {
  float s = 0.f;
  for (int k0 = lane; k0 < p.num_partials; k0 += kMhcLoadBatch * 32) {
    float v[kMhcLoadBatch];
#pragma unroll
    for (int b = 0; b < kMhcLoadBatch; ++b) {
      const int k = k0 + b * 32;
      const float* const src = p.partials + int64_t(k) * p.T + t;
      v[b] = k < p.num_partials ? (kL2 ? mhc_ld_cg_f32(src) : *src) : 0.f;
    }
#pragma unroll
    for (int b = 0; b < kMhcLoadBatch; ++b) s += v[b];
  }
  return s;
}
// Lane 0's sum after the xor butterfly (offsets 16, 8, 4, 2, 1): at offset o it adds the share of
// lane o, so the tree is x[l] += x[l + o] for l < o, the own value first.
__device__ __forceinline__ float mhc_sqrsum_butterfly(float s) {
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}
__device__ __forceinline__ float mhc_sqrsum_tree(float* x) {  // 32 shares, summed in place
  for (int o = 16; o >= 1; o >>= 1)
    for (int l = 0; l < o; ++l) x[l] += x[l + o];
  return x[0];
}

__device__ __forceinline__ U32x4 mhc_norm8(const U32x4& h, const U32x4& w, float inv) {
  const uint32_t hw[4] = {h.x, h.y, h.z, h.w}, ww[4] = {w.x, w.y, w.z, w.w};
  uint32_t o[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    o[k] = f32x2_to_bf16x2(bf16x2_lo(hw[k]) * inv * bf16x2_lo(ww[k]),
                           bf16x2_hi(hw[k]) * inv * bf16x2_hi(ww[k]));
  }
  return U32x4{o[0], o[1], o[2], o[3]};
}

template <int kThreads>
__device__ __forceinline__ void mhc_finalize_kernel(const MhcParams& p) {
  static_assert(kThreads % 32 == 0 && kThreads >= 64 && kThreads <= 1024, "block size");
  constexpr int kParts = kMhcRecord / 4;  // 16-byte pieces per record
  constexpr int kSlots = kThreads / kParts;  // slots reduced at once (kMhcSlots in all)
  static_assert(kMhcOneVals <= 7 * 4, "the reduced values fit in pieces 0..6");
  __shared__ __align__(16) float red[kMhcSlots][7 * 4];
  __shared__ float tot[kMhcOneVals];
  const int tid = threadIdx.x, lane = tid & 31;
  const int64_t t = blockIdx.x;
  const int64_t T = p.T;
  const int C = p.C;
  const int nvec = C / 8;

  // 1. The mixes' parameters (scale, base) and the norm's inputs: none depends on the
  // reduction, so all are requested before its loads (after it, a miss on scale/base would sit
  // on the path to the Sinkhorn chain).
  const int grp = tid >> 5;
  const bool pre_post_lanes = grp == 0 && lane < 8, comb_lane = grp == 1 && lane == 0;
  float mix_scale = 0.f, mix_base[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) mix_base[k] = 0.f;
  if (pre_post_lanes) {
    mix_scale = p.scale[lane >> 2];
    mix_base[0] = p.base[lane];
  } else if (comb_lane) {
    mix_scale = p.scale[2];
#pragma unroll
    for (int k = 0; k < 16; ++k) mix_base[k] = p.base[8 + k];
  }
  uint16_t* row = p.h_out + t * C;
  U32x4 hv[kMhcNormVecs] = {}, wv[kMhcNormVecs] = {};
#pragma unroll
  for (int k = 0; k < kMhcNormVecs; ++k) {
    const int v = tid + k * kThreads;
    if (v < nvec) {
      hv[k] = ld_global_v4(row + v * 8);
      wv[k] = ld_global_nc_v4(p.norm_weight + v * 8);
    }
  }

  // 2. Partial records: slot sums, then the slots in order (mhc_slot_sum / mhc_slot_total).
  for (int j = tid / kParts; j < kMhcSlots; j += kSlots) {
    const int part = tid % kParts;
    if (part < 7)  // pieces 0..6 hold the 24 mixes and the two sums of squares
      *reinterpret_cast<MhcF32x4*>(&red[j][part * 4]) =
          mhc_slot_sum<false>(p.partials + t * kMhcRecord + part * 4, T * kMhcRecord, j, p.num_partials);
  }
  __syncthreads();
  if (tid < kMhcOneVals) tot[tid] = mhc_slot_total(red, tid);
  __syncthreads();

  // 3. RMSNorm of the collapse, in place: bf16((h * rsqrt(mean h^2 + eps)) * w), fp32, one
  // rounding; vectors beyond the prefetched ones (C > 8 * kMhcNormVecs * kThreads) in a loop.
  const float inv = __frsqrt_rn(__fdiv_rn(tot[kMhcRecHsq], float(C)) + p.norm_eps);
#pragma unroll
  for (int k = 0; k < kMhcNormVecs; ++k) {
    const int v = tid + k * kThreads;
    if (v < nvec) st_global_v4(row + v * 8, mhc_norm8(hv[k], wv[k], inv));
  }
  for (int v = tid + kMhcNormVecs * kThreads; v < nvec; v += kThreads) {
    const U32x4 h = ld_global_v4(row + v * 8);
    const U32x4 w = ld_global_nc_v4(p.norm_weight + v * 8);
    st_global_v4(row + v * 8, mhc_norm8(h, w, inv));
  }

  // The mixes: pre/post on lanes 0..7 of warp 0, comb on lane 0 of warp 1 (in parallel).
  const float rms = __frsqrt_rn(__fdiv_rn(tot[kMhcRecSqrsum], 4.f * float(C)) + p.rms_eps);
  if (pre_post_lanes) {
    mhc_pre_post(p, t, tot, rms, lane, mix_scale, mix_base[0]);
  } else if (comb_lane) {
    mhc_comb(p, t, tot, rms, mix_scale, mix_base);
  }
}

// mhc_post with the stream pass split over num_partials slices of C: sqrsum[t] = the sum of the
// slices, one warp per token: lane l adds slices l, l + 32, ... in order (independent loads: one
// L2 round trip for up to 32 x 8 slices instead of a num_partials-long chain), then a fixed
// butterfly over the lanes. Grid: ceil(T / (kThreads / 32)); block: kThreads.
template <int kThreads>
__device__ __forceinline__ void mhc_sqrsum_kernel(const MhcParams& p) {
  static_assert(kThreads % 32 == 0, "whole warps");
  const int lane = threadIdx.x & 31;
  const int64_t t = int64_t(blockIdx.x) * (kThreads / 32) + (threadIdx.x >> 5);
  if (t >= p.T) return;  // whole warps leave together
  const float s = mhc_sqrsum_butterfly(mhc_sqrsum_lane<false>(p, t, lane));
  if (lane == 0) p.sqrsum_out[t] = s;
}

}  // namespace di
