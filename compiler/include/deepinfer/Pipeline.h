// The compiler pipeline for one op, from the C++ side (CLI, runtime JIT): build the `di` op,
// verify it, run di-specialize-target and di-emit-cuda, and return the IR after each stage
// with the emitted kernel. MLIR stays behind this header.
#pragma once
#include <optional>
#include <string>

#include "deepinfer/Specialize.h"

namespace deepinfer {

struct PipelineResult {
  std::string irInput;        // the op as built
  std::string irSpecialized;  // after di-specialize-target
  std::string irEmitted;      // after di-emit-cuda
  Specialization spec;        // candidates that fit, and the default
  ConfigChoice config;        // the config used (fixed or default)
  EmittedKernel kernel;
};

// `fixedConfig` replaces the default (it must fit the target; a config that breaks the cap is
// an error naming the bytes and the cap).
Result<PipelineResult> runKernelPipeline(const OpDesc& d, const TargetProfile& t,
                                         const std::optional<KernelConfig>& fixedConfig = std::nullopt);

// The op as `di` dialect text inside a function (what `emit --stage mlir` starts from).
std::string opToMlir(const OpDesc& d);

}  // namespace deepinfer
