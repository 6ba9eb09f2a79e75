// Plain C++ references of every kernel op (docs/ops.md), the oracles the generated GPU kernels
// are compared against and the `--backend reference` of `deepinfer-jit run-op`. Slow on
// purpose: straight loops, fp32 where the spec computes in fp32, fp64 for mHC (whose
// tolerances are stated against fp64).
#pragma once
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/Tensor.h"

namespace deepinfer {

// Runs `op` on the tensors named as in docs/ops.md §11. Every input is checked first (presence,
// dtype, shape, consistency between tensors, index ranges); an error names the op, the tensor
// and what was expected, and leaves `tensors` unchanged. On success every output is written
// into `tensors` (new tensors replace any of the same name; in/out tensors such as `k_cache`
// or `out` are updated in place). Missing attributes take the defaults of OpSignature.h.
Status runReference(const std::string& op, const OpAttrs& attrs, TensorMap& tensors);

// The ops that have a reference (every kernel op).
std::vector<std::string> referenceOps();

// The per-element error bound of `op`'s output on these inputs, for ops whose accuracy rule is a
// bound the reference derives (AccuracyRule::Kind::Bound: weight_gemm, moe_experts); an error
// for an op without one.
Result<HostTensor> referenceErrorBound(const std::string& op, const OpAttrs& attrs, const TensorMap& inputs);

}  // namespace deepinfer
