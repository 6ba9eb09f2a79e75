// gather_kcache_combine (docs/ops.md §4a): the prefill window gather and the index rows that
// point into its workspace, in one launch. The two jobs share no data (the rows are computed
// from the lengths, never from the gathered values), so the grid is split: the first
// gather_ctas CTAs run gather_kcache's schedule over themselves, each later CTA builds one
// token's row. A CTA runs exactly one of the two bodies (the branch is uniform per CTA), so every
// barrier inside them is reached by all its threads, as in the separate kernels.
#pragma once
#include "CombineTopkSwa.cuh"
#include "KvCache.cuh"
#include "params/GatherKcacheCombineParams.h"

namespace di {

template <int BS, int WARPS, int TPW, int TOPK, int WINDOW>
__device__ __forceinline__ void gather_kcache_combine_kernel(const GatherKcacheCombineParams& p) {
  const int cta = int(blockIdx.x);
  if (cta < p.gather_ctas)
    gather_kcache_ctas<BS, WARPS, TPW>(p.gather, cta, p.gather_ctas);
  else
    combine_topk_swa_token<TOPK, WINDOW, WARPS * 32>(p.combine, cta - p.gather_ctas);
}

}  // namespace di
