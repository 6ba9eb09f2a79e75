// The gather's launch geometry (templates/KvCache.cuh), shared by gather_kcache and the fused
// gather_kcache_combine, whose gather CTAs are the same code under a larger register need.
#pragma once
#include <algorithm>
#include <cstdint>

#include "KvCacheLayout.h"

namespace deepinfer::kvcache {

// Registers by tokens_per_warp, from ptxas -v (CUDA 13.0, sm_80..sm_90, any block size):
// at the full-residency cap, 1 -> 30-32 (33-35 where 48 warps/SM leave room), 2 -> 39-40,
// 4 -> 59-64; with a looser __launch_bounds__ cap ptxas takes up to 36 / 46 / 71.
inline int gatherRegisters(int64_t tokensPerWarp) { return tokensPerWarp <= 1 ? 32 : tokensPerWarp == 2 ? 40 : 64; }
inline int gatherRegistersUnbounded(int64_t tokensPerWarp) {
  return tokensPerWarp <= 1 ? 36 : tokensPerWarp == 2 ? 48 : 72;
}

// CTAs of `warps` warps needing `registers` per thread that stay resident on one SM of the target.
inline int residentGatherCtas(const TargetProfile& t, int64_t warps, int registers) {
  const int threads = int(32 * warps);
  return std::max(0, std::min({t.facts.maxCtasPerSm, int(t.facts.maxWarpsPerSm / warps),
                               ctasByRegisters(t, threads, registers)}));
}

// __launch_bounds__(threads, ctas_per_sm) caps the registers at 64K / (threads * ctas), in the
// allocation unit of 8 per thread; below the cap ptxas takes what it likes.
inline int launchBoundsRegisterCap(int threads, int64_t ctasPerSm) {
  return int(65536 / (threads * std::max<int64_t>(ctasPerSm, 1))) / 8 * 8;
}

// The gather CTAs of one resident wave at ctas_per_sm.
inline int64_t gatherWave(const TargetProfile& t, int64_t ctasPerSm) {
  return int64_t(t.smCount) * std::max<int64_t>(ctasPerSm, 1);
}

}  // namespace deepinfer::kvcache
