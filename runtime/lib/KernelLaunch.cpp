#include "KernelLaunch.h"

namespace deepinfer::cuda {

CUresult launchKernel(const Driver& d, CUfunction f, const std::array<uint32_t, 3>& grid,
                      const std::array<uint32_t, 3>& block, uint32_t dynamicSmem, CUstream stream, void** args,
                      bool programmatic) {
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg{};
  cfg.gridDimX = grid[0];
  cfg.gridDimY = grid[1];
  cfg.gridDimZ = grid[2];
  cfg.blockDimX = block[0];
  cfg.blockDimY = block[1];
  cfg.blockDimZ = block[2];
  cfg.sharedMemBytes = dynamicSmem;
  cfg.hStream = stream;
  cfg.attrs = programmatic ? &attr : nullptr;
  cfg.numAttrs = programmatic ? 1 : 0;
  return d.cuLaunchKernelEx(&cfg, f, args, nullptr);
}

}  // namespace deepinfer::cuda
