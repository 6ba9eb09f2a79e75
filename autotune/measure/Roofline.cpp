#include "Roofline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "deepinfer/KernelFamily.h"

namespace deepinfer::bench {
namespace {

// Mirrors of the structs in kernels/BenchKernels.cu.
struct CopyParams {
  uint64_t src, dst, vectors;
};
struct MmaParams {
  uint64_t out;
  int32_t iterations;
  uint32_t seed;
};

constexpr int kThreads = 256;
constexpr int kMmaChains = 8;  // kDiBenchMmaChains in kernels/BenchKernels.cu
constexpr int kMmaIterations = 4096;
constexpr double kFlopsPerMma = 2.0 * 16 * 8 * 16;
constexpr uint32_t kCopyPattern = 0x3C5A96E1u;

Status measureCopy(const Device& dev, const DeviceModule& mod, int samples, Ceilings& c) {
  const TargetProfile& t = dev.info().profile;
  // Far larger than the L2, so the copy streams from and to device memory.
  int64_t bytes = std::max<int64_t>(int64_t(512) << 20, 8 * t.l2Bytes);
  auto mem = dev.memInfo();
  if (!mem.ok()) return mem.error();
  bytes = std::min<int64_t>(bytes, int64_t(mem->first / 4)) / 16 * 16;
  auto src = DeviceBuffer::alloc(size_t(bytes));
  if (!src.ok()) return src.error();
  auto dst = DeviceBuffer::alloc(size_t(bytes));
  if (!dst.ok()) return dst.error();
  DI_TRY(src->fill32(kCopyPattern));
  DI_TRY(dst->fill(0));
  const CopyParams p{src->addr(), dst->addr(), uint64_t(bytes / 16)};
  const auto params = paramBytes(p);
  const uint32_t grid = uint32_t(std::max(1, t.smCount) * 8);
  auto launch = [&] { return mod.launch("di_bench_copy", {grid, 1, 1}, {kThreads, 1, 1}, 0, params, nullptr); };
  auto timing = timeOnDevice(launch, TimingOptions{2, samples, nullptr});
  if (!timing.ok()) return timing.error();
  // The copy must have happened: the last vector holds the pattern.
  uint32_t tail[4] = {};
  DI_TRY(dst->download(tail, 16, size_t(bytes) - 16));
  for (uint32_t w : tail)
    if (w != kCopyPattern)
      return Error{fmt::format("the copy microkernel did not copy: read 0x{:08X}, expected 0x{:08X}", w, kCopyPattern)};
  c.copyBytes = bytes;
  c.copyTiming = *timing;
  c.copyGBs = 2.0 * double(bytes) / (timing->medianUs * 1e3);
  return {};
}

Status measureMma(const Device& dev, const DeviceModule& mod, int samples, Ceilings& c) {
  const TargetProfile& t = dev.info().profile;
  const uint32_t grid = uint32_t(std::max(1, t.smCount) * 4);
  const size_t threads = size_t(grid) * kThreads;
  auto out = DeviceBuffer::alloc(threads * 4);
  if (!out.ok()) return out.error();
  DI_TRY(out->fill(0x7F));
  const MmaParams p{out->addr(), kMmaIterations, 0x2545F491u};
  const auto params = paramBytes(p);
  auto launch = [&] { return mod.launch("di_bench_mma", {grid, 1, 1}, {kThreads, 1, 1}, 0, params, nullptr); };
  auto timing = timeOnDevice(launch, TimingOptions{2, samples, nullptr});
  if (!timing.ok()) return timing.error();
  std::vector<float> sums(threads);
  DI_TRY(out->download(sums.data(), threads * 4));
  for (float s : sums)
    if (!std::isfinite(s) || s == 0.f || std::fabs(s) > 1e30f)
      return Error{fmt::format("the mma microkernel wrote {} (expected finite non-zero sums)", s)};
  c.mmaFlops = double(threads / 32) * kMmaIterations * kMmaChains * kFlopsPerMma;
  c.mmaTiming = *timing;
  c.mmaTflops = c.mmaFlops / (timing->medianUs * 1e6);
  return {};
}

}  // namespace

Ceilings measureCeilings(const Device& dev, const DeviceModule* kernels, const std::string& unavailable,
                         int samples) {
  Ceilings c;
  if (!kernels) {
    c.copyError = c.mmaError = unavailable;
    return c;
  }
  if (Status s = measureCopy(dev, *kernels, samples, c); !s.ok()) c.copyError = s.error().message;
  if (Status s = measureMma(dev, *kernels, samples, c); !s.ok()) c.mmaError = s.error().message;
  return c;
}

RooflineFloor rooflineFloor(const Ceilings& c, double bytes, double flops) {
  RooflineFloor f;
  if (c.copyGBs > 0 && bytes > 0) f.copyUs = bytes / (c.copyGBs * 1e3);
  if (c.mmaTflops > 0 && flops > 0) f.mmaUs = flops / (c.mmaTflops * 1e6);
  return f;
}

const char* boundName(RooflineFloor::Bound b) {
  return b == RooflineFloor::Bound::Copy ? "copy" : b == RooflineFloor::Bound::Mma ? "mma" : "";
}

double rooflineFloorUs(const Ceilings& c, double bytes, double flops) { return rooflineFloor(c, bytes, flops).us(); }

}  // namespace deepinfer::bench
