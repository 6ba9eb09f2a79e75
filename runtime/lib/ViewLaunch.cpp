#include "deepinfer/ViewLaunch.h"

#include <fmt/format.h>

#include "deepinfer/OpSignature.h"

namespace deepinfer {
namespace {

const TensorSig* findTensor(const OpSignature& sig, const std::string& name) {
  for (const auto& t : sig.inputs)
    if (t.name == name) return &t;
  for (const auto& t : sig.outputs)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace

Result<ViewBindings> bindViews(const LoadedKernel& k, const TensorViewMap& views) {
  return bindViews(k.desc, views, k.kernel.workspaceBytes, k.kernel.zeroedBytes);
}

Result<ViewBindings> bindViews(const OpDesc& desc, const TensorViewMap& views, int64_t workspaceBytes,
                               int64_t zeroedBytes) {
  const std::string& op = desc.op;
  const OpSignature* sig = findOpSignature(op);
  const KernelFamily* fam = findKernelFamily(op);
  if (!sig || !fam) return Error{fmt::format("no kernel op '{}'", op)};
  // Every tensor the kernel touches: the inputs of its description and the outputs the family
  // derives from them (in/out tensors are in both, with one shape).
  std::map<std::string, std::vector<int64_t>> expected = desc.shapes;
  std::map<std::string, DType> outputDtype;  // an output's dtype may depend on attributes (epilogues)
  for (const auto& [name, o] : fam->outputs(desc)) {
    expected[name] = o.second;
    outputDtype[name] = o.first;
  }
  ViewBindings b;
  for (const auto& [name, v] : views) {
    if (v.shape.size() != v.strides.size())
      return Error{fmt::format("{}: view '{}' has shape {} but strides {}", op, name, dimsString(v.shape),
                               dimsString(v.strides))};
    if (auto s = v.checkBounds(); !s.ok()) return Error{fmt::format("{}: view '{}': {}", op, name, s.error().message)};
    if (name == "__workspace" || name == "__zeroed") {
      const int64_t need = name == "__workspace" ? workspaceBytes : zeroedBytes;
      if (v.dtype != DType::U8 || v.rank() != 1 || !v.isContiguous() || v.shape[0] < need)
        return Error{fmt::format("{}: '{}' must be a dense U8 view of at least {} bytes; got {}", op, name, need,
                                 v.toString())};
      b.addrs[name] = v.addr;
      continue;
    }
    const TensorSig* ts = findTensor(*sig, name);
    if (!ts) return Error{fmt::format("{}: the op has no tensor '{}'", op, name)};
    auto shape = expected.find(name);
    if (shape == expected.end())
      return Error{fmt::format("{}: tensor '{}' is not part of the kernel's description (an optional tensor the "
                               "kernel was built without)", op, name)};
    const DType want = outputDtype.count(name) ? outputDtype.at(name) : ts->dtype;
    if (v.dtype != want)
      return Error{fmt::format("{}: tensor '{}' is {}, expected {}", op, name, dtypeName(v.dtype), dtypeName(want))};
    if (v.shape != shape->second)
      return Error{fmt::format("{}: tensor '{}' has shape {}, the kernel was built for {}", op, name,
                               dimsString(v.shape), dimsString(shape->second))};
    if (!v.isContiguous()) {
      if (!v.isNonOverlapping())
        return Error{fmt::format("{}: tensor '{}' with shape {} and strides {} has overlapping elements", op, name,
                                 dimsString(v.shape), dimsString(v.strides))};
      if (auto s = fam->checkStrides(desc, name, v.strides); !s.ok())
        return Error{fmt::format("tensor '{}' is not contiguous (shape {}, strides {}): {}", name,
                                 dimsString(v.shape), dimsString(v.strides), s.error().message)};
      b.strides[name] = v.strides;
    }
    b.addrs[name] = v.addr;
  }
  for (const auto& [name, shape] : expected)
    if (!views.count(name)) return Error{fmt::format("{}: no view given for tensor '{}'", op, name)};
  if (workspaceBytes > 0 && !views.count("__workspace"))
    return Error{fmt::format("{}: the kernel needs a {} byte workspace (\"__workspace\")", op, workspaceBytes)};
  if (zeroedBytes > 0 && !views.count("__zeroed"))
    return Error{fmt::format("{}: the kernel needs a {} byte workspace that is zero on entry (\"__zeroed\")", op,
                             zeroedBytes)};
  return b;
}

Status launchViews(const Jit& jit, const LoadedKernel& k, const TensorViewMap& views, void* stream) {
  auto b = bindViews(k, views);
  if (!b.ok()) return b.error();
  const KernelFamily* fam = findKernelFamily(k.desc.op);
  auto params = fam->packStridedParams(k.config.config, k.desc, b->addrs, b->strides);
  if (!params.ok()) return params.error();
  return jit.launchPacked(k, *params, stream);
}

}  // namespace deepinfer
