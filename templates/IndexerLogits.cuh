// indexer_logits (docs/ops.md §7): for every query token t and compressed position s,
//   score[t, s] = sum_h w[t,h] * relu(dot(q[t,h,:], k_e4m3[s,:])) * k_scale[s]   if s < visible[t]
//   score[t, s] = -inf                                                            otherwise.
//
// Work split. A CTA owns TPC consecutive tokens and a chunk of positions_per_cta positions.
// Tokens of one request read the same keys, so the CTA decodes each key tile once and every
// token's heads multiply it: the M dimension of the bf16 mma is (token, head) with the heads of a
// token padded to HPAD rows, N is the key, K = 128. A run of CTA tokens with another request is
// processed as its own segment (the other rows get zero weights and are not stored).
//
// Pipeline per key tile of BLOCK_N positions:
//   1. the next tile's raw bytes (8 lanes x 16 B per key, page by page through block_table) are
//      copied to a shared staging buffer with cp.async while the current tile is multiplied;
//   2. e4m3 codes become bf16 by integer ALU work (sm_80/86 have no fp8 convert) plus one bf16x2
//      multiply by 2^120 to fix the exponent bias; values are exact. The tile is stored to shared
//      memory as 256-byte rows with the 16-byte chunks XOR-swizzled by (row & 7), so both the
//      decoder's stores and the ldmatrix reads are free of bank conflicts;
//   3. each warp keeps its query rows (one, two or four m16 tiles) as mma A fragments in
//      registers for the whole segment and streams B fragments with ldmatrix: a B fragment read
//      from shared memory feeds 2 * (m16 tiles) mma, so four tiles per warp halve the ldmatrix
//      traffic per mma of two (at 128 registers of A fragments); relu and the head weights are applied to the fp32
//      accumulators, the head sum is a reduce-scatter over the 8 row lanes, and one value per
//      (token, key) goes to shared memory; the key scale and the visibility mask are applied when
//      the tile's scores are written out with 16-byte stores.
//
// K order. The decoder turns 4 codes [b0 b1 b2 b3] into the bf16 pairs (b0,b2) and (b1,b3) (fewer
// instructions than (b0,b1),(b2,b3)), and a lane decodes 16 bytes into two 16-byte chunks (j and
// 8+j) so a quarter-warp stores 8 distinct chunks. The dot product does not care about the order
// of K as long as A uses the same one: q rows are staged in the same order before ldmatrix.
//
// NaN. A key holding an e4m3 NaN code (0x7F/0xFF) has a NaN dot product for every head in the
// reference; the decoder flags such keys and gives them a NaN scale, so their scores are NaN.
// relu is max.NaN (NaN stays NaN) like the reference's std::max(dot, 0.f).
//
// Guards. visible[t] is clamped to [0, n_max]; a token whose request is outside [0, R), or a
// visible position whose page index is outside [0, P), gets -inf (the reference rejects both
// before running; the kernel only refuses to read out of bounds).
#pragma once
#include "common/Mma.cuh"
#include "common/Types.h"
#include "params/IndexerLogitsParams.h"

namespace di {
namespace idxl {

constexpr int kDim = 128;       // index head dim (= mma K)
constexpr int kKeyBytes = 132;  // per position: 128 e4m3 codes + one fp32 scale
constexpr int kSlots = 3;       // ring of per-tile score/scale buffers (see the pipeline notes)

struct alignas(16) F32x4 { float x, y, z, w; };

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xFF800000); }

// relu that keeps NaN (as std::max(NaN, 0.f) does in the reference).
__device__ __forceinline__ float relu_nan(float x) {
#ifdef DI_SIMT_EMU
  return x != x ? x : x > 0.f ? x : 0.f;
#else
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(x), "f"(0.f));
  return r;
#endif
}

// bf16x2 times 2^120, exact: the e4m3 exponent bias (7) becomes the bf16 one (127). The addend is
// -0 so a -0 product stays -0. fma.bf16x2 has no flush-to-zero mode: e4m3 subnormals (biased
// bf16 subnormals here) come out as exact normals.
__device__ __forceinline__ uint32_t bf16x2_mul_2pow120(uint32_t v) {
#ifdef DI_SIMT_EMU
  return di_emu::bf16x2_mul(v, 0x7B807B80u);  // exact products: the -0 addend changes nothing
#else
  uint32_t r;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(v), "r"(0x7B807B80u), "r"(0x80008000u));
  return r;
#endif
}

// Four e4m3 codes w = [b0 b1 b2 b3] (b0 in the low byte) -> bf16x2 (b0, b2) and (b1, b3), exact.
// A code's 7 magnitude bits shifted left by 4 land on the bf16 exponent/mantissa boundary; the
// sign moves to bit 15. NaN codes come out as +-480 and are flagged separately.
__device__ __forceinline__ void e4m3x4_to_bf16(uint32_t w, uint32_t& even, uint32_t& odd) {
  const uint32_t e = ((w << 4) & 0x07F007F0u) | ((w << 8) & 0x80008000u);
  const uint32_t o = ((w >> 4) & 0x07F007F0u) | (w & 0x80008000u);
  even = bf16x2_mul_2pow120(e);
  odd = bf16x2_mul_2pow120(o);
}

// Bit 7 of a byte of the result is set iff that code's low 7 bits are all ones (a NaN code).
// Bytes are at most 0x7F before the add, so no carry crosses a byte.
__device__ __forceinline__ uint32_t e4m3x4_nan_probe(uint32_t w) {
  return (w & 0x7F7F7F7Fu) + 0x01010101u;
}

// 4-byte async copy; `valid == false` zero-fills the destination.
__device__ __forceinline__ void cp_async_4(void* smem_dst, const void* gmem_src, bool valid) {
#ifdef DI_SIMT_EMU
  di_emu::cp_async(smem_dst, gmem_src, 4, valid ? 4 : 0);
#else
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(smem_dst)),
               "l"(gmem_src), "r"(valid ? 4 : 0));
#endif
}

// 16 raw key bytes to shared memory; key rows are 16-byte aligned when BS % 4 == 0 (page bytes
// BS*132), otherwise only 4-byte aligned.
template <bool VEC>
__device__ __forceinline__ void cp_async_key16(void* smem_dst, const uint8_t* src, bool valid) {
  if constexpr (VEC) {
    cp_async_16(smem_dst, src, valid);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      cp_async_4(static_cast<uint8_t*>(smem_dst) + 4 * i, src + 4 * i, valid);
  }
}

// Sums V per-lane values over the 8 lanes that share lane & 3 (the mma row lanes) by halving the
// value set at each of the xor-16/8/4 steps; returns the index of the value lane now holds in
// v[0]. With fewer than 8 values, the last steps are plain butterflies (lanes duplicate).
template <int CNT, int MASK, int V>
__device__ __forceinline__ int reduce_rows(float (&v)[V], int lane) {
  if constexpr (MASK < 4) {
    return 0;
  } else if constexpr (CNT == 1) {
    v[0] += __shfl_xor_sync(0xFFFFFFFFu, v[0], MASK);
    return reduce_rows<1, MASK / 2>(v, lane);
  } else {
    constexpr int H = CNT / 2;
    const bool hi = (lane & MASK) != 0;
#pragma unroll
    for (int i = 0; i < H; ++i) {
      const float send = hi ? v[i] : v[i + H];
      const float keep = hi ? v[i + H] : v[i];
      v[i] = keep + __shfl_xor_sync(0xFFFFFFFFu, send, MASK);
    }
    return (hi ? H : 0) + reduce_rows<H, MASK / 2>(v, lane);
  }
}

// Lanes that hold a duplicate after reduce_rows (set bits: butterfly steps).
template <int V>
struct DupLanes {
  static constexpr int mask = V >= 8 ? 0 : V == 4 ? 4 : V == 2 ? 12 : 28;
};

template <int TPC, int PARTS, int BLOCK_N, int STAGES>
struct Smem {
  U32x4 keys[STAGES][BLOCK_N * 16];         // decoded tile: 16 swizzled 16-byte chunks per key
  U32x4 raw[BLOCK_N * 8];                   // next tile's e4m3 bytes (cp.async destination)
  F32x4 red[kSlots][TPC][PARTS][BLOCK_N / 4];  // head-summed score before the key scale
  float scale[kSlots][BLOCK_N];             // key scale (NaN for a key with a NaN code)
  uint8_t bad[kSlots][BLOCK_N];             // 1: page outside [0, P): score -inf
  int32_t vis[TPC];                         // clamped visible[t] of the segment's tokens
};

}  // namespace idxl

// HPAD: heads padded to 16/32/64 rows; TPC: tokens per CTA; WARPS_M x WARPS_N warps; BLOCK_N:
// positions per tile; STAGES: 1 or 2 decoded tile buffers; BS: cache block size (positions per
// page).
template <int HPAD, int TPC, int WARPS_M, int WARPS_N, int BLOCK_N, int STAGES, int BS>
__device__ __forceinline__ void indexer_logits_kernel(const IndexerLogitsParams& p) {
  using namespace idxl;
  constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  constexpr int MT = TPC * HPAD / 16;  // m16 tiles of the CTA
  constexpr int MT_TOK = HPAD / 16;    // m16 tiles per token
  static_assert(HPAD == 16 || HPAD == 32 || HPAD == 64, "heads pad to 16, 32 or 64 rows");
  static_assert(MT % WARPS_M == 0, "WARPS_M must divide the CTA's m16 tiles");
  constexpr int W_M = MT / WARPS_M;  // m16 tiles per warp (A fragments stay in registers)
  static_assert(W_M == 1 || W_M == 2 || W_M == 4, "a warp holds one, two or four m16 tiles");
  static_assert(BLOCK_N % (16 * WARPS_N) == 0, "each warp takes pairs of n8 tiles");
  constexpr int NTW = BLOCK_N / 8 / WARPS_N;                   // n8 tiles per warp
  constexpr int TW = W_M >= MT_TOK ? W_M / MT_TOK : 1;         // tokens per warp
  constexpr int PARTS = W_M >= MT_TOK ? 1 : MT_TOK / W_M;      // warps per token
  constexpr int V = TW * 4;  // per-lane partial sums: token x 2 n8 tiles x 2 columns
  // The 8 row lanes end up with one value each: at most 8 values (four 16-head tokens per warp
  // would need 16).
  static_assert(V <= 8, "a warp covers at most two tokens");
  static_assert((BLOCK_N * 8) % THREADS == 0, "16-byte pieces of a tile must split evenly");
  constexpr int LOADS = BLOCK_N * 8 / THREADS;
  static_assert(STAGES == 1 || STAGES == 2, "one or two decoded tile buffers");
  static_assert(BS >= 1, "block size");
  static_assert(WARPS_M * WARPS_N * 4096 <= STAGES * BLOCK_N * 256,
                "each warp stages 16 query rows (4 KB) in the key buffer");
  constexpr bool KEY_VEC = BS % 4 == 0;
  constexpr int64_t PAGE_BYTES = int64_t(BS) * kKeyBytes;

  __shared__ Smem<TPC, PARTS, BLOCK_N, STAGES> sm;

  const int t0 = blockIdx.x * TPC;
  const int t_end = min(t0 + TPC, p.num_tokens);
  const int c0 = blockIdx.y * p.positions_per_cta;
  const int c1 = min(c0 + p.positions_per_cta, p.n_max);
  if (t0 >= t_end || c0 >= c1) return;
  const bool vec_out = (p.n_max & 3) == 0;  // rows and tiles are then 16-byte aligned
  const int H = p.num_heads;

  int seg0 = t0;
  while (seg0 < t_end) {
    // A segment: the maximal run of CTA tokens with the same request.
    const int req = __ldg(p.token_to_req + seg0);
    // Thread indices are re-derived per segment from an opaque copy: otherwise the compiler
    // hoists dozens of lane-dependent offsets out of this (almost always single-trip) loop
    // and spills them.
    int tid = threadIdx.x;
    asm volatile("" : "+r"(tid));
    const int lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int g = lane >> 2, c = lane & 3;
    const int row_base = wm * W_M * 16;  // first (token, head) row of this warp
    const int warp_tok = row_base / HPAD;
    const int warp_part = TW > 1 ? 0 : (row_base % HPAD) / (W_M * 16);
    int seg1 = seg0 + 1;
    while (seg1 < t_end && __ldg(p.token_to_req + seg1) == req) ++seg1;

    __syncthreads();  // the previous segment's readers of shared memory are done
    int max_vis = 0;
#pragma unroll
    for (int j = 0; j < TPC; ++j) {
      const int t = t0 + j;
      int v = -1;
      if (t >= seg0 && t < seg1) {
        v = min(max(__ldg(p.visible + t), 0), p.n_max);
        max_vis = max(max_vis, v);
      }
      if (tid == j) sm.vis[j] = v;
    }
    const bool req_ok = req >= 0 && req < p.num_reqs;
    const int tile_end = req_ok ? min(c1, max_vis) : c0;  // positions worth computing
    const int ntiles = tile_end > c0 ? (tile_end - c0 + BLOCK_N - 1) / BLOCK_N : 0;
    const int fill0 = min(c0 + ntiles * BLOCK_N, c1);  // from here on the rows are all -inf
    const int32_t* bt = p.block_table + int64_t(req_ok ? req : 0) * p.max_pages;

    if (ntiles > 0) {
      // ---- tile loader: cp.async of the raw bytes of [s0, s0 + BLOCK_N) and their scales ----
      // Lane u copies (and later decodes) 16 bytes of key u / 8, so it only ever reads back
      // its own copies: cp.async.wait_group is the only synchronization the decoder needs.
      const uint8_t* const k_cache = p.k_cache;
      auto load_raw = [&](int s0, int slot) {
#pragma unroll
        for (int i = 0; i < LOADS; ++i) {
          const int u = tid + i * THREADS, n = u >> 3, part = u & 7, s = s0 + n;
          const uint8_t* base = k_cache;
          bool ok = false;
          int off = 0;
          if (s < tile_end) {
            const int page = __ldg(bt + s / BS);
            ok = page >= 0 && page < p.num_pages;
            if (ok) base = k_cache + int64_t(page) * PAGE_BYTES;
            off = s % BS;
          }
          cp_async_key16<KEY_VEC>(&sm.raw[u], base + off * kDim + part * 16, ok);
          if (part == 0) {
            cp_async_4(&sm.scale[slot][n], base + BS * kDim + off * 4, ok);
            sm.bad[slot][n] = ok ? 0 : 1;
          }
        }
        cp_async_commit();
      };

      // The first tile's bytes are in flight while the query rows are staged (sm.raw, scale[0]
      // and bad[0] are not touched by the staging; the segment's barrier above ordered the
      // previous segment's readers).
      load_raw(c0, 0);

      // ---- query rows as A fragments, head weights (zero for padding / other tokens) ----
      // Each warp stages one m16 tile of its rows at a time in its own 4 KB of the key buffer
      // (free until the first tile is decoded): coalesced 16-byte loads of raw q groups, put in
      // the decoder's K order, then ldmatrix.x4 straight into A fragments.
      uint32_t a[W_M][8][4];
      float wgt[W_M][2];
      {
        U32x4* qs = &sm.keys[0][0] + warp * 256;  // 16 rows x 16 chunks
        // Addresses relative to the segment's first token: keeps the compiler from hoisting
        // (and spilling) per-row pointers across segments.
        const uint16_t* qseg = p.q + int64_t(seg0) * H * kDim;
        const float* wseg = p.weights + int64_t(seg0) * H;
#pragma unroll
        for (int mt = 0; mt < W_M; ++mt) {
#pragma unroll
          for (int k = 0; k < 8; ++k) {
            const int piece = lane + 32 * k, r = piece >> 4, i = piece & 15;
            const int row = row_base + mt * 16 + r;
            const int j = row / HPAD, h = row % HPAD, t = t0 + j;
            U32x4 v{0u, 0u, 0u, 0u};
            if (t >= seg0 && t < seg1 && h < H)
              v = ld_global_nc_v4(qseg + ((t - seg0) * H + h) * kDim + 8 * i);
            // raw group i = dims [8i, 8i+8): logical chunk i/2 (even i) or 8 + i/2 (odd i),
            // values in the order (0,2),(1,3),(4,6),(5,7)
            const int C = (i & 1) ? 8 + (i >> 1) : (i >> 1);
            qs[r * 16 + (C ^ (r & 7))] =
                U32x4{__byte_perm(v.x, v.y, 0x5410), __byte_perm(v.x, v.y, 0x7632),
                      __byte_perm(v.z, v.w, 0x5410), __byte_perm(v.z, v.w, 0x7632)};
          }
          __syncwarp();
          // matrices: (rows 0-7, chunk 2ks), (rows 8-15, 2ks), (rows 0-7, 2ks+1),
          // (rows 8-15, 2ks+1)
          const U32x4* rowp = qs + ((lane & 7) + ((lane >> 3) & 1) * 8) * 16;
#pragma unroll
          for (int ks = 0; ks < 8; ++ks)
            ldmatrix_x4(a[mt][ks], rowp + ((2 * ks + (lane >> 4)) ^ (lane & 7)));
          __syncwarp();
#pragma unroll
          for (int h2 = 0; h2 < 2; ++h2) {
            const int row = row_base + mt * 16 + g + 8 * h2;
            const int j = row / HPAD, h = row % HPAD, t = t0 + j;
            const bool ok = t >= seg0 && t < seg1 && h < H;
            wgt[mt][h2] = ok ? __ldg(wseg + (t - seg0) * H + h) : 0.f;
          }
        }
      }

      // ---- decode the staged bytes to bf16 into keys[stage]; NaN codes poison the scale ----
      auto store_tile = [&](int stage, int slot) {
        cp_async_wait<0>();
#pragma unroll
        for (int i = 0; i < LOADS; ++i) {
          const int u = tid + i * THREADS, n = u >> 3, part = u & 7;
          const U32x4 r = sm.raw[u];
          const uint32_t w[4] = {r.x, r.y, r.z, r.w};
          uint32_t ev[4], od[4], probe = 0;
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            probe |= e4m3x4_nan_probe(w[k]);
            e4m3x4_to_bf16(w[k], ev[k], od[k]);
          }
          U32x4* row = &sm.keys[stage][n * 16];
          const int sw = n & 7;
          row[part ^ sw] = U32x4{ev[0], od[0], ev[1], od[1]};
          row[8 + (part ^ sw)] = U32x4{ev[2], od[2], ev[3], od[3]};
          // A key is spread over 8 consecutive lanes; the lane that copied its scale marks it.
          const uint32_t nan_lanes = __ballot_sync(0xFFFFFFFFu, (probe & 0x80808080u) != 0u);
          if (part == 0 && ((nan_lanes >> (lane & 24)) & 0xFFu) != 0u)
            sm.scale[slot][n] = __int_as_float(0x7FC00000);
        }
      };

      // ---- mma over one decoded tile; head-summed partials into red[slot] ----
      // ldmatrix.x4 matrices: (tile 0, chunk 2ks), (tile 0, 2ks+1), (tile 1, 2ks), (tile 1, 2ks+1).
      // The swizzle only flips the low 3 chunk bits, so chunks 8..15 (ks >= 4) sit 128 bytes
      // after chunks 0..7: four per-lane offsets cover all eight k-steps.
      uint32_t ldsm_off[4];
#pragma unroll
      for (int j = 0; j < 4; ++j)
        ldsm_off[j] = uint32_t((wn * NTW * 8 + ((lane >> 4) << 3) + (lane & 7)) * 256 +
                               (((2 * j + ((lane >> 3) & 1)) ^ (lane & 7)) << 4));
      auto mma_tile = [&](int stage, int slot) {
        const uint8_t* keys = reinterpret_cast<const uint8_t*>(sm.keys[stage]);
#pragma unroll 1
        for (int np = 0; np < NTW / 2; ++np) {
          const int n0 = wn * NTW * 8 + np * 16;
          const uint8_t* tile = keys + np * 16 * 256;
          float acc[2][W_M][4];
#pragma unroll
          for (int tt = 0; tt < 2; ++tt)
#pragma unroll
            for (int mt = 0; mt < W_M; ++mt)
#pragma unroll
              for (int e = 0; e < 4; ++e) acc[tt][mt][e] = 0.f;
#pragma unroll
          for (int ks = 0; ks < 8; ++ks) {
            uint32_t b[4];
            ldmatrix_x4(b, tile + ldsm_off[ks & 3] + (ks >= 4 ? 128 : 0));
            const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
            for (int mt = 0; mt < W_M; ++mt) {
              mma_bf16_16816(acc[0][mt], a[mt][ks], b0, acc[0][mt]);
              mma_bf16_16816(acc[1][mt], a[mt][ks], b1, acc[1][mt]);
            }
          }
          // relu, head weights; value index ((token * 2 + tile) * 2 + column)
          float v[V];
#pragma unroll
          for (int i = 0; i < V; ++i) v[i] = 0.f;
#pragma unroll
          for (int mt = 0; mt < W_M; ++mt) {
            const int tok = TW > 1 ? mt / MT_TOK : 0;
#pragma unroll
            for (int tt = 0; tt < 2; ++tt) {
              float& v0 = v[(tok * 2 + tt) * 2 + 0];
              float& v1 = v[(tok * 2 + tt) * 2 + 1];
              v0 = fmaf(wgt[mt][0], relu_nan(acc[tt][mt][0]), v0);
              v0 = fmaf(wgt[mt][1], relu_nan(acc[tt][mt][2]), v0);
              v1 = fmaf(wgt[mt][0], relu_nan(acc[tt][mt][1]), v1);
              v1 = fmaf(wgt[mt][1], relu_nan(acc[tt][mt][3]), v1);
            }
          }
          const int idx = reduce_rows<V, 16>(v, lane);
          if ((lane & DupLanes<V>::mask) == 0) {
            const int tok = idx >> 2, tt = (idx >> 1) & 1, col = idx & 1;
            const int n = n0 + tt * 8 + 2 * c + col;
            reinterpret_cast<float*>(sm.red[slot][warp_tok + tok][warp_part])[n] = v[0];
          }
        }
      };

      // ---- scores of one tile: head sums x key scale, masked, 16-byte stores ----
      auto write_tile = [&](int slot, int s0) {
        constexpr int Q4 = BLOCK_N / 4;
        for (int u = tid; u < TPC * Q4; u += THREADS) {
          const int j = u / Q4, q4 = u % Q4, n = q4 * 4, s = s0 + n, t = t0 + j;
          if (t < seg0 || t >= seg1 || s >= c1) continue;
          const int vis = sm.vis[j];
          F32x4 r = sm.red[slot][j][0][q4];
#pragma unroll
          for (int part = 1; part < PARTS; ++part) {
            const F32x4 x = sm.red[slot][j][part][q4];
            r.x += x.x; r.y += x.y; r.z += x.z; r.w += x.w;
          }
          const float* sc = &sm.scale[slot][n];
          const uint8_t* bad = &sm.bad[slot][n];
          F32x4 o;
          o.x = (s + 0 < vis && !bad[0]) ? r.x * sc[0] : neg_inf();
          o.y = (s + 1 < vis && !bad[1]) ? r.y * sc[1] : neg_inf();
          o.z = (s + 2 < vis && !bad[2]) ? r.z * sc[2] : neg_inf();
          o.w = (s + 3 < vis && !bad[3]) ? r.w * sc[3] : neg_inf();
          float* dst = p.scores + int64_t(t) * p.n_max + s;
          if (vec_out) {
            st_global_v4(dst, U32x4{__float_as_uint(o.x), __float_as_uint(o.y),
                                    __float_as_uint(o.z), __float_as_uint(o.w)});
          } else {
            const float ov[4] = {o.x, o.y, o.z, o.w};
#pragma unroll
            for (int e = 0; e < 4; ++e)
              if (s + e < c1) dst[e] = ov[e];
          }
        }
      };

      // ---- pipeline: one barrier per tile with two decoded stages, two with one ----
      // Tile it's head sums and scales live in ring slot it % 3: slot it+1 is filled (cp.async
      // of scales, decode flags) during iteration it while other threads may still be writing
      // out tile it-1 from its slot, so two slots would race without a second barrier.
      __syncthreads();  // every warp has its A fragments: the key buffer is free
      store_tile(0, 0);
      __syncthreads();
      for (int it = 0; it < ntiles; ++it) {
        const int s0 = c0 + it * BLOCK_N;
        const int slot = it % kSlots, next_slot = (it + 1) % kSlots;
        const bool has_next = it + 1 < ntiles;
        if (has_next) load_raw(s0 + BLOCK_N, next_slot);  // in flight during the mma
        if constexpr (STAGES == 2) {
          const int stage = it & 1;
          mma_tile(stage, slot);
          if (has_next) store_tile(stage ^ 1, next_slot);
          __syncthreads();
          write_tile(slot, s0);
        } else {
          mma_tile(0, slot);
          __syncthreads();
          if (has_next) store_tile(0, next_slot);
          write_tile(slot, s0);
          __syncthreads();
        }
      }
    }

    // ---- positions past every token's visibility (or an invalid request): -inf ----
    if (fill0 < c1) {
      for (int t = seg0; t < seg1; ++t) {
        float* row = p.scores + int64_t(t) * p.n_max;
        if (vec_out) {
          const uint32_t ni = 0xFF800000u;
          for (int s = fill0 + tid * 4; s < c1; s += THREADS * 4)
            st_global_v4(row + s, U32x4{ni, ni, ni, ni});
        } else {
          for (int s = fill0 + tid; s < c1; s += THREADS) row[s] = neg_inf();
        }
      }
    }
    seg0 = seg1;
  }
}

}  // namespace di
