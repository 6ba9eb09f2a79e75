// The CUDA spellings the quantized-GEMM, mHC, topk and sparse_mla_decode templates use, mapped onto the host SIMT emulator
// (SimtEmu.h). Include this before the templates, in tests only.
#pragma once
#include "SimtEmu.h"

#define DI_SIMT_EMU 1
#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))  // GNU: allowed after `static` (__shared__)
#define __launch_bounds__(...)
#define threadIdx (::di_emu::threadIdx())
#define blockIdx (::di_emu::blockIdx())
#define blockDim (::di_emu::blockDim())
#define gridDim (::di_emu::gridDim())

struct float2 {
  float x, y;
};
struct float4 {
  float x, y, z, w;
};
struct uint2 {
  uint32_t x, y;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline uint2 make_uint2(uint32_t x, uint32_t y) { return {x, y}; }
inline void __syncthreads() { di_emu::syncthreads(); }
inline void __syncwarp(unsigned = 0xFFFFFFFFu) { di_emu::syncwarp(); }
inline int __shfl_up_sync(unsigned, int v, int d) { return int(di_emu::shfl_up(uint32_t(v), d)); }
inline float __shfl_xor_sync(unsigned, float v, int m) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u = di_emu::shfl_xor(u, m);
  std::memcpy(&v, &u, 4);
  return v;
}
inline unsigned __match_any_sync(unsigned, int key) { return di_emu::match_any(uint32_t(key)); }
inline unsigned __ballot_sync(unsigned, bool p) { return di_emu::ballot(p); }
inline bool __any_sync(unsigned, bool p) { return di_emu::ballot(p) != 0u; }
inline uint32_t __shfl_sync(unsigned, uint32_t v, int src) { return di_emu::shfl_idx(v, src); }
inline int __shfl_sync(unsigned, int v, int src) { return int(di_emu::shfl_idx(uint32_t(v), src)); }
inline unsigned __reduce_add_sync(unsigned, unsigned v) { return di_emu::reduce_add(v); }
// Fibers switch only at barriers and warp collectives, so a plain read-modify-write is atomic.
inline int atomicAdd(int* p, int v) {
  const int old = *p;
  *p = old + v;
  return old;
}
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
// CTAs run one at a time and threads switch only at barriers, so the atomics and fences of a
// last-arrival reduction are plain reads and writes here.
inline unsigned atomicAdd(unsigned* a, unsigned v) {
  const unsigned old = *a;
  *a = old + v;
  return old;
}
inline void __threadfence() {}
inline float __ldcg(const float* p) { return *p; }
inline float2 __ldcg(const float2* p) { return *p; }
inline float4 __ldcg(const float4* p) { return *p; }
inline int __ffs(unsigned x) { return __builtin_ffs(int(x)); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {
  const uint64_t v = uint64_t(x) | (uint64_t(y) << 32);
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= uint32_t((v >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
  return r;
}
inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __int_as_float(int i) { return __uint_as_float(uint32_t(i)); }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __frsqrt_rn(float x) { return float(1.0 / std::sqrt(double(x))); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
using std::exp;
