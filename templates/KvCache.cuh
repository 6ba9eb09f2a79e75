// The fp8_ds_mla paged KV cache (docs/ops.md §2-§3): kv_quant_insert quantizes one token per
// warp into its page; gather_kcache dequantizes pages straight into the caller's workspace.
//
// Token layout inside a page of BS tokens: data at t*576 (448 e4m3 NoPE bytes, then 64 bf16 RoPE
// values), scales at BS*576 + t*8 (7 UE8M0 bytes, one per 64 NoPE dims, then a zero pad byte).
// Both kernels use every lane of a warp for one token so that each memory instruction of the
// warp touches one contiguous span of the token.
#pragma once
#include "common/Mma.cuh"
#include "common/Numerics.cuh"
#include "common/Types.h"
#include "params/GatherKcacheParams.h"
#include "params/KvQuantInsertParams.h"

namespace di {
namespace kvc {

constexpr int kHeadDim = 512;     // bf16 values per token row
constexpr int kTokenBytes = 576;  // 448 e4m3 + 64 bf16
constexpr int kNopeBytes = 448;
constexpr int kScaleBytes = 8;    // 7 UE8M0 + pad

template <int BS>
struct Page {
  static_assert(BS >= 1, "block size must be at least 1");
  // Data and scales, zero-padded up to a multiple of 576 bytes.
  static constexpr int64_t kBytes = (int64_t(BS) * (kTokenBytes + kScaleBytes) + kTokenBytes - 1) /
                                    kTokenBytes * kTokenBytes;
  static constexpr int64_t kScaleBase = int64_t(BS) * kTokenBytes;
};

struct alignas(8) U32x2 { uint32_t x, y; };

// Streamed cache reads: not worth keeping in L1.
__device__ __forceinline__ U32x2 ld_stream_v2(const void* p) {
  U32x2 v;
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];\n"
               : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}
// Read-only loads that keep their line in L1: a warp reads one row with two 16-byte loads per
// lane at a 32-byte stride, so the second load hits the sectors the first one brought in.
__device__ __forceinline__ U32x4 ld_cached_v4(const void* p) {
  U32x4 v;
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}
__device__ __forceinline__ void st_global_v2(void* p, U32x2 v) {
  asm volatile("st.global.v2.u32 [%0], {%1,%2};\n" ::"l"(p), "r"(v.x), "r"(v.y));
}

// PTX prmt (default mode): byte n of the result is byte sel[n] of {b:a}; a selector nibble with
// bit 3 set replicates the sign bit of the chosen byte (used to widen flag bytes to masks).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

// a * b for bf16x2 with a single rounding. fma with a -0 addend keeps the sign of a zero product;
// bf16 fma has no flush-to-zero mode, so subnormal inputs and results are exact.
__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
}

// UE8M0 encode of a positive float: smallest power of two >= s, clamped to [1, 254].
__device__ __forceinline__ uint32_t ue8m0_ceil(float s) {
  const uint32_t b = __float_as_uint(s);
  int e = int((b >> 23) & 0xFFu) + ((b & 0x7FFFFFu) != 0u ? 1 : 0);
  e = e < 1 ? 1 : (e > 254 ? 254 : e);
  return uint32_t(e);
}

// 1 / 2^(e-127) = 2^(127-e) as an exact fp32 (e in [1, 254]; e = 254 needs the subnormal 2^-127).
__device__ __forceinline__ float ue8m0_reciprocal(uint32_t e) {
  return e <= 253u ? __uint_as_float((254u - e) << 23) : __uint_as_float(0x00400000u);
}

// One bf16 value quantized with the tile's reciprocal scale; NaN gives 0x7F like the host
// reference (Formats.h floatToE4m3), whatever its sign.
__device__ __forceinline__ uint32_t quantize_one(uint32_t bf16_bits, float inv_scale) {
  const float y = __uint_as_float(bf16_bits << 16) * inv_scale;  // exact: power-of-two factor
  return y != y ? 0x7Fu : f32_to_e4m3(y);                        // saturates at +-448
}

// Eight e4m3 codes (byte i of c = dim i) times the UE8M0 scale byte e -> eight bf16 (dim 2i in the
// low half of word i), bit-exact with Formats.h dequantE4m3ToBf16. Integer decode, then exact
// power-of-two multiplies in bf16: no transcendental instructions.
__device__ __forceinline__ U32x4 dequant8(U32x2 c, uint32_t e) {
  constexpr uint32_t kNaN2 = 0x7FC07FC0u;
  if (e == 0xFFu) return U32x4{kNaN2, kNaN2, kNaN2, kNaN2};
  // Put codes (2i, 2i+1) into the high bytes of the two 16-bit lanes, then into bf16 bit places.
  uint32_t q[4] = {e4m3x2_hi_to_bf16x2_biased(prmt(c.x, 0u, 0x1404u)),
                   e4m3x2_hi_to_bf16x2_biased(prmt(c.x, 0u, 0x3424u)),
                   e4m3x2_hi_to_bf16x2_biased(prmt(c.y, 0u, 0x1404u)),
                   e4m3x2_hi_to_bf16x2_biased(prmt(c.y, 0u, 0x3424u))};
  // q holds value * 2^-120. For e <= 134 the bias fix and the scale fold into one factor
  // 2^(e-7) (bf16 bits (e+120)<<7); scale byte 0 means a +0 scale (signed zeros result).
  if (e <= 134u) {
    const uint32_t f = e == 0u ? 0u : ((e + 120u) << 7) * 0x00010001u;
#pragma unroll
    for (int i = 0; i < 4; ++i) q[i] = bf16x2_mul(q[i], f);
  } else {
    // 2^(e-7) is not a bf16 normal: undo the bias first (exact), then apply 2^(e-127) (one rounding,
    // overflowing to inf exactly like the fp32 reference rounded to bf16).
    const uint32_t f = (e << 7) * 0x00010001u;
#pragma unroll
    for (int i = 0; i < 4; ++i) q[i] = bf16x2_mul(bf16x2_mul(q[i], 0x7B807B80u /* 2^120 */), f);
  }
  // e4m3 NaN codes (0x7F/0xFF): bit 7 of each flag byte is set iff the code's low 7 bits are all 1.
  const uint32_t nx = ((c.x & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u;
  const uint32_t ny = ((c.y & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u;
  if ((nx | ny) != 0u) {
    const uint32_t m[4] = {prmt(nx, 0u, 0x9988u), prmt(nx, 0u, 0xBBAAu), prmt(ny, 0u, 0x9988u),
                           prmt(ny, 0u, 0xBBAAu)};
#pragma unroll
    for (int i = 0; i < 4; ++i) q[i] = (q[i] & ~m[i]) | (kNaN2 & m[i]);
  }
  return U32x4{q[0], q[1], q[2], q[3]};
}

// Where one gathered row comes from and goes to; page < 0 means "leave the row untouched".
struct GatherSlot {
  int32_t page;
  int32_t tok;  // token inside the page
  uint32_t dst16;  // output row start in 16-byte units: (r * out_req_stride + (offset + i) * out_row_stride) / 8
};

}  // namespace kvc

// ---------------------------------------------------------------------------------------------
// kv_quant_insert: one warp per token. Lane l < 28 owns dims [16l, 16l+16) (a quarter of a
// 64-wide tile: the tile amax is two xor-shuffles away) and writes its 16 e4m3 bytes with one
// 16-byte store; lanes 28..31 copy the RoPE dims. Lane 0 writes the 8 scale bytes.
// ---------------------------------------------------------------------------------------------
template <int BS, int WARPS>
__device__ __forceinline__ void kv_quant_insert_kernel(const KvQuantInsertParams& p) {
  using namespace kvc;
  const int lane = int(threadIdx.x & 31u);
  const int t = int(blockIdx.x) * WARPS + int(threadIdx.x >> 5);
  if (t >= p.num_tokens) return;  // warp-uniform
  const int64_t slot = __ldg(reinterpret_cast<const long long*>(p.slot_mapping) + t);
  if (slot < 0 || slot >= p.num_pages * BS) return;  // -1 skips; out-of-range slots are not written
  const int64_t page = slot / BS;
  const int64_t tok = slot - page * BS;
  uint8_t* const page_ptr = p.k_cache + page * Page<BS>::kBytes;
  uint8_t* const data = page_ptr + tok * kTokenBytes;

  // RoPE lanes read dims 448+8j and 480+8j (j = lane-28) so each of their stores is contiguous.
  const bool nope = lane < 28;
  const uint16_t* row = p.k + int64_t(t) * kHeadDim;
  const int d0 = nope ? 16 * lane : 448 + 8 * (lane - 28);
  const int d1 = nope ? d0 + 8 : 480 + 8 * (lane - 28);
  const U32x4 v0 = ld_cached_v4(row + d0);
  const U32x4 v1 = ld_cached_v4(row + d1);
  const uint32_t w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};

  // Tile amax: every lane takes part so the shuffles run converged (RoPE lanes' values unused).
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i)
    amax = fmaxf(amax, fmaxf(fabsf(bf16x2_lo(w[i])), fabsf(bf16x2_hi(w[i]))));
  amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 2));
  amax = fmaxf(amax, 1e-4f);  // the floor is on amax (vLLM's writer), not on amax / 448
  const uint32_t e = ue8m0_ceil(__fdiv_rn(amax, 448.f));

  // Gather the seven tile exponents (held by lanes 0, 4, ..., 24) while the warp is converged.
  uint32_t s_lo = 0, s_hi = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) s_lo |= __shfl_sync(0xFFFFFFFFu, e, 4 * i) << (8 * i);
#pragma unroll
  for (int i = 0; i < 3; ++i) s_hi |= __shfl_sync(0xFFFFFFFFu, e, 16 + 4 * i) << (8 * i);  // pad byte 0

  if (nope) {
    const float inv = ue8m0_reciprocal(e);
    uint32_t q[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t a = w[2 * i], b = w[2 * i + 1];
      q[i] = quantize_one(a & 0xFFFFu, inv) | (quantize_one(a >> 16, inv) << 8) |
             (quantize_one(b & 0xFFFFu, inv) << 16) | (quantize_one(b >> 16, inv) << 24);
    }
    st_global_v4(data + 16 * lane, U32x4{q[0], q[1], q[2], q[3]});
  } else {
    st_global_v4(data + kNopeBytes + 16 * (lane - 28), v0);
    st_global_v4(data + kNopeBytes + 64 + 16 * (lane - 28), v1);
  }
  if (lane == 0) st_global_v2(page_ptr + Page<BS>::kScaleBase + tok * kScaleBytes, U32x2{s_lo, s_hi});
}

// ---------------------------------------------------------------------------------------------
// gather_kcache: rows of all requests are numbered flat (request by request, gathered rows only)
// and dealt round-robin to every warp of the grid, so the work is balanced whatever the lengths
// and the grid is sized to the GPU rather than to M. Each CTA builds the per-request prefix of
// gathered rows in shared memory (R in chunks of one request per thread).
//
// A warp handles TPW rows per step: lanes 0..TPW-1 look up one row each (binary search in the
// prefix, then the block table), the cache loads of all TPW rows are issued together, and the
// next step's block-table loads are in flight while this step decodes and stores.
// Per row, lane l loads the 8 e4m3 bytes of chunk l and of chunk 32+l (or, for l >= 24, 16 bytes of
// RoPE) and writes 16 bytes at 16l and 512+16l: every load and store instruction of the warp
// covers one contiguous span. Output rows are placed by the caller's strides (p.out_req_stride,
// p.out_row_stride), so a strided view of a larger workspace is written in place.
// ---------------------------------------------------------------------------------------------
// The gather on CTAs [0, nctas) of a launch, this one being `cta` (gather_kcache_kernel: the whole
// grid; gather_kcache_combine: the first CTAs, the rest build index rows).
template <int BS, int WARPS, int TPW>
__device__ __forceinline__ void gather_kcache_ctas(const GatherKcacheParams& p, int cta, int nctas) {
  using namespace kvc;
  static_assert(TPW >= 1 && TPW <= 32, "tokens per warp step must be in 1..32");
  constexpr int THREADS = WARPS * 32;
  __shared__ int32_t s_start[THREADS + 1];  // chunk-local exclusive prefix of gathered rows
  __shared__ int32_t s_pos0[THREADS];       // position of each request's first gathered row
  // Aligned to 16 bytes and padded to whole 16-byte vectors: ptxas vectorizes the unrolled
  // read of all warp sums below into LDS.128. Unaligned (it used to follow s_pos0 at byte
  // 8 * THREADS + 4), the first vector load started 4 bytes early and also read
  // s_pos0[THREADS - 1], which the last thread writes after the same barrier: a real
  // read/write race in the hardware (compute-sanitizer racecheck: read at the warp-sum loop vs
  // write of s_pos0), harmless only because the stray word was discarded. With the array on
  // its own 16-byte vectors no load of it can reach a neighbour.
  constexpr int kWarpSumSlots = (WARPS + 3) / 4 * 4;
  __shared__ __align__(16) int32_t s_warp_sum[kWarpSumSlots];

  const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x >> 5);
  const int gwarp = cta * WARPS + warp;
  const int nwarps = nctas * WARPS;
  const int room = p.rows - p.offset;  // rows a request may write without reaching the next one

  // Row Lk (chunk-local) -> slot; called by lanes < TPW only.
  auto resolve = [&](int Lk, int total, int nreq, int r0) {
    GatherSlot s{-1, 0, 0};
    if (Lk >= total) return s;
    int lo = 0, hi = nreq - 1;  // the last request whose first row is <= Lk
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (s_start[mid] <= Lk) lo = mid;
      else hi = mid - 1;
    }
    const int i = Lk - s_start[lo];
    const int pos = s_pos0[lo] + i;
    if (pos < 0) return s;  // gather_lens > seq_lens: positions before the sequence start
    const int blk = pos / BS;
    if (blk >= p.max_pages) return s;
    const int req = r0 + lo;
    const int page = __ldg(p.block_table + int64_t(req) * p.max_pages + blk);
    if (page < 0 || page >= p.num_pages) return s;
    s.page = page;
    s.tok = pos - blk * BS;
    // Strides are multiples of 8 and the view spans < 2^35 elements (GatherKcacheParams.h), so
    // the row start fits 32 bits in 16-byte units: one register and one shuffle per row, as
    // few as a flat row index (a 64-bit offset costs the TPW = 2 default a spill).
    s.dst16 = uint32_t((int64_t(req) * p.out_req_stride + int64_t(p.offset + i) * p.out_row_stride) >> 3);
    return s;
  };

  // The block table is read once the lengths are known: a second memory latency in every
  // warp's chain (lengths, table, cache row, store). Pull the whole table into L2 while the
  // lengths load, one 128-byte line per thread spread over the grid, so that read hits L2.
  // Every prefetched address lies inside the table; a prefetch writes nothing.
  {
    const int64_t table_bytes = int64_t(p.num_reqs) * p.max_pages * 4;
    const int64_t stride = int64_t(nctas) * THREADS * 128;
    for (int64_t off = (int64_t(cta) * THREADS + int64_t(threadIdx.x)) * 128; off < table_bytes; off += stride)
      prefetch_l2(reinterpret_cast<const uint8_t*>(p.block_table) + off);
  }

  int flat0 = 0;  // flat index of the chunk's first gathered row
  for (int r0 = 0; r0 < p.num_reqs; r0 += THREADS) {
    const int r = r0 + int(threadIdx.x);
    int g = 0, pos0 = 0;
    if (r < p.num_reqs) {
      const int seq = __ldg(p.seq_lens + r);
      const int want = p.gather_lens != nullptr ? __ldg(p.gather_lens + r) : seq;
      g = want < 0 ? 0 : (want > room ? room : want);
      pos0 = seq - want;
    }
    int incl = g;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int v = __shfl_up_sync(0xFFFFFFFFu, incl, d);
      if (lane >= d) incl += v;
    }
    if (lane == 31) s_warp_sum[warp] = incl;
    __syncthreads();
    int before = 0, total = 0;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
      const int sw = s_warp_sum[w];
      before += w < warp ? sw : 0;
      total += sw;
    }
    s_start[threadIdx.x] = before + incl - g;
    s_pos0[threadIdx.x] = pos0;
    if (threadIdx.x == 0) s_start[THREADS] = total;
    __syncthreads();

    const int nreq = p.num_reqs - r0 < THREADS ? p.num_reqs - r0 : THREADS;
    const int step = TPW * nwarps;
    // This warp's rows are those with (flat0 + L) % nwarps == gwarp.
    int L = gwarp - flat0 % nwarps;
    if (L < 0) L += nwarps;
    GatherSlot cur{-1, 0, 0};
    if (lane < TPW) cur = resolve(L + lane * nwarps, total, nreq, r0);
    while (L < total) {  // warp-uniform
      int pg[TPW], tk[TPW];
      uint32_t dst16[TPW];
      U32x2 a0[TPW], sc[TPW];
      U32x4 a1[TPW];
#pragma unroll
      for (int k = 0; k < TPW; ++k) {
        pg[k] = __shfl_sync(0xFFFFFFFFu, cur.page, k);
        tk[k] = __shfl_sync(0xFFFFFFFFu, cur.tok, k);
        dst16[k] = __shfl_sync(0xFFFFFFFFu, cur.dst16, k);
        if (pg[k] >= 0) {
          const uint8_t* page_ptr = p.k_cache + int64_t(pg[k]) * Page<BS>::kBytes;
          const uint8_t* data = page_ptr + int64_t(tk[k]) * kTokenBytes;
          a0[k] = ld_stream_v2(data + 8 * lane);
          if (lane < 24) {
            const U32x2 t2 = ld_stream_v2(data + 256 + 8 * lane);
            a1[k] = U32x4{t2.x, t2.y, 0u, 0u};
          } else {
            a1[k] = ld_global_nc_v4(data + kNopeBytes + 16 * (lane - 24));
          }
          sc[k] = ld_stream_v2(page_ptr + Page<BS>::kScaleBase + int64_t(tk[k]) * kScaleBytes);
        }
      }
      L += step;
      cur = GatherSlot{-1, 0, 0};
      if (lane < TPW) cur = resolve(L + lane * nwarps, total, nreq, r0);
#pragma unroll
      for (int k = 0; k < TPW; ++k) {
        if (pg[k] < 0) continue;
        uint16_t* dst = p.out + (uint64_t(dst16[k]) << 3);
        const int sh = 8 * (lane >> 3);  // chunk l is in tile l/8; chunk 32+l in tile 4 + l/8
        st_global_v4(dst + 8 * lane, dequant8(a0[k], (sc[k].x >> sh) & 0xFFu));
        if (lane < 24)
          st_global_v4(dst + 256 + 8 * lane, dequant8(U32x2{a1[k].x, a1[k].y}, (sc[k].y >> sh) & 0xFFu));
        else
          st_global_v4(dst + 256 + 8 * lane, a1[k]);  // RoPE dims 448 + 8(l-24) .. copied
      }
    }
    flat0 += total;
    __syncthreads();  // the next chunk rewrites the prefix
  }
}

template <int BS, int WARPS, int TPW>
__device__ __forceinline__ void gather_kcache_kernel(const GatherKcacheParams& p) {
  gather_kcache_ctas<BS, WARPS, TPW>(p, int(blockIdx.x), int(gridDim.x));
}

}  // namespace di
