// The CTA tile engine of the quantized-weight GEMMs (weight_gemm, moe_experts): a BM x BN tile
// of y = A . dequant(W)^T, A bf16 rows (any row addresses: dense, strided or gathered), W in its
// checkpoint format (templates/common/QuantWeights.cuh), fp32 accumulation on mma.sync
// m16n8k16 bf16 tensor cores.
//
// Pipeline. STAGES buffers of BK columns: A rows, W rows (and the second matrix of a SwiGLU
// pair) and the UE8M0 scale bytes they need are copied with cp.async (16-byte chunks; scales as
// aligned 4-byte words clipped to the row, so no byte outside the tensor or the split is read),
// STAGES-1 stages ahead of the one being multiplied.
//
// Warps. WM x WN x WK warps: a warp owns MT = BM/(16 WM) m16 tiles and NT = BN/(8 WN) n8 tiles
// and, within each stage, the k32 blocks kb = wk, wk + WK, ... (WK > 1 splits K inside the CTA,
// the decode shapes' way of keeping many bytes in flight with a narrow tile); the WK partial
// tiles are summed through shared memory in a fixed order at the end.
//
// Fragments (prefill tiles, BM > 16): each stage's weights are decoded once per CTA into bf16
// rows laid out like A's, and every warp reads both operands with ldmatrix (decode_stage,
// prefill_mma, prefill_pipeline below).
//
// Fragments (decode tiles, BM <= 16). Per k32 block a thread reads its 8 weights of row g
// (columns 8t..8t+7: one 4-byte word of e2m1, two of e4m3) and decodes them into the B
// registers of two m16n8k16 steps in the
// order QuantWeights.cuh documents; it reads the same 8 columns of rows g and g+8 of A as one
// 16-byte load each and permutes them to match (K order inside a block is free as long as A and
// B agree). The scale of the block is folded into the decode's one bf16x2 multiply. Decode tiles
// whose warps take whole quads of k32 blocks use block order instead (compute_stage_blocks: a
// thread multiplies a whole k32 block of one row per quad).
//
// Shared memory bank conflicts (decode tiles; prefill tiles: T::a_chunk): A rows are 16-byte
// chunks XOR-swizzled by (row & 1) (block order: by the row's parity and the block's) so the
// 16-byte loads of rows g = 0, 1 of a quarter warp
// hit distinct banks; W rows swizzle their k32 blocks
// (e2m1: 16 bytes, e4m3: 32 bytes) by the row so the 8 rows of an n8 tile read distinct banks.
#pragma once
#include "common/Mma.cuh"
#include "common/Numerics.cuh"
#include "common/QuantWeights.cuh"
#include "common/Types.h"

namespace di {
namespace qg {

__host__ __device__ constexpr int cmin(int a, int b) { return a < b ? a : b; }
__host__ __device__ constexpr int cmax(int a, int b) { return a > b ? a : b; }
__host__ __device__ constexpr int align16(int b) { return (b + 15) / 16 * 16; }

// One weight matrix of the tile.
struct Operand {
  const uint8_t* w;       // row 0 of the matrix
  const uint8_t* scale;   // row 0 of its scale tensor
  int64_t row_bytes;      // bytes of a weight row (Kg e4m3 codes or Kg/2 e2m1 bytes)
  int32_t scale_cols;     // scale bytes per scale row (ceil(Kg/32) or Kg/32)
  int32_t scale_rows;     // scale rows of the tensor (ceil(N/32) or N): rows past it read nothing
};

// BM < 16 (decode: 1, 2, 4 or 8 rows): one m16 tile whose rows past BM are zero registers, so
// shared memory and the copies hold only the rows the tile has.
template <bool FP4, int BM, int BN, int BK, int WM, int WN, int WK, int STAGES, bool GATED>
struct Tile {
  static_assert(BM >= 16 ? BM % (16 * WM) == 0 : (WM == 1 && (BM & (BM - 1)) == 0),
                "warp tiles must be whole m16 tiles (or one partial m16 tile of 1, 2, 4 or 8 rows)");
  static_assert(BN % (8 * WN) == 0, "warp tiles must be whole n8 tiles");
  static_assert(BK >= 32 && (BK & (BK - 1)) == 0 && (BK / 32) % WK == 0, "BK: a power of two >= 32 split by WK");
  static_assert(BM <= 16 || (WK == 1 && STAGES >= 3), "prefill tiles: no K split inside the CTA, 3 stages or more");
  static constexpr int kBM = BM, kBN = BN, kBK = BK, kWM = WM, kWN = WN, kWK = WK, kStages = STAGES;
  static constexpr int kWarps = WM * WN * WK;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int MT = BM >= 16 ? BM / (16 * WM) : 1;
  static constexpr int NT = BN / (8 * WN);
  static constexpr int KB = BK / 32;      // k32 blocks per stage
  static constexpr int KBW = KB / WK;     // of them per warp
  // Decode tiles whose warps take whole quads of k32 blocks multiply in block order
  // (compute_stage_blocks); the others in word order (compute_stage).
  static constexpr bool kBlockOrder = BM <= 16 && KBW % 4 == 0;
  static constexpr int kMats = GATED ? 2 : 1;
  static constexpr int kBlockBytes = FP4 ? 16 : 32;  // weight bytes of one row in a k32 block
  static constexpr int kAChunks = BK / 8;            // 16-byte chunks of an A row
  static constexpr int kARow = BK * 2;
  static constexpr int kWRow = KB * kBlockBytes;
  static constexpr int kWChunks = kWRow / 16;
  // Scale rows per matrix: e2m1 one per weight row; e4m3 one per 32 rows (a tile may start
  // inside a block when groups are not multiples of 32).
  static constexpr int kSRows = FP4 ? BN : (BN + 31) / 32 + 1;
  static constexpr int kSRow = 4 * ((KB + 6) / 4);   // aligned words covering KB bytes at any offset
  static constexpr int kABytes = BM * kARow;
  static constexpr int kWBytes = BN * kWRow;
  static constexpr int kSBytes = align16(kSRows * kSRow);
  static constexpr int kMatBytes = kWBytes + kSBytes;
  static constexpr int kStageBytes = kABytes + kMats * kMatBytes;
  // Prefill tiles (BM > 16) decode each stage's weights once into bf16 rows laid out like A's
  // (kMats * BN rows of BK columns), double-buffered after the raw stages (prefill_pipeline).
  static constexpr bool kPrefill = BM > 16;
  static constexpr int kDecBytes = kPrefill ? kMats * BN * kARow : 0;
  static constexpr int kPipeBytes = STAGES * kStageBytes + 2 * kDecBytes;
  static constexpr int kAcc = kMats * MT * NT * 4;   // accumulators per thread
  static constexpr int kRedBytes = WK > 1 ? (WK - 1) * WM * WN * kAcc * 32 * 4 : 0;
  static constexpr int kTableOffset = align16(cmax(kPipeBytes, kRedBytes));
  static constexpr int kTableBytes = BM * 8 + BM * 4;  // A row sources (int64) + a per-row float
  static constexpr int kSmemBytes = kTableOffset + align16(kTableBytes);

  // 16-byte chunk c of A row r. Block order reads chunk i of blocks 4q + t (t = 0..3) of rows g =
  // 0, 1 in one quarter warp: bit 3 of c (bit 1 of t) and the row's parity pick the low two bits.
  // Prefill tiles read A (and the decoded weights, same layout) with ldmatrix: 8 rows of one
  // 16-byte column chunk per 8x8 matrix, put in 8 distinct 16-byte bank groups by XOR-ing the
  // chunk's low bits with the row's index among the rows sharing 128 bytes.
  static __device__ __forceinline__ int a_chunk(int r, int c) {
    if constexpr (kPrefill) {
      constexpr int P = cmin(kAChunks, 8), L = 8 / P;  // chunks per 128 bytes, rows per 128 bytes
      return c ^ ((r / L) & (P - 1));
    }
    if constexpr (kBlockOrder) return c ^ (((c >> 3) & 1) | ((r & 1) << 1));
    return kAChunks >= 8 ? c ^ ((r & 1) << 2) : c;
  }
  // Slot of k32 block kb in W row r (units of kBlockBytes).
  static __device__ __forceinline__ int w_slot(int r, int kb) {
    // Block order reads 4 consecutive e2m1 blocks of rows g = 0, 1 in one quarter warp: rows of
    // 128 bytes or more put odd rows' quads in the other half of 128 bytes.
    if constexpr (kBlockOrder && FP4 && KB >= 8) return kb ^ ((r & 1) << 2);
    constexpr int lanes = FP4 ? 8 : 4;  // blocks per 128 bytes
    constexpr int P = cmin(KB, lanes);
    return kb ^ ((r / (lanes / P)) & (P - 1));
  }
};

// 4-byte async copy of `bytes` (0..4) bytes; the rest of the destination word is zero-filled.
__device__ __forceinline__ void cp_async_4(void* smem_dst, const void* gmem_src, int bytes) {
#ifdef DI_SIMT_EMU
  di_emu::cp_async(smem_dst, gmem_src, 4, bytes);
#else
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(smem_dst)), "l"(gmem_src),
               "r"(bytes));
#endif
}

// The kernel's dynamic shared memory (its size is the launch's; qg::Tile::kSmemBytes).
__device__ __forceinline__ uint8_t* dynamic_smem() {
#ifdef DI_SIMT_EMU
  return di_emu::dynamic_smem();
#else
  extern __shared__ __align__(16) uint8_t di_qg_smem[];
  return di_qg_smem;
#endif
}

// The scale bytes of one stage: for each matrix, the UE8M0 bytes of the tile's scale rows for the
// k32 blocks [kb0, kb0 + KB) clipped to kb_limit, copied as aligned 4-byte words clipped to the
// row (rows past the matrix read nothing).
template <class T>
__device__ __forceinline__ void load_scales(uint8_t* st, const Operand* ops, int n0, int n_end, int kb0,
                                            int kb_limit) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int m = 0; m < T::kMats; ++m) {
    const Operand& op = ops[m];
    uint8_t* ss = st + T::kABytes + m * T::kMatBytes + T::kWBytes;
    const int scale_limit = op.scale_cols < kb_limit ? op.scale_cols : kb_limit;
    const int srow0 = T::kBlockBytes == 16 ? n0 : n0 / 32;
    const int srow_end = T::kBlockBytes == 16 ? n_end : op.scale_rows;
#pragma unroll 1
    for (int c = tid; c < T::kSRows * (T::kSRow / 4); c += T::kThreads) {
      const int r = c / (T::kSRow / 4), wd = c % (T::kSRow / 4);
      const int srow = srow0 + r;
      const int64_t rowbase = int64_t(srow) * op.scale_cols;
      const int64_t addr = ((rowbase + kb0) & ~int64_t(3)) + 4 * wd;
      const int64_t left = rowbase + scale_limit - addr;
      const int bytes = srow < srow_end && srow < op.scale_rows ? int(left < 0 ? 0 : left > 4 ? 4 : left) : 0;
      cp_async_4(ss + r * T::kSRow + 4 * wd, bytes > 0 ? op.scale + addr : op.scale, bytes);
    }
  }
}

// load_scales for the prefill tiles: the same words and byte counts, but each thread's words
// are constants of an unrolled loop and the word's offset is worked out from the row's first
// byte in 32-bit arithmetic (rowbase = 4q + lo: ((rowbase + kb0) & ~3) = rowbase - lo +
// ((lo + kb0) & ~3)), a handful of instructions per word instead of a 64-bit loop.
template <class T>
__device__ __forceinline__ void load_scales_unrolled(uint8_t* st, const Operand* ops, int n0, int n_end, int kb0,
                                                     int kb_limit) {
  constexpr int kRowWords = T::kSRow / 4;
  constexpr int kWords = T::kSRows * kRowWords;
  constexpr int kPer = (kWords + T::kThreads - 1) / T::kThreads;
  const int tid = threadIdx.x;
#pragma unroll
  for (int m = 0; m < T::kMats; ++m) {
    const Operand& op = ops[m];
    uint8_t* ss = st + T::kABytes + m * T::kMatBytes + T::kWBytes;
    const int scale_limit = op.scale_cols < kb_limit ? op.scale_cols : kb_limit;
    const int srow0 = T::kBlockBytes == 16 ? n0 : n0 / 32;
    const int srow_end = T::kBlockBytes == 16 ? n_end : op.scale_rows;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int c = tid + i * T::kThreads;
      if (kWords % T::kThreads != 0 && c >= kWords) break;
      const int r = c / kRowWords, wd = c % kRowWords;
      const int srow = srow0 + r;
      const int64_t rowbase = int64_t(srow) * op.scale_cols;
      const int lo = int(rowbase) & 3;
      const int off = ((lo + kb0) & ~3) - lo + 4 * wd;  // from the row's first byte; >= -3
      const int left = scale_limit - off;
      const int bytes = srow < srow_end && srow < op.scale_rows ? (left < 0 ? 0 : left > 4 ? 4 : left) : 0;
      cp_async_4(ss + r * T::kSRow + 4 * wd, bytes > 0 ? op.scale + rowbase + off : op.scale, bytes);
    }
  }
}

// Copies one stage of a prefill tile: A rows (byte addresses a_row[r]: prefill_a_rows), the
// weight rows [n0, n_end) of each matrix, and their scale bytes, for the k32 blocks
// [kb0, kb0 + KB) clipped to kb_limit (blocks at or past it, columns at or past acol_limit and
// rows past the matrix are zero-filled).
template <class T>
__device__ __forceinline__ void load_stage(uint8_t* st, const uint64_t* a_row, int acol_limit, const Operand* ops,
                                           int n0, int n_end, int kb0, int kb_limit) {
  const int tid = threadIdx.x;
  const int col0 = kb0 * 32;
  // Whole-CTA strides of compile-time counts: each thread's rows, chunks and swizzled offsets
  // are constants of the unrolled loop plus its thread index.
  constexpr int kAC = (T::kABytes / 16 + T::kThreads - 1) / T::kThreads;
#pragma unroll
  for (int i = 0; i < kAC; ++i) {
    const int c = tid + i * T::kThreads;
    if ((T::kABytes / 16) % T::kThreads != 0 && c >= T::kABytes / 16) break;
    const int r = c / T::kAChunks, ch = c % T::kAChunks;
    const int col = col0 + ch * 8;
    const uint8_t* row = reinterpret_cast<const uint8_t*>(a_row[r]);
    const bool valid = col < acol_limit;
    cp_async_16(st + r * T::kARow + T::a_chunk(r, ch) * 16, valid ? row + 2 * col : row, valid);
  }
  constexpr int kWC = (T::kBN * T::kWChunks + T::kThreads - 1) / T::kThreads;
#pragma unroll
  for (int m = 0; m < T::kMats; ++m) {
    const Operand& op = ops[m];
    uint8_t* ws = st + T::kABytes + m * T::kMatBytes;
    const int64_t wlimit = op.row_bytes < int64_t(kb_limit) * T::kBlockBytes ? op.row_bytes
                                                                             : int64_t(kb_limit) * T::kBlockBytes;
#pragma unroll
    for (int i = 0; i < kWC; ++i) {
      const int c = tid + i * T::kThreads;
      if ((T::kBN * T::kWChunks) % T::kThreads != 0 && c >= T::kBN * T::kWChunks) break;
      const int r = c / T::kWChunks, ch = c % T::kWChunks;
      const int n = n0 + r;
      const int64_t byte = int64_t(kb0) * T::kBlockBytes + ch * 16;
      const bool valid = n < n_end && byte < wlimit;
      // e2m1: one 16-byte chunk per block; e4m3: two (the second half of the block's 32 bytes).
      const int unit = T::kBlockBytes == 16 ? ch : ch >> 1, half = T::kBlockBytes == 16 ? 0 : ch & 1;
      cp_async_16(ws + r * T::kWRow + T::w_slot(r, unit) * T::kBlockBytes + half * 16,
                  valid ? op.w + int64_t(n) * op.row_bytes + byte : op.w, valid);
    }
  }
  load_scales_unrolled<T>(st, ops, n0, n_end, kb0, kb_limit);
}

// The same copies for the decode tiles (BM <= 16), with every thread's addresses worked out once
// per tile rather than once per stage: each thread owns fixed A and W chunks of every stage (at
// most kAC + kMats * kWC), so a stage costs a few instructions per 16-byte copy. The weight
// stream of a decode tile is bound by issue slots, not by the copies' latency.
constexpr int kNoCopy = -2147483647 - 1;  // a limit no offset is below: zero-fill only

template <class T>
struct StageCopier {
  static constexpr int kAC = (T::kABytes / 16 + T::kThreads - 1) / T::kThreads;
  static constexpr int kWC = (T::kBN * T::kWChunks + T::kThreads - 1) / T::kThreads;
  const uint16_t* a_ptr[kAC];           // chunk start at column 0 (a when the row is absent)
  int a_lim[kAC];                       // copy while col0 < a_lim (kNoCopy: zero-fill only)
  int a_dst[kAC];                       // byte offset in the stage, -1 = no chunk for this thread
  const uint8_t* w_ptr[T::kMats][kWC];  // chunk start at k32 block 0 (op.w when the row is absent)
  int w_lim[T::kMats][kWC];             // copy while kb0 * kBlockBytes < w_lim
  int w_dst[T::kMats][kWC];

  __device__ __forceinline__ StageCopier(const int64_t* a_src, const uint16_t* a, int acol_limit, const Operand* ops,
                                         int n0, int n_end, int kb_limit) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int i = 0; i < kAC; ++i) {
      const int c = tid + i * T::kThreads;
      const int r = c / T::kAChunks, ch = c % T::kAChunks;
      const bool exists = c < T::kABytes / 16;
      const int64_t src = exists ? a_src[r] : -1;
      a_ptr[i] = src >= 0 ? a + src + ch * 8 : a;
      a_lim[i] = src >= 0 ? acol_limit - ch * 8 : kNoCopy;
      a_dst[i] = exists ? r * T::kARow + T::a_chunk(r, ch) * 16 : -1;
    }
#pragma unroll
    for (int m = 0; m < T::kMats; ++m) {
      const Operand& op = ops[m];
      const int64_t wlimit = op.row_bytes < int64_t(kb_limit) * T::kBlockBytes ? op.row_bytes
                                                                               : int64_t(kb_limit) * T::kBlockBytes;
#pragma unroll
      for (int i = 0; i < kWC; ++i) {
        const int c = tid + i * T::kThreads;
        const int r = c / T::kWChunks, ch = c % T::kWChunks;
        const bool exists = c < T::kBN * T::kWChunks;
        const bool row = exists && n0 + r < n_end;
        const int unit = T::kBlockBytes == 16 ? ch : ch >> 1, half = T::kBlockBytes == 16 ? 0 : ch & 1;
        w_ptr[m][i] = row ? op.w + int64_t(n0 + r) * op.row_bytes + ch * 16 : op.w;
        w_lim[m][i] = row ? int(wlimit - ch * 16) : kNoCopy;
        w_dst[m][i] = exists ? T::kABytes + m * T::kMatBytes + r * T::kWRow + T::w_slot(r, unit) * T::kBlockBytes +
                                   half * 16
                             : -1;
      }
    }
  }

  __device__ __forceinline__ void load(uint8_t* st, const uint16_t* a, const Operand* ops, int n0, int n_end,
                                       int kb0, int kb_limit) const {
    const int col0 = kb0 * 32;
#pragma unroll
    for (int i = 0; i < kAC; ++i) {
      if (a_dst[i] < 0) continue;
      const bool valid = col0 < a_lim[i];
      cp_async_16(st + a_dst[i], valid ? a_ptr[i] + col0 : a, valid);
    }
    const int byte0 = kb0 * T::kBlockBytes;
#pragma unroll
    for (int m = 0; m < T::kMats; ++m)
#pragma unroll
      for (int i = 0; i < kWC; ++i) {
        if (w_dst[m][i] < 0) continue;
        const bool valid = byte0 < w_lim[m][i];
        cp_async_16(st + w_dst[m][i], valid ? w_ptr[m][i] + byte0 : ops[m].w, valid);
      }
    load_scales<T>(st, ops, n0, n_end, kb0, kb_limit);
  }
};

// Block order (decode tiles whose warps take whole quads of k32 blocks, T::kBlockOrder): per
// quad, thread t multiplies k32 block 4q + t of the warp's range, all 32 columns of it in 8
// mma steps (word i of the block: steps 2i, 2i + 1), so it reads its weights as one 16-byte
// (e2m1) or two (e4m3) shared loads and works out one scale per 32 weights instead of per 8. K
// order inside a quad is free as long as A and B agree: thread t's A registers hold the same
// columns (chunk i of block 4q + t, rows g and g + 8).
//
// A quad's shared loads (A, every n8 tile's weight words and scale bytes) come first; then one
// warp-uniform test picks the straight-line decode + mma body (no branch between the tiles, so
// the scheduler interleaves them) or, when some thread of the warp has a scale byte past one
// multiply's range or an e4m3 NaN code (never in a valid checkpoint), the body with the fix-ups.
// Words 0-1 of a block accumulate into `acc`, words 2-3 into `acc_odd` (mainloop adds them).
template <class T>
struct QuadWeights {
  static constexpr int kWords = T::kBlockBytes / 4;  // 32-bit words of one row's k32 block
  uint32_t w[T::kMats][T::NT][kWords];
  uint32_t s[T::kMats][T::NT];
};

template <class T, bool kFix>
__device__ __forceinline__ void quad_mma(const QuadWeights<T>& qw_, const uint32_t (&a)[4][2][4],
                                         float (&acc)[T::kMats][T::MT][T::NT][4],
                                         float (&acc_odd)[T::kMats][T::MT][T::NT][4]) {
  constexpr bool kFp4 = T::kBlockBytes == 16;
#pragma unroll
  for (int m = 0; m < T::kMats; ++m)
#pragma unroll
    for (int nt = 0; nt < T::NT; ++nt) {
      const uint32_t* w = qw_.w[m][nt];
      const qw::ScaleFactors f = kFp4 ? qw::e2m1_scale_factors(qw_.s[m][nt]) : qw::e4m3_scale_factors(qw_.s[m][nt]);
      uint32_t b[4][2][2];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if constexpr (kFp4) qw::e2m1_decode(w[i], f.first, b[i]);
        else qw::e4m3_decode(w[2 * i], w[2 * i + 1], f.first, b[i]);
        if constexpr (kFix) {
          if (f.two) qw::apply_second(f.second, b[i]);
          if (!kFp4 && (qw::e4m3_nan_probe(w[2 * i]) | qw::e4m3_nan_probe(w[2 * i + 1])) != 0u)
            qw::e4m3_patch_nan(w[2 * i], w[2 * i + 1], b[i]);
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float (&c)[4] = i < 2 ? acc[m][0][nt] : acc_odd[m][0][nt];
        mma_bf16_16816(c, a[i][0], b[i][0], c);
        mma_bf16_16816(c, a[i][1], b[i][1], c);
      }
    }
}

template <class T>
__device__ __forceinline__ void compute_stage_blocks(const uint8_t* st, const Operand* ops, int n0, int kb0,
                                                     float (&acc)[T::kMats][T::MT][T::NT][4],
                                                     float (&acc_odd)[T::kMats][T::MT][T::NT][4]) {
  static_assert(T::MT == 1 && T::kWM == 1, "block order: decode tiles (one m16 tile)");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wn = warp % T::kWN, wk = warp / T::kWN;
  constexpr bool kFp4 = T::kBlockBytes == 16;
#pragma unroll
  for (int q = 0; q < T::KBW / 4; ++q) {
    const int kb = wk * T::KBW + 4 * q + t;  // the thread's k32 block in the stage
    QuadWeights<T> qwt;
    bool fix = false;
#pragma unroll
    for (int m = 0; m < T::kMats; ++m) {
      const uint8_t* ws = st + T::kABytes + m * T::kMatBytes;
      const uint8_t* ss = ws + T::kWBytes;
#pragma unroll
      for (int nt = 0; nt < T::NT; ++nt) {
        const int rbase = (wn * T::NT + nt) * 8;  // the n8 tile's first row in the tile
        const int r = rbase + g;
        const uint8_t* wp = ws + r * T::kWRow + T::w_slot(r, kb) * T::kBlockBytes;
        uint32_t* w = qwt.w[m][nt];
        const U32x4 w0 = *reinterpret_cast<const U32x4*>(wp);
        w[0] = w0.x, w[1] = w0.y, w[2] = w0.z, w[3] = w0.w;
        if constexpr (kFp4) {
          const int64_t so = int64_t(n0 + r) * ops[m].scale_cols + kb0;
          qwt.s[m][nt] = ss[r * T::kSRow + int(so & 3) + kb];
          fix |= qwt.s[m][nt] > 128u;
        } else {
          const U32x4 w1 = *reinterpret_cast<const U32x4*>(wp + 16);
          w[4] = w1.x, w[5] = w1.y, w[6] = w1.z, w[7] = w1.w;
          // The n8 tile lies inside one 32-row scale block (tiles start at multiples of 8).
          const int srow = (n0 + rbase) / 32 - n0 / 32;
          const int64_t so = int64_t((n0 + rbase) / 32) * ops[m].scale_cols + kb0;
          qwt.s[m][nt] = ss[srow * T::kSRow + int(so & 3) + kb];
          fix |= qwt.s[m][nt] > 134u;
#pragma unroll
          for (int i = 0; i < 8; ++i) fix |= qw::e4m3_nan_probe(w[i]) != 0u;
        }
      }
    }
    uint32_t a[4][2][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      U32x4 lo{0u, 0u, 0u, 0u}, hi{0u, 0u, 0u, 0u};  // rows past BM (a partial m16 tile) are zero
      if (T::kBM >= 16 || g < T::kBM)
        lo = *reinterpret_cast<const U32x4*>(st + g * T::kARow + T::a_chunk(g, kb * 4 + i) * 16);
      if (T::kBM >= 16)
        hi = *reinterpret_cast<const U32x4*>(st + (g + 8) * T::kARow + T::a_chunk(g + 8, kb * 4 + i) * 16);
      qw::activation_fragments<kFp4>(lo, hi, a[i]);
    }
    // Warp-uniform, so both bodies run their mma.sync with every lane.
    if (__ballot_sync(0xFFFFFFFFu, fix) != 0u) quad_mma<T, true>(qwt, a, acc, acc_odd);
    else quad_mma<T, false>(qwt, a, acc, acc_odd);
  }
}

// Multiplies one landed stage (k32 blocks from kb0) into the warp's accumulators.
template <class T>
__device__ __forceinline__ void compute_stage(const uint8_t* st, const Operand* ops, int n0, int kb0,
                                              float (&acc)[T::kMats][T::MT][T::NT][4]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wm = warp % T::kWM, wn = (warp / T::kWM) % T::kWN, wk = warp / (T::kWM * T::kWN);
  constexpr bool kFp4 = T::kBlockBytes == 16;
#pragma unroll
  for (int i = 0; i < T::KBW; ++i) {
    const int kb = wk + i * T::kWK;
    uint32_t a[T::MT][2][4];
#pragma unroll
    for (int mt = 0; mt < T::MT; ++mt) {
      const int r = (wm * T::MT + mt) * 16 + g;
      U32x4 lo{0u, 0u, 0u, 0u}, hi{0u, 0u, 0u, 0u};  // rows past BM (a partial m16 tile) are zero
      if (T::kBM >= 16 || r < T::kBM)
        lo = *reinterpret_cast<const U32x4*>(st + r * T::kARow + T::a_chunk(r, kb * 4 + t) * 16);
      if (T::kBM >= 16)
        hi = *reinterpret_cast<const U32x4*>(st + (r + 8) * T::kARow + T::a_chunk(r + 8, kb * 4 + t) * 16);
      qw::activation_fragments<kFp4>(lo, hi, a[mt]);
    }
#pragma unroll
    for (int m = 0; m < T::kMats; ++m) {
      const uint8_t* ws = st + T::kABytes + m * T::kMatBytes;
      const uint8_t* ss = ws + T::kWBytes;
#pragma unroll
      for (int nt = 0; nt < T::NT; ++nt) {
        const int rbase = (wn * T::NT + nt) * 8;  // the n8 tile's first row in the tile
        const int r = rbase + g;
        uint32_t b[2][2];
        if constexpr (kFp4) {
          const int64_t so = int64_t(n0 + r) * ops[m].scale_cols + kb0;
          const uint32_t s = ss[r * T::kSRow + int(so & 3) + kb];
          const uint32_t w = *reinterpret_cast<const uint32_t*>(ws + r * T::kWRow + T::w_slot(r, kb) * 16 + 4 * t);
          qw::e2m1_fragments(w, qw::e2m1_scale_factors(s), b);
        } else {
          // The n8 tile lies inside one 32-row scale block (tiles start at multiples of 8).
          const int srow = (n0 + rbase) / 32 - n0 / 32;
          const int64_t so = int64_t((n0 + rbase) / 32) * ops[m].scale_cols + kb0;
          const uint32_t s = ss[srow * T::kSRow + int(so & 3) + kb];
          const uint2 w = *reinterpret_cast<const uint2*>(ws + r * T::kWRow + T::w_slot(r, kb) * 32 + 8 * t);
          qw::e4m3_fragments(w.x, w.y, qw::e4m3_scale_factors(s), b);
        }
#pragma unroll
        for (int mt = 0; mt < T::MT; ++mt) {
          mma_bf16_16816(acc[m][mt][nt], a[mt][0], b[0], acc[m][mt][nt]);
          mma_bf16_16816(acc[m][mt][nt], a[mt][1], b[1], acc[m][mt][nt]);
        }
      }
    }
  }
}

// The cp.async pipeline over `stages` stages of KB k32 blocks from kb_begin: load(buffer, kb0)
// enqueues one stage's copies, compute(buffer, kb0) multiplies a landed one.
template <class T, class Load, class Compute>
__device__ __forceinline__ void pipeline(uint8_t* smem, int kb_begin, int stages, const Load& load,
                                         const Compute& compute) {
  constexpr int S = T::kStages;
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < stages) load(smem + s * T::kStageBytes, kb_begin + s * T::KB);
    cp_async_commit();
  }
#pragma unroll 1
  for (int it = 0; it < stages; ++it) {
    cp_async_wait<S - 2>();
    __syncthreads();  // stage `it` landed for everyone; everyone is done with stage it-1's buffer
    const int next = it + S - 1;
    if (next < stages) load(smem + (next % S) * T::kStageBytes, kb_begin + next * T::KB);
    cp_async_commit();
    compute(smem + (it % S) * T::kStageBytes, kb_begin + it * T::KB);
  }
}

// --- Prefill tiles (BM > 16): weights decoded once per CTA, fragments by ldmatrix ------------
// Each landed stage's weights are decoded once, by the whole CTA, into bf16 rows in natural
// column order (one task: a k32 block of one weight row, 16 or 32 bytes in, 4 chunks of 8 bf16
// out, the same qw:: decoders and rounding as the other tiles, pairs put back in column order
// with prmt), laid out like A's rows (T::a_chunk). Every warp then reads A and B fragments with
// ldmatrix.x4 and only multiplies: the decode work is shared by the WM warps that use a weight
// row instead of repeated in each, and A needs no permutes.
// One decode task: k32 block kb of weight row r of matrix m, stored as 4 chunks of 8 bf16 in
// column order. kFix: the scale byte may need the second multiply (f.two) or, for e4m3, the
// block may hold a NaN code; without it the straight-line decode (every scale byte a checkpoint
// uses) is one bf16x2 multiply per pair and no predicated fix-ups take issue slots.
template <class T, bool kFix>
__device__ __forceinline__ void decode_task(const uint8_t* wp, const qw::ScaleFactors& f, uint8_t* out, int drow,
                                            int kb) {
  constexpr bool kFp4 = T::kBlockBytes == 16;
  if constexpr (kFp4) {
    const U32x4 q = *reinterpret_cast<const U32x4*>(wp);
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      uint32_t b[2][2];  // columns (0,4) (1,5) (2,6) (3,7) of the chunk
      if constexpr (kFix) qw::e2m1_fragments(words[c], f, b);
      else qw::e2m1_decode(words[c], f.first, b);
      const U32x4 v{__byte_perm(b[0][0], b[0][1], 0x5410), __byte_perm(b[1][0], b[1][1], 0x5410),
                    __byte_perm(b[0][0], b[0][1], 0x7632), __byte_perm(b[1][0], b[1][1], 0x7632)};
      *reinterpret_cast<U32x4*>(out + T::a_chunk(drow, kb * 4 + c) * 16) = v;
    }
  } else {
    const U32x4 q0 = *reinterpret_cast<const U32x4*>(wp);
    const U32x4 q1 = *reinterpret_cast<const U32x4*>(wp + 16);
    const uint32_t words[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      uint32_t b[2][2];  // columns (0,2) (1,3) (4,6) (5,7) of the chunk
      if constexpr (kFix) qw::e4m3_fragments(words[2 * c], words[2 * c + 1], f, b);
      else qw::e4m3_decode(words[2 * c], words[2 * c + 1], f.first, b);
      const U32x4 v{__byte_perm(b[0][0], b[0][1], 0x5410), __byte_perm(b[0][0], b[0][1], 0x7632),
                    __byte_perm(b[1][0], b[1][1], 0x5410), __byte_perm(b[1][0], b[1][1], 0x7632)};
      *reinterpret_cast<U32x4*>(out + T::a_chunk(drow, kb * 4 + c) * 16) = v;
    }
  }
}

// A task's inputs: its weight bytes, scale factors and output row, and whether its scale byte
// needs the second multiply or (e4m3) its block holds a NaN code.
struct DecodeTask {
  const uint8_t* wp;
  uint8_t* out;
  qw::ScaleFactors f;
  int drow, kb;
  bool live, fix;
};

template <class T>
__device__ __forceinline__ DecodeTask decode_task_at(const uint8_t* st, uint8_t* dec, const Operand* ops, int n0,
                                                     int kb0, int i) {
  constexpr bool kFp4 = T::kBlockBytes == 16;
  constexpr int kTasks = T::kMats * T::kBN * T::KB;
  DecodeTask d;
  const int slot = int(threadIdx.x) + i * T::kThreads;
  d.live = kTasks % T::kThreads == 0 || slot < kTasks;
  const int task = d.live ? slot : 0;
  // Rows fastest: a quarter warp reads 8 rows' blocks and writes 8 rows' chunks (both swizzled).
  const int r = task % T::kBN, m = (task / T::kBN) % T::kMats;
  d.kb = task / (T::kBN * T::kMats);
  // The matrix by value (a runtime index into ops would put the array in local memory).
  const int32_t scale_cols = (T::kMats == 1 || m == 0) ? ops[0].scale_cols : ops[T::kMats - 1].scale_cols;
  const uint8_t* ws = st + T::kABytes + m * T::kMatBytes;
  const uint8_t* ss = ws + T::kWBytes;
  d.wp = ws + r * T::kWRow + T::w_slot(r, d.kb) * T::kBlockBytes;
  d.drow = m * T::kBN + r;
  d.out = dec + d.drow * T::kARow;
  if constexpr (kFp4) {
    const int64_t so = int64_t(n0 + r) * scale_cols + kb0;
    d.f = qw::e2m1_scale_factors(ss[r * T::kSRow + int(so & 3) + d.kb]);
    d.fix = d.live && d.f.two;
  } else {
    // Scale rows cover 32 weight rows; the tile may start inside one (grouped weights).
    const int srow = (n0 + r) / 32 - n0 / 32;
    const int64_t so = int64_t((n0 + r) / 32) * scale_cols + kb0;
    d.f = qw::e4m3_scale_factors(ss[srow * T::kSRow + int(so & 3) + d.kb]);
    const U32x4 q0 = *reinterpret_cast<const U32x4*>(d.wp);
    const U32x4 q1 = *reinterpret_cast<const U32x4*>(d.wp + 16);
    d.fix = d.live && (d.f.two || (qw::e4m3_nan_probe(q0.x) | qw::e4m3_nan_probe(q0.y) | qw::e4m3_nan_probe(q0.z) |
                                   qw::e4m3_nan_probe(q0.w) | qw::e4m3_nan_probe(q1.x) | qw::e4m3_nan_probe(q1.y) |
                                   qw::e4m3_nan_probe(q1.z) | qw::e4m3_nan_probe(q1.w)) != 0u);
  }
  return d;
}

// Every thread runs the same task slots (a slot past the tasks decodes nothing). The straight-line
// decode (one bf16x2 multiply per pair: every scale byte a checkpoint uses) runs for every task
// without a branch, so the scheduler can interleave it with the multiplies placed before it; the
// tasks that need the fix-ups are decoded again, with them, behind one warp-uniform vote (the same
// thread rewrites the same bytes before the next barrier).
template <class T>
__device__ __forceinline__ void decode_stage(const uint8_t* st, uint8_t* dec, const Operand* ops, int n0, int kb0) {
  constexpr int kTasks = T::kMats * T::kBN * T::KB;
  constexpr int kPer = (kTasks + T::kThreads - 1) / T::kThreads;
  bool fix = false;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const DecodeTask d = decode_task_at<T>(st, dec, ops, n0, kb0, i);
    if (d.live) decode_task<T, false>(d.wp, d.f, d.out, d.drow, d.kb);
    fix |= d.fix;
  }
  if (__any_sync(0xFFFFFFFFu, fix)) {
#pragma unroll 1
    for (int i = 0; i < kPer; ++i) {
      const DecodeTask d = decode_task_at<T>(st, dec, ops, n0, kb0, i);
      if (d.fix) decode_task<T, true>(d.wp, d.f, d.out, d.drow, d.kb);
    }
  }
}

// One stage's multiplies of a warp: A rows from the raw stage, weights from the decoded buffer,
// both by ldmatrix.x4 (matrices: rows 0-7 / 8-15 x k 0-7 / 8-15 for A; two n8 tiles x k 0-7 /
// 8-15 for B, or .x2 for a last odd n8 tile).
template <class T>
__device__ __forceinline__ void prefill_mma(const uint8_t* st, const uint8_t* dec,
                                            float (&acc)[T::kMats][T::MT][T::NT][4]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp % T::kWM, wn = warp / T::kWM;
#pragma unroll
  for (int kk = 0; kk < T::kBK / 16; ++kk) {
    uint32_t a[T::MT][4];
#pragma unroll
    for (int mt = 0; mt < T::MT; ++mt) {
      const int row = (wm * T::MT + mt) * 16 + (lane & 15);
      ldmatrix_x4(a[mt], st + row * T::kARow + T::a_chunk(row, 2 * kk + (lane >> 4)) * 16);
    }
#pragma unroll
    for (int m = 0; m < T::kMats; ++m) {
      uint32_t b[T::NT][2];
#pragma unroll
      for (int nt = 0; nt < T::NT; nt += 2) {
        if (nt + 1 < T::NT) {
          const int i = lane >> 3;
          const int row = m * T::kBN + (wn * T::NT + nt + (i >> 1)) * 8 + (lane & 7);
          uint32_t r4[4];
          ldmatrix_x4(r4, dec + row * T::kARow + T::a_chunk(row, 2 * kk + (i & 1)) * 16);
          b[nt][0] = r4[0], b[nt][1] = r4[1], b[nt + 1][0] = r4[2], b[nt + 1][1] = r4[3];
        } else {
          const int row = m * T::kBN + (wn * T::NT + nt) * 8 + (lane & 7);
          ldmatrix_x2(b[nt], dec + row * T::kARow + T::a_chunk(row, 2 * kk + ((lane >> 3) & 1)) * 16);
        }
      }
#pragma unroll
      for (int mt = 0; mt < T::MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < T::NT; ++nt) mma_bf16_16816(acc[m][mt][nt], a[mt], b[nt], acc[m][mt][nt]);
    }
  }
}

// The row table as byte addresses, rewritten in place once per tile: row r of A at a + a_src[r].
// An absent row (-1) reads row 0 instead of being zero-filled: its output row is never written
// and rows of an mma do not mix, so each 16-byte copy tests only its column.
template <class T>
__device__ __forceinline__ const uint64_t* prefill_a_rows(const int64_t* a_src, const uint16_t* a) {
  uint64_t* a_row = reinterpret_cast<uint64_t*>(const_cast<int64_t*>(a_src));
  for (int r = threadIdx.x; r < T::kBM; r += T::kThreads) {
    const int64_t src = a_src[r];
    a_row[r] = reinterpret_cast<uint64_t>(a + (src < 0 ? 0 : src));
  }
  __syncthreads();
  return a_row;
}

// The prefill pipeline over `stages` stages from kb_begin, one barrier per stage. Stage j's raw
// copies land in buffer j % STAGES (STAGES - 1 in flight before the loop); its weights are
// decoded into decoded buffer j % 2 one iteration ahead of its multiplies. At the barrier of
// iteration it: stage it + 1 has landed, stage it's decoded weights are written, and every warp
// is done with iteration it - 1 (stage it - 1's A rows and decoded buffer (it - 1) % 2), so
// stage it + STAGES - 1 may be copied into raw buffer (it - 1) % STAGES and stage it + 1 decoded
// into buffer (it + 1) % 2 while stage it is multiplied.
template <class T>
__device__ __forceinline__ void prefill_pipeline(uint8_t* smem, const int64_t* a_src, const uint16_t* a,
                                                 int acol_limit, const Operand* ops, int n0, int n_end, int kb_begin,
                                                 int kb_end, int stages, float (&acc)[T::kMats][T::MT][T::NT][4]) {
  constexpr int S = T::kStages;
  uint8_t* const dec0 = smem + S * T::kStageBytes;
  auto raw = [&](int j) { return smem + (j % S) * T::kStageBytes; };
  auto dec = [&](int j) { return dec0 + (j & 1) * T::kDecBytes; };
  const uint64_t* a_row = prefill_a_rows<T>(a_src, a);
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < stages) load_stage<T>(raw(s), a_row, acol_limit, ops, n0, n_end, kb_begin + s * T::KB, kb_end);
    cp_async_commit();
  }
  if (stages > 0) {
    cp_async_wait<S - 2>();
    __syncthreads();
    decode_stage<T>(raw(0), dec(0), ops, n0, kb_begin);
  }
  // The last stage is peeled off so that every iteration of the loop decodes without a branch
  // between its multiplies and the decode: the multiplies come first and the next stage's decode
  // (shared loads and integer work, its shared stores last) may be scheduled among them.
#pragma unroll 1
  for (int it = 0; it < stages - 1; ++it) {
    cp_async_wait<S - 3>();
    __syncthreads();
    const int next = it + S - 1;
    if (next < stages) load_stage<T>(raw(next), a_row, acol_limit, ops, n0, n_end, kb_begin + next * T::KB, kb_end);
    cp_async_commit();
    prefill_mma<T>(raw(it), dec(it), acc);
    decode_stage<T>(raw(it + 1), dec(it + 1), ops, n0, kb_begin + (it + 1) * T::KB);
  }
  if (stages > 0) {
    cp_async_wait<S - 3>();
    __syncthreads();
    cp_async_commit();
    prefill_mma<T>(raw(stages - 1), dec(stages - 1), acc);
  }
}

// The whole K loop of a tile over k32 blocks [kb_begin, kb_end); then the WK partials are summed
// into the wk = 0 warps (the others' accumulators are left unspecified). Shared memory is free
// again on return (all copies landed, every warp past its last read).
template <class T>
__device__ __forceinline__ void mainloop(uint8_t* smem, const int64_t* a_src, const uint16_t* a, int acols,
                                         const Operand* ops, int n0, int n_end, int kb_begin, int kb_end,
                                         float (&acc)[T::kMats][T::MT][T::NT][4]) {
#pragma unroll
  for (int m = 0; m < T::kMats; ++m)
#pragma unroll
    for (int mt = 0; mt < T::MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < T::NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[m][mt][nt][i] = 0.f;
  const int acol_limit = acols < kb_end * 32 ? acols : kb_end * 32;
  const int stages = kb_end > kb_begin ? (kb_end - kb_begin + T::KB - 1) / T::KB : 0;
  // Decode tiles (BM <= 16) hoist the copies' addressing out of the K loop; the prefill tiles'
  // registers go to their accumulators instead.
  if constexpr (T::kBlockOrder) {
    // Two accumulator chains (words 0-1 and 2-3 of each block) halve the dependent mma chain of a
    // quad; they are added once at the end, in that order.
    float acc_odd[T::kMats][T::MT][T::NT][4];
#pragma unroll
    for (int i = 0; i < T::kAcc; ++i) (&acc_odd[0][0][0][0])[i] = 0.f;
    const StageCopier<T> copier(a_src, a, acol_limit, ops, n0, n_end, kb_end);
    pipeline<T>(
        smem, kb_begin, stages, [&](uint8_t* st, int kb0) { copier.load(st, a, ops, n0, n_end, kb0, kb_end); },
        [&](const uint8_t* st, int kb0) { compute_stage_blocks<T>(st, ops, n0, kb0, acc, acc_odd); });
#pragma unroll
    for (int i = 0; i < T::kAcc; ++i) (&acc[0][0][0][0])[i] = __fadd_rn((&acc[0][0][0][0])[i], (&acc_odd[0][0][0][0])[i]);
  } else if constexpr (T::kBM <= 16) {
    const StageCopier<T> copier(a_src, a, acol_limit, ops, n0, n_end, kb_end);
    pipeline<T>(
        smem, kb_begin, stages, [&](uint8_t* st, int kb0) { copier.load(st, a, ops, n0, n_end, kb0, kb_end); },
        [&](const uint8_t* st, int kb0) { compute_stage<T>(st, ops, n0, kb0, acc); });
  } else {
    prefill_pipeline<T>(smem, a_src, a, acol_limit, ops, n0, n_end, kb_begin, kb_end, stages, acc);
  }
  cp_async_wait<0>();
  __syncthreads();
  if constexpr (T::kWK > 1) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    constexpr int kMn = T::kWM * T::kWN;
    const int wmn = warp % kMn, wk = warp / kMn;
    float* red = reinterpret_cast<float*>(smem);
    float* flat = &acc[0][0][0][0];
    if (wk > 0) {
      float* dst = red + (size_t((wk - 1) * kMn + wmn) * T::kAcc) * 32 + lane;
#pragma unroll
      for (int i = 0; i < T::kAcc; ++i) dst[i * 32] = flat[i];
    }
    __syncthreads();
    if (wk == 0) {
#pragma unroll 1
      for (int j = 1; j < T::kWK; ++j) {
        const float* src = red + (size_t((j - 1) * kMn + wmn) * T::kAcc) * 32 + lane;
#pragma unroll
        for (int i = 0; i < T::kAcc; ++i) flat[i] += src[i * 32];
      }
    }
    __syncthreads();
  }
}

// Calls f(row, col, g0, g1, v0, v1) for every accumulator pair of a wk = 0 warp: tile row `row`,
// tile columns col and col + 1 (col even); v0/v1 are the second matrix's (0 when not gated).
template <class T, class F>
__device__ __forceinline__ void for_each_pair(const float (&acc)[T::kMats][T::MT][T::NT][4], F&& f) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wm = warp % T::kWM, wn = (warp / T::kWM) % T::kWN;
#pragma unroll
  for (int mt = 0; mt < T::MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < T::NT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = (wm * T::MT + mt) * 16 + g + 8 * h;
        if (T::kBM < 16 && row >= T::kBM) continue;  // the zero rows of a partial m16 tile
        const int col = (wn * T::NT + nt) * 8 + 2 * t;
        const float v0 = T::kMats > 1 ? acc[T::kMats - 1][mt][nt][2 * h] : 0.f;
        const float v1 = T::kMats > 1 ? acc[T::kMats - 1][mt][nt][2 * h + 1] : 0.f;
        f(row, col, acc[0][mt][nt][2 * h], acc[0][mt][nt][2 * h + 1], v0, v1);
      }
}

// silu and the clamped SwiGLU with the CPU reference's rounding points (CpuForwardMath.h silu,
// CpuLayersMoe.cpp swigluInPlace): exp in fp64 rounded once (as glibc's expf: nearest), every
// other step one fp32 rounding. h = bf16(weight * (silu(min(g, limit)) * clamp(v, -limit, limit))).
__device__ __forceinline__ float silu_ref(float x) {
  return __fdiv_rn(x, __fadd_rn(1.0f, float(exp(double(-x)))));
}
__device__ __forceinline__ uint16_t swiglu_bf16(float g, float v, float limit, float weight) {
  const float gi = (limit < g) ? limit : g;                             // std::min(g, limit)
  const float vi = (v < -limit) ? -limit : ((limit < v) ? limit : v);  // std::clamp
  return f32_to_bf16(__fmul_rn(weight, __fmul_rn(silu_ref(gi), vi)));
}

}  // namespace qg
}  // namespace di
