// sparse_mla_decode (docs/ops.md §6): attention of few-token queries over the valid entries of
// two fp8 paged caches (window + optional compressed), one softmax with the attention sink in
// the denominator, reading the 584-byte-per-token cache pages directly.
//
// Work geometry: one CTA = one query (b, s) x HEADS heads x one split of the key list. All heads
// share each key row (MQA), so a key tile is dequantized once into shared memory and then used
// by every warp through tensor cores:
//   warp (m, d) owns head rows [16m, 16m+16) (m-tile, zero rows pad HEADS < 16) and the head-dim
//   slice [d*SW, d*SW+SW) of q (bf16 A fragments kept in registers) and of o (fp32 accumulators).
//   QK: S_partial = Q[:, slice] * K[:, slice]^T with mma m16n8k16 (heads = M, keys = N); the
//       DS slice partials of an m-tile are summed through shared memory in a fixed order, so all
//       warps of the m-tile derive bit-identical softmax state.
//   PV: O[:, slice] += P * V[:, slice], P taken straight from the score fragments (as a bf16
//       hi + lo pair, so P keeps ~16 bits), V = the same dequantized rows read transposed by
//       ldmatrix.trans.
// Key tiles stream through STAGES cp.async buffers of raw cache bytes; each tile's bytes are
// dequantized (e4m3 -> bf16 times 2^-120 by a byte permute and bit placement, times the UE8M0
// scale by one bf16x2 multiply that rounds once) into one swizzled bf16 tile.
// Splits (MODE): kDirect: one split, the CTA writes out/lse itself. Otherwise every CTA writes
// normalized partials (o / l, lse) to the workspace and they are merged with the sink
// (smd::merge_rows, one code path so both modes give the same bits): kMergeLaunch by a second
// launch (sparse_mla_decode_merge_kernel), kMergeLastCta in the same launch by the CTA of each
// (query, head group) that arrives last, counted on an integer counter in the zeroed workspace
// (reset to zero by that CTA). The merge sums the splits in split order whichever CTA is last.
#pragma once
#include "common/Arrival.cuh"
#include "common/Mma.cuh"
#include "common/Numerics.cuh"
#include "common/QuantWeights.cuh"
#include "common/Types.h"
#include "params/SparseMlaDecodeParams.h"

namespace di {
namespace smd {

// Layout constants (members of a struct so that NVRTC emits no global variables for them).
struct Const {
  static constexpr int kHeadDim = 512;
  static constexpr int kNopeDims = 448;
  static constexpr int kTokenBytes = 576;         // data bytes of one token inside a page
  static constexpr int kRawKeyBytes = 592;        // staging bytes per key (data + scales)
  static constexpr int kNopeChunks = 448 / 8;     // 8-byte e4m3 groups per key (56)
  static constexpr int kDataChunks16 = 576 / 16;  // 16-byte loads per key (36)
  static constexpr float kLog2e = 1.4426950408889634f;
  static constexpr float kLn2 = 0.6931471805599453f;
};
// No <math.h> under NVRTC: infinities by bit pattern.
__device__ __forceinline__ float pos_inf() { return __uint_as_float(0x7F800000u); }
__device__ __forceinline__ float neg_inf() { return __uint_as_float(0xFF800000u); }

// Under the host emulator (tests/unit/emu) the PTX below has plain C++ stand-ins.
__device__ __forceinline__ float ex2(float x) {
#ifdef DI_SIMT_EMU
  return exp2f(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}
__device__ __forceinline__ float lg2(float x) {
#ifdef DI_SIMT_EMU
  return log2f(x);
#else
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}

// Barrier over the warps of one m-tile: only they exchange score partials, so the other
// m-tiles need not wait. Immediate ids (1 + mt; 0 is __syncthreads) let ptxas count them.
template <int MT, int NTHREADS>
__device__ __forceinline__ void mtile_barrier(int mt) {
  static_assert(MT >= 1 && MT <= 4, "at most 4 m-tiles per CTA");
#ifdef DI_SIMT_EMU
  (void)mt;
  __syncthreads();  // every m-tile passes the same barriers in the same order: a CTA barrier is safe
#else
  if constexpr (MT == 1) {
    __syncthreads();
  } else {
    if (mt == 0) asm volatile("bar.sync 1, %0;\n" ::"n"(NTHREADS) : "memory");
    else if (MT == 2 || mt == 1) asm volatile("bar.sync 2, %0;\n" ::"n"(NTHREADS) : "memory");
    else if (MT == 3 || mt == 2) asm volatile("bar.sync 3, %0;\n" ::"n"(NTHREADS) : "memory");
    else asm volatile("bar.sync 4, %0;\n" ::"n"(NTHREADS) : "memory");
  }
#endif
}

// 8-byte async copy (cp.async.cg only takes 16 bytes); src_bytes 0 zero-fills.
__device__ __forceinline__ void cp_async_8(void* smem_dst, const void* gmem_src, bool valid) {
#ifdef DI_SIMT_EMU
  di_emu::cp_async(smem_dst, gmem_src, 8, valid ? 8 : 0);
#else
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_addr(smem_dst)),
               "l"(gmem_src), "r"(valid ? 8 : 0));
#endif
}

// A bf16 pair of q as one 32-bit word (read-only path).
__device__ __forceinline__ uint32_t ldg_u32(const uint16_t* p) {
  return __ldg(reinterpret_cast<const unsigned int*>(p));
}

// Bit 7 of each byte of the result is set where the byte is an e4m3 NaN code (0x7F / 0xFF):
// ((b & 0x7F) + 1) carries into bit 7 exactly when the low seven bits are all ones.
__device__ __forceinline__ uint32_t e4m3x4_nan_bits(uint32_t w) {
  return ((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u;
}
// Zero the bytes flagged by e4m3x4_nan_bits: a NaN in a key row counts as 0.
__device__ __forceinline__ uint32_t e4m3x4_clear(uint32_t w, uint32_t nan_bits) {
  return w & ~(nan_bits | (nan_bits - (nan_bits >> 7)));
}
// Zero every bf16 NaN lane (|x| > 0x7F80) of a bf16x2 word.
__device__ __forceinline__ uint32_t bf16x2_zero_nan(uint32_t w) {
  const uint32_t n = ((w & 0x7FFF7FFFu) + 0x007F007Fu) & 0x80008000u;
  return w & ~(n | (n - (n >> 15)));
}

// Eight e4m3 codes (little-endian in w0, w1) times the block scale -> four bf16x2 words in dim
// order. A byte permute puts codes 2i, 2i+1 in the high byte of each 16-bit lane, bit placement
// makes them bf16 values times 2^-120, and the bf16x2 multiply by the power-of-two factor(s)
// (bf16x2 bit patterns) rounds once, so the result matches the reference bit for bit.
template <bool kTwoFactors>
__device__ __forceinline__ U32x4 dequant8(uint32_t w0, uint32_t w1, uint32_t f1, uint32_t f2) {
  const uint32_t n0 = e4m3x4_nan_bits(w0), n1 = e4m3x4_nan_bits(w1);
  if ((n0 | n1) != 0u) {  // rare: only caches written from NaN inputs hold NaN codes
    w0 = e4m3x4_clear(w0, n0);
    w1 = e4m3x4_clear(w1, n1);
  }
  uint32_t q[4] = {__byte_perm(w0, 0u, 0x1000u), __byte_perm(w0, 0u, 0x3020u), __byte_perm(w1, 0u, 0x1000u),
                   __byte_perm(w1, 0u, 0x3020u)};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    q[i] = qw::bf16x2_mul(e4m3x2_hi_to_bf16x2_biased(q[i]), f1);
    if (kTwoFactors) q[i] = qw::bf16x2_mul(q[i], f2);
  }
  U32x4 r;
  r.x = q[0];
  r.y = q[1];
  r.z = q[2];
  r.w = q[3];
  return r;
}

// Byte offset of 16-byte chunk `chunk` of key row `key` in the bf16 tile: the chunk index is
// XOR-ed with key % 8 so that ldmatrix over 8 consecutive keys hits 8 distinct bank groups.
__device__ __forceinline__ int kbuf_offset(int key, int chunk) {
  return key * 1024 + ((chunk ^ (key & 7)) << 4);
}


// Split modes (the MODE template argument).
struct Mode {
  static constexpr int kDirect = 0;        // one split: the CTA writes out / lse
  static constexpr int kMergeLaunch = 1;   // partials, merged by sparse_mla_decode_merge_kernel
  static constexpr int kMergeLastCta = 2;  // partials, merged by the last CTA of the head group
};

// Merge of the split partials of (query, head) rows: lse = log(sum_i e^lse_i); out = sum_i e^lse_i
// * o_i / (e^lse + e^sink), the splits summed in split order. One code path for the merge launch
// and the last-CTA merge, so both give the same bits. Partials are read through L2 (__ldcg: in
// the one-launch mode other CTAs wrote them in this launch).
//
// Step 1 (merge_weights, every thread of the CTA, two barriers): the lse of `rows` consecutive
// rows qh0 .. are loaded once into shared memory (one L2 round trip for all of them), then one
// thread per row turns them into the weights w_i = e^(lse_i - max) in place and sums them in
// split order (rowsum), with the max in rowmax (-inf: no valid key in any split).
template <int THREADS>
__device__ __forceinline__ void merge_weights(const SparseMlaDecodeParams& p, int64_t qh0, int rows, float* w,
                                              float* rowmax, float* rowsum) {
  const int splits = p.num_splits;
  for (int e = threadIdx.x; e < rows * splits; e += THREADS) w[e] = __ldcg(p.partial_lse + qh0 * splits + e);
  __syncthreads();
  for (int r = threadIdx.x; r < rows; r += THREADS) {
    float* const wr = w + r * splits;
    float mx = neg_inf();
    for (int i = 0; i < splits; ++i) mx = fmaxf(mx, wr[i]);
    float sum = 0.f;
    if (mx != neg_inf()) {
      for (int i = 0; i < splits; ++i) {
        const float x = expf(wr[i] - mx);  // empty split: e^-inf = 0 (its o is 0 too)
        wr[i] = x;
        sum += x;
      }
    }
    rowmax[r] = mx;
    rowsum[r] = sum;
  }
  __syncthreads();
}

// Step 2: the 4 dims [4 * quad, 4 * quad + 4) of NR rows (row r of step 1's tables is row[r], its
// global (query, head) index qh[r], its head h[r]). CHUNK splits of every row are loaded before
// their adds, so NR * CHUNK 16-byte loads are in flight (the grouping changes no arithmetic).
template <int NR, int CHUNK>
__device__ __forceinline__ void merge_rows(const SparseMlaDecodeParams& p, const int64_t (&qh)[NR],
                                           const int (&h)[NR], const int (&row)[NR], int quad, const float* w,
                                           const float* rowmax, const float* rowsum) {
  const int splits = p.num_splits;
  float4 acc[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) acc[r] = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int s0 = 0; s0 < splits; s0 += CHUNK) {
    float4 v[NR][CHUNK];
#pragma unroll
    for (int r = 0; r < NR; ++r)
#pragma unroll
      for (int j = 0; j < CHUNK; ++j)
        if (s0 + j < splits)
          v[r][j] = __ldcg(reinterpret_cast<const float4*>(p.partial_o + (qh[r] * splits + s0 + j) * Const::kHeadDim) +
                           quad);
#pragma unroll
    for (int r = 0; r < NR; ++r)
#pragma unroll
      for (int j = 0; j < CHUNK; ++j) {
        if (s0 + j < splits && rowmax[row[r]] != neg_inf()) {
          const float wt = w[row[r] * splits + s0 + j];
          acc[r].x += wt * v[r][j].x;
          acc[r].y += wt * v[r][j].y;
          acc[r].z += wt * v[r][j].z;
          acc[r].w += wt * v[r][j].w;
        }
      }
  }
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    uint16_t* const dst = p.out + qh[r] * Const::kHeadDim + 4 * quad;
    const float mx = rowmax[row[r]], sum = rowsum[row[r]];
    if (mx == neg_inf()) {  // no valid key in any split
      *reinterpret_cast<uint2*>(dst) = make_uint2(0u, 0u);
      if (quad == 0) p.lse[qh[r]] = pos_inf();
      continue;
    }
    const float inv = 1.f / (sum + expf(__ldg(p.attn_sink + h[r]) - mx));
    *reinterpret_cast<uint2*>(dst) = make_uint2(f32x2_to_bf16x2(acc[r].x * inv, acc[r].y * inv),
                                                f32x2_to_bf16x2(acc[r].z * inv, acc[r].w * inv));
    if (quad == 0) p.lse[qh[r]] = mx + logf(sum);
  }
}

}  // namespace smd

// HEADS: heads per CTA (multiple of 8, <= 64); DS: head-dim slices per m-tile (4 or 8);
// N: keys per tile (16 or 32); STAGES: raw cp.async buffers; MODE: smd::Mode (how splits merge);
// DYN_SMEM: the layout lives in dynamic shared memory (targets whose cap exceeds 48 KB);
// Q_SMEM: q is a swizzled bf16 tile in shared memory read by ldmatrix at every QK k-step instead
// of A fragments held in registers. That frees the registers a wide CTA needs (all 64 heads of
// a query: every key row of the split is then copied and dequantized once for all heads, not
// once per head group); it needs HEADS to be whole m-tiles and HEADS KB of shared memory.
template <int HEADS, int DS, int N, int STAGES, int MODE, bool DYN_SMEM, bool Q_SMEM>
__device__ __forceinline__ void sparse_mla_decode_kernel(const SparseMlaDecodeParams& p) {
  using namespace smd;
  constexpr int MT = (HEADS + 15) / 16;
  constexpr int THREADS = 32 * MT * DS;
  constexpr int SW = Const::kHeadDim / DS;  // head dims per warp
  constexpr int KSTEPS = SW / 16;    // QK k-steps per warp
  constexpr int NT = N / 8;          // key n-tiles per tile
  constexpr int OT = SW / 8;         // output n-tiles per warp
  // Independent QK accumulator chains (latency hiding); one with q in shared memory, whose 16
  // warps hide latency and whose 64 accumulator registers leave no room for a second chain.
  constexpr int CH = NT < 4 && !Q_SMEM ? 2 : 1;
  constexpr int TPK = THREADS / N;   // loader threads per key
  // With 8 slices every warp reading all 8 partials would move twice the bytes of its ldmatrix
  // loads: reduce in two steps instead (each warp sums 1/DS of the tile, then all read the sums).
  constexpr bool kTwoStepReduce = DS == 8;
  constexpr int RED = NT * 4 / DS;   // floats each lane sums in step 1
  constexpr SparseMlaDecodeSmem L = sparseMlaDecodeSmem(HEADS, DS, N, STAGES, Q_SMEM);
  static_assert(HEADS % 8 == 0 && HEADS >= 8 && HEADS <= 64, "HEADS: multiple of 8 in 8..64");
  static_assert(DS == 4 || DS == 8, "DS: 4 or 8 head-dim slices");
  static_assert(N == 16 || N == 32, "N: 16 or 32 keys per tile");
  static_assert(STAGES >= 1 && STAGES <= 4, "STAGES: 1..4");
  static_assert(THREADS % N == 0 && THREADS <= 1024, "threads must split evenly over keys");
  static_assert((N * 64) % THREADS == 0, "dequant work must split evenly over threads");
  static_assert(DYN_SMEM || L.total <= 48 * 1024, "static shared memory is capped at 48 KB");
  static_assert(!Q_SMEM || HEADS % 16 == 0, "q in shared memory: HEADS must be whole m-tiles");
  static_assert(MODE == Mode::kDirect || MODE == Mode::kMergeLaunch || MODE == Mode::kMergeLastCta, "MODE");
  constexpr bool SPLIT = MODE != Mode::kDirect;

  uint8_t* smem;
  if constexpr (DYN_SMEM) {
#ifdef DI_SIMT_EMU
    smem = di_emu::dynamic_smem();
#else
    extern __shared__ __align__(128) uint8_t smd_dyn_smem[];
    smem = smd_dyn_smem;
#endif
  } else {
    __shared__ __align__(128) uint8_t smd_static_smem[L.total];
    smem = smd_static_smem;
  }
  uint8_t* const kbuf = smem + L.kbuf;
  uint8_t* const raw = smem + L.raw;
  float4* const spart = reinterpret_cast<float4*>(smem + L.spart);
  float* const sred = reinterpret_cast<float*>(smem + L.sred);
  uint8_t* const qbuf = smem + L.qbuf;
  uint8_t* const valid = smem + L.valid;

  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int mt = warp / DS, sl = warp % DS;
  const int g = lane >> 2, t4 = lane & 3;
  const int split = blockIdx.x, group = blockIdx.y, bs = blockIdx.z;
  const int b = bs / p.sq;
  const int H = p.heads;

  // ---- the key slots of this query: the swa index row [0, swa_k) then the extra row [0, extra_k),
  //      split evenly whatever the lens, so a split's index loads need no lens: they go out
  //      together with the lens loads instead of after them. Slots at or past their source's
  //      lens are dead keys; tiles past the last live slot are skipped. ----
  const int kslots = p.swa_k + p.extra_k;  // extra_k = 0 without the compressed source
  const int per_split = (((kslots + p.num_splits - 1) / p.num_splits) + N - 1) / N * N;
  const int kbeg = min(kslots, split * per_split);
  const int kend = min(kslots, kbeg + per_split);
  const int slot_tiles = (kend - kbeg + N - 1) / N;

  // ---- loader role: TPK threads copy one key's 576 data bytes + 8 scale bytes per tile ----
  const int lkey = tid / TPK, lsub = tid % TPK;
  // The index rows' addresses are formed at each load (not kept live across the main loop).
  auto load_index = [&](int tile) -> int {
    const int pos = kbeg + tile * N + lkey;
    if (tile >= slot_tiles || pos >= kend) return -1;
    return pos < p.swa_k ? __ldg(p.swa_indices + (int64_t(bs) * p.swa_k + pos))
                         : __ldg(p.extra_indices + (int64_t(bs) * p.extra_k + (pos - p.swa_k)));
  };
  int idx_pre[STAGES + 1];
#pragma unroll
  for (int s = 0; s <= STAGES; ++s) idx_pre[s] = load_index(s);

  int ls = __ldg(p.swa_lens + (p.swa_lens_per_query ? bs : b));
  ls = min(max(ls, 0), p.swa_k);
  int le = 0;
  if (p.extra_indices != nullptr) {
    le = __ldg(p.extra_lens + (p.extra_lens_per_query ? bs : b));
    le = min(max(le, 0), p.extra_k);
  }
  const int live_end = le > 0 ? p.swa_k + le : ls;  // one past the last live slot
  const int ntiles = max(0, (min(kend, live_end) - kbeg + N - 1) / N);

  auto issue_tile = [&](int tile, int idx) {
    if (tile < ntiles) {
      const int pos = kbeg + tile * N + lkey;
      const bool from_swa = pos < p.swa_k;
      const bool live = pos < kend && (from_swa ? pos < ls : pos - p.swa_k < le);
      const uint8_t* cache = from_swa ? p.swa_cache : p.extra_cache;
      const int64_t bsz = from_swa ? p.swa_block_size : p.extra_block_size;
      const int shift = from_swa ? p.swa_block_shift : p.extra_block_shift;
      const int64_t page_bytes = from_swa ? p.swa_page_bytes : p.extra_page_bytes;
      const int64_t slots = from_swa ? p.swa_num_slots : p.extra_num_slots;
      const bool ok = live && idx >= 0 && int64_t(idx) < slots;
      const uint8_t* data = p.swa_cache;  // any valid address: the copy zero-fills
      const uint8_t* scales = p.swa_cache;
      if (ok) {
        const int64_t page = shift >= 0 ? int64_t(idx >> shift) : int64_t(uint32_t(idx) / uint32_t(bsz));
        const int64_t off = int64_t(idx) - page * bsz;
        const uint8_t* page_base = cache + page * page_bytes;
        data = page_base + off * Const::kTokenBytes;
        scales = page_base + bsz * Const::kTokenBytes + off * 8;
      }
      uint8_t* const stage = raw + (tile % STAGES) * (N * Const::kRawKeyBytes);
#pragma unroll
      for (int c = lsub; c < Const::kDataChunks16; c += TPK)
        cp_async_16(stage + lkey * Const::kTokenBytes + c * 16, data + c * 16, ok);
      if (lsub == TPK - 1) cp_async_8(stage + N * Const::kTokenBytes + lkey * 8, scales, ok);
      if (lsub == 0) valid[(tile % (STAGES + 1)) * N + lkey] = ok ? 1 : 0;
    }
    cp_async_commit();  // one group per tile slot, empty or not, keeps the wait counts uniform
  };

  // ---- prologue: the index loads and lens above, then q (independent of them), then the first
  //      copies ----

  const int row0 = mt * 16 + g, row1 = row0 + 8;  // head rows of this thread inside the CTA
  // Register schedule: the A fragments of this warp's m-tile and dim slice. Shared schedule: the
  // CTA's HEADS x 512 q tile, copied with the first tile's cp.async group (the first wait and
  // barrier of the main loop publish it).
  uint32_t qa[Q_SMEM ? 1 : KSTEPS][4];
  if constexpr (Q_SMEM) {
    const uint16_t* const qcta = p.q + (int64_t(bs) * H + group * HEADS) * Const::kHeadDim;
#pragma unroll
    for (int i = tid; i < HEADS * 64; i += THREADS)
      cp_async_16(qbuf + kbuf_offset(i >> 6, i & 63), qcta + (i >> 6) * Const::kHeadDim + (i & 63) * 8, true);
  } else {
    const int head0 = group * HEADS + row0, head1 = group * HEADS + row1;
    const uint16_t* q0 = p.q + (int64_t(bs) * H + head0) * Const::kHeadDim + sl * SW + 2 * t4;
    const uint16_t* q1 = p.q + (int64_t(bs) * H + head1) * Const::kHeadDim + sl * SW + 2 * t4;
    const bool r0ok = row0 < HEADS, r1ok = row1 < HEADS;
#pragma unroll
    for (int k = 0; k < KSTEPS; ++k) {
      qa[k][0] = r0ok ? ldg_u32(q0 + 16 * k) : 0u;
      qa[k][1] = r1ok ? ldg_u32(q1 + 16 * k) : 0u;
      qa[k][2] = r0ok ? ldg_u32(q0 + 16 * k + 8) : 0u;
      qa[k][3] = r1ok ? ldg_u32(q1 + 16 * k + 8) : 0u;
    }
  }

#pragma unroll
  for (int s = 0; s < STAGES; ++s) issue_tile(s, idx_pre[s]);
  int next_idx = idx_pre[STAGES];

  float o[OT][4];
#pragma unroll
  for (int j = 0; j < OT; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float mrow[2] = {neg_inf(), neg_inf()};  // running max (exp2 domain) of rows g, g + 8
  float lrow[2] = {0.f, 0.f};              // this thread's share of the running sums

  // Dequant role: thread owns 16-byte output chunk dq_chunk (8 dims) of keys dq_key + r * step;
  // chunks 0..55 come from 8 e4m3 bytes and a scale byte, chunks 56..63 are the bf16 RoPE dims.
  constexpr int DQ_KEY_STEP = THREADS / 64;
  const int dq_chunk = tid & 63, dq_key = tid >> 6;
  const bool dq_nope = dq_chunk < Const::kNopeChunks;
  const int dq_src = dq_key * Const::kTokenBytes +
                     (dq_nope ? dq_chunk * 8 : Const::kNopeDims + (dq_chunk - Const::kNopeChunks) * 16);
  const int dq_scale = N * Const::kTokenBytes + dq_key * 8 + (dq_chunk >> 3);

  // ldmatrix row addresses. Keys of one 8x8 matrix are 8 consecutive rows, so key % 8 = lane % 8
  // and the swizzle reduces to XOR-ing the in-row chunk with lane % 8. QK: chunk = slice base +
  // 2k + lane / 8 for k-pairs starting at 2k in {0, 4, 8, 12}: two XOR patterns (2k % 8 in {0, 4}).
  const int sw = lane & 7;
  // The second pattern is the first with chunk bit 2 flipped (offset bit 6: the row and slice
  // bases are multiples of 128 bytes), so only the first is kept in a register.
  const int qk_off0 = (lane & 7) * 1024 + sl * (SW / 8) * 16 + (((lane >> 3) ^ sw) << 4);
  // PV: key = 16k + lane % 16, chunk c = slice base + 2jp + lane / 16. (c % 8) ^ sw is
  // (2jp % 8) ^ (lane / 16 ^ sw) (2jp is even): one register holds the row, slice and lane part
  // (bits 4-6 of the offset; the rest of the offset is a multiple of 128), each jp XORs its own.
  const int hx = (lane >> 4) ^ sw;
  const int pv_off0 = (lane & 15) * 1024 + sl * (SW / 8) * 16 + (hx << 4);
  // q tile (Q_SMEM): lanes 0-7 / 8-15 / 16-23 / 24-31 address rows 0-7 / 8-15 / 0-7 / 8-15 of the
  // m-tile at chunk 2k / 2k / 2k + 1 / 2k + 1 of the slice, giving the A fragment registers in
  // mma order. Row % 8 = lane % 8, so the swizzle is PV's again.
  const int q_off0 = (mt * 16 + (lane & 15)) * 1024 + sl * (SW / 8) * 16 + (hx << 4);
  auto q_frag = [&](int k, uint32_t (&a)[4]) {
    if constexpr (Q_SMEM) {
      ldmatrix_x4(a, qbuf + (q_off0 ^ (((2 * k) & 7) << 4)) + ((2 * k) & 8) * 16);
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = qa[k][i];
    }
  };

  for (int tile = 0; tile < ntiles; ++tile) {
    cp_async_wait<STAGES - 1>();
    __syncthreads();  // raw tile visible to all; the previous tile's PV and score reads are done

    // ---- dequantize the raw tile into the bf16 tile ----
    {
      const uint8_t* const stage = raw + (tile % STAGES) * (N * Const::kRawKeyBytes);
#pragma unroll
      for (int r = 0; r < N / DQ_KEY_STEP; ++r) {
        const int key = dq_key + r * DQ_KEY_STEP;
        const uint8_t* const src = stage + dq_src + r * DQ_KEY_STEP * Const::kTokenBytes;
        U32x4 v;
        if (dq_nope) {
          const uint2 w = *reinterpret_cast<const uint2*>(src);
          const uint32_t e = stage[dq_scale + r * DQ_KEY_STEP * 8];
          if (e <= 134u || e == 255u) {
            // 2^(e-127) * 2^120 folds into one bf16 factor; scale bytes 0 (+0) and 0xFF (NaN) give 0.
            const uint32_t f = (e == 0u || e == 255u) ? 0u : ((e + 120u) << 7) * 0x00010001u;
            v = dequant8<false>(w.x, w.y, f, 0u);
          } else {  // 2^(e-127) past bf16's range of one factor: 2^120, then 2^(e-127)
            v = dequant8<true>(w.x, w.y, 0x7B807B80u, (e << 7) * 0x00010001u);
          }
        } else {
          v = *reinterpret_cast<const U32x4*>(src);
          v.x = bf16x2_zero_nan(v.x);
          v.y = bf16x2_zero_nan(v.y);
          v.z = bf16x2_zero_nan(v.z);
          v.w = bf16x2_zero_nan(v.w);
        }
        *reinterpret_cast<U32x4*>(kbuf + kbuf_offset(key, dq_chunk)) = v;
      }
    }
    __syncthreads();  // bf16 tile ready; this raw stage may be refilled

    issue_tile(tile + STAGES, next_idx);
    next_idx = load_index(tile + STAGES + 1);

    // ---- QK over this warp's dim slice ----
    {
      float acc[CH][NT][4];
#pragma unroll
      for (int c = 0; c < CH; ++c)
#pragma unroll
        for (int j = 0; j < NT; ++j) acc[c][j][0] = acc[c][j][1] = acc[c][j][2] = acc[c][j][3] = 0.f;
#pragma unroll
      for (int k = 0; k < KSTEPS; k += 2) {
        uint32_t a0[4], a1[4];
        q_frag(k, a0);
        q_frag(k + 1, a1);
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          uint32_t kb[4];
          ldmatrix_x4(kb, kbuf + (((k >> 1) & 1) ? qk_off0 ^ 64 : qk_off0) + j * 8 * 1024 + ((2 * k) & 8) * 16);
          const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
          mma_bf16_16816(acc[0][j], a0, b0, acc[0][j]);
          mma_bf16_16816(acc[CH - 1][j], a1, b1, acc[CH - 1][j]);
        }
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        float4 v = make_float4(acc[0][j][0], acc[0][j][1], acc[0][j][2], acc[0][j][3]);
        if (CH == 2) {
          v.x += acc[CH - 1][j][0];
          v.y += acc[CH - 1][j][1];
          v.z += acc[CH - 1][j][2];
          v.w += acc[CH - 1][j][3];
        }
        spart[((mt * DS + sl) * NT + j) * 32 + lane] = v;
      }
    }
    mtile_barrier<MT, DS * 32>(mt);  // this m-tile's slice partials are written

    // ---- full scores, summed over the slices in a fixed order (bit-identical in every warp of
    //      the m-tile), scaled to the exp2 domain, invalid keys -inf ----
    float s[NT][4];
    const uint8_t* const vflags = valid + (tile % (STAGES + 1)) * N;
    if constexpr (kTwoStepReduce) {
      // Step 1: warp sl sums the slices for its 1/DS share of the tile (RED floats per lane).
      const float* const part = reinterpret_cast<const float*>(spart + mt * DS * NT * 32);
      const int e0 = sl * (NT * 128 / DS) + lane * RED;
      float acc[RED];
#pragma unroll
      for (int e = 0; e < RED; ++e) acc[e] = part[e0 + e];
#pragma unroll
      for (int d = 1; d < DS; ++d)
#pragma unroll
        for (int e = 0; e < RED; ++e) acc[e] += part[d * NT * 128 + e0 + e];
#pragma unroll
      for (int e = 0; e < RED; ++e) {
        // Fragment order: element e of the tile is float (e % 4) of lane (e / 4) % 32 in
        // n-tile e / 128, i.e. key 8 * n-tile + 2 * (lane % 4) + (e % 2).
        const int el = e0 + e;
        const int key = 8 * (el >> 7) + 2 * ((el >> 2) & 3) + (el & 1);
        sred[mt * NT * 128 + el] = vflags[key] != 0 ? acc[e] * p.scale_log2 : neg_inf();
      }
      mtile_barrier<MT, DS * 32>(mt);
      // Step 2: every warp reads the reduced tile in its own fragment order.
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const float4 v = reinterpret_cast<const float4*>(sred)[(mt * NT + j) * 32 + lane];
        s[j][0] = v.x;
        s[j][1] = v.y;
        s[j][2] = v.z;
        s[j][3] = v.w;
      }
    } else {
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        float4 v = spart[((mt * DS + 0) * NT + j) * 32 + lane];
#pragma unroll
        for (int d = 1; d < DS; ++d) {
          const float4 u = spart[((mt * DS + d) * NT + j) * 32 + lane];
          v.x += u.x;
          v.y += u.y;
          v.z += u.z;
          v.w += u.w;
        }
        const int key = 8 * j + 2 * t4;
        const bool k0 = vflags[key] != 0, k1 = vflags[key + 1] != 0;
        s[j][0] = k0 ? v.x * p.scale_log2 : neg_inf();
        s[j][1] = k1 ? v.y * p.scale_log2 : neg_inf();
        s[j][2] = k0 ? v.z * p.scale_log2 : neg_inf();
        s[j][3] = k1 ? v.w * p.scale_log2 : neg_inf();
      }
    }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = neg_inf();
#pragma unroll
      for (int j = 0; j < NT; ++j) mx = fmaxf(mx, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mnew = fmaxf(mrow[r], mx);
      const float base = mnew == neg_inf() ? 0.f : mnew;  // no valid key yet: keep everything 0
      alpha[r] = ex2(mrow[r] - base);
      mrow[r] = mnew;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        s[j][2 * r] = ex2(s[j][2 * r] - base);
        s[j][2 * r + 1] = ex2(s[j][2 * r + 1] - base);
        sum += s[j][2 * r] + s[j][2 * r + 1];
      }
      lrow[r] = lrow[r] * alpha[r] + sum;
    }
    // Once the running max settles alpha is exactly 1 for the whole warp: skip the rescale.
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
      for (int j = 0; j < OT; ++j) {
        o[j][0] *= alpha[0];
        o[j][1] *= alpha[0];
        o[j][2] *= alpha[1];
        o[j][3] *= alpha[1];
      }
    }

    // ---- PV: the score fragments of 16 keys are the A fragment of one k-step. P goes in as
    //      two bf16 terms (p = hi + lo, ~16 significant bits): one bf16 P would leave a 2^-9
    //      relative error that flips the bf16 rounding of outputs above 1 (a 2^-7 step) ----
#pragma unroll
    for (int k = 0; k < N / 16; ++k) {
      uint32_t pa_hi[4], pa_lo[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float p0 = s[2 * k + (i >> 1)][2 * (i & 1)], p1 = s[2 * k + (i >> 1)][2 * (i & 1) + 1];
        pa_hi[i] = f32x2_to_bf16x2(p0, p1);
        pa_lo[i] = f32x2_to_bf16x2(p0 - bf16x2_lo(pa_hi[i]), p1 - bf16x2_hi(pa_hi[i]));
      }
#pragma unroll
      for (int jp = 0; jp < OT / 2; ++jp) {
        uint32_t vb[4];  // 16 * k keeps key % 8
        ldmatrix_x4_trans(vb, kbuf + (pv_off0 ^ (((2 * jp) & 7) << 4)) + k * 16 * 1024 + ((2 * jp) & 8) * 16);
        const uint32_t b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};
        mma_bf16_16816(o[2 * jp], pa_lo, b0, o[2 * jp]);
        mma_bf16_16816(o[2 * jp + 1], pa_lo, b1, o[2 * jp + 1]);
        mma_bf16_16816(o[2 * jp], pa_hi, b0, o[2 * jp]);
        mma_bf16_16816(o[2 * jp + 1], pa_hi, b1, o[2 * jp + 1]);
      }
    }
  }
  cp_async_wait<0>();  // no copy may outlive the CTA's shared memory

  // ---- epilogue ----
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = lrow[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int row = r == 0 ? row0 : row1;
    if (row >= HEADS) continue;
    const int h = group * HEADS + row;
    const int64_t qh = int64_t(bs) * H + h;
    const bool any = l > 0.f;  // l >= 1 as soon as one key was valid
    const float lse2 = mrow[r] + lg2(l);
    if constexpr (SPLIT) {
      const int64_t ws = qh * p.num_splits + split;
      const float inv = any ? 1.f / l : 0.f;
      float* const dst = p.partial_o + ws * Const::kHeadDim + sl * SW + 2 * t4;
#pragma unroll
      for (int j = 0; j < OT; ++j)
        *reinterpret_cast<float2*>(dst + 8 * j) = make_float2(o[j][2 * r] * inv, o[j][2 * r + 1] * inv);
      if (sl == 0 && t4 == 0) p.partial_lse[ws] = any ? lse2 * Const::kLn2 : neg_inf();
    } else {
      // out = O / (l + e^sink / 2^m): the sink joins the denominator only.
      const float sink2 = __ldg(p.attn_sink + h) * Const::kLog2e;
      const float inv = any ? 1.f / (l + ex2(sink2 - mrow[r])) : 0.f;
      uint16_t* const dst = p.out + qh * Const::kHeadDim + sl * SW + 2 * t4;
#pragma unroll
      for (int j = 0; j < OT; ++j)
        *reinterpret_cast<uint32_t*>(dst + 8 * j) =
            f32x2_to_bf16x2(o[j][2 * r] * inv, o[j][2 * r + 1] * inv);
      if (sl == 0 && t4 == 0) p.lse[qh] = any ? lse2 * Const::kLn2 : pos_inf();
    }
  }

  if constexpr (MODE == Mode::kMergeLastCta) {
    // Arrival (common/Arrival.cuh): the CTA that brings the (query, head group) count to
    // num_splits merges all partials (its own too). The verdict goes through the key tile's first
    // word: every read of the main loop is behind the barrier.
    unsigned* const count = p.arrivals + (int64_t(bs) * gridDim.y + group);
    if (!cta_arrived_last(count, unsigned(p.num_splits), reinterpret_cast<volatile int*>(kbuf))) return;
    // The whole shared buffer is dead now; the verdict word (the first 16 bytes) is left alone
    // (a thread may still be reading it). Tables: rowmax, rowsum, then the weights of R rows per
    // pass (all HEADS rows in one pass unless the split count is in the hundreds).
    float* const rowmax = reinterpret_cast<float*>(smem + 16);
    float* const rowsum = rowmax + HEADS;
    float* const w = rowsum + HEADS;
    constexpr int kWeightFloats = (L.total - 16) / 4 - 2 * HEADS;
    static_assert(kWeightFloats >= 1024, "room for the weights of one row of up to 1024 splits");
    const int R = min(HEADS, kWeightFloats / p.num_splits);
    // Items (row of the pass, dim quad), thread tid taking tid, tid + THREADS, ... two at a time
    // (THREADS is a multiple of 128, so both have the thread's dim quad).
    static_assert(THREADS % 128 == 0, "merge: every thread keeps one dim quad");
    const int quad = tid & 127;
    const int64_t qh0 = int64_t(bs) * H + group * HEADS;
#pragma unroll 1
    for (int r0 = 0; r0 < HEADS; r0 += R) {
      const int rows = min(R, HEADS - r0);
      merge_weights<THREADS>(p, qh0 + r0, rows, w, rowmax, rowsum);
      const int items = rows * 128;
      int it = tid;
#pragma unroll 1
      for (; it + THREADS < items; it += 2 * THREADS) {
        const int row[2] = {it >> 7, (it + THREADS) >> 7};
        const int64_t qh[2] = {qh0 + r0 + row[0], qh0 + r0 + row[1]};
        const int h[2] = {group * HEADS + r0 + row[0], group * HEADS + r0 + row[1]};
        merge_rows<2, 4>(p, qh, h, row, quad, w, rowmax, rowsum);
      }
      if (it < items) {
        const int row[1] = {it >> 7};
        const int64_t qh[1] = {qh0 + r0 + row[0]};
        const int h[1] = {group * HEADS + r0 + row[0]};
        merge_rows<1, 4>(p, qh, h, row, quad, w, rowmax, rowsum);
      }
      __syncthreads();  // the next pass refills the tables
    }
  }
}

// The merge launch of Mode::kMergeLaunch: one CTA of 128 threads per (query, head), 4 dims per
// thread; the same two steps as the last-CTA merge. SPLITS >= num_splits sizes the weight table
// (the unit's own split count: a few hundred bytes of static shared memory, which the per-CTA cap
// check adds to the main entry's dynamic size).
template <int SPLITS>
__device__ __forceinline__ void sparse_mla_decode_merge_kernel(const SparseMlaDecodeParams& p) {
  static_assert(SPLITS >= 1 && SPLITS <= 1024, "SPLITS: 1..1024");
  __shared__ float w[SPLITS];
  __shared__ float rowmax[1], rowsum[1];
  const int h = blockIdx.x, bs = blockIdx.y;
  const int64_t qh[1] = {int64_t(bs) * p.heads + h};
  const int hh[1] = {h}, row[1] = {0};
  smd::merge_weights<128>(p, qh[0], 1, w, rowmax, rowsum);
  smd::merge_rows<1, 8>(p, qh, hh, row, threadIdx.x, w, rowmax, rowsum);
}

}  // namespace di
