// weight_gemm's weight-streaming schedule for decode rows (M <= 16; `stream = 1`, 2, 3): the weights
// go from global memory straight into registers (16-byte non-coherent loads, no shared-memory
// staging, no cp.async pipeline, no split-K workspace), are decoded there, and meet the few rows
// of x on mma.sync m16n8k16 with the roles swapped: 16 weight rows are the A operand (M = 16 of
// the mma) and up to 8 rows of x per n8 tile the B operand, so at M <= 8 the tensor core wastes
// only the unused x columns and each weight is decoded exactly once.
//
// Work. A warp owns 16 weight rows (output columns) and walks K in steps of 64 bytes of a row
// (64 e4m3 or 128 e2m1 columns): in a step, thread (g, t) = (lane / 4, lane % 4) loads bytes
// [16t, 16t + 16) of rows g and g + 8 (one 16-byte load each: a quad reads 64 contiguous bytes of
// a row) and the scale byte of that chunk. A round issues U steps' loads before multiplying any
// of them, so 2 U 16-byte loads per thread (x2 for a SwiGLU pair) are in flight. WN warps of a
// CTA take neighbouring 16-row tiles; WK warps split K by rounds (warp wk takes steps
// [r WK U + wk U, + U) of round r) and their partial tiles are summed through shared memory in a
// fixed order (wk = 0, then 1, 2, ...). Without a K split over CTAs every output element has one
// writer; with one (SPLIT, for narrow shapes whose warp tiles leave SMs idle) the partials are
// summed by the last CTA to arrive in split order. Either way one summation order, whatever the
// CTA order.
//
// Rounds in flight. PIPE = false (config stream = 1): a round's loads, then its multiply.
// PIPE = true (stream = 2): round r + 1's loads are issued before round r is multiplied, so the
// memory pipe has bytes in flight while the warp decodes (two rounds of registers).
//
// Rounds through shared memory. stream = 3 (ws::ring_core, WeightGemmRing, moe's w13_ring /
// w2_ring): the same rounds, copied with cp.async into a per-warp ring of S slots, S - 1 rounds in
// flight while one multiplies (below, before ws::Ring).
//
// Before the wait. weight_gemm's entry issues the warp's first round before griddepcontrol.wait
// (WeightGemmStream below says why that is safe); moe_experts' cannot (its weights depend on the
// routing).
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

// The A registers of one chunk of one weight row: frag[i][r] is the bf16x2 of mma step i's
// register r (0: k slots 2t, 2t+1; 1: 2t+8, 2t+9). FIX = true: the whole decode with its fix-ups;
// FIX = false: the one-multiply decode alone, exact when the scale byte is within one multiply's
// range and (e4m3) no code is NaN, which multiply_round has checked for the whole warp.
template <bool FP4, bool FIX>
__device__ __forceinline__ void decode_chunk(const U32x4& w, uint32_t s, uint32_t (&frag)[FP4 ? 8 : 4][2]) {
  if constexpr (FP4) {
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t b[2][2];  // b[h][r]: nibbles (2h + r, 2h + r + 4)
      if constexpr (FIX) qw::e2m1_fragments(words[i], qw::e2m1_scale_factors(s), b);
      else qw::e2m1_decode(words[i], qw::e2m1_first_factor(s), b);
      frag[2 * i][0] = b[0][0], frag[2 * i][1] = b[0][1];
      frag[2 * i + 1][0] = b[1][0], frag[2 * i + 1][1] = b[1][1];
    }
  } else {
    uint32_t b[2][2];  // b[word][r]: bytes (r, r + 2) of the word
    if constexpr (FIX) {
      const qw::ScaleFactors f = qw::e4m3_scale_factors(s);
      qw::e4m3_fragments(w.x, w.y, f, b);
      frag[0][0] = b[0][0], frag[0][1] = b[0][1], frag[1][0] = b[1][0], frag[1][1] = b[1][1];
      qw::e4m3_fragments(w.z, w.w, f, b);
    } else {
      const uint32_t first = qw::e4m3_first_factor(s);
      qw::e4m3_decode(w.x, w.y, first, b);
      frag[0][0] = b[0][0], frag[0][1] = b[0][1], frag[1][0] = b[1][0], frag[1][1] = b[1][1];
      qw::e4m3_decode(w.z, w.w, first, b);
    }
    frag[2][0] = b[0][0], frag[2][1] = b[0][1], frag[3][0] = b[1][0], frag[3][1] = b[1][1];
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

// This thread's two weight rows (g and g + 8 of the warp's 16) of kMats matrices: where its
// chunk of step 0 and its scale bytes are, and the steps [s_begin, s_end) of K this CTA takes
// (all of them, or one K split's). Rows at or past the end are never read.
template <bool FP4, int kMats>
struct Rows {
  const uint8_t* wp[kMats][2];
  const uint8_t* sp[kMats][2];
  bool ok[2];
  int K, s_begin, s_end;
};

template <bool FP4, int kMats>
__device__ __forceinline__ Rows<FP4, kMats> rows_of(const Mat (&mats)[kMats], int nw, int n_end, int K) {
  const int lane = int(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  Rows<FP4, kMats> r;
  r.K = K;
  r.s_begin = 0;
  r.s_end = (K + (FP4 ? 128 : 64) - 1) / (FP4 ? 128 : 64);
  const int n_row[2] = {nw + g, nw + g + 8};
  r.ok[0] = n_row[0] < n_end;
  r.ok[1] = n_row[1] < n_end;
  const int64_t row_bytes = FP4 ? K / 2 : K;
  const int scale_cols = FP4 ? K / 32 : (K + 31) / 32;
#pragma unroll
  for (int m = 0; m < kMats; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int n = r.ok[h] ? n_row[h] : 0;  // a row past the end is never loaded
      r.wp[m][h] = mats[m].w + int64_t(n) * row_bytes + 16 * t;
      r.sp[m][h] = FP4 ? mats[m].scale + int64_t(n) * scale_cols + t
                       : mats[m].scale + int64_t(n / 32) * scale_cols + (t >> 1);
    }
  return r;
}

// The weight bytes and scale bytes of one round: U steps of both rows of every matrix.
template <int U, int kMats>
struct Round {
  U32x4 w[U][kMats][2];
  uint32_t sc[U][kMats][2];
};

// Issues round s0's loads (steps s0 .. s0 + U - 1). A chunk past K (the last step of a K that is
// not a multiple of the step), of a step at or past s_end (a round past the end, or the next
// split's) or of a row past the end is zero and never read, so a round past the end costs no
// memory traffic.
template <bool FP4, int U, int kMats>
__device__ __forceinline__ void load_round(const Rows<FP4, kMats>& r, int s0, Round<U, kMats>& b) {
  constexpr int kCols = FP4 ? 128 : 64, kChunk = FP4 ? 32 : 16, kScaleStep = FP4 ? 4 : 2;
  const int t = int(threadIdx.x) & 3;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const bool in = s0 + u < r.s_end && (s0 + u) * kCols + kChunk * t < r.K;
#pragma unroll
    for (int m = 0; m < kMats; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        b.w[u][m][h] = U32x4{0u, 0u, 0u, 0u};
        b.sc[u][m][h] = 0u;
        if (in && r.ok[h]) {
          b.w[u][m][h] = ld_ro_v4<true>(r.wp[m][h] + int64_t(s0 + u) * 64);
          b.sc[u][m][h] = __ldg(r.sp[m][h] + (s0 + u) * kScaleStep);
        }
      }
  }
}

// The warp's first round: warp wk of the CTA starts wk * U steps into the CTA's range.
template <int WN, int U, bool FP4, int kMats>
__device__ __forceinline__ int first_step(const Rows<FP4, kMats>& r) {
  return r.s_begin + (int(threadIdx.x) >> 5) / WN * U;
}

// Whether this lane's round needs the decode's fix-ups: a scale byte past one multiply's range or
// (e4m3) a NaN code. Chunks that were not loaded are zero and need none.
template <bool FP4, int U, int kMats>
__device__ __forceinline__ bool round_needs_fixups(const Round<U, kMats>& b) {
  uint32_t big = 0u, nan = 0u;
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int m = 0; m < kMats; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        big = b.sc[u][m][h] > big ? b.sc[u][m][h] : big;
        if constexpr (!FP4) {
          const U32x4& w = b.w[u][m][h];
          nan |= qw::e4m3_nan_probe(w.x) | qw::e4m3_nan_probe(w.y) | qw::e4m3_nan_probe(w.z) | qw::e4m3_nan_probe(w.w);
        }
      }
  return big > (FP4 ? qw::kE2m1OneMultiplyMax : qw::kE4m3OneMultiplyMax) || nan != 0u;
}

// The steps of a round (see multiply_round), decoded with or without the fix-ups.
template <bool FP4, bool FIX, int NT8, int U, int kMats>
__device__ __forceinline__ void multiply_steps(const Round<U, kMats>& b, int s0, int K, int s_end,
                                               const uint16_t* const (&xp)[NT8], float (&acc)[kMats][NT8][4]) {
  constexpr int kCols = FP4 ? 128 : 64, kChunk = FP4 ? 32 : 16, kMma = FP4 ? 8 : 4, kXv = FP4 ? 4 : 2;
  const int t = int(threadIdx.x) & 3;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int s = s0 + u;
    if (s >= s_end) break;  // warp-uniform: every lane has the same s
    const bool in = s * kCols + kChunk * t < K;
    uint32_t bx[NT8][kMma][2];
#pragma unroll
    for (int nt = 0; nt < NT8; ++nt) {
      U32x4 xv[kXv];
#pragma unroll
      for (int i = 0; i < kXv; ++i) {
        xv[i] = U32x4{0u, 0u, 0u, 0u};  // rows past the CTA's and columns past K multiply as zero
        if (in && xp[nt] != nullptr) xv[i] = ld_ro_v4<false>(xp[nt] + int64_t(s) * kCols + 8 * i);
      }
      x_fragments<FP4>(xv, bx[nt]);
    }
#pragma unroll
    for (int m = 0; m < kMats; ++m) {
      uint32_t lo[kMma][2], hi[kMma][2];
      decode_chunk<FP4, FIX>(b.w[u][m][0], b.sc[u][m][0], lo);
      decode_chunk<FP4, FIX>(b.w[u][m][1], b.sc[u][m][1], hi);
#pragma unroll
      for (int i = 0; i < kMma; ++i) {
        const uint32_t a[4] = {lo[i][0], hi[i][0], lo[i][1], hi[i][1]};
#pragma unroll
        for (int nt = 0; nt < NT8; ++nt) mma_bf16_16816(acc[m][nt], a, bx[nt][i], acc[m][nt]);
      }
    }
  }
}

// Multiplies round s0 (already loaded into b) with the x rows into acc; steps at or past s_end
// (the end of K or of this CTA's split) are skipped. The fix-ups of the decode (a second multiply
// for scale bytes past one multiply's range, NaN codes) are in a copy of the steps taken only
// when some lane of the warp needs them (one vote per round): a valid checkpoint never does, and
// their predicated-off instructions cost as many issue slots as the decode itself. Either copy
// gives the same bits where the fast one is taken.
template <bool FP4, int NT8, int U, int kMats>
__device__ __forceinline__ void multiply_round(const Round<U, kMats>& b, int s0, int K, int s_end,
                                               const uint16_t* const (&xp)[NT8], float (&acc)[kMats][NT8][4]) {
  if (__any_sync(0xFFFFFFFFu, round_needs_fixups<FP4>(b)))
    multiply_steps<FP4, true, NT8>(b, s0, K, s_end, xp, acc);
  else
    multiply_steps<FP4, false, NT8>(b, s0, K, s_end, xp, acc);
}

// The streaming core shared by weight_gemm and moe_experts: this warp's 16 weight rows (`rows`,
// from rows_of) times the CTA's x rows: xrow[nt] is this thread's row g of n8 tile nt (column 0),
// or null past the rows. `first` holds the warp's first round (load_round at first_step), which
// the caller issues early (weight_gemm: before griddepcontrol.wait). PIPE = false: a round's
// loads, then its multiply (nothing in flight while it multiplies); PIPE = true: round r + 1's
// loads are issued before round r is multiplied (a register double buffer: two rounds of
// registers, bytes in flight across rounds). On return the wk = 0 warps (the result is true)
// hold the CTA's sums: acc[m][nt] = the C fragment of weight rows g, g + 8 and x rows 2t, 2t + 1
// of tile nt. Every thread of the CTA must call it (it has a barrier when WK > 1).
template <bool FP4, int NT8, int WN, int WK, int U, int kMats, bool PIPE>
__device__ __forceinline__ bool stream_core(const Rows<FP4, kMats>& rows, const Round<U, kMats>& first,
                                            const uint16_t* const (&xrow)[NT8], float (&acc)[kMats][NT8][4]) {
  static_assert(NT8 == 1 || NT8 == 2, "8 or 16 rows of x per CTA");
  static_assert(U >= 1 && U <= 8 && WN >= 1 && WK >= 1 && WN * WK <= 16, "1..8 steps per round, at most 16 warps");
  constexpr int kChunk = FP4 ? 32 : 16;   // columns of a thread's 16-byte chunk
  constexpr int kAcc = kMats * NT8 * 4;
  constexpr int kStride = WK * U;         // steps from one of the warp's rounds to its next

  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int t = lane & 3;
  const int wn = warp % WN, wk = warp / WN;
  const int K = rows.K;
  const uint16_t* xp[NT8];
#pragma unroll
  for (int nt = 0; nt < NT8; ++nt) xp[nt] = xrow[nt] != nullptr ? xrow[nt] + kChunk * t : nullptr;

#pragma unroll
  for (int i = 0; i < kAcc; ++i) (&acc[0][0][0])[i] = 0.f;

  const int s_first = rows.s_begin + wk * U, s_end = rows.s_end;
  Round<U, kMats> a = first;
  if constexpr (!PIPE) {
#pragma unroll 1
    for (int s0 = s_first; s0 < s_end; s0 += kStride) {
      if (s0 != s_first) load_round(rows, s0, a);
      multiply_round<FP4, NT8>(a, s0, K, s_end, xp, acc);
    }
  } else {
    // Two rounds per trip, alternating buffers (no register copies): b is in flight while a is
    // multiplied, then a (two rounds on) while b is.
    Round<U, kMats> b;
#pragma unroll 1
    for (int s0 = s_first; s0 < s_end; s0 += 2 * kStride) {
      load_round(rows, s0 + kStride, b);
      multiply_round<FP4, NT8>(a, s0, K, s_end, xp, acc);
      if (s0 + kStride >= s_end) break;
      load_round(rows, s0 + 2 * kStride, a);
      multiply_round<FP4, NT8>(b, s0 + kStride, K, s_end, xp, acc);
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

// The shared-memory ring (config stream = 3): the same rows, rounds, fragments, K order, mma and
// reduction as stream_core, but each warp copies its rounds' weight bytes with cp.async (16 B,
// .cg: L2 only) into a private ring of S slots and keeps S - 1 rounds in flight while it
// multiplies one, so bytes stream continuously instead of a round's burst then its multiply.
// A slot holds, per matrix, the warp's 16 rows x U steps of 64 bytes; the copies run along rows
// (copy j of lane L: row (32 j + L) / 4U, 16-byte chunk (32 j + L) % 4U, so an instruction reads
// 4U contiguous chunks of 32 / 4U rows: 512 contiguous bytes of a row at U = 8) and each lane then
// reads its own fragment chunks (rows g, g + 8; chunk 4u + t) back with ld.shared, after the
// wait and a __syncwarp (the chunks were copied by other lanes). The chunk index is XORed with 4
// on odd rows (U >= 2) so the 8 lanes of a quarter warp (rows g, g + 1) hit disjoint banks.
// Scale bytes (a few per round) are loaded into registers when their round is issued, four to a
// register; the loop is unrolled by S so each slot's scale registers are fixed.
template <bool FP4, int U, int S, int kMats>
struct Ring {
  static constexpr int kMatBytes = 16 * 64 * U;
  static constexpr int kSlotBytes = kMats * kMatBytes;
  static constexpr int kWarpBytes = S * kSlotBytes;
  static constexpr int kScaleWords = (U * kMats * 2 + 3) / 4;
  uint8_t* smem;                 // this warp's S slots
  const uint8_t* w0[kMats];      // row nw of each matrix (the matrix itself when no row is valid)
  int64_t row_bytes;
  int rows_left;                 // valid rows from nw on (the warp loads min(16, rows_left))
  uint32_t sc[S][kScaleWords];   // the scale bytes of each slot's round, byte (u kMats + m) 2 + h
};

// Dynamic shared memory of the rings of `warps` warps (bytes); it follows the WK reduction's.
__host__ __device__ constexpr int ring_smem_bytes(int mats, int unroll, int stages, int warps) {
  return warps * stages * mats * unroll * 16 * 64;
}

template <int U>
__device__ __forceinline__ int ring_chunk(int row, int c) {
  return U >= 2 ? c ^ ((row & 1) << 2) : c;
}

// This warp's ring: `smem` is the CTA's ring area (after the WK reduction's shared memory).
template <bool FP4, int U, int S, int kMats>
__device__ __forceinline__ void ring_of(Ring<FP4, U, S, kMats>& q, const Mat (&mats)[kMats], int nw, int n_end,
                                        int K, uint8_t* smem) {
  q.smem = smem + (int(threadIdx.x) >> 5) * Ring<FP4, U, S, kMats>::kWarpBytes;
  q.row_bytes = FP4 ? K / 2 : K;
  q.rows_left = n_end - nw;
#pragma unroll
  for (int m = 0; m < kMats; ++m) q.w0[m] = q.rows_left > 0 ? mats[m].w + int64_t(nw) * q.row_bytes : mats[m].w;
}

// Issues round s0 into slot SLOT (its weight copies and scale loads) and commits one cp.async
// group, also when the round is past the end (an empty group keeps the wait counts uniform).
// Chunks past K, of steps at or past s_end or of rows past the end are zero-filled, never read.
template <int SLOT, bool FP4, int U, int S, int kMats>
__device__ __forceinline__ void ring_issue(const Rows<FP4, kMats>& r, Ring<FP4, U, S, kMats>& q, int s0) {
  using R = Ring<FP4, U, S, kMats>;
  constexpr int kCols = FP4 ? 128 : 64, kChunk = FP4 ? 32 : 16, kScaleStep = FP4 ? 4 : 2, kPerRow = 4 * U;
  const int lane = int(threadIdx.x) & 31, t = lane & 3;
  if (s0 < r.s_end) {  // warp-uniform
    uint8_t* slot = q.smem + SLOT * R::kSlotBytes;
#pragma unroll
    for (int j = 0; j < 2 * U; ++j) {
      const int row = (32 * j + lane) / kPerRow, c = (32 * j + lane) % kPerRow;
      const int s = s0 + c / 4;
      const bool in = row < q.rows_left && s < r.s_end && s * kCols + kChunk * (c & 3) < r.K;
      const int dst = row * 64 * U + ring_chunk<U>(row, c) * 16;
      const int64_t src = int64_t(row) * q.row_bytes + int64_t(s0) * 64 + 16 * c;
#pragma unroll
      for (int m = 0; m < kMats; ++m) cp_async_16(slot + m * R::kMatBytes + dst, in ? q.w0[m] + src : q.w0[m], in);
    }
  }
#pragma unroll
  for (int i = 0; i < R::kScaleWords; ++i) q.sc[SLOT][i] = 0u;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const bool in = s0 + u < r.s_end && (s0 + u) * kCols + kChunk * t < r.K;
#pragma unroll
    for (int m = 0; m < kMats; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = (u * kMats + m) * 2 + h;
        if (in && r.ok[h]) q.sc[SLOT][i / 4] |= uint32_t(__ldg(r.sp[m][h] + (s0 + u) * kScaleStep)) << (8 * (i % 4));
      }
  }
  cp_async_commit();
}

// The warp's first S - 1 rounds (weight_gemm issues them before griddepcontrol.wait): rounds
// s_first + i WK U, i < S - 1, into slots 0 .. S - 2.
template <int WN, int WK, bool FP4, int U, int S, int kMats>
__device__ __forceinline__ void ring_prologue(const Rows<FP4, kMats>& r, Ring<FP4, U, S, kMats>& q) {
  const int s0 = first_step<WN, U>(r);
  constexpr int kStride = WK * U;
  ring_issue<0>(r, q, s0);
  if constexpr (S > 2) ring_issue<1>(r, q, s0 + kStride);
  if constexpr (S > 3) ring_issue<2>(r, q, s0 + 2 * kStride);
  if constexpr (S > 4) ring_issue<3>(r, q, s0 + 3 * kStride);
  if constexpr (S > 5) ring_issue<4>(r, q, s0 + 4 * kStride);
  if constexpr (S > 6) ring_issue<5>(r, q, s0 + 5 * kStride);
  if constexpr (S > 7) ring_issue<6>(r, q, s0 + 6 * kStride);
}

// One round out of slot J: wait for it (S - 2 younger groups may stay in flight), refill the slot
// read one round ago with the round S - 1 ahead, then rebuild the round's registers from the
// slot and multiply them with multiply_round (stream_core's fragments and order).
template <int J, bool FP4, int NT8, int WK, int U, int S, int kMats>
__device__ __forceinline__ void ring_round(const Rows<FP4, kMats>& rows, Ring<FP4, U, S, kMats>& q, int s0,
                                           const uint16_t* const (&xp)[NT8], float (&acc)[kMats][NT8][4]) {
  using R = Ring<FP4, U, S, kMats>;
  cp_async_wait<S - 2>();
  __syncwarp();  // slot J's copies by other lanes are visible; every lane has read slot J - 1
  ring_issue<(J + S - 1) % S>(rows, q, s0 + (S - 1) * WK * U);
  const int lane = int(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  const uint8_t* slot = q.smem + J * R::kSlotBytes;
  Round<U, kMats> b;
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int m = 0; m < kMats; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = g + 8 * h;
        b.w[u][m][h] =
            *reinterpret_cast<const U32x4*>(slot + m * R::kMatBytes + row * 64 * U + ring_chunk<U>(row, 4 * u + t) * 16);
        const int i = (u * kMats + m) * 2 + h;
        b.sc[u][m][h] = (q.sc[J][i / 4] >> (8 * (i % 4))) & 0xFFu;
      }
  multiply_round<FP4, NT8>(b, s0, rows.K, rows.s_end, xp, acc);
}

// Rounds i0 + J .. i0 + S - 1 of the warp (those before `rounds`), slot J first.
template <int J, bool FP4, int NT8, int WK, int U, int S, int kMats>
__device__ __forceinline__ void ring_rounds(const Rows<FP4, kMats>& rows, Ring<FP4, U, S, kMats>& q, int s_first,
                                            int i0, int rounds, const uint16_t* const (&xp)[NT8],
                                            float (&acc)[kMats][NT8][4]) {
  if constexpr (J < S) {
    if (i0 + J >= rounds) return;  // warp-uniform
    ring_round<J, FP4, NT8, WK>(rows, q, s_first + (i0 + J) * WK * U, xp, acc);
    ring_rounds<J + 1, FP4, NT8, WK>(rows, q, s_first, i0, rounds, xp, acc);
  }
}

// stream_core with the ring (stream = 3): `q` holds the warp's first S - 1 rounds (ring_prologue,
// issued by the caller). Returns as stream_core does, with the same sums in the same order.
template <bool FP4, int NT8, int WN, int WK, int U, int S, int kMats>
__device__ __forceinline__ bool ring_core(const Rows<FP4, kMats>& rows, Ring<FP4, U, S, kMats>& q,
                                          const uint16_t* const (&xrow)[NT8], float (&acc)[kMats][NT8][4]) {
  static_assert(NT8 == 1 || NT8 == 2, "8 or 16 rows of x per CTA");
  static_assert(U >= 1 && U <= 8 && S >= 2 && S <= 8 && WN >= 1 && WK >= 1 && WN * WK <= 16,
                "1..8 steps per round, 2..8 slots, at most 16 warps");
  constexpr int kChunk = FP4 ? 32 : 16;
  constexpr int kAcc = kMats * NT8 * 4;
  constexpr int kStride = WK * U;
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int t = lane & 3;
  const int wn = warp % WN, wk = warp / WN;
  const uint16_t* xp[NT8];
#pragma unroll
  for (int nt = 0; nt < NT8; ++nt) xp[nt] = xrow[nt] != nullptr ? xrow[nt] + kChunk * t : nullptr;
#pragma unroll
  for (int i = 0; i < kAcc; ++i) (&acc[0][0][0])[i] = 0.f;

  const int s_first = rows.s_begin + wk * U, s_end = rows.s_end;
  const int rounds = s_first < s_end ? (s_end - s_first + kStride - 1) / kStride : 0;
#pragma unroll 1
  for (int i0 = 0; i0 < rounds; i0 += S) ring_rounds<0, FP4, NT8, WK>(rows, q, s_first, i0, rounds, xp, acc);
  cp_async_wait<0>();  // only empty groups (rounds past the end) can be left

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

// weight_gemm's streaming kernel in two phases around the grid dependency wait. FP4: e2m1
// weights; NT8: n8 tiles of x rows per CTA (1: 8 rows, 2: 16); WN x WK warps; U steps per round;
// EPI: the epilogue (kEpiF32, kEpiBf16, kEpiSwiglu); PIPE: the double-buffered rounds; SPLIT: K
// split over the grid's z CTAs (p.kb_per_split k32 blocks, a whole number of steps, each):
// every CTA writes its fp32 partial tile to the workspace and counts itself on the tile's
// arrival counter; the last to arrive sums the partials in split order (sum_splits: the same bits
// whichever CTA is last), applies the epilogue and zeroes the counter again (as
// weight_gemm_tile does).
//
// Before the wait. The constructor issues the warp's first round of weight loads (codes and
// scale bytes) and computes addresses from the kernel parameters only. That is safe under
// programmatic dependent launch because the weights are never written by a kernel of the
// stream: the runtime uploads them once at load time (a copy that completes before any forward
// kernel launches), and the previous kernel in the stream (the one still draining) neither reads
// nor writes them. Everything another kernel writes (x) is read only in run(), after
// griddepcontrol.wait, and every global write (y) is there too. Below sm_90 the wait is empty
// and the kernel is never launched programmatically, so the order is plain program order.
template <bool FP4, int NT8, int WN, int WK, int U, int EPI, bool PIPE, bool SPLIT = false>
struct WeightGemmStream {
  static constexpr int kMats = EPI == kEpiSwiglu ? 2 : 1;
  static constexpr int kStepBlocks = FP4 ? 4 : 2;  // k32 blocks per step
  int grp, nw, n_end;
  ws::Rows<FP4, kMats> rows;
  ws::Round<U, kMats> first;

  __device__ __forceinline__ explicit WeightGemmStream(const WeightGemmParams& p) {
    const int warp = int(threadIdx.x) >> 5;
    grp = int(blockIdx.x) / p.tiles_per_group;
    const int j = int(blockIdx.x) % p.tiles_per_group;
    n_end = (grp + 1) * p.Ng;
    nw = grp * p.Ng + (j * WN + warp % WN) * 16;  // the warp's first weight row
    ws::Mat mats[kMats];
    mats[0] = ws::Mat{p.w, p.w_scale};
    if constexpr (kMats > 1) mats[kMats - 1] = ws::Mat{p.w_up, p.w_up_scale};
    rows = ws::rows_of<FP4, kMats>(mats, nw, n_end, p.Kg);
    if constexpr (SPLIT) {
      const int per = p.kb_per_split / kStepBlocks;
      rows.s_begin = int(blockIdx.z) * per;
      rows.s_end = min(rows.s_end, rows.s_begin + per);
    }
    ws::load_round(rows, ws::first_step<WN, U>(rows), first);
  }

  // f(nt, c, m, n) for each element of this thread's C fragments inside [M) x [n_end): fragment
  // (nt, c) is weight row nw + g + 8 (c / 2) and x row m0 + 8 nt + 2 t + c % 2.
  template <class F>
  __device__ __forceinline__ void for_each_output(int m0, int M, F f) const {
    const int lane = int(threadIdx.x) & 31;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int nt = 0; nt < NT8; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int n = nw + g + 8 * (c >> 1), m = m0 + nt * 8 + 2 * t + (c & 1);
        if (n < n_end && m < M) f(nt, c, m, n);
      }
  }

  // After the wait: x, the multiply, y.
  __device__ __forceinline__ void run(const WeightGemmParams& p) const {
    const int g = (int(threadIdx.x) & 31) >> 2;
    const int m0 = int(blockIdx.y) * 8 * NT8;
    const uint16_t* xrow[NT8];
#pragma unroll
    for (int nt = 0; nt < NT8; ++nt) {
      const int m = m0 + nt * 8 + g;
      xrow[nt] = m < p.M ? p.x + int64_t(m) * p.ldx + int64_t(grp) * p.Kg : nullptr;
    }
    float acc[kMats][NT8][4];
    const bool holds = ws::stream_core<FP4, NT8, WN, WK, U, kMats, PIPE>(rows, first, xrow, acc);
    if constexpr (!SPLIT) {
      if (!holds) return;
      for_each_output(m0, p.M, [&](int nt, int c, int m, int n) {
        store_pair<EPI>(p, m, n, false, acc[0][nt][c], 0.f, acc[kMats - 1][nt][c], 0.f);
      });
    } else {
      const int Nw = kMats > 1 ? 2 * p.N : p.N;  // a SwiGLU pair's up sums at column + N
      if (holds)
        for_each_output(m0, p.M, [&](int nt, int c, int m, int n) {
          float* dst = p.partial + (int64_t(blockIdx.z) * p.M + m) * Nw + n;
          dst[0] = acc[0][nt][c];
          if constexpr (kMats > 1) dst[p.N] = acc[1][nt][c];
        });
      // Arrival (common/Arrival.cuh): every thread of the CTA calls it (the wk > 0 warps hold no
      // tile). The verdict goes after the WK reduction's shared memory (read only before this).
      volatile int* verdict =
          reinterpret_cast<volatile int*>(qg::dynamic_smem() + ws::stream_smem_bytes(kMats, NT8, WN, WK));
      const bool last = cta_arrived_last(p.arrivals + (int64_t(blockIdx.y) * gridDim.x + blockIdx.x),
                                         unsigned(p.splits), verdict);
      if (!last || !holds) return;  // CTA-uniform, then warp-uniform
      const int64_t stride = int64_t(p.M) * Nw;
      for_each_output(m0, p.M, [&](int, int, int m, int n) {
        const float* src = p.partial + int64_t(m) * Nw + n;
        const float gsum = sum_splits(src, stride, p.splits, false).x;
        const float vsum = kMats > 1 ? sum_splits(src + p.N, stride, p.splits, false).x : 0.f;
        store_pair<EPI>(p, m, n, false, gsum, 0.f, vsum, 0.f);
      });
    }
  }
};

// weight_gemm with the shared-memory ring (stream = 3; ws::ring_core): S slots of U steps per
// warp, no K split. The constructor issues the warp's first S - 1 rounds (weight copies into
// shared memory and scale loads) before griddepcontrol.wait, for WeightGemmStream's reasons:
// weights only, never written by a kernel of the stream; shared memory is the CTA's own.
template <bool FP4, int NT8, int WN, int WK, int U, int S, int EPI>
struct WeightGemmRing {
  static constexpr int kMats = EPI == kEpiSwiglu ? 2 : 1;
  int grp, nw, n_end;
  ws::Rows<FP4, kMats> rows;
  ws::Ring<FP4, U, S, kMats> ring;

  __device__ __forceinline__ explicit WeightGemmRing(const WeightGemmParams& p) {
    const int warp = int(threadIdx.x) >> 5;
    grp = int(blockIdx.x) / p.tiles_per_group;
    const int j = int(blockIdx.x) % p.tiles_per_group;
    n_end = (grp + 1) * p.Ng;
    nw = grp * p.Ng + (j * WN + warp % WN) * 16;
    ws::Mat mats[kMats];
    mats[0] = ws::Mat{p.w, p.w_scale};
    if constexpr (kMats > 1) mats[kMats - 1] = ws::Mat{p.w_up, p.w_up_scale};
    rows = ws::rows_of<FP4, kMats>(mats, nw, n_end, p.Kg);
    ws::ring_of(ring, mats, nw, n_end, p.Kg, qg::dynamic_smem() + ws::stream_smem_bytes(kMats, NT8, WN, WK));
    ws::ring_prologue<WN, WK>(rows, ring);
  }

  // After the wait: x, the multiply, y (one writer per element).
  __device__ __forceinline__ void run(const WeightGemmParams& p) {
    const int lane = int(threadIdx.x) & 31;
    const int g = lane >> 2, t = lane & 3;
    const int m0 = int(blockIdx.y) * 8 * NT8;
    const uint16_t* xrow[NT8];
#pragma unroll
    for (int nt = 0; nt < NT8; ++nt) {
      const int m = m0 + nt * 8 + g;
      xrow[nt] = m < p.M ? p.x + int64_t(m) * p.ldx + int64_t(grp) * p.Kg : nullptr;
    }
    float acc[kMats][NT8][4];
    if (!ws::ring_core<FP4, NT8, WN, WK, U, S, kMats>(rows, ring, xrow, acc)) return;
#pragma unroll
    for (int nt = 0; nt < NT8; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int n = nw + g + 8 * (c >> 1), m = m0 + nt * 8 + 2 * t + (c & 1);
        if (n < n_end && m < p.M) store_pair<EPI>(p, m, n, false, acc[0][nt][c], 0.f, acc[kMats - 1][nt][c], 0.f);
      }
  }
};

}  // namespace di
