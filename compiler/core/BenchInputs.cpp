#include "deepinfer/BenchInputs.h"

#include <fmt/format.h>

#include "deepinfer/OpSignature.h"

namespace deepinfer {

int64_t BenchParams::get(const std::string& name, int64_t dflt) {
  read_.insert(name);
  auto it = given_.find(name);
  return it == given_.end() ? dflt : it->second;
}

Status BenchParams::require(bool cond, const std::string& what) const {
  if (cond) return {};
  return Error{fmt::format("{}: {}", where_, what)};
}

Status BenchParams::finish() const {
  for (const auto& [name, v] : given_)
    if (!read_.count(name)) return Error{fmt::format("{}: unknown benchmark parameter '{}'", where_, name)};
  return {};
}

Result<OpDesc> benchDesc(const KernelFamily& family, const BenchInputs& in) {
  const OpSignature* sig = findOpSignature(family.opName());
  if (!sig) return Error{fmt::format("no signature for op '{}'", family.opName())};
  auto attrs = completeAttrs(*sig, in.attrs);
  if (!attrs.ok()) return attrs.error();
  OpDesc d;
  d.op = family.opName();
  d.attrs = *attrs;
  for (const auto& [name, t] : in.inputs) d.shapes[name] = t.shape;
  DI_TRY(family.validate(d));
  return d;
}

Result<double> denseBytes(const KernelFamily& family, const BenchInputs& in) {
  auto d = benchDesc(family, in);
  if (!d.ok()) return d.error();
  double b = 0;
  for (const auto& [name, t] : in.inputs) b += double(t.bytes.size());
  for (const auto& [name, spec] : family.outputs(*d)) {
    int64_t n = 1;
    for (int64_t x : spec.second) n *= x;
    b += double(n) * double(dtypeSize(spec.first));
  }
  return b;
}

Result<double> outputElementsPerRow(const KernelFamily& family, const BenchInputs& in) {
  auto d = benchDesc(family, in);
  if (!d.ok()) return d.error();
  double e = 0;
  for (const auto& [name, spec] : family.outputs(*d)) {
    int64_t n = 1;
    for (size_t i = 1; i < spec.second.size(); ++i) n *= spec.second[i];
    e += double(n);
  }
  return e;
}

}  // namespace deepinfer

namespace deepinfer {

Result<BenchInputs> KernelFamily::benchInputs(BenchInputContext& ctx) const {
  return Error{fmt::format("{}: the kernel family of '{}' gives no benchmark inputs", ctx.params.where(), opName())};
}

}  // namespace deepinfer
