#include "DiOps.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

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

namespace {

bool attrsLess(const OpAttrs& a, const OpAttrs& b) {
  return std::lexicographical_compare(
      a.all().begin(), a.all().end(), b.all().begin(), b.all().end(), [](const auto& x, const auto& y) {
        return std::tie(x.first, x.second.isInt, x.second.i, x.second.f) <
               std::tie(y.first, y.second.isInt, y.second.i, y.second.f);
      });
}

bool opLess(const SequenceOp& a, const SequenceOp& b) {
  if (a.op != b.op) return a.op < b.op;
  if (attrsLess(a.attrs, b.attrs)) return true;
  if (attrsLess(b.attrs, a.attrs)) return false;
  return a.tensors < b.tensors;
}

}  // namespace

bool DiOps::SequenceOrder::operator()(const OpSequence& a, const OpSequence& b) const {
  if (a.buffers != b.buffers) return a.buffers < b.buffers;
  return std::lexicographical_compare(a.ops.begin(), a.ops.end(), b.ops.begin(), b.ops.end(), opLess);
}

Status DiOps::runSequence(const std::vector<DiOpCall>& calls, void* stream) {
  OpSequence seq;
  std::vector<uint64_t> addrs;  // of each buffer id
  for (const DiOpCall& c : calls) {
    SequenceOp s{c.op, c.attrs, {}};
    for (const auto& [name, t] : c.tensors) {
      int id = 0;
      while (size_t(id) < addrs.size() && (addrs[size_t(id)] != t.addr || seq.buffers[size_t(id)] != t.shape)) ++id;
      if (size_t(id) == addrs.size()) {
        addrs.push_back(t.addr);
        seq.buffers.push_back(t.shape);
      }
      s.tensors[name] = id;
    }
    seq.ops.push_back(std::move(s));
  }
  auto it = fused_.find(seq);
  if (it == fused_.end()) {
    auto f = fuseOpSequence(seq);
    if (!f.ok()) return Error{fmt::format("forward: {}", f.error().message)};
    it = fused_.emplace(seq, std::move(*f)).first;
  }
  for (const SequenceOp& s : it->second.ops) {
    std::map<std::string, DiTensor> tensors;
    for (const auto& [name, id] : s.tensors) tensors[name] = DiTensor{addrs[size_t(id)], seq.buffers[size_t(id)]};
    DI_TRY(run(s.op, s.attrs, tensors, stream));
  }
  return {};
}

}  // namespace deepinfer
