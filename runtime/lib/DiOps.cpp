#include "DiOps.h"

#include <fmt/format.h>

#include "CudaDriver.h"
#include "deepinfer/KernelFamily.h"
#include "deepinfer/OpSignature.h"

namespace deepinfer {

Status DiOps::run(const std::string& op, const OpAttrs& attrs, const std::map<std::string, DiTensor>& tensors,
                  void* stream) {
  const OpSignature* sig = findOpSignature(op);
  const KernelFamily* fam = findKernelFamily(op);
  if (!sig || !fam) return Error{fmt::format("forward: unknown op '{}'", op)};
  OpDesc d;
  d.op = op;
  for (const auto& in : sig->inputs) {
    auto it = tensors.find(in.name);
    if (it == tensors.end()) {
      if (in.optional) continue;
      return Error{fmt::format("forward: {} needs tensor '{}'", op, in.name)};
    }
    d.shapes[in.name] = it->second.shape;
  }
  auto full = completeAttrs(*sig, attrs);
  if (!full.ok()) return full.error();
  d.attrs = *full;
  auto k = jit_.get(d, target_);
  if (!k.ok()) return Error{fmt::format("forward: {}: {}", op, k.error().message)};
  DeviceAddrMap addrs;
  for (const auto& [name, t] : tensors) addrs[name] = t.addr;
  for (const auto& out : sig->outputs)
    if (!addrs.count(out.name)) return Error{fmt::format("forward: {} needs output '{}'", op, out.name)};
  const int64_t ws = (*k)->kernel.workspaceBytes;
  if (ws > 0) {
    if (int64_t(workspace_.size()) < ws) {
      workspace_ = DeviceBuffer();
      auto b = DeviceBuffer::alloc(size_t(ws));
      if (!b.ok()) return b.error();
      workspace_ = std::move(*b);
      ++workspaceGen_;
    }
    addrs["__workspace"] = workspace_.addr();
  }
  const int64_t zb = (*k)->kernel.zeroedBytes;
  if (zb > 0) {
    if (int64_t(zeroed_.size()) < zb) {
      zeroed_ = DeviceBuffer();
      auto b = DeviceBuffer::alloc(size_t(zb));
      if (!b.ok()) return b.error();
      // Zeroed in the op's stream order (a fill on the legacy stream would not be ordered before a
      // kernel on a non-blocking stream). A one-time initialization, like the allocation: not
      // counted as a memory op of the call (LaunchTally), so the counts of a step do not depend
      // on whether this instance had sized its buffers before.
      auto d = cuda::driver();
      if (!d.ok()) return d.error();
      DI_CU((*d)->cuMemsetD8Async(CUdeviceptr(b->addr()), 0, b->size(), static_cast<CUstream>(stream)),
            fmt::format("zeroing the {} byte zeroed workspace", zb));
      zeroed_ = std::move(*b);
      ++workspaceGen_;
    }
    addrs["__zeroed"] = zeroed_.addr();
  }
  Status st = jit_.launch(**k, addrs, stream);
  if (!st.ok()) return Error{fmt::format("forward: {}: {}", op, st.error().message)};
  return {};
}

}  // namespace deepinfer
