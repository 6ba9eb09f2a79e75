#include "deepinfer/OpRunner.h"

#include <fmt/format.h>

namespace deepinfer {

Result<OpDesc> describeOp(const std::string& op, const OpAttrs& attrs, const TensorMap& tensors) {
  const OpSignature* sig = findOpSignature(op);
  if (!sig) {
    std::string names;
    for (const auto& s : opSignatures()) names += (names.empty() ? "" : ", ") + s.op;
    return Error{fmt::format("unknown op '{}' (ops: {})", op, names)};
  }
  OpDesc d;
  d.op = op;
  for (const auto& in : sig->inputs) {
    auto it = tensors.find(in.name);
    if (it == tensors.end()) {
      if (in.optional) continue;
      return Error{fmt::format("{}: missing input tensor '{}' ({})", op, in.name, dtypeName(in.dtype))};
    }
    if (it->second.dtype != in.dtype)
      return Error{fmt::format("{}: tensor '{}' has dtype {}, expected {}", op, in.name,
                               dtypeName(it->second.dtype), dtypeName(in.dtype))};
    if (it->second.bytes.size() != size_t(it->second.numel()) * dtypeSize(it->second.dtype))
      return Error{fmt::format("{}: tensor '{}' holds {} bytes but its shape {} needs {}", op, in.name,
                               it->second.bytes.size(), it->second.shapeString(),
                               it->second.numel() * dtypeSize(it->second.dtype))};
    d.shapes[in.name] = it->second.shape;
  }
  auto full = completeAttrs(*sig, attrs);
  if (!full.ok()) return full.error();
  d.attrs = *full;
  const KernelFamily* fam = findKernelFamily(op);
  if (!fam) return Error{fmt::format("no kernel family for '{}'", op)};
  DI_TRY(fam->validate(d));
  return d;
}

Result<GpuRunInfo> runOpOnGpu(Jit& jit, const std::string& op, const OpAttrs& attrs, const TargetProfile& target,
                              TensorMap& tensors, const GpuRunOptions& opts) {
  auto d = describeOp(op, attrs, tensors);
  if (!d.ok()) return d.error();
  auto k = jit.get(*d, target, opts.config);
  if (!k.ok()) return k.error();
  const KernelFamily* fam = findKernelFamily(op);
  const OpSignature* sig = findOpSignature(op);
  DI_TRY(jit.device().use());

  std::map<std::string, DeviceBuffer> bufs;
  DeviceAddrMap addrs;
  for (const auto& in : sig->inputs) {
    auto it = tensors.find(in.name);
    if (it == tensors.end()) continue;
    auto b = DeviceBuffer::alloc(it->second.bytes.size());
    if (!b.ok()) return b.error();
    DI_TRY(b->upload(it->second.bytes.data(), it->second.bytes.size()));
    addrs[in.name] = b->addr();
    bufs[in.name] = std::move(b.value());
  }
  OutputSpec outs = fam->outputs(*d);
  for (const auto& [name, spec] : outs) {
    if (bufs.count(name)) continue;  // in/out: already uploaded with the caller's contents
    HostTensor shapeOnly;
    shapeOnly.dtype = spec.first;
    shapeOnly.shape = spec.second;
    auto b = DeviceBuffer::alloc(size_t(shapeOnly.numel()) * dtypeSize(spec.first));
    if (!b.ok()) return b.error();
    DI_TRY(b->fill(opts.poisonByte));
    addrs[name] = b->addr();
    bufs[name] = std::move(b.value());
  }
  if (k.value()->kernel.workspaceBytes > 0) {
    auto b = DeviceBuffer::alloc(size_t(k.value()->kernel.workspaceBytes));
    if (!b.ok()) return b.error();
    DI_TRY(b->fill(opts.poisonByte));
    addrs["__workspace"] = b->addr();
    bufs["__workspace"] = std::move(b.value());
  }
  DI_TRY(jit.launch(**k, addrs, nullptr));
  DI_TRY(jit.device().synchronize());
  for (const auto& [name, spec] : outs) {
    HostTensor t(spec.first, spec.second);
    DI_TRY(bufs.at(name).download(t.bytes.data(), t.bytes.size()));
    tensors[name] = std::move(t);
  }
  return GpuRunInfo{k.value()};
}

}  // namespace deepinfer
