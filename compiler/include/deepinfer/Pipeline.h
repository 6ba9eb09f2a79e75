// The compiler pipeline for one op, from the C++ side (CLI, runtime JIT): build the `di` op in a
// module that carries the target, verify it, run di-specialize-target and di-emit-cuda, and
// return what the passes wrote into the IR (candidates, the config, the CUDA unit, its launch
// plan and workspace). Every call has its own MLIR context and no process-wide state is read
// or written, so pipelines run in parallel. MLIR stays behind this header.
#pragma once
#include <optional>
#include <string>

#include "deepinfer/Specialize.h"

namespace deepinfer {

struct PipelineResult {
  Specialization spec;   // the candidates that fit (di.candidates); chosen = di.config
  ConfigChoice config;   // the config used (di.config: the fixed one, else the default)
  EmittedKernel kernel;  // di.kernel, di.cuda, di.entries, di.launch, di.workspace_bytes
};

// The IR as text after each stage (for `emit`; costs a print per stage).
struct PipelineIr {
  std::string input;        // the op as built
  std::string specialized;  // after di-specialize-target
  std::string emitted;      // after di-emit-cuda: what the JIT reads
};

// `fixedConfig` replaces the default (it must fit the target; a config that breaks the cap is
// an error naming the bytes and the cap).
Result<PipelineResult> runKernelPipeline(const OpDesc& d, const TargetProfile& t,
                                         const std::optional<KernelConfig>& fixedConfig = std::nullopt,
                                         PipelineIr* ir = nullptr);

}  // namespace deepinfer
