#include "deepinfer/Device.h"

#include <fmt/format.h>

#include "CudaDriver.h"

namespace deepinfer {

static Result<const cuda::Driver*> drv() { return cuda::driver(); }

#define DI_DRV(d)                     \
  auto d##_r = drv();                 \
  if (!d##_r.ok()) return d##_r.error(); \
  const cuda::Driver& d = **d##_r;

Result<std::shared_ptr<Device>> Device::open(int ordinal) {
  DI_DRV(d);
  auto info = localGpu(ordinal);
  if (!info.ok()) return info.error();
  std::shared_ptr<Device> dev(new Device());
  dev->info_ = info.value();
  CUdevice cd;
  DI_CU(d.cuDeviceGet(&cd, ordinal), fmt::format("cuDeviceGet({})", ordinal));
  dev->dev_ = cd;
  CUcontext ctx;
  DI_CU(d.cuDevicePrimaryCtxRetain(&ctx, cd), "cuDevicePrimaryCtxRetain");
  dev->ctx_ = ctx;
  DI_TRY(dev->use());
  return dev;
}

Device::~Device() {
  auto r = drv();
  if (r.ok() && ctx_) (*r)->cuDevicePrimaryCtxRelease(CUdevice(dev_));
}

Status Device::use() const {
  DI_DRV(d);
  DI_CU(d.cuCtxSetCurrent(static_cast<CUcontext>(ctx_)), "cuCtxSetCurrent");
  return {};
}

Status Device::synchronize() const {
  DI_DRV(d);
  DI_CU(d.cuCtxSynchronize(), "cuCtxSynchronize");
  return {};
}

Result<std::pair<size_t, size_t>> Device::memInfo() const {
  DI_DRV(d);
  size_t free = 0, total = 0;
  DI_CU(d.cuMemGetInfo(&free, &total), "cuMemGetInfo");
  return std::make_pair(free, total);
}

Result<DeviceBuffer> DeviceBuffer::alloc(size_t bytes) {
  DI_DRV(d);
  DeviceBuffer b;
  b.size_ = bytes;
  if (bytes == 0) return b;
  CUdeviceptr p;
  DI_CU(d.cuMemAlloc(&p, bytes), fmt::format("cuMemAlloc({} bytes)", bytes));
  b.addr_ = p;
  return b;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    this->~DeviceBuffer();
    addr_ = o.addr_;
    size_ = o.size_;
    o.addr_ = 0;
    o.size_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (!addr_) return;
  auto r = drv();
  if (r.ok()) (*r)->cuMemFree(CUdeviceptr(addr_));
  addr_ = 0;
}

Result<StreamBuffer> StreamBuffer::alloc(size_t bytes, void* stream) {
  DI_DRV(d);
  StreamBuffer b;
  b.size_ = bytes;
  b.stream_ = stream;
  if (bytes == 0) return b;
  CUdeviceptr p;
  DI_CU(d.cuMemAllocAsync(&p, bytes, static_cast<CUstream>(stream)), fmt::format("cuMemAllocAsync({} bytes)", bytes));
  b.addr_ = p;
  return b;
}

Status StreamBuffer::zero() const {
  if (!addr_) return {};
  DI_DRV(d);
  DI_CU(d.cuMemsetD8Async(CUdeviceptr(addr_), 0, size_, static_cast<CUstream>(stream_)), "cuMemsetD8Async");
  return {};
}

StreamBuffer& StreamBuffer::operator=(StreamBuffer&& o) noexcept {
  if (this != &o) {
    this->~StreamBuffer();
    addr_ = o.addr_;
    size_ = o.size_;
    stream_ = o.stream_;
    o.addr_ = 0;
    o.size_ = 0;
  }
  return *this;
}

StreamBuffer::~StreamBuffer() {
  if (!addr_) return;
  auto r = drv();
  if (r.ok()) (*r)->cuMemFreeAsync(CUdeviceptr(addr_), static_cast<CUstream>(stream_));
  addr_ = 0;
}

static Status checkRange(size_t size, size_t offset, size_t bytes, const char* what) {
  if (offset + bytes > size)
    return Error{fmt::format("{}: range [{}, {}) exceeds the buffer's {} bytes", what, offset, offset + bytes, size)};
  return {};
}

Status DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) const {
  DI_TRY(checkRange(size_, offset, bytes, "upload"));
  if (!bytes) return {};
  DI_DRV(d);
  DI_CU(d.cuMemcpyHtoD(CUdeviceptr(addr_ + offset), src, bytes), fmt::format("upload of {} bytes", bytes));
  return {};
}

Status DeviceBuffer::download(void* dst, size_t bytes, size_t offset) const {
  DI_TRY(checkRange(size_, offset, bytes, "download"));
  if (!bytes) return {};
  DI_DRV(d);
  DI_CU(d.cuMemcpyDtoH(dst, CUdeviceptr(addr_ + offset), bytes), fmt::format("download of {} bytes", bytes));
  return {};
}

Status DeviceBuffer::fill(uint8_t byte) const {
  if (!size_) return {};
  DI_DRV(d);
  DI_CU(d.cuMemsetD8(CUdeviceptr(addr_), byte, size_), "cuMemsetD8");
  return {};
}

Status DeviceBuffer::fill32(uint32_t word) const {
  if (!size_) return {};
  if (size_ % 4) return Error{fmt::format("fill32 on a buffer of {} bytes (not a multiple of 4)", size_)};
  DI_DRV(d);
  DI_CU(d.cuMemsetD32(CUdeviceptr(addr_), word, size_ / 4), "cuMemsetD32");
  return {};
}

Result<Stream> Stream::create() {
  DI_DRV(d);
  Stream s;
  CUstream cs;
  DI_CU(d.cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  s.s_ = cs;
  return s;
}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    this->~Stream();
    s_ = o.s_;
    o.s_ = nullptr;
  }
  return *this;
}

Stream::~Stream() {
  if (!s_) return;
  auto r = drv();
  if (r.ok()) (*r)->cuStreamDestroy(static_cast<CUstream>(s_));
  s_ = nullptr;
}

Status Stream::synchronize() const {
  DI_DRV(d);
  DI_CU(d.cuStreamSynchronize(static_cast<CUstream>(s_)), "cuStreamSynchronize");
  return {};
}

Result<Event> Event::create() {
  DI_DRV(d);
  Event e;
  CUevent ce;
  DI_CU(d.cuEventCreate(&ce, CU_EVENT_DEFAULT), "cuEventCreate");
  e.e_ = ce;
  return e;
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    this->~Event();
    e_ = o.e_;
    o.e_ = nullptr;
  }
  return *this;
}

Event::~Event() {
  if (!e_) return;
  auto r = drv();
  if (r.ok()) (*r)->cuEventDestroy(static_cast<CUevent>(e_));
  e_ = nullptr;
}

Status Event::record(void* stream) const {
  DI_DRV(d);
  DI_CU(d.cuEventRecord(static_cast<CUevent>(e_), static_cast<CUstream>(stream)), "cuEventRecord");
  return {};
}

Status Event::waitIn(void* stream) const {
  DI_DRV(d);
  DI_CU(d.cuStreamWaitEvent(static_cast<CUstream>(stream), static_cast<CUevent>(e_), 0), "cuStreamWaitEvent");
  return {};
}

Status Event::synchronize() const {
  DI_DRV(d);
  DI_CU(d.cuEventSynchronize(static_cast<CUevent>(e_)), "cuEventSynchronize");
  return {};
}

Result<float> Event::elapsedSince(const Event& start) const {
  DI_DRV(d);
  float ms = 0;
  DI_CU(d.cuEventElapsedTime(&ms, static_cast<CUevent>(start.e_), static_cast<CUevent>(e_)),
        "cuEventElapsedTime");
  return ms;
}

}  // namespace deepinfer
