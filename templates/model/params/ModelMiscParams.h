// Parameters of the small model kernels in templates/model/ModelMisc.cuh: embedding to the
// four residual streams, f32 -> bf16 rounding (to bf16, or in place in f32), greedy argmax, the
// DSpark target feature (the mean of the four streams).
#pragma once
#include "common/Types.h"

namespace di {

struct EmbedStreamsParams {
  const int32_t* ids;      // [T]
  const uint16_t* embed;   // bf16 [V, C]
  uint16_t* X;             // bf16 [T, 4, C]
  int64_t T;
  int64_t C;
  int32_t vec;             // 1: 16-byte vector copies (C % 8 == 0, 16-byte aligned tensors)
  int32_t pad_;
};
static_assert(sizeof(EmbedStreamsParams) == 48, "EmbedStreamsParams layout");

struct RoundBf16Params {
  const float* x;
  uint16_t* out;
  int64_t n;
};
static_assert(sizeof(RoundBf16Params) == 24, "RoundBf16Params layout");

struct RoundF32Params {
  float* x;                // rounded to bf16 values in place
  int64_t n;
};
static_assert(sizeof(RoundF32Params) == 16, "RoundF32Params layout");

struct ArgmaxParams {
  const float* logits;     // [T, V]
  int32_t* out;            // [T]
  int32_t* finite;         // [T] or null: 1 when every logit of the row is finite, else 0
  int64_t T;
  int64_t V;
};
static_assert(sizeof(ArgmaxParams) == 40, "ArgmaxParams layout");

struct StreamMeanParams {
  const uint16_t* X;       // bf16 [T, 4, C]
  uint16_t* out;           // bf16 [T, outStride]: row t's first C columns
  int64_t T;
  int64_t C;
  int64_t outStride;
};
static_assert(sizeof(StreamMeanParams) == 40, "StreamMeanParams layout");

}  // namespace di
