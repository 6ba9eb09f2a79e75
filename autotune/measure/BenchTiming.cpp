#include "BenchTiming.h"

#include <algorithm>
#include <cmath>

#include "deepinfer/KernelFamily.h"

namespace deepinfer::bench {

TimingStats summarize(std::vector<double> us) {
  TimingStats s;
  if (us.empty()) return s;
  std::sort(us.begin(), us.end());
  const size_t n = us.size();
  s.samples = int(n);
  s.minUs = us.front();
  s.maxUs = us.back();
  s.medianUs = n % 2 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
  const size_t rank = size_t(std::ceil(0.9 * double(n)));  // nearest rank, 1-based
  s.p90Us = us[std::max<size_t>(rank, 1) - 1];
  return s;
}

std::function<Status(int)> flushAndDelay(const DeviceBuffer& flush, const DeviceModule* kernels, double delayUs) {
  struct DelayParams {  // DiBenchDelayParams
    uint64_t nanoseconds;
  };
  struct FlushParams {  // DiBenchFlushParams
    uint64_t buf, vectors;
  };
  const std::vector<uint8_t> delay = paramBytes(DelayParams{uint64_t(delayUs * 1e3)});
  const std::vector<uint8_t> read = paramBytes(FlushParams{flush.addr(), uint64_t(flush.size() / 16)});
  // The read flush needs the buffer filled once (every byte equal); without the benchmark
  // kernels, each sample rewrites it instead.
  const Status filled = kernels ? flush.fill(uint8_t(0x5A)) : Status{};
  return [&flush, kernels, delay, read, filled](int sample) -> Status {
    if (!kernels) return flush.fill(uint8_t(0x5A + sample));
    if (!filled.ok()) return filled;
    DI_TRY(kernels->launch("di_bench_flush", {1024, 1, 1}, {256, 1, 1}, 0, read, nullptr));
    return kernels->launch("di_bench_delay", {1, 1, 1}, {32, 1, 1}, 0, delay, nullptr);
  };
}

Result<TimingStats> timeOnDevice(const std::function<Status()>& launch, const TimingOptions& o) {
  auto start = Event::create();
  if (!start.ok()) return start.error();
  auto stop = Event::create();
  if (!stop.ok()) return stop.error();
  for (int i = 0; i < o.warmup; ++i) DI_TRY(launch());
  std::vector<double> us;
  for (int i = 0; i < o.samples; ++i) {
    if (o.beforeSample) DI_TRY(o.beforeSample(i));
    DI_TRY(start->record(nullptr));
    DI_TRY(launch());
    DI_TRY(stop->record(nullptr));
    DI_TRY(stop->synchronize());
    auto ms = stop->elapsedSince(*start);
    if (!ms.ok()) return ms.error();
    us.push_back(double(*ms) * 1e3);
  }
  return summarize(std::move(us));
}

}  // namespace deepinfer::bench
