#include "deepinfer/DeviceGraph.h"

#include <fmt/format.h>

#include <vector>

#include "CudaDriver.h"

namespace deepinfer {

Status DeviceGraph::beginCapture(void* stream) {
  auto d = cuda::driver();
  if (!d.ok()) return d.error();
  DI_CU((*d)->cuStreamBeginCapture(static_cast<CUstream>(stream), CU_STREAM_CAPTURE_MODE_RELAXED),
        "beginning a stream capture");
  return {};
}

Result<DeviceGraph> DeviceGraph::endCapture(void* stream) {
  auto d = cuda::driver();
  if (!d.ok()) return d.error();
  CUgraph graph = nullptr;
  DI_CU((*d)->cuStreamEndCapture(static_cast<CUstream>(stream), &graph), "ending a stream capture");
  DeviceGraph g;
  size_t n = 0;
  CUresult rc = (*d)->cuGraphGetNodes(graph, nullptr, &n);
  std::vector<CUgraphNode> nodes(n);
  if (rc == CUDA_SUCCESS && n > 0) rc = (*d)->cuGraphGetNodes(graph, nodes.data(), &n);
  for (size_t i = 0; i < n && rc == CUDA_SUCCESS; ++i) {
    CUgraphNodeType type;
    rc = (*d)->cuGraphNodeGetType(nodes[i], &type);
    if (rc != CUDA_SUCCESS) break;
    int64_t& count = type == CU_GRAPH_NODE_TYPE_KERNEL   ? g.nodes_.kernels
                     : type == CU_GRAPH_NODE_TYPE_MEMCPY ? g.nodes_.memcpys
                     : type == CU_GRAPH_NODE_TYPE_MEMSET ? g.nodes_.memsets
                                                         : g.nodes_.other;
    ++count;
  }
  // Edges are counted for reports only: a query the driver refuses leaves the count at -1.
  size_t edges = 0;
  CUresult erc = (*d)->cuGraphGetEdges(graph, nullptr, nullptr, nullptr, &edges);
  if (erc == CUDA_SUCCESS && edges > 0) {
    std::vector<CUgraphNode> from(edges), to(edges);
    std::vector<CUgraphEdgeData> data(edges);
    erc = (*d)->cuGraphGetEdges(graph, from.data(), to.data(), data.data(), &edges);
    for (size_t i = 0; i < edges && erc == CUDA_SUCCESS; ++i)
      g.nodes_.programmaticEdges += data[i].type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
  }
  if (erc != CUDA_SUCCESS) g.nodes_.programmaticEdges = -1;
  if (rc != CUDA_SUCCESS) {
    (*d)->cuGraphDestroy(graph);
    return cuda::cudaError(rc, "counting a captured graph's nodes");
  }
  CUgraphExec exec = nullptr;
  rc = (*d)->cuGraphInstantiate(&exec, graph, 0);
  (*d)->cuGraphDestroy(graph);
  if (rc != CUDA_SUCCESS) return cuda::cudaError(rc, "instantiating a captured graph");
  g.exec_ = exec;
  return g;
}

DeviceGraph& DeviceGraph::operator=(DeviceGraph&& o) noexcept {
  if (this != &o) {
    this->~DeviceGraph();
    exec_ = o.exec_;
    nodes_ = o.nodes_;
    o.exec_ = nullptr;
  }
  return *this;
}

DeviceGraph::~DeviceGraph() {
  if (!exec_) return;
  auto d = cuda::driver();
  if (d.ok()) (*d)->cuGraphExecDestroy(static_cast<CUgraphExec>(exec_));
  exec_ = nullptr;
}

Status DeviceGraph::launch(void* stream) const {
  if (!exec_) return Error{"launching an empty graph"};
  auto d = cuda::driver();
  if (!d.ok()) return d.error();
  DI_CU((*d)->cuGraphLaunch(static_cast<CUgraphExec>(exec_), static_cast<CUstream>(stream)), "launching a graph");
  return {};
}

Result<PinnedBuffer> PinnedBuffer::alloc(size_t bytes) {
  auto d = cuda::driver();
  if (!d.ok()) return d.error();
  PinnedBuffer b;
  DI_CU((*d)->cuMemAllocHost(&b.p_, bytes), fmt::format("allocating {} bytes of pinned host memory", bytes));
  b.size_ = bytes;
  return b;
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    this->~PinnedBuffer();
    p_ = o.p_;
    size_ = o.size_;
    o.p_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (!p_) return;
  auto d = cuda::driver();
  if (d.ok()) (*d)->cuMemFreeHost(p_);
  p_ = nullptr;
}

}  // namespace deepinfer
