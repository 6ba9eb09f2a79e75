#include "deepinfer/OpRunner.h"

#include <fmt/format.h>

#include <cstring>
#include <optional>

#include "deepinfer/Reference.h"
#include "deepinfer/ViewLaunch.h"

namespace deepinfer {

namespace {

struct TensorMeta {
  DType dtype;
  std::vector<int64_t> shape;
};

// The shared part of describeOp: presence and dtype of every input, attributes, the family's
// validation. `meta(name)` gives a tensor's dtype and shape (nullopt: not given).
template <class Lookup>
Result<OpDesc> describeFrom(const std::string& op, const OpAttrs& attrs, Lookup meta) {
  const OpSignature* sig = findOpSignature(op);
  if (!sig) {
    std::string names;
    for (const auto& s : opSignatures()) names += (names.empty() ? "" : ", ") + s.op;
    return Error{fmt::format("unknown op '{}' (ops: {})", op, names)};
  }
  OpDesc d;
  d.op = op;
  for (const auto& in : sig->inputs) {
    Result<std::optional<TensorMeta>> m = meta(in.name);
    if (!m.ok()) return m.error();
    if (!m->has_value()) {
      if (in.optional) continue;
      return Error{fmt::format("{}: missing input tensor '{}' ({})", op, in.name, dtypeName(in.dtype))};
    }
    if ((*m)->dtype != in.dtype)
      return Error{fmt::format("{}: tensor '{}' has dtype {}, expected {}", op, in.name, dtypeName((*m)->dtype),
                               dtypeName(in.dtype))};
    d.shapes[in.name] = (*m)->shape;
  }
  auto full = completeAttrs(*sig, attrs);
  if (!full.ok()) return full.error();
  d.attrs = *full;
  const KernelFamily* fam = findKernelFamily(op);
  if (!fam) return Error{fmt::format("no kernel family for '{}'", op)};
  DI_TRY(fam->validate(d));
  return d;
}

// Element i of a view in row-major order, as a byte address.
uint64_t elementAddr(const TensorView& v, int64_t flat) {
  uint64_t off = 0;
  for (size_t k = v.rank(); k-- > 0;) {
    const int64_t idx = flat % v.shape[k];
    flat /= v.shape[k];
    off += uint64_t(idx * v.strides[k]);
  }
  return v.addr + off * v.elementSize();
}

// Host view <-> dense bytes, element by element (views of the reference backend are small).
void copyFromView(const TensorView& v, uint8_t* dense) {
  const size_t es = v.elementSize();
  if (v.numel() == 0) return;
  if (v.isContiguous()) return void(std::memcpy(dense, reinterpret_cast<const void*>(v.addr), size_t(v.numel()) * es));
  for (int64_t i = 0; i < v.numel(); ++i)
    std::memcpy(dense + size_t(i) * es, reinterpret_cast<const void*>(elementAddr(v, i)), es);
}

void copyToView(const uint8_t* dense, const TensorView& v) {
  const size_t es = v.elementSize();
  if (v.numel() == 0) return;
  if (v.isContiguous()) return void(std::memcpy(reinterpret_cast<void*>(v.addr), dense, size_t(v.numel()) * es));
  for (int64_t i = 0; i < v.numel(); ++i)
    std::memcpy(reinterpret_cast<void*>(elementAddr(v, i)), dense + size_t(i) * es, es);
}

}  // namespace

Result<OpDesc> describeOp(const std::string& op, const OpAttrs& attrs, const TensorMap& tensors) {
  return describeFrom(op, attrs, [&](const std::string& name) -> Result<std::optional<TensorMeta>> {
    auto it = tensors.find(name);
    if (it == tensors.end()) return std::optional<TensorMeta>();
    const HostTensor& t = it->second;
    if (t.bytes.size() != size_t(t.numel()) * dtypeSize(t.dtype))
      return Error{fmt::format("{}: tensor '{}' holds {} bytes but its shape {} needs {}", op, name, t.bytes.size(),
                               t.shapeString(), t.numel() * dtypeSize(t.dtype))};
    return std::optional<TensorMeta>(TensorMeta{t.dtype, t.shape});
  });
}

Result<OpDesc> describeOp(const std::string& op, const OpAttrs& attrs, const TensorViewMap& views) {
  return describeFrom(op, attrs, [&](const std::string& name) -> Result<std::optional<TensorMeta>> {
    auto it = views.find(name);
    if (it == views.end()) return std::optional<TensorMeta>();
    return std::optional<TensorMeta>(TensorMeta{it->second.dtype, it->second.shape});
  });
}

Status runReferenceOnHostViews(const OpDesc& d, const TensorViewMap& hostViews) {
  DI_TRY(bindViews(d, hostViews));
  const OpSignature* sig = findOpSignature(d.op);
  TensorMap io;
  for (const auto& in : sig->inputs) {
    auto it = hostViews.find(in.name);
    if (it == hostViews.end()) continue;
    HostTensor t(it->second.dtype, it->second.shape);
    copyFromView(it->second, t.bytes.data());
    io[in.name] = std::move(t);
  }
  DI_TRY(runReference(d.op, d.attrs, io));
  for (const auto& [name, spec] : findKernelFamily(d.op)->outputs(d)) {
    const HostTensor& t = io.at(name);
    const TensorView& v = hostViews.at(name);
    if (t.dtype != v.dtype || t.shape != v.shape)
      return Error{fmt::format("{}: the reference produced '{}' as {}{}, the view is {}", d.op, name,
                               dtypeName(t.dtype), t.shapeString(), v.toString())};
  }
  for (const auto& [name, spec] : findKernelFamily(d.op)->outputs(d))
    copyToView(io.at(name).bytes.data(), hostViews.at(name));
  return {};
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
  const int64_t zeroed = k.value()->kernel.zeroedBytes;
  if (zeroed > 0) {
    auto b = DeviceBuffer::alloc(size_t(zeroed));
    if (!b.ok()) return b.error();
    DI_TRY(b->fill(0));
    addrs["__zeroed"] = b->addr();
    bufs["__zeroed"] = std::move(b.value());
  }
  // The uploads and fills above are ordered with the legacy stream only; a real stream (not
  // synchronized with it) starts after them.
  if (opts.stream) DI_TRY(jit.device().synchronize());
  DI_TRY(jit.launch(**k, addrs, opts.stream));
  DI_TRY(jit.device().synchronize());
  if (zeroed > 0) {  // the kernel's contract: the region is left as it was found
    std::vector<uint8_t> z(size_t(zeroed), 0xFF);
    DI_TRY(bufs.at("__zeroed").download(z.data(), z.size()));
    for (size_t i = 0; i < z.size(); ++i)
      if (z[i] != 0)
        return Error{fmt::format("{}: byte {} of its zeroed workspace is {:#04x} after the launch; the kernel must "
                                 "leave it zero", k.value()->kernel.baseName, i, z[i])};
  }
  for (const auto& [name, spec] : outs) {
    HostTensor t(spec.first, spec.second);
    DI_TRY(bufs.at(name).download(t.bytes.data(), t.bytes.size()));
    tensors[name] = std::move(t);
  }
  return GpuRunInfo{k.value()};
}

}  // namespace deepinfer
