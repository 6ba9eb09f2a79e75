// weight_gemm's weight-streaming schedule for decode rows (M <= 16; `stream = 1`): the weights
// go from global memory straight into registers (16-byte non-coherent loads, no shared-memory
// staging, no cp.async pipeline), are decoded there, and meet the few rows
// of x on mma.sync m16n8k16 with the roles swapped: 16 weight rows are the A operand (M = 16 of
// the mma) and up to 8 rows of x per n8 tile the B operand, so at M <= 8 the tensor core wastes
// only the unused x columns and each weight is decoded exactly once.
//
// Work. A warp owns 16 weight rows (output columns) and walks K in steps of 64 bytes of a row
// (64 e4m3 or 128 e2m1 columns): in a step, thread (g, t) = (lane / 4, lane % 4) loads bytes
// [16t, 16t + 16) of rows g and g + 8 (one 16-byte load each: a quad reads 64 contiguous bytes of
// a row) and the scale byte of that chunk. A ring of U register slots keeps U steps' loads in
// flight (2 U 16-byte loads per thread, x2 for a SwiGLU pair): a slot is refilled with its step
// of the next round as soon as its codes are decoded, before its mma. WN warps of a
// CTA take neighbouring 16-row tiles; WK warps split K by rounds (warp wk takes steps
// [r WK U + wk U, + U) of round r) and their partial tiles are summed through shared memory in a
// fixed order (wk = 0, then 1, 2, ...). With SPLIT, CTAs blockIdx.z take consecutive ranges of
// steps and the last of an output tile's CTAs to arrive sums their partials in split order; every
// output element has one writer and one summation order, whatever the CTA order.
//
// Decode. A step whose chunks have only in-range scale bytes and no e4m3 NaN code (every step of
// a valid checkpoint) is decoded with one bf16x2 multiply per register and no per-chunk
// predicates; any other step takes the general decoders of common/QuantWeights.cuh. Both give
// the same bits wherever both apply.
//
// K order. Thread t's chunk is 16 (e4m3) or 32 (e2m1) consecutive columns; each mma step takes
// four of them, placed on the thread's k slots {2t, 2t+1, 2t+8, 2t+9} in the order the decoders
// of common/QuantWeights.cuh produce (e4m3: a word's bytes (0, 2) and (1, 3); e2m1: nibbles
// (j, j+4) of a word), and x's B registers are permuted the same way with one prmt each. K
// order inside an mma is free as long as A and B agree.
//
// Output. The mma's C tile is (weight row, x row): c0/c1 = rows g of the weight tile, x rows
// 2t, 2t + 1 of the n8 tile; c2/c3 the same for weight row g + 8. Each element is stored alone
// (y is M x N with M <= 16: a few KB).
#pragma once
#include "WeightGemm.cuh"

namespace di {
namespace ws {

// 16 bytes of read-only data through the non-coherent path; `Stream` skips L1 allocation (the
// weights are read once), otherwise the line stays in L1 (x: every warp of the CTA rereads it).
// Not volatile: the compiler may hoist and batch them.
template <bool Stream>
__device__ __forceinline__ U32x4 ld_ro_v4(const void* p) {
#ifdef DI_SIMT_EMU
  U32x4 v;
  std::memcpy(&v, p, 16);
  return v;
#else
  U32x4 v;
  if constexpr (Stream)
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  else
    asm("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
#endif
}

// Whether a chunk needs the general decode: a scale byte past the range of one multiply (e4m3
// > 134, e2m1 > 128) or an e4m3 NaN code. Valid checkpoints have neither (the loaders refuse
// them), so a step's common path is decode_piece<.., true>: one multiply per register and no
// per-chunk predicates or branches; the general path keeps every such input exact.
template <bool FP4>
__device__ __forceinline__ bool chunk_rare(const U32x4& w, uint32_t s) {
  if constexpr (FP4) {
    return s > 128u;
  } else {
    // qw::e4m3_nan_probe of the four words, masked once.
    const uint32_t probe = ((w.x & 0x7F7F7F7Fu) + 0x01010101u) | ((w.y & 0x7F7F7F7Fu) + 0x01010101u) |
                           ((w.z & 0x7F7F7F7Fu) + 0x01010101u) | ((w.w & 0x7F7F7F7Fu) + 0x01010101u);
    return (s > 134u) | ((probe & 0x80808080u) != 0u);
  }
}

__device__ __forceinline__ uint32_t chunk_word(const U32x4& w, int i) {
  return i == 0 ? w.x : i == 1 ? w.y : i == 2 ? w.z : w.w;
}

// Piece i of a chunk of one weight row (e2m1: word i; e4m3: words 2i, 2i+1) as the A registers
// of mma steps 2i and 2i+1: b[j][r] is step 2i+j's register r (0: k slots 2t, 2t+1; 1: 2t+8,
// 2t+9). Fast: the factor is qw::e2m1/e4m3_scale_factors' `first` without the clamp (the chunk
// is not chunk_rare); otherwise the general decoders of common/QuantWeights.cuh.
template <bool FP4, bool Fast>
__device__ __forceinline__ void decode_piece(const U32x4& w, uint32_t s, int i, uint32_t (&b)[2][2]) {
  if constexpr (FP4) {
    if constexpr (Fast) qw::e2m1_decode(chunk_word(w, i), s * 0x00800080u + 0x3F003F00u, b);
    else qw::e2m1_fragments(chunk_word(w, i), qw::e2m1_scale_factors(s), b);  // nibbles (2j + r, 2j + r + 4)
  } else {
    const uint32_t w0 = chunk_word(w, 2 * i), w1 = chunk_word(w, 2 * i + 1);
    if constexpr (Fast) qw::e4m3_decode(w0, w1, s * 0x00800080u + 0x3C003C00u, b);
    else qw::e4m3_fragments(w0, w1, qw::e4m3_scale_factors(s), b);
  }
}

// The B registers of one x row's chunk (16 e4m3 / 32 e2m1 columns, given as 16-byte pieces) in
// the weights' k order: e4m3 step i takes columns 4i..4i+3 as (0, 2), (1, 3); e2m1 step 2i + h
// takes columns 8i + {2h, 2h+4} and {2h+1, 2h+5}.
template <bool FP4>
__device__ __forceinline__ void x_fragments(const U32x4 (&x)[FP4 ? 4 : 2], uint32_t (&b)[FP4 ? 8 : 4][2]) {
  if constexpr (FP4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      b[2 * i][0] = __byte_perm(x[i].x, x[i].z, 0x5410);
      b[2 * i][1] = __byte_perm(x[i].x, x[i].z, 0x7632);
      b[2 * i + 1][0] = __byte_perm(x[i].y, x[i].w, 0x5410);
      b[2 * i + 1][1] = __byte_perm(x[i].y, x[i].w, 0x7632);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      b[2 * i][0] = __byte_perm(x[i].x, x[i].y, 0x5410);
      b[2 * i][1] = __byte_perm(x[i].x, x[i].y, 0x7632);
      b[2 * i + 1][0] = __byte_perm(x[i].z, x[i].w, 0x5410);
      b[2 * i + 1][1] = __byte_perm(x[i].z, x[i].w, 0x7632);
    }
  }
}

// Shared memory of the WK reduction (bytes); none when WK = 1.
__host__ __device__ constexpr int stream_smem_bytes(int mats, int nt8, int wn, int wk) {
  return (wk - 1) * wn * mats * nt8 * 4 * 32 * 4;
}

}  // namespace ws

namespace ws {

// One weight matrix of the streaming core: row 0 of its codes and of its scale tensor.
struct Mat {
  const uint8_t* w;
  const uint8_t* scale;
};

// The streaming core shared by weight_gemm and moe_experts: this warp's 16 weight rows
// [nw, nw + 16) (rows at or past n_end are never read) of kMats matrices with rows of K columns,
// over steps [s_begin, s_end) of K (all ceil(K / step) of them without a split), times the CTA's
// x rows: xrow[nt] is this thread's row g of n8 tile nt (column 0), or null past the rows. On return the wk = 0 warps (the result is true) hold the CTA's sums: acc[m][nt] =
// the C fragment of weight rows g, g + 8 and x rows 2t, 2t + 1 of tile nt. Every thread of the
// CTA must call it (it has a barrier when WK > 1).
template <bool FP4, int NT8, int WN, int WK, int U, int kMats>
__device__ __forceinline__ bool stream_core(const Mat (&mats)[kMats], int nw, int n_end, int K, int s_begin,
                                            int s_end, const uint16_t* const (&xrow)[NT8],
                                            float (&acc)[kMats][NT8][4]) {
  static_assert(NT8 == 1 || NT8 == 2, "8 or 16 rows of x per CTA");
  static_assert(U >= 1 && U <= 8 && WN >= 1 && WK >= 1 && WN * WK <= 16, "1..8 steps per round, at most 16 warps");
  constexpr int kCols = FP4 ? 128 : 64;     // columns of a step (64 bytes of a weight row)
  constexpr int kChunk = FP4 ? 32 : 16;     // columns of a thread's 16-byte chunk
  constexpr int kMma = FP4 ? 8 : 4;         // mma steps per chunk
  constexpr int kXv = FP4 ? 4 : 2;          // 16-byte pieces of x per chunk and row
  constexpr int kScaleStep = FP4 ? 4 : 2;   // scale bytes (k32 blocks) per step
  constexpr int kAcc = kMats * NT8 * 4;

  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wn = warp % WN, wk = warp / WN;
  const int n_row[2] = {nw + g, nw + g + 8};
  const bool row_ok[2] = {n_row[0] < n_end, n_row[1] < n_end};

  const int64_t row_bytes = FP4 ? K / 2 : K;
  const int scale_cols = FP4 ? K / 32 : (K + 31) / 32;
  const uint8_t* wp[kMats][2];
  const uint8_t* sp[kMats][2];
#pragma unroll
  for (int m = 0; m < kMats; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int n = row_ok[h] ? n_row[h] : 0;  // a row past the end is never loaded
      wp[m][h] = mats[m].w + int64_t(n) * row_bytes + 16 * t;
      sp[m][h] = FP4 ? mats[m].scale + int64_t(n) * scale_cols + t
                     : mats[m].scale + int64_t(n / 32) * scale_cols + (t >> 1);
    }
  const uint16_t* xp[NT8];
  bool x_ok[NT8];
#pragma unroll
  for (int nt = 0; nt < NT8; ++nt) {
    x_ok[nt] = xrow[nt] != nullptr;
    xp[nt] = x_ok[nt] ? xrow[nt] + kChunk * t : nullptr;
  }

#pragma unroll
  for (int i = 0; i < kAcc; ++i) (&acc[0][0][0])[i] = 0.f;

  // A register ring of U slots: slot u holds step s0 + u of the warp's current round and is
  // refilled with the same slot's step of the next round (s0 + u + WK U) as soon as its codes
  // are decoded, so U steps' loads stay in flight while the warp decodes and multiplies (a
  // round's loads no longer wait for the previous round's arithmetic). A chunk past K (the last
  // step of a K that is not a multiple of the step) or of a row past the end is zero and never
  // read. Steps and their order per warp are those of a plain round loop.
  constexpr int kStride = WK * U;
  U32x4 w[U][kMats][2];
  uint32_t sc[U][kMats][2];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int s = s_begin + wk * U + u;
    const bool in = s < s_end && s * kCols + kChunk * t < K;
#pragma unroll
    for (int m = 0; m < kMats; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        w[u][m][h] = U32x4{0u, 0u, 0u, 0u};
        sc[u][m][h] = 0u;
        if (in && row_ok[h]) {
          w[u][m][h] = ld_ro_v4<true>(wp[m][h] + int64_t(s) * 64);
          sc[u][m][h] = __ldg(sp[m][h] + s * kScaleStep);
        }
      }
  }
#pragma unroll 1
  for (int s0 = s_begin + wk * U; s0 < s_end; s0 += kStride) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int s = s0 + u;
      if (s >= s_end) break;  // warp-uniform: every lane has the same s
      const bool in = s * kCols + kChunk * t < K;
      uint32_t b[NT8][kMma][2];
#pragma unroll
      for (int nt = 0; nt < NT8; ++nt) {
        U32x4 xv[kXv];
#pragma unroll
        for (int i = 0; i < kXv; ++i) {
          xv[i] = U32x4{0u, 0u, 0u, 0u};  // rows past the CTA's and columns past K multiply as zero
          if (in && x_ok[nt]) xv[i] = ld_ro_v4<false>(xp[nt] + int64_t(s) * kCols + 8 * i);
        }
        x_fragments<FP4>(xv, b[nt]);
      }
      bool rare = false;
#pragma unroll
      for (int m = 0; m < kMats; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) rare |= chunk_rare<FP4>(w[u][m][h], sc[u][m][h]);
      // Matrix by matrix: decode the slot's chunks a piece at a time into that piece's two mma
      // steps (few fragment registers live), then refill the slot with its step of the next round.
      const int sn = s + kStride;
      const bool in_next = sn < s_end && sn * kCols + kChunk * t < K;
#pragma unroll
      for (int m = 0; m < kMats; ++m) {
#pragma unroll
        for (int i = 0; i < kMma / 2; ++i) {
          uint32_t lo[2][2], hi[2][2];
          if (!rare) {
            decode_piece<FP4, true>(w[u][m][0], sc[u][m][0], i, lo);
            decode_piece<FP4, true>(w[u][m][1], sc[u][m][1], i, hi);
          } else {
            decode_piece<FP4, false>(w[u][m][0], sc[u][m][0], i, lo);
            decode_piece<FP4, false>(w[u][m][1], sc[u][m][1], i, hi);
          }
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const uint32_t a[4] = {lo[j][0], hi[j][0], lo[j][1], hi[j][1]};
#pragma unroll
            for (int nt = 0; nt < NT8; ++nt) mma_bf16_16816(acc[m][nt], a, b[nt][2 * i + j], acc[m][nt]);
          }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          w[u][m][h] = U32x4{0u, 0u, 0u, 0u};  // a stale chunk would meet a zero x column: NaN codes
          sc[u][m][h] = 0u;
          if (in_next && row_ok[h]) {
            w[u][m][h] = ld_ro_v4<true>(wp[m][h] + int64_t(sn) * 64);
            sc[u][m][h] = __ldg(sp[m][h] + sn * kScaleStep);
          }
        }
      }
    }
  }

  // The WK partial tiles, summed into the wk = 0 warps in warp order.
  if constexpr (WK > 1) {
    float* red = reinterpret_cast<float*>(qg::dynamic_smem());
    if (wk > 0) {
      float* dst = red + (int64_t((wk - 1) * WN + wn) * kAcc) * 32 + lane;
#pragma unroll
      for (int i = 0; i < kAcc; ++i) dst[i * 32] = (&acc[0][0][0])[i];
    }
    __syncthreads();
    if (wk == 0) {
#pragma unroll 1
      for (int k = 1; k < WK; ++k) {
        const float* src = red + (int64_t((k - 1) * WN + wn) * kAcc) * 32 + lane;
#pragma unroll
        for (int i = 0; i < kAcc; ++i) (&acc[0][0][0])[i] = __fadd_rn((&acc[0][0][0])[i], src[i * 32]);
      }
    }
  }
  return wk == 0;
}

}  // namespace ws

// FP4: e2m1 weights; NT8: n8 tiles of x rows per CTA (1: 8 rows, 2: 16); WN x WK warps; U steps
// per round; EPI: the epilogue (kEpiF32, kEpiBf16, kEpiSwiglu); SPLIT: blockIdx.z takes steps
// [z kb_per_split, + kb_per_split) of K (kb_per_split counts steps here) and the CTAs of one
// output tile meet as in templates/WeightGemm.cuh: fp32 partials in the workspace, an integer
// arrival count, and the last CTA to arrive sums the `splits` partials in split order (the same
// bits whichever CTA is last).
template <bool FP4, int NT8, int WN, int WK, int U, int EPI, bool SPLIT>
__device__ __forceinline__ void weight_gemm_stream(const WeightGemmParams& p) {
  constexpr int kMats = EPI == kEpiSwiglu ? 2 : 1;
  constexpr int kCols = FP4 ? 128 : 64;
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int grp = int(blockIdx.x) / p.tiles_per_group, j = int(blockIdx.x) % p.tiles_per_group;
  const int n_end = (grp + 1) * p.Ng;
  const int nw = grp * p.Ng + (j * WN + warp % WN) * 16;  // the warp's first weight row
  const int m0 = int(blockIdx.y) * 8 * NT8;
  const int steps = (p.Kg + kCols - 1) / kCols;
  const int s_begin = SPLIT ? int(blockIdx.z) * p.kb_per_split : 0;
  const int s_end = SPLIT ? min(steps, s_begin + p.kb_per_split) : steps;
  ws::Mat mats[kMats];
  mats[0] = ws::Mat{p.w, p.w_scale};
  if constexpr (kMats > 1) mats[kMats - 1] = ws::Mat{p.w_up, p.w_up_scale};
  const uint16_t* xrow[NT8];
#pragma unroll
  for (int nt = 0; nt < NT8; ++nt) {
    const int m = m0 + nt * 8 + g;
    xrow[nt] = m < p.M ? p.x + int64_t(m) * p.ldx + int64_t(grp) * p.Kg : nullptr;
  }
  float acc[kMats][NT8][4];
  const bool holds = ws::stream_core<FP4, NT8, WN, WK, U, kMats>(mats, nw, n_end, p.Kg, s_begin, s_end, xrow, acc);
  // The output elements this thread holds: weight row n (c >> 1 picks g or g + 8), x row m.
#define DI_WS_FOR_EACH_OUTPUT                                                      \
  _Pragma("unroll") for (int nt = 0; nt < NT8; ++nt) _Pragma("unroll") for (int c = 0; c < 4; ++c) \
    if (const int n = nw + g + 8 * (c >> 1), m = m0 + nt * 8 + 2 * t + (c & 1); n < n_end && m < p.M)
  if constexpr (!SPLIT) {
    if (!holds) return;
    DI_WS_FOR_EACH_OUTPUT store_pair<EPI>(p, m, n, false, acc[0][nt][c], 0.f, acc[kMats - 1][nt][c], 0.f);
  } else {
    const int Nw = kMats * p.N;
    if (holds) {
      DI_WS_FOR_EACH_OUTPUT {
        float* dst = p.partial + (int64_t(blockIdx.z) * p.M + m) * Nw + n;
        dst[0] = acc[0][nt][c];
        if constexpr (kMats > 1) dst[p.N] = acc[kMats - 1][nt][c];
      }
    }
    // Arrival: the partial stores are visible device-wide before the CTA counts itself; the CTA
    // that brings the tile's count to `splits` sums them all (its own too). Every thread of the
    // CTA reaches both barriers.
    __threadfence();
    __syncthreads();
    volatile int* last_arrival =
        reinterpret_cast<volatile int*>(qg::dynamic_smem() + ws::stream_smem_bytes(kMats, NT8, WN, WK));
    if (threadIdx.x == 0) {
      unsigned* count = p.arrivals + (int64_t(blockIdx.y) * gridDim.x + blockIdx.x);
      const unsigned before = atomicAdd(count, 1u);
      const bool last = before == unsigned(p.splits - 1);
      if (last) *count = 0u;  // every split has arrived: zero again for the next launch
      *last_arrival = last ? 1 : 0;
      __threadfence();
    }
    __syncthreads();
    if (*last_arrival == 0 || !holds) return;  // CTA-uniform, then warp-uniform
    const int64_t split_stride = int64_t(p.M) * Nw;
    DI_WS_FOR_EACH_OUTPUT {
      const float* src = p.partial + int64_t(m) * Nw + n;
      const float2 gs = sum_splits(src, split_stride, p.splits, false);
      float2 vs = make_float2(0.f, 0.f);
      if constexpr (kMats > 1) vs = sum_splits(src + p.N, split_stride, p.splits, false);
      store_pair<EPI>(p, m, n, false, gs.x, 0.f, vs.x, 0.f);
    }
  }
#undef DI_WS_FOR_EACH_OUTPUT
}

}  // namespace di
