// Host emulation of templates/common/Mma.cuh for tests/unit/emu (same API, emulator hooks).
#pragma once
#include "common/Types.h"

namespace di {

inline void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  di_emu::mma_bf16_16816(d, a, b, c);
}
// ldmatrix (.x4 / .x2, .x4.trans): lane l gives the row address of matrix l / 8, row l % 8.
inline void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row_ptr) { di_emu::ldmatrix(r, 4, smem_row_ptr); }
inline void ldmatrix_x2(uint32_t (&r)[2], const void* smem_row_ptr) { di_emu::ldmatrix(r, 2, smem_row_ptr); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row_ptr) {
  di_emu::ldmatrix(r, 4, smem_row_ptr, true);
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
