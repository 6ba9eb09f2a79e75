// Ratio-2 compressor pooling (oracle: runtime/model/CpuLayersCompressor.cpp): per channel, a
// softmax of the two gate values weights the two kv values; the pooled value is rounded to bf16
// (stored as f32) before the compressor norm. One thread per (entry, channel).
#pragma once
#include "model/ModelCommon.cuh"
#include "model/params/ModelEngramParams.h"

namespace di {
namespace model {

__device__ __forceinline__ void pair_pool(const PairPoolParams& p) {
  const int64_t total = p.n * p.D;
  for (int64_t w = flat_thread(); w < total; w += flat_stride()) {
    const int64_t i = w / p.D, c = w - i * p.D;
    const int64_t first = p.r0 + 2 * i, second = first + 1;
    const float s0 = first < 0 ? p.tail_gate[c] : p.gate[first * p.D + c];
    const float k0 = first < 0 ? p.tail_kv[c] : p.kv[first * p.D + c];
    const float s1 = p.gate[second * p.D + c];
    const float k1 = p.kv[second * p.D + c];
    const float mx = std_max(s0, s1);
    const float e0 = exp_f32(__fsub_rn(s0, mx)), e1 = exp_f32(__fsub_rn(s1, mx));
    const float sum = __fadd_rn(e0, e1);
    const float v = __fadd_rn(__fmul_rn(__fdiv_rn(e0, sum), k0), __fmul_rn(__fdiv_rn(e1, sum), k1));
    p.out[w] = bf16_to_f32(f32_to_bf16(v));
  }
}

}  // namespace model
}  // namespace di

extern "C" __global__ void __launch_bounds__(di::model::kCtaThreads) di_model_pair_pool(const di::PairPoolParams p) {
  di::grid_dependency_sync();
  di::model::pair_pool(p);
}
