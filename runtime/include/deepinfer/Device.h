// Device, memory, streams and events over the CUDA driver API (no runtime API, no cuda.h in
// this header). Errors are values carrying the CUDA error name and what was being done.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/Error.h"
#include "deepinfer/LocalGpu.h"

namespace deepinfer {

// The primary context of one GPU, made current on the calling thread by `use()`.
class Device {
 public:
  static Result<std::shared_ptr<Device>> open(int ordinal = 0);
  ~Device();
  Status use() const;           // make the primary context current on this thread
  Status synchronize() const;
  const LocalGpuInfo& info() const { return info_; }
  int ordinal() const { return info_.ordinal; }
  // Free and total device memory in bytes.
  Result<std::pair<size_t, size_t>> memInfo() const;
  void* context() const { return ctx_; }  // CUcontext (the primary context)

 private:
  Device() = default;
  LocalGpuInfo info_;
  void* ctx_ = nullptr;  // CUcontext
  int dev_ = 0;          // CUdevice
};

// Owned device memory (cuMemAlloc); movable, freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> alloc(size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  uint64_t addr() const { return addr_; }
  size_t size() const { return size_; }
  Status upload(const void* src, size_t bytes, size_t offset = 0) const;
  Status download(void* dst, size_t bytes, size_t offset = 0) const;
  Status fill(uint8_t byte) const;           // e.g. poison before a launch
  Status fill32(uint32_t word) const;        // size must be a multiple of 4

 private:
  uint64_t addr_ = 0;
  size_t size_ = 0;
};

// Device memory allocated and freed in stream order (cuMemAllocAsync / cuMemFreeAsync from the
// device's default pool): work enqueued on `stream` after alloc may use it, and it returns to the
// pool once that work is done, with no device-wide synchronization. For the scratch of one launch
// on a caller's stream (any stream, also during a stream capture).
class StreamBuffer {
 public:
  StreamBuffer() = default;
  static Result<StreamBuffer> alloc(size_t bytes, void* stream);
  StreamBuffer(StreamBuffer&& o) noexcept { *this = std::move(o); }
  StreamBuffer& operator=(StreamBuffer&& o) noexcept;
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  ~StreamBuffer();  // frees on the stream it was allocated on
  uint64_t addr() const { return addr_; }
  size_t size() const { return size_; }
  Status zero() const;  // in stream order (a kernel's "__zeroed" workspace)

 private:
  uint64_t addr_ = 0;
  size_t size_ = 0;
  void* stream_ = nullptr;
};

class Stream {
 public:
  static Result<Stream> create();
  Stream() = default;
  Stream(Stream&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stream& operator=(Stream&& o) noexcept;
  ~Stream();
  void* handle() const { return s_; }    // CUstream (nullptr = the legacy default stream)
  Status synchronize() const;

 private:
  void* s_ = nullptr;
};

class Event {
 public:
  static Result<Event> create();
  Event() = default;
  Event(Event&& o) noexcept : e_(o.e_) { o.e_ = nullptr; }
  Event& operator=(Event&& o) noexcept;
  ~Event();
  Status record(void* stream) const;
  Status synchronize() const;
  // Work enqueued on `stream` after this call waits for the event's last record (any device).
  Status waitIn(void* stream) const;
  // Milliseconds from `start` to this event (both recorded and complete).
  Result<float> elapsedSince(const Event& start) const;

 private:
  void* e_ = nullptr;
};

}  // namespace deepinfer
