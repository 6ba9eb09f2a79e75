#include "BenchCheck.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>

#include "cases/CompareOutputs.h"
#include "deepinfer/Reference.h"

namespace deepinfer::bench {

std::vector<int64_t> spreadRows(int64_t total, int64_t count) {
  std::vector<int64_t> rows;
  if (total <= 0 || count <= 0) return rows;
  if (count >= total) {
    for (int64_t r = 0; r < total; ++r) rows.push_back(r);
  } else if (count == 1) {
    rows.push_back(0);
  } else {
    // Strictly increasing: the step (total - 1) / (count - 1) is > 1 here.
    for (int64_t i = 0; i < count; ++i) rows.push_back(i * (total - 1) / (count - 1));
  }
  return rows;
}

size_t rowBytes(DType dtype, const std::vector<int64_t>& shape) {
  size_t n = dtypeSize(dtype);
  for (size_t i = 1; i < shape.size(); ++i) n *= size_t(shape[i]);
  return n;
}

HostTensor selectRows(const HostTensor& t, const std::vector<int64_t>& rows) {
  std::vector<int64_t> shape = t.shape;
  shape.at(0) = int64_t(rows.size());
  HostTensor out(t.dtype, shape);
  const size_t rb = rowBytes(t.dtype, t.shape);
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(out.bytes.data() + i * rb, t.bytes.data() + size_t(rows[i]) * rb, rb);
  return out;
}

Result<Expected> computeExpected(const BenchCase& c) {
  const auto start = std::chrono::steady_clock::now();
  Expected e;
  e.tensors = c.inputs;
  if (c.check.kind == CheckPlan::Kind::Rows) {
    const std::string& first = c.check.rowInputs.at(0);
    e.rows = spreadRows(c.inputs.at(first).dim(0), c.check.rows);
    for (const std::string& name : c.check.rowInputs) e.tensors[name] = selectRows(c.inputs.at(name), e.rows);
  }
  Status s = runReference(c.spec.op, c.attrs, e.tensors);
  if (!s.ok())
    return Error{fmt::format("{} [{}]: the C++ reference rejected the benchmark inputs: {}", c.spec.op,
                             c.spec.shape, s.error().message)};
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return e;
}

CheckResult compareWithExpected(const BenchCase& c, const Expected& exp, const TensorMap& actual) {
  CheckResult r;
  r.checked = true;
  r.ok = true;
  r.note = exp.rows.empty() ? "all rows" : c.check.note;
  // Outputs defined on another output of the kernel (mhc_fused_post_pre's next-sublayer outputs
  // are mhc_pre of the op's own bf16 residual) are expected from that output. exp.tensors holds
  // the inputs of the compared rows (its in/out `post`/`comb` are not read here).
  auto fromKernel = testing::expectedFromKernelOutputs(c.spec.op, c.attrs, exp.tensors, actual);
  for (const std::string& name : testing::outputNames(c.spec.op)) {
    OutputCheck oc;
    oc.output = name;
    auto e = exp.tensors.find(name);
    auto a = actual.find(name);
    if (!fromKernel.ok()) {
      oc.detail = fromKernel.error().message;
    } else if (e == exp.tensors.end() || a == actual.end()) {
      oc.detail = fmt::format("output '{}' missing from the {}", name, e == exp.tensors.end() ? "reference" : "kernel");
    } else {
      const HostTensor& want = fromKernel->count(name) ? fromKernel->at(name) : e->second;
      const auto rep = testing::compareOutputs(c.spec.op, name, want, a->second, c.attrs, exp.tensors);
      oc.ok = rep.ok;
      oc.maxErr = rep.maxErr;
      oc.metric = rep.metric;
      oc.detail = rep.detail;
    }
    r.ok = r.ok && oc.ok;
    r.outputs.push_back(std::move(oc));
  }
  return r;
}

}  // namespace deepinfer::bench
