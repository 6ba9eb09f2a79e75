// Running one op on tensors by canonical name: the shared path of `run-op`, the GPU tests and
// the benchmarks. Inputs are checked against the op's signature (presence, dtype), outputs are
// allocated from the kernel family's shapes and poisoned before the launch.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "deepinfer/Jit.h"
#include "deepinfer/OpSignature.h"
#include "deepinfer/TensorView.h"

namespace deepinfer {

// The op's description from its tensors and attributes; errors name the missing or mis-typed
// tensor, or the unknown op/attribute.
Result<OpDesc> describeOp(const std::string& op, const OpAttrs& attrs, const TensorMap& tensors);
// The same from views of device or host memory (only their dtypes and shapes are read).
Result<OpDesc> describeOp(const std::string& op, const OpAttrs& attrs, const TensorViewMap& views);

// The C++ reference on host memory given as views (the CPU backend of the Python package): the
// views pass the checks a kernel launch makes (bindViews on `d`: dtypes, shapes, strides only
// where the kernel takes them), the reference runs on dense copies, and every output, in/out
// tensors included, is written back through its view. On an error nothing is written.
Status runReferenceOnHostViews(const OpDesc& d, const TensorViewMap& hostViews);

struct GpuRunOptions {
  std::optional<KernelConfig> config;   // default: the pass's choice for the target
  uint8_t poisonByte = 0x7F;            // bf16/f32 0x7F7F.. = 3.4e38, i32 0x7F7F7F7F: never valid
  // The stream the plan is launched on (nullptr: the legacy default stream). On a real stream the
  // launches use programmatic dependent launch where ProgrammaticLaunch.h allows.
  void* stream = nullptr;
};

struct GpuRunInfo {
  std::shared_ptr<const LoadedKernel> kernel;
};

// Uploads inputs, poisons outputs, launches the kernel plan, downloads every output into
// `tensors` (in/out tensors are updated in place).
Result<GpuRunInfo> runOpOnGpu(Jit& jit, const std::string& op, const OpAttrs& attrs, const TargetProfile& target,
                              TensorMap& tensors, const GpuRunOptions& opts = {});

}  // namespace deepinfer
