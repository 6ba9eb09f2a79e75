// Number formats on the device (docs/ops.md §1): bf16 via PTX cvt, UE8M0 by integer shift,
// fp8 e4m3 by integer ALU work (sm_80/sm_86 have no fp8 conversion instructions).
#pragma once
#include "common/GridDependency.cuh"  // every entry wrapper starts with grid_dependency_sync()
#include "common/Types.h"

namespace di {

__device__ __forceinline__ float bf16_to_f32(uint16_t b) { return __uint_as_float(uint32_t(b) << 16); }

// Round to nearest even; NaN stays NaN.
__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
  uint16_t r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}

// Two floats -> bf16x2 in one instruction: `lo` lands in bits 0..15.
__device__ __forceinline__ uint32_t f32x2_to_bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ float bf16x2_lo(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf16x2_hi(uint32_t v) { return __uint_as_float(v & 0xFFFF0000u); }

// 1/x to ~1 ulp (MUFU), subnormals flushed.
__device__ __forceinline__ float rcp_approx_ftz(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// UE8M0 scale byte -> fp32 2^(e-127) by placing it in the exponent field (e = 0 gives +0).
__device__ __forceinline__ float ue8m0_to_f32(uint32_t e) { return __uint_as_float(e << 23); }

// Two e4m3 codes held in the high byte of each 16-bit lane of `q` -> bf16x2 whose value is the
// e4m3 value times 2^-120 (the exponent bias is fixed later by one power-of-two multiply).
// Exact for normals and subnormals; NaN codes (0x7F/0xFF) are NOT detected here.
__device__ __forceinline__ uint32_t e4m3x2_hi_to_bf16x2_biased(uint32_t q) {
  return (q & 0x80008000u) | ((q & 0x7F007F00u) >> 4);
}

// One e4m3 code -> fp32, exact; NaN codes give NaN.
__device__ __forceinline__ float e4m3_to_f32(uint32_t code) {
  const uint32_t sign = (code & 0x80u) << 24;
  const uint32_t mag = code & 0x7Fu;
  if (mag == 0x7Fu) return __uint_as_float(0x7FC00000u);
  // Subnormal and normal alike: bf16 bits (mag << 4) scaled by 2^120 in fp32 (exact).
  const float v = __uint_as_float(mag << 20) * 1.329227995784916e36f;  // 2^120
  return __uint_as_float(__float_as_uint(v) | sign);
}

// fp32 -> e4m3 code, round to nearest even, saturating at +-448 (input already clamped).
__device__ __forceinline__ uint32_t f32_to_e4m3(float x) {
  // cvt to e4m3x2 exists only on sm_89+; do it with integer work on every target.
  const uint32_t bits = __float_as_uint(x);
  const uint32_t sign = (bits >> 24) & 0x80u;
  float a = fabsf(x);
  if (!(a == a)) return 0x7Fu | sign;
  if (a >= 448.f) return 0x7Eu | sign;
  // Smallest normal e4m3 is 2^-6; below it the step is 2^-9 (subnormals).
  if (a < 0.015625f) {
    const float q = rintf(a * 512.f);  // multiples of 2^-9, round to nearest even
    return sign | uint32_t(q);          // q in 0..8; q == 8 is the smallest normal (0x08)
  }
  const uint32_t ab = __float_as_uint(a);
  uint32_t exp = (ab >> 23) - 127 + 7;  // 1..15
  uint32_t man = ab & 0x7FFFFFu;
  // Round the 23-bit mantissa to 3 bits, nearest even.
  const uint32_t keep = man >> 20, rest = man & 0xFFFFFu;
  uint32_t m3 = keep + ((rest > 0x80000u || (rest == 0x80000u && (keep & 1u))) ? 1u : 0u);
  if (m3 == 8u) { m3 = 0; exp += 1; }
  uint32_t code = (exp << 3) | m3;
  if (code > 0x7Eu) code = 0x7Eu;
  return sign | code;
}

}  // namespace di
