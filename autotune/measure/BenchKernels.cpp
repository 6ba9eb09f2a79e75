#include "BenchKernels.h"

#include <fmt/format.h>

#include "deepinfer/KernelFamily.h"
#include "deepinfer/Nvrtc.h"

namespace deepinfer::bench {

Result<DeviceModule> loadBenchKernels(const Device& dev) {
  const int arch = dev.info().profile.arch();
  CudaUnit unit{std::string(benchKernelsSource()), {"di_bench_copy", "di_bench_mma", "di_bench_flush", "di_bench_delay"}};
  auto compiled = compileUnit(unit, "di_bench_kernels.cu", arch, /*cubin=*/true);
  if (!compiled.ok()) return compiled.error();
  return DeviceModule::load(dev, compiled->cubin.data(), fmt::format("di_bench_kernels (sm_{})", arch));
}

}  // namespace deepinfer::bench
