// mHC stream pass (docs/ops.md §8): the one pass over the residual streams x[T,4,C] that every
// mHC op needs. Per 32-column chunk of C it can
//   - apply the post step of the finished sublayer (new residual = comb^T x + post * f_out,
//     rounded once to bf16) and store it,
//   - accumulate the residual's sum of squares (the mix's RMS factor, or mhc_post's sqrsum),
//   - collapse the streams with per-token weights (bf16 h = sum_m w[m] x[m]) and store h,
//     accumulating sum h^2 for the sublayer's RMSNorm,
//   - multiply the residual with fn (mix[T,24] += x[T,4C] fn[24,4C]^T) on tensor cores
//     (mma.sync m16n8k16 bf16, fn split into bf16 hi + lo) or on CUDA cores (fp32 fn).
// Each CTA owns 16*kWarps tokens (one 16-token mma row tile per warp) and one slice of C
// (blockIdx.y); per-slice partial sums go to a workspace that the finalize pass reduces in a
// fixed order, so results do not depend on scheduling.
//
// Lane mapping (shared by every mode so that the post step's output already sits in mma A
// fragments): lane = 4*g + q; the lane holds tokens g and g+8 of its warp's tile and columns
// q*8 .. q*8+7 of the chunk, for all 4 streams (one 16-byte vector per token and stream).
#pragma once
#include "common/Mma.cuh"
#include "common/Numerics.cuh"
#include "params/MhcParams.h"

namespace di {

enum : int { kMhcModePre = 0, kMhcModeFused = 1, kMhcModePost = 2, kMhcModeCollapse = 3 };

constexpr int kMhcChunk = 32;  // columns of C per chunk (4 lanes x 8 bf16)
constexpr int kMhcFnPieces = kMhcMix * 4 * kMhcChunk / 4;  // 16-byte pieces of fn per chunk
// Staged fn row (one mix output n): 4 streams x 32 columns, padded by 4 floats so that the
// rows read by lanes g and g+1 in one 128-bit shared load start 4 banks apart (conflict-free).
constexpr int kMhcFnRow = 4 * kMhcChunk + 4;
// Per-token coefficients of the post modes in shared memory: comb[16], post[4], collapse w[4].
constexpr int kMhcCoef = 24;

struct alignas(16) MhcF32x4 {
  float x, y, z, w;
};
struct alignas(8) MhcF32x2 {
  float x, y;
};

// The residual and f_out are read once and the new residual is not read again by this op, so
// they are loaded and stored cache-streaming (ld/st_global_cs_v4: evict-first), which keeps L2
// for what is reread: the bf16 collapse `h` (the finalize pass reads it back), the fn chunks and
// the partial records. Both accesses are coherent: the new residual may be written in place
// (x_out == residual), which rules out the non-coherent load path.

__device__ __forceinline__ MhcF32x4 mhc_ld_f32x4(const float* ptr) {
  return *reinterpret_cast<const MhcF32x4*>(ptr);
}

// 4 floats (16-byte aligned) into a register array.
__device__ __forceinline__ void mhc_ld4(const float* ptr, float* dst) {
  const MhcF32x4 v = mhc_ld_f32x4(ptr);
  dst[0] = v.x;
  dst[1] = v.y;
  dst[2] = v.z;
  dst[3] = v.w;
}

__device__ __forceinline__ void mhc_unpack8(const U32x4& v, float (&f)[8]) {
  f[0] = bf16x2_lo(v.x);
  f[1] = bf16x2_hi(v.x);
  f[2] = bf16x2_lo(v.y);
  f[3] = bf16x2_hi(v.y);
  f[4] = bf16x2_lo(v.z);
  f[5] = bf16x2_hi(v.z);
  f[6] = bf16x2_lo(v.w);
  f[7] = bf16x2_hi(v.w);
}

__device__ __forceinline__ U32x4 mhc_pack8(const float (&f)[8]) {
  U32x4 v;
  v.x = f32x2_to_bf16x2(f[0], f[1]);
  v.y = f32x2_to_bf16x2(f[2], f[3]);
  v.z = f32x2_to_bf16x2(f[4], f[5]);
  v.w = f32x2_to_bf16x2(f[6], f[7]);
  return v;
}

__device__ __forceinline__ float mhc_sumsq8(const U32x4& v, float acc) {
  float f[8];
  mhc_unpack8(v, f);
#pragma unroll
  for (int e = 0; e < 8; ++e) acc = fmaf(f[e], f[e], acc);
  return acc;
}

// Post step for 8 columns of one token: out[j] = bf16(sum_m comb[m][j] x[m] + post[j] f).
// Stream j receives column j of comb (the transpose of docs/ops.md §8); one rounding, in fp32.
// `coef` is the token's shared row: comb[4][4] row-major, then post[4].
__device__ __forceinline__ void mhc_post8(const U32x4 (&x)[4], const U32x4& fo, const float* coef,
                                          U32x4 (&out)[4]) {
  float xf[4][8], ff[8], cb[16], po[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) mhc_ld4(coef + 4 * k, &cb[4 * k]);
  mhc_ld4(coef + 16, po);
#pragma unroll
  for (int m = 0; m < 4; ++m) mhc_unpack8(x[m], xf[m]);
  mhc_unpack8(fo, ff);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float s = po[j] * ff[e];
#pragma unroll
      for (int m = 0; m < 4; ++m) s = fmaf(cb[m * 4 + j], xf[m][e], s);
      v[e] = s;
    }
    out[j] = mhc_pack8(v);
  }
}

// Collapse weights of a token's shared coefficient row (after comb and post).
__device__ __forceinline__ void mhc_load_w(const float* coef, float (&w)[4]) {
  mhc_ld4(coef + 20, w);
}

// Collapse for 8 columns of one token: bf16(sum_m w[m] x[m]).
__device__ __forceinline__ U32x4 mhc_collapse8(const U32x4 (&x)[4], const float (&w)[4]) {
  float xf[4][8], h[8];
#pragma unroll
  for (int m = 0; m < 4; ++m) mhc_unpack8(x[m], xf[m]);
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    float s = w[0] * xf[0][e];
#pragma unroll
    for (int m = 1; m < 4; ++m) s = fmaf(w[m], xf[m][e], s);
    h[e] = s;
  }
  return mhc_pack8(h);
}

// fp32 pair -> bf16 hi pair + bf16 lo pair with hi + lo = v to ~2^-17 relative: the two mmas
// then keep ~16 bits of fn's mantissa. (A single bf16 rounding of fn, 2^-9 relative per
// element, is not safely inside the 2e-3 budget once softmax, 20 Sinkhorn rounds and a large
// `scale` amplify it.)
__device__ __forceinline__ void mhc_split_bf16x2(float e0, float e1, uint32_t& hi, uint32_t& lo) {
  hi = f32x2_to_bf16x2(e0, e1);
  lo = f32x2_to_bf16x2(e0 - bf16x2_lo(hi), e1 - bf16x2_hi(hi));
}

// Stage fn[0:24, j*C + q*32 : +32] for j = 0..3 into `dst` ([24][kMhcFnRow]) with cp.async.
template <int kThreads>
__device__ __forceinline__ void mhc_stage_fn(float (*dst)[kMhcFnRow], const float* fn, int C,
                                             int q) {
  const int64_t row_stride = 4 * int64_t(C);
  for (int i = threadIdx.x; i < kMhcFnPieces; i += kThreads) {
    const int n = i >> 5, j = (i >> 3) & 3, part = i & 7;
    const float* src = fn + n * row_stride + int64_t(j) * C + q * kMhcChunk + part * 4;
    cp_async_16(&dst[n][j * kMhcChunk + part * 4], src);
  }
}

// Tensor-core mix of one chunk: acc[nt] (rows g / g+8, mix columns nt*8 + 2q, +1) +=
// x_chunk * fn_chunk^T. K order inside an m16n8k16 step is a permutation of the physical
// columns (logical k 2q+i <-> column 8q+4s+i, logical k 2q+8+i <-> column 8q+4s+2+i for
// k-step s), applied identically to A and B, so the 16-byte vectors the lane already holds
// are its A fragments without any shuffling.
__device__ __forceinline__ void mhc_mix_chunk_mma(const U32x4 (&xa)[4], const U32x4 (&xb)[4],
                                                  const float (*stage)[kMhcFnRow], int g, int q,
                                                  float (&acc)[3][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t a0[4] = {xa[j].x, xb[j].x, xa[j].y, xb[j].y};  // columns 8q+0..3
    const uint32_t a1[4] = {xa[j].z, xb[j].z, xa[j].w, xb[j].w};  // columns 8q+4..7
#pragma unroll
    for (int nt = 0; nt < 3; ++nt) {
      const float* src = &stage[nt * 8 + g][j * kMhcChunk + q * 8];
      const MhcF32x4 f0 = mhc_ld_f32x4(src), f1 = mhc_ld_f32x4(src + 4);
      uint32_t h0[2], l0[2], h1[2], l1[2];
      mhc_split_bf16x2(f0.x, f0.y, h0[0], l0[0]);
      mhc_split_bf16x2(f0.z, f0.w, h0[1], l0[1]);
      mhc_split_bf16x2(f1.x, f1.y, h1[0], l1[0]);
      mhc_split_bf16x2(f1.z, f1.w, h1[1], l1[1]);
      mma_bf16_16816(acc[nt], a0, h0, acc[nt]);
      mma_bf16_16816(acc[nt], a0, l0, acc[nt]);
      mma_bf16_16816(acc[nt], a1, h1, acc[nt]);
      mma_bf16_16816(acc[nt], a1, l1, acc[nt]);
    }
  }
}

// CUDA-core mix of one chunk in fp32 (exact fn): acc_*[n] += sum over the lane's 32 values.
template <bool kRowB>
__device__ __forceinline__ void mhc_mix_chunk_fma(const U32x4 (&xa)[4], const U32x4 (&xb)[4],
                                                  const float (*stage)[kMhcFnRow], int q,
                                                  float (&acc_a)[kMhcMix],
                                                  float (&acc_b)[kMhcMix]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float fa[8], fb[8];
    mhc_unpack8(xa[j], fa);
    if (kRowB) mhc_unpack8(xb[j], fb);
#pragma unroll
    for (int n = 0; n < kMhcMix; ++n) {
      const float* src = &stage[n][j * kMhcChunk + q * 8];
      const MhcF32x4 f0 = mhc_ld_f32x4(src), f1 = mhc_ld_f32x4(src + 4);
      const float w[8] = {f0.x, f0.y, f0.z, f0.w, f1.x, f1.y, f1.z, f1.w};
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        acc_a[n] = fmaf(fa[e], w[e], acc_a[n]);
        if (kRowB) acc_b[n] = fmaf(fb[e], w[e], acc_b[n]);
      }
    }
  }
}

// Sum over the 4 lanes of a quad (they share tokens); every lane gets the same value.
__device__ __forceinline__ float mhc_quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}

// kMode: kMhcMode*; kWarps: warps (= 16-token tiles) per CTA; kMma: tensor-core mix (mix modes).
// Grid: (ceil(T / (16*kWarps)), num_partials); block: 32*kWarps threads.
template <int kMode, int kWarps, bool kMma>
__device__ __forceinline__ void mhc_stream_kernel(const MhcParams& p) {
  constexpr bool kPost = kMode == kMhcModeFused || kMode == kMhcModePost;
  constexpr bool kMix = kMode == kMhcModePre || kMode == kMhcModeFused;
  constexpr bool kCollapse = kMode != kMhcModePost;
  constexpr bool kSqrsum = kMode != kMhcModeCollapse;
  constexpr int kThreads = 32 * kWarps;
  static_assert(kWarps >= 1 && kWarps <= 8, "1..8 warps per CTA");
  // Double-buffered fp32 fn chunk (only the mix modes reference it).
  __shared__ __align__(16) float fn_stage[kMix ? 2 : 1][kMix ? kMhcMix : 1][kMhcFnRow];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int64_t T = p.T;
  const int C = p.C;
  const int64_t tile_tok = int64_t(blockIdx.x) * (16 * kWarps) + warp * 16;
  const int64_t ta = tile_tok + g, tb = ta + 8;
  const bool va = ta < T, vb = tb < T;
  const bool warp_live = tile_tok < T;        // some token of this warp exists
  const bool rows_b_live = tile_tok + 8 < T;  // some token of the warp's upper half exists
  const int nchunks = C / kMhcChunk;
  const int q_begin = int(blockIdx.y) * p.chunks_per_slice;
  const int q_end = min(q_begin + p.chunks_per_slice, nchunks);

  // Everything the CTA needs from memory besides the residual is requested up front with
  // cp.async (group 0) so that its latency overlaps the first residual loads:
  //  - post modes: per-token comb/post/collapse weights into shared memory (read per chunk;
  //    48 registers held across the loop would push the fused kernel into spills);
  //  - mix modes: fn of the first chunk.
  // The pre and collapse modes hold their collapse weights in registers instead.
  float w_a[4] = {0.f, 0.f, 0.f, 0.f}, w_b[4] = {0.f, 0.f, 0.f, 0.f};
  __shared__ __align__(16) float coef[kPost ? 16 * kWarps : 1][kMhcCoef];
  if constexpr (kPost) {
    for (int i = threadIdx.x; i < 16 * kWarps * (kMhcCoef / 4); i += kThreads) {
      const int r = i / (kMhcCoef / 4), k = i % (kMhcCoef / 4);
      const int64_t t = int64_t(blockIdx.x) * (16 * kWarps) + r;
      // Absent tokens (and the collapse weights of mhc_post) are zero-filled; the source
      // pointer then only has to be a valid address.
      const bool valid = t < T && (k < 5 || kCollapse);
      const float* src = p.comb_in;
      if (valid)
        src = k < 4 ? p.comb_in + t * 16 + k * 4 : (k == 4 ? p.post_in : p.collapse_w) + t * 4;
      cp_async_16(&coef[r][k * 4], src, valid);
    }
  } else if constexpr (kCollapse) {
    if (va) mhc_ld4(p.collapse_w + ta * 4, w_a);
    if (vb) mhc_ld4(p.collapse_w + tb * 4, w_b);
  }
  if constexpr (kMix) {
    if (q_begin < q_end) mhc_stage_fn<kThreads>(fn_stage[0], p.fn, C, q_begin);
  }
  cp_async_commit();

  float acc[3][4];                       // mma accumulators (kMma)
  float acc_a[kMhcMix], acc_b[kMhcMix];  // CUDA-core accumulators (!kMma)
#pragma unroll
  for (int i = 0; i < 3; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
#pragma unroll
  for (int i = 0; i < kMhcMix; ++i) acc_a[i] = acc_b[i] = 0.f;
  float sq_a = 0.f, sq_b = 0.f, hsq_a = 0.f, hsq_b = 0.f;

  const U32x4 zero = {0u, 0u, 0u, 0u};
  for (int qc = q_begin, it = 0; qc < q_end; ++qc, ++it) {
    if constexpr (kMix) {
      // The buffer refilled here was last read in iteration it-1, which ended in a barrier.
      if (qc + 1 < q_end) mhc_stage_fn<kThreads>(fn_stage[(it + 1) & 1], p.fn, C, qc + 1);
      cp_async_commit();
    }
    const int64_t col = int64_t(qc) * kMhcChunk + q * 8;
    U32x4 xa[4], xb[4], fa = zero, fb = zero;
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      xa[m] = va ? ld_global_cs_v4(p.residual + (ta * 4 + m) * C + col) : zero;
      xb[m] = vb ? ld_global_cs_v4(p.residual + (tb * 4 + m) * C + col) : zero;
    }
    if constexpr (kPost) {
      if (va) fa = ld_global_cs_v4(p.f_out + ta * C + col);
      if (vb) fb = ld_global_cs_v4(p.f_out + tb * C + col);
    }
    // Wait for this chunk's fn (and, the first time, the coefficients) while the residual
    // loads above are in flight: all groups but the one committed this iteration.
    if (kMix || (kPost && it == 0)) {
      if constexpr (kMix) {
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
    }
    if constexpr (kPost) {
      U32x4 na[4], nb[4];
      mhc_post8(xa, fa, coef[warp * 16 + g], na);
      mhc_post8(xb, fb, coef[warp * 16 + g + 8], nb);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (va) st_global_cs_v4(p.x_out + (ta * 4 + j) * C + col, na[j]);
        if (vb) st_global_cs_v4(p.x_out + (tb * 4 + j) * C + col, nb[j]);
        xa[j] = na[j];  // from here on the chunk is the new residual
        xb[j] = nb[j];
      }
    }
    if constexpr (kSqrsum) {
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        sq_a = mhc_sumsq8(xa[m], sq_a);
        sq_b = mhc_sumsq8(xb[m], sq_b);
      }
    }
    if constexpr (kCollapse) {
      if constexpr (kPost) {
        mhc_load_w(coef[warp * 16 + g], w_a);
        mhc_load_w(coef[warp * 16 + g + 8], w_b);
      }
      const U32x4 ha = mhc_collapse8(xa, w_a), hb = mhc_collapse8(xb, w_b);
      if (va) st_global_v4(p.h_out + ta * C + col, ha);
      if (vb) st_global_v4(p.h_out + tb * C + col, hb);
      if constexpr (kMix) {
        hsq_a = mhc_sumsq8(ha, hsq_a);
        hsq_b = mhc_sumsq8(hb, hsq_b);
      }
    }
    if constexpr (kMix) {
      const float(*stage)[kMhcFnRow] = fn_stage[it & 1];
      if (warp_live) {
        if constexpr (kMma) {
          mhc_mix_chunk_mma(xa, xb, stage, g, q, acc);
        } else if (rows_b_live) {
          mhc_mix_chunk_fma<true>(xa, xb, stage, q, acc_a, acc_b);
        } else {
          mhc_mix_chunk_fma<false>(xa, xb, stage, q, acc_a, acc_b);
        }
      }
      __syncthreads();  // iteration it+1 refills this buffer (with chunk qc+2)
    }
  }

  // Per-slice partial records (absent tokens write nothing).
  if constexpr (kMix) {
    sq_a = mhc_quad_sum(sq_a);
    sq_b = mhc_quad_sum(sq_b);
    hsq_a = mhc_quad_sum(hsq_a);
    hsq_b = mhc_quad_sum(hsq_b);
    float* rec_a = p.partials + (int64_t(blockIdx.y) * T + ta) * kMhcRecord;
    float* rec_b = rec_a + 8 * kMhcRecord;
    if constexpr (kMma) {
      // Accumulator layout: acc[nt][0..1] = row g, columns nt*8 + 2q + {0,1}; [2..3] = row g+8.
#pragma unroll
      for (int nt = 0; nt < 3; ++nt) {
        if (va)
          *reinterpret_cast<MhcF32x2*>(rec_a + nt * 8 + 2 * q) = MhcF32x2{acc[nt][0], acc[nt][1]};
        if (vb)
          *reinterpret_cast<MhcF32x2*>(rec_b + nt * 8 + 2 * q) = MhcF32x2{acc[nt][2], acc[nt][3]};
      }
    } else {
#pragma unroll
      for (int n = 0; n < kMhcMix; ++n) {
        acc_a[n] = mhc_quad_sum(acc_a[n]);
        if (rows_b_live) acc_b[n] = mhc_quad_sum(acc_b[n]);
      }
      // Lane q of the quad writes mix columns 6q .. 6q+5 (static register indices only).
#pragma unroll
      for (int n = 0; n < kMhcMix; ++n) {
        if (n / 6 == q) {
          if (va) rec_a[n] = acc_a[n];
          if (vb) rec_b[n] = acc_b[n];
        }
      }
    }
    // With the record's two padding floats (zeros): the finalize pass reads 16-byte pieces.
    if (q == 0) {
      if (va) *reinterpret_cast<MhcF32x4*>(rec_a + kMhcRecSqrsum) = MhcF32x4{sq_a, hsq_a, 0.f, 0.f};
      if (vb) *reinterpret_cast<MhcF32x4*>(rec_b + kMhcRecSqrsum) = MhcF32x4{sq_b, hsq_b, 0.f, 0.f};
    }
  } else if constexpr (kSqrsum) {
    sq_a = mhc_quad_sum(sq_a);
    sq_b = mhc_quad_sum(sq_b);
    if (q == 0) {
      if (va) p.partials[int64_t(blockIdx.y) * T + ta] = sq_a;
      if (vb) p.partials[int64_t(blockIdx.y) * T + tb] = sq_b;
    }
  }
}

}  // namespace di
