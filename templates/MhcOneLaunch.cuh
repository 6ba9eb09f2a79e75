// mHC in one launch (docs/ops.md §8.5): the stream pass (MhcStream.cuh) and its reduction in the
// same kernel, for the decode sizes where a second launch and the grid drain between the two cost
// more than the work. Every CTA runs the stream pass for its token tile and C slice, writes its
// partial records as in the two-launch plan, then counts itself on its tile's arrival counter (an
// integer atomic in the "__zeroed" region, after a __threadfence). The CTA that brings the count
// to num_partials sets it back to zero and finalizes the tile's tokens:
//   - mix modes: sums the records in a fixed order (slot s of a token adds slices s, s + S, ...
//     in order, then the S slot sums are added in slot order: the same bits whichever CTA is
//     last), then warp 0 runs one token per lane (pre / post sigmoids, softmax + Sinkhorn: the
//     tokens' chains in parallel) while the other warps apply the RMSNorm to `layer_input` in
//     place, 4 independent 16-byte vector pairs per thread in flight;
//   - post mode: sqrsum[t] from the per-slice sums the same way.
// Reads of what other CTAs wrote in this launch go through L2 (ld.global.cg).
// Blocks of more warps than the token tiles need are intended here: the idle warps only help
// stage fn in the stream pass and widen the last CTA's reduction and norm.
#pragma once
#include "MhcFinalize.cuh"
#include "MhcStream.cuh"

namespace di {

constexpr int kMhcOneTokens = 32;  // tokens per round of the last CTA's finalize (shared tables)
constexpr int kMhcOneBatch = 8;    // partial-record loads per thread in flight at once
constexpr int kMhcOneNormBatch = 8;  // norm vectors per thread in flight at once
constexpr int kMhcOneVals = kMhcRecHsq + 1;  // values reduced per record: 24 mixes, sum x^2, sum h^2

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

// Counts this CTA on its tile's arrival counter; true (CTA-uniform) in the CTA that arrived last,
// which has then set the counter back to zero. Every thread's earlier global stores are visible
// device-wide before the count.
__device__ __forceinline__ bool mhc_arrived_last(const MhcParams& p) {
  __shared__ int last_arrival;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t* count = p.arrivals + blockIdx.x;
    const uint32_t before = atomicAdd(count, 1u);
    const bool last = before == uint32_t(p.num_partials - 1);
    if (last) *count = 0u;  // every slice has arrived: zero again for the next launch
    last_arrival = last ? 1 : 0;
    __threadfence();
  }
  __syncthreads();
  return last_arrival != 0;
}

// The mix finalize of tokens t0 .. t0 + ntok_all - 1 by one CTA of kThreads threads.
template <int kThreads>
__device__ __forceinline__ void mhc_finalize_tile(const MhcParams& p, int64_t t0, int ntok_all) {
  constexpr int kParts = kMhcRecord / 4;  // 16-byte pieces per record; 0..6 hold values
  constexpr int kRows = kThreads / kParts;
  static_assert(kThreads % 32 == 0 && kRows <= kMhcOneTokens, "32..256 threads");
  static_assert(kMhcOneVals <= 7 * 4, "the reduced values fit in pieces 0..6");
  __shared__ __align__(16) float red[kMhcOneTokens][7 * 4];  // slot sums
  __shared__ __align__(16) float tot[kMhcOneTokens][7 * 4];  // token totals
  __shared__ float mixp[3 + kMhcMix];                        // scale, base
  const int tid = threadIdx.x, part = tid % kParts, row = tid / kParts;
  const int64_t T = p.T;
  const int C = p.C, nvec = C / 8;
  if (tid < 3 + kMhcMix) mixp[tid] = tid < 3 ? p.scale[tid] : p.base[tid - 3];
  for (int tb = 0; tb < ntok_all; tb += kMhcOneTokens) {
    const int ntok = min(kMhcOneTokens, ntok_all - tb);
    const int64_t tbase = t0 + tb;
    // 1. Slot sums: S slots per token so that every row of 8 threads has one (token, slot).
    const int S = kRows / ntok > 1 ? kRows / ntok : 1;
    for (int j = row; j < ntok * S; j += kRows) {
      const int tok = j / S, slot = j % S;
      MhcF32x4 s = {0.f, 0.f, 0.f, 0.f};
      if (part < 7) {
        const float* rec = p.partials + (tbase + tok) * kMhcRecord + part * 4;
        for (int k0 = slot; k0 < p.num_partials; k0 += kMhcOneBatch * S) {
          MhcF32x4 v[kMhcOneBatch];
#pragma unroll
          for (int b = 0; b < kMhcOneBatch; ++b) {
            const int k = k0 + b * S;
            v[b] = k < p.num_partials ? mhc_ld_cg_f32x4(rec + int64_t(k) * T * kMhcRecord)
                                      : MhcF32x4{0.f, 0.f, 0.f, 0.f};
          }
#pragma unroll
          for (int b = 0; b < kMhcOneBatch; ++b) {
            s.x += v[b].x;
            s.y += v[b].y;
            s.z += v[b].z;
            s.w += v[b].w;
          }
        }
        *reinterpret_cast<MhcF32x4*>(&red[j][part * 4]) = s;
      }
    }
    __syncthreads();
    // 2. Token totals: the slots in order.
    for (int i = tid; i < ntok * kMhcOneVals; i += kThreads) {
      const int tok = i / kMhcOneVals, v = i % kMhcOneVals;
      float acc = red[tok * S][v];
      for (int k = 1; k < S; ++k) acc += red[tok * S + k][v];
      tot[tok][v] = acc;
    }
    __syncthreads();
    // 3. Warp 0: one token per lane, pre/post then comb (the Sinkhorn chain). The other warps
    // (all of them when the CTA has one) normalize layer_input meanwhile.
    if (tid < ntok) {
      const int64_t t = tbase + tid;
      const float* tt = tot[tid];
      const float rms = __frsqrt_rn(__fdiv_rn(tt[kMhcRecSqrsum], 4.f * float(C)) + p.rms_eps);
#pragma unroll 1
      for (int l = 0; l < 8; ++l) mhc_pre_post(p, t, tt, rms, l, mixp[l >> 2], mixp[3 + l]);
      float b16[16];
#pragma unroll
      for (int k = 0; k < 16; ++k) b16[k] = mixp[3 + 8 + k];
      mhc_comb(p, t, tt, rms, mixp[2], b16);
    }
    constexpr int kNormFirst = kThreads > 32 ? 32 : 0;
    constexpr int kNormThreads = kThreads - kNormFirst;
    const int total = ntok * nvec;
    if (tid >= kNormFirst) {
      for (int i0 = tid - kNormFirst; i0 < total; i0 += kMhcOneNormBatch * kNormThreads) {
        U32x4 h[kMhcOneNormBatch], w[kMhcOneNormBatch];
#pragma unroll
        for (int b = 0; b < kMhcOneNormBatch; ++b) {
          const int i = i0 + b * kNormThreads;
          if (i < total) {
            const int tok = i / nvec, v = i % nvec;
            h[b] = mhc_ld_cg_v4(p.h_out + (tbase + tok) * C + int64_t(v) * 8);
            w[b] = ld_global_nc_v4(p.norm_weight + int64_t(v) * 8);
          }
        }
#pragma unroll
        for (int b = 0; b < kMhcOneNormBatch; ++b) {
          const int i = i0 + b * kNormThreads;
          if (i < total) {
            const int tok = i / nvec, v = i % nvec;
            const float inv = __frsqrt_rn(__fdiv_rn(tot[tok][kMhcRecHsq], float(C)) + p.norm_eps);
            st_global_v4(p.h_out + (tbase + tok) * C + int64_t(v) * 8, mhc_norm8(h[b], w[b], inv));
          }
        }
      }
    }
    __syncthreads();  // the next round reuses red and tot
  }
}

// mhc_post's sqrsum of tokens t0 .. t0 + ntok - 1 (ntok <= kThreads) by one CTA.
template <int kThreads>
__device__ __forceinline__ void mhc_sqrsum_tile(const MhcParams& p, int64_t t0, int ntok) {
  __shared__ float red[kThreads];
  const int tid = threadIdx.x;
  const int64_t T = p.T;
  const int S = kThreads / ntok > 1 ? kThreads / ntok : 1;
  if (tid < ntok * S) {
    const int tok = tid / S, slot = tid % S;
    const float* src = p.partials + t0 + tok;
    float s = 0.f;
    for (int k0 = slot; k0 < p.num_partials; k0 += kMhcOneBatch * S) {
      float v[kMhcOneBatch];
#pragma unroll
      for (int b = 0; b < kMhcOneBatch; ++b) {
        const int k = k0 + b * S;
        v[b] = k < p.num_partials ? mhc_ld_cg_f32(src + int64_t(k) * T) : 0.f;
      }
#pragma unroll
      for (int b = 0; b < kMhcOneBatch; ++b) s += v[b];
    }
    red[tid] = s;
  }
  __syncthreads();
  if (tid < ntok) {
    float s = red[tid * S];
    for (int k = 1; k < S; ++k) s += red[tid * S + k];
    p.sqrsum_out[t0 + tid] = s;
  }
}

// Grid: (ceil(T / (16 * kWarps)), num_partials); block: 32 * kWarps threads; the mix and post
// modes.
template <int kMode, int kWarps, bool kMma>
__device__ __forceinline__ void mhc_one_launch_kernel(const MhcParams& p) {
  static_assert(kMode != kMhcModeCollapse, "mhc_collapse has no reduction");
  constexpr int kTile = 16 * kWarps;
  mhc_stream_kernel<kMode, kWarps, kMma>(p);
  if (!mhc_arrived_last(p)) return;
  const int64_t t0 = int64_t(blockIdx.x) * kTile;
  const int ntok = p.T - t0 < kTile ? int(p.T - t0) : kTile;
  if constexpr (kMode == kMhcModePost) {
    mhc_sqrsum_tile<32 * kWarps>(p, t0, ntok);
  } else {
    mhc_finalize_tile<32 * kWarps>(p, t0, ntok);
  }
}

}  // namespace di
