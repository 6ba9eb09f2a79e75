// combine_topk_swa (docs/ops.md §4): for each prefill query token, one row of indices into the
// gathered workspace: [valid top-k rows | sliding-window rows | -1 ...] and its length.
//
// One CTA per token. Thread q of the CTA owns the 16-byte chunks q, q+THREADS, ... of the row and
// computes each of its four entries from the region it falls in, so the three disjoint regions
// are filled with plain vector stores and no synchronization between warps. The only shared
// step is finding the token's request, done once per CTA: every thread tests the
// query_start_loc intervals of a few requests in parallel (one memory latency, not a chain of
// dependent binary-search loads), while the token's top-k row is already being fetched.
#pragma once
#include "common/Mma.cuh"
#include "common/Types.h"
#include "params/CombineTopkSwaParams.h"

namespace di {
namespace cts {

constexpr int32_t kNoRequest = 0x7FFFFFFF;

struct alignas(16) I32x4 { int32_t v[4]; };

// Four top-k entries starting at k0 (entries at or past TOPK read as -1, never loaded).
template <int TOPK>
__device__ __forceinline__ I32x4 load_topk4(const int32_t* row, int k0) {
  I32x4 r{{-1, -1, -1, -1}};
  if constexpr (TOPK % 4 == 0) {
    if (k0 < TOPK) {  // the row start is 16-byte aligned when TOPK % 4 == 0
      const U32x4 u = ld_global_nc_v4(row + k0);
      r = I32x4{{int32_t(u.x), int32_t(u.y), int32_t(u.z), int32_t(u.w)}};
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (k0 + i < TOPK) r.v[i] = __ldg(row + k0 + i);
  }
  return r;
}

// What a row needs to know about its token (all zero for a token outside every request: the row
// is then all -1 and its length 0).
struct RowPlan {
  int32_t topk_len;  // entries taken from the top-k row
  int32_t run_len;   // topk_len + sliding-window entries
  int32_t req_base;  // M * b: the request's first workspace row
  int32_t swa_base;  // workspace row of entry topk_len (the first window position)
};

__device__ __forceinline__ int32_t row_entry(int k, int32_t topk_val, const RowPlan& rp,
                                             int32_t swa_row0) {
  if (k < rp.topk_len) return (topk_val < 0 || topk_val >= swa_row0) ? -1 : topk_val + rp.req_base;
  if (k < rp.run_len) return rp.swa_base + (k - rp.topk_len);
  return -1;
}

}  // namespace cts

// The row of token t, built by one CTA (combine_topk_swa_kernel: CTA t; gather_kcache_combine:
// the CTAs after the gather's).
template <int TOPK, int WINDOW, int THREADS>
__device__ __forceinline__ void combine_topk_swa_token(const CombineTopkSwaParams& p, int t) {
  using namespace cts;
  static_assert(TOPK >= 1 && WINDOW >= 1, "topk and window must be positive");
  static_assert(THREADS % 32 == 0, "whole warps");
  constexpr int W = (TOPK + WINDOW + 127) / 128 * 128;
  constexpr int CHUNKS = W / 4;
  constexpr int ITEMS = (CHUNKS + THREADS - 1) / THREADS;
  constexpr int PREFETCH = ITEMS < 4 ? ITEMS : 4;  // chunks whose top-k slice is fetched up front

  __shared__ int32_t s_req;
  __shared__ int32_t s_info[4];  // start (relative), query length, seq_len, gather_len of s_req

  const int tid = int(threadIdx.x);
  if (t >= p.num_tokens) return;  // whole CTA
  const int32_t* topk_row = p.topk_indices + int64_t(t) * TOPK;

  I32x4 pre[PREFETCH];
#pragma unroll
  for (int it = 0; it < PREFETCH; ++it) pre[it] = load_topk4<TOPK>(topk_row, 4 * (tid + it * THREADS));

  // The token's request b: query_start_loc[b] <= t + query_start_loc[0] < query_start_loc[b+1].
  // With a non-monotonic query_start_loc (bad input) the smallest matching b wins.
  // The first THREADS requests' metadata is loaded before the barrier, so these loads are in
  // flight with the top-k row's instead of starting a second memory latency after it.
  const int32_t q0 = __ldg(p.query_start_loc);
  int32_t m_lo = 0, m_hi = 0, m_seq = 0, m_gl = 0;
  if (tid < p.num_reqs) {
    m_lo = __ldg(p.query_start_loc + tid);
    m_hi = __ldg(p.query_start_loc + tid + 1);
    m_seq = __ldg(p.seq_lens + tid);
    m_gl = __ldg(p.gather_lens + tid);
  }
  if (tid == 0) s_req = kNoRequest;
  __syncthreads();
  int32_t my_b = kNoRequest, my_lo = 0, my_len = 0, my_seq = 0, my_gl = 0;
  for (int b = tid; b < p.num_reqs; b += THREADS) {
    if (b != tid) {  // requests past the first THREADS (uniform per iteration)
      m_lo = __ldg(p.query_start_loc + b);
      m_hi = __ldg(p.query_start_loc + b + 1);
      m_seq = __ldg(p.seq_lens + b);
      m_gl = __ldg(p.gather_lens + b);
    }
    const int32_t lo = m_lo - q0, hi = m_hi - q0, seq = m_seq, gl = m_gl;
    if (my_b == kNoRequest && lo <= t && t < hi) {
      my_b = b;
      my_lo = lo;
      my_len = hi - lo;
      my_seq = seq;
      my_gl = gl;
    }
  }
  if (my_b != kNoRequest) atomicMin(&s_req, my_b);
  __syncthreads();
  const int32_t b = s_req;
  if (my_b != kNoRequest && my_b == b) {
    s_info[0] = my_lo;
    s_info[1] = my_len;
    s_info[2] = my_seq;
    s_info[3] = my_gl;
  }
  __syncthreads();

  RowPlan rp{0, 0, 0, 0};
  if (b != kNoRequest) {
    const int32_t seq = s_info[2];
    const int32_t pos = seq - s_info[1] + (t - s_info[0]);  // absolute position of the token
    if (pos >= 0) {  // a negative position (seq_lens < query length: bad input) keeps the empty row
      const int32_t reach = (pos + 1) / (p.ratio > 0 ? p.ratio : 1);
      rp.topk_len = p.ratio > 0 ? (reach < TOPK ? reach : TOPK) : 0;
      const int32_t swa_start = pos - WINDOW + 1 > 0 ? pos - WINDOW + 1 : 0;
      const int32_t g0 = seq - s_info[3];  // first gathered position
      rp.req_base = p.rows_per_req * b;
      rp.swa_base = rp.req_base + p.swa_row0 + (swa_start - g0);
      rp.run_len = rp.topk_len + (pos - swa_start + 1);
    }
  }
  if (tid == 0) p.lens[t] = rp.run_len;

  int32_t* out_row = p.rows + int64_t(t) * W;  // 16-byte aligned: W is a multiple of 128
  auto store_chunk = [&](int q, const I32x4& tv) {
    const int k0 = 4 * q;
    const U32x4 o{uint32_t(row_entry(k0 + 0, tv.v[0], rp, p.swa_row0)),
                  uint32_t(row_entry(k0 + 1, tv.v[1], rp, p.swa_row0)),
                  uint32_t(row_entry(k0 + 2, tv.v[2], rp, p.swa_row0)),
                  uint32_t(row_entry(k0 + 3, tv.v[3], rp, p.swa_row0))};
    st_global_v4(out_row + k0, o);
  };
#pragma unroll
  for (int it = 0; it < PREFETCH; ++it) {
    const int q = tid + it * THREADS;
    if (q < CHUNKS) store_chunk(q, pre[it]);
  }
  // Rows of more than 4 chunks per thread: the rest is fetched as it is stored.
#pragma unroll 1
  for (int q = tid + PREFETCH * THREADS; q < CHUNKS; q += THREADS)
    store_chunk(q, load_topk4<TOPK>(topk_row, 4 * q));
}

template <int TOPK, int WINDOW, int THREADS>
__device__ __forceinline__ void combine_topk_swa_kernel(const CombineTopkSwaParams& p) {
  combine_topk_swa_token<TOPK, WINDOW, THREADS>(p, int(blockIdx.x));
}

}  // namespace di
