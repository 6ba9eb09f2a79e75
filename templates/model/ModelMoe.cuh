// The MoE sublayer's small kernels (oracle: runtime/model/CpuLayersMoe.cpp): the sqrt-softplus
// router with its biased top-k, row gather/scatter, and the in-order sum of the expert outputs
// (the experts themselves are the moe_experts and weight_gemm ops).
#pragma once
#include "common/Mma.cuh"
#include "model/ModelCommon.cuh"
#include "model/params/ModelMoeParams.h"

namespace di {
namespace model {

constexpr int kRouterMaxK = 32;

// One CTA per token. Dynamic shared memory: s[E] and the biased scores[E] (8 * E bytes), filled by
// the whole CTA. Selection is k rounds of an argmax over the biased scores (larger first, ties to
// the lower expert; -inf and NaN never chosen, as topkAscending) run by warp 0 alone: lane l owns
// experts l, l + 32, ..., so a round is a scan of its own entries and a warp argmax, and the
// winner's owner retires it without a barrier (a CTA argmax per round cost two barriers each:
// ~10 us per decode token against ~3). The chosen ids are then sorted and the weights computed by
// one lane, summing s over the ids in ascending order like the reference.
__device__ __forceinline__ void router_topk(const RouterTopkParams& p) {
  extern __shared__ float router_smem[];
  float* s = router_smem;
  float* biased = router_smem + p.E;
  __shared__ int32_t chosen[kRouterMaxK];
  const int lane = int(threadIdx.x & 31u);
  for (int64_t t = blockIdx.x; t < p.T; t += gridDim.x) {  // CTA-uniform
    const float* logits = p.logits + t * p.E;
    for (int e = int(threadIdx.x); e < p.E; e += kCtaThreads) {
      const float se = __fsqrt_rn(softplus_f32(logits[e]));
      s[e] = se;
      biased[e] = __fadd_rn(se, p.bias[e]);
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      for (int r = 0; r < p.k; ++r) {
        ArgBest best{0.f, -1};
        for (int e = lane; e < p.E; e += 32) {
          const float v = biased[e];
          if (!(v > neg_inf())) continue;  // -inf and NaN are never chosen
          if (best.i < 0 || v > best.v) best = ArgBest{v, e};
        }
        best = warp_arg_best(best);  // every lane holds the winner
        if (best.i >= 0 && int(best.i & 31) == lane) biased[best.i] = neg_inf();  // its owner retires it
        if (lane == 0) chosen[r] = int32_t(best.i);
      }
      __syncwarp();
      if (lane == 0) {
        // Insertion sort by id, -1 (nothing left to choose) after every real id.
        auto key = [](int32_t id) { return id < 0 ? 0x7FFFFFFF : id; };
        for (int a = 1; a < p.k; ++a) {
          const int32_t v = chosen[a];
          int b = a - 1;
          while (b >= 0 && key(chosen[b]) > key(v)) {
            chosen[b + 1] = chosen[b];
            --b;
          }
          chosen[b + 1] = v;
        }
        float sum = 0.f;
        for (int a = 0; a < p.k; ++a)
          if (chosen[a] >= 0) sum = __fadd_rn(sum, s[chosen[a]]);
        const float denom = p.norm_topk ? __fadd_rn(sum, 1e-20f) : 1.f;
        for (int a = 0; a < p.k; ++a) {
          const int32_t e = chosen[a];
          p.ids[t * p.k + a] = e;
          p.weights[t * p.k + a] = e >= 0 ? __fmul_rn(__fdiv_rn(s[e], denom), p.scaling) : 0.f;
        }
      }
    }
    __syncthreads();  // s / biased / chosen are rewritten for the next token
  }
}

// out[r] = src[row_idx[r]] (bf16 rows); a negative index writes a zero row.
__device__ __forceinline__ void gather_rows_bf16(const RowsParams& p) {
  const uint16_t* src = static_cast<const uint16_t*>(p.src);
  uint16_t* dst = static_cast<uint16_t*>(p.dst);
  for (int64_t r = blockIdx.x; r < p.n; r += gridDim.x) {
    const int64_t idx = p.row_idx[r];
    uint16_t* o = dst + r * p.C;
    if (p.vec) {
      const int64_t chunks = p.C / 8;
      for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x)
        st_global_v4(o + 8 * c, idx >= 0 ? ld_global_nc_v4(src + idx * p.C + 8 * c) : U32x4{0u, 0u, 0u, 0u});
    } else {
      for (int64_t c = threadIdx.x; c < p.C; c += blockDim.x) o[c] = idx >= 0 ? src[idx * p.C + c] : uint16_t(0);
    }
  }
}

// dst[row_idx[r]] = src[r] (f32 rows); a negative index skips the row.
__device__ __forceinline__ void scatter_rows_f32(const RowsParams& p) {
  const float* src = static_cast<const float*>(p.src);
  float* dst = static_cast<float*>(p.dst);
  for (int64_t r = blockIdx.x; r < p.n; r += gridDim.x) {
    const int64_t idx = p.row_idx[r];
    if (idx < 0) continue;  // CTA-uniform
    float* o = dst + idx * p.C;
    if (p.vec) {
      const int64_t chunks = p.C / 4;
      for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) st_global_v4(o + 4 * c, ld_global_nc_v4(src + r * p.C + 4 * c));
    } else {
      for (int64_t c = threadIdx.x; c < p.C; c += blockDim.x) o[c] = src[r * p.C + c];
    }
  }
}

// out[t, d] = bf16(shared[t, d] + routed[t, 0, d] + ... + routed[t, k-1, d]), left to right in
// fp32 (the reference's per-element order, so the result is bit-exact).
__device__ __forceinline__ void moe_sum(const MoeSumParams& p) {
  const int64_t total = p.T * p.C;
  for (int64_t i = flat_thread(); i < total; i += flat_stride()) {
    const int64_t t = i / p.C, d = i - t * p.C;
    float acc = p.shared != nullptr ? p.shared[i] : 0.f;
    const float* r = p.routed + t * p.k * p.C + d;
    for (int j = 0; j < p.k; ++j) acc = __fadd_rn(acc, r[int64_t(j) * p.C]);
    if (p.f32_out)
      static_cast<float*>(p.out)[i] = acc;
    else
      static_cast<uint16_t*>(p.out)[i] = f32_to_bf16(acc);
  }
}

}  // namespace model
}  // namespace di

extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads) di_model_router_topk(const di::RouterTopkParams p) {
  di::grid_dependency_sync();
  di::model::router_topk(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads) di_model_gather_rows_bf16(const di::RowsParams p) {
  di::grid_dependency_sync();
  di::model::gather_rows_bf16(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads) di_model_scatter_rows_f32(const di::RowsParams p) {
  di::grid_dependency_sync();
  di::model::scatter_rows_f32(p);
}
extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads) di_model_moe_sum(const di::MoeSumParams p) {
  di::grid_dependency_sync();
  di::model::moe_sum(p);
}
