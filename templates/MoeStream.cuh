// moe_experts' weight-streaming GEMMs for decode sizes (`stream = 1`): the w13 and w2 launches of
// templates/MoeExperts.cuh with the streaming core of templates/WeightStream.cuh instead of the
// cp.async tile. The route launch is the same (row blocks of BM = 8 * NT8 grouped rows); each
// CTA takes one row block (blockIdx.y; past the actual count it returns at once) and WN 16-row
// warp tiles of its expert's weight rows (blockIdx.x), so every active expert's bytes are spread
// over the grid's column tiles. x rows are gathered through the grouping (w13: token rows of x;
// w2: grouped rows of h); every output element has one writer. PIPE: the double-buffered rounds
// of ws::stream_core. The weights here are picked by the routing (another launch's output), so
// unlike weight_gemm's no weight byte can be requested before the entry's wait.
#pragma once
#include "MoeExperts.cuh"
#include "WeightStream.cuh"

namespace di {
namespace moe {

template <int NT8, int WN, int WK, int U, bool PIPE>
__device__ __forceinline__ void w13_stream(const MoeExpertsParams& p) {
  RowBlock rb;
  if (!row_block(p, rb)) return;  // CTA-uniform
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int nw = (int(blockIdx.x) * WN + warp % WN) * 16;
  const int64_t wbytes = int64_t(p.I) * (p.C / 2), sbytes = int64_t(p.I) * (p.C / 32);
  const ws::Mat mats[2] = {{p.w1 + rb.expert * wbytes, p.w1_scale + rb.expert * sbytes},
                           {p.w3 + rb.expert * wbytes, p.w3_scale + rb.expert * sbytes}};
  const uint16_t* xrow[NT8];
#pragma unroll
  for (int nt = 0; nt < NT8; ++nt) {
    const int r = nt * 8 + g;
    xrow[nt] = r < rb.rows ? p.x + int64_t(p.row_token[rb.start + r]) * p.C : nullptr;
  }
  const ws::Rows<true, 2> rows = ws::rows_of<true, 2>(mats, nw, p.I, p.C);
  ws::Round<U, 2> first;
  ws::load_round(rows, ws::first_step<WN, U>(rows), first);
  float acc[2][NT8][4];
  if (!ws::stream_core<true, NT8, WN, WK, U, 2, PIPE>(rows, first, xrow, acc)) return;
#pragma unroll
  for (int nt = 0; nt < NT8; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int n = nw + g + 8 * (c >> 1), r = nt * 8 + 2 * t + (c & 1);
      if (n >= p.I || r >= rb.rows) continue;
      const float wt = p.row_weight[rb.start + r];
      p.h[int64_t(rb.start + r) * p.I + n] = qg::swiglu_bf16(acc[0][nt][c], acc[1][nt][c], p.limit, wt);
    }
}

template <int NT8, int WN, int WK, int U, bool PIPE>
__device__ __forceinline__ void w2_stream(const MoeExpertsParams& p) {
  RowBlock rb;
  if (!row_block(p, rb)) return;  // CTA-uniform
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int nw = (int(blockIdx.x) * WN + warp % WN) * 16;
  const int64_t wbytes = int64_t(p.C) * (p.I / 2), sbytes = int64_t(p.C) * (p.I / 32);
  const ws::Mat mats[1] = {{p.w2 + rb.expert * wbytes, p.w2_scale + rb.expert * sbytes}};
  const uint16_t* xrow[NT8];
#pragma unroll
  for (int nt = 0; nt < NT8; ++nt) {
    const int r = nt * 8 + g;
    xrow[nt] = r < rb.rows ? p.h + int64_t(rb.start + r) * p.I : nullptr;
  }
  const ws::Rows<true, 1> rows = ws::rows_of<true, 1>(mats, nw, p.C, p.I);
  ws::Round<U, 1> first;
  ws::load_round(rows, ws::first_step<WN, U>(rows), first);
  float acc[1][NT8][4];
  if (!ws::stream_core<true, NT8, WN, WK, U, 1, PIPE>(rows, first, xrow, acc)) return;
#pragma unroll
  for (int nt = 0; nt < NT8; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int n = nw + g + 8 * (c >> 1), r = nt * 8 + 2 * t + (c & 1);
      if (n >= p.C || r >= rb.rows) continue;
      p.y[int64_t(p.row_dest[rb.start + r]) * p.C + n] = acc[0][nt][c];
    }
}


// The same GEMMs with the shared-memory ring (stream = 3; ws::ring_core): S slots of U steps per
// warp. The ring's first rounds are issued after the entry's wait (the expert is the routing's).
template <int NT8, int WN, int WK, int U, int S>
__device__ __forceinline__ void w13_ring(const MoeExpertsParams& p) {
  RowBlock rb;
  if (!row_block(p, rb)) return;  // CTA-uniform
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int nw = (int(blockIdx.x) * WN + warp % WN) * 16;
  const int64_t wbytes = int64_t(p.I) * (p.C / 2), sbytes = int64_t(p.I) * (p.C / 32);
  const ws::Mat mats[2] = {{p.w1 + rb.expert * wbytes, p.w1_scale + rb.expert * sbytes},
                           {p.w3 + rb.expert * wbytes, p.w3_scale + rb.expert * sbytes}};
  const ws::Rows<true, 2> rows = ws::rows_of<true, 2>(mats, nw, p.I, p.C);
  ws::Ring<true, U, S, 2> ring;
  ws::ring_of(ring, mats, nw, p.I, p.C, qg::dynamic_smem() + ws::stream_smem_bytes(2, NT8, WN, WK));
  ws::ring_prologue<WN, WK>(rows, ring);
  const uint16_t* xrow[NT8];
#pragma unroll
  for (int nt = 0; nt < NT8; ++nt) {
    const int r = nt * 8 + g;
    xrow[nt] = r < rb.rows ? p.x + int64_t(p.row_token[rb.start + r]) * p.C : nullptr;
  }
  float acc[2][NT8][4];
  if (!ws::ring_core<true, NT8, WN, WK, U, S, 2>(rows, ring, xrow, acc)) return;
#pragma unroll
  for (int nt = 0; nt < NT8; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int n = nw + g + 8 * (c >> 1), r = nt * 8 + 2 * t + (c & 1);
      if (n >= p.I || r >= rb.rows) continue;
      const float wt = p.row_weight[rb.start + r];
      p.h[int64_t(rb.start + r) * p.I + n] = qg::swiglu_bf16(acc[0][nt][c], acc[1][nt][c], p.limit, wt);
    }
}

template <int NT8, int WN, int WK, int U, int S>
__device__ __forceinline__ void w2_ring(const MoeExpertsParams& p) {
  RowBlock rb;
  if (!row_block(p, rb)) return;  // CTA-uniform
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int nw = (int(blockIdx.x) * WN + warp % WN) * 16;
  const int64_t wbytes = int64_t(p.C) * (p.I / 2), sbytes = int64_t(p.C) * (p.I / 32);
  const ws::Mat mats[1] = {{p.w2 + rb.expert * wbytes, p.w2_scale + rb.expert * sbytes}};
  const ws::Rows<true, 1> rows = ws::rows_of<true, 1>(mats, nw, p.C, p.I);
  ws::Ring<true, U, S, 1> ring;
  ws::ring_of(ring, mats, nw, p.C, p.I, qg::dynamic_smem() + ws::stream_smem_bytes(1, NT8, WN, WK));
  ws::ring_prologue<WN, WK>(rows, ring);
  const uint16_t* xrow[NT8];
#pragma unroll
  for (int nt = 0; nt < NT8; ++nt) {
    const int r = nt * 8 + g;
    xrow[nt] = r < rb.rows ? p.h + int64_t(rb.start + r) * p.I : nullptr;
  }
  float acc[1][NT8][4];
  if (!ws::ring_core<true, NT8, WN, WK, U, S, 1>(rows, ring, xrow, acc)) return;
#pragma unroll
  for (int nt = 0; nt < NT8; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int n = nw + g + 8 * (c >> 1), r = nt * 8 + 2 * t + (c & 1);
      if (n >= p.C || r >= rb.rows) continue;
      p.y[int64_t(p.row_dest[rb.start + r]) * p.C + n] = acc[0][nt][c];
    }
}

}  // namespace moe
}  // namespace di
