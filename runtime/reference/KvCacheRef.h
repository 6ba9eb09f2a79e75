// The gather_kcache reference (docs/ops.md §3) writing through a strided view, the way the
// kernel writes with the caller's strides. `runReference("gather_kcache", ...)` is the same
// op on a dense `out`.
#pragma once
#include <cstdint>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/Tensor.h"

namespace deepinfer::ref {

// `tensors` holds the op's inputs and, as "out", the whole bf16 buffer the view lies in (any
// shape). The view has shape `outShape` = [R, M, 512] and element strides `outStrides` (dim 2
// stride 1) and starts `outOffset` elements into the buffer: row (r, m) begins at element
// outOffset + r * outStrides[0] + m * outStrides[1]. Only written rows change; every input is
// checked first and the view must lie inside the buffer.
Status gatherKcacheStrided(const OpAttrs& attrs, TensorMap& tensors, int64_t outOffset,
                           const std::vector<int64_t>& outShape, const std::vector<int64_t>& outStrides);

}  // namespace deepinfer::ref
