// Host emulation of templates/common/Mma.cuh for tests/unit/emu (same API, emulator hooks).
#pragma once
#include "common/Types.h"

namespace di {

inline void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  di_emu::mma_bf16_16816(d, a, b, c);
}
// ldmatrix (.x4 / .x2, no transpose): lane l gives the row address of matrix l / 8, row l % 8.
inline void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row_ptr) { di_emu::ldmatrix(r, 4, smem_row_ptr); }
inline void ldmatrix_x2(uint32_t (&r)[2], const void* smem_row_ptr) { di_emu::ldmatrix(r, 2, smem_row_ptr); }
inline void cp_async_16(void* smem_dst, const void* gmem_src, bool valid = true) {
  di_emu::cp_async(smem_dst, gmem_src, 16, valid ? 16 : 0);
}
inline void cp_async_commit() { di_emu::cp_async_commit(); }
template <int N>
inline void cp_async_wait() { di_emu::cp_async_wait(N); }
struct alignas(16) U32x4 { uint32_t x, y, z, w; };
// ldmatrix .x4 (.trans): lanes 8i..8i+7 give the row addresses of matrix i; each lane's own
// address reaches the others through two 32-bit shuffles (a host pointer is 64 bits).
inline const uint8_t* ldmatrix_row(const void* own, int srcLane) {
  const uint64_t a = reinterpret_cast<uint64_t>(own);
  const uint64_t lo = di_emu::shfl_idx(uint32_t(a), srcLane), hi = di_emu::shfl_idx(uint32_t(a >> 32), srcLane);
  return reinterpret_cast<const uint8_t*>(lo | (hi << 32));
}
// Lane l receives, of each matrix, row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1.
inline void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row_ptr) {
  const int l = int(threadIdx.x % 32);
  for (int i = 0; i < 4; ++i) {
    const uint8_t* row = ldmatrix_row(smem_row_ptr, 8 * i + l / 4);
    std::memcpy(&r[i], row + 4 * (l % 4), 4);
  }
}
// Transposed: lane l receives, of each matrix, column l / 4 of rows 2 (l % 4) and 2 (l % 4) + 1.
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row_ptr) {
  const int l = int(threadIdx.x % 32);
  for (int i = 0; i < 4; ++i) {
    const uint8_t* r0 = ldmatrix_row(smem_row_ptr, 8 * i + 2 * (l % 4));
    const uint8_t* r1 = ldmatrix_row(smem_row_ptr, 8 * i + 2 * (l % 4) + 1);
    uint16_t lo, hi;
    std::memcpy(&lo, r0 + 2 * (l / 4), 2);
    std::memcpy(&hi, r1 + 2 * (l / 4), 2);
    r[i] = uint32_t(lo) | (uint32_t(hi) << 16);
  }
}
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
