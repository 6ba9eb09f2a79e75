// Tensor-parallel helpers (docs/parallelism.md §2): out = a + b elementwise (the logical-rank
// collective sums the ranks' partial outputs with it, one rank at a time in rank order), and
// the expert-parallel localization of router ids (a rank runs only its contiguous expert range;
// moe_experts gives ids outside [0, E) a zero row).
#pragma once
#include "common/GridDependency.cuh"
#include "model/ModelCommon.cuh"
#include "model/params/ModelParallelParams.h"

namespace di {
namespace model {

__device__ __forceinline__ void add_elems(const AddParams& p) {
  if (p.bf16) {
    const uint16_t* a = static_cast<const uint16_t*>(p.a);
    const uint16_t* b = static_cast<const uint16_t*>(p.b);
    uint16_t* out = static_cast<uint16_t*>(p.out);
    for (int64_t i = flat_thread(); i < p.n; i += flat_stride())
      out[i] = f32_to_bf16(__fadd_rn(bf16_to_f32(a[i]), bf16_to_f32(b[i])));
  } else {
    const float* a = static_cast<const float*>(p.a);
    const float* b = static_cast<const float*>(p.b);
    float* out = static_cast<float*>(p.out);
    for (int64_t i = flat_thread(); i < p.n; i += flat_stride()) out[i] = __fadd_rn(a[i], b[i]);
  }
}

__device__ __forceinline__ void local_expert_ids(const LocalExpertIdsParams& p) {
  for (int64_t i = flat_thread(); i < p.n; i += flat_stride()) {
    const int32_t id = p.ids[i];
    p.ids[i] = id >= p.begin && id < p.end ? id - p.begin : -1;
  }
}

}  // namespace model
}  // namespace di

extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads) di_model_add(const di::AddParams p) {
  di::grid_dependency_sync();
  di::model::add_elems(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads)
    di_model_local_expert_ids(const di::LocalExpertIdsParams p) {
  di::grid_dependency_sync();
  di::model::local_expert_ids(p);
}
