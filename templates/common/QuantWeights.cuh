// Checkpoint weight formats on the device (docs/model.md §3, docs/ops.md §1): e4m3 and e2m1
// codes become bf16 in registers by integer work (sm_80/sm_86 have no fp8/fp4 conversion), and
// the UE8M0 scale is folded into the one bf16x2 multiply that also fixes the exponent bias.
//
// Every dequantized weight is the correctly rounded bf16 of code * 2^(s - 127): one rounding
// (fma.rn.bf16x2 has no flush-to-zero), so it is exact wherever that value is a bf16 (the scale
// bytes real checkpoints use: fp8 3..246, fp4 0..252, subnormal results included), rounds like
// the C++ reference elsewhere, overflows to inf past bf16's range, and scale byte 0xFF or an
// e4m3 NaN code (0x7F/0xFF) gives NaN.
//
// The integer parts are plain functions so that a host unit test can check them (every code,
// every scale byte) against the C++ reference; only the multiply is device code.
#pragma once
#include "common/Types.h"

#if defined(__CUDACC__) || defined(DI_SIMT_EMU)
#include "common/Mma.cuh"
#define DI_QW_FN __host__ __device__ __forceinline__
#else
#define DI_QW_FN inline
#endif

namespace di {
namespace qw {

// --- e2m1 (fp4) -------------------------------------------------------------------------------
// A 32-bit word holds 8 codes, nibble j = column j (low nibble = even column). Nibbles j and j+4
// (j = 0..3) become one bf16x2 (j in the low half) holding code * 2^-126: the nibble's sign goes
// to bit 15, its three magnitude bits (e1 e0 m) to bits 8..6, so the bf16 exponent field is e
// and the top mantissa bit m (e = 0 gives the bf16 subnormal m * 2^-127, still code * 2^-126).
DI_QW_FN uint32_t e2m1_pair_biased(uint32_t w, int j) {
  const uint32_t t = w << (12 - 4 * j);  // nibble j at bits 15..12, nibble j+4 at 31..28
  return (t & 0x80008000u) | ((t >> 6) & 0x01C001C0u);
}

// The bf16x2 factors that turn e2m1_pair_biased values into code * 2^(s-127) with one rounding:
// s <= 128: one multiply by 2^(s-1); otherwise by 2^127 (exact: twice the code), then by
// 2^(s-128) (NaN for 0xFF).
struct ScaleFactors {
  uint32_t first;   // bf16x2, both halves equal
  uint32_t second;  // used only when `two`
  bool two;
};
// The largest scale byte one multiply covers, and the first factor alone (the whole scale there).
constexpr uint32_t kE2m1OneMultiplyMax = 128u;
DI_QW_FN uint32_t e2m1_first_factor(uint32_t s) { return s * 0x00800080u + 0x3F003F00u; }  // (s + 126) << 7, both halves
DI_QW_FN ScaleFactors e2m1_scale_factors(uint32_t s) {
  ScaleFactors f;
  f.first = e2m1_first_factor(s < kE2m1OneMultiplyMax ? s : kE2m1OneMultiplyMax);
  f.two = s > kE2m1OneMultiplyMax;
  f.second = (s == 255u ? 0x7FC0u : ((s - 1u) << 7)) * 0x00010001u;
  return f;
}

// --- e4m3 (fp8) -------------------------------------------------------------------------------
// Two codes in the high byte of each 16-bit lane of q -> bf16x2 holding code * 2^-120, exact
// (normals and subnormals); NaN codes come out finite and are patched separately.
DI_QW_FN uint32_t e4m3_pair_biased(uint32_t q) { return (q & 0x80008000u) | ((q & 0x7F007F00u) >> 4); }

// The largest scale byte one multiply covers, and the first factor alone (the whole scale there).
constexpr uint32_t kE4m3OneMultiplyMax = 134u;
DI_QW_FN uint32_t e4m3_first_factor(uint32_t s) { return s * 0x00800080u + 0x3C003C00u; }  // (s + 120) << 7, both halves
// s <= 134: one multiply by 2^(s-7); otherwise by 2^127 (exact: the code times 2^7), then by
// 2^(s-134) (NaN for 0xFF).
DI_QW_FN ScaleFactors e4m3_scale_factors(uint32_t s) {
  ScaleFactors f;
  f.first = e4m3_first_factor(s < kE4m3OneMultiplyMax ? s : kE4m3OneMultiplyMax);
  f.two = s > kE4m3OneMultiplyMax;
  f.second = (s == 255u ? 0x7FC0u : ((s - 7u) << 7)) * 0x00010001u;
  return f;
}

// Bit 7 of a byte of the result is set iff that byte of w is an e4m3 NaN code (low 7 bits all
// ones); bytes stay below 0x80 before the add, so no carry crosses a byte.
DI_QW_FN uint32_t e4m3_nan_probe(uint32_t w) { return ((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u; }

// --- Fragment order ---------------------------------------------------------------------------
// A thread's 8 weights of one k32 block are columns 8t..8t+7 of the block (t = lane % 4). The
// mma k slots they fill (two m16n8k16 steps, registers b0/b1 of each) are chosen so that the
// decoders above produce whole registers; the activations (one 16-byte chunk: columns 8t..8t+7)
// are permuted the same way with one prmt per register. Per format, for step ks and register
// r, the (low, high) columns:
//   e2m1: ks0 b0 (0,4) b1 (1,5), ks1 b0 (2,6) b1 (3,7)    (pairs j and j+4 of one word)
//   e4m3: ks0 b0 (0,2) b1 (1,3), ks1 b0 (4,6) b1 (5,7)    (bytes 0,2 / 1,3 of each word)
// The column (0..7) in the low half of step ks, register r; the high half is +4 (e2m1) or +2.
DI_QW_FN int frag_low_column(bool fp4, int ks, int r) { return fp4 ? 2 * ks + r : 4 * ks + r; }
DI_QW_FN int frag_high_column(bool fp4, int ks, int r) { return frag_low_column(fp4, ks, r) + (fp4 ? 4 : 2); }

#if defined(__CUDACC__) || defined(DI_SIMT_EMU)
// v * f for both halves, rounded once, subnormals kept (fma.rn.bf16x2 has no .ftz; the -0
// addend keeps -0 products -0).
__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t v, uint32_t f) {
#ifdef DI_SIMT_EMU
  return di_emu::bf16x2_mul(v, f);
#else
  uint32_t r;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(v), "r"(f), "r"(0x80008000u));
  return r;
#endif
}

// Four bf16x2 weights of one thread's k32 block: b[ks][r] in the fragment order above, scaled by
// f.first only (the whole value when !f.two: every scale byte a checkpoint uses).
__device__ __forceinline__ void e2m1_decode(uint32_t w, uint32_t first, uint32_t (&b)[2][2]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) b[j >> 1][j & 1] = bf16x2_mul(e2m1_pair_biased(w, j), first);
}
__device__ __forceinline__ void e4m3_decode(uint32_t w0, uint32_t w1, uint32_t first, uint32_t (&b)[2][2]) {
  b[0][0] = bf16x2_mul(e4m3_pair_biased(w0 << 8), first);  // columns 0, 2
  b[0][1] = bf16x2_mul(e4m3_pair_biased(w0), first);       // 1, 3
  b[1][0] = bf16x2_mul(e4m3_pair_biased(w1 << 8), first);  // 4, 6
  b[1][1] = bf16x2_mul(e4m3_pair_biased(w1), first);       // 5, 7
}
// The second factor of a scale byte past bf16's range of one multiply (f.two).
__device__ __forceinline__ void apply_second(uint32_t second, uint32_t (&b)[2][2]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) b[i >> 1][i & 1] = bf16x2_mul(b[i >> 1][i & 1], second);
}
// An e4m3 NaN code (rare: never in a valid checkpoint) sets its half to the canonical NaN.
__device__ __forceinline__ void e4m3_patch_nan(uint32_t w0, uint32_t w1, uint32_t (&b)[2][2]) {
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    const uint32_t byte = ((c < 4 ? w0 : w1) >> (8 * (c & 3))) & 0x7Fu;
    if (byte != 0x7Fu) continue;
    const int ks = c >> 2, r = c & 1, hi = (c >> 1) & 1;
    b[ks][r] = hi ? ((b[ks][r] & 0x0000FFFFu) | 0x7FC00000u) : ((b[ks][r] & 0xFFFF0000u) | 0x7FC0u);
  }
}

__device__ __forceinline__ void e2m1_fragments(uint32_t w, const ScaleFactors& f, uint32_t (&b)[2][2]) {
  e2m1_decode(w, f.first, b);
  if (f.two) apply_second(f.second, b);
}

__device__ __forceinline__ void e4m3_fragments(uint32_t w0, uint32_t w1, const ScaleFactors& f,
                                               uint32_t (&b)[2][2]) {
  e4m3_decode(w0, w1, f.first, b);
  if (f.two) apply_second(f.second, b);
  if ((e4m3_nan_probe(w0) | e4m3_nan_probe(w1)) != 0u) e4m3_patch_nan(w0, w1, b);
}

// The activation registers of one m16 row pair for a k32 block: `lo` is columns 8t..8t+7 of row
// g, `hi` of row g + 8 (16 bytes each). a[ks] = {row g low pair, row g+8 low pair, row g high
// pair, row g+8 high pair} with pairs in the weight fragment order of the format.
template <bool FP4>
__device__ __forceinline__ void activation_fragments(const U32x4& lo, const U32x4& hi,
                                                     uint32_t (&a)[2][4]) {
  // e2m1 pairs columns (c, c+4): words (0, 2) and (1, 3); e4m3 pairs (c, c+2): words (0, 1), (2, 3).
  const uint32_t l0 = lo.x, l1 = FP4 ? lo.z : lo.y, l2 = FP4 ? lo.y : lo.z, l3 = lo.w;
  const uint32_t h0 = hi.x, h1 = FP4 ? hi.z : hi.y, h2 = FP4 ? hi.y : hi.z, h3 = hi.w;
  a[0][0] = __byte_perm(l0, l1, 0x5410);
  a[0][1] = __byte_perm(h0, h1, 0x5410);
  a[0][2] = __byte_perm(l0, l1, 0x7632);
  a[0][3] = __byte_perm(h0, h1, 0x7632);
  a[1][0] = __byte_perm(l2, l3, 0x5410);
  a[1][1] = __byte_perm(h2, h3, 0x5410);
  a[1][2] = __byte_perm(l2, l3, 0x7632);
  a[1][3] = __byte_perm(h2, h3, 0x7632);
}
#endif

}  // namespace qw
}  // namespace di
