// sparse_mla_prefill (docs/ops.md §5): sparse MQA attention of prefill tokens over gathered bf16
// KV rows. One CTA = one token x HEADS query heads; it walks the token's index list in tiles of
// BLOCK_N keys through a STAGES-deep cp.async ring, with mma.sync m16n8k16 (bf16 in, fp32 acc).
//
// Why this shape (sm_80/sm_86 allow 48 KB of shared memory per CTA):
//  * Q for 64 heads is 64 KB and the fp32 output accumulator 128 KB: neither fits in shared
//    memory, so both live in registers, spread over the warps (192 regs/thread at 8 warps).
//  * Each warp holds Q and the accumulator for the same slice of dims (dimsPerWarp = 512/DK) of
//    its head group. QK^T is therefore split along its reduction dim: every warp computes a partial
//    score tile over its dims, the DK partials of a group are summed through shared memory and each
//    8-head "octet" of the group has one owner warp that runs the online softmax and publishes P
//    (bf16, already in mma A-fragment order) and the rescale factors. PV needs no exchange: V is
//    the same swizzled tile, read with ldmatrix.trans for the warp's own dims.
//  * Every key row is fetched once per CTA (not once per warp), and a token's 64 heads share one
//    CTA, so the gathered rows cross L2 -> SM once per token.
//  * With two head groups and >= 3 stages (the larger sm_89/sm_90 configs) the groups run out of
//    phase ("ping-pong"): one group's softmax overlaps the other's mma.
//  * The softmax rescales lazily (the reference max moves only by > 2^8), so the 128-register
//    accumulator rescale is skipped on almost every tile.
// Shared memory at heads=64, warps=8, block_n=16, stages=2:
//   KV 2 x 16 x 1024 = 32768 + partials 2 groups x 4 octets x 3 x 16 keys x 32 = 12288
//   + P 64 x 16 x 2 = 2048 + row scales 256 + flags 128 = 47488 bytes (<= 49152).
#pragma once
#include "common/Mma.cuh"
#include "common/Numerics.cuh"
#include "common/Types.h"
#include "params/SparseMlaPrefillParams.h"

namespace di {

extern __shared__ __align__(128) uint8_t sparse_mla_prefill_dyn_smem[];

namespace smp {

struct alignas(16) F32x4 { float x, y, z, w; };
struct alignas(8) U32x2 { uint32_t x, y; };

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float pos_inf() { return __int_as_float(0x7f800000); }

__device__ __forceinline__ uint32_t ldg_u32(const void* ptr) {
  uint32_t v;
  asm volatile("ld.global.nc.b32 %0, [%1];\n" : "=r"(v) : "l"(ptr));
  return v;
}
__device__ __forceinline__ int32_t ldg_s32(const int32_t* ptr) { return int32_t(ldg_u32(ptr)); }
__device__ __forceinline__ float ldg_f32(const float* ptr) { return __uint_as_float(ldg_u32(ptr)); }

// 2^x (MUFU); -inf gives +0, which the masked scores rely on.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float log2_approx(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ bool warp_any(bool pred) {
  uint32_t r;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n vote.sync.any.pred q, p, 0xffffffff;\n"
      " selp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(r)
      : "r"(uint32_t(pred)));
  return r != 0;
}

// Barrier over the `threads` threads of one head group (ids 1.. are free; 0 is __syncthreads).
__device__ __forceinline__ void group_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Static shared memory up to 48 KB; larger configs (sm_89/sm_90 targets) use the dynamic window.
template <int64_t BYTES>
__device__ __forceinline__ uint8_t* shared_base() {
  if constexpr (BYTES <= kSparseMlaPrefillStaticSmemLimit) {
    __shared__ __align__(128) uint8_t buf[BYTES];
    return buf;
  } else {
    return sparse_mla_prefill_dyn_smem;
  }
}

// Byte offset of the 16-byte chunk `c` of a 1024-byte key row whose low three bits are XORed
// with the row's low three bits, so the 8 rows one ldmatrix phase reads hit 8 different bank
// groups. `c_lo_xor` is (c & 7) ^ (row & 7) precomputed per lane; `c_hi` is c & ~7.
__device__ __forceinline__ uint32_t swz(int c_hi, int c_lo_xor) {
  return uint32_t(c_hi + c_lo_xor) << 4;
}

}  // namespace smp

template <int HEADS, int WARPS, int BLOCK_N, int STAGES>
__device__ __forceinline__ void sparse_mla_prefill_kernel(const SparseMlaPrefillParams& p) {
  constexpr SparseMlaPrefillGeometry G = sparseMlaPrefillGeometry(HEADS, WARPS, BLOCK_N, STAGES);
  static_assert(G.valid, "sparse_mla_prefill: unsupported (heads_per_cta, warps, block_n, stages)");
  constexpr int MT = G.mTiles;             // 16-row mma tiles per warp
  constexpr int DK = G.dimSplits;          // warps per head group
  constexpr int DW = G.dimsPerWarp;        // dims of Q / output owned by a warp
  constexpr int HW = 16 * MT;              // heads per group
  constexpr int OCT = 2 * MT;              // 8-head octets per group (softmax ownership unit)
  constexpr int OWN = (OCT + DK - 1) / DK; // octets a warp may own
  constexpr int KSTEPS = DW / 16;          // QK^T k-steps per warp
  constexpr int NT_O = DW / 8;             // output n-tiles per warp
  constexpr int NCH = BLOCK_N / 16;        // 16-key chunks per tile
  constexpr bool OWN_IN_SMEM = G.ownerPartialInSmem;  // owner's partial too (block_n > 16)
  constexpr int PSLOTS = OWN_IN_SMEM ? DK : DK - 1;    // partial slots per octet
  constexpr int TPR = G.loaderThreadsPerRow;
  constexpr int CPT = 64 / TPR;            // 16-byte chunks each loader thread copies per tile
  constexpr uint32_t TILE_BYTES = BLOCK_N * 1024;
  // Ping-pong (two head groups and >= 3 stages): group 1 runs the PV of a tile one step late, so
  // each group's softmax (latency, no tensor work) overlaps the other group's mma. Group 1 then
  // still reads the previous tile while the ring refills, so the ring prefetches STAGES-2 tiles.
  constexpr bool PINGPONG = G.groups == 2 && STAGES >= 3;
  constexpr int AHEAD = PINGPONG ? STAGES - 2 : STAGES - 1;  // tiles in flight ahead
  constexpr float kLog2e = 1.4426950408889634f;
  constexpr float kLn2 = 0.6931471805599453f;
  constexpr float kRescaleSlack = 8.f;  // base-2 units: P may reach 256 before a rescale

  uint8_t* const smem = smp::shared_base<G.smemBytes>();
  uint8_t* const kvs = smem;
  smp::F32x4* const partial = reinterpret_cast<smp::F32x4*>(smem + G.partialOffset());
  uint8_t* const prob = smem + G.probOffset();
  float* const rowScale = reinterpret_cast<float*>(smem + G.rowScaleOffset());
  int32_t* const flags = reinterpret_cast<int32_t*>(smem + G.flagOffset());

  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int grp = warp / DK, dj = warp % DK;
  const int quad = lane & 3, r8 = lane >> 2;  // mma fragment column pair / row within 8
  const int64_t t = blockIdx.x / p.head_blocks;
  const int hb = int(blockIdx.x % p.head_blocks);
  const int H = p.num_heads;
  const int groupHead0 = hb * HEADS + grp * HW;  // first head of this warp's group

  int len = smp::ldg_s32(p.lens + t);
  len = len < 0 ? 0 : (len > p.kmax ? p.kmax : len);
  const int nTiles = (len + BLOCK_N - 1) / BLOCK_N;

  // ---- Loader: thread owns key row `lrow` of every tile and chunks lcol, lcol+TPR, ... ----
  const int lrow = tid / TPR, lcol = tid % TPR;
  const int32_t* const idxRow = p.indices + t * int64_t(p.kmax);
  auto fetchIndex = [&](int tile) -> int {
    const int k = tile * BLOCK_N + lrow;
    return k < len ? smp::ldg_s32(idxRow + k) : -1;
  };
  auto issueTile = [&](int slot, int idx) {
    const bool valid = idx >= 0 && int64_t(idx) < p.kv_rows;
    uint8_t* const dst = kvs + slot * TILE_BYTES + lrow * 1024;
    if (valid) {
      const uint16_t* const src = p.kv + int64_t(idx) * 512;
#pragma unroll
      for (int c = 0; c < CPT; ++c) {
        const int chunk = lcol + TPR * c;
        cp_async_16(dst + ((chunk ^ (lrow & 7)) << 4), src + chunk * 8);
      }
    } else {
      // Zero rows, so a masked key (P = 0) never multiplies stale NaN/Inf bits in PV.
#pragma unroll
      for (int c = 0; c < CPT; ++c) {
        const int chunk = lcol + TPR * c;
        *reinterpret_cast<U32x4*>(dst + ((chunk ^ (lrow & 7)) << 4)) = U32x4{0u, 0u, 0u, 0u};
      }
    }
    if (lcol == 0) flags[slot * BLOCK_N + lrow] = valid ? 1 : 0;
  };

  // Start the KV pipeline first so its latency overlaps the Q fragment loads.
#pragma unroll
  for (int s = 0; s < AHEAD; ++s) {
    if (s < nTiles) issueTile(s, fetchIndex(s));
    cp_async_commit();
  }
  int nextIndex = fetchIndex(AHEAD);

  // ---- Q slice as mma A fragments: rows r8 / r8+8 of each m-tile, dims dj*DW + 16kk + 2quad (+8).
  uint32_t qf[MT][KSTEPS][4];
  {
    const uint16_t* const qTok = p.q + t * int64_t(H) * 512 + dj * DW + 2 * quad;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int head = groupHead0 + 16 * m + 8 * r + r8;
        const uint16_t* const row = qTok + int64_t(head) * 512;
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) {
          qf[m][kk][r] = head < H ? smp::ldg_u32(row + 16 * kk) : 0u;
          qf[m][kk][r + 2] = head < H ? smp::ldg_u32(row + 16 * kk + 8) : 0u;
        }
      }
    }
  }

  float acc_o[MT][NT_O][4];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int n = 0; n < NT_O; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_o[m][n][e] = 0.f;
  // Online-softmax state of the owned octets (base-2 units): the reference max (quad-uniform,
  // within kRescaleSlack of the true running max), and this lane's part of the row sum, once of the
  // fp32 probabilities (for lse and the sink) and once of the bf16 values PV actually accumulated
  // (to normalise with, so a dominant key's bf16 rounding cancels instead of reaching the output).
  float rowMax[OWN], rowSum[OWN], rowSumP[OWN];
#pragma unroll
  for (int s = 0; s < OWN; ++s) {
    rowMax[s] = smp::neg_inf();
    rowSum[s] = 0.f;
    rowSumP[s] = 0.f;
  }

  // Per-lane ldmatrix addressing. QK^T (non-trans, B = K rows): lanes 0-7 / 8-15 / 16-23 / 24-31
  // address keys 0-7 dims lo / keys 0-7 dims hi / keys 8-15 lo / keys 8-15 hi of a 16x16 block,
  // giving b0,b1 of n-tile 0 then of n-tile 1. PV (trans, B = V rows): keys 0-7 lo / keys 8-15 lo /
  // keys 0-7 hi / keys 8-15 hi, giving b0,b1 of output n-tile 2np then 2np+1.
  const int qkKey = ((lane >> 4) << 3) | (lane & 7);
  const int pvKey = (((lane >> 3) & 1) << 3) | (lane & 7);
  const uint32_t qkLane = uint32_t(qkKey) * 1024 + uint32_t(dj * DW * 2);
  const uint32_t pvLane = uint32_t(pvKey) * 1024 + uint32_t(dj * DW * 2);
  const int qkXor = ((lane >> 3) & 1) ^ (lane & 7);
  const int pvXor = (lane >> 4) ^ (lane & 7);

  // O = O * alpha + P V over my dims for the tile at `kt` (P and alpha of my group in smem).
  auto pvStep = [&](const uint8_t* const kt) {
    float al[MT][2];
    bool rescale = false;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      al[m][0] = rowScale[grp * HW + 16 * m + r8];
      al[m][1] = rowScale[grp * HW + 16 * m + 8 + r8];
      rescale |= (al[m][0] != 1.f) | (al[m][1] != 1.f);
    }
    if (smp::warp_any(rescale)) {  // rare: only when a reference max moved
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT_O; ++n) {
          acc_o[m][n][0] *= al[m][0];
          acc_o[m][n][1] *= al[m][0];
          acc_o[m][n][2] *= al[m][1];
          acc_o[m][n][3] *= al[m][1];
        }
    }
#pragma unroll
    for (int nc = 0; nc < NCH; ++nc) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const uint32_t off = uint32_t(((grp * MT + m) * NCH + nc) * 32 + lane) << 4;
        const U32x4 v = *reinterpret_cast<const U32x4*>(prob + off);
        pa[m][0] = v.x;
        pa[m][1] = v.y;
        pa[m][2] = v.z;
        pa[m][3] = v.w;
      }
      const uint8_t* const vb = kt + nc * 16 * 1024 + pvLane;
#pragma unroll
      for (int np = 0; np < NT_O / 2; ++np) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vb + smp::swz((2 * np) & ~7, ((2 * np) & 7) ^ pvXor));
        const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          mma_bf16_16816(acc_o[m][2 * np], pa[m], b0, acc_o[m][2 * np]);
          mma_bf16_16816(acc_o[m][2 * np + 1], pa[m], b1, acc_o[m][2 * np + 1]);
        }
      }
    }
  };

  const bool late = PINGPONG && grp == 1;  // this group's PV trails by one tile
  int slot = 0, prevSlot = 0, loadSlot = AHEAD;
  for (int tile = 0; tile < nTiles; ++tile) {
    cp_async_wait<AHEAD - 1>();
    __syncthreads();  // tile visible to all; every warp is done with the slot refilled below
    if (tile + AHEAD < nTiles) {
      issueTile(loadSlot, nextIndex);
      nextIndex = fetchIndex(tile + AHEAD + 1);
    }
    cp_async_commit();
    const uint8_t* const kt = kvs + slot * TILE_BYTES;
    if (late && tile > 0) pvStep(kvs + prevSlot * TILE_BYTES);

    // ---- S partial = Q[:, my dims] K[:, my dims]^T, 16 keys at a time. ----
    float own[OWN][NCH][4];  // the owner's own partial when it stays in registers
#pragma unroll
    for (int nc = 0; nc < NCH; ++nc) {
      float acc[MT][2][4];
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[m][n][e] = 0.f;
      const uint8_t* const kb = kt + nc * 16 * 1024 + qkLane;
#pragma unroll
      for (int kk = 0; kk < KSTEPS; ++kk) {
        uint32_t b[4];
        ldmatrix_x4(b, kb + smp::swz((2 * kk) & ~7, ((2 * kk) & 7) ^ qkXor));
        const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          mma_bf16_16816(acc[m][0], qf[m][kk], b0, acc[m][0]);
          mma_bf16_16816(acc[m][1], qf[m][kk], b1, acc[m][1]);
        }
      }
      // Octet o = (m-tile o/2, row half o%2): its owner keeps the values, others publish them.
#pragma unroll
      for (int o = 0; o < OCT; ++o) {
        const int m = o >> 1, h = o & 1;
        const smp::F32x4 v{acc[m][0][2 * h], acc[m][0][2 * h + 1], acc[m][1][2 * h],
                           acc[m][1][2 * h + 1]};
        const int owner = o % DK;
        if (!OWN_IN_SMEM && dj == owner) {
          own[o / DK][nc][0] = v.x;
          own[o / DK][nc][1] = v.y;
          own[o / DK][nc][2] = v.z;
          own[o / DK][nc][3] = v.w;
        } else {
          const int w = OWN_IN_SMEM ? dj : (dj < owner ? dj : dj - 1);
          partial[(((grp * OCT + o) * PSLOTS + w) * NCH + nc) * 32 + lane] = v;
        }
      }
    }
    smp::group_barrier(1 + grp, 32 * DK);

    // ---- Owners: full scores, online softmax, P (bf16) and the rescale factor per head. ----
#pragma unroll
    for (int s = 0; s < OWN; ++s) {
      const int o = dj + s * DK;
      if (o < OCT) {  // warp-uniform
        const int m = o >> 1, h = o & 1;
        float sc[NCH][4];
        float tmax = smp::neg_inf();
#pragma unroll
        for (int nc = 0; nc < NCH; ++nc) {
          float v[4] = {0.f, 0.f, 0.f, 0.f};
          if constexpr (!OWN_IN_SMEM) {
            v[0] = own[s][nc][0];
            v[1] = own[s][nc][1];
            v[2] = own[s][nc][2];
            v[3] = own[s][nc][3];
          }
#pragma unroll
          for (int w = 0; w < PSLOTS; ++w) {
            const smp::F32x4 q = partial[(((grp * OCT + o) * PSLOTS + w) * NCH + nc) * 32 + lane];
            v[0] += q.x;
            v[1] += q.y;
            v[2] += q.z;
            v[3] += q.w;
          }
          // Values e: keys 16nc + 2quad + (e&1) + 8*(e>>1).
          const int32_t* const fl = flags + slot * BLOCK_N + nc * 16 + 2 * quad;
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const bool ok = fl[(e & 1) + 8 * (e >> 1)] != 0;
            sc[nc][e] = ok ? v[e] * p.scale_log2 : smp::neg_inf();
            tmax = fmaxf(tmax, sc[nc][e]);
          }
        }
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
        // Lazy rescaling: the reference max only moves when a score exceeds it by more than
        // kRescaleSlack (P <= 2^slack stays exact enough in bf16/fp32), so the accumulator
        // rescale below is skipped on most tiles. lse and the final scale use the same reference.
        const bool grow = tmax > rowMax[s] + kRescaleSlack;  // -inf + slack stays -inf
        const float mNew = grow ? tmax : rowMax[s];
        const float mUse = mNew == smp::neg_inf() ? 0.f : mNew;  // all masked so far: P = 0
        const float alpha = grow ? smp::exp2_approx(rowMax[s] - mUse) : 1.f;
        float rs = 0.f, rsp = 0.f;
#pragma unroll
        for (int nc = 0; nc < NCH; ++nc) {
          float pr[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            pr[e] = smp::exp2_approx(sc[nc][e] - mUse);
            rs += pr[e];
          }
          // A fragment of k-step nc stored in register order {a0, a1, a2, a3}: row half h holds
          // a_h (keys 2quad..) and a_{h+2} (keys 2quad+8..). PV's 16-byte load then lands in the
          // register quad the mma reads, with no per-mma register shuffle.
          const smp::U32x2 pk{f32x2_to_bf16x2(pr[0], pr[1]), f32x2_to_bf16x2(pr[2], pr[3])};
          rsp += (bf16x2_lo(pk.x) + bf16x2_hi(pk.x)) + (bf16x2_lo(pk.y) + bf16x2_hi(pk.y));
          uint8_t* const pw = prob + ((((grp * MT + m) * NCH + nc) * 32 + lane) << 4) + 4 * h;
          *reinterpret_cast<uint32_t*>(pw) = pk.x;
          *reinterpret_cast<uint32_t*>(pw + 8) = pk.y;
        }
        // Each lane keeps the sum of its own quarter of the row (alpha is quad-uniform); the
        // quad reduction waits for the epilogue, off the per-tile critical path.
        rowSum[s] = rowSum[s] * alpha + rs;
        rowSumP[s] = rowSumP[s] * alpha + rsp;
        rowMax[s] = mNew;
        if (quad == 0) rowScale[grp * HW + 16 * m + 8 * h + r8] = alpha;
      }
    }
    smp::group_barrier(1 + grp, 32 * DK);

    if (!late) pvStep(kt);
    prevSlot = slot;
    slot = slot + 1 == STAGES ? 0 : slot + 1;
    loadSlot = loadSlot + 1 == STAGES ? 0 : loadSlot + 1;
  }
  if (late && nTiles > 0) pvStep(kvs + prevSlot * TILE_BYTES);

  // ---- Epilogue: lse and the final scale; out = 0, lse = +inf for a row with no valid key. With l
  // the fp32 sum and lp the sum of the bf16 P:  out = O / lp * l / (l + e^(sink - max)), i.e. the
  // convex combination PV formed, times the share the sink leaves to the keys. ----
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the KV ring and with rowScale
#pragma unroll
  for (int s = 0; s < OWN; ++s) {
    const int o = dj + s * DK;
    if (o < OCT) {
      const int row = grp * HW + 8 * o + r8;  // 16*(o/2) + 8*(o%2) == 8*o
      const int head = hb * HEADS + row;
      float l = rowSum[s], lp = rowSumP[s];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      lp += __shfl_xor_sync(0xffffffffu, lp, 1);
      lp += __shfl_xor_sync(0xffffffffu, lp, 2);
      const float mx = rowMax[s];
      const float sink2 = head < H ? smp::ldg_f32(p.attn_sink + head) * kLog2e : 0.f;
      const float f = l > 0.f && lp > 0.f ? l / (lp * (l + smp::exp2_approx(sink2 - mx))) : 0.f;
      if (quad == 0) {
        rowScale[row] = f;
        if (head < H)
          p.lse[t * H + head] = l > 0.f ? (mx + smp::log2_approx(l)) * kLn2 : smp::pos_inf();
      }
    }
  }
  __syncthreads();

  // Each warp stages 8 output rows x DW dims (bf16, chunk-swizzled) in its own slice of the idle
  // KV area, then writes them with 16-byte coalesced stores.
  uint8_t* const stg = kvs + warp * (8 * DW * 2);
#pragma unroll
  for (int o = 0; o < OCT; ++o) {
    const int m = o >> 1, h = o & 1;
    const float f = rowScale[grp * HW + 8 * o + r8];
#pragma unroll
    for (int n = 0; n < NT_O; ++n)
      *reinterpret_cast<uint32_t*>(stg + r8 * (DW * 2) + ((n ^ r8) << 4) + 4 * quad) =
          f32x2_to_bf16x2(acc_o[m][n][2 * h] * f, acc_o[m][n][2 * h + 1] * f);
    __syncwarp();
#pragma unroll
    for (int i = 0; i < DW / 32; ++i) {
      const int idx = lane + 32 * i;
      const int r = idx / (DW / 8), c = idx % (DW / 8);
      const U32x4 v = *reinterpret_cast<const U32x4*>(stg + r * (DW * 2) + ((c ^ r) << 4));
      const int head = groupHead0 + 8 * o + r;
      if (head < H) st_global_v4(p.out + (t * H + head) * 512 + dj * DW + c * 8, v);
    }
    __syncwarp();
  }
}

}  // namespace di
