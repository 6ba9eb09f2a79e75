// Parameters of gather_kcache_combine (docs/ops.md §4a): gather_kcache's and combine_topk_swa's
// parameters side by side, and how many CTAs of the launch gather.
#pragma once
#include "common/Types.h"
#include "params/CombineTopkSwaParams.h"
#include "params/GatherKcacheParams.h"

namespace di {

struct GatherKcacheCombineParams {
  GatherKcacheParams gather;      // the window rows into the workspace (offset = N)
  CombineTopkSwaParams combine;   // the index rows into that workspace
  int32_t gather_ctas;            // CTAs [0, gather_ctas) gather; CTA gather_ctas + t builds row t
  int32_t pad_;
};

}  // namespace di
