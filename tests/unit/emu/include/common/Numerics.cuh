// Host emulation of the parts of templates/common/Numerics.cuh the quantized GEMMs, the mHC and
// the sparse_mla_decode templates use.
#pragma once
#include "common/Types.h"

namespace di {

inline float bf16_to_f32(uint16_t b) { return __uint_as_float(uint32_t(b) << 16); }
inline uint16_t f32_to_bf16(float f) { return di_emu::f32_to_bf16(f); }
inline uint32_t f32x2_to_bf16x2(float lo, float hi) {
  return uint32_t(f32_to_bf16(lo)) | (uint32_t(f32_to_bf16(hi)) << 16);
}
inline float bf16x2_lo(uint32_t v) { return __uint_as_float(v << 16); }
inline float bf16x2_hi(uint32_t v) { return __uint_as_float(v & 0xFFFF0000u); }
// rcp.approx.ftz: within 1 ulp of 1/x; the correctly rounded quotient is one such value.
inline float rcp_approx_ftz(float x) { return 1.f / x; }
// As in the real header: two e4m3 codes in the high byte of each 16-bit lane -> bf16x2 of the
// value times 2^-120 (integer work only).
inline uint32_t e4m3x2_hi_to_bf16x2_biased(uint32_t q) { return (q & 0x80008000u) | ((q & 0x7F007F00u) >> 4); }

}  // namespace di
