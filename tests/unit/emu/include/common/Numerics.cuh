// Host emulation of the parts of templates/common/Numerics.cuh the quantized GEMMs and the mHC
// templates use.
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

}  // namespace di
