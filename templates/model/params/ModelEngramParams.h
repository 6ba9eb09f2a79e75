// Parameters of the engram gate (templates/model/ModelEngram.cuh) and the ratio-2 compressor
// pooling (templates/model/ModelCompressor.cuh).
#pragma once
#include "common/Types.h"

namespace di {

struct EngramGateParams {
  uint16_t* X;           // bf16 [T, 4, C], in place
  const float* kv;       // [T, 5C]: 4 keys then the value (bf16 values in f32)
  const uint16_t* qw;    // bf16 [4, C]
  const uint16_t* kw;    // bf16 [4, C]
  int64_t T;
  int32_t C;
  float eps;             // fp32(eps)
  float inv_sqrt_c;      // fp32(1 / sqrt(double(C)))
  int32_t pad_;
};
static_assert(sizeof(EngramGateParams) == 56, "EngramGateParams layout");

struct PairPoolParams {
  const float* kv;         // [*, D]
  const float* gate;       // [*, D]
  const float* tail_kv;    // [D] or null (needed when r0 == -1)
  const float* tail_gate;  // [D] or null
  float* out;              // [n, D] (bf16 values)
  int64_t r0;              // first row of entry 0; -1 = the carried tail
  int64_t n;
  int64_t D;
};
static_assert(sizeof(PairPoolParams) == 64, "PairPoolParams layout");

}  // namespace di
