// The rule each kernel op's outputs are compared with against the C++ reference (docs/ops.md):
// bit-exact where the spec says so, else the stated tolerance. Shared by the GPU tests, `tune`
// (only a candidate that passes may win) and the benchmarks.
#pragma once
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/Tensor.h"

namespace deepinfer::testing {

struct CompareReport {
  bool ok = false;
  double maxErr = 0;   // the largest error seen, in `metric`
  std::string metric;  // e.g. "mismatched elements", "max abs error", "bf16 ulps"
  std::string detail;  // where the worst (or first) error is, or why the shapes differ
};

// Compares a kernel's output with the reference's by the op's rule (docs/ops.md): bit-exact for
// kv_quant_insert, gather_kcache, combine_topk_swa and topk; tolerances for attention, indexer
// and mHC outputs.
CompareReport compareOutputs(const std::string& op, const std::string& outputName, const HostTensor& expected,
                             const HostTensor& actual, const OpAttrs& attrs, const TensorMap& inputs);

// The outputs of `op` to compare (its outputs in OpSignature.h, in/out tensors included).
std::vector<std::string> outputNames(const std::string& op);

// Outputs that docs/ops.md defines on another output of the same op *as the kernel produced it*
// get their expected values from that output instead of from the op's own reference run:
// mhc_fused_post_pre's next-sublayer outputs (layer_input, pre, post, comb) are mhc_pre of the
// op's bf16 residual `x` (§8, "fused and unfused paths agree"). The kernel's `x` may differ
// from the reference's by the allowed ulps, and a collapse near cancellation amplifies such a
// 1-ulp difference far past 2 ulps of layer_input, so comparing those outputs with the fused
// reference tests the wrong thing. Returns the expected tensors to compare instead of the
// reference's (empty for every other op). `inputs` holds the op's inputs for the same tokens as
// `actual`; a missing tensor or a rejected reference run is an error naming it.
Result<TensorMap> expectedFromKernelOutputs(const std::string& op, const OpAttrs& attrs, const TensorMap& inputs,
                                            const TensorMap& actual);

}  // namespace deepinfer::testing
