// weight_gemm: y[M, N] = x[M, K] . dequant(w)[N, K]^T with w in its checkpoint format (e4m3 +
// UE8M0 per 32x32 block, or e2m1 + UE8M0 per 1x32), fp32 accumulation, and the epilogues the
// model needs: f32 out, bf16 out, or the SwiGLU of a gate/up pair (the shared expert's w1/w3).
//
// Grid: x = output column tiles (groups x tiles per group; a tile never straddles a group),
// y = row tiles, z = K splits. One launch either way. With one split the tile's epilogue writes y
// directly. With S > 1 splits each CTA writes its fp32 partial tile to the workspace and counts
// itself on the tile's arrival counter (an integer atomic in the "__zeroed" region); the CTA
// that arrives last sums the S partials of every element in split order (partial 0, then one
// fp32 add per split: no float atomics, so the result does not depend on which CTA is last),
// applies the epilogue and sets the counter back to zero, leaving the region as it found it.
// The split count is part of the config, so every launch size is a function of the shapes
// (graph-capturable).
//
// Groups (wo_a): x is [M, G*Kg], w is [G*Ng, Kg]; output column n reads x's columns
// [(n / Ng) * Kg, (n / Ng + 1) * Kg).
#pragma once
#include "QuantGemmTile.cuh"
#include "common/Arrival.cuh"
#include "params/WeightGemmParams.h"

namespace di {

constexpr int kEpiF32 = 0, kEpiBf16 = 1, kEpiSwiglu = 2;

// The sum of the `splits` partials at src, src + stride, ... in split order (partial 0 first, then
// one fp32 add per split: the same bits whoever arrives last). Read through L2 (__ldcg): other
// CTAs wrote them in this launch. The loads of up to 8 splits are issued before their adds.
__device__ __forceinline__ float2 sum_splits(const float* src, int64_t stride, int splits, bool pair) {
  float2 g = make_float2(0.f, 0.f);
  for (int s0 = 0; s0 < splits; s0 += 8) {
    float2 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      v[j] = make_float2(0.f, 0.f);
      if (s0 + j < splits) {
        const float* at = src + (s0 + j) * stride;
        if (pair) v[j] = __ldcg(reinterpret_cast<const float2*>(at));
        else v[j].x = __ldcg(at);
      }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (s0 + j < splits) {
        g.x = s0 + j == 0 ? v[0].x : __fadd_rn(g.x, v[j].x);
        g.y = s0 + j == 0 ? v[0].y : __fadd_rn(g.y, v[j].y);
      }
  }
  return g;
}

// The epilogue of one output pair (row m, columns n and n + 1 when `pair`).
template <int EPI>
__device__ __forceinline__ void store_pair(const WeightGemmParams& p, int m, int n, bool pair, float g0, float g1,
                                           float v0, float v1) {
  if constexpr (EPI == kEpiF32) {
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
}

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
  // The WK partials were summed into the wk = 0 warps; only they hold the tile.
  const bool holds_tile = int(threadIdx.x >> 5) < WM * WN;

  if constexpr (!SPLIT) {
    if (!holds_tile) return;
    qg::for_each_pair<T>(acc, [&](int row, int col, float g0, float g1, float v0, float v1) {
      const int m = m0 + row, n = n0 + col;
      if (m >= p.M || n >= n_end) return;
      store_pair<EPI>(p, m, n, n + 1 < n_end, g0, g1, v0, v1);
    });
  } else {
    const int Nw = EPI == kEpiSwiglu ? 2 * p.N : p.N;
    if (holds_tile)
      qg::for_each_pair<T>(acc, [&](int row, int col, float g0, float g1, float v0, float v1) {
        const int m = m0 + row, n = n0 + col;
        if (m >= p.M || n >= n_end) return;
        const bool pair = n + 1 < n_end;
        float* dst = p.partial + (int64_t(blockIdx.z) * p.M + m) * Nw + n;
        if (pair) *reinterpret_cast<float2*>(dst) = make_float2(g0, g1);
        else dst[0] = g0;
        if constexpr (EPI == kEpiSwiglu) {
          if (pair) *reinterpret_cast<float2*>(dst + p.N) = make_float2(v0, v1);
          else dst[p.N] = v0;
        }
      });
    // Arrival (common/Arrival.cuh): the CTA that brings the tile's count to `splits` sums all the
    // partials (its own too). The row table is not read after the main loop: its first word carries
    // the verdict (no static shared memory, which would count against the 48 KB the dynamic size
    // was checked against).
    volatile int* verdict = reinterpret_cast<volatile int*>(smem + T::kTableOffset);
    const bool last = cta_arrived_last(p.arrivals + (int64_t(blockIdx.y) * gridDim.x + blockIdx.x),
                                       unsigned(p.splits), verdict);
    if (!last || !holds_tile) return;  // CTA-uniform, then warp-uniform
    // The same threads own the same elements in every split's CTA, so each thread sums exactly
    // the partials it would have written.
    const int64_t split_stride = int64_t(p.M) * Nw;
    qg::for_each_pair<T>(acc, [&](int row, int col, float, float, float, float) {
      const int m = m0 + row, n = n0 + col;
      if (m >= p.M || n >= n_end) return;
      const bool pair = n + 1 < n_end;
      const float* src = p.partial + int64_t(m) * Nw + n;
      const float2 g = sum_splits(src, split_stride, p.splits, pair);
      float2 v = make_float2(0.f, 0.f);
      if constexpr (EPI == kEpiSwiglu) v = sum_splits(src + p.N, split_stride, p.splits, pair);
      store_pair<EPI>(p, m, n, pair, g.x, g.y, v.x, v.y);
    });
  }
}

}  // namespace di
