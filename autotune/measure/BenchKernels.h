// The benchmark's own device code (kernels/BenchKernels.cu: the roofline microkernels and the
// delay kernel of the sampling loop), compiled once by NVRTC for the local GPU and loaded.
#pragma once
#include <string_view>

#include "deepinfer/DeviceModule.h"

namespace deepinfer::bench {

// The text of kernels/BenchKernels.cu, embedded at configure time (BenchKernelsSource.cpp.in).
std::string_view benchKernelsSource();

Result<DeviceModule> loadBenchKernels(const Device& dev);

}  // namespace deepinfer::bench
