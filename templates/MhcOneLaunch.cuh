// mHC in one launch (docs/ops.md §8.5): the stream pass (MhcStream.cuh) and its reduction in the
// same kernel, for the decode sizes where a second launch and the grid drain between the two cost
// more than the work. Every CTA runs the stream pass for its token tile and C slice, writes its
// partial records as in the two-launch plan, then counts itself on its tile's arrival counter
// (common/Arrival.cuh: an integer atomic in the "__zeroed" region). The CTA that brings the count
// to num_partials sets it back to zero and finalizes the tile's tokens with the finalize launch's
// own reductions (MhcFinalize.cuh), so both plans give the same bits whichever CTA is last:
//   - mix modes: each token's records summed by mhc_slot_sum / mhc_slot_total, then warp 0 runs
//     one token per lane (pre / post sigmoids, softmax + Sinkhorn: the tokens' chains in
//     parallel) while the other warps apply the RMSNorm to `layer_input` in place, 8
//     independent 16-byte vector pairs per thread in flight;
//   - post mode: sqrsum[t] from the sqrsum launch's lane shares (mhc_sqrsum_lane), added in its
//     butterfly order (mhc_sqrsum_tree).
// Reads of what other CTAs wrote in this launch go through L2 (ld.global.cg).
// Blocks of more warps than the token tiles need are intended here: the idle warps only help
// stage fn in the stream pass and widen the last CTA's reduction and norm.
#pragma once
#include "common/Arrival.cuh"
#include "MhcFinalize.cuh"
#include "MhcStream.cuh"

namespace di {

constexpr int kMhcOneTokens = 32;  // tokens per round of the last CTA's finalize (shared tables)
constexpr int kMhcOneNormBatch = 8;  // norm vectors per thread in flight at once

// Counts this CTA on its tile's arrival counter (common/Arrival.cuh); true (CTA-uniform) in the
// CTA that arrived last, which has then set the counter back to zero.
__device__ __forceinline__ bool mhc_arrived_last(const MhcParams& p) {
  __shared__ int last_arrival;
  return cta_arrived_last(p.arrivals + blockIdx.x, unsigned(p.num_partials), &last_arrival);
}

// The mix finalize of tokens t0 .. t0 + ntok_all - 1 by one CTA of kThreads threads.
template <int kThreads>
__device__ __forceinline__ void mhc_finalize_tile(const MhcParams& p, int64_t t0, int ntok_all) {
  constexpr int kParts = kMhcRecord / 4;  // 16-byte pieces per record; 0..6 hold values
  constexpr int kRows = kThreads / kParts;
  static_assert(kThreads % 32 == 0 && kRows <= kMhcSlots, "32..256 threads");
  static_assert(kMhcOneVals <= 7 * 4, "the reduced values fit in pieces 0..6");
  __shared__ __align__(16) float red[kMhcSlots][7 * 4];      // slot sums of one token
  __shared__ __align__(16) float tot[kMhcOneTokens][7 * 4];  // token totals
  __shared__ float mixp[3 + kMhcMix];                        // scale, base
  const int tid = threadIdx.x, part = tid % kParts, row = tid / kParts;
  const int64_t T = p.T;
  const int C = p.C, nvec = C / 8;
  if (tid < 3 + kMhcMix) mixp[tid] = tid < 3 ? p.scale[tid] : p.base[tid - 3];
  for (int tb = 0; tb < ntok_all; tb += kMhcOneTokens) {
    const int ntok = min(kMhcOneTokens, ntok_all - tb);
    const int64_t tbase = t0 + tb;
    // 1-2. Token totals, one token at a time: its kMhcSlots slot sums, then the slots in order
    // (the finalize launch's reduction, mhc_slot_sum / mhc_slot_total: the same bits).
    for (int tok = 0; tok < ntok; ++tok) {
      for (int j = row; j < kMhcSlots; j += kRows)
        if (part < 7)
          *reinterpret_cast<MhcF32x4*>(&red[j][part * 4]) = mhc_slot_sum<true>(
              p.partials + (tbase + tok) * kMhcRecord + part * 4, T * kMhcRecord, j, p.num_partials);
      __syncthreads();
      if (tid < kMhcOneVals) tot[tok][tid] = mhc_slot_total(red, tid);
      __syncthreads();  // red is refilled by the next token
    }
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

// mhc_post's sqrsum of tokens t0 .. t0 + ntok - 1 by one CTA: 32 lane shares per token as the
// sqrsum launch takes them (mhc_sqrsum_lane), kThreads / 32 tokens at a time, then one thread per
// token adds the shares in the launch's butterfly order (mhc_sqrsum_tree): the same bits.
template <int kThreads>
__device__ __forceinline__ void mhc_sqrsum_tile(const MhcParams& p, int64_t t0, int ntok) {
  constexpr int kTok = kThreads / 32;
  __shared__ float share[kTok][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int tb = 0; tb < ntok; tb += kTok) {
    if (tb + warp < ntok) share[warp][lane] = mhc_sqrsum_lane<true>(p, t0 + tb + warp, lane);
    __syncthreads();
    if (threadIdx.x < kTok && tb + int(threadIdx.x) < ntok)
      p.sqrsum_out[t0 + tb + threadIdx.x] = mhc_sqrsum_tree(share[threadIdx.x]);
    __syncthreads();  // the next tokens reuse the shares
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
