// One kernel launch through the driver (cuLaunchKernelEx), with programmatic stream
// serialization when asked (deepinfer/ProgrammaticLaunch.h decides when). Internal to the runtime:
// Jit and DeviceModule launch through it.
#pragma once
#include <array>
#include <cstdint>

#include "CudaDriver.h"

namespace deepinfer::cuda {

CUresult launchKernel(const Driver& d, CUfunction f, const std::array<uint32_t, 3>& grid,
                      const std::array<uint32_t, 3>& block, uint32_t dynamicSmem, CUstream stream, void** args,
                      bool programmatic);

}  // namespace deepinfer::cuda
