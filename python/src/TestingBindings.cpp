// deepinfer.testing's core: the op cases of the C++ GPU tests (tests/cases: seeded random inputs
// of every op, edge sizes included, in/out tensors poisoned) and their comparison rules (spec
// tolerances, bit-exact where the spec says so), so Python tests compare kernels with the
// reference exactly as the C++ GPU suite does. Arrays are CPU DLPack arrays; BF16 travels as
// uint16 bit patterns.
#include <fmt/format.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "Bindings.h"
#include "cases/OpCases.h"

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

nb::dict compare(const std::string& op, const std::string& output, nb::handle expected, nb::handle actual,
                 const nb::dict& attrs, const nb::dict& inputs) {
  const HostTensor want = hostTensorFromArray(op, output, expected);
  const HostTensor got = hostTensorFromArray(op, output, actual);
  const TensorMap in = tensorsFromDict(op, inputs);
  const OpAttrs a = attrsFromDict(op, attrs);
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
  TensorMap m = take(testing::expectedFromKernelOutputs(op, attrsFromDict(op, attrs), tensorsFromDict(op, inputs),
                                                        tensorsFromDict(op, actual)));
  nb::dict d;
  for (auto& [name, t] : m) d[nb::str(name.c_str(), name.size())] = hostTensorToArray(std::move(t));
  return d;
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
}

}  // namespace deepinfer::py
