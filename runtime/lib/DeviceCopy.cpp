#include "deepinfer/DeviceCopy.h"

#include <fmt/format.h>

#include "CudaDriver.h"
#include "deepinfer/LaunchTally.h"

namespace deepinfer {

Status copyHostToDevice(uint64_t dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return {};
  auto d = cuda::driver();
  if (!d.ok()) return d.error();
  DI_CU((*d)->cuMemcpyHtoDAsync(CUdeviceptr(dst), src, bytes, static_cast<CUstream>(stream)),
        fmt::format("copying {} bytes host -> device 0x{:x}", bytes, dst));
  ++threadLaunchTally().memoryOps;
  return {};
}

Status copyDeviceToHost(void* dst, uint64_t src, size_t bytes, void* stream) {
  if (bytes == 0) return {};
  auto d = cuda::driver();
  if (!d.ok()) return d.error();
  DI_CU((*d)->cuMemcpyDtoHAsync(dst, CUdeviceptr(src), bytes, static_cast<CUstream>(stream)),
        fmt::format("copying {} bytes device 0x{:x} -> host", bytes, src));
  ++threadLaunchTally().memoryOps;
  DI_CU((*d)->cuStreamSynchronize(static_cast<CUstream>(stream)), "waiting for a device -> host copy");
  return {};
}

Status copyDeviceToDevice(uint64_t dst, uint64_t src, size_t bytes, void* stream) {
  if (bytes == 0) return {};
  auto d = cuda::driver();
  if (!d.ok()) return d.error();
  DI_CU((*d)->cuMemcpyDtoDAsync(CUdeviceptr(dst), CUdeviceptr(src), bytes, static_cast<CUstream>(stream)),
        fmt::format("copying {} bytes device 0x{:x} -> 0x{:x}", bytes, src, dst));
  ++threadLaunchTally().memoryOps;
  return {};
}

Status copyBetweenDevices(uint64_t dst, const Device& dstDev, uint64_t src, const Device& srcDev, size_t bytes,
                          void* stream) {
  if (dstDev.ordinal() == srcDev.ordinal()) return copyDeviceToDevice(dst, src, bytes, stream);
  if (bytes == 0) return {};
  auto d = cuda::driver();
  if (!d.ok()) return d.error();
  DI_CU((*d)->cuMemcpyPeerAsync(CUdeviceptr(dst), static_cast<CUcontext>(dstDev.context()), CUdeviceptr(src),
                                static_cast<CUcontext>(srcDev.context()), bytes, static_cast<CUstream>(stream)),
        fmt::format("copying {} bytes GPU {} 0x{:x} -> GPU {} 0x{:x}", bytes, srcDev.ordinal(), src, dstDev.ordinal(),
                    dst));
  ++threadLaunchTally().memoryOps;
  return {};
}

Status copyDevice2D(uint64_t dst, size_t dstPitch, uint64_t src, size_t srcPitch, size_t widthBytes, size_t rows,
                    void* stream) {
  if (widthBytes == 0 || rows == 0) return {};
  if (dstPitch < widthBytes || srcPitch < widthBytes)
    return Error{fmt::format("2D copy of {} rows x {} bytes: pitches {} (destination) and {} (source) must be at "
                             "least the row width", rows, widthBytes, dstPitch, srcPitch)};
  auto d = cuda::driver();
  if (!d.ok()) return d.error();
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = CUdeviceptr(src);
  c.srcPitch = srcPitch;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = CUdeviceptr(dst);
  c.dstPitch = dstPitch;
  c.WidthInBytes = widthBytes;
  c.Height = rows;
  DI_CU((*d)->cuMemcpy2DAsync(&c, static_cast<CUstream>(stream)),
        fmt::format("copying {} rows x {} bytes device 0x{:x} (pitch {}) -> 0x{:x} (pitch {})", rows, widthBytes, src,
                    srcPitch, dst, dstPitch));
  ++threadLaunchTally().memoryOps;
  return {};
}

Status fillDevice8(uint64_t dst, uint8_t value, size_t bytes, void* stream) {
  if (bytes == 0) return {};
  auto d = cuda::driver();
  if (!d.ok()) return d.error();
  DI_CU((*d)->cuMemsetD8Async(CUdeviceptr(dst), value, bytes, static_cast<CUstream>(stream)),
        fmt::format("filling {} bytes at 0x{:x}", bytes, dst));
  ++threadLaunchTally().memoryOps;
  return {};
}

}  // namespace deepinfer
