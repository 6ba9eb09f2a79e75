// weight_gemm: y[M, N] = x[M, K] . dequant(w)[N, K]^T with w in its checkpoint format (e4m3 +
// UE8M0 per 32x32 block, or e2m1 + UE8M0 per 1x32), fp32 accumulation, and the epilogues the
// model needs: f32 out, bf16 out, or the SwiGLU of a gate/up pair (the shared expert's w1/w3).
//
// Grid: x = output column tiles (groups x tiles per group; a tile never straddles a group),
// y = row tiles, z = K splits. With one split the tile's epilogue writes y directly. With S > 1
// splits each CTA writes its fp32 partial tile to the workspace and weight_gemm_reduce sums the
// S partials of every element in split order (no atomics: the result does not depend on
// scheduling) and applies the epilogue. The split count is part of the config, so every launch
// size is a function of the shapes (graph-capturable).
//
// Groups (wo_a): x is [M, G*Kg], w is [G*Ng, Kg]; output column n reads x's columns
// [(n / Ng) * Kg, (n / Ng + 1) * Kg).
#pragma once
#include "QuantGemmTile.cuh"
#include "params/WeightGemmParams.h"

namespace di {

constexpr int kEpiF32 = 0, kEpiBf16 = 1, kEpiSwiglu = 2;

template <bool FP4, int BM, int BN, int BK, int WM, int WN, int WK, int STAGES, int EPI, bool SPLIT>
__device__ __forceinline__ void weight_gemm_tile(const WeightGemmParams& p) {
  using T = qg::Tile<FP4, BM, BN, BK, WM, WN, WK, STAGES, EPI == kEpiSwiglu>;
  uint8_t* smem = qg::dynamic_smem();
  const int grp = int(blockIdx.x) / p.tiles_per_group, j = int(blockIdx.x) % p.tiles_per_group;
  const int n0 = grp * p.Ng + j * BN;
  const int n_end = min(n0 + BN, (grp + 1) * p.Ng);
  const int m0 = int(blockIdx.y) * BM;
  int64_t* a_src = reinterpret_cast<int64_t*>(smem + T::kTableOffset);
  for (int r = threadIdx.x; r < BM; r += T::kThreads)
    a_src[r] = m0 + r < p.M ? int64_t(m0 + r) * p.ldx + int64_t(grp) * p.Kg : -1;
  __syncthreads();

  qg::Operand ops[T::kMats];
  const int64_t row_bytes = FP4 ? p.Kg / 2 : p.Kg;
  const int scale_rows = FP4 ? p.N : (p.N + 31) / 32;
  ops[0] = qg::Operand{p.w, p.w_scale, row_bytes, p.k_blocks, scale_rows};
  if constexpr (T::kMats > 1) ops[T::kMats - 1] = qg::Operand{p.w_up, p.w_up_scale, row_bytes, p.k_blocks, scale_rows};

  const int kb_begin = SPLIT ? int(blockIdx.z) * p.kb_per_split : 0;
  const int kb_end = SPLIT ? min(p.k_blocks, kb_begin + p.kb_per_split) : p.k_blocks;
  float acc[T::kMats][T::MT][T::NT][4];
  qg::mainloop<T>(smem, a_src, p.x, p.Kg, ops, n0, n_end, kb_begin, kb_end, acc);
  if (int(threadIdx.x >> 5) >= WM * WN) return;  // the WK partials were summed into these warps

  const int Nw = EPI == kEpiSwiglu ? 2 * p.N : p.N;
  qg::for_each_pair<T>(acc, [&](int row, int col, float g0, float g1, float v0, float v1) {
    const int m = m0 + row, n = n0 + col;
    if (m >= p.M || n >= n_end) return;
    const bool pair = n + 1 < n_end;
    if constexpr (SPLIT) {
      float* dst = p.partial + (int64_t(blockIdx.z) * p.M + m) * Nw + n;
      if (pair) *reinterpret_cast<float2*>(dst) = make_float2(g0, g1);
      else dst[0] = g0;
      if constexpr (EPI == kEpiSwiglu) {
        if (pair) *reinterpret_cast<float2*>(dst + p.N) = make_float2(v0, v1);
        else dst[p.N] = v0;
      }
    } else if constexpr (EPI == kEpiF32) {
      float* dst = static_cast<float*>(p.y) + int64_t(m) * p.ldy + n;
      if (pair) *reinterpret_cast<float2*>(dst) = make_float2(g0, g1);
      else dst[0] = g0;
    } else {
      uint16_t* dst = static_cast<uint16_t*>(p.y) + int64_t(m) * p.ldy + n;
      const uint16_t h0 = EPI == kEpiSwiglu ? qg::swiglu_bf16(g0, v0, p.limit, 1.f) : f32_to_bf16(g0);
      if (pair) {
        const uint16_t h1 = EPI == kEpiSwiglu ? qg::swiglu_bf16(g1, v1, p.limit, 1.f) : f32_to_bf16(g1);
        *reinterpret_cast<uint32_t*>(dst) = uint32_t(h0) | (uint32_t(h1) << 16);
      } else {
        dst[0] = h0;
      }
    }
  });
}

// The sum of the `splits` partials at src, src + stride, ... in split order. The loads of up to
// 8 splits are issued before their adds (a split-order chain of dependent L2 round trips would
// cost more than the sums).
__device__ __forceinline__ float sum_splits(const float* src, int64_t stride, int splits) {
  float g = 0.f;
  for (int s0 = 0; s0 < splits; s0 += 8) {
    float v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = s0 + j < splits ? src[(s0 + j) * stride] : 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (s0 + j < splits) g = s0 + j == 0 ? v[0] : __fadd_rn(g, v[j]);
  }
  return g;
}

// Split-K: y[m, n] = epilogue(sum over splits s = 0, 1, ... of partial[s][m][n]), in that order.
template <int EPI>
__device__ __forceinline__ void weight_gemm_reduce(const WeightGemmParams& p) {
  const int64_t total = int64_t(p.M) * p.N;
  const int64_t Nw = EPI == kEpiSwiglu ? 2 * int64_t(p.N) : p.N;
  const int64_t split_stride = int64_t(p.M) * Nw;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = i / p.N, n = i - m * p.N;
    const float* src = p.partial + m * Nw + n;
    const float g = sum_splits(src, split_stride, p.splits);
    if constexpr (EPI == kEpiF32) {
      static_cast<float*>(p.y)[m * p.ldy + n] = g;
    } else if constexpr (EPI == kEpiBf16) {
      static_cast<uint16_t*>(p.y)[m * p.ldy + n] = f32_to_bf16(g);
    } else {
      const float v = sum_splits(src + p.N, split_stride, p.splits);
      static_cast<uint16_t*>(p.y)[m * p.ldy + n] = qg::swiglu_bf16(g, v, p.limit, 1.f);
    }
  }
}

}  // namespace di
