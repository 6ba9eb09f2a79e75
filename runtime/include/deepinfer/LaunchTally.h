// What this thread has enqueued on the GPU through the runtime, counted where it is enqueued:
// kernel launches through the driver (the di ops' launch plans, the model kernels, the
// benchmarks' own kernels), cuBLAS GEMM calls (each one or more kernels of cuBLAS's choosing)
// and stream-ordered copies and fills (DeviceCopy.h). Thread-local integers, so counting costs an
// increment; a report takes the difference around a piece of work. Work enqueued under stream
// capture counts too (it becomes the graph's nodes); replaying a graph adds nothing here.
#pragma once
#include <cstdint>

namespace deepinfer {

struct LaunchTally {
  int64_t kernels = 0;      // cuLaunchKernelEx calls
  int64_t cublasCalls = 0;  // cuBLAS GEMM calls
  int64_t memoryOps = 0;    // async copies (host <-> device, device -> device) and memsets
  // Kernel launches, counting each cuBLAS call as one (it may launch more).
  int64_t launches() const { return kernels + cublasCalls; }
  LaunchTally operator-(const LaunchTally& o) const {
    return {kernels - o.kernels, cublasCalls - o.cublasCalls, memoryOps - o.memoryOps};
  }
  LaunchTally& operator+=(const LaunchTally& o) {
    kernels += o.kernels;
    cublasCalls += o.cublasCalls;
    memoryOps += o.memoryOps;
    return *this;
  }
  bool operator==(const LaunchTally& o) const {
    return kernels == o.kernels && cublasCalls == o.cublasCalls && memoryOps == o.memoryOps;
  }
};

// This thread's running counts (from 0 at the thread's start).
LaunchTally& threadLaunchTally();

}  // namespace deepinfer
