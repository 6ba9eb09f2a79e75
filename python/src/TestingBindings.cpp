// deepinfer.testing's core: the op cases of the C++ GPU tests (tests/cases: seeded random inputs
// of every op, edge sizes included, in/out tensors poisoned) and their comparison rules (spec
// tolerances, bit-exact where the spec says so), so Python tests compare kernels with the
// reference exactly as the C++ GPU suite does. Arrays are CPU DLPack arrays; BF16 travels as
// uint16 bit patterns.
#include <fmt/format.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <nanobind/ndarray.h>

#include "Bindings.h"
#include "Tensors.h"
#include "cases/OpCases.h"
#include "deepinfer/KernelFamily.h"
#include "deepinfer/OpRunner.h"
#include "deepinfer/Reference.h"

namespace deepinfer::py {
namespace {

nb::dict attrsToDict(const OpAttrs& a) {
  nb::dict d;
  for (const auto& [k, v] : a.all()) d[nb::str(k.c_str(), k.size())] = v.isInt ? nb::cast(v.i) : nb::cast(v.f);
  return d;
}

TensorMap tensorsFromDict(const std::string& op, const nb::dict& d) {
  TensorMap m;
  for (auto [key, value] : d) {
    const std::string name = nb::cast<std::string>(key);
    m[name] = hostTensorFromArray(op, name, value);
  }
  return m;
}

nb::list cases(const std::string& op, uint64_t seed, bool large) {
  std::vector<testing::OpCase> cs;
  {
    nb::gil_scoped_release nogil;
    cs = testing::casesFor(op, seed, large);
  }
  nb::list out;
  for (auto& c : cs) {
    nb::dict d, inputs, dtypes;
    d["name"] = c.name;
    d["op"] = c.op;
    d["attrs"] = attrsToDict(c.attrs);
    for (auto& [name, t] : c.inputs) {
      dtypes[nb::str(name.c_str(), name.size())] = dtypeName(t.dtype);
      inputs[nb::str(name.c_str(), name.size())] = hostTensorToArray(std::move(t));
    }
    d["inputs"] = inputs;
    d["dtypes"] = dtypes;
    out.append(d);
  }
  return out;
}

// The dtype of output `name` for these attributes and inputs: the family's (an epilogue may pick
// bf16), else the signature's.
DType outputDType(const std::string& op, const OpAttrs& a, const TensorMap& in, const std::string& name) {
  const OpDesc d = take(describeOp(op, a, in));
  const OutputSpec specs = findKernelFamily(op)->outputs(d);
  if (auto it = specs.find(name); it != specs.end()) return it->second.first;
  if (const OpSignature* sig = findOpSignature(op))
    for (const auto* list : {&sig->inputs, &sig->outputs})
      for (const TensorSig& t : *list)
        if (t.name == name) return t.dtype;
  throw DiError(fmt::format("{}: no tensor '{}'", op, name));
}

nb::dict compare(const std::string& op, const std::string& output, nb::handle expected, nb::handle actual,
                 const nb::dict& attrs, const nb::dict& inputs) {
  const TensorMap in = tensorsFromDict(op, inputs);
  const OpAttrs a = attrsFromDict(op, attrs);
  const DType dt = outputDType(op, a, in, output);
  const HostTensor want = hostTensorFromArray(op, output, expected, dt);
  const HostTensor got = hostTensorFromArray(op, output, actual, dt);
  const testing::CompareReport r = testing::compareOutputs(op, output, want, got, a, in);
  nb::dict d;
  d["ok"] = r.ok;
  d["max_err"] = r.maxErr;
  d["metric"] = r.metric;
  d["detail"] = r.detail;
  return d;
}

nb::dict expectedFromKernel(const std::string& op, const nb::dict& attrs, const nb::dict& inputs,
                            const nb::dict& actual) {
  const OpAttrs a = attrsFromDict(op, attrs);
  const TensorMap in = tensorsFromDict(op, inputs);
  TensorMap got;
  for (auto [key, value] : actual) {
    const std::string name = nb::cast<std::string>(key);
    got[name] = hostTensorFromArray(op, name, value, outputDType(op, a, in, name));
  }
  TensorMap m = take(testing::expectedFromKernelOutputs(op, a, in, got));
  nb::dict d;
  for (auto& [name, t] : m) d[nb::str(name.c_str(), name.size())] = hostTensorToArray(std::move(t));
  return d;
}

// runReference on dense host tensors (the TensorMap path of run-op), for comparing the package's
// own paths (views of the caller's arrays, kernels) with.
nb::dict reference(const std::string& op, const nb::dict& attrs, const nb::dict& inputs) {
  TensorMap m = tensorsFromDict(op, inputs);
  const OpAttrs a = attrsFromDict(op, attrs);
  Status s;
  {
    nb::gil_scoped_release nogil;
    s = runReference(op, a, m);
  }
  check(s);
  nb::dict d;
  for (const auto& name : testing::outputNames(op)) d[nb::str(name.c_str(), name.size())] = hostTensorToArray(m.at(name));
  return d;
}

// A DLPack array that only describes memory on a CUDA device (nothing reads or writes it): for
// error paths that must not need a GPU.
nb::object deviceView(uint64_t addr, const std::string& dtype, const std::vector<int64_t>& shape, int deviceId) {
  DType t;
  if (!parseDType(dtype, &t)) throw DiError(fmt::format("unknown dtype '{}'", dtype));
  static const std::map<DType, nb::dlpack::dtype> kDtypes = {
      {DType::BF16, {uint8_t(nb::dlpack::dtype_code::Bfloat), 16, 1}}, {DType::F32, nb::dtype<float>()},
      {DType::I32, nb::dtype<int32_t>()}, {DType::I64, nb::dtype<int64_t>()}, {DType::U8, nb::dtype<uint8_t>()}};
  static int anchor = 0;  // an owner that frees nothing: the memory is only described
  nb::capsule owner(&anchor, [](void*) noexcept {});
  return exportArray(reinterpret_cast<void*>(addr), shape, owner, kDtypes.at(t), 2, deviceId);
}

}  // namespace

void bindTesting(nb::module_& m) {
  nb::module_ t = m.def_submodule("testing", "Op cases and comparison rules of the C++ GPU tests.");
  t.def("cases", &cases, nb::arg("op"), nb::arg("seed"), nb::arg("large") = false);
  t.def("compare", &compare, nb::arg("op"), nb::arg("output"), nb::arg("expected"), nb::arg("actual"),
        nb::arg("attrs"), nb::arg("inputs"));
  t.def("expected_from_kernel_outputs", &expectedFromKernel, nb::arg("op"), nb::arg("attrs"), nb::arg("inputs"),
        nb::arg("actual"));
  t.def("output_names", &testing::outputNames, nb::arg("op"));
  t.def("reference", &reference, nb::arg("op"), nb::arg("attrs"), nb::arg("inputs"));
  t.def("device_view", &deviceView, nb::arg("addr"), nb::arg("dtype"), nb::arg("shape"), nb::arg("device_id") = 0);
}

}  // namespace deepinfer::py
