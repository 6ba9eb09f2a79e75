// Host emulation of the parts of templates/common/Numerics.cuh the quantized GEMMs use.
#pragma once
#include "common/Types.h"

namespace di {

inline float bf16_to_f32(uint16_t b) { return __uint_as_float(uint32_t(b) << 16); }
inline uint16_t f32_to_bf16(float f) { return di_emu::f32_to_bf16(f); }

}  // namespace di
