// Parameters of the tensor-parallel kernels (templates/model/ModelParallel.cuh): the one-GPU
// collective test double's rank-order sum and the expert-parallel id localization.
#pragma once
#include "common/Types.h"

namespace di {

struct AddParams {
  const void* a;         // f32 or bf16 [n]
  const void* b;         // the same dtype [n]
  void* out;             // the same dtype [n] (may alias a or b)
  int64_t n;
  int32_t bf16;          // 1: bf16 elements (the sum in f32, rounded once to nearest even)
  int32_t pad_;
};
static_assert(sizeof(AddParams) == 40, "AddParams layout");

struct LocalExpertIdsParams {
  int32_t* ids;          // [n] in place: global expert id -> id - begin, or -1 outside [begin, end)
  int64_t n;
  int32_t begin;
  int32_t end;
};
static_assert(sizeof(LocalExpertIdsParams) == 24, "LocalExpertIdsParams layout");

}  // namespace di
