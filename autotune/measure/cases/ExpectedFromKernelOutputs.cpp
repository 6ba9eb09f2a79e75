// expectedFromKernelOutputs (OpCases.h): outputs whose expected values depend on another output
// of the kernel, not of the reference.
#include <fmt/format.h>

#include "cases/CompareOutputs.h"
#include "deepinfer/Reference.h"

namespace deepinfer::testing {

Result<TensorMap> expectedFromKernelOutputs(const std::string& op, const OpAttrs& attrs, const TensorMap& inputs,
                                            const TensorMap& actual) {
  if (op != "mhc_fused_post_pre") return TensorMap{};
  // The fused op is mhc_post then mhc_pre; the pre half reads the residual the op outputs.
  TensorMap pre;
  auto x = actual.find("x");
  if (x == actual.end()) return Error{fmt::format("{}: the kernel's outputs have no residual `x`", op)};
  pre["x"] = x->second;
  for (const char* name : {"fn", "scale", "base", "pre_in", "norm_weight"}) {
    auto it = inputs.find(name);
    if (it == inputs.end()) return Error{fmt::format("{}: input `{}` missing for the mhc_pre reference", op, name)};
    pre[name] = it->second;
  }
  Status s = runReference("mhc_pre", attrs, pre);
  if (!s.ok())
    return Error{fmt::format("{}: mhc_pre reference on the kernel's residual failed: {}", op, s.error().message)};
  TensorMap out;
  for (const char* name : {"layer_input", "pre", "post", "comb"}) out[name] = std::move(pre.at(name));
  return out;
}

}  // namespace deepinfer::testing
