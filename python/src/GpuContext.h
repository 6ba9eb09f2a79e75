// The GPUs the package launches on: one Device (the primary context, shared with torch and CuPy)
// and one Jit (kernels compiled once per process, through the on-disk kernel cache) per ordinal,
// opened on first use and kept for the life of the process.
#pragma once
#include <memory>
#include <string>

#include "deepinfer/Jit.h"

namespace deepinfer::py {

struct GpuContext {
  std::shared_ptr<Device> dev;
  std::unique_ptr<Jit> jit;
};

// The context of GPU `ordinal`; the error says why there is none (no driver, no such device).
Result<GpuContext*> gpuContext(int ordinal);

// A target by name for a launch on `dev`: "" / "local" / "auto" = the GPU's own arch (cubin),
// a preset or "sm_XX" = that specialization (PTX when it is not the GPU's arch). A target newer
// than the GPU is refused.
Result<TargetProfile> launchTarget(const Device& dev, const std::string& name);

}  // namespace deepinfer::py
