// Every `di` op on the caller's tensors: op_signatures() (what deepinfer.ops generates its
// functions from) and run_op(), which runs the generated kernel on CUDA tensors, in place on the
// caller's stream, or the C++ reference on CPU tensors.
#include <fmt/format.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "GpuContext.h"
#include "Tensors.h"
#include "deepinfer/KernelFamily.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/ViewLaunch.h"

namespace deepinfer::py {
namespace {

nb::list signatures() {
  nb::list out;
  auto tensors = [](const std::vector<TensorSig>& v) {
    nb::list l;
    for (const auto& t : v)
      l.append(nb::make_tuple(t.name, std::string(dtypeName(t.dtype)), t.optional, t.inOut));
    return l;
  };
  for (const auto& s : opSignatures()) {
    nb::list attrs;
    for (const auto& a : s.attrs) {
      const bool isInt = a.kind == AttrKind::Int, isString = a.kind == AttrKind::String;
      nb::object dflt = a.required ? nb::none()
                        : isString ? nb::cast(a.dfltText)
                        : isInt    ? nb::cast(int64_t(a.dflt))
                                   : nb::cast(a.dflt);
      attrs.append(nb::make_tuple(a.name, isInt ? "int" : isString ? "str" : "float", a.required, dflt));
    }
    nb::dict d;
    d["op"] = s.op;
    d["inputs"] = tensors(s.inputs);
    d["outputs"] = tensors(s.outputs);
    d["attrs"] = attrs;
    out.append(d);
  }
  return out;
}

const TensorSig* findTensorSig(const OpSignature& sig, const std::string& name) {
  for (const auto& t : sig.inputs)
    if (t.name == name) return &t;
  for (const auto& t : sig.outputs)
    if (t.name == name) return &t;
  return nullptr;
}

bool isWritten(const OpSignature& sig, const std::string& name) {
  for (const auto& t : sig.outputs)
    if (t.name == name) return true;
  return false;
}

std::string tensorNames(const OpSignature& sig) {
  std::string s;
  for (const auto* list : {&sig.inputs, &sig.outputs})
    for (const auto& t : *list)
      if (s.find("'" + t.name + "'") == std::string::npos) s += (s.empty() ? "'" : ", '") + t.name + "'";
  return s;
}

// All tensors of one call on one device; the error names a tensor on each side.
void checkOneDevice(const std::string& op, const std::map<std::string, ImportedTensor>& t) {
  const std::string* firstName = nullptr;
  const ImportedTensor* first = nullptr;
  for (const auto& [name, it] : t) {
    if (!first) {
      firstName = &name;
      first = &it;
      continue;
    }
    if (it.deviceType != first->deviceType || it.deviceId != first->deviceId)
      throw DiError(fmt::format("{}: tensor '{}' is on {} but tensor '{}' is on {}; all tensors of one call must be "
                                "on one device",
                                op, name, it.deviceName(), *firstName, first->deviceName()));
  }
}

KernelConfig configFor(const OpDesc& d, const TargetProfile& t, const nb::dict& knobs) {
  const KernelFamily* fam = findKernelFamily(d.op);
  KernelConfig c = fam->defaultConfig(d, t);
  for (const auto& [k, v] : intMapFromDict("config", knobs)) {
    if (!c.count(k)) {
      std::string known;
      for (const auto& [kk, vv] : c) known += (known.empty() ? "" : ", ") + kk;
      throw DiError(fmt::format("{}: config has no knob '{}' (knobs: {})", d.op, k, known));
    }
    c[k] = v;
  }
  return c;
}

nb::dict runOp(const std::string& op, const nb::dict& tensors, const nb::dict& attrs, const nb::callable& alloc,
               uintptr_t stream, const std::string& target, const nb::dict& config) {
  requireOp(op);
  const OpSignature* sig = findOpSignature(op);
  std::map<std::string, ImportedTensor> imported;
  // Output-only tensors the caller passed: their dtype may depend on attributes (an epilogue's
  // bf16 output), so they are imported once the description is known.
  std::vector<std::pair<std::string, nb::handle>> givenOutputs;
  auto isInput = [&](const std::string& n) {
    for (const TensorSig& t : sig->inputs)
      if (t.name == n) return true;
    return false;
  };
  for (auto [key, value] : tensors) {
    const std::string name = nb::cast<std::string>(key);
    const TensorSig* ts = findTensorSig(*sig, name);
    if (!ts) throw DiError(fmt::format("{}: the op has no tensor '{}' (tensors: {})", op, name, tensorNames(*sig)));
    if (!isInput(name)) {
      givenOutputs.emplace_back(name, value);
      continue;
    }
    imported.emplace(name, importTensor(op, name, value, ts->dtype, isWritten(*sig, name)));
  }
  const OpAttrs a = attrsFromDict(op, attrs);
  TensorViewMap views;
  for (const auto& [name, t] : imported) views[name] = t.view;
  const OpDesc d = take(describeOp(op, a, views));
  const OutputSpec outSpecs = findKernelFamily(op)->outputs(d);
  for (const auto& [name, value] : givenOutputs) {
    const DType want = outSpecs.count(name) ? outSpecs.at(name).first : findTensorSig(*sig, name)->dtype;
    ImportedTensor t = importTensor(op, name, value, want, true);
    views[name] = t.view;
    imported.emplace(name, std::move(t));
  }
  checkOneDevice(op, imported);

  // Outputs the caller did not pass: allocated by the caller's framework (the `alloc` callback).
  nb::list allocated;
  for (const auto& [name, spec] : outSpecs) {
    if (imported.count(name)) continue;
    nb::object cap = alloc(name, std::string(dtypeName(spec.first)), nb::cast(spec.second));
    ImportedTensor t = importTensor(op, name, cap, spec.first, true);
    if (!imported.empty()) {
      const ImportedTensor& any = imported.begin()->second;
      if (t.deviceType != any.deviceType || t.deviceId != any.deviceId)
        throw DiError(fmt::format("{}: output '{}' was allocated on {}, the inputs are on {}", op, name,
                                  t.deviceName(), any.deviceName()));
    }
    views[name] = t.view;
    imported.emplace(name, std::move(t));
    allocated.append(name);
  }

  nb::dict info;
  info["allocated"] = allocated;
  const ImportedTensor& first = imported.begin()->second;
  if (first.deviceType == kDlCpu) {
    if (!target.empty() || nb::len(config) > 0)
      throw DiError(fmt::format("{}: target= and config= choose a generated kernel; CPU tensors run the C++ "
                                "reference (move the tensors to a CUDA device to run the kernel)", op));
    Status s;
    {
      nb::gil_scoped_release nogil;
      s = runReferenceOnHostViews(d, views);
    }
    check(s);
    info["backend"] = "reference";
    return info;
  }

  GpuContext* ctx = take(gpuContext(first.deviceId));
  const TargetProfile t = take(launchTarget(*ctx->dev, target));
  std::optional<KernelConfig> cfg;
  if (nb::len(config) > 0) cfg = configFor(d, t, config);
  std::shared_ptr<const LoadedKernel> k;
  Status s;
  {
    nb::gil_scoped_release nogil;
    s = ctx->dev->use();
    if (s.ok()) {
      auto got = ctx->jit->get(d, t, cfg);
      if (!got.ok()) s = got.error();
      else k = *got;
    }
    // Scratch in the launch's stream order: freed behind the kernel, never shared across streams.
    StreamBuffer ws;
    if (s.ok() && k->kernel.workspaceBytes > 0) {
      auto b = StreamBuffer::alloc(size_t(k->kernel.workspaceBytes), reinterpret_cast<void*>(stream));
      if (!b.ok()) s = b.error();
      else ws = std::move(b.value());
    }
    if (s.ok() && ws.size() > 0) views["__workspace"] = TensorView::contiguous(ws.addr(), DType::U8, {int64_t(ws.size())});
    StreamBuffer zeroed;  // zero on entry, left zero by the kernel
    if (s.ok() && k->kernel.zeroedBytes > 0) {
      auto b = StreamBuffer::alloc(size_t(k->kernel.zeroedBytes), reinterpret_cast<void*>(stream));
      if (!b.ok()) s = b.error();
      else zeroed = std::move(b.value());
      if (s.ok()) s = zeroed.zero();
    }
    if (s.ok() && zeroed.size() > 0)
      views["__zeroed"] = TensorView::contiguous(zeroed.addr(), DType::U8, {int64_t(zeroed.size())});
    if (s.ok()) s = launchViews(*ctx->jit, *k, views, reinterpret_cast<void*>(stream));
  }
  check(s);
  info["backend"] = "cuda";
  info["kernel"] = k->kernel.baseName;
  info["target"] = t.name;
  info["arch"] = t.archName();
  info["config"] = configToString(k->config.config);
  info["ptx"] = k->fromPtx;
  return info;
}

}  // namespace

void bindOps(nb::module_& m) {
  m.def("op_signatures", &signatures,
        "Every kernel op's tensors (name, dtype, optional, in/out) and attributes (name, kind, required, default).");
  m.def("run_op", &runOp, nb::arg("op"), nb::arg("tensors"), nb::arg("attrs"), nb::arg("alloc"), nb::arg("stream"),
        nb::arg("target"), nb::arg("config"),
        "Runs `op` on DLPack tensors by canonical name: the generated kernel on `stream` for CUDA tensors, the C++ "
        "reference for CPU tensors. Missing outputs come from alloc(name, dtype, shape) -> capsule. Returns what ran.");
}

}  // namespace deepinfer::py
