// Host emulation of templates/common/Mma.cuh for tests/unit/emu (same API, emulator hooks).
#pragma once
#include "common/Types.h"

namespace di {

inline void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  di_emu::mma_bf16_16816(d, a, b, c);
}
// ldmatrix.x4: lane l receives, from matrix j, the word at byte 4 * (l % 4) of the row that lane
// 8 * j + l / 4 addressed (the row pointers travel through shuffles, a warp collective here too).
inline void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row_ptr) {
  const uint64_t a = reinterpret_cast<uint64_t>(smem_row_ptr);
  const int lane = int(threadIdx.x & 31u);  // EmuCuda.h: the emulated thread's index
  for (int j = 0; j < 4; ++j) {
    const int src = 8 * j + lane / 4;
    const uint64_t lo = di_emu::shfl_idx(uint32_t(a), src), hi = di_emu::shfl_idx(uint32_t(a >> 32), src);
    std::memcpy(&r[j], reinterpret_cast<const uint8_t*>((hi << 32) | lo) + 4 * (lane % 4), 4);
  }
}
inline void cp_async_16(void* smem_dst, const void* gmem_src, bool valid = true) {
  di_emu::cp_async(smem_dst, gmem_src, 16, valid ? 16 : 0);
}
inline void cp_async_commit() { di_emu::cp_async_commit(); }
template <int N>
inline void cp_async_wait() { di_emu::cp_async_wait(N); }
struct alignas(16) U32x4 { uint32_t x, y, z, w; };
// Global 16-byte accesses: plain copies on the host (cache hints have no meaning here).
inline U32x4 ld_global_v4(const void* p) {
  U32x4 v;
  std::memcpy(&v, p, 16);
  return v;
}
inline U32x4 ld_global_nc_v4(const void* p) { return ld_global_v4(p); }
inline U32x4 ld_global_cs_v4(const void* p) { return ld_global_v4(p); }
inline void st_global_v4(void* p, const U32x4& v) { std::memcpy(p, &v, 16); }
inline void st_global_cs_v4(void* p, const U32x4& v) { st_global_v4(p, v); }

}  // namespace di
