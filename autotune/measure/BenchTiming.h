// Device-time measurement (the workplace's method): warm-up calls, then samples each timed with
// CUDA events around one call on the legacy default stream; before each sample the L2 is flushed
// by reading a buffer of twice its size (a read, not a rewrite: a memset flush leaves the L2 full
// of dirty lines whose write-back the timed kernel would pay, up to its own read bytes for a
// weight-streaming kernel), and a short spin kernel keeps the GPU busy while the
// host enqueues the start event and the launch, so no host latency lands inside the events.
// Median, min and p90 reported.
#pragma once
#include <functional>
#include <vector>

#include "deepinfer/Device.h"
#include "deepinfer/DeviceModule.h"

namespace deepinfer::bench {

// Spin before each sample's start event: longer than the host needs to enqueue the event and a
// plan's launches (parameter packing + cuLaunchKernel per step, ~5-20 us).
inline constexpr double kSampleDelayUs = 40;

struct TimingOptions {
  int warmup = 3;
  int samples = 30;
  std::function<Status(int sample)> beforeSample;  // enqueued before each sample's start event
};

// The standard preparation of a sample: read `flush` (2x the L2; filled once here) with
// di_bench_flush, then run the delay kernel for `delayUs` (kernels/BenchKernels.cu); without
// `kernels`, rewrite `flush` (cuMemsetD8) instead and no delay.
std::function<Status(int)> flushAndDelay(const DeviceBuffer& flush, const DeviceModule* kernels, double delayUs);

struct TimingStats {
  int samples = 0;  // 0: not timed
  double medianUs = 0, minUs = 0, p90Us = 0, maxUs = 0;
};

// Median (mean of the middle two for an even count), min, max and the nearest-rank p90.
TimingStats summarize(std::vector<double> us);

// `launch` enqueues the work on the legacy default stream; its errors end the measurement.
Result<TimingStats> timeOnDevice(const std::function<Status()>& launch, const TimingOptions& o);

}  // namespace deepinfer::bench
