// CUDA graphs over the driver API: capture the work a stream receives, instantiate it once, and
// replay it; plus pinned host buffers (the graphs' host-to-device copies must read memory with a
// stable address, which the host refreshes before each replay).
#pragma once
#include <cstddef>
#include <cstdint>

#include "deepinfer/Error.h"

namespace deepinfer {

class DeviceGraph {
 public:
  // What a captured graph holds, by node type (cuBLAS's own kernels included): the work one
  // replay launches.
  struct Nodes {
    int64_t kernels = 0, memcpys = 0, memsets = 0, other = 0;
    // Edges the capture made programmatic (a launch with programmatic stream serialization after
    // a kernel of the same stream, deepinfer/ProgrammaticLaunch.h); every other edge waits for
    // its source node to complete. -1: the driver did not report the edges.
    int64_t programmaticEdges = 0;
  };
  // Starts capturing `stream` (relaxed mode: allocations and module loads may happen meanwhile).
  static Status beginCapture(void* stream);
  // Ends the capture and instantiates the graph; on failure the capture is ended and dropped.
  static Result<DeviceGraph> endCapture(void* stream);
  DeviceGraph() = default;
  DeviceGraph(DeviceGraph&& o) noexcept : exec_(o.exec_), nodes_(o.nodes_) { o.exec_ = nullptr; }
  DeviceGraph& operator=(DeviceGraph&& o) noexcept;
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;
  ~DeviceGraph();
  Status launch(void* stream) const;
  const Nodes& nodes() const { return nodes_; }

 private:
  void* exec_ = nullptr;  // CUgraphExec
  Nodes nodes_;
};

// Page-locked host memory (cuMemAllocHost); owned, movable.
class PinnedBuffer {
 public:
  static Result<PinnedBuffer> alloc(size_t bytes);
  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer&& o) noexcept : p_(o.p_), size_(o.size_) { o.p_ = nullptr; o.size_ = 0; }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();
  void* data() const { return p_; }
  size_t size() const { return size_; }

 private:
  void* p_ = nullptr;
  size_t size_ = 0;
};

}  // namespace deepinfer
