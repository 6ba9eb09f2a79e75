// The engram gate (oracle: runtime/model/CpuLayersEngram.cpp, fp32 path). One CTA per
// (token, stream): the three row sums (the gated dot product and both squared norms) in one
// CTA reduction, then x += g * value rounded to bf16, in place.
#pragma once
#include "model/ModelCommon.cuh"
#include "model/params/ModelEngramParams.h"

namespace di {
namespace model {

__device__ __forceinline__ void engram_gate(const EngramGateParams& p) {
  __shared__ float scratch[3 * kCtaWarps];
  const int64_t C = p.C;
  const float fc = float(p.C);
  for (int64_t ts = blockIdx.x; ts < p.T * 4; ts += gridDim.x) {  // CTA-uniform
    const int64_t t = ts / 4, s = ts - t * 4;
    uint16_t* x = p.X + ts * C;
    const float* key = p.kv + t * 5 * C + s * C;
    const float* value = p.kv + t * 5 * C + 4 * C;
    const uint16_t* qw = p.qw + s * C;
    const uint16_t* kw = p.kw + s * C;
    float sums[3] = {0.f, 0.f, 0.f};  // dot, sum x^2, sum key^2
    for (int64_t d = threadIdx.x; d < C; d += kCtaThreads) {
      const float xd = bf16_to_f32(x[d]), kd = key[d];
      const float prod = __fmul_rn(__fmul_rn(xd, bf16_to_f32(qw[d])), bf16_to_f32(kw[d]));
      sums[0] = __fadd_rn(sums[0], __fmul_rn(prod, kd));
      sums[1] = __fadd_rn(sums[1], __fmul_rn(xd, xd));
      sums[2] = __fadd_rn(sums[2], __fmul_rn(kd, kd));
    }
    cta_sum(sums, scratch);
    const float rx = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sums[1], fc), p.eps)));
    const float rk = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sums[2], fc), p.eps)));
    const float dotv = __fmul_rn(__fmul_rn(__fmul_rn(sums[0], rx), rk), p.inv_sqrt_c);
    // sign(0) counts as +1 (docs/model.md §9).
    const float root = __fmul_rn(dotv < 0.f ? -1.f : 1.f, __fsqrt_rn(std_max(fabsf(dotv), 1e-6f)));
    const float g = sigmoid_f32(root);
    for (int64_t d = threadIdx.x; d < C; d += kCtaThreads)
      x[d] = f32_to_bf16(__fadd_rn(bf16_to_f32(x[d]), __fmul_rn(g, value[d])));
  }
}

}  // namespace model
}  // namespace di

extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads) di_model_engram_gate(const di::EngramGateParams p) {
  di::grid_dependency_sync();
  di::model::engram_gate(p);
}
