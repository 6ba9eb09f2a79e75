// moe_experts (docs/model.md §7): the routed experts of the MoE sublayer, grouped by expert on the
// device, over e2m1 expert weights (templates/QuantGemmTile.cuh). Three launches whose sizes
// depend only on T, k, E and the config (graph-capturable, no host round trip):
//
// 1. moe_route (one CTA of 32 warps): a stable counting sort of the T*k (token, rank) entries by
//    expert. Warp w owns a contiguous range of entries (up to 32 warps, one per 32 entries at
//    least) and counts it per expert (match.any per 32 entries, the group's first lane adds); per
//    expert, the warps' counts become running
//    sums, the experts' totals an exclusive scan (the grouped row offsets), and every expert's
//    rows are cut into row blocks of BM (the tile list: expert, first row, rows); then each
//    warp walks its range again and places every entry at its expert's next row. Rows of an
//    expert are thus in entry order (token-major, rank-minor) whatever the scheduling. Entries
//    whose id is outside [0, E) get a zero y row here and no grouped row.
// 2. moe_w13: one CTA per (column tile of I, row block): rows are gathered from x through the
//    grouped order; w1 and w3 tiles of the block's expert are multiplied together and the
//    epilogue writes h = bf16(weight * silu(min(g, limit)) * clamp(v, -limit, limit)) in grouped
//    row order. The grid has max_row_blocks rows (an upper bound from T, k, E); CTAs past the
//    actual count return at once, so empty experts cost nothing.
// 3. moe_w2: one CTA per (column tile of C, row block): y[t*k + r] = h_row . w2[e]^T, each y row
//    written by exactly one tile column (no atomics: results do not depend on scheduling).
#pragma once
#include "QuantGemmTile.cuh"
#include "params/MoeExpertsParams.h"

namespace di {
namespace moe {

constexpr int kRouteWarps = 32;
constexpr int kRouteThreads = kRouteWarps * 32;

// Exclusive scan of one value per thread of the CTA (kRouteThreads threads); returns the
// thread's prefix and leaves the CTA total in *total. `sums` holds kRouteWarps ints.
__device__ __forceinline__ int cta_exclusive_scan(int v, int* sums, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int inc = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int u = __shfl_up_sync(0xFFFFFFFFu, inc, o);
    if (lane >= o) inc += u;
  }
  if (lane == 31) sums[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    int s = sums[lane];
    int sinc = s;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int u = __shfl_up_sync(0xFFFFFFFFu, sinc, o);
      if (lane >= o) sinc += u;
    }
    sums[lane] = sinc - s;  // exclusive prefix of warp sums
    if (lane == 31) sums[32] = sinc;
  }
  __syncthreads();
  const int r = sums[warp] + inc - v;
  *total = sums[32];
  __syncthreads();  // sums is reused by the next scan
  return r;
}

template <int BM>
__device__ __forceinline__ void route(const MoeExpertsParams& p) {
  __shared__ int sums[kRouteWarps + 1];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n = p.entries, E = p.E;
  // Warps that own entries (a decode step's few entries need few): the per-expert sums of step 2
  // walk only theirs.
  const int warps = min(kRouteWarps, max(1, (n + 31) / 32));
  const int per = (n + warps - 1) / warps;
  const int beg = warp < warps ? min(n, warp * per) : n, end = warp < warps ? min(n, beg + per) : n;
  int32_t* cnt = p.counts + int64_t(warp) * E;
  if (warp < warps)
    for (int e = lane; e < E; e += 32) cnt[e] = 0;
  __syncwarp();

  // 1. Per-warp counts; zero rows for entries that select no expert.
  for (int base = beg; base < end; base += 32) {
    const int i = base + lane;
    const bool in = i < end;
    const int e = in ? p.ids[i] : -1;
    const bool valid = in && e >= 0 && e < E;
    const unsigned same = __match_any_sync(0xFFFFFFFFu, valid ? e : -1);
    if (valid && (__ffs(same) - 1) == lane) cnt[e] += __popc(same);
    __syncwarp();
    unsigned none = __ballot_sync(0xFFFFFFFFu, in && !valid);
    while (none) {
      const int l = __ffs(none) - 1;
      none &= none - 1;
      float4* row = reinterpret_cast<float4*>(p.y + int64_t(base + l) * p.C);
      for (int c = lane; c < p.C / 4; c += 32) row[c] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  __syncthreads();

  // 2. Per expert: running sums over the warps (in warp order), then the experts' offsets and
  // row blocks (exclusive scans over experts, in chunks of the CTA's threads).
  int carry_rows = 0, carry_blocks = 0;
  for (int e0 = 0; e0 < E; e0 += kRouteThreads) {
    const int e = e0 + int(threadIdx.x);
    int total = 0;
    if (e < E)
      for (int w = 0; w < warps; ++w) {
        const int c = p.counts[int64_t(w) * E + e];
        p.counts[int64_t(w) * E + e] = total;
        total += c;
      }
    const int blocks = (total + BM - 1) / BM;
    int rows_sum = 0, blocks_sum = 0;
    const int first_row = carry_rows + cta_exclusive_scan(total, sums, &rows_sum);
    const int first_block = carry_blocks + cta_exclusive_scan(blocks, sums, &blocks_sum);
    if (e < E) {
      for (int w = 0; w < warps; ++w) p.counts[int64_t(w) * E + e] += first_row;
      for (int b = 0; b < blocks; ++b) {
        p.rb_expert[first_block + b] = e;
        p.rb_start[first_block + b] = first_row + b * BM;
        p.rb_rows[first_block + b] = min(BM, total - b * BM);
      }
    }
    carry_rows += rows_sum;
    carry_blocks += blocks_sum;
  }
  if (threadIdx.x == 0) *p.num_row_blocks = carry_blocks;
  __syncthreads();

  // 3. Place every entry at its expert's next row, in entry order.
  for (int base = beg; base < end; base += 32) {
    const int i = base + lane;
    const bool in = i < end;
    const int e = in ? p.ids[i] : -1;
    const bool valid = in && e >= 0 && e < E;
    const unsigned same = __match_any_sync(0xFFFFFFFFu, valid ? e : -1);
    int first = 0;
    if (valid) {
      first = cnt[e];
      const int pos = first + __popc(same & ((1u << lane) - 1u));
      p.row_token[pos] = i / p.k;
      p.row_dest[pos] = i;
      p.row_weight[pos] = p.weights[i];
    }
    __syncwarp();
    if (valid && (__ffs(same) - 1) == lane) cnt[e] = first + __popc(same);
    __syncwarp();
  }
}

// The row block of this CTA (blockIdx.y), or false when it is past the actual count.
struct RowBlock {
  int expert, start, rows;
};
__device__ __forceinline__ bool row_block(const MoeExpertsParams& p, RowBlock& rb) {
  const int b = int(blockIdx.y);
  if (b >= *p.num_row_blocks) return false;
  rb.expert = p.rb_expert[b];
  rb.start = p.rb_start[b];
  rb.rows = p.rb_rows[b];
  return true;
}

template <int BM, int BN, int BK, int WM, int WN, int WK, int STAGES>
__device__ __forceinline__ void w13(const MoeExpertsParams& p) {
  using T = qg::Tile<true, BM, BN, BK, WM, WN, WK, STAGES, true>;
  uint8_t* smem = qg::dynamic_smem();
  RowBlock rb;
  if (!row_block(p, rb)) return;  // CTA-uniform
  int64_t* a_src = reinterpret_cast<int64_t*>(smem + T::kTableOffset);
  float* weight = reinterpret_cast<float*>(smem + T::kTableOffset + BM * 8);
  for (int r = threadIdx.x; r < BM; r += T::kThreads) {
    a_src[r] = r < rb.rows ? int64_t(p.row_token[rb.start + r]) * p.C : -1;
    weight[r] = r < rb.rows ? p.row_weight[rb.start + r] : 0.f;
  }
  __syncthreads();
  const int n0 = int(blockIdx.x) * BN, n_end = min(n0 + BN, p.I);
  const int64_t wbytes = int64_t(p.I) * (p.C / 2), sbytes = int64_t(p.I) * (p.C / 32);
  const qg::Operand ops[2] = {
      {p.w1 + rb.expert * wbytes, p.w1_scale + rb.expert * sbytes, p.C / 2, p.C / 32, p.I},
      {p.w3 + rb.expert * wbytes, p.w3_scale + rb.expert * sbytes, p.C / 2, p.C / 32, p.I}};
  float acc[2][T::MT][T::NT][4];
  qg::mainloop<T>(smem, a_src, p.x, p.C, ops, n0, n_end, 0, p.C / 32, acc);
  if (int(threadIdx.x >> 5) >= WM * WN) return;
  qg::for_each_pair<T>(acc, [&](int row, int col, float g0, float g1, float v0, float v1) {
    const int n = n0 + col;
    if (row >= rb.rows || n >= n_end) return;
    uint16_t* dst = p.h + int64_t(rb.start + row) * p.I + n;
    const float wt = weight[row];
    const uint16_t h0 = qg::swiglu_bf16(g0, v0, p.limit, wt);
    if (n + 1 < n_end) {
      const uint16_t h1 = qg::swiglu_bf16(g1, v1, p.limit, wt);
      *reinterpret_cast<uint32_t*>(dst) = uint32_t(h0) | (uint32_t(h1) << 16);
    } else {
      dst[0] = h0;
    }
  });
}

template <int BM, int BN, int BK, int WM, int WN, int WK, int STAGES>
__device__ __forceinline__ void w2(const MoeExpertsParams& p) {
  using T = qg::Tile<true, BM, BN, BK, WM, WN, WK, STAGES, false>;
  uint8_t* smem = qg::dynamic_smem();
  RowBlock rb;
  if (!row_block(p, rb)) return;  // CTA-uniform
  int64_t* a_src = reinterpret_cast<int64_t*>(smem + T::kTableOffset);
  int32_t* dest = reinterpret_cast<int32_t*>(smem + T::kTableOffset + BM * 8);
  for (int r = threadIdx.x; r < BM; r += T::kThreads) {
    a_src[r] = r < rb.rows ? int64_t(rb.start + r) * p.I : -1;
    dest[r] = r < rb.rows ? p.row_dest[rb.start + r] : 0;
  }
  __syncthreads();
  const int n0 = int(blockIdx.x) * BN, n_end = min(n0 + BN, p.C);
  const int64_t wbytes = int64_t(p.C) * (p.I / 2), sbytes = int64_t(p.C) * (p.I / 32);
  const qg::Operand ops[1] = {{p.w2 + rb.expert * wbytes, p.w2_scale + rb.expert * sbytes, p.I / 2, p.I / 32, p.C}};
  float acc[1][T::MT][T::NT][4];
  qg::mainloop<T>(smem, a_src, p.h, p.I, ops, n0, n_end, 0, p.I / 32, acc);
  if (int(threadIdx.x >> 5) >= WM * WN) return;
  qg::for_each_pair<T>(acc, [&](int row, int col, float g0, float g1, float, float) {
    const int n = n0 + col;
    if (row >= rb.rows || n >= n_end) return;
    float* dst = p.y + int64_t(dest[row]) * p.C + n;
    if (n + 1 < n_end) *reinterpret_cast<float2*>(dst) = make_float2(g0, g1);
    else dst[0] = g0;
  });
}

}  // namespace moe
}  // namespace di
